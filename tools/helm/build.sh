#!/usr/bin/env bash
# Build the pinned helm (the one CI renders and lints charts/kopf-scheduler with) into a cache
# folder keyed by the helm release and go.sum, beside the control plane's.
#
#   tools/helm/build.sh [CACHE_DIR]
#
# Idempotent: when the binary is present and the stamp matches go.mod+go.sum, it prints the bin
# folder and exits at once. Prints the bin folder on stdout; progress goes to stderr. Concurrent
# callers take turns on a lock file in the cache folder: the second waits for the first build,
# finds its binary and returns, instead of deleting the first one's partial output.
set -euo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
helm_version=$(awk '$1 == "require" && $2 == "helm.sh/helm/v4" {print $3; exit}
                    $1 == "helm.sh/helm/v4" && $2 ~ /^v/ {print $2; exit}' "$here/go.mod")
if [[ -z $helm_version ]]; then
  echo "error: $here/go.mod does not require helm.sh/helm/v4" >&2
  exit 1
fi
cache_root=${1:-${KOPF_SCHEDULER_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/kopf-scheduler}}
bin="$cache_root/helm-$helm_version/bin"
stamp_file="$bin/.stamp"

# comments in go.mod do not change what is built
stamp=$( (awk '!/^\/\//' "$here/go.mod"; cat "$here/go.sum") | sha256sum | cut -c1-16)
built() {
  [[ -x "$bin/helm" && -f $stamp_file && $(cat "$stamp_file") == "$stamp" ]]
}
if built; then
  echo "$bin"
  exit 0
fi

if ! command -v go >/dev/null 2>&1; then
  echo "error: Go is not installed (or not on PATH); it is needed to build helm." >&2
  echo "       Install Go >= 1.26 (or set GOTOOLCHAIN=go1.27.3 with a newer go on PATH)." >&2
  exit 2
fi

mkdir -p "$bin"
exec 9>"$bin/.lock"
if ! flock -n 9; then
  echo "another build of helm is running; waiting for it" >&2
  flock 9
fi
if built; then  # the build we waited for made it
  echo "$bin"
  exit 0
fi

# What helm's own Makefile stamps into a release build (`helm version` then says v4.x.y, not v4.x).
ldflags="-s -w \
 -X helm.sh/helm/v4/internal/version.version=$helm_version \
 -X helm.sh/helm/v4/internal/version.gitTreeState=clean"

echo "building helm $helm_version into $bin (cold: about 4 min on 2 cores)" >&2
start=$(date +%s)
cd "$here"
tmp="$bin/.partial"
rm -rf "$tmp" && mkdir -p "$tmp"
if ! CGO_ENABLED=0 go build -trimpath -ldflags "$ldflags" -o "$tmp/helm" helm.sh/helm/v4/cmd/helm >&2; then
  echo "error: go build of helm failed (see above)" >&2
  exit 1
fi
mv -f "$tmp/helm" "$bin/helm"
rmdir "$tmp"
echo "$stamp" > "$stamp_file"
echo "built in $(( $(date +%s) - start ))s" >&2
echo "$bin"
