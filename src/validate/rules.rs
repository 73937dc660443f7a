//! The CEL rules (`x-kubernetes-validations`) of the Gateway API schemas that matter for
//! STUNner's listeners, written out by hand (there is no CEL interpreter here): the rest of the
//! CEL rules are not checked. Messages are the schema's own.

use super::errors::Errors;
use serde_json::Value;
use std::collections::BTreeSet;

/// `spec.listeners` of a Gateway (v1 and v1beta1 carry the same rules).
pub fn gateway_listeners(object: &Value, errs: &mut Errors) {
    let Some(listeners) = object.pointer("/spec/listeners").and_then(Value::as_array) else { return };
    let field = "spec.listeners";
    let protocol = |l: &Value| l.get("protocol").and_then(Value::as_str).unwrap_or("").to_string();
    let present = |l: &Value, k: &str| l.get(k).is_some_and(|v| !v.is_null());
    if listeners.iter().any(|l| ["HTTP", "TCP", "UDP"].contains(&protocol(l).as_str()) && present(l, "tls")) {
        errs.push(
            field,
            "Invalid value: \"array\": tls must not be specified for protocols ['HTTP', 'TCP', 'UDP']".into(),
        );
    }
    let has_hostname = |l: &Value| l.get("hostname").and_then(Value::as_str).is_some_and(|h| !h.is_empty());
    if listeners.iter().any(|l| ["TCP", "UDP"].contains(&protocol(l).as_str()) && has_hostname(l)) {
        errs.push(
            field,
            "Invalid value: \"array\": hostname must not be specified for protocols ['TCP', 'UDP']".into(),
        );
    }
    // `has(hostname)` is about presence: an empty hostname differs from none.
    let combination = |l: &Value| {
        let hostname = l.get("hostname").filter(|h| !h.is_null()).map(Value::to_string);
        (l.get("port").map(Value::to_string), protocol(l), hostname)
    };
    let mut seen = BTreeSet::new();
    if !listeners.iter().all(|l| seen.insert(combination(l))) {
        let message = "Combination of port, protocol and hostname must be unique for each listener";
        errs.push(field, format!("Invalid value: \"array\": {message}"));
    }
}
