#!/usr/bin/env bash
# Builds tests/registry/bin/registry: an OCI distribution registry on loopback
# (github.com/google/go-containerregistry/pkg/registry, from the Go module proxy at the version
# pinned in go.mod/go.sum), for the tests of scripts/release-artifacts. Test tooling only;
# never shipped. Skipped when up to date (see ../go-tool.sh).
# Usage: build.sh [--force]
exec "$(dirname "${BASH_SOURCE[0]}")/../go-tool.sh" "$(dirname "${BASH_SOURCE[0]}")" registry "$@"
