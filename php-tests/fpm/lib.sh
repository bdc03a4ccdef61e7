# shellcheck shell=bash
# Helpers to run php-fpm masters and nginx on 127.0.0.1 inside one temp dir, fire counted
# requests at them and stop everything again by PID. Sourced by php-tests/fpm/run and ./demo.
#
#   rl_init DIR                      use DIR (made with mktemp -d) for every file
#   rl_free_port                     print a free TCP port on 127.0.0.1
#   rl_fpm_start NAME N SO [LINE..]  php-fpm master NAME with N static workers, the extension SO
#                                    loaded with -d extension= ("" for none), extra pool LINEs;
#                                    listens on $RL_DIR/NAME/fpm.sock
#   rl_fpm_stop NAME [SIG]           stop it (default QUIT: finish the running requests)
#   rl_fpm_workers NAME              print its worker PIDs
#   rl_nginx_start NAME WWW PORT SOCK [PORT SOCK..]   nginx serving WWW: PORT -> SOCK
#   rl_fire URL N P                  N GETs, P at a time; prints "code<TAB>pid<TAB>reason" lines
#   rl_fire_urls P                   same, one request per URL read from stdin
#   rl_count FILE CODE               how many lines of FILE have status CODE
#   rl_pids FILE [CODE]              distinct X-Worker-Pid values (of CODE answers), sorted
#   rl_nwords STRING                 how many words
#   rl_stop_all                      stop every process started here (call it from a trap)

RL_DIR=""
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
RL_FPM_BIN=${PHP_FPM:-$(_rl_find_fpm)}
RL_NGINX_BIN=${NGINX:-$(command -v nginx || echo /usr/sbin/nginx)}
declare -gA RL_FPM_PID=()    # NAME -> master PID
declare -ga RL_NGINX_PIDS=()

rl_init() {
  RL_DIR=$1
  mkdir -p "$RL_DIR"
}

rl_now_ms() { date +%s%3N; }

rl_free_port() {
  # The kernel picks a free port; a tiny race with other programs is acceptable here. Not one
  # handed out before in this run (kept in $RL_DIR/ports): ports are only bound once a server
  # starts, and the kernel may offer the same one twice before that; two nginx servers on one
  # port would send one master's requests to another's.
  local p i given=${RL_DIR:+$RL_DIR/ports}
  for ((i = 0; i < 100; i++)); do
    p=$(php -n -r '$s = stream_socket_server("tcp://127.0.0.1:0", $e, $m) or exit(1);
                   echo substr(strrchr(stream_socket_get_name($s, false), ":"), 1), "\n";') || return 1
    if [ -z "$given" ] || ! grep -qx "$p" "$given" 2>/dev/null; then
      [ -z "$given" ] || echo "$p" >>"$given"
      echo "$p"
      return 0
    fi
  done
  echo "rl_free_port: no new free port" >&2
  return 1
}

rl_alive() { kill -0 "$1" 2>/dev/null; }

# rl_wait_for SECONDS COMMAND...: poll every 50 ms until COMMAND succeeds.
rl_wait_for() {
  local deadline=$(($(rl_now_ms) + $1 * 1000)); shift
  until "$@"; do
    (($(rl_now_ms) < deadline)) || return 1
    sleep 0.05
  done
}

rl_fpm_start() {
  local name=$1 workers=$2 so=$3; shift 3
  local d="$RL_DIR/$name"
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

# rl_kill_wait SECONDS PID...: wait until the PIDs are gone, then SIGKILL what is left.
rl_kill_wait() {
  local secs=$1; shift
  local p left i
  for ((i = 0; i < secs * 20; i++)); do
    left=0
    for p in "$@"; do rl_alive "$p" && left=1; done
    ((left)) || return 0
    sleep 0.05
  done
  for p in "$@"; do kill -KILL "$p" 2>/dev/null || true; done
}

rl_fpm_stop() {
  local name=$1 sig=${2:-QUIT}
  local pid=${RL_FPM_PID[$name]:-}
  [ -n "$pid" ] || return 0
  # The master calls setsid(): its session holds the workers, also those it respawned and any
  # that outlive it, so they are found by its session id.
  kill "-$sig" "$pid" 2>/dev/null || true
  # shellcheck disable=SC2046
  rl_kill_wait 10 "$pid" $(pgrep -s "$pid" || true)
  local left
  left=$(pgrep -s "$pid" || true)
  # shellcheck disable=SC2086
  [ -z "$left" ] || kill -KILL $left 2>/dev/null || true
  unset "RL_FPM_PID[$name]"
}

rl_nginx_start() {
  local name=$1 www=$2; shift 2
  local d="$RL_DIR/$name" port=$1
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
  for name in "${!RL_FPM_PID[@]}"; do rl_fpm_stop "$name" TERM; done
  for pid in "${RL_NGINX_PIDS[@]}"; do kill -TERM "$pid" 2>/dev/null || true; done
  ((${#RL_NGINX_PIDS[@]} == 0)) || rl_kill_wait 10 "${RL_NGINX_PIDS[@]}"
  RL_NGINX_PIDS=()
}

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
