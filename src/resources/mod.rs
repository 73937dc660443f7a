//! The Kubernetes resources of the operator: STUNner's CRDs (group `stunner.l7mp.io`) and the
//! Gateway API kinds it consumes. The rest of the code names every resource type from here.
//!
//! The CRD types follow upstream's Go types field for field (JSON names, defaults, validation),
//! and [`crds`] generates CRDs that a test keeps schema-equal to upstream's manifests, so that
//! existing clusters, manifests and kubectl habits keep working. Only [`v1`] is used at run time;
//! [`v1alpha1`] exists for the CRDs' schemas.
//!
//! Defaults declared in the schemas are applied by the API server, not by deserialization: a
//! field left unset in a manifest read without an API server (standalone mode) stays `None`, and
//! consumers apply the `DEFAULT_*` constants.

mod crd;
pub mod gateway;
mod optional;
pub mod redact;
mod reference_grant;
mod schema;
pub mod v1;
pub mod v1alpha1;

pub use crd::{BUNDLE_VERSION, CrdFile, crd_files, crds};
pub use gateway::{GatewayDefaultScope, ParentReference, RouteParentStatus, SecretObjectReference};
pub use reference_grant::{ReferenceGrant, ReferenceGrantFrom, ReferenceGrantSpec, ReferenceGrantTo};
pub use v1::*;

pub(crate) use optional::optional_spec;
pub(crate) use redact::redacted;

/// Gateway API TCPRoute (`v1` or `v1alpha2`, as UDPRoute): a route to TCP backends, converted
/// to STUNner's [`UdpRoute`] shape and rendered as a `protocol: TCP` cluster.
pub use gateway_api::experimental::tcproutes::TcpRoute as GatewayTcpRoute;
/// Gateway API UDPRoute (`gateway.networking.k8s.io/v1`, or `v1alpha2` where only that is
/// served; one schema, so one type reads both): watched when installed, and converted to
/// STUNner's own [`UdpRoute`].
pub use gateway_api::experimental::udproutes::UdpRoute as GatewayUdpRoute;
/// Gateway API `gateway.networking.k8s.io/v1` GatewayClass, and its status.
pub use gateway_api::gatewayclasses::{GatewayClass, GatewayClassStatus};
/// Gateway API `gateway.networking.k8s.io/v1` Gateway, and its status.
pub use gateway_api::gateways::{Gateway, GatewayStatus};
/// Gateway API `gateway.networking.k8s.io/v1` ListenerSet (GEP-1713): listeners added to a
/// Gateway whose `spec.allowedListeners` admits them, and its status.
pub use gateway_api::listenersets::{ListenerSet, ListenerSetStatus};

/// The API group of STUNner's CRDs.
pub(crate) const GROUP: &str = "stunner.l7mp.io";

#[cfg(test)]
mod tests;
