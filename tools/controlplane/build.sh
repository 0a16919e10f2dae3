#!/usr/bin/env bash
# Build the pinned control-plane binaries (etcd, kube-apiserver, kube-controller-manager,
# kube-scheduler, kubectl) into a cache folder keyed by the Kubernetes release and go.sum.
#
#   tools/controlplane/build.sh [CACHE_DIR]
#
# Idempotent: when every binary is present and the stamp matches go.mod+go.sum,
# it prints the bin folder and exits at once. Prints the bin folder on stdout;
# progress goes to stderr. Concurrent callers take turns on a lock file in the
# cache folder: the second waits for the first build, finds its binaries and
# returns, instead of deleting the first one's partial output.
set -euo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
k8s_version=$(awk '$1 == "k8s.io/kubernetes" && $2 ~ /^v/ {print $2; exit}' "$here/go.mod")
cache_root=${1:-${KOPF_SCHEDULER_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/kopf-scheduler}}
bin="$cache_root/controlplane-$k8s_version/bin"
stamp_file="$bin/.stamp"
binaries=(etcd kube-apiserver kube-controller-manager kube-scheduler kubectl)

# comments in go.mod do not change what is built
stamp=$( (awk '!/^\/\//' "$here/go.mod"; cat "$here/go.sum") | sha256sum | cut -c1-16)
built() {
  local b
  for b in "${binaries[@]}"; do [[ -x "$bin/$b" ]] || return 1; done
  [[ -f $stamp_file && $(cat "$stamp_file") == "$stamp" ]]
}
if built; then
  echo "$bin"
  exit 0
fi

if ! command -v go >/dev/null 2>&1; then
  echo "error: Go is not installed (or not on PATH); it is needed to build the control plane." >&2
  echo "       Install Go >= 1.26 (or set GOTOOLCHAIN=go1.27.3 with a newer go on PATH)." >&2
  exit 2
fi

mkdir -p "$bin"
exec 9>"$bin/.lock"
if ! flock -n 9; then
  echo "another build of the control plane is running; waiting for it" >&2
  flock 9
fi
if built; then  # the build we waited for made them
  echo "$bin"
  exit 0
fi

minor=${k8s_version#v1.}; minor=${minor%%.*}
ldflags="-s -w \
 -X k8s.io/component-base/version.gitVersion=$k8s_version \
 -X k8s.io/component-base/version.gitMajor=1 \
 -X k8s.io/component-base/version.gitMinor=$minor \
 -X k8s.io/component-base/version.gitTreeState=clean \
 -X k8s.io/component-base/version.buildDate=1970-01-01T00:00:00Z"

echo "building control plane $k8s_version into $bin (cold: 15-30 min on 2 cores)" >&2
start=$(date +%s)
cd "$here"
tmp="$bin/.partial"
rm -rf "$tmp" && mkdir -p "$tmp"
if ! CGO_ENABLED=0 go build -trimpath -ldflags "$ldflags" -o "$tmp/" \
    k8s.io/kubernetes/cmd/kube-apiserver \
    k8s.io/kubernetes/cmd/kube-controller-manager \
    k8s.io/kubernetes/cmd/kube-scheduler \
    k8s.io/kubernetes/cmd/kubectl >&2; then
  echo "error: go build of the Kubernetes binaries failed (see above)" >&2
  exit 1
fi
if ! CGO_ENABLED=0 go build -trimpath -ldflags "-s -w" -o "$tmp/etcd" go.etcd.io/etcd/server/v3 >&2; then
  echo "error: go build of etcd failed (see above)" >&2
  exit 1
fi
for b in "${binaries[@]}"; do mv -f "$tmp/$b" "$bin/$b"; done
rmdir "$tmp"
echo "$stamp" > "$stamp_file"
echo "built in $(( $(date +%s) - start ))s" >&2
echo "$bin"
