<?php
// The endpoint that does nothing: the baseline of the end-to-end figures.
echo "ok\n";
