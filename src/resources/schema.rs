//! Schema plumbing that makes kube-derive's schemas say what upstream's controller-gen CRDs say.
//!
//! Two gaps need closing. k8s-openapi's schemas for embedded core types (affinity, env, security
//! contexts, ...) lack the markers k8s.io/api declares in Go comments (`+listType`, `+structType`,
//! `+default`), which controller-gen copies into the CRD and the API server acts on (server-side
//! apply merge semantics, defaulting). [`k8s`] adds them back per type, from [`K8S_MARKERS`].
//! And kube-derive's output differs from controller-gen's in a few general ways (`nullable` on
//! every `Option`, no `apiVersion`/`kind`/`metadata` properties, int-or-string without `anyOf`);
//! [`controller_gen_compat`] rewrites the finished schema.

use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::{JSONSchemaProps, JSONSchemaPropsOrArray};
use schemars::generate::SchemaSettings;
use schemars::{JsonSchema, Schema, SchemaGenerator};
use serde_json::{Map, Value, json};

/// A marker that k8s.io/api puts on a type or a field and controller-gen turns into schema.
enum Marker {
    /// `+listType=atomic` on a field.
    AtomicList(&'static str),
    /// `+listType=map` with `+listMapKey`s on a field.
    MapList(&'static str, &'static [&'static str]),
    /// `+structType=atomic` (or `+mapType=atomic`) on the type.
    AtomicStruct,
    /// `+default=...` on a field (JSON text).
    Default(&'static str, &'static str),
    /// A field that Go marks optional but the OpenAPI document k8s-openapi is built from lists
    /// as required (embedded `LocalObjectReference.name`, defaulted to `""` instead).
    Optional(&'static str),
    /// A resource quantity: int or string, with the canonical quantity pattern.
    Quantity,
}

const QUANTITY_PATTERN: &str = concat!(
    r"^(\+|-)?(([0-9]+(\.[0-9]*)?)|(\.[0-9]+))",
    r"(([KMGTPE]i)|[numkMGTPE]|([eE](\+|-)?(([0-9]+(\.[0-9]*)?)|(\.[0-9]+))))?$"
);

/// The k8s.io/api markers of every core type reachable from the CRDs' embedded fields, keyed by
/// OpenAPI definition name. Facts about the Kubernetes API (v1.36), not about STUNner.
const K8S_MARKERS: &[(&str, &[Marker])] = {
    use Marker::*;
    &[
        ("io.k8s.api.core.v1.NodeAffinity", &[AtomicList("preferredDuringSchedulingIgnoredDuringExecution")]),
        ("io.k8s.api.core.v1.NodeSelector", &[AtomicStruct, AtomicList("nodeSelectorTerms")]),
        (
            "io.k8s.api.core.v1.NodeSelectorTerm",
            &[AtomicStruct, AtomicList("matchExpressions"), AtomicList("matchFields")],
        ),
        ("io.k8s.api.core.v1.NodeSelectorRequirement", &[AtomicList("values")]),
        (
            "io.k8s.api.core.v1.PodAffinity",
            &[
                AtomicList("preferredDuringSchedulingIgnoredDuringExecution"),
                AtomicList("requiredDuringSchedulingIgnoredDuringExecution"),
            ],
        ),
        (
            "io.k8s.api.core.v1.PodAntiAffinity",
            &[
                AtomicList("preferredDuringSchedulingIgnoredDuringExecution"),
                AtomicList("requiredDuringSchedulingIgnoredDuringExecution"),
            ],
        ),
        (
            "io.k8s.api.core.v1.PodAffinityTerm",
            &[AtomicList("matchLabelKeys"), AtomicList("mismatchLabelKeys"), AtomicList("namespaces")],
        ),
        ("io.k8s.apimachinery.pkg.apis.meta.v1.LabelSelector", &[AtomicStruct, AtomicList("matchExpressions")]),
        ("io.k8s.apimachinery.pkg.apis.meta.v1.LabelSelectorRequirement", &[AtomicList("values")]),
        ("io.k8s.api.core.v1.Capabilities", &[AtomicList("add"), AtomicList("drop")]),
        ("io.k8s.api.core.v1.PodSecurityContext", &[AtomicList("supplementalGroups"), AtomicList("sysctls")]),
        ("io.k8s.api.core.v1.TopologySpreadConstraint", &[AtomicList("matchLabelKeys")]),
        ("io.k8s.api.core.v1.LocalObjectReference", &[AtomicStruct, Default("name", r#""""#), Optional("name")]),
        ("io.k8s.api.core.v1.ConfigMapKeySelector", &[AtomicStruct, Default("name", r#""""#), Optional("name")]),
        ("io.k8s.api.core.v1.SecretKeySelector", &[AtomicStruct, Default("name", r#""""#), Optional("name")]),
        ("io.k8s.api.core.v1.ConfigMapEnvSource", &[AtomicStruct, Default("name", r#""""#), Optional("name")]),
        ("io.k8s.api.core.v1.SecretEnvSource", &[AtomicStruct, Default("name", r#""""#), Optional("name")]),
        ("io.k8s.api.core.v1.ObjectFieldSelector", &[AtomicStruct]),
        ("io.k8s.api.core.v1.ResourceFieldSelector", &[AtomicStruct]),
        ("io.k8s.api.core.v1.FileKeySelector", &[AtomicStruct, Default("optional", "false")]),
        ("io.k8s.api.core.v1.ResourceRequirements", &[MapList("claims", &["name"])]),
        ("io.k8s.api.core.v1.ServicePort", &[Default("protocol", r#""TCP""#)]),
        ("io.k8s.apimachinery.pkg.api.resource.Quantity", &[Quantity]),
    ]
};

/// `schema_with` for fields whose type comes from k8s-openapi: its schema, inlined, with the
/// k8s.io/api markers of [`K8S_MARKERS`] applied to each type on the way down.
pub(crate) fn k8s<T: JsonSchema>(_: &mut SchemaGenerator) -> Schema {
    // A private generator that keeps every named type as a definition, so markers can be
    // applied by type name; kube's generator would inline them anonymously.
    let mut generator = SchemaSettings::draft2020_12()
        .with(|s| {
            s.transforms.clear();
            s.meta_schema = None;
        })
        .into_generator();
    let mut root = generator.subschema_for::<T>().to_value();
    let definitions = generator.take_definitions(false);
    inline(&mut root, &definitions);
    Schema::try_from(root).expect("an object schema")
}

/// Replaces every `$ref` below `schema` by its (marked) definition.
fn inline(schema: &mut Value, definitions: &Map<String, Value>) {
    let Some(obj) = schema.as_object_mut() else { return };
    if let Some(Value::String(reference)) = obj.remove("$ref") {
        let name = reference.rsplit('/').next().unwrap_or_default();
        let mut definition = definitions.get(name).cloned().unwrap_or_else(|| panic!("undefined schema {reference}"));
        apply_markers(name, &mut definition);
        // Siblings of the reference (a field's own description) win over the type's.
        if let Value::Object(definition) = definition {
            for (k, v) in definition {
                obj.entry(k).or_insert(v);
            }
        }
    }
    for key in ["properties", "patternProperties"] {
        if let Some(Value::Object(props)) = obj.get_mut(key) {
            props.values_mut().for_each(|p| inline(p, definitions));
        }
    }
    for key in ["items", "additionalProperties"] {
        if let Some(sub) = obj.get_mut(key) {
            inline(sub, definitions);
        }
    }
    for key in ["anyOf", "oneOf", "allOf"] {
        if let Some(Value::Array(subs)) = obj.get_mut(key) {
            subs.iter_mut().for_each(|s| inline(s, definitions));
        }
    }
}

fn apply_markers(type_name: &str, schema: &mut Value) {
    let Some((_, markers)) = K8S_MARKERS.iter().find(|(name, _)| *name == type_name) else { return };
    let obj = schema.as_object_mut().expect("an object schema");
    for marker in *markers {
        match marker {
            Marker::AtomicList(field) => {
                property(obj, field).insert("x-kubernetes-list-type".into(), "atomic".into());
            }
            Marker::MapList(field, keys) => {
                let p = property(obj, field);
                p.insert("x-kubernetes-list-type".into(), "map".into());
                p.insert("x-kubernetes-list-map-keys".into(), json!(keys));
            }
            Marker::AtomicStruct => {
                obj.insert("x-kubernetes-map-type".into(), "atomic".into());
            }
            Marker::Default(field, value) => {
                let value: Value = serde_json::from_str(value).expect("a JSON default");
                property(obj, field).insert("default".into(), value);
            }
            Marker::Optional(field) => {
                if let Some(Value::Array(required)) = obj.get_mut("required") {
                    required.retain(|r| r != field);
                    if required.is_empty() {
                        obj.remove("required");
                    }
                }
            }
            Marker::Quantity => {
                obj.insert("pattern".into(), QUANTITY_PATTERN.into());
            }
        }
    }
}

fn property<'a>(obj: &'a mut Map<String, Value>, field: &str) -> &'a mut Map<String, Value> {
    obj.get_mut("properties")
        .and_then(|p| p.get_mut(field))
        .and_then(Value::as_object_mut)
        .unwrap_or_else(|| panic!("marker for a missing property {field}"))
}

/// `schema_with` for Go `int` fields: an integer without a format, as controller-gen writes it.
pub(crate) fn integer(_: &mut SchemaGenerator) -> Schema {
    schemars::json_schema!({ "type": "integer" })
}

/// Rewrites one version's finished schema the way controller-gen would have written it.
///
/// `spec_required`: whether the Go type's `spec` lacks `omitempty` (only UDPRoute's does).
pub(crate) fn controller_gen_compat(root: &mut JSONSchemaProps, spec_required: bool) {
    walk(root);
    // kube-derive omits the fields the API server validates itself; controller-gen lists them.
    let properties = root.properties.get_or_insert_default();
    let field = |type_: &str, description: &str| JSONSchemaProps {
        type_: Some(type_.into()),
        description: Some(description.into()),
        ..Default::default()
    };
    properties
        .insert("apiVersion".into(), field("string", "The versioned schema of this representation of an object."));
    properties.insert("kind".into(), field("string", "The REST resource this object represents."));
    properties.insert("metadata".into(), JSONSchemaProps { type_: Some("object".into()), ..Default::default() });
    if !spec_required && let Some(required) = &mut root.required {
        required.retain(|r| r != "spec");
        if required.is_empty() {
            root.required = None;
        }
    }
    root.title = None;
}

fn walk(s: &mut JSONSchemaProps) {
    // schemars marks every `Option` nullable; Go pointers are not, and on the API server
    // `nullable` would keep an explicit null instead of pruning it and applying the default.
    s.nullable = None;
    // kube's structural rewrite strips the variants' types; controller-gen spells them out.
    if s.x_kubernetes_int_or_string == Some(true) {
        s.any_of = Some(vec![
            JSONSchemaProps { type_: Some("integer".into()), ..Default::default() },
            JSONSchemaProps { type_: Some("string".into()), ..Default::default() },
        ]);
    }
    if let Some(required) = &mut s.required {
        required.sort();
    }
    // An optional enum's `null` goes with `nullable`.
    if let Some(values) = &mut s.enum_ {
        values.retain(|v| !v.0.is_null());
    }
    s.properties.iter_mut().flat_map(|p| p.values_mut()).for_each(walk);
    match &mut s.items {
        Some(JSONSchemaPropsOrArray::Schema(item)) => walk(item),
        Some(JSONSchemaPropsOrArray::Schemas(items)) => items.iter_mut().for_each(walk),
        None => {}
    }
    if let Some(k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::JSONSchemaPropsOrBool::Schema(a)) =
        &mut s.additional_properties
    {
        walk(a);
    }
}
