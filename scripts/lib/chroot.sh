# shellcheck shell=bash
# What scripts/php84 (a Debian 13 root) and scripts/fresh-debian12 (a bare Debian 12 root) share:
# a Debian root made with debootstrap (or reused once a previous run completed it), entered in a
# private mount namespace, and on every exit path the processes left in it stopped and everything
# mounted under it unmounted, deepest first. Sourced; the caller sets, before using it:
#
#   CHROOT_NAME   its name in messages ("php84")
#   ROOT          the directory that chroot enters
#   MOUNT_TOP     optional: the directory under which every mount of the caller lies (default
#                 ROOT; a root that is itself an overlay mount sets its parent)
#
#   chroot_enter_ns SCRIPT ARGS...  the first thing a caller does: checks root and the tools,
#       installs debootstrap with apt-get when missing (failing if it cannot), then re-runs
#       SCRIPT ARGS under `timeout` (CHROOT_TIMEOUT seconds, default 1800) in a private mount
#       namespace; returns (does nothing) when already there
#   chroot_mirror                   the Debian archive this machine's apt uses (its URIs: line)
#   chroot_debootstrap SUITE STAMP LOG [DEBOOTSTRAP OPTIONS...]
#       makes ROOT with `debootstrap --variant=minbase OPTIONS SUITE ROOT <mirror>` unless
#       ROOT/STAMP exists (a completed root: returns 1 having done nothing, so that the caller
#       knows it was reused); an incomplete ROOT is deleted first, never while anything is
#       mounted under it. Exits the script when debootstrap fails.
#   chroot_prepare                  policy-rc.d (no service starts in the root), resolv.conf
#   chroot_mount_base SYSROOT       ROOT a mount point (bound onto itself), proc, /dev, a tmpfs
#                                   /dev/shm, the Rust toolchain at SYSROOT bind-mounted
#                                   read-only at the same path in the root
#   run_bg COMMAND...               runs COMMAND in the background and waits for it, so that a
#                                   signal interrupts the wait and chroot_stop_bg can stop it
#   run_bg_logged LOG COMMAND...    the same, COMMAND's output appended to LOG
#   chroot_stop_bg                  stops what run_bg runs (1 if something was running)
#   chroot_unmount                  stops the processes in ROOT, unmounts everything under
#                                   MOUNT_TOP; non-zero if something stays mounted. The EXIT
#                                   trap calls both.

chroot_say() { echo "$CHROOT_NAME: $*"; }
chroot_die() { echo "$CHROOT_NAME: $*" >&2; exit 1; }

chroot_enter_ns() {
  local script=$1 tool
  shift
  [ -z "${RL_CHROOT_IN_NS:-}" ] || return 0
  [ "$(id -u)" = 0 ] || chroot_die "needs root (debootstrap, mount, chroot)"
  for tool in unshare chroot mount umount timeout; do
    command -v "$tool" >/dev/null || chroot_die "$tool not found"
  done
  if ! command -v debootstrap >/dev/null; then
    chroot_say "installing debootstrap"
    if ! { apt-get -o DPkg::Lock::Timeout=300 update -qq &&
      DEBIAN_FRONTEND=noninteractive apt-get -o DPkg::Lock::Timeout=300 install -y -qq \
        --no-install-recommends debootstrap >/dev/null; }; then
      chroot_die "apt-get install debootstrap failed"
    fi
  fi
  export RL_CHROOT_IN_NS=1
  # A bound on the whole run: on expiry the script gets SIGTERM and still stops what runs in the
  # root and unmounts.
  exec timeout -k 60 "${CHROOT_TIMEOUT:-1800}" unshare --mount --propagation private "$script" "$@"
}

chroot_mirror() {
  local m
  m=$(awk '/^URIs:/ { print $2; exit }' /etc/apt/sources.list.d/debian.sources 2>/dev/null)
  [ -n "$m" ] || m=$(awk '$1 == "deb" && $2 ~ /^https?:/ { print $2; exit }' /etc/apt/sources.list 2>/dev/null)
  [ -n "$m" ] || chroot_die "no Debian archive in /etc/apt/sources.list.d/debian.sources or /etc/apt/sources.list: the archive this machine uses is the one the root is made from"
  echo "$m"
}

# Mount points under MOUNT_TOP (itself included), deepest first.
chroot_mounts() {
  local top=${MOUNT_TOP:-$ROOT}
  awk -v t="$top" 'substr($5, 1, length(t) + 1) == t "/" || $5 == t { print $5 }' /proc/self/mountinfo | sort -r
}

# PIDs of processes whose root directory is ROOT (what chroot started there).
chroot_pids() {
  local p r
  for p in /proc/[0-9]*; do
    r=$(readlink "$p/root" 2>/dev/null) || continue
    [ "$r" = "$ROOT" ] && echo "${p#/proc/}"
  done
}

chroot_stop_processes() {
  local pids i
  pids=$(chroot_pids)
  [ -n "$pids" ] || return 0
  chroot_say "stopping processes left in the root: $(tr '\n' ' ' <<<"$pids")"
  # shellcheck disable=SC2086
  kill -TERM $pids 2>/dev/null
  for ((i = 0; i < 50; i++)); do
    pids=$(chroot_pids)
    [ -n "$pids" ] || return 0
    sleep 0.1
  done
  # shellcheck disable=SC2086
  kill -KILL $pids 2>/dev/null
  sleep 0.2
}

chroot_unmount() {
  local m left
  chroot_stop_processes
  for m in $(chroot_mounts); do
    umount "$m" 2>/dev/null || { chroot_stop_processes; umount "$m"; } ||
      { chroot_say "umount $m failed; detaching it (umount -l)"; umount -l "$m"; }
  done
  left=$(chroot_mounts)
  if [ -n "$left" ]; then
    echo "$CHROOT_NAME: still mounted under ${MOUNT_TOP:-$ROOT}: $left" >&2
    return 1
  fi
}

BG=""
run_bg() {
  local rc
  "$@" &
  BG=$!
  wait "$BG"
  rc=$?
  BG=""
  return "$rc"
}
# run_bg_logged LOG COMMAND...: run_bg with COMMAND's output appended to LOG. The redirection is
# the background command's own: a trap that runs while run_bg waits writes where the script does.
run_bg_logged() {
  local log=$1
  shift
  run_bg _chroot_logged "$log" "$@"
}
_chroot_logged() {
  local log=$1
  shift
  "$@" >>"$log" 2>&1
}
kill_tree() { # kill_tree PID: PID and its descendants, children first
  local c
  for c in $(pgrep -P "$1"); do kill_tree "$c"; done
  kill -TERM "$1" 2>/dev/null
}

# 0 when nothing was left running in the background, 1 when something was (and is stopped now).
chroot_stop_bg() {
  [ -n "$BG" ] || return 0
  chroot_say "interrupted: stopping $BG and what it started"
  kill_tree "$BG"
  wait "$BG" 2>/dev/null
  BG=""
  return 1
}

chroot_debootstrap() {
  local suite=$1 stamp=$2 log=$3 mirror
  shift 3
  [ ! -f "$ROOT/$stamp" ] || return 1
  mirror=$(chroot_mirror)
  if [ -e "$ROOT" ]; then
    chroot_unmount || chroot_die "refusing to delete the incomplete root $ROOT: something is still mounted under it"
    chroot_say "deleting the incomplete root $ROOT"
    rm -rf --one-file-system "$ROOT" || chroot_die "could not delete $ROOT"
  fi
  mkdir -p "$(dirname "$ROOT")" "$(dirname "$log")"
  chroot_say "debootstrap --variant=minbase ${*:+$* }$suite $ROOT $mirror (log: $log)"
  : >"$log"
  if ! run_bg_logged "$log" debootstrap --variant=minbase "$@" "$suite" "$ROOT" "$mirror"; then
    tail -n 20 "$log" >&2
    chroot_unmount # debootstrap can leave /proc and /sys mounted when it fails
    chroot_die "debootstrap failed"
  fi
  touch "$ROOT/$stamp"
}

chroot_prepare() {
  # Services must not start inside the root (php-fpm's and nginx's postinst would).
  printf '#!/bin/sh\nexit 101\n' >"$ROOT/usr/sbin/policy-rc.d" && chmod 0755 "$ROOT/usr/sbin/policy-rc.d"
  cp -L /etc/resolv.conf "$ROOT/etc/resolv.conf" 2>/dev/null || true
}

chroot_mount_base() {
  local sysroot=$1
  # The root a mount point of its own, so that `unshare --mount` inside it (a test making a
  # namespace) can set its propagation.
  { mountpoint -q "$ROOT" || mount --bind "$ROOT" "$ROOT"; } &&
    mount -t proc proc "$ROOT/proc" &&
    mount --bind /dev "$ROOT/dev" &&
    mount -t tmpfs -o mode=1777,size=256m tmpfs "$ROOT/dev/shm" &&
    mkdir -p "$ROOT$sysroot" &&
    mount --bind "$sysroot" "$ROOT$sysroot" &&
    mount -o remount,bind,ro "$ROOT$sysroot"
}
