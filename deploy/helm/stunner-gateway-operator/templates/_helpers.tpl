{{/* The name of every namespaced object and of the cluster-wide RBAC objects. */}}
{{- define "sgo.name" -}}stunner-gateway-operator{{- end -}}

{{- define "sgo.selectorLabels" -}}
app.kubernetes.io/name: {{ include "sgo.name" . }}
app.kubernetes.io/instance: {{ .Release.Name }}
{{- end -}}

{{- define "sgo.labels" -}}
{{ include "sgo.selectorLabels" . }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" }}
{{- end -}}

{{/* The CDS host advertised to dataplanes. */}}
{{- define "sgo.cdsHost" -}}
{{ .Values.cds.serviceName }}.{{ .Release.Namespace }}.svc
{{- end -}}

{{/* This chart's STUNner CRDs (crds/), as ConfigMap data: what installCrds applies. */}}
{{- define "sgo.crdFiles" -}}
{{ (.Files.Glob "crds/*.yaml").AsConfig }}
{{- end -}}

{{/* Where the operator reads the CRDs of installCrds (--crd-dir). */}}
{{- define "sgo.crdDir" -}}/etc/stunner-gateway-operator/crds{{- end -}}
