//! What every object made for a Gateway is named and carries for it: its name (the Gateway's,
//! shortened past 63 characters), the Gateway API's `gateway.networking.k8s.io/gateway-name`
//! and `gateway-class-name` labels (GEP-1762) and the Gateway's `spec.infrastructure` labels
//! and annotations. The Service, the Deployment or DaemonSet and its pod template take the
//! labels; no selector does (a Deployment's is immutable, and a label the user may change must
//! not move pods between Gateways).

use crate::index::ObjectKey;
use crate::keys::{GATEWAY_CLASS_NAME_LABEL, GATEWAY_NAME_LABEL};
use gateway_api::gateways::Gateway;
use sha2::{Digest, Sha256};
use std::borrow::Cow;

/// Kubernetes' limit on a label value.
const MAX_LABEL_VALUE: usize = 63;
/// The hex digits of a name's SHA-256 that end a shortened label value.
const DIGEST_DIGITS: usize = 8;

/// The key of the objects a Gateway owns (its Service and dataplane): the Gateway's namespace,
/// and its name shortened as [`label_value`] does, since a Service name (and a value of the
/// labels naming it) may have 63 characters and a Gateway name 253. Names up to 63 characters
/// are kept, so objects made before this rule keep theirs.
pub fn owned_key(gateway: &ObjectKey) -> ObjectKey {
    match label_value(&gateway.name) {
        Cow::Borrowed(_) => gateway.clone(),
        Cow::Owned(short) => ObjectKey::new(gateway.namespace.as_str(), short),
    }
}

/// `name` as a label value: itself up to 63 characters; a longer one (a Gateway name may have
/// 253) is its first 54 characters, a `-` and the first 8 hex digits of its SHA-256, the same
/// on every render and every replica, and distinct for names that share the 54.
pub(crate) fn label_value(name: &str) -> Cow<'_, str> {
    if name.len() <= MAX_LABEL_VALUE {
        return Cow::Borrowed(name);
    }
    let hex = short_digest(name);
    // Object names are ASCII; a label value must end in an alphanumeric, which the digest does.
    let head = name.get(..MAX_LABEL_VALUE - DIGEST_DIGITS - 1).unwrap_or(name);
    Cow::Owned(format!("{head}-{hex}"))
}

/// The first 8 hex digits of the SHA-256 of `text`: what tells shortened names apart.
pub(crate) fn short_digest(text: &str) -> String {
    let digest = Sha256::digest(text.as_bytes());
    digest.iter().flat_map(|b| [b >> 4, b & 0xf]).take(DIGEST_DIGITS).map(hex_digit).collect()
}

fn hex_digit(nibble: u8) -> char {
    char::from_digit(nibble.into(), 16).expect("a nibble is a hex digit")
}

/// The labels a Gateway's objects carry for it: its `spec.infrastructure.labels`, then the
/// Gateway API's name labels (which no infrastructure label overrides). The caller adds its
/// own on top.
pub(crate) fn labels(gw: &Gateway) -> impl Iterator<Item = (String, String)> + '_ {
    let infrastructure = gw.spec.infrastructure.as_ref().and_then(|i| i.labels.as_ref());
    let name = gw.metadata.name.as_deref().unwrap_or_default();
    let names = [
        (GATEWAY_NAME_LABEL.to_string(), label_value(name).into_owned()),
        (GATEWAY_CLASS_NAME_LABEL.to_string(), label_value(&gw.spec.gateway_class_name).into_owned()),
    ];
    infrastructure.into_iter().flatten().map(|(k, v)| (k.clone(), v.clone())).chain(names)
}

/// The Gateway's `spec.infrastructure.annotations`.
pub(crate) fn annotations(gw: &Gateway) -> impl Iterator<Item = (String, String)> + '_ {
    let infrastructure = gw.spec.infrastructure.as_ref().and_then(|i| i.annotations.as_ref());
    infrastructure.into_iter().flatten().map(|(k, v)| (k.clone(), v.clone()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn long_names_are_shortened_deterministically_to_a_valid_label_value() {
        assert_eq!(label_value("udp-gateway"), "udp-gateway");
        let exact = "a".repeat(63);
        assert_eq!(label_value(&exact), exact.as_str());
        let long = format!("{}x", "a".repeat(252));
        let other = format!("{}y", "a".repeat(252));
        let short = label_value(&long);
        assert_eq!(short.len(), 63);
        assert!(short.starts_with(&"a".repeat(54)) && short.as_bytes()[54] == b'-', "{short}");
        assert!(short[55..].chars().all(|c| c.is_ascii_hexdigit() && !c.is_ascii_uppercase()), "{short}");
        assert_eq!(short, label_value(&long), "the same on every render");
        assert_ne!(short, label_value(&other), "names that share their head differ");
        let key = ObjectKey::new("ns", &long);
        assert_eq!(owned_key(&key), ObjectKey::new("ns", short.as_ref()));
        assert_eq!(owned_key(&ObjectKey::new("ns", "gw")), ObjectKey::new("ns", "gw"));
    }
}
