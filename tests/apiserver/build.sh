#!/usr/bin/env bash
# Builds the in-process kube-apiserver + etcd harness into tests/apiserver/bin/apiserver.
# k8s.io/kubernetes, etcd and the k8s.io/* staging modules come from the Go module proxy
# at the versions pinned in go.mod/go.sum (see the replace block there). Skipped when up to
# date (see ../go-tool.sh). Needs `go` >= 1.24 and the module proxy.
# Usage: build.sh [--force]
# The version every component reports (/version, the Node's kubeletVersion): the module's own
# version, as a release build stamps it; unstamped it is v0.0.0-master, which charts with a
# kubeVersion constraint (ours: >=1.26) refuse.
v=k8s.io/component-base/version
export GO_TOOL_LDFLAGS="-X $v.gitVersion=v1.34.2 -X $v.gitMajor=1 -X $v.gitMinor=34 -X $v.gitTreeState=clean"
exec "$(dirname "${BASH_SOURCE[0]}")/../go-tool.sh" "$(dirname "${BASH_SOURCE[0]}")" apiserver "$@"
