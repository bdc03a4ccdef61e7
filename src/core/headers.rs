//! Response header fields of draft-ietf-httpapi-ratelimit-headers-10, in structured-field
//! syntax. The scope names the policy; no partition key (the client's identity) is ever sent.

use super::decision::{Reason, Verdict};

/// Whole seconds, rounded up.
fn ceil_seconds(ms: u64) -> u64 {
    ms.div_ceil(1000)
}

/// `Retry-After` of a denial: its wait rounded up, at least 1 s, and never before the next
/// token (`t`), except for a retry in progress, which needs no token (a replay takes none)
/// and may go again once the first request's lease ends.
fn retry_after(v: &Verdict) -> String {
    let retry = ceil_seconds(v.retry_after_ms).max(1);
    if v.reason == Reason::InProgress {
        return retry.to_string();
    }
    retry.max(ceil_seconds(v.next_token_ms)).to_string()
}

/// `RateLimit-Policy`, `RateLimit` and, on a denial, `Retry-After`.
pub fn fields(scope: &str, limit: u64, per_ms: u64, v: &Verdict) -> Vec<(&'static str, String)> {
    let t = ceil_seconds(v.next_token_ms);
    let mut out = vec![
        (
            "RateLimit-Policy",
            format!("\"{scope}\";q={limit};w={}", ceil_seconds(per_ms)),
        ),
        ("RateLimit", format!("\"{scope}\";r={};t={t}", v.remaining)),
    ];
    if !v.allowed {
        out.push(("Retry-After", retry_after(v)));
    }
    out
}

/// One limit of a compound call, as its headers name it.
pub struct Member<'a> {
    pub scope: &'a str,
    pub limit: u64,
    pub per_ms: u64,
    pub verdict: &'a Verdict,
}

/// The fields of a compound call: `RateLimit-Policy` and `RateLimit` as lists, one member per
/// limit in the order given (so a client sees every policy it is under), and `Retry-After`
/// from the combined verdict `v` (a denial's, the longest wait of the denying limits).
pub fn fields_all(members: &[Member<'_>], v: &Verdict) -> Vec<(&'static str, String)> {
    let join =
        |f: &dyn Fn(&Member<'_>) -> String| members.iter().map(f).collect::<Vec<_>>().join(", ");
    let mut out = vec![
        (
            "RateLimit-Policy",
            join(&|m| format!("\"{}\";q={};w={}", m.scope, m.limit, ceil_seconds(m.per_ms))),
        ),
        (
            "RateLimit",
            join(&|m| {
                format!(
                    "\"{}\";r={};t={}",
                    m.scope,
                    m.verdict.remaining,
                    ceil_seconds(m.verdict.next_token_ms)
                )
            }),
        ),
    ];
    if !v.allowed {
        out.push(("Retry-After", retry_after(v)));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::core::decision::{Reason, Verdict};

    fn verdict(allowed: bool, remaining: u64, retry: u64, next: u64) -> Verdict {
        let reason = if allowed { Reason::Ok } else { Reason::Rate };
        Verdict {
            allowed,
            reason,
            remaining,
            retry_after_ms: retry,
            reset_after_ms: 0,
            next_token_ms: next,
            dry_run: false,
            replay: false,
            source: crate::core::decision::Source::Store,
            wait_ms: 0,
            reserved: 0,
        }
    }

    #[test]
    fn allowed_calls_carry_policy_and_remaining() {
        let f = fields("default", 5, 60_000, &verdict(true, 4, 0, 12_000));
        assert_eq!(
            f,
            vec![
                ("RateLimit-Policy", "\"default\";q=5;w=60".to_string()),
                ("RateLimit", "\"default\";r=4;t=12".to_string()),
            ]
        );
    }

    #[test]
    fn window_and_times_round_up() {
        let f = fields("api", 3, 1_500, &verdict(true, 0, 0, 1));
        assert_eq!(f[0].1, "\"api\";q=3;w=2");
        assert_eq!(f[1].1, "\"api\";r=0;t=1");
    }

    #[test]
    fn denials_add_retry_after_of_at_least_one_second() {
        let f = fields("default", 5, 60_000, &verdict(false, 0, 10, 10));
        assert_eq!(f[2], ("Retry-After", "1".to_string()));
    }

    #[test]
    fn a_shadow_denial_sends_no_retry_after() {
        let mut v = verdict(true, 0, 2_000, 12_000);
        v.dry_run = true;
        let f = fields("default", 5, 60_000, &v);
        assert_eq!(f.len(), 2);
        assert!(f.iter().all(|(n, _)| *n != "Retry-After"));
    }

    #[test]
    fn retry_after_is_never_earlier_than_the_next_token() {
        let f = fields("default", 5, 60_000, &verdict(false, 0, 2_000, 12_000));
        assert_eq!(f[2], ("Retry-After", "12".to_string()));
    }

    #[test]
    fn a_retry_in_progress_retries_when_the_first_lease_ends() {
        let mut v = verdict(false, 0, 8_000, 50_000);
        v.reason = Reason::InProgress;
        let f = fields("default", 5, 60_000, &v);
        assert_eq!(
            f[2],
            ("Retry-After", "8".to_string()),
            "a replay needs no token"
        );
    }

    #[test]
    fn a_compound_call_lists_every_policy_in_order() {
        let (a, b) = (verdict(true, 4, 0, 1_000), verdict(true, 999, 0, 86_400));
        let m = [
            Member {
                scope: "s",
                limit: 5,
                per_ms: 1_000,
                verdict: &a,
            },
            Member {
                scope: "d",
                limit: 1000,
                per_ms: 86_400_000,
                verdict: &b,
            },
        ];
        assert_eq!(
            fields_all(&m, &a),
            vec![
                (
                    "RateLimit-Policy",
                    "\"s\";q=5;w=1, \"d\";q=1000;w=86400".to_string()
                ),
                ("RateLimit", "\"s\";r=4;t=1, \"d\";r=999;t=87".to_string()),
            ]
        );
    }

    #[test]
    fn a_compound_denial_retries_after_the_combined_wait() {
        let (a, b) = (
            verdict(true, 4, 0, 1_000),
            verdict(false, 0, 30_500, 30_500),
        );
        let m = [
            Member {
                scope: "s",
                limit: 5,
                per_ms: 1_000,
                verdict: &a,
            },
            Member {
                scope: "d",
                limit: 1,
                per_ms: 60_000,
                verdict: &b,
            },
        ];
        assert_eq!(fields_all(&m, &b)[2], ("Retry-After", "31".to_string()));
    }

    #[test]
    fn a_compound_shadow_denial_sends_no_retry_after() {
        let mut b = verdict(true, 0, 30_000, 30_000);
        b.dry_run = true;
        let m = [Member {
            scope: "d",
            limit: 1,
            per_ms: 60_000,
            verdict: &b,
        }];
        assert_eq!(fields_all(&m, &b).len(), 2);
    }
}
