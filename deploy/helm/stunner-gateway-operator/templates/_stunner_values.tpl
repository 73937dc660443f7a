{{/*
The values of the `stunner` chart (github.com/l7mp/stunner-helm, helm/stunner), read by this
chart: a values file written for `helm install stunner stunner/stunner` installs this chart
too. "sgo.values" is this chart's values with the stunner chart's keys that concern the
operator, its default Dataplane, the credential API and logging laid over them; every template
reads its values from it. A key that cannot mean here what it means there is refused, naming
the key, unless it holds the stunner chart's default. docs/upgrade.md has the table.
*/}}

{{/* Fails naming `key` when `given` (nil: absent) differs from the stunner chart's `default`. */}}
{{- define "sgo.stunnerKey.refuse" -}}
{{- $key := index . 0 -}}{{- $given := index . 1 -}}{{- $default := index . 2 -}}{{- $why := index . 3 -}}
{{- if and (not (kindIs "invalid" $given)) (ne (toJson $given) (toJson $default)) -}}
{{- fail (printf "%s is not supported by this chart: %s (docs/upgrade.md)" $key $why) -}}
{{- end -}}
{{- end -}}

{{- define "sgo.values" -}}
{{- $v := .Values | toYaml | fromYaml -}}
{{- $op := get $v "stunnerGatewayOperator" | default dict -}}
{{- $dep := get $op "deployment" | default dict -}}
{{- $mgr := dig "container" "manager" dict $dep -}}
{{- $auth := get $v "stunnerAuthService" | default dict -}}
{{- $logging := get $v "logging" | default dict -}}
{{- /* Refused unless at the stunner chart's default. */ -}}
{{- include "sgo.stunnerKey.refuse" (list "stunnerGatewayOperator.enabled" (dig "enabled" nil $op) true "this chart is the operator") -}}
{{- include "sgo.stunnerKey.refuse" (list "stunnerGatewayOperator.customerKey" (dig "customerKey" nil $op) "" "the premium license of the Go operator has no counterpart here") -}}
{{- include "sgo.stunnerKey.refuse" (list "stunnerGatewayOperator.deployment.name" (dig "name" nil $dep) "stunner-gateway-operator" "the operator's objects have fixed names") -}}
{{- include "sgo.stunnerKey.refuse" (list "stunnerGatewayOperator.deployment.container.manager.image.name" (dig "image" "name" nil $mgr) "docker.io/l7mp/stunner-gateway-operator" "this chart runs its own image: set image.repository") -}}
{{- include "sgo.stunnerKey.refuse" (list "stunnerGatewayOperator.deployment.container.manager.image.tag" (dig "image" "tag" nil $mgr) "1.2.0" "this chart runs its own image: set image.tag") -}}
{{- include "sgo.stunnerKey.refuse" (list "stunnerGatewayOperator.deployment.container.manager.args" (dig "args" nil $mgr) (list "--health-probe-bind-address=:8081" "--metrics-bind-address=127.0.0.1:8080" "--leader-elect") "the chart sets these flags itself: use leaderElect, metrics.port, health.port and extraArgs") -}}
{{- include "sgo.stunnerKey.refuse" (list "stunnerGatewayOperator.deployment.securityContext" (dig "securityContext" nil $dep) (dict "runAsNonRoot" true) "set podSecurityContext") -}}
{{- include "sgo.stunnerKey.refuse" (list "stunnerGatewayOperator.deployment.container.manager.securityContext" (dig "securityContext" nil $mgr) (dict "allowPrivilegeEscalation" false) "set securityContext") -}}
{{- include "sgo.stunnerKey.refuse" (list "stunnerAuthService.deployment" (dig "deployment" nil $auth) (include "sgo.stunnerAuthDeploymentDefault" . | fromYaml) "the operator serves the credential API itself: no Deployment of its own (authService.*)") -}}
{{- if and (dig "standardCrds" "enabled" false $v) (dig "experimentalCrds" "enabled" false $v) -}}
{{- fail "standardCrds.enabled and experimentalCrds.enabled: one Gateway API channel at a time; set standardCrds.enabled=false with experimentalCrds.enabled=true (docs/deploy.md)" -}}
{{- end -}}
{{- $operatorFormat := lower (dig "operator" "format" "text" $logging) -}}
{{- $authFormat := dig "authService" "format" nil $logging -}}
{{- if and $authFormat (ne (lower $authFormat) "text") (ne (lower $authFormat) $operatorFormat) -}}
{{- fail (printf "logging.authService.format %q is not supported by this chart: the operator writes the credential API's logs, in logging.operator.format (docs/upgrade.md)" $authFormat) -}}
{{- end -}}
{{- /* Honoured: the stunner chart's keys over this chart's. */ -}}
{{- range $key := list "replicas" "podLabels" "podAnnotations" "nodeSelector" "tolerations" "affinity" "imagePullSecrets" "topologySpreadConstraints" -}}
{{- if not (kindIs "invalid" (dig $key nil $dep)) -}}{{- $_ := set $v $key (dig $key nil $dep) -}}{{- end -}}
{{- end -}}
{{- with dig "resources" nil $mgr -}}{{- $_ := set $v "resources" . -}}{{- end -}}
{{- with dig "image" "pullPolicy" nil $mgr -}}{{- $_ := set $v.image "pullPolicy" . -}}{{- end -}}
{{- with dig "dataplane" "mode" nil $op -}}{{- $_ := set $v "dataplaneMode" . -}}{{- end -}}
{{- if hasKey $auth "enabled" -}}{{- $_ := set $v.authService "enabled" (dig "enabled" nil $auth) -}}{{- end -}}
{{- $spec := $v.defaultDataplane.spec | default dict -}}
{{- range $key, $value := dig "dataplane" "spec" dict $op -}}
{{- if kindIs "invalid" $value -}}
{{- else if eq $key "image" -}}
{{- $_ := set $spec "image" (printf "%s:%v" $value.name $value.tag) -}}
{{- with $value.pullPolicy -}}{{- $_ := set $spec "imagePullPolicy" . -}}{{- end -}}
{{- else -}}
{{- $_ := set $spec $key $value -}}
{{- end -}}
{{- end -}}
{{- with dig "dataplane" "format" nil $logging -}}
{{- $format := lower . -}}
{{- if not (has $format (list "text" "json")) -}}
{{- fail (printf "logging.dataplane.format %q: must be text or json" .) -}}
{{- end -}}
{{- $args := dig "args" nil $spec | default (list "-w" "--udp-thread-num=16") -}}
{{- $_ := set $spec "args" (append $args (printf "--log-format=%s" $format)) -}}
{{- end -}}
{{- $_ := set $v.defaultDataplane "spec" $spec -}}
{{- toYaml $v -}}
{{- end -}}

{{/* The stunner chart's stunnerAuthService.deployment defaults: a values file that keeps them installs here. */}}
{{- define "sgo.stunnerAuthDeploymentDefault" -}}
podLabels: {}
podAnnotations: {}
affinity: {}
tolerations: []
replicas: 1
nodeSelector:
  kubernetes.io/os: linux
imagePullSecrets: null
container:
  authService:
    securityContext:
      runAsNonRoot: true
    image:
      name: docker.io/l7mp/stunner-auth-server
      pullPolicy: IfNotPresent
      tag: 1.2.0
    resources:
      limits:
        cpu: 200m
        memory: 128Mi
      requests:
        cpu: 10m
        memory: 64Mi
    args:
      - --port=8088
      - -v
topologySpreadConstraints: []
{{- end -}}
