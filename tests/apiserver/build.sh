#!/usr/bin/env bash
# Builds the in-process kube-apiserver + etcd harness into tests/apiserver/bin/apiserver.
# k8s.io/kubernetes, etcd and the k8s.io/* staging modules come from the Go module proxy
# at the versions pinned in go.mod/go.sum (see the replace block there). Skipped when up to
# date (see ../go-tool.sh). Needs `go` >= 1.24 and the module proxy.
# Usage: build.sh [--force]
exec "$(dirname "${BASH_SOURCE[0]}")/../go-tool.sh" "$(dirname "${BASH_SOURCE[0]}")" apiserver "$@"
