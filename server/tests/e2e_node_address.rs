//! Node addresses reach the per-node patcher through the real cluster path (cds-protocol.md
//! §7): a Node's ExternalIP, written to a real kube-apiserver, is watched by the operator's
//! cluster source, taken in by the render loop and patched into the config a `node=` GET of
//! that node returns.
//!
//! The operator's parts run in this process, not as the binary the other e2e suites start,
//! and the config with the node-address placeholder is put in the store directly, beside the
//! configs the render loop publishes: this suite tests the Node path alone (the renderer's
//! placeholder, for Gateways with relay address discovery, is `render::relay`'s, tested by the
//! golden cases and against stunnerd in interop_stunnerd.rs).

mod e2e;

use e2e::{Cluster, OPERATOR_NAMESPACE, cds_node_config, client_from, wait_for};
use k8s_openapi::api::core::v1::Node;
use kube::api::{Api, DeleteParams, Patch, PatchParams, PostParams};
use serde_json::json;
use std::sync::Arc;
use std::time::Duration;
use stunner_gateway::config::{ListenerConfig, NODE_ADDRESS_PLACEHOLDER, StunnerConfig};
use stunner_gateway::render::RenderSettings;
use stunner_gateway_cds::{CdsMetrics, ConfigStore, ServerSettings, serve};
use stunner_gateway_k8s::{self as cluster, nodes::NodeFeed, writer::Writer};
use stunner_gateway_operator::admin::Readiness;
use stunner_gateway_operator::metrics::OperatorMetrics;
use stunner_gateway_operator::pipeline::{Outputs, cluster::Cluster as ClusterMode};
use stunner_gateway_operator::reconcile::Reconciler;
use tokio::net::TcpListener;
use tokio::sync::mpsc;
use tokio_util::sync::CancellationToken;

/// A config whose first listener asks for the node address, as a relay-address-discovery
/// Gateway's would.
fn placeholder_config() -> StunnerConfig {
    let mut c = StunnerConfig::zero("stunner/udp-gateway");
    let listener = |name: &str, addr: &str| ListenerConfig {
        name: format!("stunner/udp-gateway/{name}"),
        protocol: "TURN-UDP".into(),
        addr: addr.into(),
        port: 3478,
        ..Default::default()
    };
    c.listeners = vec![listener("relay", NODE_ADDRESS_PLACEHOLDER), listener("plain", "$STUNNER_ADDR")];
    c
}

/// The relay listener's address as a dataplane on `node` gets it, once it is `want`.
async fn relay_address(cds: std::net::SocketAddr, node: &str, want: &str) {
    wait_for(&format!("the config for {node} to carry {want}"), || async {
        let c = cds_node_config(cds, "stunner", "udp-gateway", node).await?;
        assert_eq!(c.listeners[1].addr, "$STUNNER_ADDR", "only the placeholder is patched");
        (c.listeners[0].addr == want).then_some(())
    })
    .await
}

#[tokio::test]
async fn a_node_external_ip_is_patched_into_its_dataplanes_config() {
    let Some(cluster) = Cluster::start("e2e_node_address").await else { return };
    let shutdown = CancellationToken::new();
    let store = Arc::new(ConfigStore::new(CdsMetrics::default()));
    let writer = Writer::new(Default::default());
    let (tx, rx) = mpsc::channel(64);
    let outputs = Outputs {
        store: store.clone(),
        statuses: Arc::default(),
        metrics: OperatorMetrics::default(),
        readiness: Readiness::default(),
        mode: Box::new(ClusterMode::new(writer.clone())),
        nodes: NodeFeed::new(store.nodes().clone()),
    };
    tokio::spawn(Reconciler::new(RenderSettings::default(), Duration::from_millis(10), outputs).run(rx));
    // As the operator's ServiceAccount, so its RBAC must let it watch Nodes.
    let client = client_from(&cluster.operator_kubeconfig).await;
    let settings = cluster::Settings {
        endpoints: false,
        leader_elect: false,
        namespace: OPERATOR_NAMESPACE.into(),
        identity: "e2e-node-address".into(),
        dataplane_pods: None,
    };
    let _watchers = cluster::start(client, settings, tx, writer, shutdown.clone(), shutdown.clone()).await.unwrap();
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let cds = listener.local_addr().unwrap();
    tokio::spawn(serve(listener, store.clone(), ServerSettings::default(), axum::Router::new(), shutdown.clone()));
    store.upsert(placeholder_config()).expect("a new config");
    relay_address(cds, "node-1", "$STUNNER_ADDR").await;

    let nodes: Api<Node> = Api::all(cluster.admin.clone());
    let node = serde_json::from_value(json!({"metadata": {"name": "node-1"}})).unwrap();
    nodes.create(&PostParams::default(), &node).await.unwrap();
    let status = |addresses| json!({"status": {"addresses": addresses}});
    let addresses =
        json!([{"type": "InternalIP", "address": "10.0.0.1"}, {"type": "ExternalIP", "address": "203.0.113.7"}]);
    nodes.patch_status("node-1", &PatchParams::default(), &Patch::Merge(status(addresses))).await.unwrap();
    relay_address(cds, "node-1", "203.0.113.7").await;
    relay_address(cds, "node-2", "$STUNNER_ADDR").await;

    let addresses = json!([{"type": "ExternalIP", "address": "2001:db8::7"}]);
    nodes.patch_status("node-1", &PatchParams::default(), &Patch::Merge(status(addresses))).await.unwrap();
    relay_address(cds, "node-1", "2001:db8::7").await;

    nodes.delete("node-1", &DeleteParams::default()).await.unwrap();
    relay_address(cds, "node-1", "$STUNNER_ADDR").await;
    shutdown.cancel();
}
