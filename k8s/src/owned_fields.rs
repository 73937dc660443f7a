//! The fields the operator's field manager owns in a live object, read from its
//! `metadata.managedFields`, and whether a body to apply sets exactly those.
//!
//! A server-side apply removes a field that the manager set before and no longer sets, and
//! only then: skipping a write because the live object merely contains the new body would
//! keep every field the user took away (a label, an annotation, a port, an env var). So a
//! write is skipped only when the live object holds the body's values *and* our manager's
//! field set is the body's field set, i.e. the apply would change nothing.
//!
//! The field set is the API server's `FieldsV1` tree: `f:<name>` for a field of a map or
//! struct, `k:{...}` for an element of a list keyed by some of its fields, `v:<value>` for an
//! element of a set, `i:<n>` for a positional element, `.` for the element itself, and an
//! empty node for a leaf: a scalar, or a list or map the schema makes atomic. Leaves are not
//! looked into; their values are compared by the caller's containment check. A node holding
//! only `.` owns the element itself (its membership in its map or list), none of its children.
//!
//! Each entry's field set is in the terms of its `apiVersion`; only an entry of the version a
//! write goes with counts for it (another version's fields may have other names and shapes,
//! and the API server converts them only when it applies).

use k8s_openapi::apimachinery::pkg::apis::meta::v1::ManagedFieldsEntry;
use serde_json::{Map, Value};
use std::collections::BTreeMap;

/// One node of a field set.
#[derive(Debug, Clone, PartialEq)]
pub(crate) enum FieldSet {
    /// A scalar, or an atomic list or map: owned as a whole.
    Leaf,
    /// A map, struct or list element that is owned itself (`{".": {}}`), none of its children.
    Member,
    /// A map or struct: the fields owned in it.
    Fields(BTreeMap<String, FieldSet>),
    /// A list: the elements owned in it, each named by its key.
    Items(Vec<(Item, FieldSet)>),
}

/// How a `FieldsV1` tree names a list element.
#[derive(Debug, Clone, PartialEq)]
pub(crate) enum Item {
    /// `k:{...}`: the element whose fields have these values.
    Key(Map<String, Value>),
    /// `v:<value>`: the element that is this value.
    Value(Value),
    /// `i:<n>`: the element at this position.
    Index(usize),
}

/// What one field manager owns of one object: its spec-side apply and its status apply.
#[derive(Debug, Clone, Default, PartialEq)]
pub(crate) struct Owned {
    pub(crate) main: Option<FieldSet>,
    pub(crate) status: Option<FieldSet>,
}

impl Owned {
    /// The field sets `manager` applied to `entries` through `api_version` (server-side apply
    /// only: fields it set with an update are not removed by an apply, so they do not count;
    /// nor does an apply through another version, whose field set is in that version's terms).
    pub(crate) fn of(entries: &[ManagedFieldsEntry], manager: &str, api_version: &str) -> Owned {
        let mut owned = Owned::default();
        let ours = entries
            .iter()
            .filter(|e| e.manager.as_deref() == Some(manager) && e.api_version.as_deref() == Some(api_version));
        for entry in ours.filter(|e| e.operation.as_deref() == Some("Apply")) {
            let Some(fields) = entry.fields_v1.as_ref().and_then(|f| FieldSet::parse(&f.0)) else { continue };
            match entry.subresource.as_deref().unwrap_or("") {
                "" => owned.main = Some(fields),
                "status" => owned.status = Some(fields),
                _ => {}
            }
        }
        owned
    }
}

impl FieldSet {
    /// Reads a `FieldsV1` tree; `None` if it is not one.
    pub(crate) fn parse(value: &Value) -> Option<FieldSet> {
        let Value::Object(children) = value else { return None };
        let mut fields = BTreeMap::new();
        let mut items = Vec::new();
        let member = children.contains_key(".");
        for (name, child) in children {
            if name == "." {
                continue;
            }
            let node = FieldSet::parse(child)?;
            let (tag, rest) = name.split_once(':')?;
            match tag {
                "f" => {
                    fields.insert(rest.to_string(), node);
                }
                "k" => items.push((Item::Key(serde_json::from_str(rest).ok()?), node)),
                "v" => items.push((Item::Value(serde_json::from_str(rest).ok()?), node)),
                "i" => items.push((Item::Index(rest.parse().ok()?), node)),
                _ => return None,
            }
        }
        Some(match (fields.is_empty(), items.is_empty()) {
            (true, true) if member => FieldSet::Member,
            (true, true) => FieldSet::Leaf,
            (false, true) => FieldSet::Fields(fields),
            (true, false) => FieldSet::Items(items),
            (false, false) => return None, // a node is a map or a list, never both
        })
    }

    /// Whether applying `body` (a whole apply configuration) would remove none of these
    /// fields: it sets each of them, and perhaps more, which it would then own too. Where the
    /// object already holds the values of those others (the API server filled them in: a
    /// Service's node ports, which the render carries over once it sees them), the apply
    /// would change nothing (issue #62). The object's identity (`apiVersion`, `kind`,
    /// `metadata.name`, `metadata.namespace`) is never part of a field set.
    pub(crate) fn is_kept_by(&self, body: &Value) -> bool {
        let Value::Object(top) = body else { return false };
        let mut fields = top.clone();
        fields.remove("apiVersion");
        fields.remove("kind");
        if let Some(Value::Object(meta)) = fields.get_mut("metadata") {
            meta.remove("name");
            meta.remove("namespace");
        }
        // At the top an empty set owns nothing; below, an empty node is a leaf.
        let top = match self {
            FieldSet::Leaf | FieldSet::Member => &FieldSet::Fields(BTreeMap::new()),
            set => set,
        };
        top.covers(&Value::Object(fields))
    }

    /// Whether `body` sets every field of this set (a field it sets beyond them is not one
    /// it would remove).
    fn covers(&self, body: &Value) -> bool {
        match (self, body) {
            // The element itself (`.`), or a leaf: set wherever the body has the node.
            (FieldSet::Leaf | FieldSet::Member, _) => true,
            (FieldSet::Fields(owned), Value::Object(set)) => {
                // Each owned field set (not null), and what is owned below it.
                owned.iter().all(|(k, node)| set.get(k).is_some_and(|v| !v.is_null() && node.covers(v)))
            }
            (FieldSet::Items(items), Value::Array(elements)) => {
                let mut taken = vec![false; elements.len()];
                items.iter().all(|(item, node)| {
                    let found = (0..elements.len()).find(|&i| !taken[i] && item.names(i, &elements[i]));
                    found.is_some_and(|i| {
                        taken[i] = true;
                        node.covers(&elements[i])
                    })
                })
            }
            _ => false,
        }
    }
}

impl Item {
    /// Whether this names `element`, the list's `index`th.
    fn names(&self, index: usize, element: &Value) -> bool {
        match self {
            Item::Key(key) => key.iter().all(|(k, v)| element.get(k) == Some(v)),
            Item::Value(v) => element == v,
            Item::Index(i) => *i == index,
        }
    }
}

/// `false`, `0`, `""`, `[]` and `{}`: what Go's `omitempty` leaves out.
pub(crate) fn is_zero(v: &Value) -> bool {
    match v {
        Value::Null => true,
        Value::Bool(b) => !b,
        Value::Number(n) => n.as_f64() == Some(0.0),
        Value::String(s) => s.is_empty(),
        Value::Array(a) => a.is_empty(),
        Value::Object(o) => o.is_empty(),
    }
}

/// Our manager's entry as the API server would record an apply of `body` whose lists are all
/// atomic: what tests give the objects they pretend to watch back.
#[cfg(any(test, feature = "testing"))]
pub fn applied_entry(manager: &str, body: &Value) -> ManagedFieldsEntry {
    fn fields(v: &Value) -> Value {
        match v {
            Value::Object(m) => Value::Object(
                m.iter().filter(|(_, v)| !v.is_null()).map(|(k, v)| (format!("f:{k}"), fields(v))).collect(),
            ),
            _ => Value::Object(Map::new()),
        }
    }
    let mut top = body.clone();
    if let Value::Object(m) = &mut top {
        m.remove("apiVersion");
        m.remove("kind");
        if let Some(Value::Object(meta)) = m.get_mut("metadata") {
            meta.remove("name");
            meta.remove("namespace");
        }
    }
    ManagedFieldsEntry {
        manager: Some(manager.into()),
        operation: Some("Apply".into()),
        api_version: body.get("apiVersion").and_then(Value::as_str).map(Into::into),
        fields_v1: Some(k8s_openapi::apimachinery::pkg::apis::meta::v1::FieldsV1(fields(&top))),
        ..Default::default()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::FieldsV1;
    use serde_json::json;

    fn fields(v: Value) -> FieldSet {
        FieldSet::parse(&v).expect("a FieldsV1 tree")
    }

    /// A Service as the operator applies it, and the field set the API server records for it.
    fn service(labels: Value, ports: Value) -> Value {
        json!({"apiVersion": "v1", "kind": "Service", "metadata": {"name": "gw", "namespace": "ns", "labels": labels},
            "spec": {"type": "LoadBalancer", "ports": ports, "selector": {"app": "stunner"}}})
    }

    fn service_fields() -> FieldSet {
        fields(json!({
            "f:metadata": {"f:labels": {"f:a": {}, "f:b": {}}},
            "f:spec": {
                "f:type": {},
                "f:selector": {},
                "f:ports": {
                    "k:{\"port\":3478,\"protocol\":\"UDP\"}": {".": {}, "f:port": {}, "f:protocol": {}, "f:name": {}},
                    "k:{\"port\":3479,\"protocol\":\"TCP\"}": {".": {}, "f:port": {}, "f:protocol": {}, "f:name": {}}
                }
            }
        }))
    }

    fn ports(n: usize) -> Value {
        let all = [
            json!({"name": "u", "port": 3478, "protocol": "UDP"}),
            json!({"name": "t", "port": 3479, "protocol": "TCP"}),
        ];
        Value::Array(all[..n].to_vec())
    }

    #[test]
    fn the_same_body_sets_the_same_fields() {
        assert!(service_fields().is_kept_by(&service(json!({"a": "1", "b": "2"}), ports(2))));
    }

    #[test]
    fn a_field_no_longer_set_is_a_change() {
        assert!(!service_fields().is_kept_by(&service(json!({"a": "1"}), ports(2))), "a label removed");
        assert!(!service_fields().is_kept_by(&service(json!({"a": "1", "b": "2"}), ports(1))), "a port removed");
        let body = service(json!({"a": "1", "b": "2"}), ports(2));
        let mut no_type = body.clone();
        no_type["spec"].as_object_mut().unwrap().remove("type");
        assert!(!service_fields().is_kept_by(&no_type), "a spec field removed");
        no_type["spec"]["type"] = Value::Null;
        assert!(!service_fields().is_kept_by(&no_type), "null is not set");
    }

    #[test]
    fn a_field_newly_set_removes_none() {
        let more = service(json!({"a": "1", "b": "2", "c": "3"}), ports(2));
        assert!(service_fields().is_kept_by(&more), "a field not owned yet is no removal");
        let mut zero = service(json!({"a": "1", "b": "2"}), ports(2));
        zero["spec"]["publishNotReadyAddresses"] = json!(false);
        zero["spec"]["externalIPs"] = json!([]);
        assert!(service_fields().is_kept_by(&zero), "omitted zero values match their absence");
    }

    #[test]
    fn list_elements_are_found_by_key_not_position() {
        let mut swapped = ports(2);
        swapped.as_array_mut().unwrap().reverse();
        assert!(service_fields().is_kept_by(&service(json!({"a": "1", "b": "2"}), swapped)));
        let other =
            json!([{"name": "u", "port": 3478, "protocol": "UDP"}, {"name": "t", "port": 3480, "protocol": "TCP"}]);
        assert!(!service_fields().is_kept_by(&service(json!({"a": "1", "b": "2"}), other)), "another key");
        let unnamed = json!([{"port": 3478, "protocol": "UDP"}, {"name": "t", "port": 3479, "protocol": "TCP"}]);
        assert!(!service_fields().is_kept_by(&service(json!({"a": "1", "b": "2"}), unnamed)), "a field of an element");
    }

    #[test]
    fn sets_and_positions_name_elements_too() {
        let set = fields(json!({"f:finalizers": {"v:\"a\"": {}, "v:\"b\"": {}}}));
        assert!(set.is_kept_by(&json!({"finalizers": ["b", "a"]})));
        assert!(!set.is_kept_by(&json!({"finalizers": ["a"]})));
        let positional = fields(json!({"f:l": {"i:0": {"f:x": {}}}}));
        assert!(positional.is_kept_by(&json!({"l": [{"x": 1}]})));
        assert!(!positional.is_kept_by(&json!({"l": [{"y": 1}]})));
    }

    #[test]
    fn atomic_lists_and_maps_are_leaves() {
        let atomic = fields(json!({"f:spec": {"f:tolerations": {}, "f:selector": {}}}));
        assert!(
            atomic.is_kept_by(&json!({"spec": {"tolerations": [{"key": "a"}, {"key": "b"}], "selector": {"x": "y"}}}))
        );
    }

    #[test]
    fn identity_is_not_part_of_the_field_set() {
        let status = fields(json!({"f:status": {"f:conditions": {}}}));
        let body = json!({"apiVersion": "v1", "kind": "X", "metadata": {"name": "a", "namespace": "n"},
            "status": {"conditions": [{"type": "Accepted"}]}});
        assert!(status.is_kept_by(&body));
        let nothing = fields(json!({}));
        assert!(nothing.is_kept_by(&json!({"apiVersion": "v1", "kind": "X", "metadata": {"name": "a"}})));
        assert!(nothing.is_kept_by(&body), "an empty set owns nothing to remove");
    }

    fn entry(manager: &str, operation: &str, subresource: Option<&str>, fields: Value) -> ManagedFieldsEntry {
        ManagedFieldsEntry {
            manager: Some(manager.into()),
            operation: Some(operation.into()),
            api_version: Some("v1".into()),
            subresource: subresource.map(Into::into),
            fields_v1: Some(FieldsV1(fields)),
            ..Default::default()
        }
    }

    #[test]
    fn only_the_managers_applies_count() {
        let entries = [
            entry("kubectl", "Apply", None, json!({"f:metadata": {"f:labels": {"f:x": {}}}})),
            entry("op", "Update", None, json!({"f:spec": {"f:y": {}}})),
            entry("op", "Apply", None, json!({"f:spec": {"f:z": {}}})),
            entry("op", "Apply", Some("status"), json!({"f:status": {}})),
        ];
        let owned = Owned::of(&entries, "op", "v1");
        assert_eq!(owned.main, Some(fields(json!({"f:spec": {"f:z": {}}}))));
        assert_eq!(owned.status, Some(FieldSet::Fields([("status".to_string(), FieldSet::Leaf)].into())));
        let nobody = Owned::of(&entries, "nobody", "v1");
        assert!(nobody.main.is_none() && nobody.status.is_none());
    }

    /// An apply through another version records its field set in that version's terms: it is
    /// not ours for a write through this one (the write goes ahead and replaces it).
    #[test]
    fn only_the_managers_applies_through_the_version_written_count() {
        let mut old = entry("op", "Apply", None, json!({"f:spec": {"f:z": {}}}));
        old.api_version = Some("stunner.l7mp.io/v1alpha1".into());
        let mut status = entry("op", "Apply", Some("status"), json!({"f:status": {}}));
        status.api_version = Some("stunner.l7mp.io/v1".into());
        let entries = [old, status];
        let v1 = Owned::of(&entries, "op", "stunner.l7mp.io/v1");
        assert_eq!((v1.main, v1.status.is_some()), (None, true), "the v1alpha1 apply is not the v1 one's");
        let v1alpha1 = Owned::of(&entries, "op", "stunner.l7mp.io/v1alpha1");
        assert_eq!((v1alpha1.main.is_some(), v1alpha1.status), (true, None));
        let mut unversioned = entry("op", "Apply", None, json!({"f:spec": {}}));
        unversioned.api_version = None;
        assert_eq!(Owned::of(&[unversioned], "op", "v1"), Owned::default(), "no version: not known to be ours");
    }

    /// `{".": {}}` marks a map or list element as owned itself, not what is in it: a body
    /// that sets fields below it sets fields the manager does not own.
    #[test]
    fn a_node_of_only_the_element_itself_owns_none_of_its_children() {
        let member = fields(json!({"f:metadata": {"f:labels": {".": {}}}}));
        assert_eq!(member, FieldSet::Fields([("metadata".into(), fields(json!({"f:labels": {".": {}}})))].into()));
        assert!(member.is_kept_by(&json!({"metadata": {"labels": {"a": "1"}}})), "a label it does not own yet");
        assert!(member.is_kept_by(&json!({"metadata": {"labels": {}}})));
        let element = fields(json!({"f:spec": {"f:ports": {"k:{\"port\":1}": {".": {}}}}}));
        assert!(element.is_kept_by(&json!({"spec": {"ports": [{"port": 1, "name": "x"}]}})), "fields of the element");
        assert!(!element.is_kept_by(&json!({"spec": {"ports": [{"port": 2}]}})), "the element itself removed");
        // A node with `.` and fields owns those fields, as before; a node of nothing is a leaf.
        let both = fields(json!({"f:labels": {".": {}, "f:a": {}}}));
        assert!(both.is_kept_by(&json!({"labels": {"a": "1"}})));
        assert!(both.is_kept_by(&json!({"labels": {"a": "1", "b": "2"}})));
        assert!(!both.is_kept_by(&json!({"labels": {"b": "2"}})), "an owned label removed");
        assert!(fields(json!({"f:labels": {}})).is_kept_by(&json!({"labels": {"a": "1", "b": "2"}})));
    }

    #[test]
    fn what_is_not_a_field_set_is_refused() {
        assert_eq!(FieldSet::parse(&json!({"x:y": {}})), None);
        assert_eq!(FieldSet::parse(&json!({"k:not json": {}})), None);
        assert_eq!(FieldSet::parse(&json!({"f:a": {}, "v:1": {}})), None);
        assert_eq!(FieldSet::parse(&json!([])), None);
    }
}
