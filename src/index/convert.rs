//! Gateway API UDPRoutes and TCPRoutes in STUNner's v1 shape: the renderer only knows one route
//! type. The two Gateway API kinds have the same schema in distinct Rust types, so one macro
//! converts both, field by field.

use crate::resources::gateway::{GatewayDefaultScope, ParentReference, RouteParentStatus};
use crate::resources::{
    BackendRef, GatewayTcpRoute, GatewayUdpRoute, UdpRoute, UdpRouteRule, UdpRouteSpec, UdpRouteStatus,
};
use gateway_api::experimental::tcproutes::TcpRouteUseDefaultGateways;
use gateway_api::experimental::udproutes::UdpRouteUseDefaultGateways;

/// The conversion of a Gateway API route whose `useDefaultGateways` enum is `$scope`. Backend
/// `port` is dropped, as upstream does for UDPRoutes: a Gateway API backend always carries a
/// port, which would otherwise narrow every cluster to one port (spec §1.6). `weight` has no
/// counterpart: a TURN peer is reached by address, not balanced over, so every backend is
/// allowed whatever its weight, except that `weight: 0` (the Gateway API's "send nothing
/// there") drops the backend (docs/compatibility.md).
macro_rules! convert_route {
    ($route:expr, $scope:ident) => {{
        let route = $route;
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
                .filter(|b| b.weight != Some(0))
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
                    $scope::All => GatewayDefaultScope::All,
                    $scope::None => GatewayDefaultScope::None,
                }),
                rules: rules.collect(),
            },
            status,
        }
    }};
}

/// The index stores Gateway API UDPRoutes converted (see the kind table).
impl From<GatewayUdpRoute> for UdpRoute {
    fn from(route: GatewayUdpRoute) -> Self {
        convert_gateway_udp_route(route)
    }
}

/// The index stores TCPRoutes converted too; which kind a route is stays in its `ObjRef`.
impl From<GatewayTcpRoute> for UdpRoute {
    fn from(route: GatewayTcpRoute) -> Self {
        convert_route!(route, TcpRouteUseDefaultGateways)
    }
}

/// Converts a Gateway API UDPRoute (either version) field by field.
pub fn convert_gateway_udp_route(route: GatewayUdpRoute) -> UdpRoute {
    convert_route!(route, UdpRouteUseDefaultGateways)
}
