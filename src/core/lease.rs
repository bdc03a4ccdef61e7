//! In-flight leases: a slot held by a request, returned on release, at request end, or when
//! its expiry passes (the holder was killed). A lease is named by 128 random bits, and handed
//! to PHP as a [`LeaseToken`] that also says where its bucket lives.

use super::subject::{BucketKey, Pseudonym};
use std::fmt;

/// The random name of one lease.
#[derive(Clone, Copy, PartialEq, Eq, Hash)]
pub struct LeaseId(pub [u8; 16]);

/// 16 bytes from 32 lowercase hexadecimal characters (lease tokens, and the names the Redis
/// module reads back from a request record).
pub fn hex16(text: &[u8]) -> Option<[u8; 16]> {
    if text.len() != 32 {
        return None;
    }
    let nibble = |c: u8| match c {
        b'0'..=b'9' => Some(c - b'0'),
        b'a'..=b'f' => Some(c - b'a' + 10),
        _ => None,
    };
    let mut out = [0u8; 16];
    for (i, pair) in text.chunks_exact(2).enumerate() {
        out[i] = nibble(pair[0])? << 4 | nibble(pair[1])?;
    }
    Some(out)
}

fn write_hex(f: &mut fmt::Formatter<'_>, bytes: &[u8]) -> fmt::Result {
    bytes.iter().try_for_each(|b| write!(f, "{b:02x}"))
}

impl fmt::Display for LeaseId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write_hex(f, &self.0)
    }
}

/// What `RateLimit\Decision::$lease` holds: the lease and the bucket it belongs to, so that
/// any process of any host can release it, in a backend with no lease table of its own (Redis
/// Cluster keeps a bucket's leases beside the bucket, in its group's slot).
///
/// Text form, opaque to users: a version character, then lowercase hex. Version `1`:
/// `1` + lease id (16 bytes) + bucket (16 bytes) + group (16 bytes), 97 characters. A later
/// version may be longer; a parser refuses any version it does not know.
#[derive(Clone, Copy, PartialEq, Eq, Hash)]
pub struct LeaseToken {
    pub id: LeaseId,
    pub key: BucketKey,
}

/// The version this build writes.
const TOKEN_VERSION: u8 = b'1';
/// Length of a version-1 token.
pub const TOKEN_LEN: usize = 1 + 3 * 32;

impl LeaseToken {
    /// A token in its text form; anything else is refused.
    pub fn parse(text: &[u8]) -> Option<Self> {
        if text.len() != TOKEN_LEN || text[0] != TOKEN_VERSION {
            return None;
        }
        let field = |i: usize| hex16(&text[1 + 32 * i..1 + 32 * (i + 1)]);
        let (id, bucket, group): (_, Pseudonym, Pseudonym) = (field(0)?, field(1)?, field(2)?);
        Some(Self {
            id: LeaseId(id),
            key: BucketKey {
                bucket,
                group,
                previous: None,
            },
        })
    }
}

impl fmt::Display for LeaseToken {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}", TOKEN_VERSION as char)?;
        write_hex(f, &self.id.0)?;
        write_hex(f, &self.key.bucket)?;
        write_hex(f, &self.key.group)
    }
}

impl fmt::Debug for LeaseToken {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "LeaseToken({self})")
    }
}

impl fmt::Debug for LeaseId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "LeaseId({self})")
    }
}

/// What the store knows of one subject's live leases at the moment of a decision.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Slots {
    /// Leases whose expiry is still ahead.
    pub live: u64,
    /// The earliest expiry among them, wall-clock ms.
    pub earliest_expiry: Option<i64>,
}

/// A lease is live while its expiry is ahead of `now`.
pub fn is_live(expires: i64, now: i64) -> bool {
    expires > now
}

/// The expiry of a lease taken at `now`.
pub fn expiry(now: i64, ttl_ms: u64) -> i64 {
    now.saturating_add(ttl_ms.min(i64::MAX as u64) as i64)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn token() -> LeaseToken {
        LeaseToken {
            id: LeaseId([0xab; 16]),
            key: BucketKey {
                bucket: [0x01; 16],
                group: [0xfe; 16],
                previous: None,
            },
        }
    }

    #[test]
    fn a_token_round_trips_through_its_text() {
        let text = token().to_string();
        assert_eq!(
            text,
            format!("1{}{}{}", "ab".repeat(16), "01".repeat(16), "fe".repeat(16))
        );
        assert_eq!(text.len(), TOKEN_LEN);
        assert_eq!(LeaseToken::parse(text.as_bytes()), Some(token()));
    }

    #[test]
    fn a_token_refuses_other_strings() {
        let good = token().to_string();
        let refused = [
            String::new(),
            "ab".repeat(16),                   // a bare lease id (32 characters)
            good.to_uppercase(),               // uppercase hex
            format!("2{}", &good[1..]),        // an unknown version
            good[..TOKEN_LEN - 1].to_string(), // one character short
            format!("{good}0"),                // one too many
            format!("{} g", &good[..TOKEN_LEN - 2]), // not hex
        ];
        for text in refused {
            assert_eq!(LeaseToken::parse(text.as_bytes()), None, "{text:?}");
        }
    }

    #[test]
    fn a_lease_dies_at_its_expiry() {
        assert!(is_live(expiry(1_000, 60_000), 60_999));
        assert!(!is_live(expiry(1_000, 60_000), 61_000));
    }

    #[test]
    fn expiry_saturates() {
        assert_eq!(expiry(i64::MAX - 1, u64::MAX), i64::MAX);
    }
}
