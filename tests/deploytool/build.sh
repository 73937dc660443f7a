#!/usr/bin/env bash
# Builds tests/deploytool/bin/deploytool: real Helm (helm.sh/helm/v3) and kustomize
# (sigs.k8s.io/kustomize/api) from the Go module proxy at the versions pinned in go.mod/go.sum,
# for tests/deploy.rs. Test tooling only; never shipped.
# Idempotent: skips the build when bin/deploytool is newer than go.mod, go.sum, this script
# and every *.go file here. Needs only `go` (>= 1.26, see go.mod) and the module proxy.
# Usage: build.sh [--force]
set -euo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
cd "$here"

force=0
[[ "${1:-}" == "--force" ]] && force=1

command -v go >/dev/null || { echo "build.sh: 'go' not found in PATH" >&2; exit 1; }
export GOTOOLCHAIN="${GOTOOLCHAIN:-local}"   # never download a toolchain

bin=bin/deploytool
fresh() {
  [[ $force -eq 0 && -x "$bin" ]] || return 1
  local f
  for f in go.mod go.sum build.sh *.go; do
    [[ "$bin" -nt "$f" ]] || return 1
  done
}

if fresh; then
  echo "deploytool: $here/$bin up to date"
  exit 0
fi

mkdir -p bin
t0=$SECONDS
go build -mod=readonly -buildvcs=false -trimpath -ldflags "-s -w" -o "$bin.tmp" .
mv -f "$bin.tmp" "$bin"
echo "deploytool: built $here/$bin in $((SECONDS - t0))s"
