//! `GET /api/v1/statuses`: the Kubernetes statuses the operator computed for its objects (in
//! standalone mode nothing else holds them).
//!
//! The `status` of each object is kept as raw JSON, so that `-o json|yaml` shows everything the
//! operator wrote; [`ObjectStatus::conditions`] and friends read just what a summary needs, and
//! tolerate missing fields (the endpoint is new and its objects may grow).

use serde::{Deserialize, Serialize};

/// The body: every object's status, sorted by kind, namespace and name.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct StatusList {
    #[serde(default)]
    pub items: Vec<ObjectStatus>,
}

/// One object (GatewayClass, Gateway or UDPRoute) and its status.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(default, rename_all = "camelCase")]
pub struct ObjectStatus {
    pub api_version: String,
    pub kind: String,
    /// Empty for cluster-scoped objects (GatewayClass).
    #[serde(skip_serializing_if = "String::is_empty")]
    pub namespace: String,
    pub name: String,
    pub status: serde_json::Value,
}

/// A Kubernetes `metav1.Condition`, reduced to what people read.
#[derive(Debug, Clone, Default, PartialEq, Eq, Deserialize)]
#[serde(default)]
pub struct Condition {
    #[serde(rename = "type")]
    pub condition_type: String,
    pub status: String,
    pub reason: String,
    pub message: String,
}

/// A Gateway listener's status.
#[derive(Debug, Clone, Default, PartialEq, Eq, Deserialize)]
#[serde(default)]
pub struct ListenerConditions {
    pub name: String,
    pub conditions: Vec<Condition>,
}

/// A route's status for one of its parents.
#[derive(Debug, Clone, Default, PartialEq, Eq, Deserialize)]
#[serde(default, rename_all = "camelCase")]
pub struct ParentConditions {
    pub parent_ref: ParentRef,
    pub controller_name: String,
    pub conditions: Vec<Condition>,
}

#[derive(Debug, Clone, Default, PartialEq, Eq, Deserialize)]
#[serde(default, rename_all = "camelCase")]
pub struct ParentRef {
    /// Absent means the route's own namespace.
    pub namespace: Option<String>,
    pub name: String,
    pub section_name: Option<String>,
}

impl ObjectStatus {
    /// `namespace/name`, or just `name` for cluster-scoped objects.
    pub fn key(&self) -> String {
        if self.namespace.is_empty() { self.name.clone() } else { format!("{}/{}", self.namespace, self.name) }
    }

    /// `status.held`: why the operator serves an older version of the object than its
    /// manifest holds (`invalid edit at FILE:LINE`; standalone mode).
    pub fn held(&self) -> Option<&str> {
        self.status.get("held").and_then(serde_json::Value::as_str)
    }

    /// `status.conditions`.
    pub fn conditions(&self) -> Vec<Condition> {
        self.field("conditions")
    }

    /// `status.listeners` (Gateways).
    pub fn listeners(&self) -> Vec<ListenerConditions> {
        self.field("listeners")
    }

    /// `status.parents` (routes).
    pub fn parents(&self) -> Vec<ParentConditions> {
        self.field("parents")
    }

    /// A list under `status`, empty when absent or of another shape.
    fn field<T: serde::de::DeserializeOwned>(&self, key: &str) -> Vec<T> {
        self.status.get(key).and_then(|v| serde_json::from_value(v.clone()).ok()).unwrap_or_default()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_conditions_listeners_and_parents() {
        let body = r#"{"items":[
          {"apiVersion":"gateway.networking.k8s.io/v1","kind":"Gateway","namespace":"ns","name":"gw",
           "status":{"conditions":[{"type":"Accepted","status":"True","reason":"Accepted","message":"ok","lastTransitionTime":"x"}],
                     "listeners":[{"name":"udp","attachedRoutes":1,"conditions":[{"type":"Programmed","status":"True","reason":"Programmed"}]}]}},
          {"apiVersion":"stunner.l7mp.io/v1","kind":"UDPRoute","namespace":"ns","name":"r",
           "status":{"parents":[{"parentRef":{"name":"gw","sectionName":"udp"},"controllerName":"c","conditions":[]}]}},
          {"apiVersion":"gateway.networking.k8s.io/v1","kind":"GatewayClass","name":"gc","status":{"conditions":"bogus"}}
        ]}"#;
        let list: StatusList = serde_json::from_str(body).unwrap();
        let [gw, route, class] = &list.items[..] else { panic!("three items") };
        assert_eq!(gw.key(), "ns/gw");
        assert_eq!(gw.conditions()[0].condition_type, "Accepted");
        assert_eq!(gw.listeners()[0].conditions[0].status, "True");
        assert_eq!(route.parents()[0].parent_ref.section_name.as_deref(), Some("udp"));
        assert_eq!(class.key(), "gc");
        assert!(class.conditions().is_empty(), "a malformed list reads as empty");
        let back = serde_json::to_value(class).unwrap();
        assert!(back.get("namespace").is_none(), "cluster-scoped objects carry no namespace");
    }
}
