//! Whether an object as the watchers saw it already is what a write would make it, so that
//! the write can be skipped: after a restart, and on a replica that is not leading, where the
//! leader's writes come back through the watchers.
//!
//! A server-side apply sets the fields of its body, removes the fields our field manager set
//! before and no longer sets, and leaves everyone else's alone. So the live object matches
//! when the body still sets every field our manager owns ([`FieldSet::is_kept_by`]: it
//! removes none) and the object contains the body's values (so a field the body sets that
//! we do not own yet, such as a node port the API server allocated and the render carries
//! over, changes nothing either): every map entry of the body present with a matching
//! value, lists matched element by element. Fields the API server normalises (e.g.
//! quantities) may fail to match; that only costs a write that changes nothing.

use super::ops::{Op, Scope, Target};
use super::owned_fields::{FieldSet, is_zero};
use serde_json::Value;
use stunner_gateway::index::Resource;

/// `Some(version)` if `live` (the object of `target`, `None` if absent), of which our field
/// manager owns `owned` in `target`'s scope, already is what `op` would make it, at that
/// resourceVersion (`None`: absent, for a delete).
pub(crate) fn matches(
    live: Option<&Resource>,
    owned: Option<&FieldSet>,
    target: &Target,
    op: &Op,
) -> Option<Option<String>> {
    match (op, live) {
        // Absent means deleted only for kinds the watchers see.
        (Op::Delete, None) if target.kind.watched().is_some() => Some(None),
        (Op::Apply(body), Some(live)) => {
            let body = &body.value();
            if !owned?.is_kept_by(body) {
                return None;
            }
            let value = live.to_value().ok()?;
            let found = match target.scope {
                Scope::Spec => contains(&value, body),
                Scope::Status => contains(&value["status"], &body["status"]),
            };
            found.then(|| live.meta().resource_version.clone())
        }
        _ => None,
    }
}

/// Whether `live` has everything `desired` sets. A zero value (`false`, `0`, `""`, `null`,
/// `{}`, `[]`) matches an absent field: the API server drops those for the many fields Go
/// marks `omitempty` (`hostNetwork: false` never comes back), and writing again would not
/// bring them.
pub fn contains(live: &Value, desired: &Value) -> bool {
    match (live, desired) {
        (Value::Object(l), Value::Object(d)) => {
            d.iter().all(|(k, dv)| l.get(k).map_or_else(|| is_zero(dv), |lv| contains(lv, dv)))
        }
        (Value::Array(l), Value::Array(d)) => l.len() == d.len() && l.iter().zip(d).all(|(lv, dv)| contains(lv, dv)),
        (l, d) => l == d,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ops::WriteKind;
    use k8s_openapi::api::core::v1::Service;
    use serde_json::json;
    use stunner_gateway::index::ObjectKey;

    #[test]
    fn containment_ignores_what_the_body_does_not_set() {
        let live = json!({"a": 1, "b": {"c": 2, "d": 3}, "l": [{"p": 1, "nodePort": 30000}]});
        assert!(contains(&live, &json!({"b": {"c": 2}, "l": [{"p": 1}]})));
        assert!(!contains(&live, &json!({"b": {"c": 3}})));
        assert!(!contains(&live, &json!({"e": 1})));
        assert!(!contains(&live, &json!({"l": [{"p": 1}, {"p": 2}]})), "lists match as a whole");
        // Zero values the API server does not keep match their absence, and only that.
        assert!(contains(&live, &json!({"hostNetwork": false, "b": {"x": "", "y": [], "z": {}, "n": 0}})));
        assert!(!contains(&json!({"hostNetwork": true}), &json!({"hostNetwork": false})));
    }

    #[test]
    fn a_live_object_with_the_content_and_our_fields_matches_at_its_version() {
        let target = Target { scope: Scope::Spec, kind: WriteKind::Service, key: ObjectKey::new("ns", "gw") };
        let live: Service = serde_json::from_value(json!({
            "metadata": {"name": "gw", "namespace": "ns", "resourceVersion": "42", "uid": "u", "labels": {"a": "1"}},
            "spec": {"type": "LoadBalancer", "clusterIP": "10.0.0.1"},
        }))
        .unwrap();
        let live = Resource::from(live);
        let ours =
            FieldSet::parse(&json!({"f:metadata": {"f:labels": {"f:a": {}}}, "f:spec": {"f:type": {}}})).unwrap();
        let body = json!({"apiVersion": "v1", "kind": "Service", "metadata": {"name": "gw", "namespace": "ns", "labels": {"a": "1"}},
            "spec": {"type": "LoadBalancer"}});
        assert_eq!(
            matches(Some(&live), Some(&ours), &target, &Op::Apply(body.clone().into())),
            Some(Some("42".into()))
        );
        let other = json!({"metadata": {"labels": {"a": "1"}}, "spec": {"type": "NodePort"}});
        assert_eq!(matches(Some(&live), Some(&ours), &target, &Op::Apply(other.into())), None, "another value");
        let fewer = json!({"spec": {"type": "LoadBalancer"}});
        assert_eq!(
            matches(Some(&live), Some(&ours), &target, &Op::Apply(fewer.into())),
            None,
            "a label we set is removed"
        );
        assert_eq!(
            matches(Some(&live), None, &target, &Op::Apply(body.clone().into())),
            None,
            "not ours: written once"
        );
        assert_eq!(matches(None, Some(&ours), &target, &Op::Apply(body.into())), None);
        assert_eq!(matches(None, None, &target, &Op::Delete), Some(None), "already gone");
        assert_eq!(matches(Some(&live), Some(&ours), &target, &Op::Delete), None);
    }
}
