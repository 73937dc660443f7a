//! Owner references of the objects the operator creates, so that Kubernetes garbage-collects
//! them with their owner. Not controller references, as upstream.

use k8s_openapi::apimachinery::pkg::apis::meta::v1::{ObjectMeta, OwnerReference};

fn owner(api_version: &str, kind: &str, meta: &ObjectMeta) -> OwnerReference {
    OwnerReference {
        api_version: api_version.into(),
        kind: kind.into(),
        name: meta.name.clone().unwrap_or_default(),
        uid: meta.uid.clone().unwrap_or_default(),
        ..Default::default()
    }
}

pub(crate) fn gateway_owner(gw: &gateway_api::gateways::Gateway) -> OwnerReference {
    owner("gateway.networking.k8s.io/v1", "Gateway", &gw.metadata)
}

pub(crate) fn gateway_config_owner(gc: &crate::resources::GatewayConfig) -> OwnerReference {
    owner("stunner.l7mp.io/v1", "GatewayConfig", &gc.metadata)
}
