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
mod reference_grant;
mod schema;
pub mod v1;
pub mod v1alpha1;

pub use crd::{CrdFile, crd_files, crds};
pub use gateway::{GatewayDefaultScope, ParentReference, RouteParentStatus, SecretObjectReference};
pub use reference_grant::{ReferenceGrant, ReferenceGrantFrom, ReferenceGrantSpec, ReferenceGrantTo};
pub use v1::*;

/// Gateway API `gateway.networking.k8s.io/v1alpha2` UDPRoute: watched when installed, and
/// converted to STUNner's own [`UdpRoute`].
pub use gateway_api::experimental::udproutes::UdpRoute as GatewayUdpRoute;
/// Gateway API `gateway.networking.k8s.io/v1` GatewayClass.
pub use gateway_api::gatewayclasses::GatewayClass;
/// Gateway API `gateway.networking.k8s.io/v1` Gateway, and its status.
pub use gateway_api::gateways::{Gateway, GatewayStatus};

/// The API group of STUNner's CRDs.
pub const GROUP: &str = "stunner.l7mp.io";

/// Implements `Serialize` and `Deserialize` for a spec type derived with
/// `#[serde(remote = "Self")]`, deserializing an absent or null spec as the default spec.
///
/// Upstream's root types declare `spec` with `omitempty`, so the CRDs do not require it and the
/// API server stores objects without one; Go decodes those as an empty spec. kube-derive's root
/// type requires `spec`, and one such object would fail a whole list decode. Making the spec
/// type itself accept "missing" (serde asks a missing field's type to deserialize from none)
/// restores Go's behaviour without giving up the derive.
macro_rules! optional_spec {
    ($spec:ty) => {
        impl serde::Serialize for $spec {
            fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
                <$spec>::serialize(self, serializer)
            }
        }

        impl<'de> serde::Deserialize<'de> for $spec {
            fn deserialize<D: serde::Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
                struct OptionalSpec;
                impl<'de> serde::de::Visitor<'de> for OptionalSpec {
                    type Value = $spec;
                    fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                        f.write_str("a spec object or null")
                    }
                    fn visit_none<E: serde::de::Error>(self) -> Result<Self::Value, E> {
                        Ok(Default::default())
                    }
                    fn visit_unit<E: serde::de::Error>(self) -> Result<Self::Value, E> {
                        Ok(Default::default())
                    }
                    fn visit_some<D: serde::Deserializer<'de>>(self, d: D) -> Result<Self::Value, D::Error> {
                        <$spec>::deserialize(d)
                    }
                }
                deserializer.deserialize_option(OptionalSpec)
            }
        }
    };
}
pub(crate) use optional_spec;

/// How secrets show in `Debug` output.
pub(crate) fn redacted(secret: &Option<String>) -> Option<&'static str> {
    secret.as_ref().map(|_| "<redacted>")
}

#[cfg(test)]
mod tests;
