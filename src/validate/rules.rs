//! The CEL rules (`x-kubernetes-validations`) of the Gateway API schemas that matter for
//! STUNner's listeners, written out by hand (there is no CEL interpreter here): the rest of the
//! CEL rules are not checked. Messages are the schema's own. Beside them, the operator's own
//! rules that need nothing but the object ([`gateway_config`], [`stunner_udp_route`]): what
//! the render would refuse anyway, refused at load time in standalone mode so that an invalid
//! edit is held back rather than served.

use super::errors::Errors;
use serde_json::Value;
use std::collections::BTreeSet;

/// `spec.listeners` of a Gateway (v1 and v1beta1 carry the same rules).
pub(crate) fn gateway_listeners(object: &Value, errs: &mut Errors) {
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

/// The auth types the render takes (`render::auth`), matched as it matches them.
const AUTH_TYPES: [&str; 6] = ["static", "plaintext", "ephemeral", "timewindowed", "longterm", "none"];

/// A GatewayConfig's auth without an `authRef`: a known type and the inline credentials it
/// needs. Values are not quoted: these are secret fields.
pub(crate) fn gateway_config(object: &Value, errs: &mut Errors) {
    let spec = object.get("spec");
    let field = |name: &str| spec.and_then(|s| s.get(name)).filter(|v| !v.is_null());
    if field("authRef").is_some() {
        return; // the credentials come from a Secret, read at render
    }
    let auth_type = field("authType").and_then(Value::as_str).unwrap_or("static");
    if !AUTH_TYPES.contains(&auth_type) {
        let value = errs.quote("spec.authType", &Value::from(auth_type));
        errs.push("spec.authType", format!("Unsupported value: {value}: supported values: {}", AUTH_TYPES.join(", ")));
        return;
    }
    let needs: &[&str] = match auth_type {
        "static" | "plaintext" => &["userName", "password"],
        "none" => &[],
        _ => &["sharedSecret"],
    };
    for name in needs.iter().filter(|n| field(n).is_none()) {
        errs.push(&format!("spec.{name}"), format!("Required value: {auth_type} authentication needs it"));
    }
}

/// A STUNner UDPRoute needs a rule: without one it has no backends (`NoRuleFound` at render).
pub(crate) fn stunner_udp_route(object: &Value, errs: &mut Errors) {
    if object.pointer("/spec/rules").is_none_or(Value::is_null) {
        errs.push("spec.rules", "Required value: a route without rules has no backends".into());
    }
}
