<?php
// Occupies its worker for ?ms=N milliseconds and ends the request: the request end writes what
// the worker holds back when its last write is a second old (see php-tests/status/run).
usleep(1000 * (int)($_GET['ms'] ?? 0));
header('X-Worker-Pid: ' . getmypid());
