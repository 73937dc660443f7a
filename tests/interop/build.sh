#!/usr/bin/env bash
# Builds the Go interop harness into tests/interop/bin/:
#   cdswatch   - our own CDS watcher on top of the upstream CDS client (cmd/cdswatch)
#   cdsserver  - our own stdin driver for the upstream CDS server (cmd/cdsserver)
#   turnprobe  - our own TURN allocate-and-relay probe with a JSON verdict (cmd/turnprobe)
#   stunnerd   - upstream dataplane daemon   (github.com/l7mp/stunner/cmd/stunnerd)
#   turncat    - upstream TURN client        (github.com/l7mp/stunner/cmd/turncat)
#   stunnerctl - upstream CLI                (github.com/l7mp/stunner/cmd/stunnerctl)
# Upstream code comes from the Go module proxy at the version pinned in go.mod.
# Idempotent: a binary is rebuilt only when older than go.mod, go.sum, this
# script or (for our own commands under cmd/) their sources. Needs only `go` and the module proxy.
# Usage: build.sh [--force]
set -euo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
cd "$here"

force=0
[[ "${1:-}" == "--force" ]] && force=1

command -v go >/dev/null || { echo "build.sh: 'go' not found in PATH" >&2; exit 1; }

# The pinned upstream needs go >= 1.25 (go.mod 'go' line); never download a toolchain.
export GOTOOLCHAIN="${GOTOOLCHAIN:-local}"
# Static binaries: nothing here needs cgo, and tests/images/build.sh puts this very stunnerd
# into the dataplane image (one cold build of the upstream tree, not two).
export CGO_ENABLED=0

mkdir -p bin

# the pinned upstream version: `require github.com/l7mp/stunner vX` or a line in a require block
pin="$(awk '$1=="require" && $2=="github.com/l7mp/stunner" {print $3; exit}
            $1=="github.com/l7mp/stunner" {print $2; exit}' go.mod)"
[[ -n "$pin" ]] || { echo "build.sh: cannot find the github.com/l7mp/stunner version in go.mod" >&2; exit 1; }

declare -A pkgs=(
  [cdswatch]=./cmd/cdswatch
  [cdsserver]=./cmd/cdsserver
  [turnprobe]=./cmd/turnprobe
  [stunnerd]=github.com/l7mp/stunner/cmd/stunnerd
  [turncat]=github.com/l7mp/stunner/cmd/turncat
  [stunnerctl]=github.com/l7mp/stunner/cmd/stunnerctl
)
order=(cdswatch cdsserver turnprobe stunnerd turncat stunnerctl)

# Is bin/$1 up to date w.r.t. its inputs?
fresh() {
  local bin="bin/$1" f
  [[ $force -eq 0 && -x "$bin" ]] || return 1
  local inputs=(go.mod go.sum build.sh)
  if [[ "${pkgs[$1]}" == ./* ]]; then
    while IFS= read -r -d '' f; do inputs+=("$f"); done \
      < <(find "${pkgs[$1]}" -type f -name '*.go' -print0)
  fi
  for f in "${inputs[@]}"; do
    [[ "$bin" -nt "$f" ]] || return 1
  done
  return 0
}

summary=()
failed=0
start=$SECONDS
for name in "${order[@]}"; do
  if fresh "$name"; then
    summary+=("  $name: up to date")
    continue
  fi
  t0=$SECONDS
  ldflags="-s -w"
  if [[ "${pkgs[$name]}" == github.com/l7mp/stunner/* ]]; then
    # what upstream's Makefile stamps in; shows up in `stunnerd` logs
    ldflags="$ldflags -X main.version=${pin} -X main.commitHash=proxy -X main.buildDate=n/a"
  fi
  if go build -mod=readonly -buildvcs=false -trimpath -ldflags "$ldflags" -o "bin/$name.tmp" "${pkgs[$name]}"; then
    mv -f "bin/$name.tmp" "bin/$name"
    summary+=("  $name: built in $((SECONDS - t0))s")
  else
    rm -f "bin/$name.tmp"
    summary+=("  $name: BUILD FAILED")
    failed=1
  fi
done

echo "interop harness (github.com/l7mp/stunner ${pin}) -> $here/bin ($((SECONDS - start))s)"
printf '%s\n' "${summary[@]}"
exit $failed
