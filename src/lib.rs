//! ratelimit: host-wide rate limits for PHP-FPM workers, kept in one shared SQLite file.
//!
//! Layers, from the inside out: [`core`] (pure arithmetic and rules, time passed in),
//! [`storage`] (a [`storage::Store`] trait and its SQLite implementation), [`keyfile`] (the
//! shared HMAC key), [`trust`] (which files are ours to use) and, behind the default `php`
//! feature, the PHP glue.

pub mod core;
pub mod keyfile;
pub mod storage;
pub mod trust;

#[cfg(feature = "php")]
mod php;
