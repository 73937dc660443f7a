//! The writes still to do: the [`Queue`] coalesces [`Op`]s (latest wins per object) and drops
//! the ones whose content was already written, or that the watchers show in place already.

use super::live;
use super::ops::{Op, Scope, Target, WriteKind};
use std::collections::BTreeMap;
use stunner_gateway::index::{ObjectKey, Resource, content_digest};

/// The writes still to do, and the content last written per object.
///
/// `applied` is what this process wrote (a digest of it: the bodies themselves would double
/// the memory the owned objects take), with the resourceVersion the write left. It starts
/// empty, so after a restart (or for a new leader) everything is applied once more, which a
/// server-side apply of identical content turns into a no-op in the API server (no new
/// resourceVersion, no watch event). When the watchers see the object at another
/// resourceVersion (someone else changed or deleted it, or another leader wrote it), the
/// entry is forgotten and the next render writes it again: drift is repaired.
#[derive(Debug, Default)]
pub struct Queue {
    pending: BTreeMap<Target, Op>,
    applied: BTreeMap<Target, (u64, Option<String>)>,
}

/// A 64-bit digest of a write: a collision (odds 2^-64 per object) would skip one write.
fn digest(op: &Op) -> u64 {
    match op {
        Op::Apply(body) => content_digest(body),
        Op::Delete => content_digest("delete"), // no object body serialises to a bare string
    }
}

impl Queue {
    /// Queues `op` for `target`, replacing a queued one; returns false if it needs no write
    /// (and cancels a queued different one): `op` is what was last written, or the object as
    /// `live` returns it (what the watchers saw) already has its content.
    pub fn submit(&mut self, target: Target, op: Op, live: impl FnOnce(&Target) -> Option<Resource>) -> bool {
        if self.is_written(&target, &op) {
            self.pending.remove(&target);
            return false;
        }
        if let Some(version) = live::matches(live(&target).as_ref(), &target, &op) {
            self.pending.remove(&target);
            self.written(target, &op, version);
            return false;
        }
        self.pending.insert(target, op);
        true
    }

    /// Whether `op` is what was last written to `target` (and the watchers showed nothing
    /// else since).
    pub fn is_written(&self, target: &Target, op: &Op) -> bool {
        self.applied.get(target).is_some_and(|(written, _)| *written == digest(op))
    }

    /// Takes every queued write, in target order (objects before statuses, kinds in order).
    pub fn take(&mut self) -> BTreeMap<Target, Op> {
        std::mem::take(&mut self.pending)
    }

    /// `op` was written, leaving the object at `version` (`None`: deleted).
    pub fn written(&mut self, target: Target, op: &Op, version: Option<String>) {
        self.applied.insert(target, (digest(op), version));
    }

    /// The watchers saw object `key` of `kind` as `live` (`None`: deleted). Unless at the
    /// version our last write left, what we wrote is no longer what is there; a queued write
    /// the object already matches (another leader wrote it) is dropped.
    pub fn observed(&mut self, kind: WriteKind, key: &ObjectKey, live: Option<&Resource>) {
        let version = live.and_then(|r| r.meta().resource_version.as_deref());
        for scope in [Scope::Spec, Scope::Status] {
            let target = Target { scope, kind, key: key.clone() };
            if self.applied.get(&target).is_some_and(|(_, written)| written.as_deref() != version) {
                self.applied.remove(&target);
            }
            let matched = self.pending.get(&target).and_then(|op| live::matches(live, &target, op));
            if let Some(version) = matched
                && let Some(op) = self.pending.remove(&target)
            {
                self.written(target, &op, version);
            }
        }
    }

    /// `op` could not be written: queue it again, unless something newer was queued.
    pub fn failed(&mut self, target: Target, op: Op) {
        self.pending.entry(target).or_insert(op);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use k8s_openapi::api::core::v1::Service;
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
        let batch = q.take();
        assert_eq!(batch.into_iter().collect::<Vec<_>>(), [(target("a"), apply(2)), (target("b"), Op::Delete)]);
        q.written(target("a"), &apply(2), Some("1".into()));
        q.written(target("b"), &Op::Delete, None);
        assert!(!q.submit(target("a"), apply(2), none), "same content: no write");
        assert!(!q.submit(target("b"), Op::Delete, none));
        assert!(q.take().is_empty());
        // A change queued then reverted before the writer got to it is dropped.
        assert!(q.submit(target("a"), apply(3), none));
        assert!(!q.submit(target("a"), apply(2), none));
        assert!(q.take().is_empty());
    }

    #[test]
    fn a_failed_write_is_retried_unless_superseded() {
        let mut q = Queue::default();
        q.submit(target("a"), apply(1), none);
        q.submit(target("b"), apply(1), none);
        q.take();
        q.submit(target("b"), apply(2), none);
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

    #[test]
    fn what_the_watchers_show_in_place_is_not_written() {
        let mut q = Queue::default();
        let key = ObjectKey::new("ns", "gw");
        let t = spec(WriteKind::Service, &key);
        let service = |version: &str, labels: &[(&str, &str)]| {
            let mut svc = Service::default();
            svc.metadata.name = Some("gw".into());
            svc.metadata.resource_version = Some(version.into());
            svc.metadata.labels = Some(labels.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect());
            Resource::from(svc)
        };
        let before = service("5", &[]);
        let body = Op::Apply(json!({ "metadata": { "name": "gw" } }));
        assert!(!q.submit(t.clone(), body.clone(), |_| Some(before.clone())), "already in place");
        assert!(!q.submit(t.clone(), body, |_| None), "and recorded as written");
        // A replica that does not lead queues a change; the leader's write of it comes back.
        let labelled = Op::Apply(json!({ "metadata": { "name": "gw", "labels": { "a": "b" } } }));
        assert!(q.submit(t.clone(), labelled.clone(), |_| Some(before.clone())));
        q.observed(WriteKind::Service, &key, Some(&service("6", &[("a", "b")])));
        assert!(q.take().is_empty(), "written by the leader: nothing left to write");
        assert!(!q.submit(t, labelled, |_| None));
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
