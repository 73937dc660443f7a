#!/usr/bin/env bash
# Builds tests/deploytool/bin/deploytool: real Helm (helm.sh/helm/v3) and kustomize
# (sigs.k8s.io/kustomize/api) from the Go module proxy at the versions pinned in go.mod/go.sum,
# for tests/deploy.rs; and tests/deploytool/bin/helm, the helm command itself from the same
# module, for the tests of scripts/release-artifacts (`helm package`, `helm push`, `helm install
# oci://`). Test tooling only; never shipped. Each is skipped when up to date (see
# ../go-tool.sh). Needs `go` >= 1.26 (see go.mod) and the module proxy.
# Usage: build.sh [--force]
set -euo pipefail
here="$(dirname "${BASH_SOURCE[0]}")"
"$here/../go-tool.sh" "$here" deploytool "$@"
GO_TOOL_PKG=helm.sh/helm/v3/cmd/helm GO_TOOL_LDFLAGS="-X helm.sh/helm/v3/internal/version.version=v3.22.0" \
  "$here/../go-tool.sh" "$here" helm "$@"
