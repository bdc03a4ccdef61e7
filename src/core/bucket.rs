//! Rate policies in integer milli-tokens: the token bucket, the fixed window and the sliding
//! window. Pure: time is passed in, every product is formed in 128 bits.
//!
//! **Token bucket.** A bucket holds `limit` tokens and earns `limit` tokens every `per`
//! milliseconds, continuously. The state is two integers: the milli-tokens held and `stamp`,
//! the instant up to which earnings have been credited. Refilling credits the whole
//! milli-tokens earned since `stamp` and moves `stamp` forward only by the time those
//! milli-tokens took to earn (rounded up), so a bucket polled faster than it earns keeps its
//! fraction instead of losing it, and the rounding can only ever withhold, never mint.
//!
//! **Stepped bucket** (Symfony's `token_bucket`): a bucket of `limit` tokens that gets `amount`
//! tokens back at each whole `per` milliseconds counted from its stamp, all at once, never more
//! than `limit` (Symfony's `Rate::calculateNewTokensDuringInterval`). The stamp advances by whole
//! periods only, so the steps keep their phase; a bucket found full again holds no information
//! (a store may drop it), and its stamp restarts at the call that finds it so, as a new one
//! would. Its tokens are those held at the stamp; a booking (see [`Bucket::book`]) moves the
//! stamp ahead to the step that pays it and keeps there what that step leaves over, nothing of
//! which is available before it.
//!
//! **Fixed window** (Symfony's `fixed_window`, Laravel's `RateLimiter`): at most `limit` tokens
//! in a window of `per` ms that starts at the first admission (not on a grid) and ends `per`
//! later; then the next admission starts the next one. State: the milli-tokens used in the
//! window, its start and its length (the `per` of the admission that started it: a call with
//! another `per` counts in the running window until that window's own end). Laravel's
//! attempts are the tokens used, its `availableIn` the time to the window's end: one state
//! serves both.
//!
//! **Sliding window** (Symfony's `sliding_window`): the tokens used in the current window plus
//! those of the previous window weighted by the part of it still inside the sliding period,
//! that weighted part rounded down to whole tokens, as Symfony's `SlidingWindow::getHitCount`
//! does (`floor(previous * (1 - elapsed / per) + current)`, with whole tokens: the floor falls
//! on the previous window's share). The windows follow each other from the first admission
//! (`start`, `start + per`, …); after a whole window without admissions the next admission
//! starts afresh. State: the milli-tokens used in the current window, in the previous one,
//! and the current window's start.
//!
//! Windows are half-open, `[start, start + per)`: at `start + per` exactly the next window
//! has begun (Symfony compares seconds as floats with `>`, so the two differ only for a call
//! in the very millisecond a window ends). A window with nothing used holds no information:
//! it is a fresh one, and the next admission starts it.
//!
//! For every policy a clock that reads earlier than `stamp` earns nothing, rolls no window and
//! leaves `stamp` where it is; and the tokens available never grow but with time, so a denial
//! stays a denial until its `retry_after` (the store's snapshot denials and the deny cache
//! rely on it).

/// Milli-tokens per token.
pub const MILLI: u64 = 1000;
/// Largest `limit` accepted: `limit * MILLI` and every product below fit 128-bit arithmetic.
pub const MAX_LIMIT: u64 = 1_000_000_000_000;
/// Most milli-tokens a window counts as used (bookings past its limit add up): below 2^50,
/// so that the Lua scripts' exact arithmetic holds for every stored value.
pub const MAX_USED: u64 = (1 << 50) - 1;
/// Latest instant a booking reaches: 2^52 ms (some 142,000 years after 1970). A debt of forced
/// charges (each up to `per` ahead) stops there, so that a stamp plus a window stays exact in
/// the Lua scripts' doubles and far from i64's end (and a stored value's expiry within what
/// Redis accepts).
pub const MAX_BOOKED: i64 = 1 << 52;
/// Shortest window: one millisecond.
pub const MIN_PER_MS: u64 = 1;
/// Longest window: 10^9 seconds.
pub const MAX_PER_MS: u64 = 1_000_000_000_000;

/// Why a policy was refused. The PHP glue turns each into its own `ValueError` text.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PolicyError {
    LimitTooSmall,
    LimitTooLarge,
    PerTooSmall,
    PerTooLarge,
    StepTooSmall,
    StepTooLarge,
}

/// How a limit counts: the `policy` argument of the PHP functions.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub enum Kind {
    #[default]
    TokenBucket,
    FixedWindow,
    SlidingWindow,
    SteppedBucket,
}

impl Kind {
    pub const ALL: [Kind; 4] = [
        Kind::TokenBucket,
        Kind::FixedWindow,
        Kind::SlidingWindow,
        Kind::SteppedBucket,
    ];

    /// The name PHP callers use (Symfony's policy names).
    pub fn as_str(self) -> &'static str {
        match self {
            Kind::TokenBucket => "token_bucket",
            Kind::FixedWindow => "fixed_window",
            Kind::SlidingWindow => "sliding_window",
            Kind::SteppedBucket => "stepped_bucket",
        }
    }

    /// What the policy does, for docs/usage.md's table (rendered by tests/docs.rs).
    pub fn doc(self) -> &'static str {
        match self {
            Kind::TokenBucket => {
                "The default. A bucket of `$limit` tokens refilled continuously, `$limit` every \
                 `$per` seconds: bursts up to `$limit`, then a steady rate. `resetAfter`: until \
                 full; the `RateLimit` header's `t`: until the next whole token."
            }
            Kind::FixedWindow => {
                "At most `$limit` in a window of `$per` seconds that starts at its first \
                 admission (not on the clock's grid) and keeps that admission's `$per` (a call \
                 with another `$per` counts in it until its end); the next admission after its \
                 end starts the next one. `retryAfter`, `resetAfter` and `t`: until the \
                 window's end. Symfony's `fixed_window`; Laravel's `RateLimiter` counts this \
                 way."
            }
            Kind::SlidingWindow => {
                "The current window's tokens plus the previous window's, weighted by the part \
                 of it still inside the last `$per` seconds and rounded down to whole tokens \
                 (Symfony's `sliding_window`): a burst at a window's end still weighs on the \
                 next one. `retryAfter`: exactly when the weighted count lets the call in."
            }
            Kind::SteppedBucket => {
                "A bucket of `$limit` tokens that gets `$amount` tokens (default `$limit`) back \
                 at each whole `$per` seconds, all at once, counted from its first admission \
                 (Symfony's `token_bucket`, whose `rate` is `$amount` per `$per`). `retryAfter`: \
                 the step that brings the tokens; a bucket found full starts its steps anew."
            }
        }
    }

    /// The table of policies in docs/usage.md.
    pub fn reference_markdown() -> String {
        let mut out = String::from("| `policy` | how it counts |\n| --- | --- |\n");
        for k in Self::ALL {
            out.push_str(&format!("| `{}` | {} |\n", k.as_str(), k.doc()));
        }
        out
    }

    pub fn from_name(name: &[u8]) -> Option<Self> {
        Self::ALL
            .into_iter()
            .find(|k| k.as_str().as_bytes() == name)
    }

    /// The number stored with a bucket (SQLite's `policy` column, the Redis value's 8th field).
    pub fn code(self) -> u8 {
        match self {
            Kind::TokenBucket => 0,
            Kind::FixedWindow => 1,
            Kind::SlidingWindow => 2,
            Kind::SteppedBucket => 3,
        }
    }

    /// A stored code; an unknown one (a damaged or newer file) is None.
    pub fn from_code(code: i64) -> Option<Self> {
        Self::ALL.into_iter().find(|k| i64::from(k.code()) == code)
    }

    /// A bucket of tokens (continuous or stepped), as opposed to a window: it holds tokens,
    /// and a booking is a stamp ahead (see [`Bucket::book`]).
    pub fn is_bucket(self) -> bool {
        matches!(self, Kind::TokenBucket | Kind::SteppedBucket)
    }
}

/// `limit` tokens per `per_ms` milliseconds, counted as `kind` says.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Policy {
    limit: u64,
    per_ms: u64,
    kind: Kind,
    /// A stepped bucket's tokens per step (`limit` unless set; unused by the other kinds).
    amount: u64,
}

impl Policy {
    /// A token bucket.
    pub fn new(limit: u64, per_ms: u64) -> Result<Self, PolicyError> {
        match (limit, per_ms) {
            (0, _) => Err(PolicyError::LimitTooSmall),
            (l, _) if l > MAX_LIMIT => Err(PolicyError::LimitTooLarge),
            (_, p) if p < MIN_PER_MS => Err(PolicyError::PerTooSmall),
            (_, p) if p > MAX_PER_MS => Err(PolicyError::PerTooLarge),
            _ => Ok(Self {
                limit,
                per_ms,
                kind: Kind::TokenBucket,
                amount: limit,
            }),
        }
    }

    /// The same limit and period, counted another way. Only a stepped bucket keeps an amount
    /// other than `limit`: the amount travels with the stepped policy's code alone (see
    /// [`Self::code_arg`]), so that every backend reads a stored stepped bucket under another
    /// policy with the same steps (of `limit`).
    pub fn with_kind(self, kind: Kind) -> Self {
        let amount = if kind == Kind::SteppedBucket {
            self.amount
        } else {
            self.limit
        };
        Self {
            kind,
            amount,
            ..self
        }
    }

    /// The tokens a stepped bucket gets back at each step (`1..=MAX_LIMIT`; more than `limit`
    /// fills it, as `limit` does). Checked for any policy, kept by a stepped bucket only (see
    /// [`Self::with_kind`]): set the kind first.
    pub fn with_amount(self, amount: u64) -> Result<Self, PolicyError> {
        match amount {
            0 => Err(PolicyError::StepTooSmall),
            a if a > MAX_LIMIT => Err(PolicyError::StepTooLarge),
            _ if self.kind != Kind::SteppedBucket => Ok(self),
            amount => Ok(Self { amount, ..self }),
        }
    }

    /// A stepped bucket's tokens per step, as given.
    pub fn amount(&self) -> u64 {
        self.amount
    }

    /// The policy's code as the Redis scripts and the module take it: `Kind::code`, and for a
    /// stepped bucket its amount after a colon (`3:100`), so that no argument is added.
    pub fn code_arg(&self) -> String {
        match self.kind {
            Kind::SteppedBucket => format!("3:{}", self.amount),
            k => k.code().to_string(),
        }
    }

    /// Reads [`Self::code_arg`]'s text back onto `self` (limit and period); None when it is
    /// not one.
    pub fn with_code_arg(self, arg: &[u8]) -> Option<Self> {
        let text = std::str::from_utf8(arg).ok()?;
        let (code, amount) = match text.split_once(':') {
            Some((c, a)) => (c, Some(a)),
            None => (text, None),
        };
        if code.len() != 1 {
            return None;
        }
        let kind = Kind::from_code(code.parse().ok()?)?;
        match (kind, amount) {
            (Kind::SteppedBucket, Some(a))
                if !a.is_empty() && a.bytes().all(|b| b.is_ascii_digit()) =>
            {
                self.with_kind(kind).with_amount(a.parse().ok()?).ok()
            }
            (Kind::SteppedBucket, _) | (_, Some(_)) => None,
            (kind, None) => Some(self.with_kind(kind)),
        }
    }

    /// Milliseconds in which the whole limit comes back from empty (the `w` of the
    /// `RateLimit-Policy` header): `per`, or for a stepped bucket its steps for `limit`.
    pub fn window_ms(&self) -> u64 {
        match self.kind {
            Kind::SteppedBucket => {
                let steps = self.limit.div_ceil(self.amount.min(self.limit)) as u128;
                (steps * self.per_ms as u128).min(u64::MAX as u128) as u64
            }
            _ => self.per_ms,
        }
    }

    /// `limit` per `per_ms` counted as a test vector's `policy` column says: a policy's name,
    /// and for a stepped bucket its amount after a colon (`stepped_bucket:2`).
    pub fn from_vector(limit: u64, per_ms: u64, column: &str) -> Option<Self> {
        let (name, amount) = match column.split_once(':') {
            Some((n, a)) => (n, Some(a.parse().ok()?)),
            None => (column, None),
        };
        let p = Self::new(limit, per_ms)
            .ok()?
            .with_kind(Kind::from_name(name.as_bytes())?);
        match amount {
            Some(a) => p.with_amount(a).ok(),
            None => Some(p),
        }
    }

    /// A stepped bucket's milli-tokens per step, at most the capacity (a step of more fills
    /// it all the same).
    fn step_milli(&self) -> u64 {
        self.amount.min(self.limit) * MILLI
    }

    /// A stepped bucket: the instant `milli` milli-tokens are held if `tokens` are held at
    /// `stamp` (on its steps), counting the steps as if nothing capped them (a booking's
    /// arithmetic, Symfony's negative tokens). Never past [`MAX_BOOKED`] (a stamp before it):
    /// some limits take longer than that (10^12 tokens, one every 10^9 s), and the Lua
    /// scripts' doubles are exact below it. Earlier than the truth only there, where a caller
    /// told to retry then is denied again, and a booking then holds nothing.
    fn stepped_ready_at(&self, tokens: u64, stamp: i64, milli: u64) -> i64 {
        if tokens >= milli {
            return stamp;
        }
        let steps = (milli - tokens).div_ceil(self.step_milli()) as u128;
        let ms = (steps * self.per_ms as u128).min(u64::MAX as u128) as u64;
        let at = after(stamp, ms);
        if stamp < MAX_BOOKED {
            at.min(MAX_BOOKED)
        } else {
            at
        }
    }

    /// Seconds (as given to PHP) to whole milliseconds, rounded to nearest.
    pub fn per_ms_from_seconds(per: f64) -> Option<u64> {
        if !per.is_finite() || per < 0.0 {
            return None;
        }
        let ms = (per * 1000.0).round();
        (ms <= MAX_PER_MS as f64).then_some(ms as u64)
    }

    pub fn limit(&self) -> u64 {
        self.limit
    }

    pub fn per_ms(&self) -> u64 {
        self.per_ms
    }

    pub fn kind(&self) -> Kind {
        self.kind
    }

    /// Capacity in milli-tokens.
    pub fn capacity(&self) -> u64 {
        self.limit * MILLI
    }

    /// Whole milli-tokens earned in `elapsed_ms`, at most one full bucket.
    pub fn earned(&self, elapsed_ms: u64) -> u64 {
        let e = elapsed_ms as u128 * self.capacity() as u128 / self.per_ms as u128;
        e.min(self.capacity() as u128) as u64
    }

    /// Milliseconds needed to earn `milli` milli-tokens, rounded up.
    pub fn time_to_earn(&self, milli: u64) -> u64 {
        let cap = self.capacity() as u128;
        let ms = (milli as u128 * self.per_ms as u128).div_ceil(cap);
        ms.min(u64::MAX as u128) as u64
    }

    /// The sliding window's weighted share of the previous window's `prev` milli-tokens, `d`
    /// ms before the current window ends (`0..=per`): whole tokens, rounded down (Symfony's
    /// floor), in milli-tokens.
    fn weighted(&self, prev: u64, d: u64) -> u64 {
        let d = d.min(self.per_ms) as u128;
        let tokens = prev as u128 * d / (self.per_ms as u128 * MILLI as u128);
        (tokens * MILLI as u128).min(u64::MAX as u128) as u64
    }

    /// The largest `d` in `0..=per` with `weighted(prev, d) <= room` (milli-tokens).
    fn latest_d(&self, prev: u64, room: u64) -> u64 {
        if prev == 0 {
            return self.per_ms;
        }
        // weighted <= room  <=>  floor(prev * d / (per * MILLI)) < k  <=>  prev * d < k * per * MILLI
        let k = (room / MILLI) as u128 + 1;
        let d = (k * self.per_ms as u128 * MILLI as u128 - 1) / prev as u128;
        d.min(self.per_ms as u128) as u64
    }
}

/// The stored state of one limit (a "bucket" whatever its policy, as the stores call it).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Bucket {
    /// Token bucket: milli-tokens held, `0..=capacity`. Windows: milli-tokens used in the
    /// current window.
    pub tokens: u64,
    /// Token bucket: wall-clock ms up to which earnings are credited. Windows: the current
    /// window's start.
    pub stamp: i64,
    /// Sliding window: milli-tokens used in the previous window. Token bucket: 0, or while in
    /// debt the instant its latest booking was decided (see [`Bucket::book`]). Fixed window:
    /// the window's length in ms, the period of the call that started it (0 in a fresh window,
    /// and in states written by builds that did not keep it: the call's period then).
    pub prev: u64,
    /// The policy the state was written under. A call with another one converts it first
    /// (see [`Bucket::refill`]).
    pub kind: Kind,
}

/// A bucket after refilling, and whether the clock was seen running backwards.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Refilled {
    pub bucket: Bucket,
    pub clock_regressed: bool,
}

/// `a + b` on the time line, saturating (a stamp read from a damaged file may be anything).
fn after(a: i64, b: u64) -> i64 {
    (a as i128 + b as i128).min(i64::MAX as i128) as i64
}

impl Bucket {
    /// A token bucket's state.
    pub fn tokens_at(tokens: u64, stamp: i64) -> Self {
        Self {
            tokens,
            stamp,
            ..Self::default()
        }
    }

    /// A limit seen for the first time: a full bucket, or a fresh window.
    pub fn full(policy: &Policy, now: i64) -> Self {
        let tokens = match policy.kind {
            Kind::TokenBucket | Kind::SteppedBucket => policy.capacity(),
            Kind::FixedWindow | Kind::SlidingWindow => 0,
        };
        Self {
            tokens,
            stamp: now,
            prev: 0,
            kind: policy.kind,
        }
    }

    /// Brings the state up to `now`: credits a token bucket's earnings, rolls a window that
    /// ended. A state written under another policy is first converted (see [`Self::convert`]).
    pub fn refill(self, policy: &Policy, now: i64) -> Refilled {
        if self.kind != policy.kind {
            return self.convert(policy, now);
        }
        // A token bucket in debt (see [`Self::book`]) has its stamp ahead on purpose: only a
        // clock read earlier than the booking's own decision ran backwards.
        let clock_regressed = now < self.stamp && !self.in_debt_at(policy, now);
        let bucket = match policy.kind {
            Kind::TokenBucket => self.refill_tokens(policy, now),
            Kind::SteppedBucket => self.refill_steps(policy, now),
            Kind::FixedWindow => {
                let ended = now >= after(self.stamp, self.window_ms(policy));
                if self.tokens == 0 || ended {
                    Self::fresh(policy.kind, self.stamp.max(now))
                } else {
                    self
                }
            }
            Kind::SlidingWindow => {
                let end = after(self.stamp, policy.per_ms);
                if (self.tokens == 0 && self.prev == 0) || now >= after(end, policy.per_ms) {
                    Self::fresh(policy.kind, self.stamp.max(now))
                } else if now < end {
                    self
                } else if self.tokens > 0 {
                    // The next window, right after this one: this one's tokens weigh on it.
                    Self {
                        tokens: 0,
                        stamp: end,
                        prev: self.tokens,
                        kind: policy.kind,
                    }
                } else {
                    // Nothing in this window: nothing weighs on the next one either.
                    Self::fresh(policy.kind, now)
                }
            }
        };
        Refilled {
            bucket,
            clock_regressed,
        }
    }

    fn fresh(kind: Kind, stamp: i64) -> Self {
        Self {
            tokens: 0,
            stamp,
            prev: 0,
            kind,
        }
    }

    fn refill_tokens(self, policy: &Policy, now: i64) -> Self {
        let cap = policy.capacity();
        // A policy may have shrunk since the bucket was written: never hold more than it allows.
        let tokens = self.tokens.min(cap);
        if now < self.stamp {
            // Keeps a debt's marker (see [`Self::book`]): nothing is earned before the stamp.
            return Self {
                prev: self.prev,
                ..Self::tokens_at(tokens, self.stamp)
            };
        }
        // `abs_diff`: a stamp read from a damaged file may be anything; no subtraction overflows.
        let elapsed = now.abs_diff(self.stamp);
        let earned = policy.earned(elapsed);
        if tokens + earned >= cap {
            // Full: nothing left to carry, the time base may restart at `now`.
            Self::tokens_at(cap, now)
        } else {
            // `time_to_earn(earned) <= elapsed` because `earned` was rounded down.
            Self::tokens_at(
                tokens + earned,
                self.stamp + policy.time_to_earn(earned) as i64,
            )
        }
    }

    /// A stepped bucket's refill: `amount` per whole period since the stamp, the stamp moved
    /// by those periods only (the steps keep their phase); found full, it restarts at `now`.
    fn refill_steps(self, policy: &Policy, now: i64) -> Self {
        let cap = policy.capacity();
        let tokens = self.tokens.min(cap);
        if now < self.stamp {
            // A booking's stamp ahead (or a clock that went back): nothing earned before it.
            return Self { tokens, ..self };
        }
        let steps = now.abs_diff(self.stamp) / policy.per_ms;
        let earned = (steps as u128 * policy.step_milli() as u128).min(cap as u128) as u64;
        let kind = Kind::SteppedBucket;
        if tokens + earned >= cap {
            // Full: no information left, the steps start again from this call, as a new
            // bucket's would.
            Self {
                kind,
                ..Self::tokens_at(cap, now)
            }
        } else {
            Self {
                kind,
                ..Self::tokens_at(tokens + earned, after(self.stamp, steps * policy.per_ms))
            }
        }
    }

    /// A state written under another policy (a call with another `policy` on the same scope
    /// and subject), brought up to `now` as its own policy says, then restated under `policy`
    /// with exactly the milli-tokens it has available: the change mints nothing and forgets
    /// nothing that was used; the new policy's time starts at `now` (never before the old
    /// stamp).
    fn convert(self, policy: &Policy, now: i64) -> Refilled {
        let old = policy.with_kind(self.kind);
        let Refilled {
            bucket: b,
            clock_regressed,
        } = self.refill(&old, now);
        let available = b.available(&old, now);
        // A token bucket in debt (see [`Self::book`]) has its stamp ahead on purpose: the
        // window starts now and counts the debt past its limit, as a booking in it would (a
        // window with a stamp ahead would read as a clock that ran backwards until then).
        let owed = if b.in_debt_at(&old, now) {
            b.owed(&old, now)
        } else {
            0
        };
        let stamp = if owed > 0 { now } else { b.stamp.max(now) };
        let bucket = match policy.kind {
            // A debt (only a bucket has one) stays a stamp ahead: nothing is there before the
            // booked instant under the other bucket either (what a stepped booking would have
            // left over at it is dropped: a change never gives).
            Kind::TokenBucket | Kind::SteppedBucket if owed > 0 => Self {
                tokens: 0,
                kind: policy.kind,
                ..b
            },
            Kind::TokenBucket | Kind::SteppedBucket => Self {
                kind: policy.kind,
                ..Self::tokens_at(available, stamp)
            },
            Kind::FixedWindow | Kind::SlidingWindow => Self {
                tokens: (policy.capacity() - available)
                    .saturating_add(owed)
                    .min(MAX_USED),
                stamp,
                prev: 0,
                kind: policy.kind,
            },
        };
        Refilled {
            bucket,
            clock_regressed,
        }
    }

    /// Milli-tokens used at `now` as the sliding window counts them (the current window's and
    /// the weighted share of the previous one's).
    fn sliding_used(&self, policy: &Policy, now: i64) -> u64 {
        let end = after(self.stamp, policy.per_ms);
        // Before the window's start (a clock that went back) the previous window weighs whole.
        let d = (end as i128 - now as i128).clamp(0, policy.per_ms as i128) as u64;
        self.tokens.saturating_add(policy.weighted(self.prev, d))
    }

    /// Milli-tokens a call could take at `now` (for a state returned by [`Self::refill`]).
    pub fn available(&self, policy: &Policy, now: i64) -> u64 {
        let cap = policy.capacity();
        match policy.kind {
            Kind::TokenBucket => self.tokens.min(cap),
            // Booked: what the stamp's step leaves over is not there before it.
            Kind::SteppedBucket if self.prev != 0 && now < self.stamp => 0,
            Kind::SteppedBucket => self.tokens.min(cap),
            Kind::FixedWindow => cap.saturating_sub(self.tokens),
            Kind::SlidingWindow => cap.saturating_sub(self.sliding_used(policy, now)),
        }
    }

    /// Takes `milli` milli-tokens at `now` (the caller checked they are [`Self::available`]).
    /// The first admission of a fresh window starts it.
    pub fn take(&mut self, policy: &Policy, milli: u64, now: i64) {
        match policy.kind {
            Kind::TokenBucket | Kind::SteppedBucket => self.tokens -= milli,
            Kind::FixedWindow | Kind::SlidingWindow => {
                if self.tokens == 0 && self.prev == 0 {
                    self.stamp = self.stamp.max(now);
                    if policy.kind == Kind::FixedWindow {
                        self.prev = policy.per_ms;
                    }
                }
                self.tokens += milli;
            }
        }
    }

    /// How long the current window lasts: a fixed window keeps the period of the call that
    /// started it (see [`Bucket::prev`]), so that a call with another period neither ends it
    /// early nor stretches it (Laravel's counter expires with the decay it was created with,
    /// Symfony's window keeps its interval); a state written before it was kept (0), and any
    /// other policy, last the call's period.
    fn window_ms(&self, policy: &Policy) -> u64 {
        match (policy.kind, self.kind) {
            (Kind::FixedWindow, Kind::FixedWindow) if self.prev > 0 => self.prev.min(MAX_PER_MS),
            _ => policy.per_ms,
        }
    }

    /// The earliest instant from which `milli` (at most the capacity) milli-tokens are
    /// available if nothing else is taken; any instant not after `now` means "now".
    fn ready_at(&self, policy: &Policy, milli: u64) -> i64 {
        let cap = policy.capacity();
        let end = after(self.stamp, self.window_ms(policy));
        match policy.kind {
            Kind::TokenBucket => {
                if self.tokens >= milli {
                    return self.stamp;
                }
                after(self.stamp, policy.time_to_earn(milli - self.tokens))
            }
            Kind::SteppedBucket => policy.stepped_ready_at(self.tokens, self.stamp, milli),
            Kind::FixedWindow => {
                if self.tokens.saturating_add(milli) <= cap {
                    self.stamp
                } else {
                    end
                }
            }
            Kind::SlidingWindow => {
                if self.tokens.saturating_add(milli) <= cap {
                    // In this window, once the previous one's share has shrunk enough.
                    let d = policy.latest_d(self.prev, cap - self.tokens - milli);
                    (end as i128 - d as i128).max(self.stamp as i128) as i64
                } else {
                    // In the next one, whose previous window is this one.
                    let room = cap.saturating_sub(milli);
                    let d = policy.latest_d(self.tokens, room);
                    (after(end, policy.per_ms) as i128 - d as i128).max(end as i128) as i64
                }
            }
        }
    }

    /// Milliseconds from `now` until `milli` milli-tokens are available (0 when they are).
    /// Exact for a state returned by [`Self::refill`].
    pub fn wait_for(&self, policy: &Policy, milli: u64, now: i64) -> u64 {
        if self.available(policy, now) >= milli {
            return 0;
        }
        (self.ready_at(policy, milli) as i128 - now as i128).max(0) as u64
    }

    /// Milliseconds from `now` until `milli` milli-tokens can be booked (0 when they are
    /// available now): the exact instant they are earned if nothing else is taken. A token
    /// bucket books any amount (a cost past the limit is a debt paid back at the rate); a
    /// window books a cost past its limit once nothing counts any more (it never fits).
    /// Exact for a state returned by [`Self::refill`].
    pub fn book_wait(&self, policy: &Policy, milli: u64, now: i64) -> u64 {
        let need = match policy.kind {
            Kind::TokenBucket | Kind::SteppedBucket => milli,
            Kind::FixedWindow | Kind::SlidingWindow => milli.min(policy.capacity()),
        };
        let wait = self.wait_for(policy, need, now);
        match policy.kind {
            // A debt stops at MAX_BOOKED (a booking then waits until it).
            Kind::TokenBucket | Kind::SteppedBucket if wait > 0 && now < MAX_BOOKED => {
                wait.min(MAX_BOOKED.abs_diff(now))
            }
            _ => wait,
        }
    }

    /// Takes `milli` milli-tokens booked `wait` ms after `now` (`wait` from
    /// [`Self::book_wait`]). A token bucket in debt holds nothing until the booked instant:
    /// `tokens = 0, stamp = now + wait`, a stamp ahead earns nothing until then (the fraction
    /// of a milli-token earned past the exact instant is withheld, never minted), and the
    /// next booking queues behind it. A window counts the booking in the current window, past
    /// its limit if need be (Symfony's `reserve` and Laravel's `hit` do): a fixed window
    /// forgets it at its end, a sliding one weighs it on the next window.
    ///
    /// A debt is marked in `prev` (unused by a token bucket, stored by every backend, and
    /// ignored by builds before reservations, which read the debt as a stamp ahead and earn
    /// nothing until it, exactly): the latest instant a booking was decided at, so that a
    /// clock read between it and the stamp is not counted as running backwards.
    pub fn book(&mut self, policy: &Policy, milli: u64, wait: u64, now: i64) {
        match policy.kind {
            Kind::TokenBucket if wait > 0 => {
                let decided = (now.max(1) as u64).max(self.prev);
                *self = Self {
                    prev: decided,
                    ..Self::tokens_at(0, after(now, wait))
                };
            }
            Kind::TokenBucket => self.take(policy, milli, now),
            // The step that pays the booking (on the bucket's steps: `now + wait` is the
            // instant `ready_at` found) keeps what it leaves over; nothing is there before.
            Kind::SteppedBucket if wait > 0 => {
                let decided = (now.max(1) as u64).max(self.prev);
                let at = after(now, wait);
                let steps = at.abs_diff(self.stamp.min(at)) / policy.per_ms;
                let held = (self.tokens as u128 + steps as u128 * policy.step_milli() as u128)
                    .min(policy.capacity() as u128) as u64;
                *self = Self {
                    tokens: held.saturating_sub(milli),
                    stamp: at,
                    prev: decided,
                    kind: Kind::SteppedBucket,
                };
            }
            Kind::SteppedBucket => self.take(policy, milli, now),
            Kind::FixedWindow | Kind::SlidingWindow => {
                self.take(policy, 0, now);
                self.tokens = self.tokens.saturating_add(milli).min(MAX_USED);
            }
        }
    }

    /// A token bucket booked ahead (see [`Self::book`]) and not yet at its stamp, read at or
    /// after the booking's decision.
    fn in_debt_at(&self, policy: &Policy, now: i64) -> bool {
        policy.kind.is_bucket()
            && self.kind == policy.kind
            && self.prev != 0
            && now < self.stamp
            && now as i128 >= self.prev as i128
    }

    /// A token bucket's debt at `now` in milli-tokens (rounded up): what the time from `now`
    /// to a booked stamp earns. 0 when it holds no booking. At most [`MAX_USED`], as a stepped
    /// bucket's and a window's count: a deep debt (forced charges of a large limit, a stepped
    /// debt up to MAX_BOOKED converted) stays exact in the scripts' doubles, which rounded it
    /// past 2^53 and wrote it as i64's least past 2^63.
    fn owed(&self, policy: &Policy, now: i64) -> u64 {
        if self.prev == 0 || self.stamp <= now {
            return 0;
        }
        let ahead = self.stamp.abs_diff(now) as u128;
        if policy.kind == Kind::SteppedBucket {
            // The steps still to come up to the stamp's, less what it leaves over (Symfony's
            // negative tokens).
            let steps = ahead.div_ceil(policy.per_ms as u128);
            // At most MAX_USED: a deep debt of forced charges stays exact in the scripts.
            let owed = (steps * policy.step_milli() as u128).saturating_sub(self.tokens as u128);
            return owed.min(MAX_USED as u128) as u64;
        }
        let owed = (ahead * policy.capacity() as u128).div_ceil(policy.per_ms as u128);
        owed.min(MAX_USED as u128) as u64
    }

    /// Whole tokens taken ahead of what the policy had and not yet earned back at `now`
    /// (rounded up): a token bucket's debt, a window's count past its limit.
    pub fn reserved(&self, policy: &Policy, now: i64) -> u64 {
        let cap = policy.capacity();
        let milli = match policy.kind {
            Kind::TokenBucket | Kind::SteppedBucket => self.owed(policy, now),
            Kind::FixedWindow => self.tokens.saturating_sub(cap),
            Kind::SlidingWindow => self.sliding_used(policy, now).saturating_sub(cap),
        };
        milli.div_ceil(MILLI)
    }

    /// Milliseconds until full again (a window: until nothing used counts any more).
    pub fn wait_until_full(&self, policy: &Policy, now: i64) -> u64 {
        self.wait_for(policy, policy.capacity(), now)
    }

    /// Milliseconds until one more whole token is available (0 when full).
    pub fn wait_for_next_token(&self, policy: &Policy, now: i64) -> u64 {
        let available = self.available(policy, now);
        if available >= policy.capacity() {
            return 0;
        }
        self.wait_for(policy, (available / MILLI + 1) * MILLI, now)
    }

    /// The wall-clock instant at which the bucket is full again (a window: nothing used counts
    /// any more): a bucket at or past it holds no information and may be dropped.
    pub fn full_at(&self, policy: &Policy) -> i64 {
        if self.kind != policy.kind {
            return self.stamp;
        }
        match policy.kind {
            Kind::TokenBucket => {
                let need = policy.capacity().saturating_sub(self.tokens);
                self.stamp.saturating_add(policy.time_to_earn(need) as i64)
            }
            Kind::SteppedBucket => self.ready_at(policy, policy.capacity()),
            Kind::FixedWindow | Kind::SlidingWindow => self.ready_at(policy, policy.capacity()),
        }
    }

    /// Whole tokens available at `now`.
    pub fn whole_tokens(&self, policy: &Policy, now: i64) -> u64 {
        self.available(policy, now) / MILLI
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn policy(limit: u64, per_ms: u64) -> Policy {
        Policy::new(limit, per_ms).unwrap()
    }

    #[test]
    fn policy_bounds_are_enforced() {
        assert_eq!(Policy::new(0, 1000), Err(PolicyError::LimitTooSmall));
        assert_eq!(
            Policy::new(MAX_LIMIT + 1, 1000),
            Err(PolicyError::LimitTooLarge)
        );
        assert_eq!(Policy::new(1, 0), Err(PolicyError::PerTooSmall));
        assert_eq!(
            Policy::new(1, MAX_PER_MS + 1),
            Err(PolicyError::PerTooLarge)
        );
        assert!(Policy::new(MAX_LIMIT, MIN_PER_MS).is_ok());
        assert!(Policy::new(1, MAX_PER_MS).is_ok());
    }

    #[test]
    fn seconds_convert_to_milliseconds() {
        assert_eq!(Policy::per_ms_from_seconds(0.001), Some(1));
        assert_eq!(Policy::per_ms_from_seconds(60.0), Some(60_000));
        assert_eq!(Policy::per_ms_from_seconds(1e9), Some(MAX_PER_MS));
        assert_eq!(Policy::per_ms_from_seconds(f64::NAN), None);
        assert_eq!(Policy::per_ms_from_seconds(f64::INFINITY), None);
        assert_eq!(Policy::per_ms_from_seconds(2e9), None);
    }

    #[test]
    fn a_new_bucket_is_full() {
        let p = policy(5, 60_000);
        assert_eq!(Bucket::full(&p, 7).tokens, 5000);
    }

    #[test]
    fn refill_is_continuous() {
        let p = policy(60, 60_000); // one token per second
        let b = Bucket::tokens_at(0, 0);
        assert_eq!(b.refill(&p, 500).bucket.tokens, 500);
        assert_eq!(b.refill(&p, 2_000).bucket.tokens, 2_000);
    }

    #[test]
    fn refill_never_exceeds_capacity() {
        let p = policy(5, 1_000);
        let b = Bucket::tokens_at(4_000, 0);
        let r = b.refill(&p, 1_000_000).bucket;
        assert_eq!(r, Bucket::tokens_at(5_000, 1_000_000));
    }

    #[test]
    fn slow_buckets_polled_often_still_refill() {
        // 5 per day earns one milli-token every 17.28 s; poll every second for a day.
        let p = policy(5, 86_400_000);
        let mut b = Bucket::tokens_at(0, 0);
        for t in (1_000..=86_400_000).step_by(1_000) {
            b = b.refill(&p, t).bucket;
        }
        assert_eq!(b.tokens, 5_000);
    }

    #[test]
    fn backwards_clock_mints_nothing_and_keeps_the_stamp() {
        let p = policy(10, 1_000);
        let b = Bucket::tokens_at(1_000, 50_000);
        let r = b.refill(&p, 40_000);
        assert!(r.clock_regressed);
        assert_eq!(r.bucket, b);
    }

    #[test]
    fn a_shrunk_policy_clamps_the_tokens() {
        let b = Bucket::tokens_at(9_000, 0);
        assert_eq!(b.refill(&policy(3, 1_000), 0).bucket.tokens, 3_000);
    }

    #[test]
    fn extreme_policies_do_not_overflow() {
        let p = policy(MAX_LIMIT, MIN_PER_MS);
        let b = Bucket::tokens_at(0, 0);
        assert_eq!(b.refill(&p, i64::MAX).bucket.tokens, p.capacity());
        let p = policy(1, MAX_PER_MS);
        assert_eq!(b.wait_until_full(&p, 0), MAX_PER_MS);
        assert_eq!(Bucket::tokens_at(0, i64::MAX).full_at(&p), i64::MAX);
    }

    #[test]
    fn wait_for_is_exact() {
        let p = policy(3, 1_000); // 3 milli-tokens per ms
        let b = Bucket::tokens_at(0, 100);
        let w = b.wait_for(&p, 1_000, 100);
        assert_eq!(w, 334);
        assert_eq!(b.refill(&p, 100 + w as i64 - 1).bucket.tokens / 1000, 0);
        assert_eq!(b.refill(&p, 100 + w as i64).bucket.tokens / 1000, 1);
    }

    #[test]
    fn next_token_wait_counts_the_fraction_held() {
        let p = policy(1, 1_000); // one milli-token per ms
        let b = Bucket::tokens_at(0, 0).refill(&p, 400).bucket;
        assert_eq!(b.wait_for_next_token(&p, 400), 600);
        assert_eq!(Bucket::full(&p, 0).wait_for_next_token(&p, 0), 0);
    }

    proptest! {
        /// However calls are spaced, costs chosen and the clock jumps back, the tokens taken
        /// never exceed one bucket plus what the elapsed time earned.
        #[test]
        fn never_admits_more_than_capacity_plus_refill(
            limit in 1u64..50,
            per_ms in 1u64..100_000,
            steps in proptest::collection::vec((-5_000i64..20_000, 1u64..5), 1..300),
        ) {
            let p = policy(limit, per_ms);
            let start = 1_000_000i64;
            let (mut now, mut latest) = (start, start);
            let mut b = Bucket::full(&p, now);
            let mut taken: u128 = 0;
            for (dt, cost) in steps {
                now = (now + dt).max(0);
                latest = latest.max(now);
                let r = b.refill(&p, now);
                b = r.bucket;
                prop_assert!(b.stamp <= latest);
                let cost = cost.min(limit) * MILLI;
                if b.tokens >= cost {
                    b.tokens -= cost;
                    taken += cost as u128;
                }
            }
            let bound = p.capacity() as u128
                + (latest - start) as u128 * p.capacity() as u128 / per_ms as u128;
            prop_assert!(taken <= bound, "taken {} > bound {}", taken, bound);
        }

        /// Any stored state (a damaged file may hold anything) refills without panicking and
        /// never beyond capacity.
        #[test]
        fn any_stored_state_refills_within_capacity(
            tokens in any::<u64>(), stamp in any::<i64>(), now in any::<i64>(),
            limit in 1u64..=MAX_LIMIT, per_ms in MIN_PER_MS..=MAX_PER_MS,
        ) {
            let p = policy(limit, per_ms);
            let b = Bucket::tokens_at(tokens, stamp).refill(&p, now).bucket;
            prop_assert!(b.tokens <= p.capacity());
            let _ = (b.wait_until_full(&p, now), b.wait_for_next_token(&p, now), b.full_at(&p));
        }

        /// A clock that only runs backwards from the last stamp never adds a milli-token.
        #[test]
        fn backwards_clock_never_mints(tokens in 0u64..5_000, back in 1i64..1_000_000) {
            let p = policy(5, 1_000);
            let b = Bucket::tokens_at(tokens, 2_000_000);
            let r = b.refill(&p, 2_000_000 - back);
            prop_assert!(r.clock_regressed);
            prop_assert_eq!(r.bucket.tokens, tokens);
            prop_assert_eq!(r.bucket.stamp, 2_000_000);
        }

        /// Polling often keeps the earnings: refilling at many instants never credits more
        /// than refilling once, and withholds at most the rounding of each step (less than
        /// one millisecond of earnings per poll), never the time base.
        #[test]
        fn frequent_polling_keeps_the_earnings(
            per_ms in 1u64..10_000_000,
            polls in proptest::collection::vec(1i64..50_000, 1..100),
        ) {
            let p = policy(7, per_ms);
            let start = Bucket::tokens_at(0, 0);
            let mut b = start;
            let mut now = 0;
            let n = polls.len() as u64;
            for dt in polls {
                now += dt;
                b = b.refill(&p, now).bucket;
            }
            let once = start.refill(&p, now).bucket;
            prop_assert!(b.tokens <= once.tokens);
            let per_poll = p.capacity().div_ceil(per_ms) + 1;
            prop_assert!(once.tokens - b.tokens <= n * per_poll,
                "lost {} over {} polls", once.tokens - b.tokens, n);
        }
    }
}

mod refund;
pub use refund::{refund, Refunded};

#[cfg(test)]
mod model_tests;

#[cfg(test)]
mod reserve_tests;
