//! Faults around the operator binary and a real kube-apiserver: manifests the CRD schema
//! rejects, another field manager overwriting a status, and an API server restart (issue #6).

mod e2e;

use e2e::*;
use serde_json::json;

const GW: &str = "gateway.networking.k8s.io/v1";
const NS: &str = "stunner";

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn rejected_manifests_status_conflicts_and_an_apiserver_restart() {
    let Some(mut cluster) = Cluster::start("faults").await else { return };
    apply_yaml(&cluster.admin, &namespace_yaml(NS)).await;
    apply_yaml(&cluster.admin, &quickstart_yaml()).await;
    let op = cluster.operator("op", &[]).await;
    let c = cluster.admin.clone();
    let mut ws = op.watch(NS, "udp-gateway").await;
    config_until(&mut ws, "the quickstart", |c| c.listeners.len() == 2 && c.clusters.len() == 1).await;

    // The CRD schemas refuse bad manifests; nothing reaches the operator.
    let bad_static = json!({
        "apiVersion": "stunner.l7mp.io/v1", "kind": "StaticService",
        "metadata": {"name": "bad-static", "namespace": NS},
        "spec": {"prefixes": "10.0.0.0/8"},
    });
    let bad_gateway = json!({
        "apiVersion": GW, "kind": "Gateway",
        "metadata": {"name": "bad-gateway", "namespace": NS},
        "spec": {"gatewayClassName": "stunner-gatewayclass", "listeners": [{"name": "x", "port": 70000, "protocol": "UDP"}]},
    });
    for bad in [bad_static, bad_gateway] {
        // POST, as `kubectl create` does: the schema check answers 422 Unprocessable.
        let (av, kind) = (bad["apiVersion"].as_str().unwrap(), bad["kind"].as_str().unwrap());
        let api = api_for(&c, av, kind, Some(NS)).await;
        let obj: kube::api::DynamicObject = serde_json::from_value(bad.clone()).unwrap();
        match api.create(&kube::api::PostParams::default(), &obj).await {
            Err(kube::Error::Api(e)) => assert_eq!(e.code, 422, "{bad}: {e:?}"),
            other => panic!("the API server accepted {bad}: {other:?}"),
        }
    }
    // The operator keeps working: a valid change still reaches the CDS.
    let route = std::fs::read_to_string(repo_root().join("deploy/examples/quickstart/route.yaml")).unwrap();
    apply_yaml(&c, &route.replace("    - \"10.0.0.0/8\"\n", "    - \"10.0.0.0/8\"\n    - \"192.168.0.0/16\"\n")).await;
    config_until(&mut ws, "the new prefix", |c| {
        c.clusters.first().is_some_and(|cl| cl.endpoints.contains(&"192.168.0.0/16".to_string()))
    })
    .await;

    // Another field manager takes over the Gateway's status: the operator writes it back.
    let gw = wait_object(&c, GW, "Gateway", Some(NS), "udp-gateway", "Programmed", |o| {
        has_condition(&o.data["status"], "Programmed", "True", "Programmed")
    })
    .await;
    let generation = gw.metadata.generation.unwrap();
    let foreign = json!({
        "apiVersion": GW, "kind": "Gateway",
        "metadata": {"name": "udp-gateway", "namespace": NS},
        "status": {"conditions": [{
            "type": "Accepted", "status": "False", "reason": "Invalid", "message": "someone else",
            "observedGeneration": generation, "lastTransitionTime": "2024-01-01T00:00:00Z",
        }]},
    });
    let gateways = api_for(&c, GW, "Gateway", Some(NS)).await;
    let params = kube::api::PatchParams::apply("intruder").force();
    gateways.patch_status("udp-gateway", &params, &kube::api::Patch::Apply(&foreign)).await.unwrap();
    wait_object(&c, GW, "Gateway", Some(NS), "udp-gateway", "the operator's status back", |o| {
        let s = &o.data["status"];
        has_condition(s, "Accepted", "True", "Accepted")
            && has_condition(s, "Programmed", "True", "Programmed")
            && s["listeners"].as_array().is_some_and(|l| l.len() == 2)
    })
    .await;

    op.assert_no_rbac_denials();

    // The API server restarts (same data, port and credentials): the operator's watches
    // recover and a later change still reaches the CDS. (Right after a restart the API server
    // may answer 403 for a moment, until its RBAC caches are filled: the watchers retry.)
    cluster.api.restart().await;
    cluster.reconnect().await;
    let c = cluster.admin.clone();
    wait_for("the API server to serve again", || async { c.apiserver_version().await.ok().map(|_| ()) }).await;
    apply_yaml(&c, &route.replace("    - \"10.0.0.0/8\"\n", "    - \"172.16.0.0/12\"\n")).await;
    config_until(&mut ws, "the prefix set after the restart", |c| {
        c.clusters.first().is_some_and(|cl| {
            cl.endpoints.contains(&"172.16.0.0/12".to_string()) && !cl.endpoints.contains(&"10.0.0.0/8".to_string())
        })
    })
    .await;
    // And the writer works again: a status change after the restart is written.
    let gateway = std::fs::read_to_string(repo_root().join("deploy/examples/quickstart/gateway.yaml")).unwrap();
    apply_yaml(
        &c,
        &gateway.replace("  listeners:\n", "  listeners:\n    - name: extra\n      port: 3480\n      protocol: UDP\n"),
    )
    .await;
    wait_object(&c, GW, "Gateway", Some(NS), "udp-gateway", "three listener statuses", |o| {
        o.data["status"]["listeners"].as_array().is_some_and(|l| l.len() == 3)
    })
    .await;
    assert!(op.log_contains("watch failed"), "the restart was noticed");
    // The new API server's watch cache starts at the current revision: watches resumed from
    // older resourceVersions were told 410 Expired, and the changes above still arrived, so
    // they relisted.
    assert!(op.log_contains("too old resource version"), "a watch expired (410) and relisted");
}
