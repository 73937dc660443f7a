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
/// it may hold the new body's values and still fields that only the write removes. Except for
/// a Service once the watchers showed our write come back, with the fields our manager owns
/// in it: the render that follows carries over the node ports the API server allocated, and
/// is compared as after a restart, so a new Service is written once (issue #62).
///
/// `applied` starts empty, so after a restart (or for a new leader) each object is compared
/// with what the watchers show: its values and the fields our manager owns in it (`owned`,
/// kept from the watch event until the next write decides on it). A write that would change
/// nothing is skipped, so a restart with nothing changed writes nothing. When the watchers
/// see the object at another resourceVersion (someone else changed or deleted it, or another
/// leader wrote it), the entry is forgotten and the next render compares again: drift is
/// repaired.
///
/// Nothing is kept of an object the watchers show gone: for the kinds they watch, an absence
/// needs no record, for `live` shows it as long as it lasts. A delete the watchers confirm is
/// forgotten, and a delete of an object they never showed (the other dataplane kind, which
/// every render of a Gateway asks gone) is never recorded. So the records are of objects that
/// exist (and of ConfigMaps, which nobody watches), and a Gateway that is gone, with its
/// Service and dataplane, leaves none behind.
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
    /// The targets of the batch the writer took last and has not answered for yet, each with
    /// whether the watchers showed the object gone since: a write answered after that would
    /// record an object nothing is left to forget.
    taken: HashMap<Target, bool>,
}

/// A 64-bit digest of a write: a collision (odds 2^-64 per object) would skip one write.
fn digest(op: &Op) -> u64 {
    match op {
        Op::Apply(body) => content_digest(body.text()),
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
            // A Service's fields kept from the echo of our write (see [`Queue`]) are for the
            // render that echo sets off; one that finds nothing new to write needs them no more.
            self.owned.remove(&target);
            self.cancel(&target);
            return false;
        }
        // Compared with what the watchers show when this process wrote nothing there since, or
        // when they showed its last write come back (the fields it owns then known): the
        // render that the echo sets off may add what the API server filled in (a Service's
        // node ports), which an apply would only take ownership of.
        if !self.applied.contains_key(&target) || self.owned.contains_key(&target) {
            let live = live(&target);
            let owned = self.owned.remove(&target);
            let version = live.as_ref().and_then(|r| r.meta().resource_version.clone());
            let fields = owned.filter(|(seen, _)| *seen == version).map(|(_, fields)| fields);
            if let Some(version) = live::matches(live.as_ref(), fields.as_ref(), &target, &op) {
                self.cancel(&target);
                self.in_place(target, &op, version);
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
        let batch = std::mem::take(&mut self.pending);
        self.taken = batch.keys().map(|target| (target.clone(), false)).collect();
        batch
    }

    /// `op` was written, leaving the object at `version` (`None`: deleted). Not recorded when
    /// the watchers showed the object gone while the write was on its way: a record would
    /// outlive the object (a write that made it again is seen by the watchers all the same).
    pub(crate) fn written(&mut self, target: Target, op: &Op, version: Option<String>) {
        if self.taken.remove(&target) == Some(true) {
            self.forget(&target);
        } else if self.applied.get(&target).is_some_and(|(_, at)| version.is_some() && *at == version) {
            // The watchers showed this write come back before its answer, and a later render
            // found its body in place at that version (`submit`): that record stands.
        } else {
            self.record(target, op, version);
        }
    }

    /// The watchers show `op` in place, at `version` (`None`: absent, which needs no record).
    fn in_place(&mut self, target: Target, op: &Op, version: Option<String>) {
        match version {
            Some(_) => self.record(target, op, version),
            None => self.forget(&target),
        }
    }

    /// `op` is at `version`. For a Service the watchers already showed at that version, the
    /// fields our manager owns in it are kept for the render that echo sets off (see
    /// [`Queue`]), however the write came to be recorded: by its answer, or by the echo
    /// matching a write of the same body queued meanwhile (a render that ran while the first
    /// was on its way, the object not yet seen).
    fn record(&mut self, target: Target, op: &Op, version: Option<String>) {
        let echo = self.owned.get(&target).is_some_and(|(seen, _)| *seen == version);
        if !(echo && target.kind == WriteKind::Service) {
            self.owned.remove(&target);
        }
        self.applied.insert(target, (digest(op), version));
    }

    fn forget(&mut self, target: &Target) {
        self.owned.remove(target);
        self.applied.remove(target);
    }

    /// The objects and statuses the queue keeps a record of: its last write, or our field
    /// manager's fields as last seen.
    pub(crate) fn records(&self) -> usize {
        self.applied.len() + self.owned.len()
    }

    /// The watchers saw object `key` of `kind` as `live` (`None`: deleted), with its managed
    /// fields. Unless at the version our last write left, what we wrote is no longer what is
    /// there; a queued write the object already matches (another leader wrote it) is dropped.
    /// An object shown gone leaves no record (see [`Queue`]).
    pub(crate) fn observed(&mut self, kind: WriteKind, key: &ObjectKey, live: Option<&Resource>) {
        let version = live.and_then(|r| r.meta().resource_version.clone());
        let api_version = self.api_version(kind);
        let entries = live.and_then(|r| r.meta().managed_fields.as_deref());
        let owned = entries.map(|e| Owned::of(e, FIELD_MANAGER, &api_version));
        let Owned { main, status } = owned.unwrap_or_default();
        let gone = live.is_none() && kind.watched().is_some();
        for (scope, fields) in [(Scope::Status, status), (Scope::Spec, main)] {
            let target = Target { scope, kind, key: key.clone() };
            if gone && let Some(gone_since_taken) = self.taken.get_mut(&target) {
                *gone_since_taken = true;
            }
            let ours = !gone && self.applied.get(&target).is_some_and(|(_, written)| *written == version);
            if !ours {
                self.applied.remove(&target);
            }
            let queued = self.staged.get(&target).or_else(|| self.pending.get(&target));
            let matched = queued.and_then(|op| live::matches(live, fields.as_ref(), &target, op));
            // Of our own write's echo, kept for a Service only: the one kind whose API-filled
            // fields the render reads back (its node ports); the echo sets off that render,
            // which takes the fields again (`submit`).
            match fields.filter(|_| !ours || kind == WriteKind::Service) {
                Some(fields) => self.owned.insert(target.clone(), (version.clone(), fields)),
                None => self.owned.remove(&target),
            };
            if let Some(at) = matched
                && let Some(op) = self.staged.remove(&target).or_else(|| self.pending.remove(&target))
            {
                self.pending.remove(&target);
                self.in_place(target, &op, at);
            }
        }
    }

    /// `op` could not be written: queue it again, unless something newer was queued.
    pub(crate) fn failed(&mut self, target: Target, op: Op) {
        self.taken.remove(&target);
        self.pending.entry(target).or_insert(op);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use k8s_openapi::api::apps::v1::Deployment;
    use k8s_openapi::api::core::v1::Service;
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::{FieldsV1, ManagedFieldsEntry, ObjectMeta};
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
        Op::Apply(json!({ "n": n }).into())
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
        Op::Apply(json!({ "metadata": { "name": "gw", "labels": labels } }).into())
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

    /// Issue #62: a new Service is written once. The render its echo sets off carries over
    /// what the API server filled in (label `b` here, for the node ports), which is not
    /// written: whether the echo comes after the write's answer or before it, and also when it
    /// meets the same body queued again by a render that ran while the write was on its way.
    #[test]
    fn the_render_a_new_services_echo_sets_off_writes_nothing() {
        let key = ObjectKey::new("ns", "gw");
        let t = spec(WriteKind::Service, &key);
        let live = service("1", &["a"], &["b"]);
        for order in ["answer first", "echo first", "queued again"] {
            let mut q = Queue::default();
            assert!(q.submit(t.clone(), labelled(&["a"]), none));
            q.flush();
            let (target, op) = q.take().pop_first().unwrap();
            if order == "queued again" {
                assert!(q.submit(t.clone(), labelled(&["a"]), none), "not seen yet");
                q.flush();
            }
            if order == "answer first" {
                q.written(target.clone(), &op, Some("1".into()));
            }
            q.observed(WriteKind::Service, &key, Some(&live));
            if order != "answer first" {
                q.written(target, &op, Some("1".into()));
            }
            assert!(!q.submit(t.clone(), labelled(&["a", "b"]), |_| Some(live.clone())), "{order}");
            q.flush();
            assert!(q.take().is_empty(), "{order}: nothing left to write");
            assert!(!q.submit(t.clone(), labelled(&["a", "b"]), none), "{order}: and recorded as written");
        }
    }

    /// A Service rewritten with new content (its node ports carried over already): the
    /// render its echo sets off finds the same body, writes nothing and keeps one record, as
    /// after its first write; a churn that rewrites Services leaves no more records behind.
    #[test]
    fn the_echo_of_a_rewritten_service_leaves_one_record() {
        let key = ObjectKey::new("ns", "gw");
        let t = spec(WriteKind::Service, &key);
        let mut q = Queue::default();
        q.written(t.clone(), &labelled(&["a", "b"]), Some("1".into()));
        assert!(q.submit(t.clone(), labelled(&["a", "b", "c"]), none), "new content");
        q.flush();
        let (target, op) = q.take().pop_first().unwrap();
        q.written(target, &op, Some("2".into()));
        q.observed(WriteKind::Service, &key, Some(&service("2", &["a", "b", "c"], &[])));
        assert!(!q.submit(t, labelled(&["a", "b", "c"]), none), "the echo's render: nothing new");
        assert_eq!(q.records(), 1);
    }

    /// DaemonSets are watched: the DELETE every Deployment upsert asks for is sent only for a
    /// DaemonSet the watchers show (upstream's answers 404 once per new Gateway).
    #[test]
    fn a_daemon_set_is_deleted_only_when_the_watchers_show_one() {
        let mut q = Queue::default();
        let t = spec(WriteKind::DaemonSet, &ObjectKey::new("ns", "gw"));
        assert!(!q.submit(t.clone(), Op::Delete, none), "none there: nothing to delete");
        assert_eq!(q.records(), 0, "an absence the watchers show is not recorded");
        let mut q = Queue::default();
        let lingering = || Some(Resource::DaemonSet(Default::default()));
        assert!(q.submit(t, Op::Delete, |_| lingering()));
    }

    /// `kind` object `key` as the watchers show it at `version`.
    fn seen(kind: WriteKind, key: &ObjectKey, version: &str) -> Resource {
        let metadata = ObjectMeta {
            name: Some(key.name.to_string()),
            namespace: Some(key.namespace.to_string()),
            resource_version: Some(version.into()),
            ..Default::default()
        };
        match kind {
            WriteKind::Service => Service { metadata, ..Default::default() }.into(),
            WriteKind::Deployment => Deployment { metadata, ..Default::default() }.into(),
            other => panic!("no sample object of {other:?}"),
        }
    }

    /// Writes what the queue holds, each write leaving its object at the next version.
    fn write_all(q: &mut Queue, versions: &mut u32) {
        q.flush();
        for (target, op) in q.take() {
            *versions += 1;
            let version = matches!(op, Op::Apply(_)).then(|| versions.to_string());
            q.written(target, &op, version);
        }
    }

    /// Issue #56: a Gateway's life, from the writer's side. While it is there, its Service and
    /// Deployment are on record (the DaemonSet every render asks gone never is); once it is
    /// deleted and the watchers show its objects gone, nothing is, however many Gateways came
    /// and went.
    #[test]
    fn a_gateway_that_is_gone_leaves_no_record() {
        let mut q = Queue::default();
        let mut versions = 0;
        for round in 0..3 {
            for i in 0..100 {
                let key = ObjectKey::new("ns", format!("gw-{i}"));
                for kind in [WriteKind::Service, WriteKind::Deployment] {
                    q.submit(spec(kind, &key), apply(round), none);
                }
                assert!(!q.submit(spec(WriteKind::DaemonSet, &key), Op::Delete, none));
            }
            write_all(&mut q, &mut versions);
            assert_eq!(q.records(), 200, "round {round}: two objects of each Gateway on record");
            // The writes come back through the watchers; the Gateways are deleted, and the
            // render asks their objects gone, which the watchers still show.
            for i in 0..100 {
                let key = ObjectKey::new("ns", format!("gw-{i}"));
                for kind in [WriteKind::Service, WriteKind::Deployment] {
                    let at = q.applied[&spec(kind, &key)].1.clone().expect("written at a version");
                    let live = seen(kind, &key, &at);
                    q.observed(kind, &key, Some(&live));
                    assert!(q.submit(spec(kind, &key), Op::Delete, |_| Some(live.clone())));
                }
                q.submit(spec(WriteKind::DaemonSet, &key), Op::Delete, none);
            }
            write_all(&mut q, &mut versions);
            assert_eq!(q.records(), 200, "deleted: on record until the watchers show it");
            for i in 0..100 {
                let key = ObjectKey::new("ns", format!("gw-{i}"));
                for kind in [WriteKind::Service, WriteKind::Deployment] {
                    q.observed(kind, &key, None);
                    assert!(!q.submit(spec(kind, &key), Op::Delete, none), "gone: nothing to delete");
                }
            }
            assert_eq!(q.records(), 0, "round {round}: nothing left of the Gateways");
        }
    }

    /// A delete answered after the watchers showed the object gone (someone else deleted it
    /// first; the writer's 404 counts as done) is not recorded: nothing would forget it.
    #[test]
    fn a_write_answered_after_the_object_was_seen_gone_is_not_recorded() {
        let mut q = Queue::default();
        let key = ObjectKey::new("ns", "gw");
        let (service, deployment) = (spec(WriteKind::Service, &key), spec(WriteKind::Deployment, &key));
        let (live_service, live_deployment) =
            (seen(WriteKind::Service, &key, "5"), seen(WriteKind::Deployment, &key, "6"));
        q.submit(service.clone(), Op::Delete, |_| Some(live_service.clone()));
        q.submit(deployment.clone(), apply(1), |_| Some(live_deployment.clone()));
        q.flush();
        let batch = q.take();
        q.observed(WriteKind::Service, &key, None);
        q.observed(WriteKind::Deployment, &key, None);
        for (target, op) in batch {
            let version = matches!(op, Op::Apply(_)).then(|| "7".to_string());
            q.written(target, &op, version);
        }
        assert_eq!(q.records(), 0);
        assert!(!q.submit(service, Op::Delete, none), "gone: not deleted again");
        // A write of the next batch is recorded as ever.
        q.submit(deployment.clone(), apply(2), none);
        q.flush();
        for (target, op) in q.take() {
            q.written(target, &op, Some("8".into()));
        }
        assert!(q.is_written(&deployment, &apply(2)));
    }
}
