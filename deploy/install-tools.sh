#!/bin/sh
# What `make image` and `make test-docker` need and a fresh Debian machine lacks: Debian's docker.io (dockerd, for
# an engine of the project's own), debootstrap (a base image where no registry answers) and docker-compose
# (pytest-docker's compose). Installed with apt-get as root; elsewhere one line says what is missing, exit 3.
#
#   deploy/install-tools.sh docker dockerd debootstrap docker-compose   # the commands wanted
set -eu
missing=""
for command in "$@"; do
    command -v "$command" >/dev/null 2>&1 || missing="$missing $command"
done
[ -z "$missing" ] && exit 0

packages=""
for command in $missing; do
    case $command in
        docker | dockerd) case $packages in *docker.io*) continue ;; esac; packages="$packages docker.io" ;;
        *) packages="$packages $command" ;;
    esac
done
if [ "$(id -u)" != 0 ] || ! command -v apt-get >/dev/null 2>&1; then
    echo "missing:$missing (as root on Debian: apt-get install$packages)" >&2
    exit 3
fi
echo "installing Debian's$packages"
apt-get update -q >/dev/null
# --no-install-recommends: docker.io's recommends would pull a second engine's worth of tools (and apparmor).
DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends $packages >/dev/null
