//! The statuses the operator computed, kept for people to read: in standalone mode there is
//! no API server to write them to, so they are logged and served at `GET /api/v1/statuses`
//! (on the CDS port; `stunnerctl status` reads them there).

use axum::Router;
use axum::extract::State;
use axum::http::header;
use axum::response::IntoResponse;
use axum::routing::get;
use std::collections::BTreeMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, RwLock};
use stunner_gateway::cds::{ObjectStatus, StatusList};
use tokio::sync::watch;

/// API group, kind, namespace and name: a `stunner.l7mp.io` and a `gateway.networking.k8s.io`
/// UDPRoute of the same name are two objects.
type Key = (String, String, String, String);

/// The group of an `apiVersion` (`""` for the core group's bare `v1`).
fn group_of(api_version: &str) -> &str {
    api_version.rsplit_once('/').map_or("", |(group, _)| group)
}

fn key(api_version: &str, kind: &str, namespace: &str, name: &str) -> Key {
    (group_of(api_version).into(), kind.into(), namespace.into(), name.into())
}

/// Latest status per object, and the objects held at their last valid version.
pub struct StatusBoard {
    statuses: RwLock<BTreeMap<Key, Stored>>,
    /// Why an object is held (`invalid edit at FILE:LINE`), shown as its status's `held`, with
    /// its `apiVersion`: a held object may have no status of its own (a GatewayConfig).
    held: RwLock<BTreeMap<Key, (String, String)>>,
    /// Counts changes and announces each, for the console's live updates.
    generation: AtomicU64,
    changed: watch::Sender<()>,
}

impl Default for StatusBoard {
    fn default() -> Self {
        StatusBoard {
            statuses: RwLock::default(),
            held: RwLock::default(),
            generation: AtomicU64::new(0),
            changed: watch::Sender::new(()),
        }
    }
}

/// An object's status as JSON text, parsed again only when someone reads the board: as a
/// `Value` tree (a map node and a `String` per field) the statuses of 1,000 Gateways and
/// their routes held ~10 MiB of the operator's heap, for a page people rarely fetch. The text
/// of a `Value` is canonical (its maps are sorted), so equal statuses have equal texts.
#[derive(PartialEq)]
struct Stored {
    api_version: Box<str>,
    status: Box<str>,
}

impl StatusBoard {
    /// Records `status`; returns whether it differs from what was there (worth logging).
    pub fn set(&self, status: ObjectStatus) -> bool {
        let key = key(&status.api_version, &status.kind, &status.namespace, &status.name);
        let stored = Stored { api_version: status.api_version.into(), status: status.status.to_string().into() };
        let mut map = self.statuses.write().expect("status lock");
        if map.get(&key) == Some(&stored) {
            return false;
        }
        map.insert(key, stored);
        drop(map);
        self.announce();
        true
    }

    fn announce(&self) {
        self.generation.fetch_add(1, Ordering::Relaxed);
        self.changed.send_replace(());
    }

    /// How many times the board changed: equal numbers, equal boards.
    pub fn generation(&self) -> u64 {
        self.generation.load(Ordering::Relaxed)
    }

    /// A receiver that changes whenever a status does.
    pub fn subscribe(&self) -> watch::Receiver<()> {
        self.changed.subscribe()
    }

    /// Forgets the status of an object that is gone.
    pub fn remove(&self, api_version: &str, kind: &str, namespace: &str, name: &str) {
        let removed = self.statuses.write().expect("status lock").remove(&key(api_version, kind, namespace, name));
        if removed.is_some() {
            self.announce();
        }
    }

    /// Replaces the objects held at their last valid version: (`apiVersion`, kind, namespace,
    /// name, why).
    pub fn set_held(&self, held: Vec<(String, String, String, String, String)>) {
        let held = held
            .into_iter()
            .map(|(api_version, kind, namespace, name, why)| {
                (key(&api_version, &kind, &namespace, &name), (api_version, why))
            })
            .collect();
        let mut current = self.held.write().expect("held lock");
        if *current != held {
            *current = held;
            drop(current);
            self.announce();
        }
    }

    pub fn list(&self) -> StatusList {
        let map = self.statuses.read().expect("status lock");
        let held = self.held.read().expect("held lock");
        let mut items: BTreeMap<&Key, ObjectStatus> = map
            .iter()
            .map(|(key @ (_, kind, namespace, name), stored)| {
                let status = serde_json::from_str(&stored.status).expect("a stored status is JSON");
                let item = ObjectStatus {
                    api_version: stored.api_version.to_string(),
                    kind: kind.clone(),
                    namespace: namespace.clone(),
                    name: name.clone(),
                    status,
                };
                (key, item)
            })
            .collect();
        for (key @ (_, kind, namespace, name), (api_version, why)) in held.iter() {
            let item = items.entry(key).or_insert_with(|| ObjectStatus {
                api_version: api_version.clone(),
                kind: kind.clone(),
                namespace: namespace.clone(),
                name: name.clone(),
                status: serde_json::json!({}),
            });
            if let Some(status) = item.status.as_object_mut() {
                status.insert("held".into(), why.clone().into());
            }
        }
        StatusList { items: items.into_values().collect() }
    }

    pub fn router(self: Arc<Self>) -> Router {
        Router::new().route("/api/v1/statuses", get(serve_statuses)).with_state(self)
    }
}

async fn serve_statuses(State(board): State<Arc<StatusBoard>>) -> impl IntoResponse {
    let body = stunner_gateway::config::json::to_vec_line(&board.list());
    ([(header::CONTENT_TYPE, "application/json")], body)
}

#[cfg(test)]
mod tests {
    use super::*;

    const GATEWAY_API: &str = "gateway.networking.k8s.io/v1";

    fn status(kind: &str, name: &str, ready: bool) -> ObjectStatus {
        ObjectStatus {
            api_version: GATEWAY_API.into(),
            kind: kind.into(),
            namespace: "ns".into(),
            name: name.into(),
            status: serde_json::json!({ "ready": ready }),
        }
    }

    #[test]
    fn keeps_the_latest_per_object_sorted() {
        let b = StatusBoard::default();
        assert!(b.set(status("Gateway", "b", false)));
        assert!(b.set(status("Gateway", "a", false)));
        assert!(b.set(status("GatewayClass", "a", true)));
        assert!(!b.set(status("Gateway", "a", false)), "unchanged");
        assert!(b.set(status("Gateway", "a", true)));
        let names: Vec<_> = b.list().items.iter().map(|s| format!("{}/{}", s.kind, s.name)).collect();
        assert_eq!(names, ["Gateway/a", "Gateway/b", "GatewayClass/a"]);
        let before = b.generation();
        b.remove(GATEWAY_API, "Gateway", "ns", "b");
        assert_eq!(b.list().items.len(), 2);
        assert_eq!(b.generation(), before + 1, "a removal is a change");
        b.remove(GATEWAY_API, "Gateway", "ns", "b");
        assert_eq!(b.generation(), before + 1, "removing nothing is none");
    }

    #[test]
    fn objects_of_the_same_kind_name_in_two_groups_are_kept_apart() {
        let b = StatusBoard::default();
        let stunner = ObjectStatus { api_version: "stunner.l7mp.io/v1".into(), ..status("UDPRoute", "r", true) };
        let gateway_api =
            ObjectStatus { api_version: "gateway.networking.k8s.io/v1alpha2".into(), ..status("UDPRoute", "r", false) };
        assert!(b.set(stunner.clone()));
        assert!(b.set(gateway_api.clone()));
        assert_eq!(b.list().items, [gateway_api.clone(), stunner.clone()]);
        // Another version of the same group is the same object.
        b.remove("stunner.l7mp.io/v1beta1", "UDPRoute", "ns", "r");
        assert_eq!(b.list().items, [gateway_api]);
    }

    #[test]
    fn held_objects_show_in_their_status_or_alone() {
        let b = StatusBoard::default();
        assert!(b.set(status("Gateway", "a", true)));
        let note = |kind: &str, name: &str| {
            (
                GATEWAY_API.to_string(),
                kind.to_string(),
                "ns".to_string(),
                name.to_string(),
                format!("invalid edit at {name}.yaml:3"),
            )
        };
        b.set_held(vec![note("Gateway", "a"), note("GatewayConfig", "c")]);
        let items = b.list().items;
        assert_eq!(items.len(), 2);
        assert_eq!(items[0].status, serde_json::json!({"ready": true, "held": "invalid edit at a.yaml:3"}));
        assert_eq!(
            (items[1].kind.as_str(), &items[1].status),
            ("GatewayConfig", &serde_json::json!({"held": "invalid edit at c.yaml:3"}))
        );
        b.set_held(Vec::new());
        assert_eq!(b.list().items, [status("Gateway", "a", true)]);
    }
}
