//! Cluster mode at scale (issue #62), ours and upstream's Go operator measured the same way on
//! a real kube-apiserver (tests/apiserver): N Gateways (100, 1,000, 5,000), each with a
//! UDPRoute to a backend Service with an EndpointSlice of 4 endpoints; every tenth Gateway in a
//! namespace of its own with a GatewayClass and GatewayConfig of its own (a tenant). All is
//! created (concurrently) before the operator starts; from its start are measured:
//!
//! - the time until every Gateway's status is `Programmed=True` at its current generation (one
//!   watch of all Gateways), and until the CDS serves every config with its 4 endpoints;
//! - the API requests it made, by verb and by written resource, as the API server counts them
//!   (`apiserver_request_total`, see support/api_requests.rs: the same count for both
//!   operators, lease renewals left out);
//! - its peak (`VmHWM`) and settled (`VmRSS` once its writes stopped) resident memory, against
//!   the same operator's on an empty cluster (the class alone), and its CPU seconds;
//! - then, with 100 CDS watchers connected, 20 route edits one at a time (300 ms apart, more
//!   than Go's 250 ms window): the time from the API server's acknowledgement until the edited
//!   route's watcher holds the new config;
//! - then a restart with nothing changed: the time until the CDS serves every config again, and
//!   the writes it made (none expected).
//!
//! The floor, in our operator's cluster once it stopped: as many status writes and owned-object
//! applies as our operator made, of the same resources and sizes (its own objects as
//! templates, each write a real change), from one client one request at a time, as our writer
//! sends them (it has no client-side rate limit, as controller-runtime has none: QPS -1).
//!
//! Gateways get a ClusterIP Service (`stunner.l7mp.io/service-type`): 5,000 LoadBalancer
//! Services would need more node ports than the API server's range holds (2,768).
//!
//! `cargo bench -p stunner-gateway-operator --bench cluster_scale` (CLUSTER_SCALE_GATEWAYS,
//! default `100,1000,5000`); the Go operator is measured when `STUNNER_OPERATOR_GIT` names a
//! clone of it (else skipped with a notice). Under `cargo test` it runs 10 Gateways, ours only.
//! A full run writes its rows as JSON (see `benches/support/report.rs`), each with the machine's
//! load average at its end.

#[path = "support/api_requests.rs"]
mod api_requests;
#[path = "../tests/e2e/mod.rs"]
mod e2e;
#[path = "support/process.rs"]
mod process;
#[path = "../../benches/support/report.rs"]
mod report;
#[path = "support/upstream.rs"]
mod upstream;

use api_requests::Requests;
use e2e::*;
use futures_util::StreamExt;
use kube::api::{Api, DynamicObject, ListParams, Patch, PatchParams, PostParams};
use kube::discovery::{ApiResource, Scope};
use kube::runtime::WatchStreamExt;
use kube::runtime::watcher::{self, Event, watcher};
use kube::{Client, ResourceExt};
use report::Report;
use serde_json::{Value, json};
use std::collections::{BTreeMap, HashMap, HashSet};
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};
use tokio::sync::watch;

const GW: &str = "gateway.networking.k8s.io/v1";
const STUNNER: &str = "stunner.l7mp.io/v1";
/// The namespace of the Gateways that are not a tenant's.
const SHARED: &str = "scale";
/// Every this many Gateways, one is a tenant's: a namespace, class and GatewayConfig of its own.
const TENANT_EVERY: usize = 10;
const WATCHERS: usize = 100;
const EDITS: usize = 20;
/// Longer than the Go operator's fixed 250 ms window: every edit meets a quiet loop.
const SPACING: Duration = Duration::from_millis(300);
/// The edits' backend port range starts here; edit k ends it at `EDIT_PORT + 1 + k`.
const EDIT_PORT: u32 = 10000;
/// Concurrent creates while the inputs are made.
const CREATORS: usize = 16;
const MANAGER: &str = "cluster-scale-floor";

/// Where Gateway `i` lives and the class it names.
fn placement(i: usize) -> (String, String) {
    if i.is_multiple_of(TENANT_EVERY) {
        (format!("tenant-{i}"), format!("tenant-{i}"))
    } else {
        (SHARED.to_string(), "stunner-gatewayclass".to_string())
    }
}

fn namespace(name: &str) -> Value {
    json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": name}})
}

/// A tenant's class and the GatewayConfig it names, in the tenant's namespace.
fn tenant(i: usize) -> [Value; 2] {
    let (ns, class) = placement(i);
    [
        json!({"apiVersion": GW, "kind": "GatewayClass", "metadata": {"name": class},
            "spec": {"controllerName": "stunner.l7mp.io/gateway-operator",
                "parametersRef": {"group": "stunner.l7mp.io", "kind": "GatewayConfig", "name": "tenant-config", "namespace": ns}}}),
        json!({"apiVersion": STUNNER, "kind": "GatewayConfig", "metadata": {"name": "tenant-config", "namespace": ns},
            "spec": {"realm": "stunner.l7mp.io", "authType": "static", "userName": format!("tenant-{i}"), "password": format!("pass-{i}")}}),
    ]
}

/// The route of Gateway `i`; an edit gives its backend a port range (`None`: every port).
fn route(i: usize, end_port: Option<u32>) -> Value {
    let (ns, _) = placement(i);
    let mut backend = json!({"name": format!("media-{i}")});
    if let Some(end) = end_port {
        backend["port"] = json!(EDIT_PORT);
        backend["endPort"] = json!(end);
    }
    json!({"apiVersion": STUNNER, "kind": "UDPRoute", "metadata": {"name": format!("route-{i}"), "namespace": ns},
        "spec": {"parentRefs": [{"name": format!("gw-{i}")}], "rules": [{"backendRefs": [backend]}]}})
}

/// Gateway `i`, its backend Service with an EndpointSlice of 4 endpoints, and its route.
fn gateway(i: usize) -> [Value; 4] {
    let (ns, class) = placement(i);
    let media = format!("media-{i}");
    let endpoints: Vec<Value> = (0..4)
        .map(|k| {
            let a = 4 * i + k;
            json!({"addresses": [format!("10.{}.{}.{}", 100 + (a >> 16), (a >> 8) & 255, a & 255)]})
        })
        .collect();
    [
        json!({"apiVersion": GW, "kind": "Gateway",
            "metadata": {"name": format!("gw-{i}"), "namespace": ns, "annotations": {"stunner.l7mp.io/service-type": "ClusterIP"}},
            "spec": {"gatewayClassName": class, "addresses": [{"type": "IPAddress", "value": "127.0.0.1"}],
                "listeners": [{"name": "udp", "port": 3478, "protocol": "UDP"}]}}),
        json!({"apiVersion": "v1", "kind": "Service", "metadata": {"name": media, "namespace": ns},
            "spec": {"ports": [{"name": "rtp", "port": 9000, "protocol": "UDP"}]}}),
        json!({"apiVersion": "discovery.k8s.io/v1", "kind": "EndpointSlice",
            "metadata": {"name": media, "namespace": ns, "labels": {"kubernetes.io/service-name": media}},
            "addressType": "IPv4", "endpoints": endpoints, "ports": [{"name": "rtp", "port": 9000, "protocol": "UDP"}]}),
        route(i, None),
    ]
}

/// The API resources of the inputs' kinds, each resolved once by discovery.
struct Kinds(HashMap<String, (ApiResource, Scope)>);

impl Kinds {
    async fn resolve(client: &Client) -> Kinds {
        let mut kinds = HashMap::new();
        for (api_version, kind) in [
            ("v1", "Namespace"),
            ("v1", "Service"),
            ("discovery.k8s.io/v1", "EndpointSlice"),
            (GW, "GatewayClass"),
            (GW, "Gateway"),
            (STUNNER, "GatewayConfig"),
            (STUNNER, "UDPRoute"),
            ("apps/v1", "Deployment"),
        ] {
            kinds.insert(kind.to_string(), discover(client, api_version, kind).await);
        }
        Kinds(kinds)
    }

    fn api(&self, client: &Client, kind: &str, namespace: Option<&str>) -> Api<DynamicObject> {
        let (resource, scope) = &self.0[kind];
        match (scope, namespace) {
            (Scope::Namespaced, Some(ns)) => Api::namespaced_with(client.clone(), ns, resource),
            _ => Api::all_with(client.clone(), resource),
        }
    }

    /// Creates `objects`, [`CREATORS`] at a time.
    async fn create_all(&self, client: &Client, objects: Vec<Value>) {
        futures_util::stream::iter(objects)
            .map(|value| async move {
                let obj: DynamicObject = serde_json::from_value(value).unwrap();
                let kind = obj.types.as_ref().expect("a kind").kind.clone();
                let api = self.api(client, &kind, obj.namespace().as_deref());
                api.create(&PostParams::default(), &obj).await.unwrap_or_else(|e| panic!("create {kind}: {e}"));
            })
            .buffer_unordered(CREATORS)
            .collect::<Vec<()>>()
            .await;
    }
}

/// The inputs of `n` Gateways: the namespaces first, then everything else.
async fn create_inputs(kinds: &Kinds, client: &Client, n: usize) {
    let tenants: Vec<usize> = (0..n).filter(|i| i.is_multiple_of(TENANT_EVERY)).collect();
    let mut namespaces = vec![namespace(SHARED)];
    namespaces.extend(tenants.iter().map(|i| namespace(&placement(*i).0)));
    kinds.create_all(client, namespaces).await;
    let mut objects: Vec<Value> = tenants.iter().flat_map(|i| tenant(*i)).collect();
    objects.extend((0..n).flat_map(gateway));
    kinds.create_all(client, objects).await;
}

/// Whether a Gateway's status says `Programmed=True` for its current generation.
fn programmed(gw: &DynamicObject) -> bool {
    let generation = gw.metadata.generation;
    condition(&gw.data["status"], "Programmed")
        .is_some_and(|c| c["status"] == "True" && c["observedGeneration"].as_i64() == generation)
}

/// How many of the benchmark's Gateways are [`programmed`], as one watch of all Gateways sees
/// them; `None` until its first list is in.
fn follow_programmed(api: Api<DynamicObject>) -> watch::Receiver<Option<usize>> {
    let (tx, rx) = watch::channel(None);
    tokio::spawn(async move {
        let (mut ready, mut listing) = (HashSet::new(), HashSet::new());
        let mut events = std::pin::pin!(watcher(api, watcher::Config::default()).default_backoff());
        let key = |o: &DynamicObject| format!("{}/{}", o.namespace().unwrap_or_default(), o.name_any());
        let track = |set: &mut HashSet<String>, o: &DynamicObject| {
            if o.name_any().starts_with("gw-") && programmed(o) {
                set.insert(key(o));
            } else {
                set.remove(&key(o));
            }
        };
        while let Some(event) = events.next().await {
            match event {
                Ok(Event::Init) => listing.clear(),
                Ok(Event::InitApply(o)) => track(&mut listing, &o),
                Ok(Event::InitDone) => ready = std::mem::take(&mut listing),
                Ok(Event::Apply(o)) => track(&mut ready, &o),
                Ok(Event::Delete(o)) => {
                    ready.remove(&key(&o));
                }
                Err(_) => continue, // retried by the watcher, with backoff
            }
            if tx.send(Some(ready.len())).is_err() {
                return;
            }
        }
    });
    rx
}

/// How many configs the CDS at `cds` serves with a cluster of at least 4 endpoints.
async fn served(cds: SocketAddr) -> usize {
    let Some((200, body)) = http_get(cds, "/api/v1/configs").await else { return 0 };
    let Ok(list) = serde_json::from_str::<Value>(&body) else { return 0 };
    let items = list["items"].as_array().cloned().unwrap_or_default();
    let full = |c: &Value| c["endpoints"].as_array().is_some_and(|e| e.len() >= 4);
    items.iter().filter(|config| config["clusters"].as_array().is_some_and(|cs| cs.iter().any(full))).count()
}

/// An operator under measurement.
struct Running {
    pid: u32,
    cds: SocketAddr,
    process: Process,
}

enum Process {
    Ours(Operator),
    Go(tokio::process::Child),
}

impl Running {
    async fn stop(self) {
        match self.process {
            Process::Ours(op) => op.stop().await,
            Process::Go(mut child) => {
                let _ = child.kill().await;
            }
        }
    }

    fn memory_kib(&self, field: &str) -> u64 {
        process::memory_kib(self.pid, field)
    }
}

/// The operator measured: ours, or upstream's built from a clone.
enum Implementation {
    Ours(PathBuf),
    Go { bin: PathBuf, label: String },
}

impl Implementation {
    fn label(&self) -> &str {
        match self {
            Implementation::Ours(_) => "ours",
            Implementation::Go { label, .. } => label,
        }
    }

    async fn start(&self, cluster: &Cluster, name: &str) -> Running {
        match self {
            Implementation::Ours(bin) => {
                // The production default window, not the harness's short one.
                let args = ["--throttle-timeout", "250ms"];
                let op = Operator::start_binary(bin, &cluster.operator_kubeconfig, &cluster.dir.0, name, &args).await;
                Running { pid: op.pid(), cds: op.cds, process: Process::Ours(op) }
            }
            Implementation::Go { bin, .. } => {
                let cds: SocketAddr = format!("127.0.0.1:{}", free_port()).parse().unwrap();
                let log = cluster.dir.0.join(format!("upstream-{name}.log"));
                let child = upstream::start(bin, &cluster.api.admin_kubeconfig(), cds, &log);
                Running { pid: child.id().expect("the operator runs"), cds, process: Process::Go(child) }
            }
        }
    }
}

/// Polls `check` every `every` until it is true or `deadline` passed; the time it took from
/// `from`, `None` when it never held.
async fn until<F, Fut>(from: Instant, deadline: Instant, every: Duration, mut check: F) -> Option<Duration>
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = bool>,
{
    loop {
        if check().await {
            return Some(from.elapsed());
        }
        if Instant::now() > deadline {
            return None;
        }
        tokio::time::sleep(every).await;
    }
}

/// Waits until the API server saw no write for two readings 2 s apart (at most 2 minutes);
/// returns the requests since `before`.
async fn settle_writes(admin: &Client, before: &Requests) -> Requests {
    let mut last = Requests::read(admin).await.since(before);
    for _ in 0..60 {
        tokio::time::sleep(Duration::from_secs(2)).await;
        let now = Requests::read(admin).await.since(before);
        if now.writes() == last.writes() {
            return now;
        }
        last = now;
    }
    panic!("the operator kept writing: {:?}", last.writes_by_resource());
}

/// One implementation's figures at one N.
#[derive(Default)]
struct Figures {
    empty_rss_kib: u64,
    programmed_s: Option<f64>,
    served_s: Option<f64>,
    requests: Requests,
    peak_kib: u64,
    settled_kib: u64,
    cpu_s: f64,
    edits: Edits,
    restart_ready_s: Option<f64>,
    restart_writes: Requests,
}

/// Everything after the empty start: inputs, bootstrap, edits, restart.
async fn measure(cluster: &Cluster, kinds: &Kinds, imp: &Implementation, n: usize) -> Figures {
    let admin = &cluster.admin;
    let mut f = Figures::default();
    let empty = imp.start(cluster, "empty").await;
    settle_writes(admin, &Requests::read(admin).await).await;
    f.empty_rss_kib = empty.memory_kib("VmRSS:");
    empty.stop().await;

    let created = Instant::now();
    create_inputs(kinds, admin, n).await;
    eprintln!("cluster_scale: {n} Gateways' inputs created in {:.1} s", created.elapsed().as_secs_f64());
    let mut programmed_count = follow_programmed(kinds.api(admin, "Gateway", None));
    programmed_count.wait_for(Option::is_some).await.unwrap();
    let before = Requests::read(admin).await;

    // Bootstrap: from the operator's start.
    let started = Instant::now();
    let op = imp.start(cluster, "op").await;
    // Upstream's operator may not get there: it is given 60 s and 0.15 s per Gateway.
    let deadline = started + Duration::from_secs(60) + Duration::from_millis(150) * n as u32;
    let poll = if n > 1000 { Duration::from_secs(1) } else { Duration::from_millis(200) };
    let all_programmed = async {
        let mut rx = programmed_count.clone();
        let wait = rx.wait_for(|c| c.is_some_and(|c| c >= n));
        tokio::time::timeout_at(deadline.into(), wait).await.ok().map(|_| started.elapsed())
    };
    let cds = op.cds;
    let all_served = until(started, deadline, poll, || async move { served(cds).await >= n });
    let (programmed_in, served_in) = tokio::join!(all_programmed, all_served);
    f.programmed_s = programmed_in.map(|d| d.as_secs_f64());
    f.served_s = served_in.map(|d| d.as_secs_f64());
    f.requests = settle_writes(admin, &before).await;
    f.peak_kib = op.memory_kib("VmHWM:");
    f.settled_kib = op.memory_kib("VmRSS:");
    f.cpu_s = process::cpu_seconds(op.pid);
    eprintln!(
        "cluster_scale: {}, {n} Gateways: all Programmed {:?} s, all served {:?} s",
        imp.label(),
        f.programmed_s,
        f.served_s
    );

    if f.served_s.is_some() {
        f.edits = edits(admin, kinds, op.cds, n).await;
    }

    // A restart with nothing changed.
    op.stop().await;
    let before = Requests::read(admin).await;
    let started = Instant::now();
    let op = imp.start(cluster, "restarted").await;
    let deadline = started + Duration::from_secs(60) + Duration::from_millis(150) * n as u32;
    let cds = op.cds;
    let ready = until(started, deadline, poll, || async move { served(cds).await >= n }).await;
    f.restart_ready_s = ready.map(|d| d.as_secs_f64());
    f.restart_writes = settle_writes(admin, &before).await;
    op.stop().await;
    f
}

/// Route edits' latencies, in ms: until the edited route's watcher holds the new config.
#[derive(Default)]
struct Edits {
    /// From the API server's acknowledgement of the edit (its watchers may have it sooner).
    from_ack: Vec<f64>,
    /// From the edit's request, which adds the write itself.
    from_request: Vec<f64>,
}

impl Edits {
    /// p50 and p99 (nearest rank) of `v`, sorted.
    fn percentiles(v: &mut [f64]) -> Value {
        v.sort_by(f64::total_cmp);
        let n = v.len();
        let p = |q: f64| (n > 0).then(|| v[((q * n as f64).ceil() as usize).clamp(1, n) - 1]);
        json!({"p50": p(0.5), "p99": p(0.99)})
    }
}

/// [`EDITS`] route edits among `n` Gateways with [`WATCHERS`] watching, one at a time.
async fn edits(admin: &Client, kinds: &Kinds, cds: SocketAddr, n: usize) -> Edits {
    let watched: Vec<usize> = (0..WATCHERS.min(n)).map(|w| w * n / WATCHERS.min(n)).collect();
    let mut watchers = Vec::with_capacity(watched.len());
    for i in &watched {
        let (ns, _) = placement(*i);
        let url = format!("ws://{cds}/api/v1/configs/{ns}/gw-{i}?watch=true");
        let mut ws = tokio_tungstenite::connect_async(url).await.expect("a CDS watch").0;
        next_config(&mut ws).await;
        watchers.push(ws);
    }
    let edits = EDITS.min(watched.len());
    let (mut from_ack, mut from_request) = (Vec::with_capacity(edits), Vec::with_capacity(edits));
    for k in 0..edits {
        tokio::time::sleep(SPACING).await;
        let w = k * watched.len() / edits;
        let i = watched[w];
        let end = EDIT_PORT + 1 + k as u32;
        let (ns, _) = placement(i);
        let api = kinds.api(admin, "UDPRoute", Some(&ns));
        let params = PatchParams::apply(TEST_MANAGER).force();
        let requested = Instant::now();
        api.patch(&format!("route-{i}"), &params, &Patch::Apply(route(i, Some(end)))).await.expect("edit the route");
        let acked = Instant::now();
        let suffix = format!("-{end}>");
        config_until(&mut watchers[w], &format!("the port range ending at {end}"), |c| {
            c.clusters.iter().any(|cl| cl.endpoints.iter().any(|e| e.ends_with(&suffix)))
        })
        .await;
        let arrived = Instant::now();
        from_ack.push(arrived.saturating_duration_since(acked).as_secs_f64() * 1e3);
        from_request.push((arrived - requested).as_secs_f64() * 1e3);
    }
    Edits { from_ack, from_request }
}

/// The floor's figures.
struct Floor {
    seconds: f64,
    /// Writes of resources it has no replay of (e.g. Events), by resource: not in `seconds`.
    not_replayed: BTreeMap<String, f64>,
}

/// The floor: `writes` (by resource, as the operator made them) replayed from one client, one
/// request at a time, each a real change of an object the operator wrote.
async fn floor(admin: &Client, kinds: &Kinds, writes: &BTreeMap<String, f64>) -> Floor {
    let mut requests = Vec::new();
    let mut not_replayed = BTreeMap::new();
    for (resource, count) in writes {
        let (kind, status) = match resource.as_str() {
            "gateways/status" => ("Gateway", true),
            "udproutes/status" => ("UDPRoute", true),
            "gatewayclasses/status" => ("GatewayClass", true),
            "services" => ("Service", false),
            "deployments" => ("Deployment", false),
            other => {
                not_replayed.insert(other.to_string(), *count);
                continue;
            }
        };
        let mut templates = kinds.api(admin, kind, None).list(&ListParams::default()).await.expect("list").items;
        if !status {
            // The operator's own objects (not the inputs' backend Services).
            templates.retain(|o| o.name_any().starts_with("gw-"));
        }
        assert!(!templates.is_empty(), "no {kind} to replay writes on");
        for j in 0..*count as usize {
            let api_version = &kinds.0[kind].0.api_version;
            requests.push(replay(&templates[j % templates.len()], api_version, kind, status, j / templates.len()));
        }
    }
    let started = Instant::now();
    for (kind, ns, name, status, body) in requests {
        let api = kinds.api(admin, &kind, ns.as_deref());
        let params = PatchParams::apply(MANAGER).force();
        let written = if status {
            api.patch_status(&name, &params, &Patch::Apply(&body)).await
        } else {
            api.patch(&name, &params, &Patch::Apply(&body)).await
        };
        written.unwrap_or_else(|e| panic!("floor: apply {kind} {name}: {e}"));
    }
    Floor { seconds: started.elapsed().as_secs_f64(), not_replayed }
}

/// One floor write: (kind, namespace, name, whether a status, the applied object). A status is
/// the object's own with every condition message marked by `round`; an owned object is a copy
/// of it named `floor-NAME`, annotated with `round`.
fn replay(
    template: &DynamicObject,
    api_version: &str,
    kind: &str,
    status: bool,
    round: usize,
) -> (String, Option<String>, String, bool, Value) {
    let ns = template.namespace();
    let mut metadata = json!({"name": template.name_any()});
    if let Some(ns) = &ns {
        metadata["namespace"] = json!(ns);
    }
    let body = if status {
        let text = serde_json::to_string(&template.data["status"]).unwrap();
        let marked = text.replace("\"message\":\"", &format!("\"message\":\"floor {round}: "));
        json!({"apiVersion": api_version, "kind": kind, "metadata": metadata, "status": serde_json::from_str::<Value>(&marked).unwrap()})
    } else {
        metadata["name"] = json!(format!("floor-{}", template.name_any()));
        metadata["labels"] = json!(template.labels());
        metadata["annotations"] = json!({"cluster-scale/round": round.to_string()});
        let mut spec = template.data["spec"].clone();
        if let Some(spec) = spec.as_object_mut() {
            // Allocated by the API server: a copy gets its own.
            for field in ["clusterIP", "clusterIPs", "ipFamilies", "ipFamilyPolicy"] {
                spec.remove(field);
            }
        }
        json!({"apiVersion": api_version, "kind": kind, "metadata": metadata, "spec": spec})
    };
    let name = body["metadata"]["name"].as_str().unwrap().to_string();
    (kind.to_string(), ns, name, status, body)
}

fn row(report: &mut Report, imp: &Implementation, n: usize, f: &mut Figures, floor: Option<Floor>) {
    let floor_s = floor.as_ref().map(|f| f.seconds);
    let writes = f.requests.writes();
    let above_empty = f.settled_kib.saturating_sub(f.empty_rss_kib);
    let edits = f.edits.from_ack.len();
    let (from_ack, from_request) =
        (Edits::percentiles(&mut f.edits.from_ack), Edits::percentiles(&mut f.edits.from_request));
    report.row(json!({
        "of": "scale",
        "operator": imp.label(),
        "gateways": n,
        "programmed_s": f.programmed_s,
        "served_s": f.served_s,
        "requests_by_verb": f.requests.by_verb(),
        "writes_by_resource": f.requests.writes_by_resource(),
        "writes_per_gateway": writes / n as f64,
        "empty_rss_kib": f.empty_rss_kib,
        "peak_rss_kib": f.peak_kib,
        "settled_rss_kib": f.settled_kib,
        "settled_kib_per_gateway": above_empty as f64 / n as f64,
        "cpu_s": f.cpu_s,
        "edit_ms": {"from_ack": from_ack, "from_request": from_request, "edits": edits, "watchers": WATCHERS.min(n)},
        "restart": {"ready_s": f.restart_ready_s, "writes": f.restart_writes.writes(),
            "writes_by_resource": f.restart_writes.writes_by_resource()},
        "floor_s": floor_s,
        "floor_not_replayed": floor.map(|f| f.not_replayed),
        "load_average": process::load_average(),
    }));
    let opt = |v: Option<f64>, unit: &str| v.map_or("not reached".to_string(), |v| format!("{v:.2}{unit}"));
    println!(
        "| {} | {n} | {} | {} | {} | {:.1} | {} | {} KiB | {} KiB ({:.2} KiB per Gateway above {} KiB empty) | {:.1} s | {} / {} | {} | {:.0} | {} |",
        imp.label(),
        opt(f.programmed_s, " s"),
        opt(f.served_s, " s"),
        opt(floor_s, " s"),
        writes / n as f64,
        serde_json::to_string(&f.requests.by_verb()).unwrap(),
        f.peak_kib,
        f.settled_kib,
        above_empty as f64 / n as f64,
        f.empty_rss_kib,
        f.cpu_s,
        opt(from_ack["p50"].as_f64(), " ms"),
        opt(from_request["p50"].as_f64(), " ms"),
        opt(f.restart_ready_s, " s"),
        f.restart_writes.writes(),
        process::load_average(),
    );
}

/// A cluster with the quickstart's class, GatewayConfig and Dataplane, and a first Gateway of
/// a class nobody controls (the API server's first Gateway create costs it ~2 s, once).
async fn scale_cluster(name: &str) -> Option<(Cluster, Kinds)> {
    let cluster = Cluster::start(name).await?;
    apply_yaml(&cluster.admin, &namespace_yaml("stunner")).await;
    let class = std::fs::read_to_string(repo_root().join("deploy/examples/quickstart/gatewayclass.yaml")).unwrap();
    apply_yaml(&cluster.admin, &class).await;
    let kinds = Kinds::resolve(&cluster.admin).await;
    let warm_up = json!({"apiVersion": GW, "kind": "Gateway", "metadata": {"name": "warm-up", "namespace": "stunner"},
        "spec": {"gatewayClassName": "nobodys-class", "listeners": [{"name": "udp", "port": 3478, "protocol": "UDP"}]}});
    kinds.create_all(&cluster.admin, vec![warm_up]).await;
    Some((cluster, kinds))
}

async fn run(report: &mut Report, imp: &Implementation, n: usize) {
    let name = format!("cluster-scale-{}-{n}", if matches!(imp, Implementation::Ours(_)) { "ours" } else { "go" });
    let Some((cluster, kinds)) = scale_cluster(&name).await else { return };
    let mut f = measure(&cluster, &kinds, imp, n).await;
    let floor = match imp {
        Implementation::Ours(_) => Some(floor(&cluster.admin, &kinds, &f.requests.writes_by_resource()).await),
        Implementation::Go { .. } => None,
    };
    row(report, imp, n, &mut f, floor);
    if let Implementation::Ours(_) = imp {
        assert!(f.programmed_s.is_some() && f.served_s.is_some(), "our operator never got every Gateway ready");
    }
}

fn go_implementation(scratch: &Path) -> Option<Implementation> {
    let git_dir = upstream::git_dir("cluster_scale", "the Go operator's figures are")?;
    let (bin, note) = upstream::build(&git_dir, scratch);
    Some(Implementation::Go { bin, label: format!("Go operator ({}{note})", upstream::version(&git_dir)) })
}

fn main() {
    let full = std::env::args().any(|a| a == "--bench");
    let counts: Vec<usize> = if full {
        let spec = std::env::var("CLUSTER_SCALE_GATEWAYS").unwrap_or_else(|_| "100,1000,5000".to_string());
        spec.split(',').map(|n| n.trim().parse().expect("CLUSTER_SCALE_GATEWAYS: numbers, comma-separated")).collect()
    } else {
        vec![10]
    };
    let ours = Implementation::Ours(PathBuf::from(env!("CARGO_BIN_EXE_stunner-gateway-operator")));
    let mut report = Report::new("cluster_scale", json!({ "implementation": "ours", "gateways": counts }));
    let scratch = std::env::temp_dir().join(format!("cluster-scale-upstream-{}", std::process::id()));
    let go = if full { go_implementation(&scratch) } else { None };
    let rt = tokio::runtime::Builder::new_multi_thread().worker_threads(2).enable_all().build().unwrap();
    rt.block_on(async {
        println!("| operator | Gateways | all Programmed | all served | floor | writes per Gateway | requests by verb | peak RSS | settled RSS | CPU | edit p50 from ack / request | restart ready | restart writes | load |");
        println!("|---|---|---|---|---|---|---|---|---|---|---|---|---|---|");
        for n in counts {
            run(&mut report, &ours, n).await;
            if let Some(go) = &go {
                run(&mut report, go, n).await;
            }
        }
    });
    let _ = std::fs::remove_dir_all(&scratch);
}
