#!/bin/sh
# A real Kubernetes control plane from Go modules, for tests/chart/test_kube_install.py: kube-apiserver,
# kube-scheduler and kube-controller-manager of k8s.io/kubernetes (a wrapper module: its go.mod maps every
# staging module that k8s.io/kubernetes replaces with ./staging to the published v0.<minor>.<patch>), etcd
# (Debian's etcd-server) and kwok (fake nodes on which pods reach Running). ~10 min of 2 cores cold, 3 GB of
# RAM at the peak; each binary is built once (kept in BIN_DIR).
#   tests/chart/kube/build.sh BIN_DIR
set -eu
bin=$(mkdir -p "$1" && cd "$1" && pwd)
version=${KUBE_VERSION:-v1.37.2}
minor=$(echo "$version" | cut -d. -f2)
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
cd "$work"
mod=$(go mod download -json "k8s.io/kubernetes@$version" | sed -n 's/.*"GoMod": "\(.*\)",/\1/p')
{
    echo "module quota-sidecar/kube"
    echo "go $(sed -n 's/^go //p' "$mod")"
    echo "require k8s.io/kubernetes $version"
    sed -n 's#^[[:space:]]*\(k8s.io/[a-z-]*\) => ./staging/src/.*#replace \1 => \1 v0.'"$minor"'.'"${version##*.}"'#p' "$mod"
} > go.mod
cat > tools.go <<'END'
//go:build tools

package tools

import (
	_ "k8s.io/kubernetes/cmd/kube-apiserver"
	_ "k8s.io/kubernetes/cmd/kube-controller-manager"
	_ "k8s.io/kubernetes/cmd/kube-scheduler"
)
END
GOFLAGS=-mod=mod go mod tidy -e >/dev/null 2>&1 || true
flags="-X k8s.io/component-base/version.gitVersion=$version -X k8s.io/component-base/version.gitMajor=1 -X k8s.io/component-base/version.gitMinor=$minor"
for command in kube-apiserver kube-scheduler kube-controller-manager; do
    [ -x "$bin/$command" ] || GOFLAGS=-mod=mod go build -tags tools -ldflags "$flags" -o "$bin/$command" "k8s.io/kubernetes/cmd/$command"
done
# etcd: Debian's etcd-server, unpacked here rather than installed (no service is started).
if [ ! -x "$bin/etcd" ]; then
    (cd "$work" && apt-get download -q etcd-server >/dev/null 2>&1 && dpkg -x etcd-server_*.deb etcd \
        && cp etcd/usr/bin/etcd "$bin/etcd") || echo "no etcd: apt-get download etcd-server failed" >&2
fi
[ -x "$bin/kwok" ] || GOBIN="$bin" go install sigs.k8s.io/kwok/cmd/kwok@latest
