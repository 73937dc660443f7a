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
use stunner_gateway::index::{Held, ObjRef, ObjectKey};
use stunner_gateway::render::SerializedStatus;
use tokio::sync::watch;

/// Latest status per object, and the objects held at their last valid version. Keyed by the
/// index's kinds: a `stunner.l7mp.io` and a `gateway.networking.k8s.io` UDPRoute of the same
/// name are two objects, and any version of a kind is the same.
pub struct StatusBoard {
    statuses: RwLock<BTreeMap<ObjRef, Stored>>,
    /// Why an object is held (`invalid edit at FILE:LINE`), shown as its status's `held`: a
    /// held object may have no status of its own (a GatewayConfig).
    held: RwLock<BTreeMap<ObjRef, String>>,
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
type Stored = Box<str>;

impl StatusBoard {
    /// Records `status`; returns whether it differs from what was there (worth logging).
    pub fn set(&self, status: &SerializedStatus) -> bool {
        let stored: Stored = status.status.to_string().into();
        let mut map = self.statuses.write().expect("status lock");
        if map.get(&status.object) == Some(&stored) {
            return false;
        }
        map.insert(status.object.clone(), stored);
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
    pub fn remove(&self, object: &ObjRef) {
        let removed = self.statuses.write().expect("status lock").remove(object);
        if removed.is_some() {
            self.announce();
        }
    }

    /// Replaces the objects held at their last valid version.
    pub fn set_held(&self, held: &[Held]) {
        let held: BTreeMap<ObjRef, String> = held.iter().map(|h| (h.object.clone(), h.why.clone())).collect();
        let mut current = self.held.write().expect("held lock");
        if *current != held {
            *current = held;
            drop(current);
            self.announce();
        }
    }

    /// Every status, sorted by API group, kind, namespace and name.
    pub fn list(&self) -> StatusList {
        let map = self.statuses.read().expect("status lock");
        let held = self.held.read().expect("held lock");
        let mut items: BTreeMap<&ObjRef, ObjectStatus> = map
            .iter()
            .map(|(object, stored)| {
                // The text `set` wrote from a `Value`.
                let status = serde_json::from_str(stored).expect("a stored status is JSON");
                (object, object_status(object, status))
            })
            .collect();
        for (object, why) in held.iter() {
            let item = items.entry(object).or_insert_with(|| object_status(object, serde_json::json!({})));
            if let Some(status) = item.status.as_object_mut() {
                status.insert("held".into(), why.clone().into());
            }
        }
        let mut items: Vec<ObjectStatus> = items.into_values().collect();
        items.sort_by(|a, b| list_order(a).cmp(&list_order(b)));
        StatusList { items }
    }

    pub fn router(self: Arc<Self>) -> Router {
        Router::new().route("/api/v1/statuses", get(serve_statuses)).with_state(self)
    }
}

/// `object`'s status in the list, with the API names of its kind.
fn object_status(object: &ObjRef, status: serde_json::Value) -> ObjectStatus {
    let api = object.kind.api();
    let ObjectKey { namespace, name } = &object.key;
    ObjectStatus {
        api_version: api.api_version,
        kind: api.kind,
        namespace: namespace.to_string(),
        name: name.to_string(),
        status,
    }
}

/// API group, kind, namespace and name.
fn list_order(s: &ObjectStatus) -> (&str, &str, &str, &str) {
    (group_of(&s.api_version), &s.kind, &s.namespace, &s.name)
}

/// The group of an `apiVersion` (`""` for the core group's bare `v1`).
fn group_of(api_version: &str) -> &str {
    api_version.rsplit_once('/').map_or("", |(group, _)| group)
}

async fn serve_statuses(State(board): State<Arc<StatusBoard>>) -> impl IntoResponse {
    let body = stunner_gateway::config::json::to_vec_line(&board.list());
    ([(header::CONTENT_TYPE, "application/json")], body)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;
    use stunner_gateway::index::Kind;

    fn object(kind: Kind, name: &str) -> ObjRef {
        ObjRef::new(kind, ObjectKey::new(if kind.is_cluster_scoped() { "" } else { "ns" }, name))
    }

    fn status(kind: Kind, name: &str, ready: bool) -> SerializedStatus {
        SerializedStatus::new(object(kind, name), &json!({ "ready": ready }))
    }

    #[test]
    fn keeps_the_latest_per_object_sorted() {
        let b = StatusBoard::default();
        assert!(b.set(&status(Kind::Gateway, "b", false)));
        assert!(b.set(&status(Kind::Gateway, "a", false)));
        assert!(b.set(&status(Kind::GatewayClass, "a", true)));
        assert!(!b.set(&status(Kind::Gateway, "a", false)), "unchanged");
        assert!(b.set(&status(Kind::Gateway, "a", true)));
        let names: Vec<_> = b.list().items.iter().map(|s| format!("{}/{}", s.kind, s.name)).collect();
        assert_eq!(names, ["Gateway/a", "Gateway/b", "GatewayClass/a"]);
        let before = b.generation();
        b.remove(&object(Kind::Gateway, "b"));
        assert_eq!(b.list().items.len(), 2);
        assert_eq!(b.generation(), before + 1, "a removal is a change");
        b.remove(&object(Kind::Gateway, "b"));
        assert_eq!(b.generation(), before + 1, "removing nothing is none");
    }

    #[test]
    fn objects_of_the_same_kind_name_in_two_groups_are_kept_apart() {
        let b = StatusBoard::default();
        assert!(b.set(&status(Kind::UdpRoute, "r", true)));
        assert!(b.set(&status(Kind::GatewayUdpRoute, "r", false)));
        let listed = |b: &StatusBoard| {
            let items = b.list().items;
            items.into_iter().map(|s| (s.api_version, s.kind, s.status)).collect::<Vec<_>>()
        };
        let gateway_api =
            ("gateway.networking.k8s.io/v1alpha2".to_string(), "UDPRoute".to_string(), json!({ "ready": false }));
        let stunner = ("stunner.l7mp.io/v1".to_string(), "UDPRoute".to_string(), json!({ "ready": true }));
        assert_eq!(listed(&b), [gateway_api.clone(), stunner.clone()]);
        // Keyed by the index's kind, which any version of the group decodes to: removing it
        // removes that one object.
        b.remove(&object(Kind::GatewayUdpRoute, "r"));
        assert_eq!(listed(&b), [stunner]);
    }

    #[test]
    fn held_objects_show_in_their_status_or_alone() {
        let b = StatusBoard::default();
        assert!(b.set(&status(Kind::Gateway, "a", true)));
        let note =
            |kind: Kind, name: &str| Held { object: object(kind, name), why: format!("invalid edit at {name}.yaml:3") };
        b.set_held(&[note(Kind::Gateway, "a"), note(Kind::GatewayConfig, "c")]);
        let items = b.list().items;
        assert_eq!(items.len(), 2);
        assert_eq!(items[0].status, json!({"ready": true, "held": "invalid edit at a.yaml:3"}));
        assert_eq!(
            (items[1].kind.as_str(), &items[1].status),
            ("GatewayConfig", &json!({"held": "invalid edit at c.yaml:3"}))
        );
        b.set_held(&[]);
        let items = b.list().items;
        assert_eq!(
            items.iter().map(|s| (s.key(), &s.status)).collect::<Vec<_>>(),
            [("ns/a".into(), &json!({"ready": true}))]
        );
    }
}
