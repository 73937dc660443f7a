//! The operator binary against a real kube-apiserver: `Dataplane.spec.dataplaneResource`
//! switches a Gateway's dataplane between a Deployment and a DaemonSet (issue #45). No
//! controller runs here, so the tests stand in for one by writing the status a kubelet's pods
//! would give the new object: the old one is deleted only once the new one has an available
//! pod, except for host-network dataplanes, whose old pods hold the node's ports. The operator
//! runs as the ServiceAccount of deploy/manifests/rbac.yaml.

mod e2e;

use e2e::*;
use kube::api::{Patch, PatchParams};
use serde_json::{Value, json};

const NS: &str = "stunner";
const GW: &str = "udp-gateway";

/// The quickstart's Dataplane with `extra` lines added to its spec.
fn dataplane(extra: &str) -> String {
    format!(
        "apiVersion: stunner.l7mp.io/v1\nkind: Dataplane\nmetadata: {{name: default}}\nspec:\n  replicas: 1\n  \
         image: docker.io/l7mp/stunnerd:latest\n  command: [stunnerd]\n  args: [-w]\n{extra}"
    )
}

/// Gives the Gateway's `kind` object the status a controller writes once `available` pods are.
async fn set_available(c: &kube::Client, kind: &str, available: i64) {
    let status = match kind {
        "Deployment" => json!({"replicas": 1, "readyReplicas": available, "availableReplicas": available}),
        _ => json!({
            "currentNumberScheduled": 1, "desiredNumberScheduled": 1, "numberMisscheduled": 0,
            "numberReady": available, "numberAvailable": available,
        }),
    };
    let api = api_for(c, "apps/v1", kind, Some(NS)).await;
    api.patch_status(GW, &PatchParams::default(), &Patch::Merge(&json!({ "status": status })))
        .await
        .unwrap_or_else(|e| panic!("status of the {kind}: {e}"));
}

/// Changes the Dataplane (its pods' termination grace period to `grace` seconds, keeping
/// `kind`) and waits until the operator has written that render's `kind` object.
async fn later_render_written(c: &kube::Client, kind: &str, grace: i64) {
    apply_yaml(c, &dataplane(&format!("  dataplaneResource: {kind}\n  terminationGracePeriodSeconds: {grace}\n")))
        .await;
    wait_object(c, "apps/v1", kind, Some(NS), GW, "a later render written", |o| {
        pod_spec(o)["terminationGracePeriodSeconds"] == grace
    })
    .await;
}

fn pod_spec(o: &kube::api::DynamicObject) -> &Value {
    &o.data["spec"]["template"]["spec"]
}

/// Deployment → DaemonSet → Deployment, make before break: each new object comes with the
/// same labels, owner reference, selector and pod template; the old one stays until the new
/// one serves; the Gateway stays programmed throughout.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn switching_the_dataplane_kind_replaces_the_object_once_the_new_one_serves() {
    let Some(cluster) = Cluster::start("dataplane-kind").await else { return };
    let c = &cluster.admin;
    apply_yaml(c, &namespace_yaml(NS)).await;
    apply_yaml(c, &quickstart_yaml()).await;
    apply_yaml(c, &dataplane("")).await;
    let op = cluster.operator("op", &[]).await;
    let deployment = wait_object(c, "apps/v1", "Deployment", Some(NS), GW, "exists", |_| true).await;
    set_available(c, "Deployment", 1).await;

    apply_yaml(c, &dataplane("  dataplaneResource: DaemonSet\n")).await;
    let daemon_set = wait_object(c, "apps/v1", "DaemonSet", Some(NS), GW, "made", |_| true).await;
    assert_eq!(daemon_set.metadata.labels, deployment.metadata.labels);
    assert_eq!(daemon_set.metadata.owner_references, deployment.metadata.owner_references);
    assert!(owner(&daemon_set, "Gateway", GW).is_some());
    assert_eq!(daemon_set.data["spec"]["selector"], deployment.data["spec"]["selector"]);
    assert_eq!(
        daemon_set.data["spec"]["template"]["metadata"]["labels"],
        deployment.data["spec"]["template"]["metadata"]["labels"],
        "the Service selects the pods of both"
    );
    assert_eq!(pod_spec(&daemon_set)["containers"][0]["env"], pod_spec(&deployment)["containers"][0]["env"]);
    assert!(managers(&daemon_set).contains(&("stunner-gateway-operator".into(), String::new())), "applied by us");
    // The DaemonSet has no available pod yet: the Deployment stays. Seen once a later render
    // is written (the writer writes renders in order, so every write of the earlier ones,
    // a wrong deletion too, is done by then): the Dataplane's next change, on the DaemonSet.
    later_render_written(c, "DaemonSet", 7).await;
    assert!(get(c, "apps/v1", "Deployment", Some(NS), GW).await.is_some(), "deleted before the DaemonSet served");
    set_available(c, "DaemonSet", 1).await;
    wait_gone(c, "apps/v1", "Deployment", Some(NS), GW).await;
    let gw = get(c, "gateway.networking.k8s.io/v1", "Gateway", Some(NS), GW).await.unwrap();
    assert!(has_condition(&gw.data["status"], "Programmed", "True", "Programmed"), "{}", gw.data["status"]);

    // And back.
    apply_yaml(c, &dataplane("  dataplaneResource: Deployment\n")).await;
    wait_object(c, "apps/v1", "Deployment", Some(NS), GW, "re-made", |_| true).await;
    later_render_written(c, "Deployment", 8).await;
    assert!(get(c, "apps/v1", "DaemonSet", Some(NS), GW).await.is_some(), "deleted before the Deployment served");
    set_available(c, "Deployment", 1).await;
    wait_gone(c, "apps/v1", "DaemonSet", Some(NS), GW).await;
    op.assert_no_rbac_denials();
}

/// A host-network DaemonSet replaces the Deployment at once (its pods could not bind the ports
/// the Deployment's pods hold), and its pods resolve cluster names (the CDS Service).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_host_network_daemon_set_replaces_the_deployment_at_once() {
    let Some(cluster) = Cluster::start("dataplane-kind-host").await else { return };
    let c = &cluster.admin;
    apply_yaml(c, &namespace_yaml(NS)).await;
    apply_yaml(c, &quickstart_yaml()).await;
    apply_yaml(c, &dataplane("  hostNetwork: true\n")).await;
    let op = cluster.operator("op", &[]).await;
    wait_object(c, "apps/v1", "Deployment", Some(NS), GW, "exists", |_| true).await;
    set_available(c, "Deployment", 1).await;
    apply_yaml(c, &dataplane("  hostNetwork: true\n  dataplaneResource: DaemonSet\n")).await;
    let daemon_set = wait_object(c, "apps/v1", "DaemonSet", Some(NS), GW, "made", |_| true).await;
    wait_gone(c, "apps/v1", "Deployment", Some(NS), GW).await;
    assert_eq!(pod_spec(&daemon_set)["hostNetwork"], true);
    assert_eq!(pod_spec(&daemon_set)["dnsPolicy"], "ClusterFirstWithHostNet");
    // The Gateway's Dataplane is gone: so is the DaemonSet.
    delete(c, "stunner.l7mp.io/v1", "Dataplane", None, "default").await;
    wait_gone(c, "apps/v1", "DaemonSet", Some(NS), GW).await;
    op.assert_no_rbac_denials();
}
