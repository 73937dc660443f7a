//! The deploy artifacts: `deploy/manifests` (kustomize) and `deploy/helm/stunner-gateway-operator`,
//! rendered by real Helm and real kustomize (`tests/deploytool`, built from their Go modules by
//! `tests/deploytool/build.sh`; `scripts/test` runs it). `DEPLOYTOOL` overrides the binary.
//!
//! What is pinned: the objects and names both render, the operator pod (CDS label, args, env),
//! the optional objects (PDB, ServiceMonitor, PodMonitor, PrometheusRules, Grafana dashboards, pprof), one RBAC truth (the chart's ClusterRole
//! equals the manifests'), RBAC covering every kind `k8s/src/source.rs` watches and
//! `k8s/src/ops.rs` writes, the CRDs of `deploy/crds`, the default Dataplane of
//! operator-behavior.md §10.2 with the `stunner` chart's defaults (compared with a copy of
//! upstream's values, tests/fixtures), the Gateway API CRDs of its switches, the release
//! packaging (`scripts/release-artifacts`, against a real OCI registry), and every namespaced
//! object in `stunner-system`.

#[path = "support/external.rs"]
mod external;
#[path = "support/registry.rs"]
mod registry;

use serde::Deserialize;
use serde_json::{Value, json};
use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};
use std::process::Command;
use stunner_gateway::index::Kind;

const NAMESPACE: &str = "stunner-system";
const OPERATOR: &str = "stunner-gateway-operator";
const CDS_LABEL: &str = "stunner.l7mp.io/config-discovery-service";

fn repo() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

fn chart() -> String {
    repo().join("deploy/helm/stunner-gateway-operator").display().to_string()
}

fn manifests() -> PathBuf {
    repo().join("deploy/manifests")
}

fn deploytool_bin() -> PathBuf {
    std::env::var_os("DEPLOYTOOL").map(PathBuf::from).unwrap_or_else(|| repo().join("tests/deploytool/bin/deploytool"))
}

/// Whether deploytool is built; if not, the test is skipped (tests/support/external.rs).
fn deploytool_built() -> bool {
    let how = "build it with `tests/deploytool/build.sh` (scripts/test does), or point DEPLOYTOOL at it";
    external::built(deploytool_bin(), how).is_some()
}

/// Runs deploytool's `helm-template` with `args`, which must fail: its stderr.
fn helm_refused(args: &[&str]) -> String {
    let chart = chart();
    let out = Command::new(deploytool_bin()).args(["helm-template", chart.as_str()]).args(args).output().unwrap();
    assert!(!out.status.success(), "{args:?} rendered");
    String::from_utf8_lossy(&out.stderr).into_owned()
}

/// Runs deploytool; panics with its stderr unless it succeeds.
fn deploytool(args: &[&str]) -> String {
    let bin = deploytool_bin();
    let out = Command::new(&bin).args(args).output().unwrap_or_else(|e| panic!("{}: {e}", bin.display()));
    let stdout = String::from_utf8(out.stdout).unwrap();
    assert!(
        out.status.success(),
        "deploytool {args:?} failed ({}):\n{stdout}\n{}",
        out.status,
        String::from_utf8_lossy(&out.stderr)
    );
    stdout
}

/// The documents of a multi-document YAML stream, empty ones dropped.
fn documents(yaml: &str) -> Vec<Value> {
    serde_yaml_ng::Deserializer::from_str(yaml)
        .map(|doc| Value::deserialize(doc).unwrap_or_else(|e| panic!("bad YAML: {e}\n{yaml}")))
        .filter(|v| !v.is_null())
        .collect()
}

fn helm(sets: &[&str]) -> Vec<Value> {
    helm_in(NAMESPACE, sets)
}

fn helm_in(namespace: &str, sets: &[&str]) -> Vec<Value> {
    let chart = chart();
    let mut args = vec!["helm-template", chart.as_str(), "--namespace", namespace];
    for s in sets {
        args.extend(["--set", s]);
    }
    documents(&deploytool(&args))
}

fn kustomize(dir: &Path) -> Vec<Value> {
    documents(&deploytool(&["kustomize", dir.to_str().unwrap()]))
}

fn kind_name(o: &Value) -> (String, String) {
    (o["kind"].as_str().unwrap().to_string(), o["metadata"]["name"].as_str().unwrap().to_string())
}

fn find<'a>(objs: &'a [Value], kind: &str, name: &str) -> &'a Value {
    objs.iter()
        .find(|o| o["kind"] == kind && o["metadata"]["name"] == name)
        .unwrap_or_else(|| panic!("no {kind} {name} among {:?}", objs.iter().map(kind_name).collect::<Vec<_>>()))
}

fn has(objs: &[Value], kind: &str) -> bool {
    objs.iter().any(|o| o["kind"] == kind)
}

/// Kinds without a namespace.
fn cluster_scoped(kind: &str) -> bool {
    matches!(
        kind,
        "Namespace"
            | "ClusterRole"
            | "ClusterRoleBinding"
            | "CustomResourceDefinition"
            | "Dataplane"
            | "ValidatingAdmissionPolicy"
            | "ValidatingAdmissionPolicyBinding"
    )
}

fn assert_namespaces(objs: &[Value], namespace: &str) {
    for o in objs {
        let (kind, name) = kind_name(o);
        if cluster_scoped(&kind) {
            assert!(o["metadata"]["namespace"].is_null(), "{kind} {name} is cluster-scoped but has a namespace");
        } else {
            assert_eq!(o["metadata"]["namespace"], namespace, "{kind} {name}");
        }
        for s in o["subjects"].as_array().into_iter().flatten() {
            assert_eq!(s["namespace"], namespace, "subject of {kind} {name}");
        }
    }
}

/// The CRDs of deploy/crds, by name.
fn deploy_crds() -> BTreeMap<String, Value> {
    let mut crds = BTreeMap::new();
    for entry in std::fs::read_dir(repo().join("deploy/crds")).unwrap() {
        let path = entry.unwrap().path();
        if path.extension().is_some_and(|e| e == "yaml") {
            for crd in documents(&std::fs::read_to_string(&path).unwrap()) {
                crds.insert(kind_name(&crd).1, crd);
            }
        }
    }
    assert_eq!(crds.len(), 4, "deploy/crds");
    crds
}

/// Whether `o` belongs to a Gateway API bundle (its objects name the bundle's version).
fn is_gateway_api(o: &Value) -> bool {
    o["metadata"]["annotations"]["gateway.networking.k8s.io/bundle-version"].is_string()
}

/// The STUNner CRDs among `objs`, by name.
fn crds_of(objs: &[Value]) -> BTreeMap<String, Value> {
    objs.iter()
        .filter(|o| o["kind"] == "CustomResourceDefinition" && !is_gateway_api(o))
        .map(|o| (kind_name(o).1, o.clone()))
        .collect()
}

/// The Gateway API bundle's objects among `objs`, in order.
fn gateway_api_of(objs: &[Value]) -> Vec<Value> {
    objs.iter().filter(|o| is_gateway_api(o)).cloned().collect()
}

/// The chart's copy of a channel's bundle (scripts/gateway-api-crds writes it).
fn gateway_api_bundle(channel: &str) -> Vec<Value> {
    let path = Path::new(&chart()).join(format!("charts/gateway-api-{channel}-crds/gateway-api.yaml"));
    documents(&std::fs::read_to_string(path).unwrap())
}

/// The objects both renderings must hold, besides the CRDs.
fn expected_objects() -> BTreeSet<(String, String)> {
    [
        ("ServiceAccount", OPERATOR),
        ("ClusterRole", OPERATOR),
        ("ClusterRoleBinding", OPERATOR),
        ("Role", "stunner-gateway-operator-leader-election"),
        ("RoleBinding", "stunner-gateway-operator-leader-election"),
        ("Deployment", OPERATOR),
        ("Service", "stunner-config-discovery"),
        ("Service", "stunner-gateway-operator-metrics"),
        ("Service", "stunner-auth"),
        ("PodDisruptionBudget", OPERATOR),
        ("NetworkPolicy", OPERATOR),
        ("Dataplane", "default"),
    ]
    .into_iter()
    .map(|(k, n)| (k.to_string(), n.to_string()))
    .collect()
}

/// What the chart renders besides [`expected_objects`]: its crds/ in the ConfigMap that
/// `installCrds` (on by default) has the operator apply.
fn chart_objects() -> BTreeSet<(String, String)> {
    let mut objects = expected_objects();
    objects.insert(("ConfigMap".into(), CRDS_CONFIG_MAP.into()));
    objects
}

const CRDS_CONFIG_MAP: &str = "stunner-gateway-operator-crds";

/// The objects besides the CRDs and the Gateway API bundle.
fn non_crd_objects(objs: &[Value]) -> BTreeSet<(String, String)> {
    objs.iter().filter(|o| o["kind"] != "CustomResourceDefinition" && !is_gateway_api(o)).map(kind_name).collect()
}

/// The operator container of the rendered Deployment.
fn operator_container(objs: &[Value]) -> &Value {
    let containers = find(objs, "Deployment", OPERATOR)["spec"]["template"]["spec"]["containers"].as_array().unwrap();
    assert_eq!(containers.len(), 1);
    &containers[0]
}

fn args(objs: &[Value]) -> Vec<String> {
    operator_container(objs)["args"].as_array().unwrap().iter().map(|a| a.as_str().unwrap().to_string()).collect()
}

fn env(objs: &[Value], name: &str) -> Value {
    operator_container(objs)["env"]
        .as_array()
        .unwrap()
        .iter()
        .find(|e| e["name"] == name)
        .cloned()
        .unwrap_or(Value::Null)
}

fn pod_labels(objs: &[Value]) -> &serde_json::Map<String, Value> {
    find(objs, "Deployment", OPERATOR)["spec"]["template"]["metadata"]["labels"].as_object().unwrap()
}

/// `selector` (a label map) selects a pod with `labels`.
fn selects(selector: &Value, labels: &serde_json::Map<String, Value>) -> bool {
    selector.as_object().unwrap().iter().all(|(k, v)| labels.get(k) == Some(v))
}

/// The operator pod template as both renderings must have it.
fn check_operator_pod(objs: &[Value], namespace: &str) {
    let labels = pod_labels(objs);
    assert_eq!(labels.get(CDS_LABEL), Some(&json!("enabled")), "the CDS label on the operator pods");
    assert_eq!(labels.get("app.kubernetes.io/name"), Some(&json!(OPERATOR)));
    // Upstream's stunnerctl (auth, icetest) finds the credential API by this label.
    assert_eq!(labels.get("app"), Some(&json!("stunner-auth")), "the auth service's label on the operator pods");
    let deployment = find(objs, "Deployment", OPERATOR);
    assert!(selects(&deployment["spec"]["selector"]["matchLabels"], labels));
    assert_eq!(deployment["spec"]["template"]["spec"]["serviceAccountName"], OPERATOR);
    assert!(args(objs).contains(&"--leader-elect".to_string()), "{:?}", args(objs));
    assert_eq!(env(objs, "POD_NAMESPACE")["valueFrom"]["fieldRef"]["fieldPath"], "metadata.namespace");
    // Dataplanes are told the CDS Service in POD_NAMESPACE at 13478 (the operator's default),
    // not a pod IP: upstream's STUNNER_GATEWAY_OPERATOR_ADDRESS stays unset.
    assert!(env(objs, "STUNNER_GATEWAY_OPERATOR_ADDRESS").is_null(), "no pod address advertised");
    let service = find(objs, "Service", "stunner-config-discovery");
    assert_eq!(service["metadata"]["namespace"], namespace);
    assert_eq!(service["spec"]["ports"][0]["port"], 13478, "the port the operator advertises");
    let container = operator_container(objs);
    let ports: BTreeMap<&str, i64> = container["ports"]
        .as_array()
        .unwrap()
        .iter()
        .map(|p| (p["name"].as_str().unwrap(), p["containerPort"].as_i64().unwrap()))
        .collect();
    assert_eq!(ports, BTreeMap::from([("cds", 13478), ("metrics", 8080), ("health", 8081), ("auth", 8088)]));
    assert!(args(objs).contains(&"--auth-bind-address=:8088".to_string()), "{:?}", args(objs));
    let auth = find(objs, "Service", "stunner-auth");
    assert_eq!(auth["metadata"]["namespace"], namespace);
    assert_eq!(auth["spec"]["type"], "ClusterIP", "never exposed");
    let want = json!([{"name": "stunner-auth-server", "port": 8088, "targetPort": "auth", "protocol": "TCP"}]);
    assert_eq!(auth["spec"]["ports"], want, "upstream's Service and port");
    assert!(selects(&auth["spec"]["selector"], labels), "every replica answers");
    assert_eq!(container["livenessProbe"]["httpGet"], json!({"path": "/healthz", "port": "health"}));
    assert_eq!(container["readinessProbe"]["httpGet"], json!({"path": "/readyz", "port": "health"}));
    let sc = &container["securityContext"];
    assert_eq!(sc["readOnlyRootFilesystem"], true);
    assert_eq!(sc["allowPrivilegeEscalation"], false);
    assert_eq!(sc["capabilities"]["drop"], json!(["ALL"]));
    let pod = &deployment["spec"]["template"]["spec"];
    assert_eq!(pod["securityContext"]["runAsNonRoot"], true);
    assert_eq!(pod["securityContext"]["seccompProfile"]["type"], "RuntimeDefault");
    assert!(!pod["affinity"]["podAntiAffinity"].is_null(), "replicas spread over nodes");
    // The Services, the PDB and the NetworkPolicy select the operator pods.
    let cds = find(objs, "Service", "stunner-config-discovery");
    assert_eq!(cds["spec"]["ports"], json!([{"name": "cds", "port": 13478, "targetPort": "cds", "protocol": "TCP"}]));
    assert_eq!(cds["spec"]["selector"][CDS_LABEL], "enabled");
    assert!(selects(&cds["spec"]["selector"], labels));
    assert!(selects(&find(objs, "Service", "stunner-gateway-operator-metrics")["spec"]["selector"], labels));
    if has(objs, "PodDisruptionBudget") {
        let pdb = find(objs, "PodDisruptionBudget", OPERATOR);
        assert_eq!(pdb["spec"]["minAvailable"], 1);
        assert!(selects(&pdb["spec"]["selector"]["matchLabels"], labels));
    }
    let np = find(objs, "NetworkPolicy", OPERATOR);
    assert!(selects(&np["spec"]["podSelector"]["matchLabels"], labels));
}

/// What our dataplane Deployments put on their pods (src/render/deployment.rs): `app: stunner`
/// and the related-gateway labels.
fn dataplane_pod_selector() -> Value {
    json!({
        "matchLabels": {"app": "stunner"},
        "matchExpressions": [
            {"key": "stunner.l7mp.io/related-gateway-name", "operator": "Exists"},
            {"key": "stunner.l7mp.io/related-gateway-namespace", "operator": "Exists"},
        ],
    })
}

/// Ingress rules of the NetworkPolicy: CDS only from stunnerd pods (any namespace) and the
/// operator's own; metrics and the credential API from pods of any namespace, nothing from
/// outside the cluster (no ipBlock).
fn check_network_policy(objs: &[Value]) {
    let np = find(objs, "NetworkPolicy", OPERATOR);
    assert_eq!(np["spec"]["policyTypes"], json!(["Ingress"]));
    let rules = np["spec"]["ingress"].as_array().unwrap();
    assert_eq!(rules.len(), 3, "{rules:?}");
    assert_eq!(rules[0]["ports"], json!([{"port": 13478, "protocol": "TCP"}]));
    let from = rules[0]["from"].as_array().unwrap();
    assert_eq!(from.len(), 2);
    assert_eq!(from[0]["namespaceSelector"], json!({}));
    assert_eq!(from[0]["podSelector"], dataplane_pod_selector());
    assert!(from[1]["namespaceSelector"].is_null(), "the operator's own pods: same namespace only");
    assert!(selects(&from[1]["podSelector"]["matchLabels"], pod_labels(objs)));
    assert_eq!(rules[1]["ports"], json!([{"port": 8080, "protocol": "TCP"}]));
    assert_eq!(rules[1]["from"], json!([{"namespaceSelector": {}}]));
    assert_eq!(rules[2], json!({"ports": [{"port": 8088, "protocol": "TCP"}], "from": [{"namespaceSelector": {}}]}));
}

/// The default Dataplane of the chart and the manifests: operator-behavior.md §10.2 with the
/// stunner chart's defaults (issue #57; `helm_defaults_are_the_stunner_charts` compares them
/// with upstream's).
fn default_dataplane() -> Value {
    json!({
        "apiVersion": "stunner.l7mp.io/v1",
        "kind": "Dataplane",
        "metadata": {"name": "default"},
        "spec": {
            "replicas": 1,
            "image": format!("docker.io/l7mp/stunnerd:{}", interop_stunner_version()),
            "imagePullPolicy": "IfNotPresent",
            // A draining pod stays Ready and keeps its calls (docs/upgrade.md, "Scale-down").
            "args": ["-w", "--udp-thread-num=16", "--force-ready-status"],
            "resources": {
                "limits": {"cpu": 2, "memory": "512Mi"},
                "requests": {"cpu": "500m", "memory": "128Mi"},
            },
            "terminationGracePeriodSeconds": 3600,
            "enableMetricsEndpoint": true,
        },
    })
}

/// The stunner release the interop tests run (`github.com/l7mp/stunner` in tests/interop/go.mod),
/// as stunnerd's image tags name it (no `v`).
fn interop_stunner_version() -> String {
    let go_mod = std::fs::read_to_string(repo().join("tests/interop/go.mod")).unwrap();
    let version = go_mod
        .lines()
        .find_map(|l| l.trim().strip_prefix("github.com/l7mp/stunner "))
        .unwrap_or_else(|| panic!("no github.com/l7mp/stunner in tests/interop/go.mod"));
    version.trim().trim_start_matches('v').to_string()
}

#[test]
fn helm_lint_passes() {
    if !deploytool_built() {
        return;
    }
    let out = deploytool(&["helm-lint", "--strict", &chart()]);
    assert!(out.contains("0 chart(s) failed"), "{out}");
}

#[test]
fn helm_template_defaults() {
    if !deploytool_built() {
        return;
    }
    let objs = helm(&[]);
    assert_eq!(non_crd_objects(&objs), chart_objects());
    assert_eq!(crds_of(&objs), deploy_crds(), "the chart's crds/ are deploy/crds");
    assert_namespaces(&objs, NAMESPACE);
    check_operator_pod(&objs, NAMESPACE);
    check_network_policy(&objs);
    let a = args(&objs);
    for flag in [
        "--controller-name=stunner.l7mp.io/gateway-operator",
        "--dataplane-mode=managed",
        "--throttle-timeout=250ms",
        "--endpoint-discovery=true",
    ] {
        assert!(a.contains(&flag.to_string()), "{flag} in {a:?}");
    }
    assert!(!a.iter().any(|f| f.contains("pprof")), "pprof is off by default: {a:?}");
    assert!(!a.iter().any(|f| f.contains("finalizer")), "{a:?}");
    let deployment = find(&objs, "Deployment", OPERATOR);
    assert_eq!(deployment["spec"]["replicas"], 2);
    assert_eq!(operator_container(&objs)["image"], "ghcr.io/l7mp/stunner-gateway-operator-rs:latest");
    let mut dataplane = find(&objs, "Dataplane", "default").clone();
    dataplane["metadata"].as_object_mut().unwrap().remove("labels");
    assert_eq!(dataplane, default_dataplane());
}

/// A default install of this chart gives the default Dataplane the stunner chart's spec (issue
/// #57: upstream's grace period lets a pod drain its TURN allocations for an hour on
/// scale-down): the fields compared with the copy of upstream's values in tests/fixtures. The
/// stunnerd tag is the release tests/interop runs, and the renderer's image for a Dataplane
/// without one is the same.
#[test]
fn helm_defaults_are_the_stunner_charts() {
    if !deploytool_built() {
        return;
    }
    let upstream = stunner_chart_defaults();
    let theirs = &upstream["stunnerGatewayOperator"]["dataplane"]["spec"];
    let objs = helm(&[]);
    let ours = &find(&objs, "Dataplane", "default")["spec"];
    for key in ["replicas", "resources", "terminationGracePeriodSeconds"] {
        assert_eq!(ours[key], theirs[key], "defaultDataplane.spec.{key}");
    }
    assert_eq!(ours["imagePullPolicy"], theirs["image"]["pullPolicy"]);
    let image = ours["image"].as_str().unwrap();
    assert_eq!(image, format!("{}:{}", theirs["image"]["name"].as_str().unwrap(), interop_stunner_version()));
    let fallback = format!("pub(crate) const DEFAULT_IMAGE: &str = \"{image}\";");
    assert!(source("src/render/deployment.rs").contains(&fallback), "the renderer's fallback image is {image}");
    // The CRD switches, with upstream's defaults.
    let values: Value =
        serde_yaml_ng::from_str(&std::fs::read_to_string(Path::new(&chart()).join("values.yaml")).unwrap()).unwrap();
    for key in ["standardCrds", "experimentalCrds"] {
        assert_eq!(values[key]["enabled"], upstream[key]["enabled"], "{key}.enabled");
    }
}

/// The stunner chart's CRD switches (issue #57): the standard channel by default, the
/// experimental one instead, or none; both at once is refused. What renders is the chart's copy
/// of the Gateway API release the tests run, each object kept on uninstall, and that copy is
/// what scripts/gateway-api-crds makes of the module today. (`helm template` sees no cluster:
/// the real-node suite, e2e_install.rs, checks that a bundle already there is left alone.)
#[test]
fn helm_gateway_api_crds_follow_the_switches() {
    if !deploytool_built() {
        return;
    }
    let out = Command::new(repo().join("scripts/gateway-api-crds")).arg("--check").output().unwrap();
    assert!(out.status.success(), "{}{}", String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr));

    let standard = gateway_api_of(&helm(&[]));
    assert_eq!(standard, gateway_api_bundle("standard"));
    let kinds: BTreeSet<&str> = standard.iter().map(|o| o["kind"].as_str().unwrap()).collect();
    assert_eq!(
        kinds,
        BTreeSet::from(["CustomResourceDefinition", "ValidatingAdmissionPolicy", "ValidatingAdmissionPolicyBinding"])
    );
    for o in &standard {
        let annotations = &o["metadata"]["annotations"];
        assert_eq!(annotations["helm.sh/resource-policy"], "keep", "{:?}", kind_name(o));
        assert_eq!(annotations["gateway.networking.k8s.io/bundle-version"], "v1.7.0", "{:?}", kind_name(o));
    }
    let crd = find(&standard, "CustomResourceDefinition", "udproutes.gateway.networking.k8s.io");
    assert_eq!(crd["metadata"]["annotations"]["gateway.networking.k8s.io/channel"], "standard");

    let experimental = gateway_api_of(&helm(&["standardCrds.enabled=false", "experimentalCrds.enabled=true"]));
    assert_eq!(experimental, gateway_api_bundle("experimental"));
    let crd = find(&experimental, "CustomResourceDefinition", "udproutes.gateway.networking.k8s.io");
    assert_eq!(crd["metadata"]["annotations"]["gateway.networking.k8s.io/channel"], "experimental");

    let none = helm(&["standardCrds.enabled=false"]);
    assert!(gateway_api_of(&none).is_empty());
    assert_eq!(crds_of(&none), deploy_crds());

    let err = helm_refused(&["--set", "experimentalCrds.enabled=true"]);
    assert!(
        err.contains("standardCrds.enabled and experimentalCrds.enabled: one Gateway API channel at a time"),
        "{err}"
    );
}

#[test]
fn helm_template_follows_the_release_namespace() {
    if !deploytool_built() {
        return;
    }
    let objs = helm_in("media", &[]);
    assert_namespaces(&objs, "media");
    check_operator_pod(&objs, "media");
}

#[test]
fn helm_pdb_only_with_more_than_one_replica() {
    if !deploytool_built() {
        return;
    }
    let objs = helm(&["replicas=1"]);
    assert!(!has(&objs, "PodDisruptionBudget"), "minAvailable 1 of 1 would block node drains");
    assert_eq!(find(&objs, "Deployment", OPERATOR)["spec"]["replicas"], 1);
    assert!(!has(&helm(&["pdb.enabled=false"]), "PodDisruptionBudget"));
    assert!(has(&helm(&["replicas=3"]), "PodDisruptionBudget"));
}

#[test]
fn helm_without_leader_election() {
    if !deploytool_built() {
        return;
    }
    let objs = helm(&["replicas=1", "leaderElect=false"]);
    assert!(!args(&objs).contains(&"--leader-elect".to_string()));
    assert!(!has(&objs, "Role") && !has(&objs, "RoleBinding"));
    // Two writers would fight: the chart refuses.
    assert!(helm_refused(&["--set", "leaderElect=false"]).contains("needs leaderElect"));
}

#[test]
fn helm_service_monitor_only_when_enabled() {
    if !deploytool_built() {
        return;
    }
    assert!(!has(&helm(&[]), "ServiceMonitor"));
    let objs = helm(&["metrics.serviceMonitor.enabled=true"]);
    let sm = find(&objs, "ServiceMonitor", OPERATOR);
    assert_eq!(sm["metadata"]["namespace"], NAMESPACE);
    assert_eq!(sm["spec"]["endpoints"][0]["port"], "metrics");
    let metrics = find(&objs, "Service", "stunner-gateway-operator-metrics");
    let labels = metrics["metadata"]["labels"].as_object().unwrap();
    assert!(selects(&sm["spec"]["selector"]["matchLabels"], labels));
    let cds = find(&objs, "Service", "stunner-config-discovery");
    assert!(!selects(&sm["spec"]["selector"]["matchLabels"], cds["metadata"]["labels"].as_object().unwrap()));
}

/// `objs` hold the PrometheusRule whose spec is the chart's monitoring/alerts.yaml and the
/// ConfigMap for Grafana's sidecar holding its monitoring/dashboard.json, both in the
/// operator's namespace; `hint` ends a failure's message.
fn assert_ships_the_checked_monitoring(objs: &[Value], hint: &str) {
    let chart = repo().join("deploy/helm/stunner-gateway-operator/monitoring");
    let read = |file: &str| std::fs::read_to_string(chart.join(file)).unwrap();
    let rule = find(objs, "PrometheusRule", OPERATOR);
    assert_eq!(rule["metadata"]["namespace"], NAMESPACE);
    let alerts: Value = serde_yaml_ng::from_str(&read("alerts.yaml")).unwrap();
    assert_eq!(rule["spec"], alerts, "the PrometheusRule differs from alerts.yaml{hint}");
    let dashboard = find(objs, "ConfigMap", "stunner-gateway-operator-dashboard");
    assert_eq!(dashboard["metadata"]["namespace"], NAMESPACE);
    assert_eq!(dashboard["metadata"]["labels"]["grafana_dashboard"], "1");
    let shipped: Value =
        serde_json::from_str(dashboard["data"]["stunner-gateway-operator.json"].as_str().unwrap()).unwrap();
    let checked: Value = serde_json::from_str(&read("dashboard.json")).unwrap();
    assert_eq!(shipped, checked, "the dashboard ConfigMap differs from dashboard.json{hint}");
}

/// The alerts and the dashboard ship as they are checked (server/tests/monitoring.rs,
/// tests/monitoring/alerts.test.yaml): the PrometheusRule's spec is monitoring/alerts.yaml, the
/// ConfigMap for Grafana's sidecar holds monitoring/dashboard.json; neither without its toggle.
#[test]
fn helm_prometheus_rule_and_grafana_dashboard_only_when_enabled() {
    if !deploytool_built() {
        return;
    }
    let defaults = helm(&[]);
    let dashboard = |o: &Value| o["kind"] == "ConfigMap" && o["metadata"]["name"] != CRDS_CONFIG_MAP;
    assert!(!has(&defaults, "PrometheusRule") && !defaults.iter().any(dashboard));
    let objs = helm(&["metrics.prometheusRule.enabled=true", "metrics.grafanaDashboard.enabled=true"]);
    assert_ships_the_checked_monitoring(&objs, "");
    let elsewhere = helm(&["metrics.grafanaDashboard.enabled=true", "metrics.grafanaDashboard.namespace=monitoring"]);
    assert_eq!(
        find(&elsewhere, "ConfigMap", "stunner-gateway-operator-dashboard")["metadata"]["namespace"],
        "monitoring"
    );
}

/// The name Prometheus gives a pod label in service discovery: `__meta_kubernetes_pod_label_`
/// and the label's name with every character outside `[a-zA-Z0-9_]` made `_`.
fn pod_label_meta(label: &str) -> String {
    let sanitized: String = label.chars().map(|c| if c.is_ascii_alphanumeric() { c } else { '_' }).collect();
    format!("__meta_kubernetes_pod_label_{sanitized}")
}

/// The dataplane PodMonitor scrapes what the operator renders (tests/golden/admin-metrics-endpoint:
/// a Gateway whose Dataplane enables the metrics endpoint): it selects the Deployment's pods,
/// names the container port that serves the config's `metrics_endpoint`, at its path, and labels
/// the series as the dataplanes' alerts and dashboard read them (job `stunner-dataplane`, the
/// gateway label from the pod's related-gateway labels).
fn check_pod_monitor(pm: &Value) {
    use stunner_gateway::keys::{RELATED_GATEWAY_NAME, RELATED_GATEWAY_NAMESPACE};
    assert_eq!(pm["metadata"]["namespace"], NAMESPACE);
    assert_eq!(pm["spec"]["namespaceSelector"], json!({"any": true}), "Gateways live in any namespace");
    assert_eq!(pm["spec"]["selector"], dataplane_pod_selector());
    let golden: Value = serde_yaml_ng::from_str(
        &std::fs::read_to_string(repo().join("tests/golden/admin-metrics-endpoint/output.yaml")).unwrap(),
    )
    .unwrap();
    let gateway = &golden["gateways"]["testnamespace/gateway-1"];
    let pod = &gateway["deployment"]["spec"]["template"];
    let labels = pod["metadata"]["labels"].as_object().unwrap();
    assert!(selects(&pm["spec"]["selector"]["matchLabels"], labels), "{labels:?}");
    for e in pm["spec"]["selector"]["matchExpressions"].as_array().unwrap() {
        assert!(labels.contains_key(e["key"].as_str().unwrap()), "{e} on {labels:?}");
    }
    let endpoint = &pm["spec"]["podMetricsEndpoints"][0];
    let served = gateway["config"]["admin"]["metrics_endpoint"].as_str().unwrap();
    assert_eq!(served, "http://:8080/metrics");
    let port = pod["spec"]["containers"][0]["ports"]
        .as_array()
        .unwrap()
        .iter()
        .find(|p| p["name"] == endpoint["port"])
        .unwrap_or_else(|| panic!("no container port {} in {pod}", endpoint["port"]));
    assert_eq!(port["containerPort"], 8080);
    assert_eq!(endpoint["path"], "/metrics");
    let relabel = endpoint["relabelings"].as_array().unwrap();
    assert!(relabel.contains(&json!({"targetLabel": "job", "replacement": "stunner-dataplane"})), "{relabel:?}");
    let gateway_label = json!({
        "sourceLabels": [pod_label_meta(RELATED_GATEWAY_NAMESPACE), pod_label_meta(RELATED_GATEWAY_NAME)],
        "separator": "/",
        "targetLabel": "gateway",
    });
    assert!(relabel.contains(&gateway_label), "{relabel:?}");
    let chart = repo().join("deploy/helm/stunner-gateway-operator/monitoring");
    for (file, selector) in [
        ("dataplane-alerts.yaml", r#"job="stunner-dataplane""#),
        ("dataplane-dashboard.json", r#"job=\"stunner-dataplane\""#),
    ] {
        assert!(std::fs::read_to_string(chart.join(file)).unwrap().contains(selector), "{file} reads {selector}");
    }
}

/// `objs` hold the dataplanes' PrometheusRule (monitoring/dataplane-alerts.yaml) and dashboard
/// ConfigMap (monitoring/dataplane-dashboard.json) as they are checked; `hint` ends a failure's
/// message.
fn assert_ships_the_checked_dataplane_monitoring(objs: &[Value], hint: &str) {
    let chart = repo().join("deploy/helm/stunner-gateway-operator/monitoring");
    let read = |file: &str| std::fs::read_to_string(chart.join(file)).unwrap();
    let rule = find(objs, "PrometheusRule", "stunner-gateway-operator-dataplane");
    assert_eq!(rule["metadata"]["namespace"], NAMESPACE);
    let alerts: Value = serde_yaml_ng::from_str(&read("dataplane-alerts.yaml")).unwrap();
    assert_eq!(rule["spec"], alerts, "the dataplane PrometheusRule differs from dataplane-alerts.yaml{hint}");
    let dashboard = find(objs, "ConfigMap", "stunner-dataplane-dashboard");
    assert_eq!(dashboard["metadata"]["labels"]["grafana_dashboard"], "1");
    let shipped: Value = serde_json::from_str(dashboard["data"]["stunner-dataplane.json"].as_str().unwrap()).unwrap();
    let checked: Value = serde_json::from_str(&read("dataplane-dashboard.json")).unwrap();
    assert_eq!(shipped, checked, "the dataplane dashboard ConfigMap differs from dataplane-dashboard.json{hint}");
}

/// `monitoring.dataplane.enabled`: the PodMonitor; with the alerts' and the dashboard's toggles
/// also the dataplanes' PrometheusRule and dashboard. None of them by default.
#[test]
fn helm_dataplane_monitoring_only_when_enabled() {
    if !deploytool_built() {
        return;
    }
    let names = ["stunner-dataplane", "stunner-gateway-operator-dataplane", "stunner-dataplane-dashboard"];
    let dataplane = |o: &Value| names.iter().any(|n| o["metadata"]["name"] == *n);
    let operator_only = helm(&["metrics.prometheusRule.enabled=true", "metrics.grafanaDashboard.enabled=true"]);
    assert!(!has(&operator_only, "PodMonitor") && !operator_only.iter().any(dataplane));
    let alone = helm(&["monitoring.dataplane.enabled=true"]);
    check_pod_monitor(find(&alone, "PodMonitor", "stunner-dataplane"));
    assert_eq!(alone.iter().filter(|o| dataplane(o)).count(), 1, "the PodMonitor only");
    let objs = helm(&[
        "monitoring.dataplane.enabled=true",
        "monitoring.dataplane.interval=10s",
        "monitoring.dataplane.labels.release=prometheus",
        "metrics.prometheusRule.enabled=true",
        "metrics.grafanaDashboard.enabled=true",
    ]);
    let pm = find(&objs, "PodMonitor", "stunner-dataplane");
    check_pod_monitor(pm);
    assert_eq!(pm["spec"]["podMetricsEndpoints"][0]["interval"], "10s");
    assert_eq!(pm["metadata"]["labels"]["release"], "prometheus");
    assert_ships_the_checked_dataplane_monitoring(&objs, "");
}

#[test]
fn helm_pprof_binds_to_loopback_when_enabled() {
    if !deploytool_built() {
        return;
    }
    let a = args(&helm(&["pprof.enabled=true"]));
    let pprof: Vec<_> = a.iter().filter(|f| f.starts_with("--pprof-bind-address=")).collect();
    assert_eq!(pprof, ["--pprof-bind-address=127.0.0.1:6060"]);
}

#[test]
fn helm_values_reach_the_operator() {
    if !deploytool_built() {
        return;
    }
    let objs = helm(&[
        "controllerName=example.com/stunner",
        "dataplaneMode=legacy",
        "throttleTimeout=1s",
        "endpointDiscovery=false",
        "enableFinalizer=true",
        "enforceReferenceGrants=true",
        "cds.port=14000",
        "cds.serviceName=cds",
        "networkPolicy.enabled=false",
        "defaultDataplane.enabled=false",
        "image.tag=v1.2.3",
    ]);
    let a = args(&objs);
    for flag in [
        "--controller-name=example.com/stunner",
        "--dataplane-mode=legacy",
        "--throttle-timeout=1s",
        "--endpoint-discovery=false",
        "--enable-finalizer",
        "--enforce-reference-grants",
        "--config-discovery-address=:14000",
    ] {
        assert!(a.contains(&flag.to_string()), "{flag} in {a:?}");
    }
    assert!(a.contains(&"--config-discovery-service=cds".to_string()), "{a:?}");
    assert_eq!(find(&objs, "Service", "cds")["spec"]["ports"][0]["port"], 13478, "the Service port is fixed");
    assert_eq!(find(&objs, "Service", "cds")["spec"]["ports"][0]["targetPort"], "cds");
    assert!(!has(&objs, "NetworkPolicy") && !has(&objs, "Dataplane"));
    assert_eq!(operator_container(&objs)["image"], "ghcr.io/l7mp/stunner-gateway-operator-rs:v1.2.3");
}

/// `cdsAuthorization` reaches the flag (default `none`, upstream's behaviour), and
/// `networkPolicy.dataplaneNamespaces` narrows where dataplane pods may reach CDS from.
#[test]
fn helm_cds_authorization_and_dataplane_namespaces() {
    if !deploytool_built() {
        return;
    }
    let defaults = helm(&[]);
    assert!(args(&defaults).contains(&"--cds-authorization=none".to_string()), "{:?}", args(&defaults));
    assert_eq!(env(&defaults, "POD_IPS")["valueFrom"]["fieldRef"]["fieldPath"], "status.podIPs");
    let objs = helm(&["cdsAuthorization=pod", "networkPolicy.dataplaneNamespaces={team-a,team-b}"]);
    assert!(args(&objs).contains(&"--cds-authorization=pod".to_string()));
    let np = find(&objs, "NetworkPolicy", OPERATOR);
    let from = &np["spec"]["ingress"][0]["from"][0];
    assert_eq!(
        from["namespaceSelector"],
        json!({"matchExpressions": [
            {"key": "kubernetes.io/metadata.name", "operator": "In", "values": ["team-a", "team-b"]}
        ]})
    );
    assert_eq!(from["podSelector"], dataplane_pod_selector());
}

/// The chart's crds/ is a symlink to deploy/crds: `helm package` must store the files.
#[test]
fn helm_package_includes_the_symlinked_crds() {
    if !deploytool_built() {
        return;
    }
    let dir = std::env::temp_dir().join(format!("stunner-deploy-test-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let tgz = deploytool(&["helm-package", &chart(), dir.to_str().unwrap()]);
    let objs = documents(&deploytool(&["helm-template", tgz.trim()]));
    std::fs::remove_dir_all(&dir).unwrap();
    assert_eq!(crds_of(&objs), deploy_crds());
    assert_eq!(non_crd_objects(&objs), chart_objects());
    assert_eq!(gateway_api_of(&objs), gateway_api_bundle("standard"), "the subcharts are packaged");
}

#[test]
fn kustomize_build() {
    if !deploytool_built() {
        return;
    }
    let objs = kustomize(&manifests());
    let mut expected = expected_objects();
    expected.insert(("Namespace".into(), NAMESPACE.into()));
    assert_eq!(non_crd_objects(&objs), expected);
    assert_eq!(crds_of(&objs), deploy_crds(), "kustomize lists every CRD in deploy/crds (deploy/crds/Kustomization)");
    assert_namespaces(&objs, NAMESPACE);
    check_operator_pod(&objs, NAMESPACE);
    check_network_policy(&objs);
    assert_eq!(args(&objs), ["--leader-elect", "--install-crds", "--auth-bind-address=:8088"]);
    assert_eq!(find(&objs, "Deployment", OPERATOR)["spec"]["replicas"], 2);
    assert_eq!(find(&objs, "Dataplane", "default"), &default_dataplane());
    // `kubectl apply -k deploy/crds`, the first install step (docs/deploy.md).
    assert_eq!(crds_of(&kustomize(&repo().join("deploy/crds"))), deploy_crds());
}

/// Each file of deploy/manifests works on its own (`kubectl apply -f`): namespaced objects name
/// their namespace.
#[test]
fn every_manifest_names_its_namespace() {
    let mut seen = 0;
    let monitoring = manifests().join("monitoring");
    for dir in
        [manifests(), monitoring.join("alerts"), monitoring.join("dashboard"), monitoring.join("dataplane"), monitoring]
    {
        for entry in std::fs::read_dir(&dir).unwrap() {
            let path = entry.unwrap().path();
            let name = path.file_name().unwrap().to_string_lossy().into_owned();
            if path.extension().is_none_or(|e| e != "yaml") || name == "kustomization.yaml" {
                continue;
            }
            let objs = documents(&std::fs::read_to_string(&path).unwrap());
            assert!(!objs.is_empty(), "{}", path.display());
            assert_namespaces(&objs, NAMESPACE);
            seen += objs.len();
        }
    }
    assert!(seen >= 16, "{seen} objects");
}

/// The monitoring components on top of the base, each the kustomize side of a chart toggle:
/// the ServiceMonitor, the alerts (a PrometheusRule whose spec is the chart's
/// monitoring/alerts.yaml), the dashboard (a ConfigMap for Grafana's sidecar holding
/// monitoring/dashboard.json) and the dataplanes' (the chart's PodMonitor, their alerts and
/// dashboard), none of them in the base.
#[test]
fn kustomize_monitoring_components() {
    if !deploytool_built() {
        return;
    }
    let dir = std::env::temp_dir().join(format!("stunner-deploy-monitoring-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    // kustomize takes relative paths only: from the temp dir up to / and down to the repo.
    let up = "../".repeat(dir.components().count() - 1);
    let base = format!("{up}{}", manifests().display().to_string().trim_start_matches('/'));
    std::fs::write(
        dir.join("kustomization.yaml"),
        format!(
            "apiVersion: kustomize.config.k8s.io/v1beta1\nkind: Kustomization\nresources:\n- {base}\ncomponents:\n\
             - {base}/monitoring\n- {base}/monitoring/alerts\n- {base}/monitoring/dashboard\n- \
             {base}/monitoring/dataplane\n"
        ),
    )
    .unwrap();
    let objs = kustomize(&dir);
    std::fs::remove_dir_all(&dir).unwrap();
    let sm = find(&objs, "ServiceMonitor", OPERATOR);
    assert_eq!(sm["metadata"]["namespace"], NAMESPACE);
    let metrics = find(&objs, "Service", "stunner-gateway-operator-metrics");
    assert!(selects(&sm["spec"]["selector"]["matchLabels"], metrics["metadata"]["labels"].as_object().unwrap()));
    assert_eq!(sm["spec"]["endpoints"][0]["port"], metrics["spec"]["ports"][0]["name"]);

    assert_ships_the_checked_monitoring(&objs, ": run scripts/monitoring-manifests");
    let pm = find(&objs, "PodMonitor", "stunner-dataplane");
    check_pod_monitor(pm);
    let chart = helm(&["monitoring.dataplane.enabled=true"]);
    assert_eq!(pm["spec"], find(&chart, "PodMonitor", "stunner-dataplane")["spec"], "the chart's PodMonitor");
    assert_ships_the_checked_dataplane_monitoring(&objs, ": run scripts/monitoring-manifests");

    let base = kustomize(&manifests());
    for kind in ["ServiceMonitor", "PrometheusRule", "PodMonitor"] {
        assert!(!has(&base, kind), "no {kind} in the base");
    }
    assert!(!base.iter().any(|o| o["metadata"]["name"] == "stunner-gateway-operator-dashboard"), "nor the dashboard");
}

/// One RBAC truth: the chart renders the manifests' rules.
#[test]
fn chart_and_manifests_grant_the_same_rbac() {
    if !deploytool_built() {
        return;
    }
    let chart = helm(&[]);
    let plain = kustomize(&manifests());
    for (kind, name) in [("ClusterRole", OPERATOR), ("Role", "stunner-gateway-operator-leader-election")] {
        assert_eq!(find(&chart, kind, name)["rules"], find(&plain, kind, name)["rules"], "{kind} {name}");
    }
    for (kind, name) in [("ClusterRoleBinding", OPERATOR), ("RoleBinding", "stunner-gateway-operator-leader-election")]
    {
        assert_eq!(find(&chart, kind, name)["roleRef"], find(&plain, kind, name)["roleRef"]);
        assert_eq!(find(&chart, kind, name)["subjects"], find(&plain, kind, name)["subjects"]);
    }
    // The rest of the operator pod too, where values do not make the chart differ.
    let (c, p) = (operator_container(&chart), operator_container(&plain));
    for field in ["ports", "livenessProbe", "readinessProbe", "resources", "securityContext", "lifecycle", "image"] {
        assert_eq!(c[field], p[field], "container {field}");
    }
    let pod = |objs: &[Value]| find(objs, "Deployment", OPERATOR)["spec"]["template"]["spec"].clone();
    for field in ["securityContext", "terminationGracePeriodSeconds", "serviceAccountName"] {
        assert_eq!(pod(&chart)[field], pod(&plain)[field], "pod {field}");
    }
}

/// The strings of a rule's list `field`.
fn rule_strings(rule: &Value, field: &str) -> Vec<String> {
    rule[field].as_array().unwrap().iter().map(|s| s.as_str().unwrap().to_string()).collect()
}

/// `(apiGroup, resource) -> verbs` granted by the rules of `role` on every object of a kind
/// (the rules for named objects alone are [`named_grants`]).
fn grants(role: &Value) -> BTreeMap<(String, String), BTreeSet<String>> {
    let mut grants: BTreeMap<_, BTreeSet<String>> = BTreeMap::new();
    for rule in role["rules"].as_array().unwrap().iter().filter(|r| r["resourceNames"].is_null()) {
        let strings = |field: &str| rule_strings(rule, field);
        assert!(rule["nonResourceURLs"].is_null());
        for group in strings("apiGroups") {
            for resource in strings("resources") {
                grants.entry((group.clone(), resource)).or_default().extend(strings("verbs"));
            }
        }
    }
    grants
}

/// The rules of `role` restricted to named objects: (apiGroups, resources, names, verbs).
type NamedGrant = (Vec<String>, Vec<String>, BTreeSet<String>, BTreeSet<String>);

fn named_grants(role: &Value) -> Vec<NamedGrant> {
    let rules = role["rules"].as_array().unwrap().iter().filter(|r| !r["resourceNames"].is_null());
    rules
        .map(|r| {
            let set = |field: &str| rule_strings(r, field).into_iter().collect::<BTreeSet<_>>();
            (rule_strings(r, "apiGroups"), rule_strings(r, "resources"), set("resourceNames"), set("verbs"))
        })
        .collect()
}

/// `--install-crds` (k8s/src/crds/): the manifests run it with the CRDs built into the image,
/// the chart (`installCrds`, on by default) with its own crds/ from a ConfigMap whose checksum
/// rolls the operator; either way the operator may get, create and patch STUNner's four CRDs
/// by name and no other CRD. `installCrds=false` drops the flag, the ConfigMap and the rule.
#[test]
fn install_crds_in_the_manifests_and_the_chart() {
    if !deploytool_built() {
        return;
    }
    let text = source("k8s/src/crds/mod.rs");
    assert!(text.contains("api.get_opt(") && text.contains("Patch::Apply("), "crds/ gets and server-side applies");
    let names = stunner_gateway::resources::crds().into_iter().map(|c| c.metadata.name.unwrap()).collect();
    let verbs = ["create", "get", "patch"].map(String::from).into();
    let expected: Vec<NamedGrant> =
        vec![(vec!["apiextensions.k8s.io".into()], vec!["customresourcedefinitions".into()], names, verbs)];
    let plain = kustomize(&manifests());
    assert_eq!(named_grants(find(&plain, "ClusterRole", OPERATOR)), expected);
    assert!(args(&plain).contains(&"--install-crds".to_string()));

    let chart = helm(&[]);
    assert_eq!(named_grants(find(&chart, "ClusterRole", OPERATOR)), expected);
    let dir = "/etc/stunner-gateway-operator/crds";
    let a = args(&chart);
    assert!(a.contains(&"--install-crds".to_string()) && a.contains(&format!("--crd-dir={dir}")), "{a:?}");
    let data = &find(&chart, "ConfigMap", CRDS_CONFIG_MAP)["data"];
    let files = stunner_gateway::resources::crd_files();
    assert_eq!(data.as_object().unwrap().len(), files.len());
    for file in files {
        assert_eq!(data[&file.name], file.yaml.as_str(), "{}", file.name);
    }
    let container = operator_container(&chart);
    assert_eq!(container["volumeMounts"], json!([{"name": "crds", "mountPath": dir, "readOnly": true}]));
    let pod = &find(&chart, "Deployment", OPERATOR)["spec"]["template"];
    assert_eq!(pod["spec"]["volumes"], json!([{"name": "crds", "configMap": {"name": CRDS_CONFIG_MAP}}]));
    let checksum = pod["metadata"]["annotations"]["checksum/crds"].as_str().unwrap_or_default();
    assert_eq!(checksum.len(), 64, "{pod}");

    let off = helm(&["installCrds=false"]);
    assert!(named_grants(find(&off, "ClusterRole", OPERATOR)).is_empty());
    assert!(!args(&off).iter().any(|a| a.contains("crd")), "{:?}", args(&off));
    assert_eq!(non_crd_objects(&off), expected_objects());
    assert_eq!(crds_of(&off), deploy_crds(), "Helm still installs crds/ on the first install");
}

fn allows(grants: &BTreeMap<(String, String), BTreeSet<String>>, group: &str, resource: &str, verb: &str) -> bool {
    grants.get(&(group.to_string(), resource.to_string())).is_some_and(|v| v.contains(verb))
}

fn source(path: &str) -> String {
    std::fs::read_to_string(repo().join(path)).unwrap()
}

/// Every kind of the index's kind table (the watchers of `k8s/src/source.rs`
/// follow it, each kind under its type's API names) can be listed and watched cluster-wide.
#[test]
fn cluster_role_covers_every_watched_kind() {
    if !deploytool_built() {
        return;
    }
    let grants = grants(find(&kustomize(&manifests()), "ClusterRole", OPERATOR));
    let text = source("k8s/src/source.rs");
    assert!(text.contains("for &kind in Kind::ALL"), "source.rs starts its watchers from the kind table");
    for &kind in Kind::ALL {
        let api = kind.api();
        for verb in ["get", "list", "watch"] {
            assert!(
                allows(&grants, &api.group, &api.plural, verb),
                "{verb} {}/{} (Kind::{kind:?})",
                api.group,
                api.plural
            );
        }
    }
}

/// The dataplane pod watcher of `k8s/src/pods.rs` (CDS authorization) can list and
/// watch pods cluster-wide.
#[test]
fn cluster_role_covers_the_dataplane_pod_watcher() {
    if !deploytool_built() {
        return;
    }
    let grants = grants(find(&kustomize(&manifests()), "ClusterRole", OPERATOR));
    let text = source("k8s/src/pods.rs");
    assert!(text.contains("Api::<Pod>::all("), "pods.rs watches pods cluster-wide");
    for verb in ["get", "list", "watch"] {
        assert!(allows(&grants, "", "pods", verb), "{verb} pods (pods.rs)");
    }
}

/// The reviews of `k8s/src/review.rs` (`--cds-token-review`) can be created.
#[test]
fn cluster_role_covers_the_token_reviews() {
    if !deploytool_built() {
        return;
    }
    let grants = grants(find(&kustomize(&manifests()), "ClusterRole", OPERATOR));
    let text = source("k8s/src/review.rs");
    for (kind, group, resource) in [
        ("TokenReview", "authentication.k8s.io", "tokenreviews"),
        ("SubjectAccessReview", "authorization.k8s.io", "subjectaccessreviews"),
    ] {
        assert!(text.contains(&format!("Api::<{kind}>::all(")), "review.rs creates {kind}s");
        assert!(allows(&grants, group, resource, "create"), "create {group}/{resource}");
    }
}

/// Every kind `k8s/src/ops.rs` writes can be written the way writer.rs writes it:
/// server-side apply (PATCH) of statuses and owned objects, DELETE of owned objects. An apply
/// that creates its object is also checked against `create` by the API server.
#[test]
fn cluster_role_covers_every_write() {
    if !deploytool_built() {
        return;
    }
    let grants = grants(find(&kustomize(&manifests()), "ClusterRole", OPERATOR));
    // (subresource, verb) per WriteKind, from ops_of(): statuses of the Gateway API objects and
    // routes; Service, Deployment, ConfigMap applied or deleted; DaemonSet only deleted (and
    // watched: see cluster_role_covers_every_watched_kind).
    let needs = |kind: &str| -> &'static [(&'static str, &'static str)] {
        match kind {
            "GatewayClass" | "Gateway" | "UdpRoute" | "GatewayUdpRoute" | "GatewayTcpRoute" | "ListenerSet" => {
                &[("/status", "patch")]
            }
            "Service" | "ConfigMap" | "Deployment" => &[("", "create"), ("", "patch"), ("", "delete")],
            "DaemonSet" => &[("", "delete")],
            other => panic!("ops.rs writes WriteKind::{other}: say how in this test and grant it in the ClusterRole"),
        }
    };
    // The variants of `enum WriteKind`: watched kinds under their index names, and ConfigMap.
    let text = source("k8s/src/ops.rs");
    let body = text.split("pub enum WriteKind {").nth(1).and_then(|t| t.split('}').next()).expect("enum WriteKind");
    let mut count = 0;
    for variant in body.lines().map(|l| l.trim().trim_end_matches(',')).filter(|l| !l.is_empty()) {
        let (group, plural) = match Kind::ALL.iter().find(|k| format!("{k:?}") == variant) {
            Some(kind) => (kind.api().group, kind.api().plural),
            None if variant == "ConfigMap" => (String::new(), "configmaps".to_string()),
            None => panic!("WriteKind::{variant} is neither an index kind nor a ConfigMap: say how it is written here"),
        };
        for (sub, verb) in needs(variant) {
            assert!(
                allows(&grants, &group, &format!("{plural}{sub}"), verb),
                "{verb} {group}/{plural}{sub} ({variant})"
            );
        }
        count += 1;
    }
    assert_eq!(count, 10, "WriteKind variants parsed from ops.rs");
}

/// Least privilege: no wildcards, create only for the objects the operator applies, Secrets
/// and the other read-only kinds never written, and leader election confined to its namespace.
#[test]
fn rbac_is_least_privilege() {
    if !deploytool_built() {
        return;
    }
    let objs = kustomize(&manifests());
    let cluster = grants(find(&objs, "ClusterRole", OPERATOR));
    for ((group, resource), verbs) in &cluster {
        assert!(group != "*" && resource != "*" && !verbs.contains("*"), "wildcard on {group}/{resource}");
        let applied = matches!(resource.as_str(), "services" | "configmaps" | "deployments" | "daemonsets");
        let review = matches!(resource.as_str(), "tokenreviews" | "subjectaccessreviews");
        assert!(!verbs.contains("create") || applied || review, "create {group}/{resource}: only the applied kinds");
        assert!(!review || verbs == &BTreeSet::from(["create".to_string()]), "reviews are create-only");
        assert!(!verbs.contains("deletecollection") && !verbs.contains("escalate") && !verbs.contains("bind"));
    }
    for resource in ["secrets", "nodes", "namespaces", "endpoints"] {
        assert_eq!(
            cluster[&(String::new(), resource.to_string())],
            BTreeSet::from(["get", "list", "watch"].map(String::from))
        );
    }
    assert!(!cluster.contains_key(&("coordination.k8s.io".to_string(), "leases".to_string())));
    let role = grants(find(&objs, "Role", "stunner-gateway-operator-leader-election"));
    for verb in ["get", "create", "update"] {
        assert!(allows(&role, "coordination.k8s.io", "leases", verb), "lease.rs needs {verb}");
    }
}

#[test]
fn helm_logging_values_of_the_stunner_chart() {
    if !deploytool_built() {
        return;
    }
    let a = args(&helm(&[]));
    assert!(a.contains(&"--zap-encoder=console".into()) && a.contains(&"--zap-log-level=info".into()), "{a:?}");
    let a = args(&helm(&["logging.operator.format=JSON", "logging.operator.level=debug", "logLevel=error"]));
    assert!(a.contains(&"--zap-encoder=json".into()) && a.contains(&"--zap-log-level=debug".into()), "{a:?}");
    let err = helm_refused(&["--set", "logging.operator.format=logfmt"]);
    assert!(err.contains("logging.operator.format \"logfmt\": must be text or json"), "{err}");
}

#[test]
fn helm_auth_service_values() {
    if !deploytool_built() {
        return;
    }
    let objs = helm(&["authService.enabled=false"]);
    assert!(!non_crd_objects(&objs).contains(&("Service".into(), "stunner-auth".into())));
    assert!(!args(&objs).iter().any(|a| a.starts_with("--auth-bind-address")), "{:?}", args(&objs));
    let ports = operator_container(&objs)["ports"].as_array().unwrap().clone();
    assert!(!ports.iter().any(|p| p["name"] == "auth"), "{ports:?}");
    let rules = find(&objs, "NetworkPolicy", OPERATOR)["spec"]["ingress"].as_array().unwrap().clone();
    assert!(!rules.iter().any(|r| r["ports"][0]["port"] == 8088), "{rules:?}");
    assert!(env(&objs, "STUNNER_PUBLIC_ADDR").is_null());

    let objs = helm(&["authService.port=9000", "authService.publicAddress=203.0.113.7"]);
    assert!(args(&objs).contains(&"--auth-bind-address=:9000".to_string()));
    assert_eq!(env(&objs, "STUNNER_PUBLIC_ADDR")["value"], "203.0.113.7");
    let auth = find(&objs, "Service", "stunner-auth");
    assert_eq!(
        (auth["spec"]["ports"][0]["port"].as_i64(), auth["spec"]["ports"][0]["targetPort"].as_str()),
        (Some(8088), Some("auth"))
    );
    let rules = find(&objs, "NetworkPolicy", OPERATOR)["spec"]["ingress"].as_array().unwrap().clone();
    assert!(rules.iter().any(|r| r["ports"][0]["port"] == 9000), "{rules:?}");
}

/// The `stunner` chart's default values file, a copy of upstream's (the fixture says from which
/// commit).
fn stunner_chart_values() -> PathBuf {
    repo().join("tests/fixtures/stunner-chart-values.yaml")
}

/// The fixture, parsed.
fn stunner_chart_defaults() -> Value {
    documents(&std::fs::read_to_string(stunner_chart_values()).unwrap()).remove(0)
}

/// A values file in a temporary directory, for `-f`.
fn values_file(name: &str, yaml: &str) -> String {
    let path = std::env::temp_dir().join(format!("deploy-{name}-{}.yaml", std::process::id()));
    std::fs::write(&path, yaml).unwrap();
    path.to_str().unwrap().to_string()
}

fn helm_with_values(files: &[&str], sets: &[&str]) -> Vec<Value> {
    let chart = chart();
    let mut args = vec!["helm-template", chart.as_str(), "--namespace", NAMESPACE];
    for f in files {
        args.extend(["-f", f]);
    }
    for s in sets {
        args.extend(["--set", s]);
    }
    documents(&deploytool(&args))
}

/// The stunner chart's default values file renders this chart: the operator (one replica, as
/// there), the credential API, the default Dataplane with the stunner chart's stunnerd spec.
fn check_stunner_chart_defaults(objs: &[Value]) {
    let deployment = find(objs, "Deployment", OPERATOR);
    assert_eq!(deployment["spec"]["replicas"], 1);
    assert!(!has(objs, "PodDisruptionBudget"), "one replica: no PDB");
    let pod = &deployment["spec"]["template"]["spec"];
    assert_eq!(pod["nodeSelector"], json!({"kubernetes.io/os": "linux"}));
    let a = args(objs);
    for flag in [
        "--leader-elect",
        "--dataplane-mode=managed",
        "--zap-encoder=console",
        "--zap-log-level=info",
        "--auth-bind-address=:8088",
    ] {
        assert!(a.contains(&flag.to_string()), "{flag} in {a:?}");
    }
    let container = operator_container(objs);
    assert_eq!(container["resources"]["limits"], json!({"cpu": "1000m", "memory": "512Mi"}));
    assert_eq!(container["image"], "ghcr.io/l7mp/stunner-gateway-operator-rs:latest", "this chart's image");
    assert!(has(objs, "Service") && find(objs, "Service", "stunner-auth")["spec"]["ports"][0]["port"] == 8088);
    let spec = &find(objs, "Dataplane", "default")["spec"];
    assert_eq!(spec["image"], "docker.io/l7mp/stunnerd:1.2.0");
    assert_eq!(spec["command"], json!(["stunnerd"]));
    assert_eq!(spec["args"], json!(["-w", "--udp-thread-num=16", "--log-format=text"]));
    assert_eq!(spec["terminationGracePeriodSeconds"], 3600);
    assert_eq!(spec["enableMetricsEndpoint"], false);
}

#[test]
fn helm_reads_the_stunner_charts_values() {
    if !deploytool_built() {
        return;
    }
    let defaults = stunner_chart_values().display().to_string();
    check_stunner_chart_defaults(&helm_with_values(&[&defaults], &[]));
    // The real file, where a clone of stunner-helm is at hand.
    if let Some(dir) = std::env::var_os("STUNNER_HELM_DIR") {
        let upstream = PathBuf::from(dir).join("helm/stunner/values.yaml");
        check_stunner_chart_defaults(&helm_with_values(&[upstream.to_str().unwrap()], &[]));
    }

    // Non-default values, honoured.
    let custom = values_file(
        "stunner-custom",
        "
logging:
  operator: {format: json, level: debug}
  dataplane: {format: json}
stunnerGatewayOperator:
  deployment:
    replicas: 3
    podLabels: {team: media}
    tolerations: [{key: dedicated, operator: Exists}]
    topologySpreadConstraints: [{maxSkew: 1, topologyKey: zone, whenUnsatisfiable: ScheduleAnyway}]
    container:
      manager:
        image: {pullPolicy: Always}
        resources: {requests: {cpu: 50m}}
  dataplane:
    mode: legacy
    spec:
      replicas: 2
      image: {name: registry.example/stunnerd, tag: 1.2.1}
      hostNetwork: true
stunnerAuthService:
  enabled: false
",
    );
    let objs = helm_with_values(&[&custom], &[]);
    let deployment = find(&objs, "Deployment", OPERATOR);
    assert_eq!(deployment["spec"]["replicas"], 3);
    assert!(has(&objs, "PodDisruptionBudget"));
    assert_eq!(pod_labels(&objs).get("team"), Some(&json!("media")));
    let pod = &deployment["spec"]["template"]["spec"];
    assert_eq!(pod["tolerations"], json!([{"key": "dedicated", "operator": "Exists"}]));
    assert_eq!(pod["topologySpreadConstraints"][0]["topologyKey"], "zone");
    let container = operator_container(&objs);
    assert_eq!(container["imagePullPolicy"], "Always");
    assert_eq!(container["resources"], json!({"requests": {"cpu": "50m"}}));
    let a = args(&objs);
    for flag in ["--dataplane-mode=legacy", "--zap-encoder=json", "--zap-log-level=debug"] {
        assert!(a.contains(&flag.to_string()), "{flag} in {a:?}");
    }
    assert!(!a.iter().any(|f| f.starts_with("--auth-bind-address")), "{a:?}");
    assert!(!non_crd_objects(&objs).contains(&("Service".into(), "stunner-auth".into())));
    let spec = &find(&objs, "Dataplane", "default")["spec"];
    assert_eq!((spec["replicas"].as_i64(), spec["image"].as_str()), (Some(2), Some("registry.example/stunnerd:1.2.1")));
    assert_eq!((spec["imagePullPolicy"].as_str(), spec["hostNetwork"].as_bool()), (Some("IfNotPresent"), Some(true)));
    assert_eq!(spec["args"], json!(["-w", "--udp-thread-num=16", "--force-ready-status", "--log-format=json"]));
    assert_eq!(spec["terminationGracePeriodSeconds"], 3600, "this chart's default where the file says nothing");

    // Refused, naming the key.
    for (set, key) in [
        ("stunnerGatewayOperator.enabled=false", "stunnerGatewayOperator.enabled"),
        ("stunnerGatewayOperator.customerKey=abc", "stunnerGatewayOperator.customerKey"),
        (
            "stunnerGatewayOperator.deployment.container.manager.image.tag=1.1.0",
            "stunnerGatewayOperator.deployment.container.manager.image.tag",
        ),
        (
            "stunnerGatewayOperator.deployment.container.manager.args={--zap-devel}",
            "stunnerGatewayOperator.deployment.container.manager.args",
        ),
        ("stunnerAuthService.deployment.replicas=3", "stunnerAuthService.deployment"),
        ("logging.authService.format=json", "logging.authService.format"),
        ("logging.dataplane.format=xml", "logging.dataplane.format"),
    ] {
        let err = helm_refused(&["-f", &defaults, "--set", set]);
        assert!(err.contains(key), "{set}: {err}");
    }
    let _ = std::fs::remove_file(custom);
}

/// The release packaging a GitOps user pins (issue #57): `scripts/release-artifacts chart`
/// packages the chart and `helm push`es it to a real OCI registry on loopback (tests/registry);
/// real helm pulls the same bytes back by version and renders from `oci://` what the checkout
/// renders; `sums` writes SHA256SUMS that `sha256sum -c` accepts. (The real-node suite,
/// e2e_install.rs, installs from the registry.)
#[test]
fn release_artifacts_push_the_chart_to_an_oci_registry() {
    let how = "build it with tests/deploytool/build.sh and tests/registry/build.sh (scripts/test does)";
    let (Some(helm), Some(registry_bin)) = (
        external::built(repo().join("tests/deploytool/bin/helm"), how),
        external::built(repo().join("tests/registry/bin/registry"), how),
    ) else {
        return;
    };
    if !deploytool_built() {
        return;
    }
    let dir = std::env::temp_dir().join(format!("stunner-release-test-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    let (home, out, pulled) = (dir.join("helm"), dir.join("out"), dir.join("pulled"));
    std::fs::create_dir_all(&pulled).unwrap();
    let registry = registry::Registry::start(&registry_bin);
    let version = registry::chart_version(&repo());

    let tgz = registry::push_chart(&repo(), &helm, &home, &out, &registry);
    assert_eq!(tgz, out.join(format!("stunner-gateway-operator-{version}.tgz")));
    registry::run(
        registry::helm_command(&helm, &home).args(["pull", &registry.chart_ref(), "--version", &version]).args([
            "--plain-http",
            "--destination",
            pulled.to_str().unwrap(),
        ]),
    );
    let back = std::fs::read(pulled.join(tgz.file_name().unwrap())).unwrap();
    assert!(back == std::fs::read(&tgz).unwrap(), "the registry serves the packaged chart, byte for byte");
    let rendered = registry::run(
        registry::helm_command(&helm, &home)
            .args(["template", OPERATOR, &registry.chart_ref(), "--version", &version, "--plain-http"])
            .args(["--namespace", NAMESPACE, "--include-crds", "--kube-version", "1.34.0"]),
    );
    let objs = documents(&rendered);
    assert_eq!(non_crd_objects(&objs), chart_objects());
    assert_eq!(crds_of(&objs), deploy_crds());
    assert_eq!(gateway_api_of(&objs), gateway_api_bundle("standard"));

    let sums =
        Command::new(repo().join("scripts/release-artifacts")).args(["sums", out.to_str().unwrap()]).output().unwrap();
    assert!(sums.status.success(), "{}", String::from_utf8_lossy(&sums.stderr));
    let listed = std::fs::read_to_string(out.join("SHA256SUMS")).unwrap();
    assert_eq!(listed.lines().count(), 1, "{listed}");
    assert!(listed.ends_with(&format!("  stunner-gateway-operator-{version}.tgz\n")), "{listed}");
    let check = Command::new("sha256sum").arg("-c").arg("SHA256SUMS").current_dir(&out).output().unwrap();
    assert!(check.status.success(), "{}", String::from_utf8_lossy(&check.stdout));
    drop(registry);
    std::fs::remove_dir_all(&dir).unwrap();
}
