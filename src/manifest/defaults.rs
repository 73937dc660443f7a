//! What an API server fills in on `kubectl apply -f DIR -R` and a manifest reader must fill in
//! itself: a namespaced object without a namespace lands in `default`, and an object without a
//! `metadata.uid` gets one (owner references of the objects the operator renders for a Gateway
//! point at its uid). The uid is derived from the object's identity, so restarts do not change
//! owner references.

use crate::index::Resource;

/// Where namespaced objects without a namespace go, as with kubectl's default context.
pub const DEFAULT_NAMESPACE: &str = "default";

/// Fills in the namespace and the uid where the object has none.
pub(crate) fn apply(resource: &mut Resource) {
    let kind = resource.kind();
    let meta = resource.meta_mut();
    if !kind.is_cluster_scoped() && meta.namespace.is_none() {
        meta.namespace = Some(DEFAULT_NAMESPACE.into());
    }
    if meta.uid.is_none() {
        let namespace = meta.namespace.as_deref().unwrap_or("");
        let name = meta.name.as_deref().unwrap_or("");
        meta.uid = Some(stable_uid(&format!("{kind:?}/{namespace}/{name}")));
    }
}

/// A UUID-shaped id that is the same for the same identity on every run (FNV-1a).
fn stable_uid(identity: &str) -> String {
    let hash = |seed: u64| identity.bytes().fold(seed, |h, b| (h ^ u64::from(b)).wrapping_mul(0x100_0000_01b3));
    let (a, b) = (hash(0xcbf2_9ce4_8422_2325), hash(0x8422_2325_cbf2_9ce4));
    format!(
        "{:08x}-{:04x}-{:04x}-{:04x}-{:012x}",
        a >> 32,
        (a >> 16) & 0xffff,
        a & 0xffff,
        b >> 48,
        b & 0xffff_ffff_ffff
    )
}
