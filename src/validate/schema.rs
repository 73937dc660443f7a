//! A compiled OpenAPI v3 schema, the structural subset CRDs are written in, and the check of a
//! value against it with the API server's semantics: a keyword applies only to values of its
//! type (a `pattern` to strings, a `maximum` to numbers), `null` means absent, fields the
//! schema does not name are pruned (ignored), and `x-kubernetes-list-type: map|set` items must
//! be unique. CEL rules (`x-kubernetes-validations`) are not evaluated here (see [`super::rules`]).
//!
//! The walk only descends where the schema does, so its depth is the schema's (embedded, fixed
//! at build time), whatever the value holds.

use super::errors::{Errors, shown};
use regex::Regex;
use serde_json::Value;
use std::collections::{BTreeMap, BTreeSet};

/// A schema that could not be compiled (only embedded schemas are compiled: a test loads them all).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("schema at {at}: {reason}")]
pub struct SchemaError {
    pub at: String,
    pub reason: String,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Type {
    Object,
    Array,
    String,
    Integer,
    Number,
    Boolean,
}

impl Type {
    fn name(self) -> &'static str {
        match self {
            Type::Object => "object",
            Type::Array => "array",
            Type::String => "string",
            Type::Integer => "integer",
            Type::Number => "number",
            Type::Boolean => "boolean",
        }
    }

    fn matches(self, v: &Value) -> bool {
        match self {
            Type::Object => v.is_object(),
            Type::Array => v.is_array(),
            Type::String => v.is_string(),
            Type::Integer => v.is_i64() || v.is_u64(),
            Type::Number => v.is_number(),
            Type::Boolean => v.is_boolean(),
        }
    }
}

/// The formats the API server checks for the types they apply to (others, such as
/// `date-time` of status fields, are accepted as they are).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Format {
    Int32,
    Ipv4,
    Ipv6,
}

#[derive(Debug, Clone, Default, PartialEq, Eq)]
enum ListType {
    #[default]
    Atomic,
    Set,
    /// Items are unique by these keys.
    Map(Vec<String>),
}

#[derive(Debug, Default)]
pub struct Schema {
    ty: Option<Type>,
    default: Option<Value>,
    int_or_string: bool,
    properties: BTreeMap<String, Schema>,
    additional: Option<Box<Schema>>,
    items: Option<Box<Schema>>,
    required: Vec<String>,
    minimum: Option<(f64, bool)>,
    maximum: Option<(f64, bool)>,
    min_length: Option<usize>,
    max_length: Option<usize>,
    pattern: Option<Regex>,
    enumeration: Vec<Value>,
    min_items: Option<usize>,
    max_items: Option<usize>,
    min_properties: Option<usize>,
    max_properties: Option<usize>,
    list: ListType,
    format: Option<Format>,
    all_of: Vec<Schema>,
    any_of: Vec<Schema>,
    one_of: Vec<Schema>,
    not: Option<Box<Schema>>,
}

impl Schema {
    /// Compiles an `openAPIV3Schema` (or any node of one); `at` names it in errors.
    pub(crate) fn compile(v: &Value, at: &str) -> Result<Schema, SchemaError> {
        let err = |reason: String| SchemaError { at: at.to_string(), reason };
        let Some(o) = v.as_object() else { return Err(err("not a map".into())) };
        let size = |k: &str| o.get(k).and_then(Value::as_u64).and_then(|n| usize::try_from(n).ok());
        let bound = |k: &str, exclusive: &str| {
            o.get(k).and_then(Value::as_f64).map(|n| (n, o.get(exclusive).and_then(Value::as_bool).unwrap_or(false)))
        };
        let flag = |k: &str| o.get(k).and_then(Value::as_bool).unwrap_or(false);
        let list = |k: &str| -> Result<Vec<Schema>, SchemaError> {
            let items = o.get(k).and_then(Value::as_array).map(Vec::as_slice).unwrap_or_default();
            items.iter().enumerate().map(|(i, s)| Schema::compile(s, &format!("{at}.{k}[{i}]"))).collect()
        };
        let sub = |k: &str| -> Result<Option<Box<Schema>>, SchemaError> {
            match o.get(k) {
                Some(s @ Value::Object(_)) => Ok(Some(Box::new(Schema::compile(s, &format!("{at}.{k}"))?))),
                _ => Ok(None), // absent, or `additionalProperties: true|false`
            }
        };
        let ty = match o.get("type").and_then(Value::as_str) {
            None => None,
            Some("object") => Some(Type::Object),
            Some("array") => Some(Type::Array),
            Some("string") => Some(Type::String),
            Some("integer") => Some(Type::Integer),
            Some("number") => Some(Type::Number),
            Some("boolean") => Some(Type::Boolean),
            Some(other) => return Err(err(format!("unknown type {other:?}"))),
        };
        let pattern = match o.get("pattern").and_then(Value::as_str) {
            Some(p) => Some(Regex::new(p).map_err(|e| err(format!("pattern {p:?}: {e}")))?),
            None => None,
        };
        let mut properties = BTreeMap::new();
        for (name, s) in o.get("properties").and_then(Value::as_object).into_iter().flatten() {
            properties.insert(name.clone(), Schema::compile(s, &format!("{at}.{name}"))?);
        }
        let strings = |k: &str| -> Vec<String> {
            let items = o.get(k).and_then(Value::as_array).map(Vec::as_slice).unwrap_or_default();
            items.iter().filter_map(Value::as_str).map(str::to_owned).collect()
        };
        let list_type = match o.get("x-kubernetes-list-type").and_then(Value::as_str) {
            Some("set") => ListType::Set,
            Some("map") => ListType::Map(strings("x-kubernetes-list-map-keys")),
            _ => ListType::Atomic,
        };
        let format = match o.get("format").and_then(Value::as_str) {
            Some("int32") => Some(Format::Int32),
            Some("ipv4") => Some(Format::Ipv4),
            Some("ipv6") => Some(Format::Ipv6),
            _ => None,
        };
        Ok(Schema {
            ty,
            default: o.get("default").cloned(),
            int_or_string: flag("x-kubernetes-int-or-string"),
            properties,
            additional: sub("additionalProperties")?,
            items: sub("items")?,
            required: strings("required"),
            minimum: bound("minimum", "exclusiveMinimum"),
            maximum: bound("maximum", "exclusiveMaximum"),
            min_length: size("minLength"),
            max_length: size("maxLength"),
            pattern,
            enumeration: o.get("enum").and_then(Value::as_array).cloned().unwrap_or_default(),
            min_items: size("minItems"),
            max_items: size("maxItems"),
            min_properties: size("minProperties"),
            max_properties: size("maxProperties"),
            list: list_type,
            format,
            all_of: list("allOf")?,
            any_of: list("anyOf")?,
            one_of: list("oneOf")?,
            not: sub("not")?,
        })
    }

    /// Drops a property: the API server ignores `status` on create, so manifests copied from
    /// `kubectl get -o yaml` are not judged by it.
    pub(crate) fn without_property(mut self, name: &str) -> Schema {
        self.properties.remove(name);
        self
    }

    /// Fills in the schema's defaults where `v` lacks a field (or holds `null`), as the API
    /// server does before it validates: some rules (`oneOf` on a defaulted `type`) depend on them.
    pub(crate) fn apply_defaults(&self, v: &mut Value) {
        match v {
            Value::Object(o) => {
                for (name, schema) in &self.properties {
                    match o.get_mut(name) {
                        Some(child) if !child.is_null() => schema.apply_defaults(child),
                        _ => {
                            if let Some(default) = &schema.default {
                                let mut default = default.clone();
                                schema.apply_defaults(&mut default);
                                o.insert(name.clone(), default);
                            }
                        }
                    }
                }
                if let Some(schema) = &self.additional {
                    let extra = o.iter_mut().filter(|(k, _)| !self.properties.contains_key(*k));
                    extra.for_each(|(_, child)| schema.apply_defaults(child));
                }
            }
            Value::Array(items) => {
                if let Some(schema) = &self.items {
                    items.iter_mut().for_each(|item| schema.apply_defaults(item));
                }
            }
            _ => {}
        }
    }

    /// Checks `v` (at field path `path`, e.g. `spec.listeners[0].port`) and records what is wrong.
    pub(crate) fn check(&self, v: &Value, path: &str, errs: &mut Errors) {
        if v.is_null() {
            return; // null is absent: the parent's `required` decides
        }
        if self.int_or_string {
            if !(v.is_string() || v.is_i64() || v.is_u64()) {
                errs.push(path, format!("Invalid value: {}: must be an integer or a string", errs.quote(path, v)));
                return;
            }
        } else if let Some(ty) = self.ty
            && !ty.matches(v)
        {
            errs.push(path, format!("Invalid value: {}: must be of type {}", errs.quote(path, v), ty.name()));
            return;
        }
        self.check_enum(v, path, errs);
        match v {
            Value::String(s) => self.check_string(s, v, path, errs),
            Value::Number(_) => self.check_number(v, path, errs),
            Value::Array(items) => self.check_array(items, path, errs),
            Value::Object(o) => self.check_object(o, path, errs),
            _ => {}
        }
        self.check_combinators(v, path, errs);
    }

    fn check_enum(&self, v: &Value, path: &str, errs: &mut Errors) {
        if self.enumeration.is_empty() || self.enumeration.contains(v) {
            return;
        }
        let supported: Vec<String> = self.enumeration.iter().map(shown).collect();
        errs.push(
            path,
            format!("Unsupported value: {}: supported values: {}", errs.quote(path, v), supported.join(", ")),
        );
    }

    fn check_string(&self, s: &str, v: &Value, path: &str, errs: &mut Errors) {
        let len = s.chars().count();
        if let Some(max) = self.max_length
            && len > max
        {
            // Too long: the pattern is not worth matching (nor its message worth reading).
            return errs.push(path, format!("Too long: may not be more than {max} characters (has {len})"));
        }
        if let Some(min) = self.min_length
            && len < min
        {
            errs.push(path, format!("Invalid value: {}: must be at least {min} characters long", errs.quote(path, v)));
        }
        if let Some(p) = &self.pattern
            && !p.is_match(s)
        {
            errs.push(path, format!("Invalid value: {}: must match '{}'", errs.quote(path, v), p.as_str()));
        }
        let valid_ip = match self.format {
            Some(Format::Ipv4) => s.parse::<std::net::Ipv4Addr>().is_ok(),
            Some(Format::Ipv6) => s.parse::<std::net::Ipv6Addr>().is_ok(),
            _ => true,
        };
        if !valid_ip {
            errs.push(path, format!("Invalid value: {}: must be a valid IP address", errs.quote(path, v)));
        }
    }

    fn check_number(&self, v: &Value, path: &str, errs: &mut Errors) {
        let Some(n) = v.as_f64() else { return };
        if let Some((min, exclusive)) = self.minimum
            && (n < min || (exclusive && n == min))
        {
            let than = if exclusive { "greater than" } else { "greater than or equal to" };
            errs.push(path, format!("Invalid value: {}: must be {than} {min}", errs.quote(path, v)));
        }
        if let Some((max, exclusive)) = self.maximum
            && (n > max || (exclusive && n == max))
        {
            let than = if exclusive { "less than" } else { "less than or equal to" };
            errs.push(path, format!("Invalid value: {}: must be {than} {max}", errs.quote(path, v)));
        }
        if self.format == Some(Format::Int32) && v.as_i64().is_none_or(|i| i32::try_from(i).is_err()) {
            errs.push(path, format!("Invalid value: {}: must be a 32-bit integer", errs.quote(path, v)));
        }
    }

    fn check_array(&self, items: &[Value], path: &str, errs: &mut Errors) {
        if let Some(max) = self.max_items
            && items.len() > max
        {
            errs.push(path, format!("Too many: {}: must have at most {max} items", items.len()));
        }
        if let Some(min) = self.min_items
            && items.len() < min
        {
            errs.push(path, format!("Invalid value: {} items: must have at least {min} items", items.len()));
        }
        if let Some(schema) = &self.items {
            for (i, item) in items.iter().enumerate() {
                schema.check(item, &format!("{path}[{i}]"), errs);
            }
        }
        let identity = |item: &Value| match &self.list {
            ListType::Atomic => None,
            ListType::Set => Some(item.clone()),
            ListType::Map(keys) => Some(Value::Object(
                keys.iter().map(|k| (k.clone(), item.get(k).cloned().unwrap_or(Value::Null))).collect(),
            )),
        };
        let mut seen = BTreeSet::new();
        for (i, item) in items.iter().enumerate() {
            if let Some(id) = identity(item)
                && !seen.insert(id.to_string())
            {
                let at = format!("{path}[{i}]");
                let message = format!("Duplicate value: {}", errs.quote(&at, &id));
                errs.push(&at, message);
            }
        }
    }

    fn check_object(&self, o: &serde_json::Map<String, Value>, path: &str, errs: &mut Errors) {
        let child = |name: &str| if path.is_empty() { name.to_string() } else { format!("{path}.{name}") };
        for name in &self.required {
            if o.get(name).is_none_or(Value::is_null) {
                errs.push(&child(name), "Required value".into());
            }
        }
        for (name, value) in o {
            match (self.properties.get(name), self.additional.as_deref()) {
                (Some(schema), _) | (None, Some(schema)) => schema.check(value, &child(name), errs),
                (None, None) => {} // pruned by the API server
            }
        }
        if let Some(max) = self.max_properties
            && o.len() > max
        {
            errs.push(path, format!("Too many: {}: must have at most {max} properties", o.len()));
        }
        if let Some(min) = self.min_properties
            && o.len() < min
        {
            errs.push(path, format!("Invalid value: {} properties: must have at least {min} properties", o.len()));
        }
    }

    fn check_combinators(&self, v: &Value, path: &str, errs: &mut Errors) {
        for s in &self.all_of {
            s.check(v, path, errs);
        }
        let passes = |s: &Schema| {
            let mut scratch = Errors::default();
            s.check(v, path, &mut scratch);
            scratch.is_empty()
        };
        if !self.any_of.is_empty() && !self.any_of.iter().any(passes) {
            errs.push(
                path,
                format!("Invalid value: {}: must validate at least one schema (anyOf)", errs.quote(path, v)),
            );
        }
        if !self.one_of.is_empty() && self.one_of.iter().filter(|s| passes(s)).count() != 1 {
            errs.push(
                path,
                format!("Invalid value: {}: must validate one and only one schema (oneOf)", errs.quote(path, v)),
            );
        }
        if let Some(not) = &self.not
            && passes(not)
        {
            errs.push(path, format!("Invalid value: {}: must not validate the schema (not)", errs.quote(path, v)));
        }
    }
}
