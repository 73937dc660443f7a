//! Whether an object as the watchers saw it already has the content a write would give it,
//! so that the write can be skipped: after a restart, and on a replica that is not leading,
//! where the leader's writes come back through the watchers.
//!
//! A server-side apply sets the fields of its body and leaves the rest alone, so the live
//! object matches when it contains the body: every map entry of the body present with a
//! matching value, lists matched element by element. Fields the API server normalises (e.g.
//! quantities) may fail to match; that only costs a write that changes nothing.

use super::ops::{Op, Scope, Target};
use serde_json::Value;
use stunner_gateway::index::Resource;

/// `Some(version)` if `live` (the object of `target`, `None` if absent) already is what `op`
/// would make it, at that resourceVersion (`None`: absent, for a delete).
pub fn matches(live: Option<&Resource>, target: &Target, op: &Op) -> Option<Option<String>> {
    match (op, live) {
        // Absent means deleted only for kinds the watchers see.
        (Op::Delete, None) if target.kind.watched().is_some() => Some(None),
        (Op::Apply(body), Some(live)) => {
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

fn is_zero(v: &Value) -> bool {
    match v {
        Value::Null => true,
        Value::Bool(b) => !b,
        Value::Number(n) => n.as_f64() == Some(0.0),
        Value::String(s) => s.is_empty(),
        Value::Array(a) => a.is_empty(),
        Value::Object(o) => o.is_empty(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cluster::ops::WriteKind;
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
    fn a_live_object_with_the_content_matches_at_its_version() {
        let target = Target { scope: Scope::Spec, kind: WriteKind::Service, key: ObjectKey::new("ns", "gw") };
        let live: Service = serde_json::from_value(json!({
            "metadata": {"name": "gw", "namespace": "ns", "resourceVersion": "42", "uid": "u"},
            "spec": {"type": "LoadBalancer", "clusterIP": "10.0.0.1"},
        }))
        .unwrap();
        let live = Resource::from(live);
        let body = json!({"apiVersion": "v1", "kind": "Service", "metadata": {"name": "gw", "namespace": "ns"},
            "spec": {"type": "LoadBalancer"}});
        assert_eq!(matches(Some(&live), &target, &Op::Apply(body.clone())), Some(Some("42".into())));
        let other = json!({"spec": {"type": "NodePort"}});
        assert_eq!(matches(Some(&live), &target, &Op::Apply(other)), None);
        assert_eq!(matches(None, &target, &Op::Apply(body)), None);
        assert_eq!(matches(None, &target, &Op::Delete), Some(None), "already gone");
        assert_eq!(matches(Some(&live), &target, &Op::Delete), None);
    }
}
