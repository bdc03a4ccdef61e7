<?php
// No rate limit: the baseline for the memory comparison.
header('X-Worker-Pid: ' . getmypid());
header('X-RateLimit-Reason: none');
echo "hello\n";
