//! Subjects (IP addresses, API keys, user ids) become 16-byte pseudonyms before anything is
//! stored: HMAC-SHA256 under the host's key over `scope || 0x00 || subject`, truncated.
//! Addresses are normalised first so that one client cannot spread over many buckets by
//! spelling its address differently or by walking its IPv6 /64.

use hmac::{Hmac, KeyInit, Mac};
use sha2::Sha256;
use std::borrow::Cow;
use std::net::{IpAddr, Ipv6Addr};

/// Shortest key accepted: 256 bits.
pub const MIN_KEY_LEN: usize = 32;
/// Longest subject accepted, in bytes.
pub const MAX_SUBJECT_LEN: usize = 1024;
/// Longest scope accepted.
pub const MAX_SCOPE_LEN: usize = 64;

/// What a bucket is stored under.
pub type Pseudonym = [u8; 16];

/// Where one (scope, subject) lives in a store: its bucket, and the group of every scope of the
/// same subject. A backend that shards (Redis Cluster) keeps a group in one place, so that one
/// script can touch several scopes of a subject, and a lease token can find its bucket.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct BucketKey {
    pub bucket: Pseudonym,
    pub group: Pseudonym,
    /// While a key rotation runs (`ratelimit.key_file_previous`): the bucket's name under the
    /// previous key, from which a store moves it when it is missing under the current one.
    pub previous: Option<Pseudonym>,
}

/// A scope is 1 to 64 characters of `[A-Za-z0-9_.:-]`: it appears in response headers.
pub fn valid_scope(scope: &[u8]) -> bool {
    (1..=MAX_SCOPE_LEN).contains(&scope.len())
        && scope
            .iter()
            .all(|c| c.is_ascii_alphanumeric() || b"_.:-".contains(c))
}

/// A subject that parses whole as an IP address is rewritten canonically: IPv4-mapped IPv6 as
/// dotted IPv4, other IPv6 cut to its first `ipv6_prefix` bits in RFC 5952 form. Anything
/// else is kept byte for byte.
pub fn normalise(subject: &[u8], ipv6_prefix: u8) -> Cow<'_, [u8]> {
    let Some(addr) = std::str::from_utf8(subject)
        .ok()
        .and_then(|s| s.parse::<IpAddr>().ok())
    else {
        return Cow::Borrowed(subject);
    };
    let canonical = match addr {
        IpAddr::V4(v4) => v4.to_string(),
        IpAddr::V6(v6) => match v6.to_ipv4_mapped() {
            Some(v4) => v4.to_string(),
            None => mask_v6(v6, ipv6_prefix).to_string(),
        },
    };
    Cow::Owned(canonical.into_bytes())
}

fn mask_v6(addr: Ipv6Addr, prefix: u8) -> Ipv6Addr {
    let prefix = u32::from(prefix.min(128));
    let mask = u128::MAX.checked_shl(128 - prefix).unwrap_or(0);
    Ipv6Addr::from(u128::from(addr) & mask)
}

/// What a request's pseudonym is made under: not a valid scope (`!`), so never a bucket's.
pub const REQUEST_PREFIX: &[u8] = b"!request";

/// Longest request id accepted, in bytes.
pub const MAX_REQUEST_ID_LEN: usize = 255;

/// HMAC-SHA256 keyed once: each pseudonym then starts from a copy of the keyed state instead
/// of hashing the key again (two of the five SHA-256 blocks a pseudonym costs).
#[derive(Clone)]
pub struct Pseudonymizer(Hmac<Sha256>);

impl Pseudonymizer {
    pub fn new(key: &[u8]) -> Self {
        Self(Hmac::<Sha256>::new_from_slice(key).expect("HMAC takes keys of any length"))
    }

    /// The stored name of `subject` in `scope`. The subject must already be normalised.
    pub fn pseudonym(&self, scope: &[u8], subject: &[u8]) -> Pseudonym {
        let mut mac = self.0.clone();
        mac.update(scope);
        mac.update(&[0]);
        mac.update(subject);
        let full = mac.finalize().into_bytes();
        let mut out = [0u8; 16];
        out.copy_from_slice(&full[..16]);
        out
    }

    /// The stored name of request `id` of `subject` in `scope` (a remembered admission, see
    /// [`super::decision::Request`]): a pseudonym under the prefix `!request`, which no valid
    /// scope can be, over `scope || 0x00 || len(subject) as u32 BE || subject || id` (the length
    /// keeps a binary subject from running into the id). The subject must already be
    /// normalised.
    pub fn request(&self, scope: &[u8], subject: &[u8], id: &[u8]) -> Pseudonym {
        let len = u32::try_from(subject.len())
            .unwrap_or(u32::MAX)
            .to_be_bytes();
        let message = [scope, &[0], &len, subject, id].concat();
        self.pseudonym(REQUEST_PREFIX, &message)
    }

    /// The bucket and group of `subject` in `scope`. The group is the pseudonym under the empty
    /// scope, which no valid scope can be. The subject must already be normalised.
    pub fn key(&self, scope: &[u8], subject: &[u8]) -> BucketKey {
        BucketKey {
            bucket: self.pseudonym(scope, subject),
            group: self.pseudonym(b"", subject),
            previous: None,
        }
    }
}

/// A keyed fingerprint of `key` (first 16 bytes of HMAC-SHA256 under the key itself, over a
/// fixed text that no scope can be): it tells keys apart in the shared store without revealing
/// them.
pub fn fingerprint(key: &[u8]) -> [u8; 16] {
    let mut mac = Hmac::<Sha256>::new_from_slice(key).expect("HMAC takes keys of any length");
    mac.update(b"ratelimit key fingerprint v1");
    let full = mac.finalize().into_bytes();
    let mut out = [0u8; 16];
    out.copy_from_slice(&full[..16]);
    out
}

/// The stored name of `subject` in `scope`, keyed with `key`. The subject must already be
/// normalised.
pub fn pseudonym(key: &[u8], scope: &[u8], subject: &[u8]) -> Pseudonym {
    Pseudonymizer::new(key).pseudonym(scope, subject)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_request_name_is_neither_a_bucket_nor_ambiguous() {
        let p = Pseudonymizer::new(&[9; 32]);
        let r = p.request(b"api", b"alice", b"id-1");
        assert_ne!(r, p.pseudonym(b"api", b"alice"));
        assert_ne!(r, p.request(b"api", b"alice", b"id-2"));
        assert_ne!(r, p.request(b"web", b"alice", b"id-1"));
        assert_ne!(r, p.request(b"api", b"bob", b"id-1"));
        // The subject's length keeps ("alic", "eid-1") apart from ("alice", "id-1").
        assert_ne!(r, p.request(b"api", b"alic", b"eid-1"));
        assert_eq!(
            r,
            Pseudonymizer::new(&[9; 32]).request(b"api", b"alice", b"id-1")
        );
        assert_ne!(
            r,
            Pseudonymizer::new(&[8; 32]).request(b"api", b"alice", b"id-1")
        );
        assert!(!valid_scope(REQUEST_PREFIX));
    }

    fn norm(s: &str, prefix: u8) -> String {
        String::from_utf8(normalise(s.as_bytes(), prefix).into_owned()).unwrap()
    }

    fn hex(b: &[u8]) -> String {
        b.iter().map(|x| format!("{x:02x}")).collect()
    }

    #[test]
    fn non_addresses_are_kept_byte_for_byte() {
        assert_eq!(norm("api-key-123", 64), "api-key-123");
        assert_eq!(norm(" 1.2.3.4", 64), " 1.2.3.4");
        assert_eq!(normalise(b"\xff\x00bin", 64).as_ref(), b"\xff\x00bin");
    }

    #[test]
    fn ipv4_mapped_ipv6_becomes_dotted_ipv4() {
        assert_eq!(norm("::ffff:192.0.2.1", 64), "192.0.2.1");
        assert_eq!(norm("::FFFF:c000:0201", 64), "192.0.2.1");
    }

    #[test]
    fn ipv6_is_cut_to_its_prefix_in_rfc5952_form() {
        assert_eq!(norm("2001:DB8:0:0:1:2:3:4", 64), "2001:db8::");
        assert_eq!(norm("2001:db8:0:0:1:2:3:4", 128), "2001:db8::1:2:3:4");
        assert_eq!(norm("2001:db8:aaaa:bbbb:cccc::1", 48), "2001:db8:aaaa::");
        assert_eq!(norm("2001:db8::1", 0), "::");
    }

    #[test]
    fn two_addresses_in_one_slash_64_share_a_subject() {
        assert_eq!(
            norm("2001:db8:1:2::1", 64),
            norm("2001:db8:1:2:ffff::9", 64)
        );
        assert_ne!(norm("2001:db8:1:2::1", 64), norm("2001:db8:1:3::1", 64));
    }

    #[test]
    fn a_reused_keyed_state_gives_the_same_pseudonyms() {
        let p = Pseudonymizer::new(&[9u8; 32]);
        for (scope, subject) in [(&b"a"[..], &b"x"[..]), (b"login", b"1.2.3.4"), (b"a", b"x")] {
            assert_eq!(
                p.pseudonym(scope, subject),
                pseudonym(&[9u8; 32], scope, subject)
            );
        }
    }

    #[test]
    fn scopes_are_checked() {
        assert!(valid_scope(b"default"));
        assert!(valid_scope(b"api:v1.login_form-2"));
        assert!(valid_scope(&[b'a'; 64]));
        assert!(!valid_scope(b""));
        assert!(!valid_scope(&[b'a'; 65]));
        assert!(!valid_scope(b"a b"));
        assert!(!valid_scope(b"a/b"));
        assert!(!valid_scope("é".as_bytes()));
    }

    #[test]
    fn the_scope_separates_buckets() {
        let key = [7u8; 32];
        assert_ne!(
            pseudonym(&key, b"login", b"1.2.3.4"),
            pseudonym(&key, b"api", b"1.2.3.4")
        );
        // The 0x00 separator keeps (scope, subject) pairs from running into each other.
        assert_ne!(pseudonym(&key, b"ab", b"c"), pseudonym(&key, b"a", b"bc"));
    }

    /// The shared test vectors (tests/vectors/pseudonyms.tsv, also read by the phpt suite and
    /// the store conformance suite): every backend must derive these same pseudonyms.
    #[test]
    fn pseudonym_test_vectors() {
        let key: Vec<u8> = (0u8..32).collect();
        let p = Pseudonymizer::new(&key);
        let mut checked = 0;
        for v in vectors::pseudonyms() {
            assert_eq!(norm(&v.subject, 64), v.normalised, "{v:?}");
            let k = p.key(v.scope.as_bytes(), v.normalised.as_bytes());
            let got = if v.kind == "group" { k.group } else { k.bucket };
            assert_eq!(hex(&got), v.pseudonym, "{v:?}");
            checked += 1;
        }
        assert!(checked >= 10, "only {checked} vectors read");
    }
}

/// The shared pseudonym vectors, parsed (for the unit tests here and the store tests).
#[cfg(test)]
pub mod vectors {
    #[derive(Debug)]
    pub struct Vector {
        pub kind: String,
        pub scope: String,
        pub subject: String,
        pub normalised: String,
        pub pseudonym: String,
    }

    pub fn pseudonyms() -> Vec<Vector> {
        include_str!("../../tests/vectors/pseudonyms.tsv")
            .lines()
            .filter(|l| !l.starts_with('#') && !l.trim().is_empty())
            .map(|l| {
                let f: Vec<&str> = l.split('\t').collect();
                assert_eq!(f.len(), 5, "bad vector line {l:?}");
                Vector {
                    kind: f[0].into(),
                    scope: f[1].into(),
                    subject: f[2].into(),
                    normalised: f[3].into(),
                    pseudonym: f[4].into(),
                }
            })
            .collect()
    }
}
