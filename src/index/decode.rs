//! Decoding one object into a [`Resource`] by `apiVersion` and `kind` (the kind table names
//! the type of each); files of them are loaded by [`crate::manifest`].

use super::error::DecodeError;
use super::kinds::{Kind, Resource};
use k8s_openapi::ByteString;
use k8s_openapi::api::core::v1::Secret;
use serde_json::Value;

/// What the API server does on write and a manifest reader must do itself: `stringData` is
/// folded into `data`.
fn fold_string_data(mut s: Box<Secret>) -> Box<Secret> {
    for (k, v) in s.string_data.take().unwrap_or_default() {
        s.data.get_or_insert_default().insert(k, ByteString(v.into_bytes()));
    }
    s
}

/// Decodes one object.
pub fn decode_value(v: Value) -> Result<Resource, DecodeError> {
    let field = |name: &str| v.get(name).and_then(Value::as_str).map(str::to_owned);
    let (Some(api_version), Some(kind)) = (field("apiVersion"), field("kind")) else {
        return Err(DecodeError::NotAnObject("missing apiVersion or kind".into()));
    };
    let (group, version) = api_version.rsplit_once('/').unwrap_or(("", &api_version));
    let Some(k) = Kind::named(group, version, &kind) else {
        return Err(DecodeError::UnknownKind { api_version, kind });
    };
    Ok(match k.decode(v)? {
        Resource::Secret(s) => Resource::Secret(fold_string_data(s)),
        r => r,
    })
}
