#!/usr/bin/env bash
# Build the pinned KWOK controller (the simulated kubelets of the demo and the scale tests) into a
# cache folder keyed by the KWOK release and go.sum, beside the control plane's, and copy KWOK's
# own stage files (kustomize/stage of the same module download) next to it.
#
#   tools/kwok/build.sh [CACHE_DIR]
#
# Prints the folder holding bin/kwok and stages/ on stdout (progress goes to stderr):
#
#   kwok-v0.8.0/bin/kwok
#   kwok-v0.8.0/stages/node/fast/node-initialize.yaml      a node becomes Ready once
#   kwok-v0.8.0/stages/node/heartbeat-with-lease/...        periodic heartbeats (not used by default)
#   kwok-v0.8.0/stages/pod/fast/pod-ready.yaml              a bound pod goes Running
#   ...                                                      (every Stage of kustomize/stage, same paths;
#                                                            testdata, kustomizations and RBAC left out)
#
# Idempotent: when the binary and the stages are present and the stamp matches go.mod+go.sum, it
# prints the folder and exits at once. Concurrent callers take turns on a lock file in the cache
# folder: the second waits for the first build, finds its output and returns, instead of deleting
# the first one's partial output.
set -euo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
kwok_version=$(awk '$1 == "require" && $2 == "sigs.k8s.io/kwok" {print $3; exit}
                    $1 == "sigs.k8s.io/kwok" && $2 ~ /^v/ {print $2; exit}' "$here/go.mod")
if [[ -z $kwok_version ]]; then
  echo "error: $here/go.mod does not require sigs.k8s.io/kwok" >&2
  exit 1
fi
cache_root=${1:-${KOPF_SCHEDULER_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/kopf-scheduler}}
out="$cache_root/kwok-$kwok_version"
stamp_file="$out/.stamp"
# the stages cluster/kwok.py starts KWOK with by default; the others are copied too
# (deleted pods go by cluster/kwok.py's own stages)
needed_stages=(node/fast/node-initialize.yaml pod/fast/pod-ready.yaml pod/fast/pod-complete.yaml
               node/heartbeat-with-lease/node-heartbeat-with-lease.yaml)

# comments in go.mod do not change what is built
stamp=$( (awk '!/^\/\//' "$here/go.mod"; cat "$here/go.sum") | sha256sum | cut -c1-16)
built() {
  local s
  [[ -x "$out/bin/kwok" ]] || return 1
  for s in "${needed_stages[@]}"; do [[ -f "$out/stages/$s" ]] || return 1; done
  [[ -f $stamp_file && $(cat "$stamp_file") == "$stamp" ]]
}
if built; then
  echo "$out"
  exit 0
fi

if ! command -v go >/dev/null 2>&1; then
  echo "error: Go is not installed (or not on PATH); it is needed to build KWOK." >&2
  echo "       Install Go >= 1.26 (or set GOTOOLCHAIN=go1.27.3 with a newer go on PATH)." >&2
  exit 2
fi

mkdir -p "$out"
exec 9>"$out/.lock"
if ! flock -n 9; then
  echo "another build of KWOK is running; waiting for it" >&2
  flock 9
fi
if built; then  # the build we waited for made it
  echo "$out"
  exit 0
fi

echo "building KWOK $kwok_version into $out (cold: 2 to 3.5 min on 2 cores)" >&2
start=$(date +%s)
cd "$here"
tmp="$out/.partial"
rm -rf "$tmp" && mkdir -p "$tmp/bin" "$tmp/stages"

# The module's files as the proxy serves them (read-only, in the module cache): its Stages.
if ! dir=$(go mod download -json sigs.k8s.io/kwok | sed -n 's/^[[:space:]]*"Dir": "\(.*\)",\{0,1\}$/\1/p'); then
  echo "error: go mod download sigs.k8s.io/kwok failed (see above)" >&2
  exit 1
fi
if [[ -z $dir || ! -d "$dir/kustomize/stage" ]]; then
  echo "error: the download of sigs.k8s.io/kwok@$kwok_version has no kustomize/stage folder ($dir)" >&2
  exit 1
fi
(
  cd "$dir/kustomize/stage"
  find . -name '*.yaml' ! -path '*/testdata/*' -print0 |
    while IFS= read -r -d '' f; do
      grep -q '^kind: Stage$' "$f" || continue  # kustomizations, RBAC: not stages
      mkdir -p "$tmp/stages/$(dirname "$f")"
      cp "$f" "$tmp/stages/$f"
      chmod 0644 "$tmp/stages/$f"  # the module cache's files are read-only
    done
)
for s in "${needed_stages[@]}"; do
  if [[ ! -f "$tmp/stages/$s" ]]; then
    echo "error: sigs.k8s.io/kwok@$kwok_version has no kustomize/stage/$s" >&2
    exit 1
  fi
done

# consts.Version is what `kwok --version` prints and the node-initialize stage writes into nodeInfo.
ldflags="-s -w -X sigs.k8s.io/kwok/pkg/consts.Version=${kwok_version#v}"
if ! CGO_ENABLED=0 go build -trimpath -ldflags "$ldflags" -o "$tmp/bin/kwok" sigs.k8s.io/kwok/cmd/kwok >&2; then
  echo "error: go build of KWOK failed (see above)" >&2
  exit 1
fi

rm -rf "$out/bin" "$out/stages"
mv "$tmp/bin" "$tmp/stages" "$out/"
rmdir "$tmp"
echo "$stamp" > "$stamp_file"
echo "built in $(( $(date +%s) - start ))s" >&2
echo "$out"
