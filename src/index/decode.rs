//! Decoding one object into a [`Resource`] by `apiVersion` and `kind`; files of them are loaded
//! by [`crate::manifest`].

use super::Resource;
use crate::resources::{
    Dataplane, Gateway, GatewayClass, GatewayConfig, GatewayUdpRoute, ReferenceGrant, StaticService, UdpRoute,
};
use k8s_openapi::ByteString;
use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::core::v1::{Endpoints, Namespace, Node, Secret, Service};
use k8s_openapi::api::discovery::v1::EndpointSlice;
use serde::de::DeserializeOwned;
use serde_json::Value;

/// Why a document did not become a [`Resource`].
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum DecodeError {
    /// A kind the operator does not watch: callers skip it (with a warning).
    #[error("unknown kind {kind:?} in apiVersion {api_version:?}")]
    UnknownKind { api_version: String, kind: String },
    /// A known kind whose content does not fit its type.
    #[error("malformed {kind} {name:?}: {reason}")]
    Malformed { kind: String, name: String, reason: String },
    /// Not a Kubernetes object at all (not a map, no apiVersion/kind, invalid YAML).
    #[error("not a Kubernetes object: {0}")]
    NotAnObject(String),
}

impl DecodeError {
    pub fn is_unknown_kind(&self) -> bool {
        matches!(self, DecodeError::UnknownKind { .. })
    }
}

fn typed<T: DeserializeOwned>(v: Value, kind: &str) -> Result<T, DecodeError> {
    let name = v.pointer("/metadata/name").and_then(Value::as_str).unwrap_or_default().to_string();
    serde_json::from_value(v).map_err(|e| DecodeError::Malformed { kind: kind.into(), name, reason: e.to_string() })
}

/// What the API server does on write and a manifest reader must do itself: `stringData` is
/// folded into `data`.
fn fold_string_data(mut s: Secret) -> Secret {
    for (k, v) in s.string_data.take().unwrap_or_default() {
        s.data.get_or_insert_default().insert(k, ByteString(v.into_bytes()));
    }
    s
}

/// Decodes one object.
pub fn decode_value(v: Value) -> Result<Resource, DecodeError> {
    let field = |name: &str| v.get(name).and_then(Value::as_str).map(str::to_owned);
    let (Some(api_version), Some(kind)) = (field("apiVersion"), field("kind")) else {
        return Err(DecodeError::NotAnObject("missing apiVersion or kind".into()));
    };
    let (group, version) = api_version.rsplit_once('/').unwrap_or(("", &api_version));
    let k = kind.as_str();
    Ok(match (group, version, k) {
        ("gateway.networking.k8s.io", "v1" | "v1beta1", "GatewayClass") => {
            Resource::GatewayClass(typed::<GatewayClass>(v, k)?)
        }
        ("gateway.networking.k8s.io", "v1" | "v1beta1", "Gateway") => Resource::Gateway(typed::<Gateway>(v, k)?),
        ("gateway.networking.k8s.io", "v1alpha2", "UDPRoute") => typed::<GatewayUdpRoute>(v, k)?.into(),
        ("gateway.networking.k8s.io", "v1" | "v1beta1", "ReferenceGrant") => {
            Resource::ReferenceGrant(typed::<ReferenceGrant>(v, k)?)
        }
        ("stunner.l7mp.io", "v1", "GatewayConfig") => Resource::GatewayConfig(typed::<GatewayConfig>(v, k)?),
        ("stunner.l7mp.io", "v1", "Dataplane") => Resource::Dataplane(typed::<Dataplane>(v, k)?),
        ("stunner.l7mp.io", "v1", "UDPRoute") => Resource::UdpRoute(typed::<UdpRoute>(v, k)?),
        ("stunner.l7mp.io", "v1", "StaticService") => Resource::StaticService(typed::<StaticService>(v, k)?),
        ("", "v1", "Service") => Resource::Service(typed::<Service>(v, k)?),
        ("", "v1", "Endpoints") => Resource::Endpoints(typed::<Endpoints>(v, k)?),
        ("", "v1", "Secret") => Resource::Secret(fold_string_data(typed::<Secret>(v, k)?)),
        ("", "v1", "Node") => Resource::Node(typed::<Node>(v, k)?),
        ("", "v1", "Namespace") => Resource::Namespace(typed::<Namespace>(v, k)?),
        ("discovery.k8s.io", "v1", "EndpointSlice") => Resource::EndpointSlice(typed::<EndpointSlice>(v, k)?),
        ("apps", "v1", "Deployment") => Resource::Deployment(typed::<Deployment>(v, k)?),
        _ => return Err(DecodeError::UnknownKind { api_version, kind }),
    })
}
