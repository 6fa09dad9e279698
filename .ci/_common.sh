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
