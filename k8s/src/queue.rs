//! The writes still to do: the [`Queue`] coalesces [`Op`]s (latest wins per object) and drops
//! the ones whose content was already written, or that the watchers show in place already.
//! A render's writes are staged as it goes and handed to the writer together once it is done
//! ([`Queue::flush`]), so the writer orders each render's writes as a whole: statuses first.

use super::live;
use super::ops::{FIELD_MANAGER, Op, Scope, Target, WriteKind};
use super::owned_fields::{FieldSet, Owned};
use super::served::Served;
use std::collections::{BTreeMap, HashMap};
use stunner_gateway::index::{ObjectKey, Resource, content_digest};
use tokio::sync::watch;

/// The writes still to do, and the content last written per object.
///
/// `applied` is what this process wrote (a digest of it: the bodies themselves would double
/// the memory the owned objects take), with the resourceVersion the write left. While an
/// object is at that version, a write of other content is sent, whatever the object holds:
/// it may hold the new body's values and still fields that only the write removes.
///
/// `applied` starts empty, so after a restart (or for a new leader) each object is compared
/// with what the watchers show: its values and the fields our manager owns in it (`owned`,
/// kept from the watch event until the next write decides on it). A write that would change
/// nothing is skipped, so a restart with nothing changed writes nothing. When the watchers
/// see the object at another resourceVersion (someone else changed or deleted it, or another
/// leader wrote it), the entry is forgotten and the next render compares again: drift is
/// repaired.
#[derive(Debug, Default)]
pub(crate) struct Queue {
    /// Submitted by a render still under way.
    staged: BTreeMap<Target, Op>,
    /// For the writer to take.
    pending: BTreeMap<Target, Op>,
    applied: BTreeMap<Target, (u64, Option<String>)>,
    /// Our manager's field sets of objects this process has no write of on record, with the
    /// resourceVersion they were seen at.
    owned: HashMap<Target, (Option<String>, FieldSet)>,
    /// The versions the route kinds are served in (`None`: the kind table's).
    served: Option<watch::Receiver<Served>>,
}

/// A 64-bit digest of a write: a collision (odds 2^-64 per object) would skip one write.
fn digest(op: &Op) -> u64 {
    match op {
        Op::Apply(body) => content_digest(body),
        Op::Delete => content_digest("delete"), // no object body serialises to a bare string
    }
}

impl Queue {
    /// Stages `op` for `target`, replacing a queued one; returns false if it needs no write
    /// (and cancels a queued different one): `op` is what was last written, or, when this
    /// process has written nothing there since the watchers last showed the object, the
    /// object as `live` returns it (what the watchers saw) already is what `op` makes it.
    pub(crate) fn submit(&mut self, target: Target, op: Op, live: impl FnOnce(&Target) -> Option<Resource>) -> bool {
        if self.is_written(&target, &op) {
            self.cancel(&target);
            return false;
        }
        if !self.applied.contains_key(&target) {
            let live = live(&target);
            let owned = self.owned.remove(&target);
            let version = live.as_ref().and_then(|r| r.meta().resource_version.clone());
            let fields = owned.filter(|(seen, _)| *seen == version).map(|(_, fields)| fields);
            if let Some(version) = live::matches(live.as_ref(), fields.as_ref(), &target, &op) {
                self.cancel(&target);
                self.written(target, &op, version);
                return false;
            }
        }
        self.staged.insert(target, op);
        true
    }

    pub(crate) fn follow_served(&mut self, served: watch::Receiver<Served>) {
        self.served = Some(served);
    }

    /// The apiVersion writes of `kind` go through.
    fn api_version(&self, kind: WriteKind) -> String {
        let api = match &self.served {
            Some(served) => kind.served_api(&served.borrow()),
            None => kind.api(),
        };
        api.api_version
    }

    /// Hands what was staged to the writer; returns whether there was anything.
    pub(crate) fn flush(&mut self) -> bool {
        let any = !self.staged.is_empty();
        self.pending.append(&mut self.staged);
        any
    }

    fn cancel(&mut self, target: &Target) {
        self.staged.remove(target);
        self.pending.remove(target);
    }

    /// Whether `op` is what was last written to `target` (and the watchers showed nothing
    /// else since).
    pub(crate) fn is_written(&self, target: &Target, op: &Op) -> bool {
        self.applied.get(target).is_some_and(|(written, _)| *written == digest(op))
    }

    /// Takes every flushed write, in target order (statuses before objects, kinds in order).
    pub(crate) fn take(&mut self) -> BTreeMap<Target, Op> {
        std::mem::take(&mut self.pending)
    }

    /// `op` was written, leaving the object at `version` (`None`: deleted).
    pub(crate) fn written(&mut self, target: Target, op: &Op, version: Option<String>) {
        self.owned.remove(&target);
        self.applied.insert(target, (digest(op), version));
    }

    /// The watchers saw object `key` of `kind` as `live` (`None`: deleted), with its managed
    /// fields. Unless at the version our last write left, what we wrote is no longer what is
    /// there; a queued write the object already matches (another leader wrote it) is dropped.
    pub(crate) fn observed(&mut self, kind: WriteKind, key: &ObjectKey, live: Option<&Resource>) {
        let version = live.and_then(|r| r.meta().resource_version.clone());
        let api_version = self.api_version(kind);
        let entries = live.and_then(|r| r.meta().managed_fields.as_deref());
        let owned = entries.map(|e| Owned::of(e, FIELD_MANAGER, &api_version));
        let Owned { main, status } = owned.unwrap_or_default();
        for (scope, fields) in [(Scope::Status, status), (Scope::Spec, main)] {
            let target = Target { scope, kind, key: key.clone() };
            let ours = self.applied.get(&target).is_some_and(|(_, written)| *written == version);
            if !ours {
                self.applied.remove(&target);
            }
            let queued = self.staged.get(&target).or_else(|| self.pending.get(&target));
            let matched = queued.and_then(|op| live::matches(live, fields.as_ref(), &target, op));
            if let Some(at) = matched
                && let Some(op) = self.staged.remove(&target).or_else(|| self.pending.remove(&target))
            {
                self.pending.remove(&target);
                self.written(target, &op, at);
            } else if let Some(fields) = fields.filter(|_| !ours) {
                self.owned.insert(target, (version.clone(), fields));
            } else {
                self.owned.remove(&target);
            }
        }
    }

    /// `op` could not be written: queue it again, unless something newer was queued.
    pub(crate) fn failed(&mut self, target: Target, op: Op) {
        self.pending.entry(target).or_insert(op);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use k8s_openapi::api::core::v1::Service;
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::{FieldsV1, ManagedFieldsEntry};
    use serde_json::json;

    fn spec(kind: WriteKind, key: &ObjectKey) -> Target {
        Target { scope: Scope::Spec, kind, key: key.clone() }
    }

    /// Of a kind the watchers do not see: only what was written counts.
    fn target(name: &str) -> Target {
        spec(WriteKind::ConfigMap, &ObjectKey::new("ns", name))
    }

    fn none(_: &Target) -> Option<Resource> {
        None
    }

    /// A live object at `version` that matches no body of these tests.
    fn live(version: &str) -> Resource {
        let mut svc = Service::default();
        svc.metadata.resource_version = Some(version.into());
        svc.into()
    }

    fn apply(n: i64) -> Op {
        Op::Apply(json!({ "n": n }))
    }

    #[test]
    fn latest_wins_and_unchanged_content_is_never_written_again() {
        let mut q = Queue::default();
        assert!(q.submit(target("a"), apply(1), none));
        assert!(q.submit(target("a"), apply(2), none));
        assert!(q.submit(target("b"), Op::Delete, none));
        assert!(q.take().is_empty(), "staged until the render is done");
        assert!(q.flush());
        let batch = q.take();
        assert_eq!(batch.into_iter().collect::<Vec<_>>(), [(target("a"), apply(2)), (target("b"), Op::Delete)]);
        q.written(target("a"), &apply(2), Some("1".into()));
        q.written(target("b"), &Op::Delete, None);
        assert!(!q.submit(target("a"), apply(2), none), "same content: no write");
        assert!(!q.submit(target("b"), Op::Delete, none));
        assert!(!q.flush());
        assert!(q.take().is_empty());
        // A change queued then reverted before the writer got to it is dropped.
        assert!(q.submit(target("a"), apply(3), none));
        assert!(!q.submit(target("a"), apply(2), none));
        q.flush();
        assert!(q.take().is_empty());
    }

    #[test]
    fn a_failed_write_is_retried_unless_superseded() {
        let mut q = Queue::default();
        q.submit(target("a"), apply(1), none);
        q.submit(target("b"), apply(1), none);
        q.flush();
        q.take();
        q.submit(target("b"), apply(2), none);
        q.flush();
        q.failed(target("a"), apply(1));
        q.failed(target("b"), apply(1));
        assert_eq!(q.take().into_iter().collect::<Vec<_>>(), [(target("a"), apply(1)), (target("b"), apply(2))]);
    }

    #[test]
    fn a_change_by_someone_else_makes_the_object_written_again() {
        let mut q = Queue::default();
        let key = ObjectKey::new("ns", "a");
        q.written(target("a"), &apply(1), Some("7".into()));
        q.observed(WriteKind::ConfigMap, &key, Some(&live("7")));
        assert!(!q.submit(target("a"), apply(1), none), "our own write coming back");
        q.observed(WriteKind::ConfigMap, &key, Some(&live("8")));
        assert!(q.submit(target("a"), apply(1), none), "edited by someone else");
        q.written(target("a"), &apply(1), Some("9".into()));
        q.observed(WriteKind::ConfigMap, &key, None);
        assert!(q.submit(target("a"), apply(1), none), "deleted by someone else");
        q.written(target("a"), &Op::Delete, None);
        q.observed(WriteKind::ConfigMap, &key, None);
        assert!(!q.submit(target("a"), Op::Delete, none), "our delete coming back");
    }

    /// A Service at `version` labelled `ours` by our field manager and `theirs` by another.
    fn service(version: &str, ours: &[&str], theirs: &[&str]) -> Resource {
        let mut svc = Service::default();
        svc.metadata.name = Some("gw".into());
        svc.metadata.resource_version = Some(version.into());
        let labels = ours.iter().chain(theirs).map(|k| (k.to_string(), "v".to_string()));
        svc.metadata.labels = Some(labels.collect());
        let fields = |keys: &[&str]| {
            let labels: serde_json::Map<_, _> = keys.iter().map(|k| (format!("f:{k}"), json!({}))).collect();
            FieldsV1(json!({ "f:metadata": { "f:labels": labels } }))
        };
        let entry = |manager: &str, keys: &[&str]| ManagedFieldsEntry {
            manager: Some(manager.into()),
            operation: Some("Apply".into()),
            api_version: Some("v1".into()),
            fields_v1: Some(fields(keys)),
            ..Default::default()
        };
        svc.metadata.managed_fields = Some(vec![entry(FIELD_MANAGER, ours), entry("someone-else", theirs)]);
        svc.into()
    }

    fn labelled(keys: &[&str]) -> Op {
        let labels: serde_json::Map<_, _> = keys.iter().map(|k| (k.to_string(), json!("v"))).collect();
        Op::Apply(json!({ "metadata": { "name": "gw", "labels": labels } }))
    }

    #[test]
    fn what_the_watchers_show_in_place_is_not_written() {
        let mut q = Queue::default();
        let key = ObjectKey::new("ns", "gw");
        let t = spec(WriteKind::Service, &key);
        let before = service("5", &["a"], &["foreign"]);
        q.observed(WriteKind::Service, &key, Some(&before));
        assert!(!q.submit(t.clone(), labelled(&["a"]), |_| Some(before.clone())), "in place, the foreign label too");
        assert!(!q.submit(t.clone(), labelled(&["a"]), |_| None), "and recorded as written");
        // A replica that does not lead queues a change; the leader's write of it comes back.
        assert!(q.submit(t.clone(), labelled(&["a", "b"]), |_| Some(before.clone())));
        q.observed(WriteKind::Service, &key, Some(&service("6", &["a", "b"], &["foreign"])));
        q.flush();
        assert!(q.take().is_empty(), "written by the leader: nothing left to write");
        assert!(!q.submit(t, labelled(&["a", "b"]), |_| None));
    }

    /// Our manager's apply through another version than the writes go through is not taken
    /// for ours: its field set is in that version's terms.
    #[test]
    fn an_apply_through_another_version_is_written_again() {
        let key = ObjectKey::new("ns", "gw");
        let t = spec(WriteKind::Service, &key);
        let mut live = service("5", &["a"], &[]);
        let mut q = Queue::default();
        q.observed(WriteKind::Service, &key, Some(&live));
        assert!(!q.submit(t.clone(), labelled(&["a"]), |_| Some(live.clone())), "through v1: in place");
        live.meta_mut().managed_fields.as_mut().unwrap()[0].api_version = Some("v2".into());
        let mut q = Queue::default();
        q.observed(WriteKind::Service, &key, Some(&live));
        assert!(q.submit(t, labelled(&["a"]), |_| Some(live.clone())), "through v2: written");
    }

    /// A body that drops a field our manager set is written although the live object holds
    /// every value of it: only the apply removes the field.
    #[test]
    fn a_field_no_longer_set_is_written() {
        let key = ObjectKey::new("ns", "gw");
        let t = spec(WriteKind::Service, &key);
        // After a restart: the object as the watchers show it.
        let mut q = Queue::default();
        let live = service("5", &["a", "b"], &[]);
        q.observed(WriteKind::Service, &key, Some(&live));
        assert!(q.submit(t.clone(), labelled(&["a"]), |_| Some(live.clone())), "label b removed");
        // In one process's life: what it wrote last is on record, so other content is written.
        let mut q = Queue::default();
        q.written(t.clone(), &labelled(&["a", "b"]), Some("5".into()));
        q.observed(WriteKind::Service, &key, Some(&live));
        assert!(q.submit(t.clone(), labelled(&["a"]), |_| Some(live.clone())));
        // Field sets seen at another version than the live object's are not used.
        let mut q = Queue::default();
        q.observed(WriteKind::Service, &key, Some(&service("4", &["a"], &[])));
        assert!(q.submit(t, labelled(&["a"]), |_| Some(service("5", &["a"], &[]))), "compared at 4, live at 5");
    }

    /// DaemonSets are watched: the DELETE every Deployment upsert asks for is sent only for a
    /// DaemonSet the watchers show (upstream's answers 404 once per new Gateway).
    #[test]
    fn a_daemon_set_is_deleted_only_when_the_watchers_show_one() {
        let mut q = Queue::default();
        let t = spec(WriteKind::DaemonSet, &ObjectKey::new("ns", "gw"));
        assert!(!q.submit(t.clone(), Op::Delete, none), "none there: nothing to delete");
        let mut q = Queue::default();
        let lingering = || Some(Resource::DaemonSet(Default::default()));
        assert!(q.submit(t, Op::Delete, |_| lingering()));
    }
}
