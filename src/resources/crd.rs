//! The CustomResourceDefinitions, generated from the types: one multi-version CRD per kind,
//! rewritten to match upstream's controller-gen output (see [`super::schema`]).

use super::schema::controller_gen_compat;
use super::{v1, v1alpha1};
use crate::keys::CRD_BUNDLE_VERSION;
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::core::CustomResourceExt;
use kube::core::crd::merge_crds;
use serde_json::Value;

const HEADER: &str = "# Generated from the Rust types by `cargo run -p stunner-gateway --bin crdgen`; do not edit.\n";

/// The release the CRDs belong to, stamped on each as [`CRD_BUNDLE_VERSION`]: the workspace's
/// version, which the chart's `appVersion` and the operator image follow.
pub const BUNDLE_VERSION: &str = env!("CARGO_PKG_VERSION");

/// The storage version of every STUNner CRD.
const STORAGE_VERSION: &str = "v1";

/// Every STUNner CRD, in file-name order.
pub fn crds() -> Vec<CustomResourceDefinition> {
    vec![
        merged(vec![v1::Dataplane::crd(), v1alpha1::Dataplane::crd()], false),
        merged(vec![v1::GatewayConfig::crd(), v1alpha1::GatewayConfig::crd()], false),
        merged(vec![v1::StaticService::crd(), v1alpha1::StaticService::crd()], false),
        merged(vec![v1::UdpRoute::crd()], true),
    ]
}

/// A CRD manifest as it is written to `deploy/crds/`.
pub struct CrdFile {
    /// `<group>_<plural>.yaml`, as upstream names them.
    pub name: String,
    pub yaml: String,
}

/// The manifests of [`crds`].
pub fn crd_files() -> Vec<CrdFile> {
    crds()
        .into_iter()
        .map(|crd| {
            let name = format!("{}_{}.yaml", crd.spec.group, crd.spec.names.plural);
            let mut value = serde_json::to_value(&crd).expect("a CRD serializes");
            integral_numbers(&mut value);
            let body = serde_yaml_ng::to_string(&value).expect("a CRD serializes to YAML");
            let yaml = format!("{HEADER}---\n{body}");
            CrdFile { name, yaml }
        })
        .collect()
}

/// Merges single-version CRDs of one kind and makes each version's schema controller-gen's.
fn merged(versions: Vec<CustomResourceDefinition>, spec_required: bool) -> CustomResourceDefinition {
    let mut crd = merge_crds(versions, STORAGE_VERSION).expect("versions of one kind merge");
    // The API server would default it the same way; controller-gen spells it out.
    crd.spec.names.list_kind = Some(format!("{}List", crd.spec.names.kind));
    let annotation = (CRD_BUNDLE_VERSION.to_string(), BUNDLE_VERSION.to_string());
    crd.metadata.annotations = Some([annotation].into());
    for version in &mut crd.spec.versions {
        let schema = version.schema.as_mut().and_then(|s| s.open_api_v3_schema.as_mut());
        controller_gen_compat(schema.expect("a derived schema"), spec_required);
    }
    crd
}

/// Writes whole floats (schema bounds are `f64`s) as integers: `maximum: 65535`, not `65535.0`.
fn integral_numbers(value: &mut Value) {
    match value {
        Value::Number(n) => {
            if let Some(f) = n.as_f64().filter(|f| n.is_f64() && f.fract() == 0.0 && f.abs() < 9.0e15) {
                *value = Value::from(f as i64);
            }
        }
        Value::Array(items) => items.iter_mut().for_each(integral_numbers),
        Value::Object(map) => map.values_mut().for_each(integral_numbers),
        _ => {}
    }
}
