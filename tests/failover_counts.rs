//! Counts handed to the Redis stack at process end (the limiter's `shutdown`) while Redis
//! refuses connections: the local fallback is there to write them; none may be lost. A port
//! nobody listens on refuses at once, so no server is needed.

use ratelimit::core::bucket::Policy;
use ratelimit::core::config::Config;
use ratelimit::core::counters::Counters;
use ratelimit::core::decision::{Ask, Source};
use ratelimit::core::subject::BucketKey;
use ratelimit::opslog::OpsLog;
use ratelimit::stack::{self, Clocks};
use ratelimit::storage::sqlite::SqliteStore;
use ratelimit::storage::{system_clock, Reports, StoreExt};

#[test]
fn counts_flushed_while_redis_refuses_are_written_by_the_local_fallback() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("rl.sqlite");
    let mut config = Config::defaults();
    for (name, value) in [
        ("ratelimit.db_path", db.to_str().unwrap()),
        ("ratelimit.backend", "redis"),
        ("ratelimit.redis_url", "redis://127.0.0.1:1"),
        ("ratelimit.redis_fallback", "local"),
        ("ratelimit.redis_breaker_failures", "100"),
    ] {
        config.set(name, value).unwrap();
    }
    let mut store = stack::store(&config, &db, &Clocks::system(), &OpsLog::none()).unwrap();
    let mut carry = Counters::ZERO;
    let key = BucketKey {
        bucket: [1; 16],
        group: [2; 16],
        previous: None,
    };
    let ask = Ask::new(Policy::new(5, 60_000).unwrap(), 1, 0);
    let a = store.acquire(&key, &ask, 60_000, &mut carry).unwrap();
    assert_eq!(
        a.verdict.source,
        Source::Fallback,
        "Redis refused: decided locally"
    );
    // What the limiter still holds at its end: an "unavailable" decision it could not write.
    carry.unavailable = 1;
    let _ = store.flush(&mut carry);
    drop(store);
    let mut local = SqliteStore::open(&db, 1_000, 1_000, system_clock()).unwrap();
    let written = Reports::stats(&mut local).unwrap().counters;
    assert_eq!(
        written.unavailable + carry.unavailable,
        1,
        "the unavailable decision was neither written nor left in the carry: {written:?}"
    );
    assert_eq!(
        written.redis_errors + carry.redis_errors,
        2,
        "the failed acquire and the failed flush"
    );
}
