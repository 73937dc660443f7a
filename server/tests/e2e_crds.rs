//! `--install-crds` against a real kube-apiserver (issue #57): the operator, as the
//! ServiceAccount of deploy/manifests/rbac.yaml, creates STUNner's CRDs where there are none
//! and then works; it upgrades an older or unstamped CRD and leaves a newer one alone; and its
//! RBAC lets it write those four CRDs by name and no other.

mod e2e;

use e2e::*;
use serde_json::{Value, json};
use stunner_gateway::keys::CRD_BUNDLE_VERSION;
use stunner_gateway::resources::BUNDLE_VERSION;

const CRD_API: &str = "apiextensions.k8s.io/v1";
const CRD_KIND: &str = "CustomResourceDefinition";
const NS: &str = "stunner";
const STUNNER_CRDS: [&str; 4] = [
    "dataplanes.stunner.l7mp.io",
    "gatewayconfigs.stunner.l7mp.io",
    "staticservices.stunner.l7mp.io",
    "udproutes.stunner.l7mp.io",
];

/// The CRD `name` as the cluster has it.
async fn crd(c: &kube::Client, name: &str) -> Value {
    let obj = get(c, CRD_API, CRD_KIND, None, name).await.unwrap_or_else(|| panic!("CRD {name} exists"));
    serde_json::to_value(obj).unwrap()
}

fn stamped(crd: &Value) -> Option<&str> {
    crd["metadata"]["annotations"][CRD_BUNDLE_VERSION].as_str()
}

/// The `v1` version's `spec` schema of a CRD manifest.
fn v1_spec_schema(crd: &mut Value) -> &mut Value {
    let versions = crd["spec"]["versions"].as_array_mut().unwrap();
    let v1 = versions.iter_mut().find(|v| v["name"] == "v1").unwrap();
    &mut v1["schema"]["openAPIV3Schema"]["properties"]["spec"]
}

/// The CRD manifest of `file` in deploy/crds.
fn manifest(file: &str) -> Value {
    let text = std::fs::read_to_string(repo_root().join("deploy/crds").join(file)).unwrap();
    serde_yaml_ng::from_str(&text).unwrap()
}

/// The quickstart's config is served: the operator watches STUNner's kinds.
async fn serves_the_quickstart(c: &kube::Client, op: &Operator) {
    apply_yaml(c, &namespace_yaml(NS)).await;
    apply_yaml(c, &quickstart_yaml()).await;
    wait_for("the quickstart's config", || async {
        op.config(NS, "udp-gateway").await.filter(|c| c.auth.credentials.get("password").is_some_and(|p| p == "pass-1"))
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn install_crds_creates_the_missing_crds_and_the_operator_works() {
    let Some(cluster) = Cluster::start_crds("crds-fresh", GatewayApi::V14StandardWithUdpRoute, false).await else {
        return;
    };
    let c = &cluster.admin;
    for name in STUNNER_CRDS {
        assert!(get(c, CRD_API, CRD_KIND, None, name).await.is_none(), "no {name} before the operator");
    }
    // The CRDs built into the binary.
    let op = cluster.operator("op", &["--install-crds"]).await;
    for name in STUNNER_CRDS {
        let crd = crd(c, name).await;
        assert_eq!(stamped(&crd), Some(BUNDLE_VERSION), "{name}");
        assert!(condition(&crd["status"], "Established").is_some_and(|c| c["status"] == "True"), "{name}: {crd}");
        // The API server writes the status; the object is the operator's alone.
        let fields = crd["metadata"]["managedFields"].as_array().unwrap();
        let managers: Vec<&str> =
            fields.iter().filter(|m| m["subresource"].is_null()).filter_map(|m| m["manager"].as_str()).collect();
        assert_eq!(managers, ["stunner-gateway-operator"], "{name}: applied by the operator alone");
        assert!(op.log_contains(&format!("created CRD crd={name}")), "{}", op.log_tail(30));
    }
    serves_the_quickstart(c, &op).await;
    op.assert_no_rbac_denials();

    // The operator's RBAC names the four CRDs: it may not create any other, not even of
    // STUNner's group, by server-side apply either.
    let sa = client_from(&cluster.operator_kubeconfig).await;
    let mut other = manifest("stunner.l7mp.io_staticservices.yaml");
    other["metadata"]["name"] = "otherservices.stunner.l7mp.io".into();
    other["spec"]["names"] = json!({"kind": "OtherService", "listKind": "OtherServiceList", "plural": "otherservices", "singular": "otherservice"});
    match apply(&sa, other).await {
        Err(kube::Error::Api(e)) => assert_eq!(e.code, 403, "{e:?}"),
        other => panic!("the operator's ServiceAccount created another CRD: {other:?}"),
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn install_crds_upgrades_older_crds_and_leaves_a_newer_one_alone() {
    let Some(cluster) = Cluster::start("crds-upgrade").await else { return };
    let c = &cluster.admin;

    // Dataplane: an older release's schema, without `hostNetwork`.
    let mut older = manifest("stunner.l7mp.io_dataplanes.yaml");
    older["metadata"]["annotations"][CRD_BUNDLE_VERSION] = "0.0.1".into();
    v1_spec_schema(&mut older)["properties"].as_object_mut().unwrap().remove("hostNetwork").expect("hostNetwork");
    apply(c, older).await.unwrap();
    let dataplane = json!({"apiVersion": "stunner.l7mp.io/v1", "kind": "Dataplane",
        "metadata": {"name": "probe"}, "spec": {"image": "x", "hostNetwork": true}});
    // A server-side apply of a field the schema lacks is refused: "field not declared in schema".
    let host_network = || async {
        match apply(c, dataplane.clone()).await {
            Ok(applied) => applied.data["spec"]["hostNetwork"].as_bool(),
            Err(e) if e.to_string().contains("field not declared in schema") => None,
            Err(e) => panic!("apply a Dataplane: {e}"),
        }
    };
    wait_for("the older schema served (no hostNetwork)", || async { host_network().await.is_none().then_some(()) })
        .await;
    // GatewayConfig: as an install that stamps no version has it (upstream's chart).
    let mut unstamped = manifest("stunner.l7mp.io_gatewayconfigs.yaml");
    unstamped["metadata"].as_object_mut().unwrap().remove("annotations");
    apply(c, unstamped).await.unwrap();
    // UDPRoute: a newer release's, with a field this operator does not know.
    let mut newer = manifest("stunner.l7mp.io_udproutes.yaml");
    newer["metadata"]["annotations"][CRD_BUNDLE_VERSION] = "99.0.0".into();
    v1_spec_schema(&mut newer)["properties"]["futureField"] = json!({"type": "string"});
    apply(c, newer).await.unwrap();

    // The CRDs of a directory, as the chart mounts them.
    let dir = repo_root().join("deploy/crds");
    let op = cluster.operator("op", &["--install-crds", "--crd-dir", dir.to_str().unwrap()]).await;
    let dataplanes = crd(c, "dataplanes.stunner.l7mp.io").await;
    assert_eq!(stamped(&dataplanes), Some(BUNDLE_VERSION));
    wait_for("the upgraded schema served (hostNetwork kept)", || async { host_network().await.filter(|&h| h) }).await;
    assert!(op.log_contains("upgraded CRD crd=dataplanes.stunner.l7mp.io from=0.0.1"), "{}", op.log_tail(30));
    assert_eq!(stamped(&crd(c, "gatewayconfigs.stunner.l7mp.io").await), Some(BUNDLE_VERSION));
    assert!(op.log_contains("upgraded CRD crd=gatewayconfigs.stunner.l7mp.io from=unversioned"));
    assert!(op.log_contains("CRD is current crd=staticservices.stunner.l7mp.io"));

    let mut udproutes = crd(c, "udproutes.stunner.l7mp.io").await;
    assert_eq!(stamped(&udproutes), Some("99.0.0"), "a newer CRD is left alone");
    assert!(v1_spec_schema(&mut udproutes)["properties"]["futureField"].is_object(), "with its field");
    assert!(
        op.log_contains("leaving the cluster's CRD alone") && op.log_contains("99.0.0 is newer than ours"),
        "{}",
        op.log_tail(30)
    );
    serves_the_quickstart(c, &op).await;
    op.assert_no_rbac_denials();
}

/// The flags that make no sense are refused at start, naming the flag: CRDs without a cluster,
/// a directory without the flag that reads it.
#[test]
fn install_crds_needs_a_cluster_and_crd_dir_needs_install_crds() {
    let bin = env!("CARGO_BIN_EXE_stunner-gateway-operator");
    let dir = TestDir::new("crds-flags");
    let run = |args: &[&str]| {
        let out = std::process::Command::new(bin)
            .args(args)
            .args(["--metrics-bind-address", "0", "--health-probe-bind-address", "0"])
            .env("KUBECONFIG", dir.0.join("none"))
            .output()
            .unwrap();
        assert!(!out.status.success(), "{args:?} started");
        String::from_utf8_lossy(&out.stderr).into_owned()
    };
    let standalone = dir.0.to_str().unwrap();
    let err = run(&["--standalone", standalone, "--install-crds"]);
    assert!(err.contains("--install-crds needs a cluster"), "{err}");
    let err = run(&["--crd-dir", standalone]);
    assert!(err.contains("--crd-dir needs --install-crds"), "{err}");
}
