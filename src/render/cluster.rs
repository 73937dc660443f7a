//! Clusters: the backends of a route as a STUNner cluster (spec §3.11); a TCPRoute's cluster
//! has `protocol: TCP` (stunnerd relays RFC 6062 TCP allocations through it).

use super::attach::Route;
use super::error::{Reason, RenderError};
use super::settings::RenderSettings;
use crate::config::{CLUSTER_PROTOCOL_TCP, CLUSTER_TYPE_STATIC, CLUSTER_TYPE_STRICT_DNS, ClusterConfig};
use crate::index::{Index, Kind, ObjRefView, ObjectKey};
use crate::resources::{BackendRef, GROUP};

/// A rendered cluster (absent when a critical error dropped it) and the last backend error,
/// which decides the route's `ResolvedRefs` condition even when the cluster was rendered.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct RenderedCluster {
    pub cluster: Option<ClusterConfig>,
    pub error: Option<RenderError>,
}

/// One backend's endpoints and cluster type.
struct Backend {
    endpoints: Vec<String>,
    cluster_type: &'static str,
}

pub(crate) fn render(index: &Index, route: &Route<'_>, settings: &RenderSettings) -> RenderedCluster {
    let Some(rule) = route.route.spec.rules.first() else {
        return RenderedCluster { cluster: None, error: Some(RenderError::new(Reason::NoRuleFound)) };
    };
    let mut error = None;
    let mut cluster_type = None;
    let mut endpoints = Vec::new();
    for b in &rule.backend_refs {
        let (backend, err) = backend(index, route, b, settings);
        if err.is_some() {
            error = err;
        }
        let Some(backend) = backend else { continue };
        // Backends must agree on the type; the first accepted one decides (upstream lets a
        // rejected backend overwrite the type: quirk 6, fixed).
        if cluster_type.is_some_and(|t| t != backend.cluster_type) {
            error = Some(RenderError::new(Reason::InconsistentClusterType));
            continue;
        }
        cluster_type = Some(backend.cluster_type);
        endpoints.extend(with_port_range(backend, b));
    }
    let mut cluster = ClusterConfig {
        name: route.key.to_string(),
        cluster_type: cluster_type.unwrap_or(CLUSTER_TYPE_STATIC).into(),
        // TCPRoutes relay to TCP peers; other routes leave the dataplane's default, UDP.
        protocol: if route.kind == Kind::GatewayTcpRoute { CLUSTER_PROTOCOL_TCP.into() } else { String::new() },
        endpoints,
    };
    match cluster.validate() {
        Ok(()) => RenderedCluster { cluster: Some(cluster), error },
        Err(e) => RenderedCluster { cluster: None, error: Some(e.into()) },
    }
}

/// Resolves one backendRef: its endpoints if any, and its error if any (a Service whose pods or
/// ClusterIP alone are missing yields both).
///
/// The checks go as the Gateway API orders them: group and kind (`InvalidKind`), then the
/// ReferenceGrant (`RefNotPermitted`, with `--enforce-reference-grants`), then existence
/// (`BackendNotFound`), so a refused reference tells nothing of what the other namespace holds.
fn backend(
    index: &Index,
    route: &Route<'_>,
    b: &BackendRef,
    settings: &RenderSettings,
) -> (Option<Backend>, Option<RenderError>) {
    let route_ns = route.namespace();
    let err = |r| Some(RenderError::new(r));
    if !matches!(b.group.as_deref(), None | Some("") | Some(GROUP)) {
        return (None, err(Reason::InvalidBackendGroup));
    }
    if !matches!(b.kind.as_deref(), None | Some("Service" | "StaticService")) {
        return (None, err(Reason::InvalidBackendKind));
    }
    let Some(target) = crate::index::backend_target(route_ns, b) else {
        return (None, err(Reason::InvalidBackendKind));
    };
    if settings.enforce_reference_grants && !index.reference_permitted(&route.obj_ref(), &target) {
        return (None, err(Reason::RefNotPermitted));
    }
    match target.kind {
        Kind::StaticService => match index.static_services().get(&target.key) {
            Some(s) => (Some(Backend { endpoints: s.spec.prefixes.clone(), cluster_type: CLUSTER_TYPE_STATIC }), None),
            None => (None, err(Reason::BackendNotFound)),
        },
        _ if !settings.endpoint_discovery => {
            let dns = format!("{}.{}.svc.cluster.local", target.key.name, target.key.namespace);
            (Some(Backend { endpoints: vec![dns], cluster_type: CLUSTER_TYPE_STRICT_DNS }), None)
        }
        _ => {
            let pods = pod_addresses(index, &target.key, settings);
            let cluster_ip = cluster_ip(index, &target.key);
            let error = cluster_ip.as_ref().err().or(pods.as_ref().err()).cloned();
            if pods.is_err() && cluster_ip.is_err() {
                return (None, err(Reason::BackendNotFound));
            }
            let endpoints = pods.unwrap_or_default().into_iter().chain(cluster_ip.ok()).collect();
            (Some(Backend { endpoints, cluster_type: CLUSTER_TYPE_STATIC }), error)
        }
    }
}

/// Every address of the Service's endpoints, ready or not (relay targets may come up later).
fn pod_addresses(index: &Index, svc: &ObjectKey, settings: &RenderSettings) -> Result<Vec<String>, RenderError> {
    let not_found = || RenderError::new(Reason::EndpointNotFound);
    if settings.endpoint_slices {
        let slices = index.referrers(ObjRefView::new(Kind::Service, svc), Kind::EndpointSlice);
        let addrs: Vec<String> =
            slices.filter_map(|k| index.endpoint_slices().get(k)).flat_map(|s| s.addresses.iter().cloned()).collect();
        if addrs.is_empty() { Err(not_found()) } else { Ok(addrs) }
    } else {
        let ep = index.endpoints().get(svc).ok_or_else(not_found)?;
        Ok(ep
            .subsets
            .iter()
            .flatten()
            .flat_map(|s| s.addresses.iter().flatten().chain(s.not_ready_addresses.iter().flatten()))
            .map(|a| a.ip.clone())
            .collect())
    }
}

fn cluster_ip(index: &Index, svc: &ObjectKey) -> Result<String, RenderError> {
    let s = index.services().get(svc).ok_or(RenderError::new(Reason::ServiceNotFound))?;
    match s.spec.as_ref().and_then(|s| s.cluster_ip.as_deref()) {
        Some(ip) if !ip.is_empty() && ip != "None" => Ok(ip.to_string()),
        _ => Err(RenderError::new(Reason::ClusterIpNotFound)),
    }
}

/// Appends the backend's port range to each of its STATIC endpoints, unless it is every port.
/// A lone `endPort` counts from port 1, as upstream.
fn with_port_range(backend: Backend, b: &BackendRef) -> Vec<String> {
    let valid = |p: Option<i32>| p.filter(|p| (1..=65535).contains(p));
    let start = valid(b.port).unwrap_or(1);
    let mut end = valid(b.port).unwrap_or(65535);
    if let Some(e) = valid(b.end_port).filter(|e| *e >= start) {
        end = e;
    }
    if backend.cluster_type != CLUSTER_TYPE_STATIC || (start, end) == (1, 65535) {
        return backend.endpoints;
    }
    backend.endpoints.into_iter().map(|ep| format!("{ep}:<{start}-{end}>")).collect()
}
