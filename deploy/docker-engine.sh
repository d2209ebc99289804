#!/bin/sh
# A Docker engine of the project's own, for `make image` and `make test-docker`, polite to a shared host:
# its own data, exec root and socket under build/docker, no bridge and no iptables rules (--bridge=none
# --iptables=false: builds and containers use the host's network or share a container's), so the host's
# FORWARD policy, chains and bridges stay as they were. `stop` ends only the dockerd this script started.
#
#   deploy/docker-engine.sh start   # prints DOCKER_HOST=unix://...; reuses an engine already answering there
#   deploy/docker-engine.sh stop
set -eu
here=$(cd "$(dirname "$0")/.." && pwd)
mkdir -p "$here/build"
state="$(cd "$here/build" && pwd -P)/docker"  # runc refuses a rootfs reached through a symlink
sock="$state/docker.sock"
pidfile="$state/dockerd.pid"

case "${1:-}" in
start)
    mkdir -p "$state"
    if DOCKER_HOST="unix://$sock" docker version >/dev/null 2>&1; then
        echo "DOCKER_HOST=unix://$sock"; exit 0
    fi
    command -v dockerd >/dev/null || { echo "no dockerd: apt-get install docker.io (needs root)" >&2; exit 3; }
    [ "$(id -u)" = 0 ] || { echo "dockerd needs root" >&2; exit 3; }
    dockerd --data-root "$state/data" --exec-root "$state/exec" --pidfile "$pidfile" -H "unix://$sock" \
        --bridge=none --iptables=false --ip6tables=false --ip-masq=false --ip-forward=false \
        --userland-proxy=false >"$state/dockerd.log" 2>&1 &
    i=0
    until DOCKER_HOST="unix://$sock" docker version >/dev/null 2>&1; do
        i=$((i + 1))
        if [ "$i" -gt 60 ]; then echo "dockerd did not answer in 30 s; see $state/dockerd.log" >&2; exit 1; fi
        sleep 0.5
    done
    echo "DOCKER_HOST=unix://$sock"
    ;;
stop)
    if [ -f "$pidfile" ]; then
        pid=$(cat "$pidfile")
        kill "$pid" 2>/dev/null || true
        i=0
        while kill -0 "$pid" 2>/dev/null && [ "$i" -lt 60 ]; do sleep 0.5; i=$((i + 1)); done
    fi
    # dockerd leaves its default network namespace mounted: `rm -rf build` (make clean) would then fail.
    if grep -q " $state/exec/netns/default " /proc/mounts 2>/dev/null; then
        umount "$state/exec/netns/default" || echo "left mounted: $state/exec/netns/default" >&2
    fi
    ;;
*)
    echo "usage: $0 start|stop" >&2; exit 2
    ;;
esac
