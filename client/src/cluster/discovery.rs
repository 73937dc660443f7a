//! Finding pods by the labels upstream stunnerctl looks for (stunner `pkg/apis/v1/default.go`).

use super::error::ClusterError;
use super::labels::{
    APP_LABEL, AUTH_APP, CDS_LABEL, DATAPLANE_APP, RELATED_GATEWAY_NAME_LABEL, RELATED_GATEWAY_NAMESPACE_LABEL,
};
use k8s_openapi::api::core::v1::Pod;
use kube::api::{Api, ListParams};
use kube::{Client, ResourceExt};

/// `namespace/name` of a pod, as messages name it.
pub fn pod_key(pod: &Pod) -> String {
    format!("{}/{}", pod.namespace().unwrap_or_default(), pod.name_any())
}

/// The config discovery server: the pod labelled `stunner.l7mp.io/config-discovery-service=enabled`
/// in `namespace` (any namespace when `None`, as upstream without `--cds-server-namespace`).
///
/// Upstream refuses to choose when it finds more than one; every replica of our operator serves
/// the same content (design.md §4), so this takes a ready one, the first by namespace and name,
/// and only then one that is not ready.
pub async fn cds_pod(client: &Client, namespace: Option<&str>) -> Result<Pod, ClusterError> {
    let api: Api<Pod> = match namespace {
        Some(ns) => Api::namespaced(client.clone(), ns),
        None => Api::all(client.clone()),
    };
    let mut pods = api.list(&ListParams::default().labels(&format!("{CDS_LABEL}=enabled"))).await?.items;
    pods.retain(|p| p.metadata.deletion_timestamp.is_none());
    pods.sort_by_key(|p| (!is_ready(p), pod_key(p)));
    pods.into_iter().next().ok_or_else(|| ClusterError::NoCdsServer {
        where_: match namespace {
            Some(ns) => format!("in namespace {ns}"),
            None => "in any namespace".into(),
        },
    })
}

/// The credential API: a pod labelled `app=stunner-auth` in any namespace, as upstream's
/// `DiscoverK8sAuthServer` finds it; a ready one first, then by namespace and name.
pub async fn auth_pod(client: &Client) -> Result<Pod, ClusterError> {
    let api: Api<Pod> = Api::all(client.clone());
    let mut pods = api.list(&ListParams::default().labels(&format!("{APP_LABEL}={AUTH_APP}"))).await?.items;
    pods.retain(|p| p.metadata.deletion_timestamp.is_none());
    pods.sort_by_key(|p| (!is_ready(p), pod_key(p)));
    pods.into_iter().next().ok_or(ClusterError::NoAuthServer)
}

/// The label selector of the dataplane pods of the Gateways in `namespace` (all namespaces when
/// `None`), or of one Gateway: upstream's `app=stunner` plus the related-gateway labels.
pub fn dataplane_selector(namespace: Option<&str>, gateway: Option<&str>) -> String {
    let mut selector = format!("{APP_LABEL}={DATAPLANE_APP}");
    if let Some(ns) = namespace {
        selector.push_str(&format!(",{RELATED_GATEWAY_NAMESPACE_LABEL}={ns}"));
        if let Some(gw) = gateway {
            selector.push_str(&format!(",{RELATED_GATEWAY_NAME_LABEL}={gw}"));
        }
    }
    selector
}

/// The dataplane pods of a namespace's Gateways, or of one Gateway (`gateway`), or of every
/// Gateway (`namespace` `None`), sorted by namespace and name. With `pod_name` (only with a
/// Gateway, as upstream's `--pod-name`), that pod alone, or an error if it is not among them.
pub async fn dataplane_pods(
    client: &Client,
    namespace: Option<&str>,
    gateway: Option<&str>,
    pod_name: Option<&str>,
) -> Result<Vec<Pod>, ClusterError> {
    let api: Api<Pod> = match namespace {
        Some(ns) => Api::namespaced(client.clone(), ns),
        None => Api::all(client.clone()),
    };
    let mut pods = api.list(&ListParams::default().labels(&dataplane_selector(namespace, gateway))).await?.items;
    pods.sort_by_key(pod_key);
    if let (Some(ns), Some(gw), Some(name)) = (namespace, gateway, pod_name) {
        pods.retain(|p| p.name_any() == name);
        if pods.is_empty() {
            return Err(ClusterError::NoSuchPod { pod: name.into(), gateway: format!("{ns}/{gw}") });
        }
    }
    Ok(pods)
}

/// Whether the pod's `Ready` condition is true.
pub fn is_ready(pod: &Pod) -> bool {
    pod.status
        .as_ref()
        .and_then(|s| s.conditions.as_ref())
        .is_some_and(|cs| cs.iter().any(|c| c.type_ == "Ready" && c.status == "True"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn selectors_narrow_by_namespace_then_gateway() {
        assert_eq!(dataplane_selector(None, Some("ignored")), "app=stunner");
        assert_eq!(dataplane_selector(Some("ns"), None), "app=stunner,stunner.l7mp.io/related-gateway-namespace=ns");
        assert_eq!(
            dataplane_selector(Some("ns"), Some("gw")),
            "app=stunner,stunner.l7mp.io/related-gateway-namespace=ns,stunner.l7mp.io/related-gateway-name=gw"
        );
    }
}
