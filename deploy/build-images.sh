#!/bin/sh
# `make image`: quota-sidecar (the agent), quota-sidecar-spark (the aggregator) and quota-sidecar-kafka, tagged
# with the package's version, with the Docker engine of $DOCKER_HOST or, without one, deploy/docker-engine.sh's
# (stopped after; dockerd and debootstrap installed first as root when missing, deploy/install-tools.sh).
# The base is debian:bookworm-slim when it can be pulled, else quota-sidecar-base:bookworm, made once with
# debootstrap from the host's Debian mirror. Needs the wheels' sources (PyPI or pip's cache) and build/kafka.classpath.
set -eu
here=$(cd "$(dirname "$0")/.." && pwd)
cd "$here"
python=${PYTHON:-.venv/bin/python}
version=$("$python" -c 'import quota_sidecar; print(quota_sidecar.__version__)')
context=build/image

started=""
if [ -z "${DOCKER_HOST:-}" ] && ! docker version >/dev/null 2>&1; then
    deploy/install-tools.sh docker dockerd || exit 3
    DOCKER_HOST=$(deploy/docker-engine.sh start | sed -n 's/^DOCKER_HOST=//p')
    started=yes
fi
export DOCKER_HOST
trap 'if [ -n "$started" ]; then deploy/docker-engine.sh stop; fi' EXIT

echo "== context $context: wheels, Spark's Kafka connector, Kafka's jars"
rm -rf "$context" && mkdir -p "$context/wheels" "$context/kafka-libs" "$context/spark-kafka-jars"
"$python" -m pip wheel -q --no-deps --wheel-dir "$context/wheels" . 2>/dev/null
"$python" -m pip wheel -q --wheel-dir "$context/wheels" "$(ls "$context"/wheels/quota_sidecar-*.whl)[spark]"
# (xargs, not `while read`: Maven writes the list without a final newline, and read drops the last jar)
tr ':' '\n' < build/spark-kafka.classpath | xargs cp -t "$context/spark-kafka-jars/"
tr ':' '\n' < build/kafka.classpath | xargs cp -t "$context/kafka-libs/"

if docker pull -q debian:bookworm-slim >/dev/null 2>&1; then
    base=debian:bookworm-slim
else
    base=quota-sidecar-base:bookworm-slim
    if ! docker image inspect "$base" >/dev/null 2>&1; then
        echo "== no registry answers: $base with debootstrap"
        deploy/install-tools.sh debootstrap || exit 3
        mirror=$(sed -n 's/^URIs: *//p' /etc/apt/sources.list.d/debian.sources 2>/dev/null | head -1)
        rootfs=$(mktemp -d)
        debootstrap --variant=minbase bookworm "$rootfs" "${mirror:-http://deb.debian.org/debian}" >/dev/null
        rm -rf "$rootfs"/var/cache/apt/archives/*.deb "$rootfs"/var/lib/apt/lists/*  # apt-get update refetches
        # As debian:bookworm-slim: no documentation, manual pages or translations, now or from later packages
        # (45 MB of the base), the licences kept.
        printf '%s\n' 'path-exclude /usr/share/doc/*' 'path-include /usr/share/doc/*/copyright' \
            'path-exclude /usr/share/man/*' 'path-exclude /usr/share/info/*' 'path-exclude /usr/share/locale/*' \
            > "$rootfs/etc/dpkg/dpkg.cfg.d/slim"
        find "$rootfs/usr/share/doc" -mindepth 2 ! -name copyright ! -type d -delete
        rm -rf "$rootfs"/usr/share/man/* "$rootfs"/usr/share/info/* "$rootfs"/usr/share/locale/*
        tar -C "$rootfs" -c . | docker import - "$base" >/dev/null
        rm -rf "$rootfs"
    fi
fi

for target in agent spark kafka; do
    case $target in agent) name=quota-sidecar ;; *) name=quota-sidecar-$target ;; esac
    echo "== $name:$version (target $target, base $base)"
    # The host's network for apt-get and nothing else: the engine has no bridge of its own.
    docker build -q --network host --build-arg BASE="$base" --target "$target" -f deploy/Containerfile \
        -t "$name:$version" "$context" >/dev/null
done
docker images --format '{{.Repository}}:{{.Tag}} {{.Size}}' | grep "^quota-sidecar"
