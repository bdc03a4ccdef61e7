<?php
// The negative control of the console check: a page that does log a console error.
?>
<!DOCTYPE html>
<html lang="en"><head><meta charset="utf-8"><link rel="icon" href="data:,"><title>control</title></head>
<body><p>control</p><script>console.error("rl-negative-control");</script></body></html>
