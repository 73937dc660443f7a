//! Gateway API v1alpha2 UDPRoutes in STUNner's v1 shape: the renderer only knows one route type.

use crate::resources::gateway::{GatewayDefaultScope, ParentReference, RouteParentStatus};
use crate::resources::{BackendRef, GatewayUdpRoute, UdpRoute, UdpRouteRule, UdpRouteSpec, UdpRouteStatus};
use gateway_api::experimental::udproutes::UdpRouteUseDefaultGateways;

/// The index stores v1alpha2 routes converted (see the kind table).
impl From<GatewayUdpRoute> for UdpRoute {
    fn from(route: GatewayUdpRoute) -> Self {
        convert_gateway_udp_route(route)
    }
}

/// Converts a v1alpha2 route field by field. Backend `port` is dropped, as upstream does: a
/// v1alpha2 backend always carries a port, which would otherwise narrow every cluster to one
/// port (spec §1.6); `weight` has no counterpart.
pub fn convert_gateway_udp_route(route: GatewayUdpRoute) -> UdpRoute {
    let parent_refs = route.spec.parent_refs.unwrap_or_default().into_iter().map(|p| ParentReference {
        group: p.group,
        kind: p.kind,
        namespace: p.namespace,
        name: p.name,
        section_name: p.section_name,
        port: p.port,
    });
    let rules = route.spec.rules.into_iter().map(|r| UdpRouteRule {
        backend_refs: r
            .backend_refs
            .into_iter()
            .map(|b| BackendRef {
                group: b.group,
                kind: b.kind,
                name: b.name,
                namespace: b.namespace,
                port: None,
                end_port: None,
            })
            .collect(),
    });
    let status = route.status.map(|s| UdpRouteStatus {
        parents: s
            .parents
            .into_iter()
            .map(|p| RouteParentStatus {
                parent_ref: ParentReference {
                    group: p.parent_ref.group,
                    kind: p.parent_ref.kind,
                    namespace: p.parent_ref.namespace,
                    name: p.parent_ref.name,
                    section_name: p.parent_ref.section_name,
                    port: p.parent_ref.port,
                },
                controller_name: p.controller_name,
                conditions: p.conditions,
            })
            .collect(),
    });
    UdpRoute {
        metadata: route.metadata,
        spec: UdpRouteSpec {
            parent_refs: parent_refs.collect(),
            use_default_gateways: route.spec.use_default_gateways.map(|d| match d {
                UdpRouteUseDefaultGateways::All => GatewayDefaultScope::All,
                UdpRouteUseDefaultGateways::None => GatewayDefaultScope::None,
            }),
            rules: rules.collect(),
        },
        status,
    }
}
