//! What the writer writes, as plain data: one [`Op`] per [`Target`] object, derived from a
//! [`RenderOutput`], and the [`Queue`] that coalesces them (latest wins per object) and drops
//! the ones whose content was already written.

use super::live;
use k8s_openapi::api::core::v1::ConfigMap;
use kube::core::ApiResource;
use serde_json::{Value, json};
use std::collections::BTreeMap;
use stunner_gateway::index::{Kind, ObjectKey, Resource};
use stunner_gateway::render::{Owned, RenderOutput};

/// The kinds the operator writes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum WriteKind {
    GatewayClass,
    Gateway,
    UdpRoute,
    GatewayUdpRoute,
    Service,
    ConfigMap,
    Deployment,
    DaemonSet,
}

impl WriteKind {
    pub const ALL: [WriteKind; 8] = [
        WriteKind::GatewayClass,
        WriteKind::Gateway,
        WriteKind::UdpRoute,
        WriteKind::GatewayUdpRoute,
        WriteKind::Service,
        WriteKind::ConfigMap,
        WriteKind::Deployment,
        WriteKind::DaemonSet,
    ];

    /// The index kind of written objects of this kind: every written kind but ConfigMaps
    /// (legacy mode's, which nothing reads back) is watched.
    pub fn watched(self) -> Option<Kind> {
        Some(match self {
            WriteKind::GatewayClass => Kind::GatewayClass,
            WriteKind::Gateway => Kind::Gateway,
            WriteKind::UdpRoute => Kind::UdpRoute,
            WriteKind::GatewayUdpRoute => Kind::GatewayUdpRoute,
            WriteKind::Service => Kind::Service,
            WriteKind::Deployment => Kind::Deployment,
            WriteKind::DaemonSet => Kind::DaemonSet,
            WriteKind::ConfigMap => return None,
        })
    }

    /// The written kind that watched objects of `kind` are, if any.
    pub fn of(kind: Kind) -> Option<WriteKind> {
        WriteKind::ALL.into_iter().find(|w| w.watched() == Some(kind))
    }

    /// The kind's API names, from the kind table (ConfigMaps from their type).
    pub fn api(self) -> ApiResource {
        self.watched().map_or_else(|| ApiResource::erase::<ConfigMap>(&()), Kind::api)
    }

    /// Whether objects of this kind live in a namespace (all written kinds but GatewayClasses).
    pub fn is_namespaced(self) -> bool {
        self.watched().is_none_or(|k| !k.is_cluster_scoped())
    }

    /// The kind name in metrics (both route flavours are `UDPRoute`, as upstream counts them).
    pub fn name(self) -> String {
        self.api().kind
    }
}

/// The main object or its status subresource.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Scope {
    Spec,
    Status,
}

impl Scope {
    pub fn name(self) -> &'static str {
        match self {
            Scope::Spec => "spec",
            Scope::Status => "status",
        }
    }
}

/// One object (or one object's status) in the API server.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Target {
    pub scope: Scope,
    pub kind: WriteKind,
    pub key: ObjectKey,
}

/// A write: a server-side apply of this body, or a delete.
#[derive(Debug, Clone, PartialEq)]
pub enum Op {
    Apply(Value),
    Delete,
}

/// Every write `output` asks for, statuses first (as upstream orders them).
pub fn ops_of(output: &RenderOutput) -> Vec<(Target, Op)> {
    let mut ops = Vec::new();
    for (name, status) in &output.classes {
        ops.push(status_op(WriteKind::GatewayClass, &ObjectKey::cluster(name.clone()), status));
    }
    for (key, gw) in &output.gateways {
        if let Some(status) = &gw.status {
            ops.push(status_op(WriteKind::Gateway, key, status));
        }
    }
    for (r, status) in &output.routes {
        let kind = if r.kind == Kind::GatewayUdpRoute { WriteKind::GatewayUdpRoute } else { WriteKind::UdpRoute };
        ops.push(status_op(kind, &r.key, status));
    }
    for (key, gw) in &output.gateways {
        ops.extend(owned_op(WriteKind::Service, key, &gw.service));
        ops.extend(owned_op(WriteKind::Deployment, key, &gw.deployment));
        if gw.delete_daemon_set {
            ops.push((spec_target(WriteKind::DaemonSet, key), Op::Delete));
        }
    }
    for (key, cm) in &output.config_maps {
        ops.extend(owned_op(WriteKind::ConfigMap, key, cm));
    }
    ops
}

fn spec_target(kind: WriteKind, key: &ObjectKey) -> Target {
    Target { scope: Scope::Spec, kind, key: key.clone() }
}

/// The apply configuration of a status: identity and the whole status, nothing else, so the
/// operator's field manager owns the status fields and no spec field.
fn status_op(kind: WriteKind, key: &ObjectKey, status: &impl serde::Serialize) -> (Target, Op) {
    let mut metadata = json!({ "name": key.name });
    if !key.namespace.is_empty() {
        metadata["namespace"] = key.namespace.clone().into();
    }
    let api = kind.api();
    let body = json!({
        "apiVersion": api.api_version,
        "kind": api.kind,
        "metadata": metadata,
        "status": serde_json::to_value(status).unwrap_or_default(),
    });
    (Target { scope: Scope::Status, kind, key: key.clone() }, Op::Apply(body))
}

/// The rendered object is the desired state as a whole; its owner reference is already in it.
fn owned_op<T: serde::Serialize>(kind: WriteKind, key: &ObjectKey, owned: &Owned<T>) -> Option<(Target, Op)> {
    let op = match owned {
        Owned::Apply(obj) => Op::Apply(serde_json::to_value(obj).ok()?),
        Owned::Delete => Op::Delete,
        Owned::Keep => return None,
    };
    Some((spec_target(kind, key), op))
}

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
    use std::hash::{Hash, Hasher};
    let mut h = std::hash::DefaultHasher::new();
    match op {
        Op::Apply(body) => body.to_string().hash(&mut h),
        Op::Delete => "delete".hash(&mut h), // no JSON body serialises to a bare word
    }
    h.finish()
}

impl Queue {
    /// Queues `op` for `target`, replacing a queued one; returns false if it needs no write
    /// (and cancels a queued different one): `op` is what was last written, or the object as
    /// `live` returns it (what the watchers saw) already has its content.
    pub fn submit(&mut self, target: Target, op: Op, live: impl FnOnce(&Target) -> Option<Resource>) -> bool {
        if self.applied.get(&target).is_some_and(|(written, _)| *written == digest(&op)) {
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

    /// Takes every queued write, in target order (statuses first, then kinds in order).
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
    use stunner_gateway::render::GatewayOutput;

    /// Of a kind the watchers do not see: only what was written counts.
    fn target(name: &str) -> Target {
        spec_target(WriteKind::ConfigMap, &ObjectKey::new("ns", name))
    }

    fn none(_: &Target) -> Option<Resource> {
        None
    }

    /// A live object at `version` that matches no body of these tests.
    fn live(version: &str) -> Resource {
        let mut svc = Service::default();
        svc.metadata.resource_version = Some(version.into());
        Resource::Service(svc)
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
        let t = spec_target(WriteKind::Service, &key);
        let service = |version: &str, labels: &[(&str, &str)]| {
            let mut svc = Service::default();
            svc.metadata.name = Some("gw".into());
            svc.metadata.resource_version = Some(version.into());
            svc.metadata.labels = Some(labels.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect());
            Resource::Service(svc)
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
        let t = spec_target(WriteKind::DaemonSet, &ObjectKey::new("ns", "gw"));
        assert!(!q.submit(t.clone(), Op::Delete, none), "none there: nothing to delete");
        let mut q = Queue::default();
        let lingering = || Some(Resource::DaemonSet(Default::default()));
        assert!(q.submit(t, Op::Delete, |_| lingering()));
    }

    #[test]
    fn a_render_output_becomes_status_applies_then_owned_objects() {
        let mut out = RenderOutput::default();
        let svc = Service {
            metadata: k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta {
                name: Some("gw".into()),
                namespace: Some("ns".into()),
                ..Default::default()
            },
            ..Default::default()
        };
        out.gateways.insert(
            ObjectKey::new("ns", "gw"),
            GatewayOutput {
                config: Owned::Keep,
                status: Some(Default::default()),
                service: Owned::Apply(svc),
                deployment: Owned::Delete,
                delete_daemon_set: true,
            },
        );
        out.classes.insert("stunner".into(), Default::default());
        let ops = ops_of(&out);
        let kinds: Vec<_> = ops.iter().map(|(t, _)| (t.scope, t.kind)).collect();
        assert_eq!(
            kinds,
            [
                (Scope::Status, WriteKind::GatewayClass),
                (Scope::Status, WriteKind::Gateway),
                (Scope::Spec, WriteKind::Service),
                (Scope::Spec, WriteKind::Deployment),
                (Scope::Spec, WriteKind::DaemonSet),
            ]
        );
        let Op::Apply(class) = &ops[0].1 else { panic!() };
        assert_eq!(class["apiVersion"], "gateway.networking.k8s.io/v1");
        assert_eq!(class["metadata"], json!({ "name": "stunner" }), "cluster-scoped: no namespace");
        let Op::Apply(svc) = &ops[2].1 else { panic!() };
        assert_eq!((&svc["apiVersion"], &svc["kind"]), (&json!("v1"), &json!("Service")));
        assert_eq!(ops[3].1, Op::Delete);
    }
}
