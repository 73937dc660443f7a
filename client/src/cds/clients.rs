//! The server's client table: who is connected, over which transport, from which node, and
//! which version of each config it was sent and acknowledged. REST `GET /api/v1/clients` and
//! gRPC `ListClients` serve the same rows.

use serde::{Deserialize, Deserializer, Serialize, Serializer};
use stunner_gateway::cds::ConfigId;

/// `GET /api/v1/clients`.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct ClientList {
    #[serde(default)]
    pub clients: Vec<ClientInfo>,
}

/// One connected watch client.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct ClientInfo {
    /// `websocket` or `grpc`.
    pub transport: String,
    pub remote_address: String,
    pub node: String,
    /// `*` (all), `<namespace>` or `<namespace>/<name>`.
    pub scope: String,
    pub client_name: String,
    /// RFC 3339, UTC.
    pub connected_since: String,
    pub configs: Vec<ClientConfigState>,
}

/// Where one client stands with one config. Versions are opaque: equal means same content.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct ClientConfigState {
    #[serde(with = "config_id")]
    pub id: ConfigId,
    pub version_sent: String,
    /// Empty until the client acknowledges; WebSocket clients never do.
    pub version_acked: String,
    pub version_rejected: String,
    /// Why `version_rejected` was rejected.
    pub error: String,
}

impl Default for ClientConfigState {
    fn default() -> Self {
        ClientConfigState {
            id: ConfigId::new("", ""),
            version_sent: String::new(),
            version_acked: String::new(),
            version_rejected: String::new(),
            error: String::new(),
        }
    }
}

/// `{"namespace":"..","name":".."}`, as the table carries config ids.
mod config_id {
    use super::*;

    #[derive(Serialize, Deserialize, Default)]
    #[serde(default)]
    struct Wire {
        namespace: String,
        name: String,
    }

    pub fn serialize<S: Serializer>(id: &ConfigId, s: S) -> Result<S::Ok, S::Error> {
        Wire { namespace: id.namespace.clone(), name: id.name.clone() }.serialize(s)
    }

    pub fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<ConfigId, D::Error> {
        let w = Wire::deserialize(d)?;
        Ok(ConfigId::new(w.namespace, w.name))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn decodes_the_rest_body() {
        let body = r#"{"clients":[{"transport":"grpc","remoteAddress":"127.0.0.1:5","node":"n1","scope":"ns/gw",
            "clientName":"pod-1","connectedSince":"2026-11-29T22:00:00Z","configs":[{"id":{"namespace":"ns","name":"gw"},
            "versionSent":"00000000000000ab","versionAcked":"00000000000000ab","versionRejected":"","error":""}],"extra":1}]}"#;
        let list: ClientList = serde_json::from_str(body).unwrap();
        let c = &list.clients[0];
        assert_eq!((c.transport.as_str(), c.client_name.as_str()), ("grpc", "pod-1"));
        assert_eq!(c.configs[0].id, ConfigId::new("ns", "gw"));
        assert_eq!(c.configs[0].version_acked, "00000000000000ab");
        let again: ClientList = serde_json::from_str(&serde_json::to_string(&list).unwrap()).unwrap();
        assert_eq!(again, list);
        assert_eq!(serde_json::from_str::<ClientList>("{}").unwrap(), ClientList::default());
    }
}
