# shellcheck shell=bash
# The one harness of the shell runners (php-tests/{fpm,redis,sentinel,trust,status}/run,
# bridges/tests/run, bench/, scripts/redis, ./demo): processes started in the background and
# stopped by PID, bounded waits, free ports, the run's directory, php-fpm masters and nginx on
# 127.0.0.1, counted requests, and the "ok N - ..." lines with their summary. Sourced; a runner
# keeps only its tests (the two Redis runners also share php-tests/redis/lib.sh).
#
# The run
#   rl_deadline VAR DEFAULT "$0" "$@"   re-runs the script under `timeout` ($VAR seconds, else
#                                    DEFAULT); the first line of a runner
#   rl_extension [FUNCTION]          SO: $RATELIMIT_SO or scripts/build's .so, checked to load
#                                    into php (with FUNCTION, default ratelimit_acquire), else
#                                    "Bail out!" and exit 1
#   rl_start_run NAME [FUNCTION]     a test runner's start: RUST_BACKTRACE=0, rl_extension,
#                                    rl_rundir NAME
#   rl_rundir NAME                   T: a new mktemp -d dir for every file of the run (configs,
#                                    sockets, logs, databases), removed on exit (kept with
#                                    RL_KEEP=1); sets the traps of rl_traps
#   rl_init DIR                      use DIR (which the caller keeps) instead; either also finds
#                                    php-fpm and nginx (RL_FPM_BIN, RL_NGINX_BIN; rl_servers)
#   rl_traps                         on any exit or signal: rl_stop_all, the hooks of
#                                    rl_on_exit, then the dir of rl_rundir removed
#   rl_on_exit COMMAND               one more thing to stop on exit (eval'd)
#   rl_bench_args RUNNER ARGS...     a benchmark's options: --quick (quick=1), --peers a,b (peers,
#                                    each one of all_peers, which the caller sets), --help
#   rl_bench_run_dir DIR PREFIX      run: a new DIR/PREFIX-DATE; of the older ones 2 are kept
# Processes
#   rl_now_ms / rl_alive PID         milliseconds since the epoch / running (a zombie is not)
#   rl_wait_for SECONDS COMMAND...   poll every 50 ms until COMMAND succeeds; 1 on time out
#   rl_sleep_until NS                sleep until NS nanoseconds since the epoch (at once if past)
#   rl_gone PID...                   none of the PIDs is running
#   rl_stop_pids SECONDS PID...      wait that long for the PIDs to end, SIGKILL what is left,
#                                    wait until it is gone; 1 if one stays
#   rl_stop_session SID SIG [SECS] [each]   SIG to the leader of session SID (to each of its
#                                    processes with "each"), then rl_stop_pids of all the
#                                    session (default 10 s), then SIGKILL to stragglers
#   rl_bg COMMAND...                 COMMAND in a session of its own in the background (RL_BG_PID),
#                                    stopped with its whole session by rl_stop_all
#   rl_fg COMMAND...                 the same, waited for: a signal reaches the traps at once
#   rl_wait_bg SECONDS PID           wait for an rl_bg PID at most SECONDS, then stop its session;
#                                    its exit status, 124 when it had to be stopped
#   rl_free_port                     print a free TCP port on 127.0.0.1 (not one given before)
# php-fpm and nginx
#   rl_fpm_start NAME N SO [LINE..]  php-fpm master NAME with N static workers, the extension SO
#                                    loaded with -d extension= ("" for none), extra pool LINEs;
#                                    listens on $RL_DIR/NAME/fpm.sock
#   rl_fpm_stop NAME [SIG]           stop it (default QUIT: finish the running requests)
#   rl_fpm_workers NAME              print its worker PIDs
#   rl_nginx_start NAME WWW PORT SOCK [PORT SOCK..]   nginx serving WWW: PORT -> SOCK
#   rl_stop_all                      stop every process started here (the traps call it)
# Requests
#   rl_fire URL N P                  N GETs, P at a time; prints "code<TAB>pid<TAB>reason" lines
#   rl_fire_urls P                   same, one request per URL read from stdin
#   rl_count FILE CODE               how many lines of FILE have status CODE
#   rl_pids FILE [CODE]              distinct X-Worker-Pid values (of CODE answers), sorted
#   rl_nwords STRING                 how many words
# Results: N (the test's number), PASSED, FAILED
#   rl_report OK TEXT [WHY]          the next test's line, "ok N - TEXT" (OK 0) or
#                                    "not ok N - TEXT; WHY", counted
#   rl_run_tests RUNNER [N..]        runs TESTS (pairs: function, description), or those
#                                    numbered, each in a subshell that stops its own processes
#                                    and reports with result OK FIGURES [WHY] or verdict FIGURES
#                                    [WHY..]; then rl_summary; its status is the run's
#   rl_summary                       "N passed, N failed" (and how many were not selected);
#                                    non-zero when one failed. A run of rl_report cut short by
#                                    a signal gets one more failed line and the summary on exit
#                                    (on stderr)

RL_ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
RL_DIR="" RL_TEMP=0 RL_DEADLINE_SECS=""
declare -ga RL_EXIT_HOOKS=() RL_SESSIONS=()
RL_BG_PID=""

# ---- the run ----

rl_deadline() {
  local var=$1 def=$2 mark="${1}_UNDER_DEADLINE"
  shift 2
  RL_DEADLINE_SECS=${!var:-$def}
  [ -z "${!mark:-}" ] || return 0
  export "$mark=1"
  exec timeout -k 30 "$RL_DEADLINE_SECS" "$@"
}

rl_extension() {
  local fn=${1:-ratelimit_acquire}
  SO=${RATELIMIT_SO:-}
  if [ -z "$SO" ]; then
    SO=$("$RL_ROOT/scripts/build") || { echo "Bail out! scripts/build failed"; exit 1; }
  fi
  SO=$(readlink -f "$SO")
  if ! php -n -d "extension=$SO" -r "exit(function_exists('$fn') ? 0 : 1);" >/dev/null 2>&1; then
    echo "Bail out! $SO does not load into php, or has no $fn() (php -n -d extension=$SO -m)"
    exit 1
  fi
}

rl_start_run() {
  export RUST_BACKTRACE=0
  rl_extension "${2:-}"
  rl_rundir "$1"
}

rl_init() {
  RL_DIR=$1
  mkdir -p "$RL_DIR"
  rl_servers
}

rl_rundir() {
  T=$(mktemp -d "${TMPDIR:-/tmp}/ratelimit-$1.XXXXXX")
  rl_init "$T"
  RL_TEMP=1
  rl_traps
}

rl_traps() {
  trap _rl_exit EXIT
  trap 'exit 143' INT TERM HUP
}

rl_on_exit() { RL_EXIT_HOOKS+=("$1"); }

_rl_exit() {
  local h
  # A runner of rl_report cut short: say so. On stderr: a signal may come while the shell's
  # stdout is redirected into one of the run's files (a { ...; } >FILE block).
  if ((RL_REPORTED && !RL_SUMMARY_SHOWN)); then
    { rl_report 1 "the rest of the run: interrupted (timeout after ${RL_DEADLINE_SECS:-?} s?)"; rl_summary || true; } >&2
  fi
  rl_stop_all
  for h in "${RL_EXIT_HOOKS[@]}"; do eval "$h" || true; done
  ((RL_TEMP)) || return 0
  if [ -n "${RL_KEEP:-}" ]; then echo "# kept $RL_DIR" >&2; else rm -rf "$RL_DIR"; fi
}

# shellcheck disable=SC2034 # peers and quick are the caller's
rl_bench_args() {
  local runner=$1 p
  shift
  peers=("${all_peers[@]}") quick=0
  while (($#)); do
    case "$1" in
      --quick) quick=1 ;;
      --peers) IFS=, read -r -a peers <<<"${2:?--peers needs a list}"; shift ;;
      --peers=*) IFS=, read -r -a peers <<<"${1#--peers=}" ;;
      -h | --help) awk 'NR > 1 && /^#/ { sub(/^# ?/, ""); print; next } NR > 1 { exit }' "$0"; exit 0 ;;
      *) echo "$runner: unknown argument $1 (see --help)" >&2; exit 2 ;;
    esac
    shift
  done
  for p in "${peers[@]}"; do
    [[ " ${all_peers[*]} " == *" $p "* ]] || { echo "$runner: unknown peer $p" >&2; exit 2; }
  done
}

rl_bench_run_dir() {
  mkdir -p "$1"
  # shellcheck disable=SC2012 # names made here, newest first
  { ls -1dt "$1/$2"-* 2>/dev/null || true; } | tail -n +3 | while read -r old; do rm -rf "$old"; done
  run="$1/$2-$(date +%Y%m%d-%H%M%S)"
  mkdir -p "$run"
}

# ---- processes ----

rl_now_ms() { date +%s%3N; }

# A zombie has ended: only its parent has not read its status yet.
# No fork: it runs in every poll. The state is the field after the command's ") ".
rl_alive() {
  local st
  [ -n "$1" ] && read -r st 2>/dev/null <"/proc/$1/stat" || return 1
  st=${st##*) }
  [ "${st%% *}" != Z ]
}

rl_wait_for() {
  local deadline=$(($(rl_now_ms) + $1 * 1000))
  shift
  until "$@"; do
    (($(rl_now_ms) < deadline)) || return 1
    sleep 0.05
  done
}

rl_sleep_until() {
  local d=$(($1 - $(date +%s%N)))
  ((d > 0)) && sleep "$(awk -v d="$d" 'BEGIN { printf "%.3f", d / 1e9 }')"
  return 0
}

rl_gone() { local p; for p in "$@"; do ! rl_alive "$p" || return 1; done; }

rl_stop_pids() {
  local secs=$1 p
  shift
  (($#)) || return 0
  rl_wait_for "$secs" rl_gone "$@" && return 0
  for p in "$@"; do kill -KILL "$p" 2>/dev/null || true; done
  rl_wait_for 5 rl_gone "$@" && return 0
  echo "harness: pid(s) $* still alive after SIGKILL" >&2
  return 1
}

rl_stop_session() {
  local sid=$1 sig=$2 secs=${3:-10} left to=$1
  # A session already empty (its leader SIGKILLed by a test) is no error: under set -e and
  # pipefail the failing pgrep would end the caller, an EXIT trap's rl_stop_all, before it
  # stopped the sessions after this one.
  [ "${4:-}" != each ] || to="$sid $(pgrep -s "$sid" | tr '\n' ' ' || true)"
  # shellcheck disable=SC2086 # a list of PIDs
  kill "-$sig" $to 2>/dev/null || true
  # shellcheck disable=SC2046 # a list of PIDs
  rl_stop_pids "$secs" "$sid" $(pgrep -s "$sid" || true) || true
  left=$(pgrep -s "$sid" || true)
  # shellcheck disable=SC2086 # a list of PIDs
  [ -z "$left" ] || kill -KILL $left 2>/dev/null || true
}

# setsid in a non-interactive shell's background job runs COMMAND as the leader of a new session
# (no fork: its PID is $!), so that whatever it forks is found again by that session's id.
rl_bg() {
  setsid --wait "$@" &
  RL_BG_PID=$!
  RL_SESSIONS+=("$RL_BG_PID")
}

rl_fg() {
  rl_bg "$@"
  local pid=$RL_BG_PID rc=0
  wait "$pid" || rc=$?
  _rl_forget "$pid"
  return "$rc"
}

rl_wait_bg() {
  local secs=$1 pid=$2 rc=0 stopped=0 left
  if ! rl_wait_for "$secs" rl_gone "$pid"; then
    rl_stop_session "$pid" TERM 10 each
    stopped=1
  fi
  wait "$pid" 2>/dev/null || rc=$?
  ((stopped == 0)) || rc=124
  left=$(pgrep -s "$pid" || true)   # what it forked and left running
  # shellcheck disable=SC2086 # a list of PIDs
  [ -z "$left" ] || kill -KILL $left 2>/dev/null || true
  _rl_forget "$pid"
  return "$rc"
}

_rl_forget() {
  local s kept=()
  for s in "${RL_SESSIONS[@]}"; do [ "$s" = "$1" ] || kept+=("$s"); done
  RL_SESSIONS=("${kept[@]}")
}

rl_free_port() {
  # The kernel picks a free port; a tiny race with other programs is acceptable here. Not one
  # handed out before in this run (kept in $RL_DIR/ports): ports are only bound once a server
  # starts, and the kernel may offer the same one twice before that; two nginx servers on one
  # port would send one master's requests to another's.
  local p i given=${RL_DIR:+$RL_DIR/ports}
  for ((i = 0; i < 100; i++)); do
    if command -v php >/dev/null; then
      # shellcheck disable=SC2016 # PHP code
      p=$(php -n -r '$s = stream_socket_server("tcp://127.0.0.1:0", $e, $m) or exit(1);
                     echo substr(strrchr(stream_socket_get_name($s, false), ":"), 1), "\n";') || return 1
    else
      p=$(python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])') || return 1
    fi
    if [ -z "$given" ] || ! grep -qx "$p" "$given" 2>/dev/null; then
      [ -z "$given" ] || echo "$p" >>"$given"
      echo "$p"
      return 0
    fi
  done
  echo "rl_free_port: no new free port" >&2
  return 1
}

# ---- php-fpm and nginx ----

# The php-fpm of the same PHP version as the `php` on PATH (the one the tests and the extension
# are built with): php-fpm8.4 in the PHP 8.4 root, php-fpm8.2 on Debian 12; $PHP_FPM overrides.
_rl_find_fpm() {
  local v f
  v=$(php -n -r 'echo PHP_MAJOR_VERSION, ".", PHP_MINOR_VERSION;' 2>/dev/null) || v=""
  for f in ${v:+php-fpm$v} php-fpm; do
    command -v "$f" && return 0
    [ -x "/usr/sbin/$f" ] && { echo "/usr/sbin/$f"; return 0; }
  done
  echo "php-fpm${v}"
}
_rl_found() { [ -n "$1" ] && { command -v "$1" >/dev/null || [ -x "$1" ]; }; }
# RL_FPM_BIN and RL_NGINX_BIN, found by rl_init (not when sourced: scripts/redis, which sources
# this file, runs during timed tests and must start no php of its own).
RL_FPM_BIN="" RL_NGINX_BIN=""
rl_servers() {
  _rl_found "$RL_FPM_BIN" || RL_FPM_BIN=${PHP_FPM:-$(_rl_find_fpm)}
  _rl_found "$RL_NGINX_BIN" || RL_NGINX_BIN=${NGINX:-$(command -v nginx || echo /usr/sbin/nginx)}
}
declare -gA RL_FPM_PID=()    # NAME -> master PID
declare -ga RL_NGINX_PIDS=()

rl_fpm_start() {
  local name=$1 workers=$2 so=$3; shift 3
  local d="$RL_DIR/$name"
  rl_servers   # again: a caller may have installed them since
  mkdir -p "$d"
  {
    echo "[global]"
    echo "pid = $d/fpm.pid"
    echo "error_log = $d/fpm.log"
    echo "log_level = notice"
    echo "daemonize = no"
    echo "[pool]"
    echo "listen = $d/fpm.sock"
    echo "pm = static"
    echo "pm.max_children = $workers"
    echo "request_terminate_timeout = 60s"
    echo "catch_workers_output = yes"
    echo "decorate_workers_output = no"
    echo "clear_env = yes"
    echo "env[RUST_BACKTRACE] = 0"
    echo "env[RL_TMP] = $RL_DIR"
    echo "php_admin_flag[log_errors] = on"
    echo "php_admin_flag[display_errors] = off"
    echo "php_admin_value[error_log] = $d/php-errors.log"
    local line
    for line in "$@"; do echo "$line"; done
  } >"$d/fpm.conf"
  local args=(-F -R -y "$d/fpm.conf" -p "$d")
  [ -z "$so" ] || args+=(-d "extension=$so")
  rm -f "$d/fpm.sock"
  "$RL_FPM_BIN" "${args[@]}" >>"$d/fpm.out" 2>&1 &
  local pid=$!
  disown "$pid"   # reaped silently; no "Killed" notice when a test kills it
  RL_FPM_PID[$name]=$pid
  if ! rl_wait_for 10 _rl_fpm_ready "$d" "$workers" "$pid" || ! rl_alive "$pid"; then
    echo "php-fpm $name did not start; its log:" >&2
    cat "$d/fpm.out" "$d/fpm.log" >&2 2>/dev/null || true
    return 1
  fi
}

# Ready when the socket exists and all workers are forked (or the master is gone).
_rl_fpm_ready() { ! rl_alive "$3" || { [ -S "$1/fpm.sock" ] && (($(pgrep -c -P "$3") >= $2)); }; }
_rl_nginx_ready() { ! rl_alive "$2" || curl -s -o /dev/null --max-time 1 "http://127.0.0.1:$1/"; }

rl_fpm_workers() {
  local pid=${RL_FPM_PID[$1]:-}
  [ -n "$pid" ] || return 0
  pgrep -P "$pid" || true
}

rl_fpm_stop() {
  local name=$1 sig=${2:-QUIT}
  local pid=${RL_FPM_PID[$name]:-}
  [ -n "$pid" ] || return 0
  # The master calls setsid(): its session holds the workers, also those it respawned and any
  # that outlive it, so they are found by its session id.
  rl_stop_session "$pid" "$sig"
  unset "RL_FPM_PID[$name]"
}

rl_nginx_start() {
  local name=$1 www=$2; shift 2
  local d="$RL_DIR/$name" port=$1
  rl_servers
  mkdir -p "$d/tmp"
  {
    echo "daemon off;"
    echo "user root;"
    echo "worker_processes 1;"
    echo "pid $d/nginx.pid;"
    echo "error_log $d/nginx-error.log warn;"
    echo "events { worker_connections 1024; }"
    echo "http {"
    echo "  access_log off;"
    local t
    for t in client_body proxy fastcgi uwsgi scgi; do echo "  ${t}_temp_path $d/tmp/$t;"; done
    while (($# >= 2)); do
      cat <<EOF
  server {
    listen 127.0.0.1:$1;
    root $www;
    location ~ \.php\$ {
      fastcgi_pass unix:$2;
      fastcgi_param SCRIPT_FILENAME \$document_root\$fastcgi_script_name;
      fastcgi_param SCRIPT_NAME \$fastcgi_script_name;
      fastcgi_param QUERY_STRING \$query_string;
      fastcgi_param REQUEST_METHOD \$request_method;
      fastcgi_param REQUEST_URI \$request_uri;
      fastcgi_param SERVER_PROTOCOL \$server_protocol;
      fastcgi_param REMOTE_ADDR \$remote_addr;
      fastcgi_param SERVER_NAME \$server_name;
      fastcgi_param SERVER_PORT \$server_port;
    }
  }
EOF
      shift 2
    done
    echo "}"
  } >"$d/nginx.conf"
  "$RL_NGINX_BIN" -c "$d/nginx.conf" -p "$d" -e "$d/nginx-error.log" >>"$d/nginx.out" 2>&1 &
  local pid=$!
  disown "$pid"
  RL_NGINX_PIDS+=("$pid")
  if ! rl_wait_for 10 _rl_nginx_ready "$port" "$pid" || ! rl_alive "$pid"; then
    echo "nginx $name did not start; its log:" >&2
    cat "$d/nginx.out" "$d/nginx-error.log" >&2 2>/dev/null || true
    return 1
  fi
}

rl_stop_all() {
  local name pid
  for pid in "${RL_SESSIONS[@]}"; do rl_stop_session "$pid" TERM 5 each; done
  RL_SESSIONS=()
  for name in "${!RL_FPM_PID[@]}"; do rl_fpm_stop "$name" TERM; done
  for pid in "${RL_NGINX_PIDS[@]}"; do kill -TERM "$pid" 2>/dev/null || true; done
  rl_stop_pids 10 "${RL_NGINX_PIDS[@]}" || true
  RL_NGINX_PIDS=()
}

# ---- requests ----

rl_fire_urls() {
  # Each curl writes its one short line with a single write(), so parallel lines do not mix.
  timeout --foreground 120 xargs -P "$1" -n 1 curl -s -o /dev/null --max-time 30 \
    -w '%{http_code}\t%header{x-worker-pid}\t%header{x-ratelimit-reason}\n' || true
}

rl_fire() {
  local url=$1 n=$2 p=$3 i
  for ((i = 0; i < n; i++)); do echo "$url"; done | rl_fire_urls "$p"
}

rl_count() { awk -F'\t' -v c="$2" '$1 == c { n++ } END { print n + 0 }' "$1"; }

rl_pids() {
  awk -F'\t' -v c="${2:-}" '(c == "" || $1 == c) && $2 != "" { print $2 }' "$1" | sort -un | tr '\n' ' ' | sed 's/ $//'
}

rl_nwords() { wc -w <<<"$1"; }

# ---- results ----

N=0 PASSED=0 FAILED=0 RL_NOT_SELECTED=0 RL_INTERRUPTED=0 RL_REPORTED=0 RL_SUMMARY_SHOWN=0

_rl_line() { if [ "$1" = 0 ]; then echo "ok $N - $2"; else echo "not ok $N - $2${3:+; $3}"; fi; }

rl_report() {
  N=$((N + 1)) RL_REPORTED=1
  _rl_line "$@"
  if [ "$1" = 0 ]; then PASSED=$((PASSED + 1)); else FAILED=$((FAILED + 1)); fi
}

# In a test of rl_run_tests (a subshell): its line, and its outcome in a file for the runner.
result() {
  _rl_line "$1" "$DESC: $2" "${3:-}"
  if [ "$1" = 0 ]; then echo pass; else echo fail; fi >"$RL_DIR/result.$N"
}

verdict() { # verdict FIGURES WHY...: pass when no WHY was given
  local fig=$1
  shift
  if (($# == 0)); then result 0 "$fig"; else result 1 "$fig" "$(printf '%s; ' "$@" | sed 's/; $//')"; fi
}

_rl_run_test() {
  N=$((N + 1)) DESC=$1
  local fn=$2 rc=0
  # Not called from a || list or an if: there bash ignores set -e in the subshell too, and a
  # failing step inside a test would go on as if it had worked.
  set +e
  (
    set -e
    trap 'rl_stop_all' EXIT
    trap 'exit 143' INT TERM HUP
    "$fn"
  )
  rc=$?
  if [ -f "$RL_DIR/result.$N" ] && [ "$(cat "$RL_DIR/result.$N")" = pass ]; then
    PASSED=$((PASSED + 1))
  else
    FAILED=$((FAILED + 1))
    if [ ! -f "$RL_DIR/result.$N" ]; then
      if ((rc >= 128)); then
        echo "not ok $N - $DESC: interrupted (signal $((rc - 128)); timeout after ${RL_DEADLINE_SECS:-?} s?)"
      else
        echo "not ok $N - $DESC: the test itself failed (exit $rc; RL_KEEP=1 keeps the logs)"
      fi
    fi
  fi
  set -e
  RL_TEST_STATUS=$rc
}

rl_run_tests() {
  local runner=$1 a i status=0 total=$((${#TESTS[@]} / 2))
  shift
  for a in "$@"; do   # a selection that names no test must not pass as "0 failed"
    [[ $a =~ ^[0-9]+$ ]] && ((a >= 1 && a <= total)) ||
      { echo "$runner: no test $a (usage: $runner [N ...], N from 1 to $total)" >&2; return 2; }
  done
  # A signal (the deadline) also reaches the running test's subshell, which stops its processes.
  trap 'RL_INTERRUPTED=143' INT TERM HUP
  for ((i = 0; i < ${#TESTS[@]}; i += 2)); do
    if (($# > 0)) && ! [[ " $* " == *" $((i / 2 + 1)) "* ]]; then
      N=$((N + 1)) RL_NOT_SELECTED=$((RL_NOT_SELECTED + 1))
      continue
    fi
    if ((status >= 128)); then   # interrupted: the tests left are not run
      N=$((N + 1)) FAILED=$((FAILED + 1))
      echo "not ok $N - ${TESTS[i + 1]}: not run"
      continue
    fi
    _rl_run_test "${TESTS[i + 1]}" "${TESTS[i]}"
    ((RL_TEST_STATUS == 0)) || status=$RL_TEST_STATUS
    ((RL_INTERRUPTED == 0 || status >= 128)) || status=$RL_INTERRUPTED
  done
  rl_summary || true
  ((status < 128)) || return "$status"
  [ "$FAILED" = 0 ]
}

rl_summary() {
  RL_SUMMARY_SHOWN=1
  echo "$PASSED passed, $FAILED failed$( ((RL_NOT_SELECTED == 0)) || echo ", $RL_NOT_SELECTED not selected")"
  [ "$FAILED" = 0 ]
}
