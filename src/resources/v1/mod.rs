//! `stunner.l7mp.io/v1`: the storage version of every STUNner CRD and the only one the operator
//! works with.

mod dataplane;
mod gateway_config;
mod static_service;
mod udp_route;

pub use dataplane::{DEFAULT_OFFLOAD_ENGINE, Dataplane, DataplaneResourceType, DataplaneSpec, OFFLOAD_ENGINE_PATTERN};
pub use gateway_config::{
    AUTH_TYPE_PATTERN, CREDENTIAL_PATTERN, DEFAULT_AUTH_TYPE, DEFAULT_DATAPLANE, DEFAULT_REALM, GatewayConfig,
    GatewayConfigSpec, IpFamily, IpFamilyPolicy,
};
pub use static_service::{StaticService, StaticServiceSpec};
pub use udp_route::{BackendRef, UdpRoute, UdpRouteRule, UdpRouteSpec, UdpRouteStatus};
