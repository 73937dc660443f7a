#!/usr/bin/env bash
# Builds tests/deploytool/bin/deploytool: real Helm (helm.sh/helm/v3) and kustomize
# (sigs.k8s.io/kustomize/api) from the Go module proxy at the versions pinned in go.mod/go.sum,
# for tests/deploy.rs. Test tooling only; never shipped. Skipped when up to date (see
# ../go-tool.sh). Needs `go` >= 1.26 (see go.mod) and the module proxy.
# Usage: build.sh [--force]
exec "$(dirname "${BASH_SOURCE[0]}")/../go-tool.sh" "$(dirname "${BASH_SOURCE[0]}")" deploytool "$@"
