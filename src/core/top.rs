//! The pressure view of `ratelimit_top()`: the buckets with the most denials, each named only by
//! its pseudonym, so that an operator can see one client hammering without any subject in clear.

use super::subject::Pseudonym;

/// The most buckets one call of `ratelimit_top()` may ask for.
pub const TOP_MAX: usize = 1_000;

/// One stored bucket as the pressure view shows it. Times are the store's, in Unix
/// milliseconds; the limit and period are not stored with a bucket (each call names its own),
/// so tokens are those held at `stamp`, before any refill since (for a window: those used in
/// the window that starts at `stamp`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct BucketView {
    pub bucket: Pseudonym,
    /// Milli-tokens held at `stamp` (a window: used in the window starting at `stamp`).
    pub tokens_milli: u64,
    /// Up to when earnings are credited.
    pub stamp_ms: i64,
    /// From when the bucket is full again (holds no information: may be dropped).
    pub full_at_ms: i64,
    /// The last decision, to a tenth of a second.
    pub used_at_ms: i64,
    pub allowed: u64,
    pub denied_rate: u64,
    pub denied_inflight: u64,
    /// Leases of this bucket not yet expired nor released.
    pub live_leases: u64,
}

impl BucketView {
    /// Denials of either kind: what the view is ordered by.
    pub fn denials(&self) -> u64 {
        self.denied_rate + self.denied_inflight
    }

    /// The pseudonym in lowercase hex (32 characters), as the view shows it.
    pub fn hex(&self) -> String {
        self.bucket.iter().map(|b| format!("{b:02x}")).collect()
    }
}

/// Orders views as `top` returns them: most denials first, then the most recently used, then
/// by pseudonym (so that the order is total and every backend returns the same list).
pub fn order(views: &mut [BucketView]) {
    views.sort_by(|a, b| {
        b.denials()
            .cmp(&a.denials())
            .then(b.used_at_ms.cmp(&a.used_at_ms))
            .then(a.bucket.cmp(&b.bucket))
    });
}

#[cfg(test)]
mod tests {
    use super::*;

    fn view(n: u8, rate: u64, inflight: u64, used: i64) -> BucketView {
        BucketView {
            bucket: [n; 16],
            tokens_milli: 0,
            stamp_ms: 0,
            full_at_ms: 0,
            used_at_ms: used,
            allowed: 0,
            denied_rate: rate,
            denied_inflight: inflight,
            live_leases: 0,
        }
    }

    #[test]
    fn most_denials_first_then_most_recent_then_pseudonym() {
        let mut v = [
            view(1, 1, 0, 5),
            view(2, 2, 3, 1),
            view(3, 0, 1, 9),
            view(4, 4, 0, 0),
            view(0, 1, 0, 5),
        ];
        order(&mut v);
        let got: Vec<u8> = v.iter().map(|v| v.bucket[0]).collect();
        assert_eq!(got, [2, 4, 3, 0, 1]);
    }

    #[test]
    fn hex_is_the_whole_pseudonym_in_lowercase() {
        let mut v = view(0, 0, 0, 0);
        v.bucket = [0xab; 16];
        v.bucket[15] = 0x01;
        assert_eq!(v.hex(), format!("{}01", "ab".repeat(15)));
        assert_eq!(v.hex().len(), 32);
    }
}
