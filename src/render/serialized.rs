//! A rendered status, serialized once for both of its readers: the daemon's status board keeps
//! it (as text) for people, and in a cluster the writer applies it to the API server.

use crate::index::ObjRef;
use serde::Serialize;
use serde_json::Value;

/// One object's status as JSON, with the object it belongs to.
#[derive(Debug, Clone, PartialEq)]
pub struct SerializedStatus {
    pub object: ObjRef,
    pub status: Value,
}

impl SerializedStatus {
    /// Serializes `status`, the status of `object`. (A status has no map with keys that are
    /// not strings, the one way serializing to a `Value` fails; such a status would be `null`.)
    pub fn new(object: ObjRef, status: &impl Serialize) -> Self {
        SerializedStatus { object, status: serde_json::to_value(status).unwrap_or_default() }
    }
}
