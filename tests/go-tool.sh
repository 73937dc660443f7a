#!/usr/bin/env bash
# Builds the Go test tool in directory DIR (a module with one main package, or a test package
# with GO_TOOL_TEST) into DIR/bin/NAME, for the harness build scripts beside it (tests/apiserver,
# tests/deploytool, tests/conformance).
# Idempotent: skips the build when the binary is newer than go.mod, go.sum, DIR/build.sh, this
# script and every *.go file in DIR. Needs only `go` and the module proxy; never downloads a
# toolchain.
# GO_TOOL_LDFLAGS (optional): more -ldflags for this build, e.g. -X settings of version strings.
# GO_TOOL_PKG (optional): the main package to build, if not DIR's own (e.g. a command of a
# module DIR requires).
# GO_TOOL_TEST (optional): 1 builds DIR's test binary (`go test -c`) instead of a command.
# GO_TOOL_INPUTS (optional): more files (relative to DIR, space-separated) the binary is
# rebuilt after, e.g. manifests it embeds.
# Usage: go-tool.sh DIR NAME [--force]
set -euo pipefail

dir="$(cd "$1" && pwd)"
name="$2"
force=0
[[ "${3:-}" == "--force" ]] && force=1
self="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)/go-tool.sh"
cd "$dir"

command -v go >/dev/null || { echo "$name: 'go' not found in PATH" >&2; exit 1; }
export GOTOOLCHAIN="${GOTOOLCHAIN:-local}"

bin="bin/$name"
fresh() {
  [[ $force -eq 0 && -x "$bin" ]] || return 1
  local f
  for f in go.mod go.sum build.sh "$self" *.go ${GO_TOOL_INPUTS:-}; do
    [[ "$bin" -nt "$f" ]] || return 1
  done
}

if fresh; then
  echo "$name: $dir/$bin up to date"
  exit 0
fi

mkdir -p bin
t0=$SECONDS
build=(build)
[[ "${GO_TOOL_TEST:-}" == 1 ]] && build=(test -c)
go "${build[@]}" -mod=readonly -buildvcs=false -trimpath -ldflags "-s -w ${GO_TOOL_LDFLAGS:-}" -o "$bin.tmp" "${GO_TOOL_PKG:-.}"
mv -f "$bin.tmp" "$bin"
echo "$name: built $dir/$bin in $((SECONDS - t0))s"
