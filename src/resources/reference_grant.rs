//! Gateway API `ReferenceGrant` at `gateway.networking.k8s.io/v1beta1`, the version every
//! Gateway API release since v0.6 serves (the `gateway-api` crate's type is the later `v1`,
//! which older CRD bundles do not serve). Same schema as `v1`, so the crate's `from` and `to`
//! entries are reused; manifests of either version decode into it.

pub use gateway_api::referencegrants::{ReferenceGrantFrom, ReferenceGrantTo};
use kube::CustomResource;
use serde::{Deserialize, Serialize};

/// Which references into the grant's namespace are allowed: from any entry of `from` to any
/// entry of `to` (both lists are ORed).
#[derive(CustomResource, Serialize, Deserialize, Clone, Debug, Default, PartialEq)]
#[kube(
    group = "gateway.networking.k8s.io",
    version = "v1beta1",
    kind = "ReferenceGrant",
    plural = "referencegrants",
    namespaced,
    schema = "disabled",
    derive = "PartialEq",
    derive = "Default"
)]
pub struct ReferenceGrantSpec {
    /// The namespaces and kinds trusted to refer to the objects of `to`.
    pub from: Vec<ReferenceGrantFrom>,
    /// The objects (by group and kind, optionally name) that may be referred to.
    pub to: Vec<ReferenceGrantTo>,
}
