//! Who may read which configs (`--cds-authorization`, docs/deploy.md "CDS authorization").
//!
//! The CDS hands out TURN credentials and TLS keys, and stunnerd presents no credential of its
//! own. In `pod` mode a client is therefore known by its source address: a single config
//! `<ns>/<name>` goes only to an address of a running dataplane pod of that Gateway (the
//! [`DataplaneIndex`], fed by a watcher of the pods of our Deployments); lists of many configs
//! and the client table only to loopback (`kubectl port-forward`, guarded by the API server's
//! RBAC) and to the operator's own pods. Both transports call [`Authorizer::authorize`], so
//! HTTP, WebSocket and gRPC make one decision.
//!
//! With `--cds-token-review` a client may also present a Kubernetes bearer token (a tool
//! outside port-forward): a [`TokenReviewer`] then decides instead of the address, by the
//! RBAC of the token's user on the Gateways ([`CONFIG_VERB`]).

use super::metrics::RefusalReason;
use super::store::Scope;
use futures_util::future::BoxFuture;
use std::collections::{BTreeSet, HashMap};
use std::fmt;
use std::net::{IpAddr, SocketAddr};
use std::sync::{Arc, RwLock};
use std::time::Duration;
use stunner_gateway::cds::ConfigId;
use tokio::sync::watch;

/// How long a request for a config waits for its client's pod to appear in the index before
/// it is refused: a stunnerd starts as soon as its container does, often before the pod
/// watcher has seen the pod's IP. Bounded, so a stranger is refused in this time at most.
pub(crate) const INDEX_WAIT: Duration = Duration::from_secs(2);

/// The RBAC verb on `gateways.gateway.networking.k8s.io` that lets a token's user read
/// configs: on a Gateway (`<ns>/<name>`), on every Gateway of a namespace (a namespace list)
/// or cluster-wide (the list of all configs and the client table). A verb of its own, so that
/// reading Gateways (the `view` role) does not hand out their TURN credentials.
pub const CONFIG_VERB: &str = "readconfig";

/// Checks bearer tokens (`--cds-token-review`): who the token is, and whether that user may
/// [`CONFIG_VERB`] the Gateways of `scope`.
pub trait TokenReviewer: Send + Sync + fmt::Debug {
    fn review<'a>(&'a self, token: &'a str, scope: &'a Scope) -> BoxFuture<'a, Result<Identity, Refusal>>;
}

/// The token of an `Authorization: Bearer <token>` header value.
pub(crate) fn bearer(value: &str) -> Option<&str> {
    let (scheme, token) = value.split_once(' ')?;
    let token = token.trim();
    (scheme.eq_ignore_ascii_case("bearer") && !token.is_empty()).then_some(token)
}

/// Whether requests are checked at all (the daemon's `--cds-authorization`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Mode {
    /// Anyone who reaches the port reads every config (upstream's behaviour).
    #[default]
    None,
    /// A config only to its Gateway's dataplane pods; lists only to loopback and the operator.
    Pod,
}

/// Whom a request was authorized as (shown in the client table).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Identity {
    /// `--cds-authorization=none`: nobody is checked.
    Unchecked,
    /// A connection from 127.0.0.1 or ::1: `kubectl port-forward` (which connects to
    /// `localhost` inside the pod) or a process in the operator's pod. The rest of 127/8 is
    /// not trusted: nothing needs it.
    Loopback,
    /// Another pod of the operator.
    Operator,
    /// A dataplane pod of the requested Gateway.
    Pod { namespace: String, name: String },
    /// A node running a `hostNetwork` dataplane pod of the requested Gateway: the pod's IP is
    /// the node's, so everything on that node shares it.
    Node { name: String },
    /// The user of a bearer token the API server vouched for (`--cds-token-review`).
    User { name: String },
}

impl fmt::Display for Identity {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Identity::Unchecked => f.write_str("unchecked"),
            Identity::Loopback => f.write_str("loopback"),
            Identity::Operator => f.write_str("operator"),
            Identity::Pod { namespace, name } => write!(f, "pod:{namespace}/{name}"),
            Identity::Node { name } => write!(f, "node:{name}"),
            Identity::User { name } => write!(f, "user:{name}"),
        }
    }
}

/// Why a request was refused: said to the client and logged, its kind telling the client
/// whether to retry (each transport maps it once: `api::authorize`, the gRPC service's
/// `authorize`). It names addresses, ids and user names only, never anything of a config.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum Refusal {
    /// The bearer token is not valid (unknown, expired, another audience): 401 with
    /// `WWW-Authenticate: Bearer` / UNAUTHENTICATED.
    #[error("{0}")]
    Unauthenticated(String),
    /// The client is known, or unknown by its address, and may not read what it asked for:
    /// 403 / PERMISSION_DENIED.
    #[error("{0}")]
    Forbidden(String),
    /// Nobody could tell in time (the API server or its review did not answer): 503 with
    /// `Retry-After` / UNAVAILABLE. Not the client's fault: it retries.
    #[error("{0}")]
    Unavailable(String),
}

impl Refusal {
    /// The `reason` label of the refusal metric.
    pub(crate) fn reason(&self) -> RefusalReason {
        match self {
            Refusal::Unauthenticated(_) => RefusalReason::unauthenticated,
            Refusal::Forbidden(_) => RefusalReason::forbidden,
            Refusal::Unavailable(_) => RefusalReason::unavailable,
        }
    }
}

/// A running dataplane pod, as the index keeps it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DataplanePod {
    pub namespace: String,
    pub name: String,
    /// The Gateway whose Deployment runs the pod: the one config it may read.
    pub gateway: ConfigId,
    /// `spec.hostNetwork`: the pod's IPs are its node's.
    pub host_network: bool,
    pub node: String,
    /// `status.podIPs` (and `status.podIP`), every family.
    pub ips: Vec<IpAddr>,
}

impl DataplanePod {
    fn identity(&self) -> Identity {
        if self.host_network {
            Identity::Node { name: self.node.clone() }
        } else {
            Identity::Pod { namespace: self.namespace.clone(), name: self.name.clone() }
        }
    }
}

type PodKey = (String, String);

#[derive(Default)]
struct Pods {
    pods: HashMap<PodKey, DataplanePod>,
    /// Several pods share an IP when they run with `hostNetwork` on one node.
    by_ip: HashMap<IpAddr, BTreeSet<PodKey>>,
}

impl Pods {
    fn insert(&mut self, pod: DataplanePod) {
        let key = (pod.namespace.clone(), pod.name.clone());
        self.remove(&key);
        for ip in &pod.ips {
            self.by_ip.entry(*ip).or_default().insert(key.clone());
        }
        self.pods.insert(key, pod);
    }

    fn remove(&mut self, key: &PodKey) {
        let Some(old) = self.pods.remove(key) else { return };
        for ip in &old.ips {
            if let Some(keys) = self.by_ip.get_mut(ip) {
                keys.remove(key);
                if keys.is_empty() {
                    self.by_ip.remove(ip);
                }
            }
        }
    }
}

/// The running dataplane pods by IP. Every change is announced, so a request waiting for its
/// pod wakes as soon as the pod is indexed.
pub struct DataplaneIndex {
    pods: RwLock<Pods>,
    changed: watch::Sender<()>,
}

impl Default for DataplaneIndex {
    fn default() -> Self {
        DataplaneIndex { pods: RwLock::default(), changed: watch::Sender::new(()) }
    }
}

impl fmt::Debug for DataplaneIndex {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("DataplaneIndex").field("pods", &self.pods.read().expect("index lock").pods.len()).finish()
    }
}

impl DataplaneIndex {
    /// Adds or updates a running pod.
    pub fn apply(&self, pod: DataplanePod) {
        self.pods.write().expect("index lock").insert(pod);
        self.changed.send_replace(());
    }

    pub fn remove(&self, namespace: &str, name: &str) {
        self.pods.write().expect("index lock").remove(&(namespace.to_string(), name.to_string()));
        self.changed.send_replace(());
    }

    /// Replaces every pod (a watcher's relist).
    pub fn replace(&self, pods: impl IntoIterator<Item = DataplanePod>) {
        let mut fresh = Pods::default();
        pods.into_iter().for_each(|p| fresh.insert(p));
        *self.pods.write().expect("index lock") = fresh;
        self.changed.send_replace(());
    }

    /// How many requests are waiting for their pod to be indexed right now.
    pub fn waiting(&self) -> usize {
        self.changed.receiver_count()
    }

    /// The identity of a running pod of Gateway `id` at `ip`, if there is one.
    pub(crate) fn lookup(&self, ip: IpAddr, id: &ConfigId) -> Option<Identity> {
        let pods = self.pods.read().expect("index lock");
        pods.by_ip.get(&ip)?.iter().filter_map(|k| pods.pods.get(k)).find(|p| &p.gateway == id).map(|p| p.identity())
    }

    /// Like [`Self::lookup`], but waits up to `wait` for such a pod to be indexed.
    async fn wait_for(&self, ip: IpAddr, id: &ConfigId, wait: Duration) -> Option<Identity> {
        // Subscribed before the first look: a change between the look and the wait still wakes us.
        let mut changed = self.changed.subscribe();
        let deadline = tokio::time::Instant::now() + wait;
        loop {
            if let Some(identity) = self.lookup(ip, id) {
                return Some(identity);
            }
            match tokio::time::timeout_at(deadline, changed.changed()).await {
                Ok(Ok(())) => {}
                Ok(Err(_)) | Err(_) => return None,
            }
        }
    }
}

/// The decision both transports share.
#[derive(Debug)]
pub struct Authorizer {
    mode: Mode,
    index: Arc<DataplaneIndex>,
    /// The operator's own pod IPs (`POD_IPS`): tools run in its pods may list.
    operator_ips: Vec<IpAddr>,
    wait: Duration,
    tokens: Option<Arc<dyn TokenReviewer>>,
}

impl Authorizer {
    pub fn new(mode: Mode, index: Arc<DataplaneIndex>, operator_ips: Vec<IpAddr>) -> Self {
        Authorizer { mode, index, operator_ips, wait: INDEX_WAIT, tokens: None }
    }

    /// Lets clients in by bearer token too, as `reviewer` decides.
    pub fn with_token_review(mut self, reviewer: Arc<dyn TokenReviewer>) -> Self {
        self.tokens = Some(reviewer);
        self
    }

    /// Nobody checked: `--cds-authorization=none`.
    pub fn unchecked() -> Self {
        Self::new(Mode::None, Default::default(), Vec::new())
    }

    /// May the client at `peer`, with the bearer token `token` if it sent one, read `scope`?
    /// `Scope::All` also stands for the client table. A token, when tokens are reviewed,
    /// decides alone: a bad one is refused whatever the address.
    pub(crate) async fn authorize(
        &self,
        peer: Option<SocketAddr>,
        token: Option<&str>,
        scope: &Scope,
    ) -> Result<Identity, Refusal> {
        if self.mode == Mode::None {
            return Ok(Identity::Unchecked);
        }
        if let (Some(reviewer), Some(token)) = (&self.tokens, token) {
            return reviewer.review(token, scope).await;
        }
        let Some(peer) = peer else {
            return Err(Refusal::Forbidden("the client's address is unknown".into()));
        };
        let ip = peer.ip().to_canonical();
        if ip == IpAddr::from([127, 0, 0, 1]) || ip == IpAddr::from(std::net::Ipv6Addr::LOCALHOST) {
            return Ok(Identity::Loopback);
        }
        if self.operator_ips.contains(&ip) {
            return Ok(Identity::Operator);
        }
        match scope {
            Scope::Config(id) => self
                .index
                .wait_for(ip, id, self.wait)
                .await
                .ok_or_else(|| Refusal::Forbidden(format!("{ip} is not a running dataplane pod of Gateway {id}"))),
            _ => Err(Refusal::Forbidden(format!(
                "listing configs is allowed from loopback (kubectl port-forward) and the operator's pods only, not from {ip}"
            ))),
        }
    }
}

/// `POD_IPS` (the downward API's `status.podIPs`, comma-separated) as addresses; what does
/// not parse is left out.
pub fn operator_ips(env: Option<&str>) -> Vec<IpAddr> {
    env.unwrap_or_default().split(',').filter_map(|s| s.trim().parse().ok()).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    impl Authorizer {
        async fn authorize_addr(&self, peer: Option<SocketAddr>, scope: &Scope) -> Result<Identity, Refusal> {
            self.authorize(peer, None, scope).await
        }
    }

    fn pod(ns: &str, name: &str, gw: &str, ips: &[&str]) -> DataplanePod {
        DataplanePod {
            namespace: ns.into(),
            name: name.into(),
            gateway: ConfigId::new(ns, gw),
            host_network: false,
            node: "node-1".into(),
            ips: ips.iter().map(|s| s.parse().unwrap()).collect(),
        }
    }

    fn peer(s: &str) -> Option<SocketAddr> {
        Some(SocketAddr::new(s.parse().unwrap(), 40000))
    }

    fn authorizer(index: &Arc<DataplaneIndex>) -> Authorizer {
        let mut a = Authorizer::new(Mode::Pod, index.clone(), operator_ips(Some("10.0.9.9,fd00::9")));
        a.wait = Duration::from_millis(50);
        a
    }

    fn config(ns: &str, name: &str) -> Scope {
        Scope::Config(ConfigId::new(ns, name))
    }

    #[tokio::test]
    async fn a_pod_reads_its_own_gateway_only() {
        let index = Arc::new(DataplaneIndex::default());
        index.apply(pod("team-a", "gw-a-1", "gw-a", &["10.0.0.1", "fd00::1"]));
        let a = authorizer(&index);
        let own = Identity::Pod { namespace: "team-a".into(), name: "gw-a-1".into() };
        assert_eq!(a.authorize_addr(peer("10.0.0.1"), &config("team-a", "gw-a")).await, Ok(own.clone()));
        assert_eq!(a.authorize_addr(peer("fd00::1"), &config("team-a", "gw-a")).await, Ok(own.clone()), "dual-stack");
        assert_eq!(a.authorize_addr(peer("::ffff:10.0.0.1"), &config("team-a", "gw-a")).await, Ok(own));
        let refused = a.authorize_addr(peer("10.0.0.1"), &config("team-b", "gw-b")).await.unwrap_err();
        assert_eq!(
            refused,
            Refusal::Forbidden("10.0.0.1 is not a running dataplane pod of Gateway team-b/gw-b".into())
        );
        assert!(a.authorize_addr(peer("10.0.0.1"), &Scope::All).await.is_err(), "a dataplane may not list");
        assert!(a.authorize_addr(peer("10.0.0.1"), &Scope::Namespace("team-a".into())).await.is_err());
        index.remove("team-a", "gw-a-1");
        assert!(a.authorize_addr(peer("10.0.0.1"), &config("team-a", "gw-a")).await.is_err(), "gone with its pod");
    }

    #[tokio::test]
    async fn lists_go_to_loopback_and_the_operator_only() {
        let index = Arc::new(DataplaneIndex::default());
        let a = authorizer(&index);
        assert_eq!(a.authorize_addr(peer("127.0.0.1"), &Scope::All).await, Ok(Identity::Loopback));
        assert_eq!(a.authorize_addr(peer("::1"), &Scope::Namespace("x".into())).await, Ok(Identity::Loopback));
        assert!(a.authorize_addr(peer("127.0.0.2"), &Scope::All).await.is_err(), "only the address port-forward uses");
        assert_eq!(a.authorize_addr(peer("10.0.9.9"), &Scope::All).await, Ok(Identity::Operator));
        assert_eq!(a.authorize_addr(peer("fd00::9"), &config("x", "y")).await, Ok(Identity::Operator));
        let refused = a.authorize_addr(peer("10.0.0.2"), &Scope::All).await.unwrap_err();
        assert!(matches!(&refused, Refusal::Forbidden(m) if m.contains("not from 10.0.0.2")), "{refused}");
        assert!(a.authorize(None, None, &Scope::All).await.is_err());
        let open = Authorizer::unchecked();
        assert_eq!(open.authorize_addr(peer("10.0.0.2"), &Scope::All).await, Ok(Identity::Unchecked));
    }

    #[tokio::test]
    async fn host_network_pods_authorize_their_node() {
        let index = Arc::new(DataplaneIndex::default());
        let mut a1 = pod("team-a", "gw-a-1", "gw-a", &["192.168.1.10"]);
        a1.host_network = true;
        let mut b1 = pod("team-b", "gw-b-1", "gw-b", &["192.168.1.10"]);
        b1.host_network = true;
        index.replace([a1, b1]);
        let a = authorizer(&index);
        let node = Identity::Node { name: "node-1".into() };
        assert_eq!(a.authorize_addr(peer("192.168.1.10"), &config("team-a", "gw-a")).await, Ok(node.clone()));
        assert_eq!(a.authorize_addr(peer("192.168.1.10"), &config("team-b", "gw-b")).await, Ok(node));
        index.remove("team-b", "gw-b-1");
        assert!(a.authorize_addr(peer("192.168.1.10"), &config("team-b", "gw-b")).await.is_err());
        assert!(a.authorize_addr(peer("192.168.1.10"), &config("team-a", "gw-a")).await.is_ok(), "shared IP kept");
    }

    #[tokio::test]
    async fn a_pod_indexed_while_its_request_waits_is_served() {
        let index = Arc::new(DataplaneIndex::default());
        let mut a = authorizer(&index);
        // Long enough never to run out here: the index change, not the clock, ends the wait.
        a.wait = Duration::from_secs(30);
        let waiting = tokio::spawn(async move { a.authorize_addr(peer("10.0.0.7"), &config("team-a", "gw-a")).await });
        while index.waiting() == 0 {
            tokio::task::yield_now().await;
        }
        // An unrelated change wakes the waiter, which looks again and waits on.
        index.apply(pod("team-b", "other", "gw-b", &["10.0.0.8"]));
        tokio::task::yield_now().await;
        assert!(!waiting.is_finished());
        index.apply(pod("team-a", "fresh", "gw-a", &["10.0.0.7"]));
        let identity = waiting.await.unwrap();
        assert_eq!(identity, Ok(Identity::Pod { namespace: "team-a".into(), name: "fresh".into() }));
    }
}
