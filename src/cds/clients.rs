//! `GET /api/v1/clients` (not in upstream): a server's client table, as the proto3 JSON mapping
//! of `ListClientsResponse` (camelCase keys) except that every key is always written. The
//! server serves it, and the client gets the same rows over either transport, so both use
//! these types and this one conversion from the gRPC message.
//!
//! Decoding defaults missing keys and ignores unknown ones, so that a newer server's rows
//! still read.

use super::id::ConfigId;
use crate::proto;
use serde::{Deserialize, Deserializer, Serialize, Serializer};

/// The body.
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
    /// Whom the server authorized the client as (`pod:<ns>/<name>`, `loopback`, ...).
    pub identity: String,
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
    /// When `version_sent` was sent, `version_acked` acknowledged and `version_rejected`
    /// rejected: RFC 3339, UTC; empty when never.
    pub sent_at: String,
    pub acked_at: String,
    pub rejected_at: String,
}

impl Default for ClientConfigState {
    fn default() -> Self {
        ClientConfigState {
            id: ConfigId::new("", ""),
            version_sent: String::new(),
            version_acked: String::new(),
            version_rejected: String::new(),
            error: String::new(),
            sent_at: String::new(),
            acked_at: String::new(),
            rejected_at: String::new(),
        }
    }
}

impl From<proto::ListClientsResponse> for ClientList {
    fn from(list: proto::ListClientsResponse) -> Self {
        ClientList { clients: list.clients.into_iter().map(ClientInfo::from).collect() }
    }
}

impl From<proto::Client> for ClientInfo {
    fn from(c: proto::Client) -> Self {
        ClientInfo {
            transport: c.transport,
            remote_address: c.remote_address,
            node: c.node,
            scope: c.scope,
            client_name: c.client_name,
            identity: c.identity,
            connected_since: c.connected_since,
            configs: c.configs.into_iter().map(ClientConfigState::from).collect(),
        }
    }
}

impl From<proto::ClientConfig> for ClientConfigState {
    /// A row without an id (never sent, but proto3 allows it) gets the empty id, as the proto
    /// JSON mapping of the default message would.
    fn from(c: proto::ClientConfig) -> Self {
        let id = c.id.unwrap_or_default();
        ClientConfigState {
            id: ConfigId::new(id.namespace, id.name),
            version_sent: c.version_sent,
            version_acked: c.version_acked,
            version_rejected: c.version_rejected,
            error: c.error,
            sent_at: c.sent_at,
            acked_at: c.acked_at,
            rejected_at: c.rejected_at,
        }
    }
}

/// `{"namespace":"..","name":".."}`: the proto `ConfigId` message, where elsewhere in the API
/// an id is a `namespace/name` string.
mod config_id {
    use super::*;

    #[derive(Serialize, Deserialize, Default)]
    #[serde(default)]
    struct Wire {
        namespace: String,
        name: String,
    }

    pub(crate) fn serialize<S: Serializer>(id: &ConfigId, s: S) -> Result<S::Ok, S::Error> {
        Wire { namespace: id.namespace.clone(), name: id.name.clone() }.serialize(s)
    }

    pub(crate) fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<ConfigId, D::Error> {
        let w = Wire::deserialize(d)?;
        Ok(ConfigId::new(w.namespace, w.name))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::json;

    /// What the server has always written: clients tools already parse it.
    #[test]
    fn the_wire_json_is_pinned() {
        let list = ClientList::from(proto::ListClientsResponse {
            clients: vec![
                proto::Client {
                    transport: "grpc".into(),
                    remote_address: "127.0.0.1:5".into(),
                    node: "n1".into(),
                    scope: "ns/gw".into(),
                    client_name: "pod-1".into(),
                    identity: "pod:ns/pod-1".into(),
                    connected_since: "2026-11-29T22:00:00Z".into(),
                    configs: vec![
                        proto::ClientConfig {
                            id: Some(proto::ConfigId { namespace: "ns".into(), name: "gw".into() }),
                            version_sent: "00000000000000bb".into(),
                            version_acked: "00000000000000aa".into(),
                            version_rejected: "00000000000000bb".into(),
                            error: "bad listener".into(),
                            sent_at: "2026-11-29T22:00:02Z".into(),
                            acked_at: "2026-11-29T22:00:01Z".into(),
                            rejected_at: "2026-11-29T22:00:03Z".into(),
                        },
                        proto::ClientConfig { id: None, ..Default::default() },
                    ],
                },
                proto::Client { transport: "websocket".into(), scope: "*".into(), ..Default::default() },
            ],
        });
        let want = concat!(
            r#"{"clients":["#,
            r#"{"transport":"grpc","remoteAddress":"127.0.0.1:5","node":"n1","scope":"ns/gw","clientName":"pod-1","#,
            r#""identity":"pod:ns/pod-1","connectedSince":"2026-11-29T22:00:00Z","configs":["#,
            r#"{"id":{"namespace":"ns","name":"gw"},"versionSent":"00000000000000bb","#,
            r#""versionAcked":"00000000000000aa","versionRejected":"00000000000000bb","error":"bad listener","#,
            r#""sentAt":"2026-11-29T22:00:02Z","ackedAt":"2026-11-29T22:00:01Z","rejectedAt":"2026-11-29T22:00:03Z"},"#,
            r#"{"id":{"namespace":"","name":""},"versionSent":"","versionAcked":"","versionRejected":"","error":"","#,
            r#""sentAt":"","ackedAt":"","rejectedAt":""}]},"#,
            r#"{"transport":"websocket","remoteAddress":"","node":"","scope":"*","clientName":"","#,
            r#""identity":"","connectedSince":"","configs":[]}"#,
            r#"]}"#,
        );
        assert_eq!(String::from_utf8(json::to_vec(&list)).unwrap(), want);
        assert_eq!(serde_json::from_str::<ClientList>(want).unwrap(), list);
        assert_eq!(json::to_vec(&ClientList::default()), br#"{"clients":[]}"#);
    }

    #[test]
    fn decoding_defaults_missing_keys_and_ignores_unknown_ones() {
        let body =
            r#"{"clients":[{"transport":"grpc","configs":[{"id":{"name":"gw"},"versionSent":"ab"}],"extra":1}]}"#;
        let list: ClientList = serde_json::from_str(body).unwrap();
        let c = &list.clients[0];
        assert_eq!((c.transport.as_str(), c.remote_address.as_str()), ("grpc", ""));
        assert_eq!(c.configs[0].id, ConfigId::new("", "gw"));
        assert_eq!((c.configs[0].version_sent.as_str(), c.configs[0].version_acked.as_str()), ("ab", ""));
        assert_eq!(serde_json::from_str::<ClientList>("{}").unwrap(), ClientList::default());
    }
}
