//! One key at a time: what a process does when the key recorded in the shared store (by its
//! fingerprint) is not the one it holds. Pure: the caller reads files, clocks and the store.
//!
//! A key replaces the recorded one only when the replacement is known to be wanted: this
//! process saw its own key file change from the recorded key, a rotation names the recorded key
//! (`ratelimit.key_file_previous`), or the key file at the recorded path on the recording host
//! changed after the key was recorded (a replaced file, met by a process started since). The
//! record then names the key it replaced, and processes still holding that one stop instead of
//! recording it back. Any other key on record is a conflict, refused, never a silent split of
//! every limit in two: another host or container with another key at the same path included.
//!
//! A store can lose its record (Redis flushed, restarted without persistence, evicting; a
//! database removed). A process that had settled its key with the store records it again with
//! the time it was first recorded, and between two settled keys the older one wins: a newcomer
//! that recorded its key into the emptied store first (a stray host) yields at its next check.

/// A keyed fingerprint of a key: it tells keys apart and reveals nothing of them.
pub type Fingerprint = [u8; 16];

/// Which key a store's limits are kept under.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct KeyRecord {
    pub fingerprint: Fingerprint,
    /// The key file that recorded it.
    pub path: String,
    /// The host that recorded it (its host name).
    pub host: String,
    /// The key it replaced, if it replaced one on purpose: holders of that key are behind.
    pub previous: Option<Fingerprint>,
    /// When this key was first recorded (ms, by the store's clock: the server's on Redis, so
    /// that no host's clock decides which key is older); kept when a host records it again
    /// into a store that lost it. 0: unknown (an older build's record). [`STAMP_NOW`] in a
    /// record to write: the store stamps it.
    pub since_ms: i64,
}

/// `since_ms` of a record to write that the store stamps with its own clock, in its atomic step.
pub const STAMP_NOW: i64 = i64::MIN;

/// What this process holds.
#[derive(Debug, Clone, Copy)]
pub struct Held<'a> {
    pub fingerprint: &'a Fingerprint,
    pub path: &'a str,
    pub host: &'a str,
    /// The key of `ratelimit.key_file_previous` (a rotation), if set.
    pub previous: Option<&'a Fingerprint>,
    /// The key this process held before it saw its key file change, until it recorded the new.
    pub replaced: Option<&'a Fingerprint>,
    /// When the key held was first recorded, once this process settled it with the store.
    pub settled_since: Option<i64>,
    /// When the key file last changed (its ctime, ms), if known.
    pub file_changed_ms: Option<i64>,
    /// Whether the key file was read again just now.
    pub reread: bool,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Action {
    /// The store's key is ours.
    Keep,
    /// Record ours, as replacing `previous` (if any), first recorded at `since_ms`.
    Record {
        previous: Option<Fingerprint>,
        since_ms: i64,
    },
    /// Read the key file again, then decide again.
    Reread,
    /// Another configuration's key: refuse to decide.
    Conflict(Conflict),
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Conflict {
    /// The recorded key replaced ours on purpose: this process is behind.
    Superseded,
    /// Another key, with nothing saying it may replace ours or ours it.
    Foreign,
}

pub fn resolve(held: Held<'_>, recorded: Option<&KeyRecord>) -> Action {
    let Some(rec) = recorded else {
        return Action::Record {
            previous: None,
            since_ms: held.settled_since.unwrap_or(STAMP_NOW),
        };
    };
    if &rec.fingerprint == held.fingerprint {
        return Action::Keep;
    }
    if !held.reread {
        return Action::Reread;
    }
    let file_replaced_here = rec.path == held.path
        && rec.host == held.host
        && held.file_changed_ms.is_some_and(|c| c > rec.since_ms);
    if held.replaced == Some(&rec.fingerprint)
        || held.previous == Some(&rec.fingerprint)
        || file_replaced_here
    {
        return Action::Record {
            previous: Some(rec.fingerprint),
            since_ms: STAMP_NOW,
        };
    }
    if rec.previous.as_ref() == Some(held.fingerprint) {
        return Action::Conflict(Conflict::Superseded);
    }
    if let Some(since) = held.settled_since {
        // The older key wins; equal times by fingerprint, so two hosts never both yield.
        if (rec.since_ms, rec.fingerprint) > (since, *held.fingerprint) {
            return Action::Record {
                previous: None,
                since_ms: since,
            };
        }
    }
    Action::Conflict(Conflict::Foreign)
}

/// A fingerprint as operators compare them (hex, first 8 bytes).
pub fn short(fp: &Fingerprint) -> String {
    fp[..8].iter().map(|b| format!("{b:02x}")).collect()
}

/// A whole fingerprint in lowercase hex (32 characters).
pub fn hex(fp: &Fingerprint) -> String {
    fp.iter().map(|b| format!("{b:02x}")).collect()
}

/// The fingerprint `text` names in hex; None for anything else.
pub fn unhex(text: &str) -> Option<Fingerprint> {
    if text.len() != 32 || !text.is_ascii() {
        return None;
    }
    let mut fp = [0u8; 16];
    for (i, b) in fp.iter_mut().enumerate() {
        *b = u8::from_str_radix(&text[2 * i..2 * i + 2], 16).ok()?;
    }
    Some(fp)
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    const A: Fingerprint = [1; 16];
    const B: Fingerprint = [2; 16];
    const T0: i64 = 1_000_000;

    fn rec(fp: Fingerprint, path: &str, host: &str) -> KeyRecord {
        KeyRecord {
            fingerprint: fp,
            path: path.into(),
            host: host.into(),
            previous: None,
            since_ms: T0,
        }
    }

    /// A process of host "h" holding `fp` at "/k", its file read again, unsettled, unchanged
    /// since long before T0.
    fn held(fp: &Fingerprint) -> Held<'_> {
        Held {
            fingerprint: fp,
            path: "/k",
            host: "h",
            previous: None,
            replaced: None,
            settled_since: None,
            file_changed_ms: Some(T0 - 60_000),
            reread: true,
        }
    }

    const NOW: i64 = T0 + 5_000;

    #[test]
    fn a_fingerprint_reads_back_from_its_hex_and_nothing_else_reads() {
        let fp: Fingerprint = std::array::from_fn(|i| (i * 17) as u8);
        assert_eq!(unhex(&hex(&fp)), Some(fp));
        for bad in [
            "",
            "00",
            &"g".repeat(32),
            &"0".repeat(33),
            "é0000000000000000000000000000000",
        ] {
            assert_eq!(unhex(bad), None, "{bad:?}");
        }
    }

    #[test]
    fn a_fresh_store_records_the_first_key() {
        assert_eq!(
            resolve(held(&A), None),
            Action::Record {
                previous: None,
                since_ms: STAMP_NOW
            }
        );
    }

    #[test]
    fn the_same_key_is_kept() {
        assert_eq!(
            resolve(held(&A), Some(&rec(A, "/other", "x"))),
            Action::Keep
        );
    }

    #[test]
    fn another_key_makes_the_process_read_its_file_again_first() {
        let h = Held {
            reread: false,
            ..held(&A)
        };
        assert_eq!(resolve(h, Some(&rec(B, "/k", "h"))), Action::Reread);
    }

    #[test]
    fn a_file_this_process_saw_replaced_records_the_new_key_over_the_old() {
        let h = Held {
            replaced: Some(&B),
            ..held(&A)
        };
        // Also when another host recorded the old key (several hosts through Redis).
        assert_eq!(
            resolve(h, Some(&rec(B, "/k", "other-host"))),
            Action::Record {
                previous: Some(B),
                since_ms: STAMP_NOW
            }
        );
    }

    #[test]
    fn a_file_replaced_on_the_recording_host_after_the_record_is_the_newer_key() {
        // A process started after the swap (a respawned worker, a reload) never saw the change.
        let h = Held {
            file_changed_ms: Some(T0 + 1),
            ..held(&A)
        };
        assert_eq!(
            resolve(h, Some(&rec(B, "/k", "h"))),
            Action::Record {
                previous: Some(B),
                since_ms: STAMP_NOW
            }
        );
    }

    #[test]
    fn a_different_key_at_the_same_path_on_another_host_is_a_conflict() {
        let h = Held {
            file_changed_ms: Some(T0 + 1),
            ..held(&A)
        };
        assert_eq!(
            resolve(h, Some(&rec(B, "/k", "container-2"))),
            Action::Conflict(Conflict::Foreign)
        );
    }

    #[test]
    fn a_different_key_at_the_same_path_older_than_the_record_is_a_conflict() {
        assert_eq!(
            resolve(held(&A), Some(&rec(B, "/k", "h"))),
            Action::Conflict(Conflict::Foreign)
        );
    }

    #[test]
    fn a_rotation_records_the_new_key_over_the_previous_one() {
        let h = Held {
            path: "/new",
            previous: Some(&B),
            ..held(&A)
        };
        assert_eq!(
            resolve(h, Some(&rec(B, "/old", "other-host"))),
            Action::Record {
                previous: Some(B),
                since_ms: STAMP_NOW
            }
        );
    }

    #[test]
    fn two_key_files_on_one_store_are_a_conflict() {
        let h = Held {
            path: "/pool-a",
            ..held(&A)
        };
        assert_eq!(
            resolve(h, Some(&rec(B, "/pool-b", "h"))),
            Action::Conflict(Conflict::Foreign)
        );
        let h = Held {
            previous: Some(&[9; 16]),
            ..h
        };
        assert_eq!(
            resolve(h, Some(&rec(B, "/pool-b", "h"))),
            Action::Conflict(Conflict::Foreign)
        );
    }

    #[test]
    fn a_holder_of_a_replaced_key_stops_instead_of_recording_it_back() {
        let replacing = KeyRecord {
            previous: Some(A),
            since_ms: NOW - 1,
            ..rec(B, "/k", "other-host")
        };
        let h = Held {
            settled_since: Some(T0 - 1_000_000),
            ..held(&A)
        };
        assert_eq!(
            resolve(h, Some(&replacing)),
            Action::Conflict(Conflict::Superseded)
        );
    }

    #[test]
    fn a_settled_key_is_recorded_again_over_a_younger_one() {
        // The store lost its record, and a stray host recorded its key first.
        let stray = KeyRecord {
            since_ms: NOW - 10,
            ..rec(B, "/stray", "stray-host")
        };
        let h = Held {
            settled_since: Some(T0 - 3_600_000),
            ..held(&A)
        };
        assert_eq!(
            resolve(h, Some(&stray)),
            Action::Record {
                previous: None,
                since_ms: T0 - 3_600_000
            }
        );
    }

    #[test]
    fn a_settled_key_yields_to_an_older_one() {
        // The stray, settled by its record into the emptied store, meets the defended key.
        let defended = KeyRecord {
            since_ms: T0 - 3_600_000,
            ..rec(A, "/k", "h")
        };
        let stray = Held {
            path: "/stray",
            host: "stray-host",
            settled_since: Some(NOW - 10),
            ..held(&B)
        };
        assert_eq!(
            resolve(stray, Some(&defended)),
            Action::Conflict(Conflict::Foreign)
        );
    }

    #[test]
    fn an_empty_store_gets_the_settled_key_with_its_first_time() {
        let h = Held {
            settled_since: Some(T0 - 7),
            ..held(&A)
        };
        assert_eq!(
            resolve(h, None),
            Action::Record {
                previous: None,
                since_ms: T0 - 7
            }
        );
    }

    fn fp() -> impl Strategy<Value = Fingerprint> {
        (0u8..4).prop_map(|b| [b; 16])
    }

    fn record() -> impl Strategy<Value = KeyRecord> {
        (
            fp(),
            prop::sample::select(vec!["/k", "/j"]),
            prop::sample::select(vec!["h", "g"]),
            prop::option::of(fp()),
            0i64..10,
        )
            .prop_map(|(f, p, h, prev, s)| KeyRecord {
                fingerprint: f,
                path: p.into(),
                host: h.into(),
                previous: prev,
                since_ms: s,
            })
    }

    proptest! {
        /// Two settled processes holding different keys never both record over each other: at
        /// most one of them records its key over the other's, so they cannot take turns.
        #[test]
        fn two_settled_keys_never_take_turns(
            a in fp(), b in fp(), sa in 0i64..10, sb in 0i64..10,
            pa in prop::option::of(fp()), pb in prop::option::of(fp()),
        ) {
            prop_assume!(a != b);
            let ra = KeyRecord { fingerprint: a, path: "/a".into(), host: "ha".into(), previous: pa, since_ms: sa };
            let rb = KeyRecord { fingerprint: b, path: "/b".into(), host: "hb".into(), previous: pb, since_ms: sb };
            let ha = Held { fingerprint: &a, path: "/a", host: "ha", previous: None, replaced: None,
                settled_since: Some(sa), file_changed_ms: Some(0), reread: true };
            let hb = Held { fingerprint: &b, path: "/b", host: "hb", previous: None, replaced: None,
                settled_since: Some(sb), file_changed_ms: Some(0), reread: true };
            let a_over_b = matches!(resolve(ha, Some(&rb)), Action::Record { .. });
            let b_over_a = matches!(resolve(hb, Some(&ra)), Action::Record { .. });
            prop_assert!(!(a_over_b && b_over_a));
        }

        /// A key is recorded over another only for a reason the rules name.
        #[test]
        fn a_key_is_replaced_only_for_a_named_reason(
            ours in fp(), r in record(), prev in prop::option::of(fp()),
            replaced in prop::option::of(fp()), settled in prop::option::of(0i64..10),
            changed in prop::option::of(0i64..10),
        ) {
            let h = Held { fingerprint: &ours, path: "/k", host: "h", previous: prev.as_ref(),
                replaced: replaced.as_ref(), settled_since: settled, file_changed_ms: changed, reread: true };
            if let Action::Record { .. } = resolve(h, Some(&r)) {
                prop_assert!(r.fingerprint != ours);
                let named = replaced == Some(r.fingerprint) || prev == Some(r.fingerprint)
                    || (r.path == "/k" && r.host == "h" && changed.is_some_and(|c| c > r.since_ms))
                    || (r.previous != Some(ours) && settled.is_some_and(|s| (r.since_ms, r.fingerprint) > (s, ours)));
                prop_assert!(named);
            }
        }
    }
}
