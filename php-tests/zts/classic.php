<?php
// One classic request of a harness thread (php-tests/zts/harness.c): a whole PHP request, as
// FrankenPHP runs each request outside worker mode; also the one request of each "unfreed"
// thread. Every expectation that fails is reported with harness_fail().
['phase' => $phase, 'thread' => $t, 'request' => $r] = harness_where();
$plan = harness_plan();
$last = $phase === 'classic' ? $plan['classic_requests'] - 1 : 0;
// The subject all threads of the phase share: its limit, and the calls each request makes.
[$limit, $calls] = ['classic' => [100, 4], 'unfreed' => [5, 10]][$phase];

// This thread's previous request ended its lease: nothing is held any more.
$held = ratelimit_end_request();
if ($held !== 0) {
    harness_fail("began holding $held live leases");
}

if ($r !== $last) {
    // The thread's own subject has one slot: a lease an earlier request left live would deny.
    $d = ratelimit_acquire("$phase-$t", 1000, 1e9, 1);
    if (!$d->allowed) {
        harness_fail("own subject denied: $d->reason");
    }
    // $d is not released: the request's end does it.
}
if ($r === 0) {
    // Holding that lease, wait until every later thread of the phase has started, each
    // applying php.ini again: this worker must keep its configuration, and so its lease.
    harness_hold_until_all_started();
}

// Most of these are denied. The thread's last request takes no lease, so nothing is written at
// its end: what it was denied is held back by the thread's worker until the thread ends.
for ($i = 0; $i < $calls; $i++) {
    ratelimit_acquire("$phase-shared", $limit, 1e9);
}
