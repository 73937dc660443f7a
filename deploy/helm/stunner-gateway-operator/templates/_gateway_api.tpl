{{/*
The Gateway API CRDs: what the cluster has, and whether this release installs its bundle
(the subcharts charts/gateway-api-{standard,experimental}-crds, switched by standardCrds.enabled
and experimentalCrds.enabled, render it when "install" is true). Helm's `lookup` reads the
bundle's GatewayClass CRD, whose annotations name the bundle's version and channel; it finds
nothing in `helm template` and `--dry-run`, which render the bundle.

The bundle is installed when the cluster has none, or when this release installed the one it
has (Helm then keeps it at the chart's version) and that is not newer. A bundle someone else
installed is left alone, whatever its version: taking it over would fail on Helm's ownership
check, and the notes say so (and how to upgrade it when it is older than ours). The bundle's
objects carry `helm.sh/resource-policy: keep`: no uninstall or upgrade deletes the CRDs, and
with them the cluster's Gateways and routes.

Returns YAML: present, found (the bundle version, "" when none or unannotated), channel, owned,
older (than ours), install.
*/}}
{{- define "sgo.gatewayApi.state" -}}
{{- $want := include "sgo.gatewayApi.version" . -}}
{{- $crd := lookup "apiextensions.k8s.io/v1" "CustomResourceDefinition" "" "gatewayclasses.gateway.networking.k8s.io" | default dict -}}
{{- $ann := dig "metadata" "annotations" dict $crd -}}
{{- $found := get $ann "gateway.networking.k8s.io/bundle-version" | toString -}}
{{- $owned := and (eq (get $ann "meta.helm.sh/release-name" | toString) .Release.Name) (eq (get $ann "meta.helm.sh/release-namespace" | toString) .Release.Namespace) -}}
{{- $semver := regexMatch "^v[0-9]+\\.[0-9]+\\.[0-9]+(-[0-9A-Za-z.-]+)?$" $found -}}
{{- $newer := and $semver (semverCompare (printf "> %s" $want) $found) -}}
{{- $older := or (not $semver) (semverCompare (printf "< %s" $want) $found) -}}
present: {{ not (empty $crd) }}
found: {{ $found | quote }}
channel: {{ get $ann "gateway.networking.k8s.io/channel" | toString | quote }}
owned: {{ $owned }}
older: {{ $older }}
install: {{ or (empty $crd) (and $owned (not $newer)) }}
{{- end -}}

{{/* The notes' lines on the Gateway API CRDs; `.` is the root context, `v` the values. */}}
{{- define "sgo.gatewayApi.notes" -}}
{{- $want := include "sgo.gatewayApi.version" .root -}}
{{- $state := include "sgo.gatewayApi.state" .root | fromYaml -}}
{{- $channel := ternary "experimental" "standard" (dig "experimentalCrds" "enabled" false .v) -}}
{{- $found := printf "%s %s channel" (default "an unannotated" $state.found) (default "unknown" $state.channel) -}}
{{- if not (or (dig "standardCrds" "enabled" false .v) (dig "experimentalCrds" "enabled" false .v)) -}}
Gateway API CRDs: not installed by this release (standardCrds.enabled and
experimentalCrds.enabled are off). The operator is tested with {{ $want }} (docs/deploy.md §1)
{{- if $state.present }}; the cluster has {{ $found }}{{ end }}.
{{- else if $state.install -}}
Gateway API CRDs: {{ $want }} {{ $channel }} channel with its safe-upgrades
ValidatingAdmissionPolicy, installed by this release and kept on uninstall
(helm.sh/resource-policy: keep).
{{- else -}}
Gateway API CRDs: the cluster has {{ $found }}{{ if not $state.owned }}, not installed by this
release{{ end }}: left alone.
{{- if $state.older }}
It is older than {{ $want }}, the release this operator is tested with. Upgrade it:
  kubectl apply --server-side -f https://github.com/kubernetes-sigs/gateway-api/releases/download/{{ $want }}/{{ $channel }}-install.yaml
{{- end }}
{{- end }}
{{- end -}}
