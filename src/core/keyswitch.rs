//! One key at a time: what a process does when the key recorded in the shared store (by its
//! fingerprint) is not the one it holds. Pure: the caller reads files and the store.
//!
//! A process that finds another key recorded re-reads its own key file first. If that now holds
//! the recorded key, it switches to it. If it holds a newer key (its file was replaced at the
//! recorded path, or its previous key, `ratelimit.key_file_previous`, is the recorded one: a
//! rotation), it records its own, and the others follow when they next look. Otherwise two
//! configurations with different keys share one store: an error naming both key files, never
//! a silent split of every limit in two.

/// A keyed fingerprint of a key: it tells keys apart and reveals nothing of them.
pub type Fingerprint = [u8; 16];

/// Which key a store's limits are kept under, and the key file that recorded it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct KeyRecord {
    pub fingerprint: Fingerprint,
    pub path: String,
}

/// What this process holds.
#[derive(Debug, Clone, Copy)]
pub struct Held<'a> {
    pub fingerprint: &'a Fingerprint,
    pub path: &'a str,
    pub previous: Option<&'a Fingerprint>,
    /// Whether the key file was read again just now.
    pub reread: bool,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Action {
    /// The store's key is ours.
    Keep,
    /// Record ours (none recorded yet, or ours replaces the recorded one).
    Record,
    /// Read the key file again, then decide again.
    Reread,
    /// Another configuration's key: refuse to decide.
    Conflict,
}

pub fn resolve(held: Held<'_>, recorded: Option<&KeyRecord>) -> Action {
    let Some(rec) = recorded else {
        return Action::Record;
    };
    if &rec.fingerprint == held.fingerprint {
        Action::Keep
    } else if !held.reread {
        Action::Reread
    } else if rec.path == held.path || held.previous == Some(&rec.fingerprint) {
        Action::Record
    } else {
        Action::Conflict
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const A: Fingerprint = [1; 16];
    const B: Fingerprint = [2; 16];

    fn rec(fp: Fingerprint, path: &str) -> KeyRecord {
        KeyRecord {
            fingerprint: fp,
            path: path.into(),
        }
    }

    fn held<'a>(
        fp: &'a Fingerprint,
        path: &'a str,
        previous: Option<&'a Fingerprint>,
        reread: bool,
    ) -> Held<'a> {
        Held {
            fingerprint: fp,
            path,
            previous,
            reread,
        }
    }

    #[test]
    fn a_fresh_store_records_the_first_key() {
        assert_eq!(resolve(held(&A, "/k", None, false), None), Action::Record);
    }

    #[test]
    fn the_same_key_is_kept() {
        assert_eq!(
            resolve(held(&A, "/k", None, false), Some(&rec(A, "/other"))),
            Action::Keep
        );
    }

    #[test]
    fn another_key_makes_the_process_read_its_file_again_first() {
        assert_eq!(
            resolve(held(&A, "/k", None, false), Some(&rec(B, "/k"))),
            Action::Reread
        );
    }

    #[test]
    fn a_file_replaced_at_the_recorded_path_is_the_newer_key() {
        assert_eq!(
            resolve(held(&A, "/k", None, true), Some(&rec(B, "/k"))),
            Action::Record
        );
    }

    #[test]
    fn a_rotation_records_the_new_key_over_the_previous_one() {
        assert_eq!(
            resolve(held(&A, "/new", Some(&B), true), Some(&rec(B, "/old"))),
            Action::Record
        );
    }

    #[test]
    fn two_key_files_on_one_store_are_a_conflict() {
        assert_eq!(
            resolve(held(&A, "/pool-a", None, true), Some(&rec(B, "/pool-b"))),
            Action::Conflict
        );
        assert_eq!(
            resolve(
                held(&A, "/pool-a", Some(&[9; 16]), true),
                Some(&rec(B, "/pool-b"))
            ),
            Action::Conflict
        );
    }
}
