#!/bin/sh
# `make test-docker`: pytest tests/docker with the engine of $DOCKER_HOST or, as root, the project's own
# (deploy/docker-engine.sh: no bridge, no iptables rules), started here and stopped after; the images are built
# first when missing. Then it checks that the host's iptables rules and bridges are as they were before.
set -u
here=$(cd "$(dirname "$0")/.." && pwd)
cd "$here"
python=${PYTHON:-.venv/bin/python}
network_state() { iptables -S 2>/dev/null; ip -br link show type bridge 2>/dev/null; }
before=$(network_state)

started=""
if [ -z "${DOCKER_HOST:-}" ] && [ "$(id -u)" = 0 ] && command -v dockerd >/dev/null; then
    engine=$(deploy/docker-engine.sh start) && export "$engine" && started=yes
fi
if [ -n "${DOCKER_HOST:-}" ]; then
    version=$("$python" -c 'import quota_sidecar; print(quota_sidecar.__version__)')
    docker image inspect "quota-sidecar-kafka:$version" "quota-sidecar:$version" "quota-sidecar-thin:$version" \
        >/dev/null 2>&1 || PYTHON="$python" deploy/build-images.sh
fi
"$python" -m pytest tests/docker
status=$?
if [ -n "$started" ]; then deploy/docker-engine.sh stop; fi

after=$(network_state)
if [ "$before" != "$after" ]; then
    echo "test-docker: the host's iptables rules or bridges changed while it ran (another user's, or ours):"
    echo "before:"; echo "$before"; echo "after:"; echo "$after"
fi
exit $status
