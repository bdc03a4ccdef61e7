//! `RateLimit\Decision`: the answer to a call, read-only, with the response headers.

use crate::core::bucket::Policy;
use crate::core::decision::Verdict;
use crate::core::headers;
use crate::core::lease::LeaseToken;
use ext_php_rs::boxed::ZBox;
use ext_php_rs::flags::ClassFlags;
use ext_php_rs::prelude::*;
use ext_php_rs::types::ZendHashTable;

/// The outcome of `ratelimit_acquire()`, `ratelimit_reserve()`, `ratelimit_acquire_all()` or
/// `ratelimit_peek()`.
#[php_class]
#[php(name = "RateLimit\\Decision")]
#[php(flags = ClassFlags::Final.union(ClassFlags::NoDynamicProperties))]
pub struct Decision {
    verdict: Verdict,
    limit: u64,
    per_ms: u64,
    lease: Option<LeaseToken>,
    scope: String,
    /// A compound call's limits (scope, policy, own verdict), for its headers; empty otherwise.
    members: Vec<(String, Policy, Verdict)>,
}

impl Decision {
    pub fn new(
        verdict: Verdict,
        policy: &Policy,
        scope: String,
        lease: Option<LeaseToken>,
    ) -> Self {
        Self {
            verdict,
            limit: policy.limit(),
            per_ms: policy.window_ms(),
            lease,
            scope,
            members: Vec::new(),
        }
    }

    /// The answer of `ratelimit_acquire_all()`: the combined verdict is that of limit
    /// `reported`, whose scope and limit it shows; the headers list every limit.
    pub fn compound(
        verdict: Verdict,
        members: Vec<(String, Policy, Verdict)>,
        reported: usize,
        lease: Option<LeaseToken>,
    ) -> Self {
        let (scope, policy) = members
            .get(reported)
            .or(members.first())
            .map(|(s, p, _)| (s.clone(), *p))
            .unwrap_or_else(|| (String::new(), Policy::new(1, 1).expect("a valid policy")));
        Self {
            members,
            ..Self::new(verdict, &policy, scope, lease)
        }
    }

    pub fn lease(&self) -> Option<LeaseToken> {
        self.lease
    }
}

fn seconds(ms: u64) -> f64 {
    ms as f64 / 1000.0
}

#[php_impl]
impl Decision {
    /// Whether the call may proceed.
    #[php(getter)]
    pub fn get_allowed(&self) -> bool {
        self.verdict.allowed
    }

    /// "ok", "rate", "inflight", "in_progress" or "unavailable".
    #[php(getter)]
    pub fn get_reason(&self) -> String {
        self.verdict.reason.as_str().to_string()
    }

    /// Tokens the bucket holds when full.
    #[php(getter)]
    pub fn get_limit(&self) -> i64 {
        self.limit as i64
    }

    /// Whole tokens left.
    #[php(getter)]
    pub fn get_remaining(&self) -> i64 {
        self.verdict.remaining as i64
    }

    /// Seconds until a retry can succeed; 0 when admitted (a shadow denial keeps the real wait).
    #[php(getter)]
    pub fn get_retry_after(&self) -> f64 {
        seconds(self.verdict.retry_after_ms)
    }

    /// Seconds until the bucket is full again.
    #[php(getter)]
    pub fn get_reset_after(&self) -> f64 {
        seconds(self.verdict.reset_after_ms)
    }

    /// Seconds until the tokens a reservation booked are earned (0.0 when they were there,
    /// and for every other call): wait this long, then go ahead.
    #[php(getter)]
    pub fn get_wait_for(&self) -> f64 {
        seconds(self.verdict.wait_ms)
    }

    /// Whole tokens taken ahead of what the policy had and not yet earned back: a token
    /// bucket's booked debt, a window's count past its limit.
    #[php(getter)]
    pub fn get_reserved(&self) -> i64 {
        self.verdict.reserved.min(i64::MAX as u64) as i64
    }

    /// The in-flight lease taken, to give to `ratelimit_release()`; null when none was taken.
    /// An opaque token (see `LeaseToken`): its length may change between versions.
    #[php(getter)]
    pub fn get_lease(&self) -> Option<String> {
        self.lease.map(|l| l.to_string())
    }

    /// True for a denial of a shadow scope (`ratelimit.dry_run`), answered `allowed` with its
    /// real reason.
    #[php(getter)]
    pub fn get_dry_run(&self) -> bool {
        self.verdict.dry_run
    }

    /// True only for a replay: an answer repeated for a retry of an earlier admission with the
    /// same request id and terms. It took nothing and holds no lease: do not run the work again.
    #[php(getter)]
    pub fn get_replay(&self) -> bool {
        self.verdict.replay
    }

    /// Who decided: "store", "deny_cache", "fallback", "fail_open" or "replay".
    #[php(getter)]
    pub fn get_source(&self) -> String {
        self.verdict.source.as_str().to_string()
    }

    /// The scope the bucket belongs to.
    #[php(getter)]
    pub fn get_scope(&self) -> String {
        self.scope.clone()
    }

    /// `RateLimit-Policy`, `RateLimit` and, on a denial, `Retry-After`, as name => value.
    pub fn headers(&self) -> PhpResult<ZBox<ZendHashTable>> {
        let mut table = ZendHashTable::new();
        let fields = if self.members.is_empty() {
            headers::fields(&self.scope, self.limit, self.per_ms, &self.verdict)
        } else {
            let members: Vec<headers::Member<'_>> = self
                .members
                .iter()
                .map(|(scope, p, v)| headers::Member {
                    scope,
                    limit: p.limit(),
                    per_ms: p.window_ms(),
                    verdict: v,
                })
                .collect();
            headers::fields_all(&members, &self.verdict)
        };
        for (name, value) in fields {
            table.insert(name, value)?;
        }
        Ok(table)
    }
}
