#!/usr/bin/env bash
# Builds the Go interop harness into tests/interop/bin/:
#   cdswatch   - our own CDS watcher on top of the upstream CDS client (cmd/cdswatch)
#   cdsserver  - our own stdin driver for the upstream CDS server (cmd/cdsserver)
#   turnprobe  - our own TURN allocate-and-relay probe with a JSON verdict (cmd/turnprobe)
#   turntcpprobe - our own RFC 6062 TCP allocation probe with a JSON verdict (cmd/turntcpprobe)
#   stunnerd   - upstream dataplane daemon   (github.com/l7mp/stunner/cmd/stunnerd)
#   turncat    - upstream TURN client        (github.com/l7mp/stunner/cmd/turncat)
#   stunnerctl - upstream CLI                (github.com/l7mp/stunner/cmd/stunnerctl)
#   icetester  - upstream ICE test peer      (github.com/l7mp/stunner/cmd/icetester): the WHIP
#                server `stunnerctl icetest` runs in the cluster; tests/images/build.sh puts it
#                into the icetester image
# Upstream code comes from the Go module proxy at the version pinned in go.mod.
# With STUNNER_GIT set (a git directory of a clone of github.com/l7mp/stunner), also:
#   stunnerd-git - upstream's dataplane daemon at that clone's HEAD, for what the pinned release
#                  lacks (TCP clusters, l7mp/stunner#232); its HEAD is exported into upstream/
#                  (gitignored) and built with its own go.mod. Unset: skipped with a notice.
# Idempotent: a binary is rebuilt only when older than go.mod, go.sum, this
# script or (for our own commands under cmd/) their sources and the shared ones under internal/.
# Needs only `go` and the module proxy.
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
  [turntcpprobe]=./cmd/turntcpprobe
  [stunnerd]=github.com/l7mp/stunner/cmd/stunnerd
  [turncat]=github.com/l7mp/stunner/cmd/turncat
  [stunnerctl]=github.com/l7mp/stunner/cmd/stunnerctl
  [icetester]=github.com/l7mp/stunner/cmd/icetester
)
order=(cdswatch cdsserver turnprobe turntcpprobe stunnerd turncat stunnerctl icetester)

# Is bin/$1 up to date w.r.t. its inputs?
fresh() {
  local bin="bin/$1" f
  [[ $force -eq 0 && -x "$bin" ]] || return 1
  local inputs=(go.mod go.sum build.sh)
  if [[ "${pkgs[$1]}" == ./* ]]; then
    while IFS= read -r -d '' f; do inputs+=("$f"); done \
      < <(find "${pkgs[$1]}" internal -type f -name '*.go' -print0)
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

# stunnerd at the HEAD of STUNNER_GIT: rebuilt when HEAD moves (bin/stunnerd-git.commit says
# which commit the binary is), or when this script changes.
if [[ -z "${STUNNER_GIT:-}" ]]; then
  summary+=("  stunnerd-git: skipped (STUNNER_GIT is not set)")
elif ! head="$(git --git-dir="$STUNNER_GIT" rev-parse HEAD)"; then
  summary+=("  stunnerd-git: FAILED (STUNNER_GIT=$STUNNER_GIT is not a git directory)")
  failed=1
elif [[ $force -eq 0 && -x bin/stunnerd-git && bin/stunnerd-git -nt build.sh
        && "$(cat bin/stunnerd-git.commit 2>/dev/null)" == "$head" ]]; then
  summary+=("  stunnerd-git: up to date (${head:0:12})")
else
  t0=$SECONDS
  rm -rf upstream
  mkdir -p upstream
  git --git-dir="$STUNNER_GIT" archive "$head" | tar -x -C upstream
  ldflags="-s -w -X main.version=git-${head:0:12} -X main.commitHash=${head:0:12} -X main.buildDate=n/a"
  if (cd upstream && go build -mod=readonly -buildvcs=false -trimpath -ldflags "$ldflags" \
        -o "$here/bin/stunnerd-git.tmp" ./cmd/stunnerd); then
    mv -f bin/stunnerd-git.tmp bin/stunnerd-git
    echo "$head" >bin/stunnerd-git.commit
    summary+=("  stunnerd-git: built ${head:0:12} in $((SECONDS - t0))s")
  else
    rm -f bin/stunnerd-git.tmp bin/stunnerd-git.commit
    summary+=("  stunnerd-git: BUILD FAILED (${head:0:12})")
    failed=1
  fi
fi

echo "interop harness (github.com/l7mp/stunner ${pin}) -> $here/bin ($((SECONDS - start))s)"
printf '%s\n' "${summary[@]}"
exit $failed
