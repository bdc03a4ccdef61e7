//! The `ratelimit.*` php.ini directives: names, defaults, and parsing. A value that does not
//! parse is refused (the PHP glue warns, naming the directive) and the previous value stays.

use super::bucket::{Policy, MAX_LIMIT};
use std::path::PathBuf;

/// Every directive with its default, in the order phpinfo() shows them.
pub const DIRECTIVES: [(&str, &str); 10] = [
    ("ratelimit.db_path", ""),
    ("ratelimit.key_file", ""),
    ("ratelimit.limit", "60"),
    ("ratelimit.per", "60"),
    ("ratelimit.inflight", "0"),
    ("ratelimit.lease_ttl", "60"),
    ("ratelimit.busy_timeout_ms", "100"),
    ("ratelimit.max_entries", "100000"),
    ("ratelimit.ipv6_prefix", "64"),
    ("ratelimit.fail_open", "0"),
];

/// The file every worker of the host shares when `ratelimit.db_path` is empty, in
/// [`Config::default_dir`].
pub const DEFAULT_DB_NAME: &str = "php-ratelimit.sqlite";

#[derive(Debug, Clone, PartialEq)]
pub struct Config {
    /// Empty: [`DEFAULT_DB_NAME`] in the per-user directory [`Config::default_dir`].
    pub db_path: String,
    /// Empty: `<db_path>.key`, created on first use.
    pub key_file: String,
    pub limit: u64,
    pub per_ms: u64,
    pub inflight: u64,
    pub lease_ttl_ms: u64,
    pub busy_timeout_ms: u64,
    pub max_entries: u64,
    pub ipv6_prefix: u8,
    pub fail_open: bool,
}

impl Default for Config {
    fn default() -> Self {
        let mut c = Self {
            db_path: String::new(),
            key_file: String::new(),
            limit: 0,
            per_ms: 0,
            inflight: 0,
            lease_ttl_ms: 0,
            busy_timeout_ms: 0,
            max_entries: 0,
            ipv6_prefix: 0,
            fail_open: false,
        };
        for (name, value) in DIRECTIVES {
            c.set(name, value).expect("defaults parse");
        }
        c
    }
}

/// A value refused for a directive; the text completes "Invalid value for NAME: ...".
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Invalid(pub &'static str);

fn int_in(value: &str, lo: u64, hi: u64, why: &'static str) -> Result<u64, Invalid> {
    value
        .trim()
        .parse::<u64>()
        .ok()
        .filter(|v| (lo..=hi).contains(v))
        .ok_or(Invalid(why))
}

fn seconds_ms(value: &str, lo_ms: u64, hi_ms: u64, why: &'static str) -> Result<u64, Invalid> {
    let secs: f64 = value.trim().parse().map_err(|_| Invalid(why))?;
    Policy::per_ms_from_seconds(secs)
        .filter(|ms| (lo_ms..=hi_ms).contains(ms))
        .ok_or(Invalid(why))
}

fn boolean(value: &str) -> Result<bool, Invalid> {
    match value.trim().to_ascii_lowercase().as_str() {
        "1" | "on" | "yes" | "true" => Ok(true),
        "" | "0" | "off" | "no" | "false" | "none" => Ok(false),
        _ => Err(Invalid("expected 0 or 1")),
    }
}

impl Config {
    /// Sets one directive from its php.ini text. Unknown names are refused too.
    pub fn set(&mut self, name: &str, value: &str) -> Result<(), Invalid> {
        match name {
            "ratelimit.db_path" => self.db_path = value.to_string(),
            "ratelimit.key_file" => self.key_file = value.to_string(),
            "ratelimit.limit" => {
                self.limit = int_in(value, 1, MAX_LIMIT, "expected an integer from 1 to 10^12")?
            }
            "ratelimit.per" => {
                self.per_ms = seconds_ms(
                    value,
                    1,
                    1_000_000_000_000,
                    "expected seconds from 0.001 to 10^9",
                )?
            }
            "ratelimit.inflight" => {
                self.inflight =
                    int_in(value, 0, 1_000_000, "expected an integer from 0 to 1000000")?
            }
            "ratelimit.lease_ttl" => {
                self.lease_ttl_ms = seconds_ms(
                    value,
                    1,
                    31_536_000_000,
                    "expected seconds from 0.001 to 31536000",
                )?
            }
            "ratelimit.busy_timeout_ms" => {
                self.busy_timeout_ms =
                    int_in(value, 0, 60_000, "expected milliseconds from 0 to 60000")?
            }
            "ratelimit.max_entries" => {
                self.max_entries = int_in(
                    value,
                    1,
                    1_000_000_000,
                    "expected an integer from 1 to 10^9",
                )?
            }
            "ratelimit.ipv6_prefix" => {
                self.ipv6_prefix = int_in(value, 0, 128, "expected an integer from 0 to 128")? as u8
            }
            "ratelimit.fail_open" => self.fail_open = boolean(value)?,
            _ => return Err(Invalid("unknown directive")),
        }
        Ok(())
    }

    /// The per-user directory of the default database and key: `<temp_dir>/php-ratelimit-<euid>`
    /// (mode 0700, created and checked by the caller: this core does no I/O).
    pub fn default_dir(temp_dir: &std::path::Path, euid: u32) -> PathBuf {
        temp_dir.join(format!("php-ratelimit-{euid}"))
    }

    /// The database file, with the default resolved against `temp_dir` and the effective uid.
    pub fn db_path(&self, temp_dir: &std::path::Path, euid: u32) -> PathBuf {
        if self.db_path.is_empty() {
            Self::default_dir(temp_dir, euid).join(DEFAULT_DB_NAME)
        } else {
            PathBuf::from(&self.db_path)
        }
    }

    /// The key file and whether it is the default one (which is created when missing).
    pub fn key_path(&self, temp_dir: &std::path::Path, euid: u32) -> (PathBuf, bool) {
        if self.key_file.is_empty() {
            let mut p = self.db_path(temp_dir, euid).into_os_string();
            p.push(".key");
            (PathBuf::from(p), true)
        } else {
            (PathBuf::from(&self.key_file), false)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::path::Path;

    #[test]
    fn defaults_are_the_documented_ones() {
        let c = Config::default();
        assert_eq!(
            (c.limit, c.per_ms, c.inflight, c.lease_ttl_ms),
            (60, 60_000, 0, 60_000)
        );
        assert_eq!(
            (c.busy_timeout_ms, c.max_entries, c.ipv6_prefix, c.fail_open),
            (100, 100_000, 64, false)
        );
    }

    #[test]
    fn invalid_values_are_refused_and_the_old_value_stays() {
        let mut c = Config::default();
        assert!(c.set("ratelimit.limit", "abc").is_err());
        assert!(c.set("ratelimit.limit", "0").is_err());
        assert!(c.set("ratelimit.per", "0").is_err());
        assert!(c.set("ratelimit.per", "NaN").is_err());
        assert!(c.set("ratelimit.ipv6_prefix", "129").is_err());
        assert!(c.set("ratelimit.fail_open", "maybe").is_err());
        assert_eq!(c, Config::default());
    }

    #[test]
    fn valid_values_are_taken() {
        let mut c = Config::default();
        c.set("ratelimit.per", "0.5").unwrap();
        c.set("ratelimit.lease_ttl", "2").unwrap();
        c.set("ratelimit.fail_open", "On").unwrap();
        assert_eq!((c.per_ms, c.lease_ttl_ms, c.fail_open), (500, 2_000, true));
    }

    #[test]
    fn the_default_database_and_key_sit_in_a_per_user_directory() {
        let mut c = Config::default();
        let tmp = Path::new("/tmp");
        assert_eq!(
            c.db_path(tmp, 33),
            Path::new("/tmp/php-ratelimit-33/php-ratelimit.sqlite")
        );
        assert_eq!(
            c.key_path(tmp, 33),
            (
                PathBuf::from("/tmp/php-ratelimit-33/php-ratelimit.sqlite.key"),
                true
            )
        );
        c.set("ratelimit.db_path", "/var/lib/rl/db").unwrap();
        assert_eq!(c.db_path(tmp, 33), Path::new("/var/lib/rl/db"));
        assert_eq!(
            c.key_path(tmp, 33),
            (PathBuf::from("/var/lib/rl/db.key"), true)
        );
        c.set("ratelimit.key_file", "/etc/rl/key").unwrap();
        assert_eq!(c.key_path(tmp, 33), (PathBuf::from("/etc/rl/key"), false));
    }
}
