<?php
// A worker script of a harness thread (php-tests/zts/harness.c), as FrankenPHP's worker mode
// runs one: one PHP request serving many logical requests, each between sapi_activate() and
// sapi_deactivate(), with no request shutdown in between.
['thread' => $t] = harness_where();
$last = harness_plan()['worker_requests'] - 1;
$served = 0;
$handler = function () use ($t, $last, &$served): void {
    ['request' => $r] = harness_where();
    // The previous logical request's end (sapi_deactivate) ended its lease: nothing is held,
    // so the list of held leases never grows past one request's.
    $held = ratelimit_end_request();
    if ($held !== 0) {
        harness_fail("began holding $held live leases");
    }
    if ($r !== $last) {
        // One slot: a lease left live by the previous logical request would deny.
        $d = ratelimit_acquire("worker-$t", 1000, 1e9, 1);
        if (!$d->allowed) {
            harness_fail("own subject denied: $d->reason");
        }
        // $d is forgotten, not released.
    }
    if ($r === 0) {
        harness_hold_until_all_started();
    }
    // The last logical request takes no lease: its denials are held back until the thread ends.
    for ($i = 0; $i < 2; $i++) {
        ratelimit_acquire('worker-shared', 50, 1e9);
    }
    $served++;
};
while (harness_handle_request($handler)) {
}
if ($served !== $last + 1) {
    harness_fail("served $served logical requests");
}
