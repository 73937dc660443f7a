#!/usr/bin/env bash
# Builds the Gateway API conformance harness (the suite of sigs.k8s.io/gateway-api/conformance
# at the version in go.mod, run by conformance_test.go) into tests/conformance/bin/conformance,
# a Go test binary that server/tests/e2e_conformance.rs runs. Skipped when up to date (see
# ../go-tool.sh). Needs `go` >= 1.26 and the module proxy.
# Usage: build.sh [--force]
here="$(dirname "${BASH_SOURCE[0]}")"
export GO_TOOL_TEST=1
export GO_TOOL_INPUTS="manifests/base.yaml"
exec "$here/../go-tool.sh" "$here" conformance "$@"
