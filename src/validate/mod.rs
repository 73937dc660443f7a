//! Validation of manifests as the API server would do it on create, for standalone mode where
//! no API server stands between a manifest and the dataplanes.
//!
//! Custom resources (STUNner's and the Gateway API's) are checked against the OpenAPI v3
//! schemas of their CRDs, embedded at build time: STUNner's generated `deploy/crds`, and the
//! Gateway API experimental CRDs (v1.4.0's Gateway and GatewayClass, v1.7.0's UDPRoute and
//! TCPRoute, which serve `v1` and `v1alpha2`, and v1.7.0's ListenerSet: vendored data, see
//! `gateway-api/README.md`). On top of
//! that come the rules no schema states: `metadata` names and namespaces ([`meta`]) and a few
//! CEL rules of the Gateway's listeners ([`rules`]). Built-in kinds get the `metadata` rules
//! only. Kinds not listed here are not judged (the decoder decides what to do with them).
//!
//! No I/O. The work is linear in the document and bounded in depth by the (fixed) schemas; at
//! most [`MAX_ERRORS`] errors are kept and every value quoted in one is cut short, so a
//! 1 MB name makes neither a 1 MB log line nor a slow check.

mod errors;
mod meta;
mod rules;
mod schema;

pub use errors::{Errors, FieldError, Invalid, MAX_ERRORS};
pub use meta::NameRule;
pub use schema::{Schema, SchemaError};

use errors::shown;
use serde_json::Value;
use std::collections::BTreeMap;
use std::sync::LazyLock;

/// What the API server knows of one kind at one version.
struct KindRules {
    namespaced: bool,
    name: NameRule,
    /// The CRD's schema; `None` for built-in kinds (metadata rules only).
    schema: Option<Schema>,
}

/// The CRDs whose schemas are embedded.
const CRDS: &[(&str, &str)] = &[
    ("stunner.l7mp.io_gatewayconfigs.yaml", include_str!("../../deploy/crds/stunner.l7mp.io_gatewayconfigs.yaml")),
    ("stunner.l7mp.io_dataplanes.yaml", include_str!("../../deploy/crds/stunner.l7mp.io_dataplanes.yaml")),
    ("stunner.l7mp.io_udproutes.yaml", include_str!("../../deploy/crds/stunner.l7mp.io_udproutes.yaml")),
    ("stunner.l7mp.io_staticservices.yaml", include_str!("../../deploy/crds/stunner.l7mp.io_staticservices.yaml")),
    ("gateway.networking.k8s.io_gateways.yaml", include_str!("gateway-api/gateway.networking.k8s.io_gateways.yaml")),
    (
        "gateway.networking.k8s.io_gatewayclasses.yaml",
        include_str!("gateway-api/gateway.networking.k8s.io_gatewayclasses.yaml"),
    ),
    ("gateway.networking.k8s.io_udproutes.yaml", include_str!("gateway-api/gateway.networking.k8s.io_udproutes.yaml")),
    ("gateway.networking.k8s.io_tcproutes.yaml", include_str!("gateway-api/gateway.networking.k8s.io_tcproutes.yaml")),
    (
        "gateway.networking.k8s.io_listenersets.yaml",
        include_str!("gateway-api/gateway.networking.k8s.io_listenersets.yaml"),
    ),
];

/// The built-in kinds the operator reads: (group, version, kind, namespaced, name rule).
const BUILTINS: &[(&str, &str, &str, bool, NameRule)] = &[
    ("", "v1", "Service", true, NameRule::Dns1035Label),
    ("", "v1", "Endpoints", true, NameRule::Subdomain),
    ("", "v1", "Secret", true, NameRule::Subdomain),
    ("", "v1", "Node", false, NameRule::Subdomain),
    ("", "v1", "Namespace", false, NameRule::Label),
    ("discovery.k8s.io", "v1", "EndpointSlice", true, NameRule::Subdomain),
    ("apps", "v1", "Deployment", true, NameRule::Subdomain),
];

type Registry = BTreeMap<(String, String, String), KindRules>;

/// Compiles the schema of every served version of an embedded CRD.
fn load_crd(file: &str, text: &str, into: &mut Registry) -> Result<(), SchemaError> {
    let err = |reason: &str| SchemaError { at: file.to_string(), reason: reason.to_string() };
    let crd: Value = serde_yaml_ng::from_str(text).map_err(|e| err(&e.to_string()))?;
    let spec = crd.get("spec").ok_or_else(|| err("no spec"))?;
    let text_at = |p: &str| spec.pointer(p).and_then(Value::as_str).ok_or_else(|| err(p));
    let (group, kind) = (text_at("/group")?, text_at("/names/kind")?);
    let namespaced = text_at("/scope")? == "Namespaced";
    for version in spec.get("versions").and_then(Value::as_array).into_iter().flatten() {
        let name = version.get("name").and_then(Value::as_str).ok_or_else(|| err("a version without a name"))?;
        if version.get("served").and_then(Value::as_bool) == Some(false) {
            continue;
        }
        let schema = version.pointer("/schema/openAPIV3Schema").ok_or_else(|| err("a version without a schema"))?;
        let schema = Schema::compile(schema, &format!("{file}:{name}"))?.without_property("status");
        into.insert(
            (group.to_string(), name.to_string(), kind.to_string()),
            KindRules { namespaced, name: NameRule::Subdomain, schema: Some(schema) },
        );
    }
    Ok(())
}

fn registry() -> Result<Registry, SchemaError> {
    let mut reg = Registry::new();
    for (file, text) in CRDS {
        load_crd(file, text, &mut reg)?;
    }
    for &(group, version, kind, namespaced, name) in BUILTINS {
        reg.insert((group.into(), version.into(), kind.into()), KindRules { namespaced, name, schema: None });
    }
    Ok(reg)
}

/// Built once, on first use. The schemas are fixed at build time and a test compiles them
/// all, so a failure here is a build defect.
static REGISTRY: LazyLock<Registry> = LazyLock::new(|| registry().expect("the embedded CRD schemas compile"));

/// Checks one object as the API server would on create. Objects without `apiVersion` and
/// `kind`, and kinds not listed here, pass: deciding about those is the decoder's job.
pub(crate) fn validate(object: &Value) -> Result<(), Invalid> {
    let field = |name: &str| object.get(name).and_then(Value::as_str);
    let (Some(api_version), Some(kind)) = (field("apiVersion"), field("kind")) else { return Ok(()) };
    let (group, version) = api_version.rsplit_once('/').unwrap_or(("", api_version));
    let Some(known) = REGISTRY.get(&(group.to_string(), version.to_string(), kind.to_string())) else {
        return Ok(());
    };
    let mut errs = Errors::of_kind(kind);
    meta::check(object.get("metadata"), known.name, known.namespaced, &mut errs);
    if let Some(schema) = &known.schema {
        let mut defaulted = object.clone();
        schema.apply_defaults(&mut defaulted);
        schema.check(&defaulted, "", &mut errs);
        match (group, kind) {
            ("gateway.networking.k8s.io", "Gateway") => rules::gateway_listeners(&defaulted, &mut errs),
            ("stunner.l7mp.io", "GatewayConfig") => rules::gateway_config(&defaulted, &mut errs),
            ("stunner.l7mp.io", "UDPRoute") => rules::stunner_udp_route(&defaulted, &mut errs),
            _ => {}
        }
    }
    if errs.is_empty() {
        return Ok(());
    }
    let meta = |k: &str| object.pointer(&format!("/metadata/{k}")).and_then(Value::as_str).unwrap_or("");
    let name = match (meta("namespace"), meta("name")) {
        ("", name) => shown(&Value::from(name)),
        (ns, name) => shown(&Value::from(format!("{ns}/{name}"))),
    };
    Err(Invalid { kind: kind.to_string(), name, errors: errs.kept, more: errs.more })
}

#[cfg(test)]
mod tests;
