//! Standalone mode has no API server to store the objects the operator renders for a Gateway
//! (its Services and Deployment or DaemonSet), so they go straight into the index, as if written and watched
//! back (a Deployment only where the manifests hold one too: see [`held_alone`]). They are
//! applied the way a server-side apply under one field manager would: the rendered object is
//! merged into the live one (the one the manifests hold, or the last merge), so what others set
//! stays, above all the Service's `status.loadBalancer`, which gives the listeners their public
//! address; and a field the operator set before and no longer renders is removed.
//!
//! Maps merge key by key; lists are replaced as a whole (the renderer already carries over what
//! it keeps of a live list, such as allocated node ports).

use k8s_openapi::api::apps::v1::{DaemonSet, Deployment};
use k8s_openapi::api::core::v1::Service;
use serde::Serialize;
use serde::de::DeserializeOwned;
use serde_json::Value;
use std::borrow::Cow;
use std::collections::BTreeMap;
use stunner_gateway::index::{Change, Index, Kind, ObjRef, ObjectKey, Resource};
use stunner_gateway::render::{GatewayOutput, Owned, owned_key, tcp_service_key};

/// What the operator last applied to each owned object: the fields it owns.
#[derive(Debug, Default)]
pub struct OwnedObjects {
    last_applied: BTreeMap<ObjRef, Applied>,
}

/// What the operator last applied to one object.
#[derive(Debug)]
enum Applied {
    /// Exactly the object the index holds: no one else set a field of it (the manifests hold
    /// no such object), so it is not kept a second time. Before anything else changes the
    /// object in the index, [`OwnedObjects::before_outside_change`] turns it into `Text`.
    AsStored,
    /// As JSON text, parsed only when the object is applied again: as a `Value` tree (a map
    /// node and a `String` per field) a Deployment took ~30 KiB, as text ~2 KiB.
    Text(Box<str>),
}

impl OwnedObjects {
    /// Keeps what the operator applied to an object before `change`, from elsewhere (the
    /// manifests), replaces or deletes it in `index`: while no one else touched it, the object
    /// in the index was that record.
    pub fn before_outside_change(&mut self, index: &Index, change: &Change) {
        if !matches!(change.kind(), Kind::Service | Kind::Deployment | Kind::DaemonSet) {
            return; // not a kind the operator applies
        }
        let (r, _) = change.seen();
        let Some(applied @ Applied::AsStored) = self.last_applied.get_mut(&r) else { return };
        let text = match r.kind {
            Kind::Service => index.services().get(&r.key).map(serde_json::to_string),
            Kind::DaemonSet => index.daemon_sets().get(&r.key).map(serde_json::to_string),
            _ => index.deployments().get(&r.key).map(serde_json::to_string),
        };
        match text {
            Some(text) => *applied = Applied::Text(text.expect("a stored object serializes").into_boxed_str()),
            // Gone from the index already: nothing to merge into the next time.
            None => {
                self.last_applied.remove(&r);
            }
        }
    }

    /// The index changes that applying one Gateway's owned objects amounts to: none once the
    /// index holds them as rendered (and the record of what was applied says so). Reads the
    /// index only, so that a render pass can ask while it goes on and apply the changes after.
    pub fn changes(&mut self, index: &Index, gateway: &ObjectKey, gw: &GatewayOutput) -> impl Iterator<Item = Change> {
        let key = &owned_key(gateway);
        let service = self.change(index, &gw.service, key);
        let tcp_service = self.change(index, &gw.tcp_service, &tcp_service_key(gateway));
        let deployment = self.change(index, &gw.deployment, key);
        let daemon_set = self.change(index, &gw.daemon_set, key);
        [service, tcp_service, deployment, daemon_set].into_iter().flatten()
    }

    /// The index change one owned-object decision amounts to; `None` if the index already
    /// holds the result.
    fn change<T: OwnedKind>(&mut self, index: &Index, owned: &Owned<T>, key: &ObjectKey) -> Option<Change> {
        let r = ObjRef::new(T::KIND, key.clone());
        match owned {
            Owned::Apply(desired) => {
                let live = T::live(index, key);
                let live = live.as_deref();
                if live.is_none() && !held_alone(T::KIND) {
                    self.last_applied.remove(&r);
                    return None;
                }
                let (merged, applied) = match (live, self.last_applied.get(&r)) {
                    // Nothing to merge into (every Gateway at start-up), or nothing in it but what
                    // the operator applied: the rendered object as is.
                    (None, _) | (Some(_), Some(Applied::AsStored)) => {
                        if live == Some(desired) {
                            return None; // applied already (a render's later passes)
                        }
                        (desired.clone(), Applied::AsStored)
                    }
                    (Some(live), last) => {
                        let body = serde_json::to_value(desired).expect("a rendered object serializes");
                        let mut value = serde_json::to_value(live).expect("a stored object serializes");
                        let last = match last {
                            Some(Applied::Text(text)) => {
                                Some(serde_json::from_str::<Value>(text).expect("what was applied is JSON"))
                            }
                            _ => None,
                        };
                        merge(&mut value, last.as_ref(), &body);
                        // The object the index will hold is exactly `body`: no one else's fields.
                        let applied = if value == body {
                            Applied::AsStored
                        } else {
                            Applied::Text(body.to_string().into_boxed_str())
                        };
                        match serde_json::from_value(value) {
                            Ok(merged) => (merged, applied),
                            Err(e) => {
                                // Cannot happen for objects of one type; if it did, the
                                // rendered object alone is still what the operator asks for.
                                tracing::warn!(object = %key, error = %e, "cannot merge into the stored object");
                                (desired.clone(), Applied::AsStored)
                            }
                        }
                    }
                };
                self.last_applied.insert(r, applied);
                (live != Some(&merged)).then(|| Change::Apply(merged.into()))
            }
            Owned::Delete => {
                self.last_applied.remove(&r);
                index.contains(&r).then_some(Change::Delete(r))
            }
            Owned::Keep => {
                // Left alone (standalone mode renders no Deployment where the manifests hold
                // none): a record of an object that is gone would be merged, as what the
                // operator set, into the next one the manifests bring.
                if !index.contains(&r) {
                    self.last_applied.remove(&r);
                }
                None
            }
        }
    }
}

/// A kind the operator renders for each Gateway and standalone mode applies to the index.
trait OwnedKind: Serialize + DeserializeOwned + PartialEq + Clone + Into<Resource> {
    const KIND: Kind;
    /// The whole object of `key` the index holds.
    fn live<'i>(index: &'i Index, key: &ObjectKey) -> Option<Cow<'i, Self>>;
}

impl OwnedKind for Service {
    const KIND: Kind = Kind::Service;
    fn live<'i>(index: &'i Index, key: &ObjectKey) -> Option<Cow<'i, Self>> {
        index.services().get(key).map(Cow::Borrowed)
    }
}

impl OwnedKind for Deployment {
    const KIND: Kind = Kind::Deployment;
    fn live<'i>(index: &'i Index, key: &ObjectKey) -> Option<Cow<'i, Self>> {
        // The index keeps what the render reads of it; the whole object is rebuilt here (only
        // where the manifests hold one: see `held_alone`).
        index.deployments().get(key).map(|d| Cow::Owned(d.to_deployment()))
    }
}

impl OwnedKind for DaemonSet {
    const KIND: Kind = Kind::DaemonSet;
    fn live<'i>(index: &'i Index, key: &ObjectKey) -> Option<Cow<'i, Self>> {
        index.daemon_sets().get(key).map(Cow::Borrowed)
    }
}

/// Whether the index holds an object of `kind` the operator applied when nothing else (no
/// manifest) holds one by that name. A Service, yes: the render reads back its addresses and
/// node ports, and the Gateway's public address comes from it. A Deployment, no: standalone mode
/// has no kubelet to run it, and all the render reads of one is what others set on it (a
/// foreign `STUNNER_CONFIG_ORIGIN`, unavailable replicas), which a Deployment of the manifests
/// brings, merged as any. With 1,000 Gateways the operator's own Deployments took 11 MiB of
/// heap (the largest Kubernetes type, and a label map of 0.5 KiB each for three labels).
/// A DaemonSet, no, for the same reasons.
fn held_alone(kind: Kind) -> bool {
    kind == Kind::Service
}

/// Merges `desired` into `live`: `desired`'s fields are set, maps merged key by key, and a
/// field of `last` (what was applied before) that `desired` no longer has is removed.
fn merge(live: &mut Value, last: Option<&Value>, desired: &Value) {
    let (Value::Object(live_map), Value::Object(desired_map)) = (&mut *live, desired) else {
        *live = desired.clone();
        return;
    };
    if let Some(Value::Object(last_map)) = last {
        for (dropped, was) in last_map.iter().filter(|(k, _)| !desired_map.contains_key(*k)) {
            // Of a map, only the entries the operator set go; others' entries stay.
            if let Some(l @ Value::Object(_)) = live_map.get_mut(dropped)
                && was.is_object()
            {
                merge(l, Some(was), &Value::Object(Default::default()));
                if l.as_object().is_some_and(|m| !m.is_empty()) {
                    continue;
                }
            }
            live_map.remove(dropped);
        }
    }
    for (k, d) in desired_map {
        let last = last.and_then(|l| l.get(k));
        match live_map.get_mut(k) {
            Some(l) if l.is_object() && d.is_object() => merge(l, last, d),
            _ => {
                live_map.insert(k.clone(), d.clone());
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
    use serde_json::json;

    /// An object no one else set a field of is its own record of what was applied: no copy of
    /// it is kept (with 1,000 Gateways the copies were 5.8 MiB), until the manifests change it.
    #[test]
    fn what_was_applied_is_kept_apart_only_once_others_change_the_object() {
        let mut owned = OwnedObjects::default();
        let mut index = Index::new();
        let r = ObjRef::new(Kind::Service, ObjectKey::new("ns", "gw"));
        let desired = service(&[("mine", "1")]);
        assert!(apply(&mut owned, &mut index, desired.clone()), "applied");
        assert!(matches!(owned.last_applied[&r], Applied::AsStored));
        owned.before_outside_change(&index, &Change::Delete(r.clone()));
        let Applied::Text(text) = &owned.last_applied[&r] else { panic!("kept as text") };
        assert_eq!(serde_json::from_str::<Service>(text).unwrap(), desired);
    }

    /// Applies `desired` for the Gateway `ns/gw` as the render loop does, and the index change
    /// it amounts to; whether there was one to apply.
    fn apply<T: OwnedKind>(owned: &mut OwnedObjects, index: &mut Index, desired: T) -> bool {
        let key = ObjectKey::new("ns", "gw");
        let Some(Change::Apply(r)) = owned.change(index, &Owned::Apply(desired), &key) else {
            return false;
        };
        index.apply(r);
        true
    }

    fn service(annotations: &[(&str, &str)]) -> Service {
        Service { metadata: meta(annotations), ..Default::default() }
    }

    fn meta(annotations: &[(&str, &str)]) -> ObjectMeta {
        let annotations = annotations.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect();
        ObjectMeta {
            name: Some("gw".into()),
            namespace: Some("ns".into()),
            annotations: Some(annotations),
            ..Default::default()
        }
    }

    /// The operator's own Deployment is in the index only while the manifests hold one for the
    /// Gateway, merged into it; before and after, nothing is kept of it.
    #[test]
    fn a_deployment_is_kept_only_merged_into_one_the_manifests_hold() {
        let mut owned = OwnedObjects::default();
        let mut index = Index::new();
        let key = ObjectKey::new("ns", "gw");
        let r = ObjRef::new(Kind::Deployment, key.clone());
        let ours = Deployment { metadata: meta(&[("mine", "1")]), ..Default::default() };
        apply(&mut owned, &mut index, ours.clone());
        assert!(index.deployments().is_empty(), "no one else holds one: not kept");
        assert!(owned.last_applied.is_empty());

        let theirs = Deployment { metadata: meta(&[("theirs", "x")]), ..Default::default() };
        owned.before_outside_change(&index, &Change::Apply(theirs.clone().into()));
        index.apply(theirs.into());
        apply(&mut owned, &mut index, ours.clone());
        let annotations = index.deployments().get(&key).and_then(|d| d.metadata.annotations.clone());
        let expected = [("mine", "1"), ("theirs", "x")].map(|(k, v)| (k.to_string(), v.to_string()));
        assert_eq!(annotations, Some(BTreeMap::from(expected)), "merged into the manifests' one");

        owned.before_outside_change(&index, &Change::Delete(r.clone()));
        index.delete(Kind::Deployment, "ns", "gw");
        apply(&mut owned, &mut index, ours.clone());
        assert!(index.deployments().is_empty(), "the manifests' one is gone: ours is not kept either");
        assert!(owned.last_applied.is_empty());
    }

    /// Standalone mode renders a Deployment only where the manifests hold one: once they drop
    /// it, the render leaves it alone, and what was applied to the one gone is forgotten.
    #[test]
    fn a_deployment_left_alone_once_the_manifests_drop_theirs_is_forgotten() {
        let mut owned = OwnedObjects::default();
        let mut index = Index::new();
        let key = ObjectKey::new("ns", "gw");
        let r = ObjRef::new(Kind::Deployment, key.clone());
        let theirs = Deployment { metadata: meta(&[("theirs", "x")]), ..Default::default() };
        index.apply(theirs.into());
        let ours = Deployment { metadata: meta(&[("mine", "1")]), ..Default::default() };
        assert!(apply(&mut owned, &mut index, ours), "merged");
        let keep = |owned: &mut OwnedObjects, index: &Index| owned.change(index, &Owned::<Deployment>::Keep, &key);
        assert!(keep(&mut owned, &index).is_none(), "left alone: no change");
        assert!(owned.last_applied.contains_key(&r), "still held: the record stays");

        owned.before_outside_change(&index, &Change::Delete(r.clone()));
        index.delete(Kind::Deployment, "ns", "gw");
        assert!(keep(&mut owned, &index).is_none());
        assert!(owned.last_applied.is_empty(), "gone: nothing is kept of it");
    }

    /// What was applied is kept between applies (as the stored object while no one else set a
    /// field, then as text), and still tells which fields the operator stopped setting.
    #[test]
    fn a_field_the_operator_stops_setting_goes_across_applies() {
        let mut owned = OwnedObjects::default();
        let mut index = Index::new();
        let key = ObjectKey::new("ns", "gw");
        apply(&mut owned, &mut index, service(&[("mine", "1")]));
        // Someone else adds a field (the manifests now hold the object); the loop tells the
        // record first, as it does for every outside change.
        let theirs = service(&[("mine", "1"), ("theirs", "x")]);
        owned.before_outside_change(&index, &Change::Apply(theirs.clone().into()));
        index.apply(theirs.into());
        apply(&mut owned, &mut index, service(&[("other", "2")]));
        let annotations = index.services().get(&key).and_then(|s| s.metadata.annotations.clone());
        let expected = [("other", "2"), ("theirs", "x")].map(|(k, v)| (k.to_string(), v.to_string()));
        assert_eq!(annotations, Some(BTreeMap::from(expected)));
    }

    #[test]
    fn merging_keeps_what_others_set_and_drops_what_the_operator_stopped_setting() {
        let mut live = json!({
            "metadata": {"name": "gw", "labels": {"team": "a"}, "annotations": {"mine": "1", "theirs": "x"}},
            "spec": {"clusterIP": "10.0.0.1", "ports": [{"port": 1, "nodePort": 30001}]},
            "status": {"loadBalancer": {"ingress": [{"ip": "1.2.3.4"}]}},
        });
        let last = json!({"metadata": {"name": "gw", "annotations": {"mine": "1"}}, "spec": {"ports": [{"port": 1}]}});
        let desired = json!({"metadata": {"name": "gw", "labels": {"owner": "op"}}, "spec": {"ports": [{"port": 2}]}});
        merge(&mut live, Some(&last), &desired);
        assert_eq!(
            live,
            json!({
                "metadata": {"name": "gw", "labels": {"team": "a", "owner": "op"}, "annotations": {"theirs": "x"}},
                "spec": {"clusterIP": "10.0.0.1", "ports": [{"port": 2}]},
                "status": {"loadBalancer": {"ingress": [{"ip": "1.2.3.4"}]}},
            })
        );
    }
}
