//! What the writer writes, as plain data: one [`Op`] per [`Target`] object, derived from a
//! [`RenderOutput`]. The [`super::queue`] coalesces them.

use super::served::Served;
use k8s_openapi::api::core::v1::ConfigMap;
use kube::core::ApiResource;
use serde_json::{Value, json};
use stunner_gateway::index::{Kind, ObjRef, ObjectKey};
use stunner_gateway::render::{GatewayOutput, Owned, RenderOutput, SerializedStatus, owned_key, tcp_service_key};

/// The field manager of every write, as `kubectl get --show-managed-fields` shows it.
pub const FIELD_MANAGER: &str = "stunner-gateway-operator";

/// The kinds the operator writes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum WriteKind {
    GatewayClass,
    Gateway,
    UdpRoute,
    GatewayUdpRoute,
    GatewayTcpRoute,
    Service,
    ConfigMap,
    Deployment,
    DaemonSet,
    ListenerSet,
}

impl WriteKind {
    pub(crate) const ALL: [WriteKind; 10] = [
        WriteKind::GatewayClass,
        WriteKind::Gateway,
        WriteKind::UdpRoute,
        WriteKind::GatewayUdpRoute,
        WriteKind::GatewayTcpRoute,
        WriteKind::Service,
        WriteKind::ConfigMap,
        WriteKind::Deployment,
        WriteKind::DaemonSet,
        WriteKind::ListenerSet,
    ];

    /// The index kind of written objects of this kind: every written kind but ConfigMaps
    /// (legacy mode's, which nothing reads back) is watched.
    pub(crate) fn watched(self) -> Option<Kind> {
        Some(match self {
            WriteKind::GatewayClass => Kind::GatewayClass,
            WriteKind::Gateway => Kind::Gateway,
            WriteKind::UdpRoute => Kind::UdpRoute,
            WriteKind::GatewayUdpRoute => Kind::GatewayUdpRoute,
            WriteKind::GatewayTcpRoute => Kind::GatewayTcpRoute,
            WriteKind::Service => Kind::Service,
            WriteKind::Deployment => Kind::Deployment,
            WriteKind::DaemonSet => Kind::DaemonSet,
            WriteKind::ListenerSet => Kind::ListenerSet,
            WriteKind::ConfigMap => return None,
        })
    }

    /// The written kind that watched objects of `kind` are, if any.
    pub(crate) fn of(kind: Kind) -> Option<WriteKind> {
        WriteKind::ALL.into_iter().find(|w| w.watched() == Some(kind))
    }

    /// The kind's API names, from the kind table (ConfigMaps from their type).
    pub(crate) fn api(self) -> ApiResource {
        self.watched().map_or_else(|| ApiResource::erase::<ConfigMap>(&()), Kind::api)
    }

    /// The kind's API names as writes go through them: a versioned route kind's at the
    /// version `served` names.
    pub(crate) fn served_api(self, served: &Served) -> ApiResource {
        match self.watched().filter(|k| Served::is_versioned(*k)) {
            Some(kind) => served.api(kind),
            None => self.api(),
        }
    }

    /// Whether objects of this kind live in a namespace (all written kinds but GatewayClasses).
    pub(crate) fn is_namespaced(self) -> bool {
        self.watched().is_none_or(|k| !k.is_cluster_scoped())
    }

    /// The kind name in metrics (both route flavours are `UDPRoute`, as upstream counts them).
    pub(crate) fn name(self) -> String {
        self.api().kind
    }
}

/// The main object or its status subresource. Statuses order first: the writer writes a
/// render's statuses before its objects, as upstream's updater does, so whoever waits for an
/// object (a Deployment, legacy mode's ConfigMap) finds the statuses of the same render.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Scope {
    Status,
    Spec,
}

impl Scope {
    pub(crate) fn name(self) -> &'static str {
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
    pub(crate) key: ObjectKey,
}

/// A write: a server-side apply of this body, or a delete.
#[derive(Debug, Clone, PartialEq)]
pub enum Op {
    Apply(Body),
    Delete,
}

/// A server-side apply body, kept as its JSON text until it is sent. The writer sends one
/// request at a time, so after a start every Gateway's Service, Deployment and status wait in
/// its queue at once: as `Value` trees (a map node and a `String` per field, ~40 KiB for a
/// Gateway's Deployment and Service) they were most of the operator's peak heap, and the peak
/// is what stays resident (BENCHMARKS.md "Cluster scale"); as text, ~3 KiB. A body is parsed
/// again only to be sent, or compared with what the watchers show.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Body(Box<str>);

impl Body {
    /// `object` as JSON text (`None` if it does not serialize).
    pub(crate) fn of(object: &impl serde::Serialize) -> Option<Body> {
        serde_json::to_string(object).ok().map(|text| Body(text.into_boxed_str()))
    }

    /// The body as a `Value` again.
    pub(crate) fn value(&self) -> Value {
        serde_json::from_str(&self.0).expect("a body's own JSON reads back")
    }

    /// The JSON text.
    pub(crate) fn text(&self) -> &str {
        &self.0
    }
}

impl From<Value> for Body {
    fn from(value: Value) -> Body {
        Body(value.to_string().into_boxed_str())
    }
}

/// Every write `output` asks for, in no particular order: the queue writes in [`Target`]
/// order.
pub(crate) fn ops_of(output: &RenderOutput) -> Vec<(Target, Op)> {
    let classes = output.classes.iter().map(|(name, status)| {
        SerializedStatus::new(ObjRef::new(Kind::GatewayClass, ObjectKey::cluster(name.as_str())), status)
    });
    let routes = output.routes.iter().map(|(r, status)| SerializedStatus::new(r.clone(), status));
    let gateways = output.gateways.iter().filter_map(|(key, gw)| {
        Some(SerializedStatus::new(ObjRef::new(Kind::Gateway, key.clone()), gw.status.as_ref()?))
    });
    let listener_sets = output.gateways.values().flat_map(GatewayOutput::listener_set_statuses);
    let mut ops: Vec<_> = classes.chain(routes).chain(gateways).chain(listener_sets).filter_map(status_op).collect();
    ops.extend(output.config_maps.iter().filter_map(|(key, cm)| config_map_op(key, cm)));
    for (key, gw) in &output.gateways {
        ops.extend(owned_ops(key, gw));
    }
    ops
}

/// Legacy mode: a GatewayConfig's ConfigMap write, if any.
pub fn config_map_op(key: &ObjectKey, config_map: &Owned<ConfigMap>) -> Option<(Target, Op)> {
    owned_op(WriteKind::ConfigMap, key, config_map)
}

/// The writes of one Gateway's own objects: its Services and dataplane (a Deployment or a
/// DaemonSet, and the delete of the other kind), named as `owned_key` and `tcp_service_key`
/// name them. Its status is [`status_op`]'s.
pub fn owned_ops(gateway: &ObjectKey, gw: &GatewayOutput) -> Vec<(Target, Op)> {
    let key = &owned_key(gateway);
    let mut ops = Vec::new();
    ops.extend(owned_op(WriteKind::Service, key, &gw.service));
    ops.extend(owned_op(WriteKind::Service, &tcp_service_key(gateway), &gw.tcp_service));
    ops.extend(owned_op(WriteKind::Deployment, key, &gw.deployment));
    ops.extend(owned_op(WriteKind::DaemonSet, key, &gw.daemon_set));
    ops
}

fn spec_target(kind: WriteKind, key: &ObjectKey) -> Target {
    Target { scope: Scope::Spec, kind, key: key.clone() }
}

/// A status write (a GatewayClass's, a Gateway's, any route kind's; `None` for a kind the
/// operator does not write): the apply configuration of identity and the whole status,
/// nothing else, so the operator's field manager owns the status fields and no spec field.
/// The status goes into the body as it was serialized.
pub fn status_op(status: SerializedStatus) -> Option<(Target, Op)> {
    let SerializedStatus { object: ObjRef { kind, key }, status } = status;
    let kind = WriteKind::of(kind)?;
    let mut metadata = json!({ "name": key.name.as_str() });
    if !key.namespace.is_empty() {
        metadata["namespace"] = key.namespace.as_str().into();
    }
    let api = kind.api();
    let body = json!({
        "apiVersion": api.api_version,
        "kind": api.kind,
        "metadata": metadata,
        "status": status,
    });
    Some((Target { scope: Scope::Status, kind, key }, Op::Apply(body.into())))
}

/// The rendered object is the desired state as a whole; its owner reference is already in it.
fn owned_op<T: serde::Serialize>(kind: WriteKind, key: &ObjectKey, owned: &Owned<T>) -> Option<(Target, Op)> {
    let op = match owned {
        Owned::Apply(obj) => Op::Apply(Body::of(obj)?),
        Owned::Delete => Op::Delete,
        Owned::Keep => return None,
    };
    Some((spec_target(kind, key), op))
}

#[cfg(test)]
mod tests {
    use super::*;
    use k8s_openapi::api::core::v1::Service;

    #[test]
    fn a_render_output_becomes_owned_object_and_status_writes() {
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
                tcp_service: Owned::Keep,
                deployment: Owned::Delete,
                daemon_set: Owned::Delete,
                invalid_config: None,
                listener_sets: [(ObjectKey::new("tenant", "ls"), Default::default())].into(),
            },
        );
        out.classes.insert("stunner".into(), Default::default());
        let mut ops = ops_of(&out);
        ops.sort_by(|(a, _), (b, _)| a.cmp(b));
        let kinds: Vec<_> = ops.iter().map(|(t, _)| (t.scope, t.kind)).collect();
        assert_eq!(
            kinds,
            [
                (Scope::Status, WriteKind::GatewayClass),
                (Scope::Status, WriteKind::Gateway),
                (Scope::Status, WriteKind::ListenerSet),
                (Scope::Spec, WriteKind::Service),
                (Scope::Spec, WriteKind::Deployment),
                (Scope::Spec, WriteKind::DaemonSet),
            ],
            "statuses first"
        );
        let Op::Apply(class) = &ops[0].1 else { panic!() };
        let class = class.value();
        assert_eq!(class["apiVersion"], "gateway.networking.k8s.io/v1");
        assert_eq!(class["metadata"], json!({ "name": "stunner" }), "cluster-scoped: no namespace");
        let Op::Apply(ls) = &ops[2].1 else { panic!() };
        let ls = ls.value();
        assert_eq!((&ls["apiVersion"], &ls["kind"]), (&json!("gateway.networking.k8s.io/v1"), &json!("ListenerSet")));
        assert_eq!(ls["metadata"], json!({ "name": "ls", "namespace": "tenant" }));
        let Op::Apply(svc) = &ops[3].1 else { panic!() };
        let svc = svc.value();
        assert_eq!((&svc["apiVersion"], &svc["kind"]), (&json!("v1"), &json!("Service")));
        assert_eq!((&ops[4].1, &ops[5].1), (&Op::Delete, &Op::Delete));
    }

    /// A queued apply keeps its body as the JSON text it is sent as, not as a `Value` tree
    /// (see [`Body`]), and reads back as the object.
    #[test]
    fn an_apply_body_is_kept_as_json_text() {
        let mut deployment = k8s_openapi::api::apps::v1::Deployment::default();
        deployment.metadata.name = Some("gw".into());
        deployment.metadata.labels = Some([("app".to_string(), "stunner".to_string())].into());
        let Some((_, Op::Apply(body))) =
            owned_op(WriteKind::Deployment, &ObjectKey::new("ns", "gw"), &Owned::Apply(&deployment))
        else {
            panic!("an apply");
        };
        assert_eq!(body.text(), serde_json::to_string(&deployment).unwrap());
        assert_eq!(body.value(), serde_json::to_value(&deployment).unwrap());
    }
}
