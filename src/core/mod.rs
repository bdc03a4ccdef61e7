//! The pure core: bucket arithmetic, lease rules, subject normalisation and pseudonyms,
//! configuration parsing and response headers. No PHP, no I/O, time passed in: everything here
//! is tested by `cargo test --no-default-features`, and a second storage backend reuses it.

pub mod breaker;
pub mod bucket;
pub mod compound;
pub mod config;
pub mod counters;
pub mod decision;
pub mod headers;
pub mod keyswitch;
pub mod lease;
pub mod metrics;
pub mod request;
pub mod subject;
pub mod top;
