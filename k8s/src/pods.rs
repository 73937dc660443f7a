//! The watcher of our dataplane pods that feeds [`DataplaneIndex`] (`--cds-authorization=pod`).
//!
//! It is not part of the render index: pods are no render input, and only their IPs matter.
//! It watches the pods that carry the labels our Deployments and DaemonSets put on their pod
//! template (src/render/deployment.rs) and keeps those that are what such an object runs: in
//! the Gateway's own namespace (their pods live in their namespace, so a pod elsewhere that
//! claims the Gateway is lying), controlled by a ReplicaSet of the Gateway's Deployment or by
//! the Gateway's DaemonSet, and running. A pod that terminates stays Running while it drains
//! its TURN allocations (up to its grace period) and keeps its authorization until it is gone.

use futures_util::StreamExt;
use k8s_openapi::api::core::v1::Pod;
use kube::runtime::{WatchStreamExt, watcher};
use kube::{Api, Client};
use std::net::IpAddr;
use std::sync::Arc;
use stunner_gateway::cds::ConfigId;
use stunner_gateway::index::ObjectKey;
use stunner_gateway::keys::{APP_LABEL, APP_VALUE, RELATED_GATEWAY_NAME, RELATED_GATEWAY_NAMESPACE};
use stunner_gateway::render::owned_key;
use stunner_gateway_cds::authz::{DataplaneIndex, DataplanePod};
use tokio_util::sync::CancellationToken;

/// The label selector of the watch: what our Deployments' pod templates carry.
pub(crate) fn selector() -> String {
    format!("{APP_LABEL}={APP_VALUE},{RELATED_GATEWAY_NAME},{RELATED_GATEWAY_NAMESPACE}")
}

/// Follows the dataplane pods into `index` until `shutdown`. Errors are logged and retried.
pub(crate) async fn follow(client: Client, index: Arc<DataplaneIndex>, shutdown: CancellationToken) {
    let api = Api::<Pod>::all(client);
    let config = watcher::Config::default().labels(&selector());
    let mut events = std::pin::pin!(watcher(api, config).default_backoff());
    let mut relist: Option<Vec<DataplanePod>> = None;
    loop {
        let event = tokio::select! {
            _ = shutdown.cancelled() => return,
            event = events.next() => event,
        };
        match event {
            None => return,
            Some(Err(e)) => {
                tracing::warn!(error = %super::source::watch_error(&e), "dataplane pod watch failed; retrying")
            }
            Some(Ok(watcher::Event::Apply(pod))) => match dataplane_pod(&pod) {
                Some(p) => index.apply(p),
                None => index.remove(pod_namespace(&pod), pod_name(&pod)),
            },
            Some(Ok(watcher::Event::Delete(pod))) => index.remove(pod_namespace(&pod), pod_name(&pod)),
            Some(Ok(watcher::Event::Init)) => relist = Some(Vec::new()),
            Some(Ok(watcher::Event::InitApply(pod))) => {
                relist.get_or_insert_default().extend(dataplane_pod(&pod));
            }
            Some(Ok(watcher::Event::InitDone)) => {
                let pods = relist.take().unwrap_or_default();
                tracing::debug!(pods = pods.len(), "dataplane pods listed");
                index.replace(pods);
            }
        }
    }
}

fn pod_namespace(pod: &Pod) -> &str {
    pod.metadata.namespace.as_deref().unwrap_or_default()
}

fn pod_name(pod: &Pod) -> &str {
    pod.metadata.name.as_deref().unwrap_or_default()
}

/// The pod as the index keeps it, if it is a running pod of one of our dataplane Deployments.
pub(crate) fn dataplane_pod(pod: &Pod) -> Option<DataplanePod> {
    let labels = pod.metadata.labels.as_ref()?;
    let namespace = pod_namespace(pod);
    // The name of the pod's Deployment or DaemonSet: its Gateway's, shortened past 63
    // characters (`render::owned_key`).
    let owner = labels.get(RELATED_GATEWAY_NAME)?;
    if labels.get(RELATED_GATEWAY_NAMESPACE).map(String::as_str) != Some(namespace) {
        return None;
    }
    // The Gateway's whole name is in the pod's `<ns>/<name>` annotation (ours set it); pods
    // without it are named after their Gateway.
    let annotated = pod.metadata.annotations.as_ref().and_then(|a| a.get(RELATED_GATEWAY_NAME));
    let gateway = match annotated.and_then(|a| a.split_once('/')) {
        Some((ns, name)) if ns == namespace && owned_key(&ObjectKey::new(ns, name)).name == owner.as_str() => name,
        _ => owner.as_str(),
    };
    // A Deployment's ReplicaSets are named `<deployment>-<pod-template-hash>`, and ours is
    // named after its Gateway, as is our DaemonSet, which controls its pods itself.
    let prefix = format!("{owner}-");
    let controlled = pod.metadata.owner_references.iter().flatten().any(|o| {
        let run_by = match o.kind.as_str() {
            "ReplicaSet" => o.name.starts_with(&prefix),
            "DaemonSet" => o.name == *owner,
            _ => false,
        };
        o.controller == Some(true) && o.api_version == "apps/v1" && run_by
    });
    let status = pod.status.as_ref()?;
    if !controlled || status.phase.as_deref() != Some("Running") {
        return None;
    }
    let mut ips: Vec<IpAddr> = status.pod_ips.iter().flatten().filter_map(|p| p.ip.parse().ok()).collect();
    ips.extend(status.pod_ip.as_deref().and_then(|ip| ip.parse::<IpAddr>().ok()));
    ips.sort();
    ips.dedup();
    let spec = pod.spec.as_ref();
    Some(DataplanePod {
        namespace: namespace.to_string(),
        name: pod_name(pod).to_string(),
        gateway: ConfigId::new(namespace, gateway),
        host_network: spec.and_then(|s| s.host_network).unwrap_or(false),
        node: spec.and_then(|s| s.node_name.clone()).unwrap_or_default(),
        ips,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn pod(namespace: &str, labels: serde_json::Value, owner: &str, phase: &str) -> Pod {
        owned_pod(namespace, labels, "ReplicaSet", owner, phase)
    }

    fn owned_pod(namespace: &str, labels: serde_json::Value, kind: &str, owner: &str, phase: &str) -> Pod {
        serde_json::from_value(json!({
            "metadata": {
                "name": "gw-a-5d8f9-x2x7q",
                "namespace": namespace,
                "labels": labels,
                "ownerReferences": [{
                    "apiVersion": "apps/v1", "kind": kind, "name": owner,
                    "uid": "u", "controller": true,
                }],
            },
            "spec": {"containers": [], "nodeName": "node-1"},
            "status": {
                "phase": phase,
                "podIP": "10.0.0.1",
                "podIPs": [{"ip": "10.0.0.1"}, {"ip": "fd00::1"}],
            },
        }))
        .unwrap()
    }

    fn ours(ns: &str) -> serde_json::Value {
        json!({
            "app": "stunner",
            "stunner.l7mp.io/related-gateway-name": "gw-a",
            "stunner.l7mp.io/related-gateway-namespace": ns,
        })
    }

    #[test]
    fn a_running_pod_of_our_deployment_is_indexed_with_every_ip() {
        let p = dataplane_pod(&pod("team-a", ours("team-a"), "gw-a-5d8f9", "Running")).unwrap();
        assert_eq!(p.gateway, ConfigId::new("team-a", "gw-a"));
        assert_eq!(p.ips, vec!["10.0.0.1".parse::<IpAddr>().unwrap(), "fd00::1".parse().unwrap()]);
        assert!(!p.host_network);
        assert_eq!(p.node, "node-1");
    }

    #[test]
    fn a_running_pod_of_our_daemon_set_is_indexed_and_only_of_the_gateways_own() {
        let p = dataplane_pod(&owned_pod("team-a", ours("team-a"), "DaemonSet", "gw-a", "Running")).unwrap();
        assert_eq!((p.gateway, p.node.as_str()), (ConfigId::new("team-a", "gw-a"), "node-1"));
        assert_eq!(dataplane_pod(&owned_pod("team-a", ours("team-a"), "DaemonSet", "gw-a-x", "Running")), None);
        assert_eq!(dataplane_pod(&owned_pod("team-a", ours("team-a"), "DaemonSet", "other", "Running")), None);
        assert_eq!(dataplane_pod(&owned_pod("team-a", ours("team-a"), "StatefulSet", "gw-a", "Running")), None);
    }

    /// A pod draining its allocations after a scale-down (issue #57) is Running with a deletion
    /// timestamp, for up to its grace period: it keeps its authorization until it is gone.
    #[test]
    fn a_terminating_pod_stays_indexed_until_it_is_gone() {
        let mut draining = pod("team-a", ours("team-a"), "gw-a-5d8f9", "Running");
        draining.metadata.deletion_timestamp =
            Some(k8s_openapi::apimachinery::pkg::apis::meta::v1::Time(k8s_openapi::jiff::Timestamp::UNIX_EPOCH));
        draining.metadata.deletion_grace_period_seconds = Some(3600);
        let p = dataplane_pod(&draining).expect("a draining pod is still a dataplane pod");
        assert_eq!(p.gateway, ConfigId::new("team-a", "gw-a"));
    }

    /// A Gateway named past 63 characters owns a dataplane of a shortened name, whose labels
    /// carry that name: the pod is the Gateway's, by its whole name from the annotation, and
    /// an annotation naming a Gateway the labels do not is not believed.
    #[test]
    fn a_pod_of_a_gateway_with_a_long_name_is_indexed_under_the_whole_name() {
        let long = format!("gw-{}", "a".repeat(250));
        let owner = owned_key(&ObjectKey::new("team-a", &long)).name.to_string();
        assert!(owner.len() <= 63, "{owner}");
        let labels = json!({
            "app": "stunner",
            "stunner.l7mp.io/related-gateway-name": owner,
            "stunner.l7mp.io/related-gateway-namespace": "team-a",
        });
        let annotated = |annotation: &str| {
            let mut p = pod("team-a", labels.clone(), &format!("{owner}-5d8f9"), "Running");
            p.metadata.annotations = Some([(RELATED_GATEWAY_NAME.to_string(), annotation.to_string())].into());
            dataplane_pod(&p).unwrap().gateway
        };
        assert_eq!(annotated(&format!("team-a/{long}")), ConfigId::new("team-a", &long));
        assert_eq!(annotated("team-a/another"), ConfigId::new("team-a", &owner));
    }

    #[test]
    fn pods_that_only_claim_a_gateway_are_not() {
        // Labelled for team-a's Gateway but running in another namespace.
        assert_eq!(dataplane_pod(&pod("team-b", ours("team-a"), "gw-a-5d8f9", "Running")), None);
        // Not run by the Gateway's Deployment.
        assert_eq!(dataplane_pod(&pod("team-a", ours("team-a"), "other-5d8f9", "Running")), None);
        // Not running (yet, or any more).
        assert_eq!(dataplane_pod(&pod("team-a", ours("team-a"), "gw-a-5d8f9", "Pending")), None);
        assert_eq!(dataplane_pod(&pod("team-a", ours("team-a"), "gw-a-5d8f9", "Succeeded")), None);
        assert_eq!(dataplane_pod(&pod("team-a", json!({"app": "stunner"}), "gw-a-5d8f9", "Running")), None);
    }
}
