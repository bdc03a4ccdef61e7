//! ratelimit: host-wide rate limits for PHP-FPM workers, kept in one shared SQLite file.
//!
//! Layers, from the inside out: [`core`] (pure arithmetic and rules, time passed in),
//! [`storage`] (the [`storage::Store`] trait, the SQLite and Redis stores, and the layers around
//! them), [`stack`] (which layers a configuration is made of), [`limiter`] (what every backend
//! shares: keys, the policy for faults, the request's leases), [`keyfile`] (the
//! shared HMAC key), [`trust`] (which files are ours to use), [`opslog`] (the operations log)
//! and, behind the default `php` feature, the thin PHP glue.

pub mod core;
pub mod keyfile;
pub mod keyring;
pub mod limiter;
pub mod opslog;
pub mod stack;
pub mod storage;
pub mod trust;

#[cfg(feature = "php")]
mod php;
