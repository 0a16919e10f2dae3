#!/usr/bin/env bash
# Build the pinned actionlint (the linter .ci/run checks .github/workflows/ with) into a cache folder
# keyed by the actionlint release and go.sum, beside the control plane's and helm's.
#
#   tools/actionlint/build.sh [CACHE_DIR]
#
# Idempotent: when the binary is present and the stamp matches go.mod+go.sum, it prints the bin
# folder and exits at once. Prints the bin folder on stdout; progress goes to stderr. Concurrent
# callers take turns on a lock file in the cache folder: the second waits for the first build,
# finds its binary and returns.
set -euo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
version=$(awk '$1 == "require" && $2 == "github.com/rhysd/actionlint" {print $3; exit}
               $1 == "github.com/rhysd/actionlint" && $2 ~ /^v/ {print $2; exit}' "$here/go.mod")
if [[ -z $version ]]; then
  echo "error: $here/go.mod does not require github.com/rhysd/actionlint" >&2
  exit 1
fi
cache_root=${1:-${KOPF_SCHEDULER_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/kopf-scheduler}}
bin="$cache_root/actionlint-$version/bin"
stamp_file="$bin/.stamp"

# comments in go.mod do not change what is built
stamp=$( (awk '!/^\/\//' "$here/go.mod"; cat "$here/go.sum") | sha256sum | cut -c1-16)
built() {
  [[ -x "$bin/actionlint" && -f $stamp_file && $(cat "$stamp_file") == "$stamp" ]]
}
if built; then
  echo "$bin"
  exit 0
fi

if ! command -v go >/dev/null 2>&1; then
  echo "error: Go is not installed (or not on PATH); it is needed to build actionlint." >&2
  exit 2
fi

mkdir -p "$bin"
exec 9>"$bin/.lock"
if ! flock -n 9; then
  echo "another build of actionlint is running; waiting for it" >&2
  flock 9
fi
if built; then  # the build we waited for made it
  echo "$bin"
  exit 0
fi

echo "building actionlint $version into $bin (cold: well under a minute)" >&2
start=$(date +%s)
cd "$here"
tmp="$bin/.partial"
rm -rf "$tmp" && mkdir -p "$tmp"
# the version stamp actionlint's own release build sets (`actionlint -version` then says it)
if ! CGO_ENABLED=0 go build -trimpath -ldflags "-s -w -X github.com/rhysd/actionlint.version=${version#v}" \
    -o "$tmp/actionlint" github.com/rhysd/actionlint/cmd/actionlint >&2; then
  echo "error: go build of actionlint failed (see above)" >&2
  exit 1
fi
mv -f "$tmp/actionlint" "$bin/actionlint"
rmdir "$tmp"
echo "$stamp" > "$stamp_file"
echo "built in $(( $(date +%s) - start ))s" >&2
echo "$bin"
