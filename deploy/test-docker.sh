#!/bin/sh
# `make test-docker`: pytest tests/docker with the engine of $DOCKER_HOST or, as root, the project's own
# (deploy/docker-engine.sh: no bridge, no iptables rules), started here and stopped after; Debian's docker.io and
# docker-compose installed first when missing (deploy/install-tools.sh), the images built when missing. Then it
# checks that the host's iptables rules and bridges are as they were before.
set -u
here=$(cd "$(dirname "$0")/.." && pwd)
cd "$here"
python=${PYTHON:-.venv/bin/python}
network_state() { iptables -S 2>/dev/null; ip -br link show type bridge 2>/dev/null; }
before=$(network_state)

deploy/install-tools.sh docker docker-compose || exit 3
started=""
if [ -z "${DOCKER_HOST:-}" ] && ! docker version >/dev/null 2>&1; then
    deploy/install-tools.sh dockerd || exit 3
    engine=$(deploy/docker-engine.sh start) && export "$engine" && started=yes
fi
trap 'if [ -n "$started" ]; then deploy/docker-engine.sh stop; fi' EXIT
# Skips would make a green run that proved nothing: without an engine this target fails, in one line.
if ! docker version >/dev/null 2>&1; then
    echo "test-docker: no Docker engine answers${DOCKER_HOST:+ at $DOCKER_HOST} and none could be started here" >&2
    exit 3
fi
version=$("$python" -c 'import quota_sidecar; print(quota_sidecar.__version__)')
docker image inspect "quota-sidecar:$version" "quota-sidecar-spark:$version" "quota-sidecar-kafka:$version" \
    >/dev/null 2>&1 || PYTHON="$python" deploy/build-images.sh || exit $?
"$python" -m pytest tests/docker
status=$?
if [ -n "$started" ]; then deploy/docker-engine.sh stop; started=""; fi

after=$(network_state)
if [ "$before" != "$after" ]; then
    echo "test-docker: the host's iptables rules or bridges changed while it ran (another user's, or ours):"
    echo "before:"; echo "$before"; echo "after:"; echo "$after"
fi
exit $status
