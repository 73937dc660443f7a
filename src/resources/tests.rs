use super::*;
use kube::core::ObjectList;
use serde_json::{Value, json};

fn yaml<T: serde::de::DeserializeOwned>(text: &str) -> T {
    serde_yaml_ng::from_str(text).unwrap()
}

/// Serializing what was parsed gives the manifest back (no field lost, none invented).
fn round_trips<T: serde::Serialize + serde::de::DeserializeOwned>(text: &str) -> T {
    let object: T = yaml(text);
    let manifest: Value = yaml(text);
    assert_eq!(serde_json::to_value(&object).unwrap(), manifest);
    object
}

#[test]
fn gateway_config_round_trips() {
    let gc: GatewayConfig = round_trips(
        r#"
apiVersion: stunner.l7mp.io/v1
kind: GatewayConfig
metadata:
  name: stunner-gatewayconfig
  namespace: stunner
spec:
  dataplane: custom
  realm: stunner.l7mp.io
  authType: static
  userName: user-1
  password: pass-1
  authRef:
    name: auth-secret
    namespace: stunner
  loadBalancerServiceAnnotations:
    service.beta.kubernetes.io/aws-load-balancer-type: nlb
  logLevel: all:DEBUG
  userQuota: 10
  stunMode: true
"#,
    );
    assert_eq!(gc.spec.username.as_deref(), Some("user-1"));
    assert_eq!(gc.spec.auth_ref.as_ref().map(|r| r.name.as_str()), Some("auth-secret"));
    assert_eq!(gc.spec.user_quota, 10);
}

#[test]
fn unset_fields_stay_unset() {
    let gc: GatewayConfig =
        yaml("apiVersion: stunner.l7mp.io/v1\nkind: GatewayConfig\nmetadata: {name: a}\nspec: {}\n");
    assert_eq!(gc.spec, GatewayConfigSpec::default());
    assert_eq!(serde_json::to_value(&gc.spec).unwrap(), json!({}));
}

#[test]
fn a_missing_or_null_spec_is_the_default_spec() {
    let without: GatewayConfig = yaml("apiVersion: stunner.l7mp.io/v1\nkind: GatewayConfig\nmetadata: {name: a}\n");
    assert_eq!(without.spec, GatewayConfigSpec::default());
    let null: Dataplane = yaml("apiVersion: stunner.l7mp.io/v1\nkind: Dataplane\nmetadata: {name: a}\nspec: null\n");
    assert_eq!(null.spec, DataplaneSpec::default());
    let ssvc: StaticService = yaml("apiVersion: stunner.l7mp.io/v1\nkind: StaticService\nmetadata: {name: a}\n");
    assert!(ssvc.spec.prefixes.is_empty());
}

#[test]
fn a_spec_less_object_does_not_fail_its_list() {
    let list: ObjectList<GatewayConfig> = serde_json::from_value(json!({
        "apiVersion": "stunner.l7mp.io/v1",
        "kind": "GatewayConfigList",
        "metadata": {"resourceVersion": "1"},
        "items": [
            {"apiVersion": "stunner.l7mp.io/v1", "kind": "GatewayConfig", "metadata": {"name": "a"}},
            {"apiVersion": "stunner.l7mp.io/v1", "kind": "GatewayConfig", "metadata": {"name": "b"},
             "spec": {"realm": "example.com"}},
        ],
    }))
    .unwrap();
    assert_eq!(list.items.len(), 2);
    assert_eq!(list.items[1].spec.realm.as_deref(), Some("example.com"));
}

#[test]
fn unknown_fields_are_ignored() {
    // As Go's decoder does: a newer upstream field must not make an object unreadable.
    let gc: GatewayConfig = yaml(
        "apiVersion: stunner.l7mp.io/v1\nkind: GatewayConfig\nmetadata: {name: a}\nspec: {realm: r, futureField: 1}\n",
    );
    assert_eq!(gc.spec.realm.as_deref(), Some("r"));
}

#[test]
fn debug_output_redacts_credentials() {
    let spec = GatewayConfigSpec {
        username: Some("visible-user".into()),
        password: Some("secret-password".into()),
        shared_secret: Some("secret-shared".into()),
        ..Default::default()
    };
    let gc = GatewayConfig::new("a", spec.clone());
    let legacy = v1alpha1::GatewayConfigSpec {
        password: Some("secret-password".into()),
        shared_secret: Some("secret-shared".into()),
        ..Default::default()
    };
    for text in [format!("{spec:?}"), format!("{gc:?}"), format!("{legacy:?}")] {
        assert!(!text.contains("secret-"), "{text}");
        assert!(text.contains("<redacted>"), "{text}");
    }
    assert!(!format!("{spec:?}").contains("visible-user"), "a user name is a credential too");
}

#[test]
fn default_dataplane_manifest_parses() {
    // deploy/manifests/default_dataplane.yaml upstream (spec §10.2).
    let dp: Dataplane = round_trips(
        r#"
apiVersion: stunner.l7mp.io/v1
kind: Dataplane
metadata:
  name: default
spec:
  replicas: 1
  resources:
    limits:
      cpu: 250m
      memory: 120Mi
    requests:
      cpu: 250m
      memory: 120Mi
  terminationGracePeriodSeconds: 60
  enableMetricsEndpoint: true
"#,
    );
    assert_eq!(dp.spec.replicas, Some(1));
    assert_eq!(dp.spec.termination_grace_period_seconds, Some(60));
    assert!(dp.spec.enable_metrics_endpoint);
    assert!(dp.spec.image.is_empty() && dp.spec.command.is_empty());
    assert_eq!(dp.spec.resources.unwrap().limits.unwrap()["cpu"].0, "250m");
}

#[test]
fn dataplane_round_trips_every_field() {
    let dp: Dataplane = round_trips(
        r#"
apiVersion: stunner.l7mp.io/v1
kind: Dataplane
metadata:
  name: full
spec:
  image: l7mp/stunnerd:latest
  imagePullPolicy: IfNotPresent
  imagePullSecrets: [{name: regcred}]
  dataplaneResource: DaemonSet
  labels: {app: stunner}
  annotations: {a: b}
  command: [stunnerd]
  args: ["-w", "--udp-thread-num=16"]
  envFrom: [{configMapRef: {name: env}}]
  env: [{name: A, value: b}]
  containerSecurityContext: {runAsNonRoot: true}
  replicas: 3
  resources: {requests: {cpu: 100m}}
  terminationGracePeriodSeconds: 3600
  hostNetwork: true
  affinity:
    nodeAffinity:
      requiredDuringSchedulingIgnoredDuringExecution:
        nodeSelectorTerms: [{matchExpressions: [{key: k, operator: In, values: [v]}]}]
  securityContext: {runAsUser: 1000}
  tolerations: [{key: k, operator: Exists}]
  topologySpreadConstraints: [{maxSkew: 1, topologyKey: zone, whenUnsatisfiable: DoNotSchedule}]
  disableHealthCheck: true
  enableMetricsEndpoint: true
  offloadEngine: XDP
  offloadInterfaces: [eth0]
"#,
    );
    assert_eq!(dp.spec.dataplane_resource, Some(DataplaneResourceType::DaemonSet));
    assert_eq!(dp.spec.offload_engine, "XDP");
}

#[test]
fn udp_route_round_trips_with_status() {
    let route: UdpRoute = round_trips(
        r#"
apiVersion: stunner.l7mp.io/v1
kind: UDPRoute
metadata:
  name: media-plane
  namespace: stunner
spec:
  parentRefs:
  - name: udp-gateway
    sectionName: udp-listener
  rules:
  - backendRefs:
    - name: media-server
      namespace: default
    - group: stunner.l7mp.io
      kind: StaticService
      name: static-svc
      port: 10000
      endPort: 20000
status:
  parents:
  - parentRef:
      name: udp-gateway
      sectionName: udp-listener
    controllerName: stunner.l7mp.io/gateway-operator
    conditions:
    - type: Accepted
      status: "True"
      reason: Accepted
      message: parent accepts the route
      lastTransitionTime: "2024-01-01T00:00:00Z"
      observedGeneration: 1
"#,
    );
    let backends = &route.spec.rules[0].backend_refs;
    assert_eq!(backends[0].port, None);
    assert_eq!((backends[1].port, backends[1].end_port), (Some(10000), Some(20000)));
    let status = route.status.unwrap();
    assert_eq!(status.parents[0].conditions[0].type_, "Accepted");
}

#[test]
fn legacy_versions_parse() {
    let gc: v1alpha1::GatewayConfig = round_trips(
        r#"
apiVersion: stunner.l7mp.io/v1alpha1
kind: GatewayConfig
metadata: {name: a}
spec: {stunnerConfig: cfg, minPort: 1, maxPort: 2}
"#,
    );
    assert_eq!(gc.spec.stunner_config.as_deref(), Some("cfg"));
    let ssvc: v1alpha1::StaticService = round_trips(
        r#"
apiVersion: stunner.l7mp.io/v1alpha1
kind: StaticService
metadata: {name: a}
spec: {ports: [{port: 1, protocol: UDP}], prefixes: [10.0.0.0/8]}
"#,
    );
    assert_eq!(ssvc.spec.prefixes, ["10.0.0.0/8"]);
    let dp: v1alpha1::Dataplane = round_trips(
        "apiVersion: stunner.l7mp.io/v1alpha1\nkind: Dataplane\nmetadata: {name: a}\nspec: {healthCheckPort: 8086}\n",
    );
    assert_eq!(dp.spec.health_check_port, Some(8086));
}

#[test]
fn gateway_api_kinds_parse() {
    let class: GatewayClass = yaml(
        r#"
apiVersion: gateway.networking.k8s.io/v1
kind: GatewayClass
metadata: {name: stunner}
spec:
  controllerName: stunner.l7mp.io/gateway-operator
  parametersRef: {group: stunner.l7mp.io, kind: GatewayConfig, name: gc, namespace: stunner}
"#,
    );
    assert_eq!(class.spec.controller_name, "stunner.l7mp.io/gateway-operator");
    let gw: Gateway = yaml(
        r#"
apiVersion: gateway.networking.k8s.io/v1
kind: Gateway
metadata: {name: g, namespace: stunner}
spec:
  gatewayClassName: stunner
  listeners: [{name: udp, port: 3478, protocol: TURN-UDP}]
"#,
    );
    assert_eq!(gw.spec.listeners[0].protocol, "TURN-UDP");
    let route: GatewayUdpRoute = yaml(
        r#"
apiVersion: gateway.networking.k8s.io/v1alpha2
kind: UDPRoute
metadata: {name: r}
spec:
  parentRefs: [{name: g}]
  rules: [{backendRefs: [{name: svc, port: 9001}]}]
"#,
    );
    assert_eq!(route.spec.rules[0].backend_refs[0].port, Some(9001));
}

#[test]
fn every_crd_is_multi_version_with_v1_stored() {
    let crds = crds();
    let kinds: Vec<_> = crds.iter().map(|c| c.spec.names.kind.as_str()).collect();
    assert_eq!(kinds, ["Dataplane", "GatewayConfig", "StaticService", "UDPRoute"]);
    for crd in &crds {
        assert_eq!(crd.spec.group, GROUP);
        let stored: Vec<_> = crd.spec.versions.iter().filter(|v| v.storage).map(|v| v.name.as_str()).collect();
        assert_eq!(stored, ["v1"], "{}", crd.spec.names.kind);
        assert!(crd.spec.versions.iter().all(|v| v.served));
    }
    assert_eq!(crds[0].spec.scope, "Cluster");
    assert_eq!(crds[1].spec.versions.len(), 2);
    assert_eq!(crds[3].spec.versions.len(), 1);
}
