//! In-flight leases: a slot held by a request, returned on release, at request end, or when
//! its expiry passes (the holder was killed). A lease is named by 128 random bits.

use std::fmt;

/// The random name of one lease.
#[derive(Clone, Copy, PartialEq, Eq, Hash)]
pub struct LeaseId(pub [u8; 16]);

impl LeaseId {
    /// A lease written as 32 lowercase hexadecimal characters; anything else is refused.
    pub fn parse(text: &[u8]) -> Option<Self> {
        if text.len() != 32 {
            return None;
        }
        let nibble = |c: u8| match c {
            b'0'..=b'9' => Some(c - b'0'),
            b'a'..=b'f' => Some(c - b'a' + 10),
            _ => None,
        };
        let mut id = [0u8; 16];
        for (i, pair) in text.chunks_exact(2).enumerate() {
            id[i] = nibble(pair[0])? << 4 | nibble(pair[1])?;
        }
        Some(Self(id))
    }
}

impl fmt::Display for LeaseId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        self.0.iter().try_for_each(|b| write!(f, "{b:02x}"))
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

    #[test]
    fn lease_round_trips_through_hex() {
        let id = LeaseId([0xab; 16]);
        let text = id.to_string();
        assert_eq!(text, "abababababababababababababababab");
        assert_eq!(LeaseId::parse(text.as_bytes()), Some(id));
    }

    #[test]
    fn lease_refuses_other_strings() {
        assert_eq!(LeaseId::parse(b""), None);
        assert_eq!(LeaseId::parse(b"ABABABABABABABABABABABABABABABAB"), None);
        assert_eq!(LeaseId::parse(b"abababababababababababababababa"), None);
        assert_eq!(LeaseId::parse(b"abababababababababababababababab0"), None);
        assert_eq!(LeaseId::parse(b"ababababababababababababababab g"), None);
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
