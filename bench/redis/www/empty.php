<?php
// The empty endpoint: what nginx + php-fpm cost without any limiter.
echo "ok\n";
