# Shared helpers of the .ci/ service scripts (sourced, not run).
# DBMEMORY_CI_DIR: where the services keep their data folders, logs and sockets
# (default /var/tmp/dbmemory-ci). Every service binds to 127.0.0.1 only.

CI_DIR="${DBMEMORY_CI_DIR:-/var/tmp/dbmemory-ci}"

log() { printf '==> %s\n' "$*" >&2; }
die() { printf 'ERROR: %s\n' "$*" >&2; exit 1; }

APT_UPDATED=0
apt_install() {  # apt_install <package...>: install the Debian packages that are missing
    local missing=()
    for pkg in "$@"; do
        dpkg-query -W -f='${Status}' "$pkg" 2>/dev/null | grep -q 'install ok installed' \
            || missing+=("$pkg")
    done
    [ "${#missing[@]}" = 0 ] && return 0
    command -v apt-get >/dev/null || die "apt-get is missing: install ${missing[*]} by hand"
    log "installing ${missing[*]}"
    if [ "$APT_UPDATED" = 0 ]; then
        DEBIAN_FRONTEND=noninteractive apt-get update -qq
        APT_UPDATED=1
    fi
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${missing[@]}" >/dev/null
}

wait_until() {  # wait_until <what> <seconds> <command...>
    local what="$1" seconds="$2"
    shift 2
    for _ in $(seq 1 "$((seconds * 2))"); do
        if "$@" >/dev/null 2>&1; then
            return 0
        fi
        sleep 0.5
    done
    die "$what was not ready within ${seconds}s"
}

port_free() { ! (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null; }

# clear_stale_pid <pid file> <text in its process's command line>: a pid file left by a process
# that is gone (a killed session, a new machine whose pids were reused) is removed; returns 1
# when the process named there is still ours and running.
clear_stale_pid() {
    local f="$1" want="$2" pid
    [ -f "$f" ] || return 0
    pid="$(head -n 1 "$f" 2>/dev/null | tr -dc 0-9)"
    if [ -n "$pid" ] && [ -r "/proc/$pid/cmdline" ] \
        && tr '\0' ' ' <"/proc/$pid/cmdline" | grep -qF -- "$want"; then
        return 1
    fi
    log "removing the stale pid file $f (pid ${pid:-?} is not ours or not running)"
    rm -f "$f"
}

# kill_ours <pid file> <text in its command line> [why]: stop the process a pid file names, only
# when it is ours (TERM, then KILL after 60 s), and remove the file.
kill_ours() {
    local f="$1" want="$2" why="${3:-it runs but does not answer}" pid
    clear_stale_pid "$f" "$want" && return 0
    pid="$(head -n 1 "$f" | tr -dc 0-9)"
    log "stopping pid $pid ($want): $why"
    kill -TERM "$pid" 2>/dev/null || true
    for _ in $(seq 1 120); do
        kill -0 "$pid" 2>/dev/null || { rm -f "$f"; return 0; }
        sleep 0.5
    done
    kill -KILL "$pid" 2>/dev/null || true
    sleep 1
    rm -f "$f"
}
