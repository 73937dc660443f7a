#!/usr/bin/env bash
# Makes sure the upstream operator module pinned in go.mod (next to this script) is in the Go
# module cache, where tests/crds.rs reads its CRDs from: $(go env GOMODCACHE)/<module>@<version>/
# config/crd/bases. The reference YAML is never copied into this repository.
# Soft-fails: when the module cannot be had, the comparison test reports itself skipped
# (set STUNNER_REQUIRE_REFERENCE to make it fail instead).
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")"

mod=github.com/l7mp/stunner-gateway-operator
command -v go >/dev/null || { echo "reference CRDs: 'go' not found in PATH; comparison will be skipped" >&2; exit 0; }
export GOTOOLCHAIN="${GOTOOLCHAIN:-local}"

ver="$(awk -v m="$mod" '$1 == "require" && $2 == m { print $3 }' go.mod)"
dir="$(go env GOMODCACHE)/$mod@$ver/config/crd/bases"
if [[ -d "$dir" ]]; then
  echo "reference CRDs: $mod@$ver (cached)"
  exit 0
fi
if GOFLAGS="${GOFLAGS:-} -mod=mod" go mod download "$mod" && [[ -d "$dir" ]]; then
  echo "reference CRDs: $mod@$ver (downloaded)"
else
  echo "reference CRDs: could not download $mod@$ver; comparison will be skipped" >&2
fi
