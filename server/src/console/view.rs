//! What the pages show, read out of the operator's state: the CDS store (configs and their
//! versions), the status board (conditions) and the client table (who holds which version).
//! Pure functions of one reading of each, so a page is consistent within itself.

use std::collections::BTreeMap;
use std::sync::Arc;
use stunner_gateway::cds::{Condition, ConfigId, ObjectStatus, StatusList};
use stunner_gateway::proto;
use stunner_gateway_cds::Snapshot;

/// One reading of the operator's state.
pub struct State {
    pub configs: Vec<Arc<Snapshot>>,
    pub statuses: StatusList,
    pub clients: proto::ListClientsResponse,
}

/// Whether a Gateway is programmed, as its `Programmed` condition says.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Programmed {
    Yes,
    No {
        reason: String,
        message: String,
    },
    /// No status (yet): the operator has not rendered it, or it is not ours.
    Unknown,
}

/// How many watch clients of a config hold its current version.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Holders {
    /// Clients that were sent this config at all.
    pub clients: usize,
    /// Of those, sent the current version.
    pub sent: usize,
    /// Of those, acknowledged the current version as applied (gRPC clients only).
    pub acked: usize,
}

/// A Gateway as the overview lists it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct GatewayRow {
    pub id: ConfigId,
    pub programmed: Programmed,
    pub listeners: usize,
    pub address: Option<String>,
    /// The version of its config in the store, if it has one.
    pub version: Option<String>,
    pub holders: Holders,
}

/// A watch client's state for one config.
pub struct Dataplane<'a> {
    pub client: &'a proto::Client,
    pub config: &'a proto::ClientConfig,
}

impl State {
    /// Every Gateway with a status or a config, sorted by namespace and name.
    pub fn gateways(&self) -> Vec<GatewayRow> {
        let mut ids: BTreeMap<ConfigId, (Option<&ObjectStatus>, Option<&Snapshot>)> = BTreeMap::new();
        for status in self.statuses.items.iter().filter(|s| s.kind == "Gateway") {
            ids.entry(ConfigId::new(&status.namespace, &status.name)).or_default().0 = Some(status);
        }
        for snapshot in &self.configs {
            ids.entry(snapshot.id.clone()).or_default().1 = Some(snapshot);
        }
        ids.into_iter().map(|(id, (status, snapshot))| self.row(id, status, snapshot)).collect()
    }

    fn row(&self, id: ConfigId, status: Option<&ObjectStatus>, snapshot: Option<&Snapshot>) -> GatewayRow {
        let version = snapshot.map(|s| s.version.to_string());
        let listeners = match (status, snapshot) {
            (Some(status), _) if !status.listeners().is_empty() => status.listeners().len(),
            (_, Some(snapshot)) => snapshot.config.listeners.len(),
            _ => 0,
        };
        GatewayRow {
            programmed: status.map_or(Programmed::Unknown, programmed),
            listeners,
            address: status.and_then(address),
            holders: version.as_deref().map(|v| self.holders(&id, v)).unwrap_or_default(),
            version,
            id,
        }
    }

    fn holders(&self, id: &ConfigId, version: &str) -> Holders {
        self.dataplanes(id).fold(Holders::default(), |mut h, d| {
            h.clients += 1;
            h.sent += usize::from(d.config.version_sent == version);
            h.acked += usize::from(d.config.version_acked == version);
            h
        })
    }

    /// Every watch client that was sent `id`.
    pub fn dataplanes<'a>(&'a self, id: &'a ConfigId) -> impl Iterator<Item = Dataplane<'a>> + 'a {
        self.clients.clients.iter().flat_map(move |client| {
            client
                .configs
                .iter()
                .filter(move |c| c.id.as_ref().is_some_and(|c| c.namespace == id.namespace && c.name == id.name))
                .map(move |config| Dataplane { client, config })
        })
    }

    pub fn config(&self, id: &ConfigId) -> Option<&Arc<Snapshot>> {
        self.configs.iter().find(|s| &s.id == id)
    }

    pub fn status(&self, kind: &str, id: &ConfigId) -> Option<&ObjectStatus> {
        self.statuses.items.iter().find(|s| s.kind == kind && s.namespace == id.namespace && s.name == id.name)
    }

    /// Every GatewayClass's status: a Gateway's status does not name its class, and an
    /// operator runs one or a few.
    pub fn classes(&self) -> impl Iterator<Item = &ObjectStatus> {
        self.statuses.items.iter().filter(|s| s.kind == "GatewayClass")
    }

    /// The routes whose status names the Gateway `id` as a parent.
    pub fn routes_of<'a>(&'a self, id: &'a ConfigId) -> impl Iterator<Item = &'a ObjectStatus> + 'a {
        self.statuses.items.iter().filter(move |s| {
            s.kind == "UDPRoute"
                && s.parents().iter().any(|p| {
                    p.parent_ref.name == id.name
                        && p.parent_ref.namespace.as_deref().unwrap_or(&s.namespace) == id.namespace
                })
        })
    }
}

/// The `Programmed` condition of a Gateway's status.
fn programmed(status: &ObjectStatus) -> Programmed {
    match status.conditions().into_iter().find(|c| c.condition_type == "Programmed") {
        Some(Condition { status, .. }) if status == "True" => Programmed::Yes,
        Some(Condition { reason, message, .. }) => Programmed::No { reason, message },
        None => Programmed::Unknown,
    }
}

/// The first of `status.addresses`.
fn address(status: &ObjectStatus) -> Option<String> {
    let first = status.status.get("addresses")?.as_array()?.first()?;
    first.get("value")?.as_str().map(str::to_owned)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn gateway_status(name: &str, programmed: &str, reason: &str) -> ObjectStatus {
        ObjectStatus {
            api_version: "gateway.networking.k8s.io/v1".into(),
            kind: "Gateway".into(),
            namespace: "ns".into(),
            name: name.into(),
            status: json!({
                "addresses": [{"type": "IPAddress", "value": "1.2.3.4"}],
                "conditions": [{"type": "Programmed", "status": programmed, "reason": reason, "message": "m"}],
                "listeners": [{"name": "udp"}, {"name": "tcp"}]
            }),
        }
    }

    fn client(id: &str, sent: &str, acked: &str) -> proto::Client {
        let (namespace, name) = id.split_once('/').unwrap();
        proto::Client {
            configs: vec![proto::ClientConfig {
                id: Some(proto::ConfigId { namespace: namespace.into(), name: name.into() }),
                version_sent: sent.into(),
                version_acked: acked.into(),
                ..Default::default()
            }],
            ..Default::default()
        }
    }

    fn snapshot(id: &str) -> Arc<Snapshot> {
        let mut config = stunner_gateway::config::StunnerConfig::default();
        config.admin.name = id.into();
        let store = stunner_gateway_cds::ConfigStore::new(Default::default());
        store.upsert(config);
        store.get(&ConfigId::parse(id).unwrap()).unwrap()
    }

    #[test]
    fn rows_join_statuses_configs_and_clients() {
        let config = snapshot("ns/a");
        let v = config.version.to_string();
        let state = State {
            configs: vec![config],
            statuses: StatusList {
                items: vec![gateway_status("a", "True", "Programmed"), gateway_status("b", "False", "NoClass")],
            },
            clients: proto::ListClientsResponse {
                clients: vec![client("ns/a", &v, &v), client("ns/a", &v, ""), client("ns/a", "old", "old")],
            },
        };
        let rows = state.gateways();
        assert_eq!(rows.len(), 2);
        assert_eq!(rows[0].programmed, Programmed::Yes);
        assert_eq!(rows[0].listeners, 2);
        assert_eq!(rows[0].address.as_deref(), Some("1.2.3.4"));
        assert_eq!(rows[0].holders, Holders { clients: 3, sent: 2, acked: 1 });
        assert_eq!(rows[1].programmed, Programmed::No { reason: "NoClass".into(), message: "m".into() });
        assert_eq!((rows[1].version.as_deref(), rows[1].holders), (None, Holders::default()));
    }

    #[test]
    fn routes_are_found_by_their_parents() {
        let route = |ns: &str, parent_ns: Option<&str>| ObjectStatus {
            kind: "UDPRoute".into(),
            namespace: ns.into(),
            name: "r".into(),
            status: json!({"parents": [{"parentRef": {"name": "gw", "namespace": parent_ns}}]}),
            ..Default::default()
        };
        let state = State {
            configs: vec![],
            statuses: StatusList { items: vec![route("ns", None), route("other", Some("ns")), route("other", None)] },
            clients: Default::default(),
        };
        let id = ConfigId::new("ns", "gw");
        let found: Vec<_> = state.routes_of(&id).map(|r| r.namespace.as_str()).collect();
        assert_eq!(found, ["ns", "other"]);
    }
}
