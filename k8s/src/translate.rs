//! Watch events of one kind turned into index changes: the pure half of the cluster source.
//!
//! A relist (the watcher's `Init`, `InitApply`…, `InitDone`, after a start or a lost watch)
//! is buffered until complete, then becomes applies of the objects that changed and deletes
//! of the objects gone meanwhile, so the index never sees half a list and an unchanged object
//! does not re-render its Gateways. Objects keep only our own field manager's `managedFields`
//! on the way in: the writer reads those (what a write would remove, see `owned_fields`), the
//! renderer none, and the rest is often the bulk of an object. The index drops them too
//! ([`Change::apply_to`]).

use super::ops::FIELD_MANAGER;
use kube::runtime::watcher::Event;
use std::collections::BTreeMap;
use stunner_gateway::index::{Change, Kind, ObjRef, ObjectKey, Resource};

/// What one watch event amounts to.
#[derive(Debug, Default)]
pub(crate) struct Step {
    pub(crate) changes: Vec<Change>,
    /// This event completed the kind's first list.
    pub(crate) first_sync: bool,
}

/// The state of one kind's watch: what the index holds of it, by key, with each object's
/// resourceVersion (enough to tell a relisted object that did not change).
#[derive(Debug)]
pub(crate) struct Tracker {
    kind: Kind,
    known: BTreeMap<ObjectKey, String>,
    relist: Option<Vec<Resource>>,
    synced: bool,
}

impl Tracker {
    pub(crate) fn new(kind: Kind) -> Self {
        Tracker { kind, known: BTreeMap::new(), relist: None, synced: false }
    }

    /// Translates one event; objects of another kind than the tracker's are ignored.
    pub(crate) fn handle<K: Into<Resource>>(&mut self, event: Event<K>) -> Step {
        let mut step = Step::default();
        match event {
            Event::Apply(obj) => {
                let r = prepare(obj);
                if r.kind() == self.kind {
                    self.known.insert(r.key(), version(&r));
                    step.changes.push(Change::Apply(r));
                }
            }
            Event::Delete(obj) => {
                let r = prepare(obj);
                if r.kind() == self.kind {
                    self.known.remove(&r.key());
                    step.changes.push(Change::Delete(r.obj_ref()));
                }
            }
            Event::Init => self.relist = Some(Vec::new()),
            Event::InitApply(obj) => {
                let r = prepare(obj);
                if r.kind() == self.kind {
                    self.relist.get_or_insert_default().push(r);
                }
            }
            Event::InitDone => {
                step.changes = self.finish_relist();
                step.first_sync = !std::mem::replace(&mut self.synced, true);
            }
        }
        step
    }

    /// Deletes of every object the index holds of this kind (its version stopped being served):
    /// a later list starts from nothing.
    pub(crate) fn forget_all(&mut self) -> Vec<Change> {
        self.relist = None;
        let known = std::mem::take(&mut self.known);
        known.into_keys().map(|k| Change::Delete(ObjRef::new(self.kind, k))).collect()
    }

    fn finish_relist(&mut self) -> Vec<Change> {
        let listed = self.relist.take().unwrap_or_default();
        let mut now: BTreeMap<ObjectKey, String> = BTreeMap::new();
        let mut changes = Vec::new();
        for r in listed {
            let (key, rv) = (r.key(), version(&r));
            if self.known.get(&key) != Some(&rv) || rv.is_empty() {
                changes.push(Change::Apply(r));
            }
            now.insert(key, rv);
        }
        let gone = self.known.keys().filter(|k| !now.contains_key(*k));
        // Deletes first; moved, not cloned: a first list's objects are the index's whole
        // content, and a copy of them doubled the start's peak.
        let mut deletes: Vec<Change> = gone.map(|k| Change::Delete(ObjRef::new(self.kind, k.clone()))).collect();
        self.known = now;
        deletes.append(&mut changes);
        deletes
    }
}

/// The object converted, with only our field manager's `managedFields`.
fn prepare<K: Into<Resource>>(obj: K) -> Resource {
    let mut r = obj.into();
    let managed = &mut r.meta_mut().managed_fields;
    if let Some(entries) = managed {
        entries.retain(|e| e.manager.as_deref() == Some(FIELD_MANAGER));
        if entries.is_empty() {
            *managed = None;
        }
    }
    r
}

fn version(r: &Resource) -> String {
    r.meta().resource_version.clone().unwrap_or_default()
}

#[cfg(test)]
mod tests {
    use super::*;
    use k8s_openapi::api::core::v1::Service;
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::{ManagedFieldsEntry, ObjectMeta};

    fn svc(name: &str, rv: &str) -> Service {
        let entry = |manager: &str| ManagedFieldsEntry { manager: Some(manager.into()), ..Default::default() };
        Service {
            metadata: ObjectMeta {
                name: Some(name.into()),
                namespace: Some("ns".into()),
                resource_version: Some(rv.into()),
                managed_fields: Some(vec![entry("kubectl"), entry(FIELD_MANAGER)]),
                ..Default::default()
            },
            ..Default::default()
        }
    }

    fn summary(changes: &[Change]) -> Vec<String> {
        changes
            .iter()
            .map(|c| match c {
                Change::Apply(r) => format!("apply {} {}", r.key(), r.meta().resource_version.as_deref().unwrap()),
                Change::Delete(r) => format!("delete {}", r.key),
            })
            .collect()
    }

    #[test]
    fn first_list_is_applied_at_once_and_reports_the_sync() {
        let mut t = Tracker::new(Kind::Service);
        assert!(t.handle(Event::<Service>::Init).changes.is_empty());
        assert!(t.handle(Event::InitApply(svc("a", "1"))).changes.is_empty(), "buffered until InitDone");
        t.handle(Event::InitApply(svc("b", "1")));
        let step = t.handle(Event::<Service>::InitDone);
        assert!(step.first_sync);
        assert_eq!(summary(&step.changes), ["apply ns/a 1", "apply ns/b 1"]);
        let Change::Apply(r) = &step.changes[0] else { panic!() };
        let managers: Vec<_> = r.meta().managed_fields.iter().flatten().map(|e| e.manager.as_deref()).collect();
        assert_eq!(managers, [Some(FIELD_MANAGER)], "only our own managedFields are kept");
    }

    #[test]
    fn events_become_applies_and_deletes() {
        let mut t = Tracker::new(Kind::Service);
        t.handle(Event::<Service>::Init);
        t.handle(Event::<Service>::InitDone);
        let step = t.handle(Event::Apply(svc("a", "2")));
        assert!(!step.first_sync);
        assert_eq!(summary(&step.changes), ["apply ns/a 2"]);
        let Change::Apply(r) = &step.changes[0] else { panic!() };
        assert_eq!(r.meta().managed_fields.as_ref().map(Vec::len), Some(1));
        assert_eq!(summary(&t.handle(Event::Delete(svc("a", "3"))).changes), ["delete ns/a"]);
    }

    #[test]
    fn a_relist_deletes_what_is_gone_and_skips_what_did_not_change() {
        let mut t = Tracker::new(Kind::Service);
        t.handle(Event::<Service>::Init);
        for s in [svc("a", "1"), svc("b", "1"), svc("c", "1")] {
            t.handle(Event::InitApply(s));
        }
        t.handle(Event::<Service>::InitDone);
        t.handle(Event::<Service>::Init);
        t.handle(Event::InitApply(svc("a", "1")));
        t.handle(Event::InitApply(svc("c", "5")));
        t.handle(Event::InitApply(svc("d", "6")));
        let step = t.handle(Event::<Service>::InitDone);
        assert!(!step.first_sync, "only the first list syncs");
        assert_eq!(summary(&step.changes), ["delete ns/b", "apply ns/c 5", "apply ns/d 6"]);
    }

    #[test]
    fn forgetting_deletes_what_is_known_and_a_later_list_applies_it_again() {
        let mut t = Tracker::new(Kind::Service);
        t.handle(Event::<Service>::Init);
        t.handle(Event::InitApply(svc("a", "1")));
        t.handle(Event::<Service>::InitDone);
        assert_eq!(summary(&t.forget_all()), ["delete ns/a"]);
        assert!(t.forget_all().is_empty());
        t.handle(Event::<Service>::Init);
        t.handle(Event::InitApply(svc("a", "1")));
        let step = t.handle(Event::<Service>::InitDone);
        assert!(!step.first_sync);
        assert_eq!(summary(&step.changes), ["apply ns/a 1"]);
    }
}
