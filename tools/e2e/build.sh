#!/usr/bin/env bash
# Build upstream's end-to-end test binary, e2e.test (k8s.io/kubernetes/test/e2e), at the release the
# local control plane runs, into a cache folder keyed by that release and go.mod + go.sum, beside the
# control plane's. kopf_scheduler.cluster.e2e runs its [sig-scheduling] tests against kopf-scheduler
# (and against upstream kube-scheduler for the reference column).
#
#   tools/e2e/build.sh [CACHE_DIR]
#
# Prints the folder holding bin/e2e.test on stdout (progress goes to stderr). About 5 minutes cold on
# 2 cores (most of the control plane's packages are in Go's build cache once it is built), then it
# returns at once. Idempotent and locked like tools/controlplane/build.sh: a second caller waits for
# the first build and finds its output.
set -euo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
k8s_version=$(awk '$1 == "require" && $2 == "k8s.io/kubernetes" {print $3; exit}
                   $1 == "k8s.io/kubernetes" && $2 ~ /^v/ {print $2; exit}' "$here/go.mod")
if [[ -z $k8s_version ]]; then
  echo "error: $here/go.mod does not require k8s.io/kubernetes" >&2
  exit 1
fi
cache_root=${1:-${KOPF_SCHEDULER_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/kopf-scheduler}}
out="$cache_root/e2e-$k8s_version"
stamp_file="$out/.stamp"

# comments in go.mod do not change what is built
stamp=$( (awk '!/^\/\//' "$here/go.mod"; cat "$here/go.sum") | sha256sum | cut -c1-16)
built() {
  [[ -x "$out/bin/e2e.test" && -f $stamp_file && $(cat "$stamp_file") == "$stamp" ]]
}
if built; then
  echo "$out"
  exit 0
fi

if ! command -v go >/dev/null 2>&1; then
  echo "error: Go is not installed (or not on PATH); it is needed to build e2e.test." >&2
  echo "       Install Go >= 1.26 (or set GOTOOLCHAIN=go1.27.3 with a newer go on PATH)." >&2
  exit 2
fi

mkdir -p "$out/bin"
exec 9>"$out/.lock"
if ! flock -n 9; then
  echo "another build of e2e.test is running; waiting for it" >&2
  flock 9
fi
if built; then  # the build we waited for made it
  echo "$out"
  exit 0
fi

minor=${k8s_version#v1.}; minor=${minor%%.*}
ldflags="-s -w \
 -X k8s.io/component-base/version.gitVersion=$k8s_version \
 -X k8s.io/component-base/version.gitMajor=1 \
 -X k8s.io/component-base/version.gitMinor=$minor \
 -X k8s.io/component-base/version.gitTreeState=clean \
 -X k8s.io/component-base/version.buildDate=1970-01-01T00:00:00Z"

echo "building e2e.test $k8s_version into $out (cold: about 5 min on 2 cores after the control plane)" >&2
start=$(date +%s)
cd "$here"
tmp="$out/bin/.e2e.test.partial"
rm -f "$tmp"
if ! CGO_ENABLED=0 go test -c -vet=off -trimpath -ldflags "$ldflags" -o "$tmp" k8s.io/kubernetes/test/e2e >&2; then
  echo "error: go test -c k8s.io/kubernetes/test/e2e failed (see above)" >&2
  exit 1
fi
mv -f "$tmp" "$out/bin/e2e.test"
echo "$stamp" > "$stamp_file"
echo "built in $(( $(date +%s) - start ))s" >&2
echo "$out"
