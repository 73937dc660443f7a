//! The table of watched kinds: one line per kind, from which everything that must know the
//! list follows — the [`Resource`] and [`Kind`] enums, the per-kind stores and their accessors,
//! decoding by `apiVersion`/`kind`, the API names (group, version, kind, plural and scope, from
//! the type's `kube::Resource` impl) and typed dispatch ([`Kind::visit`]) for whoever needs the
//! Rust type of a kind (the cluster source's watchers).
//!
//! A line reads `Variant(WireType) in field by controller` or, for a kind stored in another
//! shape than it is read, `Variant(WireType => StoredType) in field by controller`
//! (`StoredType: From<WireType>`); `controller` is the upstream controller that watches the
//! kind ([`Controller`], the `controller` label of the reconcile metrics); `also "v"` lists older
//! versions whose objects decode with the same type.
//!
//! Upstream watches Secrets from two controllers (TLS certificates from `gateway`, auth
//! credentials from `gatewayconfig`); here they count for `gatewayconfig`, where most of them
//! belong. ReferenceGrants, which upstream never reads, count for `udproute`, whose backends
//! they admit.

use super::controller::Controller;
use super::deployment_record::DeploymentRecord;
use super::endpoint_addresses::EndpointAddresses;
use super::error::DecodeError;
use super::key::ObjectKey;
use super::referrers::Referrers;
use super::store::Store;
use crate::resources::redact;
use crate::resources::{
    Dataplane, Gateway, GatewayClass, GatewayConfig, GatewayTcpRoute, GatewayUdpRoute, ListenerSet, ReferenceGrant,
    StaticService, UdpRoute,
};
use hashbrown::HashMap;
use k8s_openapi::api::apps::v1::{DaemonSet, Deployment};
use k8s_openapi::api::core::v1::{Endpoints, Namespace, Node, Secret, Service};
use k8s_openapi::api::discovery::v1::EndpointSlice;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use kube::core::ApiResource;
use serde::Serialize;
use serde::de::DeserializeOwned;
use serde_json::Value;
use std::fmt::Debug;

/// The route kinds, each stored in STUNner's v1 shape, in masking order: a route hides the
/// routes of later kinds with the same namespace and name (their clusters would share a name).
pub const ROUTE_KINDS: [Kind; 3] = [Kind::UdpRoute, Kind::GatewayUdpRoute, Kind::GatewayTcpRoute];

/// One object of the index: its kind and key (hashed as its view: see `super::lookup`).
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
pub struct ObjRef {
    pub kind: Kind,
    pub key: ObjectKey,
}

impl ObjRef {
    pub fn new(kind: Kind, key: ObjectKey) -> Self {
        ObjRef { kind, key }
    }
}

/// Every watched object, with forward and reverse references between them. Declared with the
/// table because its storage is one typed map per kind; what it does is in the parent module
/// (changes), `refs` (what a change affects) and `grants` (ReferenceGrants).
#[derive(Debug, Clone, Default)]
pub struct Index {
    pub(super) stores: Stores,
    /// What each object refers to (see `refs::forward_refs`).
    pub(super) forward: HashMap<ObjRef, Vec<ObjRef>>,
    /// The reverse of `forward`: who refers to an object (which may not exist). Hashed, as
    /// the stores are (see `super::store`): the render asks it for every Gateway's routes.
    pub(super) reverse: HashMap<ObjRef, Referrers<ObjRef>>,
}

impl Resource {
    /// The object's key; cluster-scoped kinds ignore any namespace the object carries.
    pub fn key(&self) -> ObjectKey {
        let meta = self.meta();
        let name = meta.name.clone().unwrap_or_default();
        if self.kind().is_cluster_scoped() {
            ObjectKey::cluster(name)
        } else {
            ObjectKey::new(meta.namespace.clone().unwrap_or_default(), name)
        }
    }

    pub fn obj_ref(&self) -> ObjRef {
        ObjRef::new(self.kind(), self.key())
    }
}

/// What a type read from the API server (or a manifest) needs to be a watched kind.
pub trait Wire:
    kube::Resource<DynamicType = (), Scope: 'static>
    + Clone
    + DeserializeOwned
    + Serialize
    + Debug
    + Send
    + Sync
    + 'static
    + Into<Resource>
{
}

impl<T> Wire for T where
    T: kube::Resource<DynamicType = (), Scope: 'static>
        + Clone
        + DeserializeOwned
        + Serialize
        + Debug
        + Send
        + Sync
        + 'static
        + Into<Resource>
{
}

/// Code generic over the Rust type of a kind, run by [`Kind::visit`] with the kind's wire type.
pub trait KindVisitor {
    type Output;
    fn visit<K: Wire>(self, kind: Kind) -> Self::Output;
}

/// Whether `K` is cluster-scoped, from its `kube::Resource::Scope`.
/// A 64-bit digest of `value` as JSON, hashed as it is serialized (no JSON text is built):
/// equal values, equal digests. For comparisons within one process only (the hasher is not
/// stable across builds).
pub fn content_digest<T: Serialize + ?Sized>(value: &T) -> u64 {
    let mut hasher = DigestWriter(std::hash::DefaultHasher::new());
    serde_json::to_writer(&mut hasher, value).expect("an object serializes: its maps have string keys");
    std::hash::Hasher::finish(&hasher.0)
}

/// Feeds what is written into a hasher.
struct DigestWriter(std::hash::DefaultHasher);

impl std::io::Write for DigestWriter {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        std::hash::Hasher::write(&mut self.0, buf);
        Ok(buf.len())
    }

    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

fn cluster_scoped<K: Wire>() -> bool {
    std::any::TypeId::of::<K::Scope>() == std::any::TypeId::of::<k8s_openapi::ClusterResourceScope>()
}

/// Whether `K` is the type of objects of `group`/`version`/`kind`, or of an older version
/// listed in `also`.
fn names<K: Wire>(group: &str, version: &str, kind: &str, also: &[&str]) -> bool {
    K::group(&()) == group && K::kind(&()) == kind && (K::version(&()) == version || also.contains(&version))
}

fn typed<K: Wire>(v: Value) -> Result<Resource, DecodeError> {
    let name = v.pointer("/metadata/name").and_then(Value::as_str).unwrap_or_default().to_string();
    let typed: K = serde_path_to_error::deserialize(v).map_err(|e| DecodeError::Malformed {
        kind: K::kind(&()).into(),
        name,
        reason: decode_failure(&K::kind(&()), &e.path().to_string(), &e.inner().to_string()),
    })?;
    Ok(typed.into())
}

/// Why the field at `path` did not decode, from serde's `message`, which quotes the value it
/// could not take (or, for a Secret's base64, a character of it and where): of a secret field
/// only what was expected is said, of any other field the message without the values it quotes.
fn decode_failure(kind: &str, path: &str, message: &str) -> String {
    if !redact::is_secret_field(kind, path) {
        return format!("{path}: {}", redact::without_values(message));
    }
    match message.split_once(", expected ") {
        Some((_, expected)) => format!("{path}: {}: expected {expected}", redact::REDACTED),
        None => format!("{path}: {}: does not decode as its type", redact::REDACTED),
    }
}

/// The stored type of a table line: the wire type unless the line names another.
macro_rules! stored {
    ($wire:ty) => {
        $wire
    };
    ($wire:ty => $stored:ty) => {
        $stored
    };
}

macro_rules! kinds {
    ($($(#[$doc:meta])* $variant:ident($wire:ty $(=> $stored:ty)?) in $field:ident by $controller:ident $(, also $($older:literal),+)?;)*) => {
        /// One watched object. [`Resource::GatewayUdpRoute`] and [`Resource::GatewayTcpRoute`]
        /// hold Gateway API routes already converted to STUNner's v1 shape (see `super::convert`),
        /// [`Resource::EndpointSlice`] what the render reads of a slice (`EndpointAddresses`),
        /// [`Resource::Deployment`] a `DeploymentRecord`.
        // Each object is boxed: the store keeps the box as it is (see `super::store`), and a
        // `Resource` moves as a pointer, not as the 2.4 KiB of its largest kind.
        #[derive(Debug, Clone, PartialEq)]
        pub enum Resource {
            $($(#[$doc])* $variant(Box<stored!($wire $(=> $stored)?)>),)*
        }

        /// The kinds the index stores.
        #[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
        pub enum Kind {
            $($variant,)*
        }

        impl Kind {
            /// Every kind, in declaration order.
            pub const ALL: &'static [Kind] = &[$(Kind::$variant,)*];

            /// Whether objects of this kind are cluster-scoped (their keys have no namespace).
            pub fn is_cluster_scoped(self) -> bool {
                match self {
                    $(Kind::$variant => cluster_scoped::<$wire>(),)*
                }
            }

            /// The kind's API names, as the API server serves it.
            pub fn api(self) -> ApiResource {
                match self {
                    $(Kind::$variant => ApiResource::erase::<$wire>(&()),)*
                }
            }

            /// The kind whose objects carry this `apiVersion` group and version, and `kind`.
            pub(crate) fn named(group: &str, version: &str, kind: &str) -> Option<Kind> {
                $(
                    let also: &[&str] = &[$($($older),+)?];
                    if names::<$wire>(group, version, kind, also) {
                        return Some(Kind::$variant);
                    }
                )*
                None
            }

            /// Decodes an object of this kind.
            pub fn decode(self, v: Value) -> Result<Resource, DecodeError> {
                match self {
                    $(Kind::$variant => typed::<$wire>(v),)*
                }
            }

            /// Runs `visitor` with this kind's wire type.
            pub fn visit<V: KindVisitor>(self, visitor: V) -> V::Output {
                match self {
                    $(Kind::$variant => visitor.visit::<$wire>(self),)*
                }
            }
        }

        impl Controller {
            /// The upstream controller that watches objects of `kind` (operator-behavior.md §2.2):
            /// the table's `by` column.
            pub fn of(kind: Kind) -> Controller {
                match kind {
                    $(Kind::$variant => Controller::$controller,)*
                }
            }
        }

        $(impl From<$wire> for Resource {
            fn from(o: $wire) -> Self {
                Resource::$variant(Box::new(<stored!($wire $(=> $stored)?)>::from(o)))
            }
        })*

        impl Resource {
            pub fn kind(&self) -> Kind {
                match self {
                    $(Resource::$variant(_) => Kind::$variant,)*
                }
            }

            pub fn meta(&self) -> &ObjectMeta {
                match self {
                    $(Resource::$variant(o) => &o.metadata,)*
                }
            }

            pub fn meta_mut(&mut self) -> &mut ObjectMeta {
                match self {
                    $(Resource::$variant(o) => &mut o.metadata,)*
                }
            }

            /// The object as JSON, in its stored shape.
            pub fn to_value(&self) -> Result<Value, serde_json::Error> {
                match self {
                    $(Resource::$variant(o) => serde_json::to_value(o),)*
                }
            }

            /// A digest of the object's content (its stored shape, as JSON): equal objects
            /// have equal digests, different ones all but certainly (64 bits) different. What a
            /// source keeps of the objects it handed on, in place of a copy of each.
            pub fn digest(&self) -> u64 {
                match self {
                    $(Resource::$variant(o) => content_digest(o),)*
                }
            }
        }

        #[derive(Debug, Clone, Default)]
        pub(super) struct Stores {
            $($field: Store<stored!($wire $(=> $stored)?)>,)*
        }

        impl Stores {
            /// Stores `r`, replacing the object of the same kind and key.
            pub(super) fn insert(&mut self, key: ObjectKey, r: Resource) {
                match r {
                    $(Resource::$variant(o) => { self.$field.insert(key, o); })*
                }
            }

            pub(super) fn remove(&mut self, kind: Kind, key: &ObjectKey) -> Option<Resource> {
                match kind {
                    $(Kind::$variant => self.$field.remove(key).map(Resource::$variant),)*
                }
            }

            pub(super) fn get(&self, r: &ObjRef) -> Option<Resource> {
                match r.kind {
                    $(Kind::$variant => self.$field.get(&r.key).map(|o| Resource::$variant(Box::new(o.clone()))),)*
                }
            }

            pub(super) fn contains(&self, r: &ObjRef) -> bool {
                match r.kind {
                    $(Kind::$variant => self.$field.contains_key(&r.key),)*
                }
            }

            /// The objects of every kind.
            pub(super) fn len(&self) -> usize {
                0 $(+ self.$field.len())*
            }
        }

        impl Index {
            $(
                $(#[$doc])*
                pub fn $field(&self) -> &Store<stored!($wire $(=> $stored)?)> {
                    &self.stores.$field
                }
            )*
        }
    };
}

kinds! {
    /// Gateway API `GatewayClass` (cluster-scoped).
    GatewayClass(GatewayClass) in gateway_classes by gateway, also "v1beta1";
    /// Gateway API `Gateway`.
    Gateway(Gateway) in gateways by gateway, also "v1beta1";
    /// STUNner `GatewayConfig`.
    GatewayConfig(GatewayConfig) in gateway_configs by gatewayconfig;
    /// STUNner `Dataplane` (cluster-scoped).
    Dataplane(Dataplane) in dataplanes by dataplane;
    /// STUNner `UDPRoute` (`stunner.l7mp.io/v1`).
    UdpRoute(UdpRoute) in udp_routes by udproute;
    /// Gateway API `UDPRoute` (`gateway.networking.k8s.io/v1alpha2`, or `v1`: the same
    /// object seen through either version), in STUNner's v1 shape.
    GatewayUdpRoute(GatewayUdpRoute => UdpRoute) in gateway_udp_routes by udproute, also "v1";
    /// Gateway API `TCPRoute` (`v1alpha2` or `v1`), in STUNner's v1 shape: its cluster relays
    /// to TCP peers. Upstream has no controller for it; it counts for `udproute`, as routes do.
    GatewayTcpRoute(GatewayTcpRoute => UdpRoute) in gateway_tcp_routes by udproute, also "v1";
    /// STUNner `StaticService`.
    StaticService(StaticService) in static_services by udproute;
    /// Core `Service`: route backends and the Gateways' own LoadBalancer Services.
    Service(Service) in services by udproute;
    /// `discovery.k8s.io/v1` `EndpointSlice` of backend Services, as its addresses.
    EndpointSlice(EndpointSlice => EndpointAddresses) in endpoint_slices by udproute;
    /// Core `Endpoints`, used instead of EndpointSlices when those are disabled.
    Endpoints(Endpoints) in endpoints by udproute;
    /// Core `Secret`: auth credentials and TLS certificates.
    Secret(Secret) in secrets by gatewayconfig;
    /// Core `Node` (cluster-scoped): public addresses for NodePort Services.
    Node(Node) in nodes by node;
    /// Core `Namespace` (cluster-scoped): route attachment by namespace selector.
    Namespace(Namespace) in namespaces by udproute;
    /// `apps/v1` `Deployment`: the managed dataplanes, as what the render reads of them.
    Deployment(Deployment => DeploymentRecord) in deployments by gateway;
    /// `apps/v1` `DaemonSet` labelled as ours: a dataplane of another kind, left under a
    /// Gateway's name, that the Gateway's Deployment replaces.
    DaemonSet(DaemonSet) in daemon_sets by gateway;
    /// Gateway API `ReferenceGrant`: which cross-namespace backend references are allowed
    /// (read with `--enforce-reference-grants` only).
    ReferenceGrant(ReferenceGrant) in reference_grants by udproute, also "v1";
    /// Gateway API `ListenerSet` (`v1`, GEP-1713): listeners a Gateway that allows them takes
    /// in beside its own (watched while served). Upstream has no controller for it; it counts
    /// for `gateway`, whose listeners it extends.
    ListenerSet(ListenerSet) in listener_sets by gateway;
}
