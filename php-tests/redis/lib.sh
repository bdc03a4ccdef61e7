# shellcheck shell=bash
# shellcheck disable=SC2016 # awk programs in single quotes, on purpose
# The php-fpm hosts of the Redis runners (php-tests/redis/run, php-tests/sentinel/run) and their
# answers, on top of scripts/lib/harness.sh (sourced first: SO, T, N and the rl_ functions).
# Sourced; defines functions only, and WWW, the pages the hosts serve (php-tests/redis/www).
#
# Hosts
#   host_pool HOST [LINE..]          a host's pool lines (see below)
#   start_host HOST N [LINE..]       php-fpm master HOST with N workers and those pool lines
#   front NAME HOST...               nginx in front of hosts: sets PORT_<HOST> for each
#   url HOST PATH?QUERY              the URL of a page on that host
# Answers, one line each: code pid reason host source us error (tab-separated)
#   fire P < URLs                    one request per URL, P at a time
#   one URL                          a single answer line
#   n_where AWK-COND FILE            how many lines meet the condition
#   tally COLUMN FILE                "value:count ..." of a column ("-" for empty)
#   codes FILE                       tally of the status codes
#   max_col / min_col COLUMN FILE..  the largest / smallest number in a column (0 when none)
#   med_col COLUMN FILE..            the median of a column (0 when none)
#   max_us FILE..                    the largest of the us column (how long a call took)

WWW=$RL_ROOT/php-tests/redis/www

# Pool lines of a Redis host: NAME (env RL_HOST), its own SQLite file, the shared key ($T/key)
# and, when HOST_REDIS_URL is set, that redis_url; a LINE given sets its directive instead of the
# default (php-fpm keeps the first php_admin_value of a directive and ignores the others, so a
# default must not come first).
host_pool() { # host_pool HOST [LINE..]
  local h=$1 l d defaults
  shift
  echo "env[RL_HOST] = $h"
  defaults=("php_admin_value[ratelimit.backend] = redis"
    "php_admin_value[ratelimit.db_path] = $T/db-t$N-$h.sqlite"
    "php_admin_value[ratelimit.key_file] = $T/key")
  [ -z "${HOST_REDIS_URL:-}" ] || defaults+=("php_admin_value[ratelimit.redis_url] = $HOST_REDIS_URL")
  for l in "${defaults[@]}"; do
    d=${l%%]*}
    [[ " $* " == *" $d]"* ]] || echo "$l"
  done
  for l in "$@"; do echo "$l"; done
}
start_host() { # start_host HOST N [LINE..]
  local h=$1 n=$2 lines
  shift 2
  mapfile -t lines < <(host_pool "$h" "$@")
  rl_fpm_start "$h" "$n" "$SO" "${lines[@]}"
}
front() { # front NAME HOST...
  local name=$1 h args=() p
  shift
  for h in "$@"; do
    p=$(rl_free_port)
    printf -v "PORT_$h" '%s' "$p"
    args+=("$p" "$T/$h/fpm.sock")
  done
  rl_nginx_start "$name" "$WWW" "${args[@]}"
}
url() { local v="PORT_$1"; echo "http://127.0.0.1:${!v}/$2"; }

fire() {
  timeout --foreground 120 xargs -P "$1" -n 1 curl -s -o /dev/null --max-time 30 \
    -w '%{http_code}\t%header{x-worker-pid}\t%header{x-ratelimit-reason}\t%header{x-host}\t%header{x-source}\t%header{x-us}\t%header{x-error}\n' || true
}
one() { fire 1 <<<"$1"; }
n_where() { awk -F'\t' "$1 { n++ } END { print n + 0 }" "$2"; }
tally() { awk -F'\t' -v c="$1" '{ k = $c == "" ? "-" : $c; n[k]++ } END { for (k in n) { printf "%s%s:%d", s, k, n[k]; s = " " } }' "$2"; }
codes() { tally 1 "$1"; }
max_col() { local c=$1; shift; awk -F'\t' -v c="$c" '$c != "" && $c + 0 > m { m = $c + 0 } END { printf "%.0f\n", m }' "$@"; }
min_col() { local c=$1; shift; awk -F'\t' -v c="$c" '$c != "" && (m == "" || $c + 0 < m) { m = $c + 0 } END { printf "%.0f\n", m }' "$@"; }
max_us() { max_col 6 "$@"; }
med_col() { local c=$1; shift; awk -F'\t' -v c="$c" '$c != "" { print $c + 0 }' "$@" | sort -n | awk '{ v[NR] = $1 } END { printf "%.0f\n", NR ? v[int((NR + 1) / 2)] : 0 }'; }
