//! Render benchmarks (a plain harness: `cargo bench -p stunner-gateway --bench render`; under
//! `cargo test` it runs a small smoke version).
//!
//! - full render of N combos (Gateway + UDPRoute + Service + EndpointSlice each), each Gateway's
//!   output handed on as it is rendered and dropped (`render_each`, as the operator publishes in
//!   cluster mode), the same render kept whole (`render_all`, as tests do), and both again once
//!   the operator's own objects settled in the index (`--settled`), handed on and as standalone
//!   mode renders (`--standalone`);
//! - the same on the fixture of upstream's `BenchmarkRenderPipeline` (N = 1 ... 512), for
//!   scripts/bench-go to set beside upstream's own figures;
//! - incremental: one EndpointSlice change among 5,000 Gateways renders only its Gateway.
//!
//! Each full render also reports its heap allocations per Gateway (a counting global allocator: a
//! figure the machine's load does not change). `--profile N RUNS` builds only the index of N combos
//! and renders it RUNS times (handing each Gateway on; `--kept` keeps each render whole,
//! `--upstream` takes upstream's fixture), and reports beside the time the bytes per combo the
//! index holds on the heap (the sizes asked for; glibc's rounding and headers come on top): run
//! under `perf stat -e instructions:u` or cachegrind with two values of RUNS, the difference over
//! the extra runs is the render's. `--lookups` follows, RUNS times, only the index lookups a render
//! of each Gateway chains (its object, its routes, their backends, the backends' EndpointSlices),
//! to set the index's share of a render apart from the rest. `--every K` renders, RUNS times, only
//! every K-th Gateway of the N (in key order; the set is made once, before the runs) and reports
//! the time per Gateway rendered: what a render costs with the same index but a working set of N /
//! K Gateways. `--objects K` builds each combo of the benchmark's own fixture (not `--upstream`) of
//! its first K objects only (1: the Gateway alone, 2: with its route, 3: with the route's Service;
//! 4, the default, the whole combo), so that what each object adds to a render can be told apart.
//! `--cold` writes a buffer twice the size of the machine's last-level cache before each run and
//! times the runs only: each render then reads the index from memory, as the operator's renders do
//! once other work has passed through the caches since the last one, where back-to-back runs find a
//! small index still in the caches. `--settled` first makes the index what the operator holds once
//! a render's own objects came back (each Gateway's Service and Deployment in it as rendered, and
//! reaching it as they reach the operator's: see [`settle`]), so that the renders read them as the
//! operator's later renders do. `--standalone` renders as standalone mode does: with its settings
//! (no Deployment where the index holds none, as in every combo here) and, unless `--kept`, through
//! its sink, which holds a Gateway's output while its Service would change the index (every Gateway
//! of an index not `--settled`, none of a settled one) and hands every other on. `--latency`
//! renders nothing and prints what one read of memory costs on this machine, by working-set size
//! from 1 to 64 MiB ([`load_latency_ns`]): how much data a render may read and still find it in a
//! cache here.

#[path = "support/report.rs"]
mod report;

use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::core::v1::{ConfigMap, Service};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{Condition, Time};
use serde_json::json;
use std::alloc::{GlobalAlloc, Layout, System};
use std::hint::black_box;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};
use stunner_gateway::index::{
    DeploymentRecord, Dirty, Index, Kind, ObjRef, ObjRefView, ObjectKey, Resource, backend_target, decode_value,
};
use stunner_gateway::render::{GatewayOutput, Owned, RenderSettings, RenderSink, render, render_all, render_each};
use stunner_gateway::resources::{GatewayClassStatus, UdpRouteStatus};

/// The system allocator, counting allocations (reallocations included: each may move) and the
/// bytes allocated and not yet freed.
struct Counting;

static ALLOCATIONS: AtomicU64 = AtomicU64::new(0);
static LIVE_BYTES: AtomicU64 = AtomicU64::new(0);

// SAFETY: every call is forwarded unchanged to `System`, which upholds `GlobalAlloc`'s contract;
// the counters are relaxed atomics that allocate nothing.
#[allow(unsafe_code)]
unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        ALLOCATIONS.fetch_add(1, Ordering::Relaxed);
        LIVE_BYTES.fetch_add(layout.size() as u64, Ordering::Relaxed);
        // SAFETY: the caller's guarantees for `layout` are passed on.
        unsafe { System.alloc(layout) }
    }

    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        LIVE_BYTES.fetch_sub(layout.size() as u64, Ordering::Relaxed);
        // SAFETY: `ptr` came from `System` with this `layout`.
        unsafe { System.dealloc(ptr, layout) }
    }

    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        ALLOCATIONS.fetch_add(1, Ordering::Relaxed);
        LIVE_BYTES.fetch_add(new_size as u64, Ordering::Relaxed);
        LIVE_BYTES.fetch_sub(layout.size() as u64, Ordering::Relaxed);
        // SAFETY: `ptr` came from `System` with this `layout`.
        unsafe { System.realloc(ptr, layout, new_size) }
    }
}

#[global_allocator]
static GLOBAL: Counting = Counting;

/// The bytes on the heap, as asked for (not what glibc rounds them up to).
fn live_bytes() -> u64 {
    LIVE_BYTES.load(Ordering::Relaxed)
}

/// The heap allocations `f` makes.
fn allocations(f: impl FnOnce()) -> u64 {
    let before = ALLOCATIONS.load(Ordering::Relaxed);
    f();
    ALLOCATIONS.load(Ordering::Relaxed) - before
}

fn object(v: serde_json::Value) -> Resource {
    decode_value(v).expect("bench fixture decodes")
}

fn slice(i: usize, last_octet: usize) -> Resource {
    object(json!({
        "apiVersion": "discovery.k8s.io/v1", "kind": "EndpointSlice",
        "metadata": {"name": format!("svc-{i}-slice"), "namespace": "bench",
                     "labels": {"kubernetes.io/service-name": format!("svc-{i}")}},
        "addressType": "IPv4",
        "endpoints": [{"addresses": [format!("10.{}.{}.{last_octet}", i / 256, i % 256)]}]
    }))
}

/// A render sink that drops each result it is handed (after `black_box`, so none is optimised
/// away): what a consumer that publishes and forgets each result costs beyond the render.
struct Dropped;

impl RenderSink for Dropped {
    fn gateway(&mut self, key: ObjectKey, output: GatewayOutput) {
        black_box((key, output));
    }

    fn route(&mut self, route: ObjRef, status: UdpRouteStatus) {
        black_box((route, status));
    }

    fn class(&mut self, name: String, status: GatewayClassStatus) {
        black_box((name, status));
    }

    fn config_map(&mut self, key: ObjectKey, config_map: Owned<ConfigMap>) {
        black_box((key, config_map));
    }
}

/// Standalone mode's sink (`server/src/reconcile/settle.rs`): a Gateway's output is held while
/// its Service is not in the index as rendered (the operator's rule where no manifest holds
/// the Service, as here), for the next pass; every other result is handed on and dropped. On a
/// [`settle`]d index nothing is held.
struct Settling<'i> {
    index: &'i Index,
    held: Vec<(ObjectKey, GatewayOutput)>,
}

impl RenderSink for Settling<'_> {
    fn gateway(&mut self, key: ObjectKey, output: GatewayOutput) {
        let in_place = match &output.service {
            Owned::Apply(service) => self.index.services().get(&key) == Some(service),
            Owned::Delete => !self.index.services().contains_key(&key),
            Owned::Keep => true,
        };
        if in_place {
            black_box((key, output));
        } else {
            self.held.push((key, output));
        }
    }

    fn route(&mut self, route: ObjRef, status: UdpRouteStatus) {
        Dropped.route(route, status);
    }

    fn class(&mut self, name: String, status: GatewayClassStatus) {
        Dropped.class(name, status);
    }

    fn config_map(&mut self, key: ObjectKey, config_map: Owned<ConfigMap>) {
        Dropped.config_map(key, config_map);
    }
}

/// Makes `index` what the operator holds once a render's own objects came back: each Gateway's
/// Service and Deployment as rendered with `settings`, reaching the index the way they reach
/// the operator's. A render of the settled index reads them, as the operator's later renders do.
///
/// How they got there decides where they lie on the heap, and so what a render of them costs
/// (BENCHMARKS.md, "Render cost per Gateway"), hence the two ways:
/// - cluster mode: the watchers bring them back once the writer has sent them, each decoded
///   from the API server's JSON into a fresh object, the render's output long gone;
/// - standalone mode (`held_deployments_only`; no Deployment rendered here): its sink applies a
///   clone of each while the render pass goes on, and the pass's output is dropped.
fn settle(index: &mut Index, settings: &RenderSettings, now: &Time) {
    let output = render_all(index, settings, now);
    let owned = || output.gateways.values().map(|gw| (applied(&gw.service), applied(&gw.deployment)));
    if settings.held_deployments_only {
        let clones = owned().flat_map(|(s, d)| [s.cloned().map(Resource::from), d.cloned().map(Resource::from)]);
        let clones: Vec<Resource> = clones.flatten().collect();
        drop(output);
        for r in clones {
            index.apply(r);
        }
        return;
    }
    let watched =
        owned().flat_map(|(s, d)| [s.map(|s| (Kind::Service, json_of(s))), d.map(|d| (Kind::Deployment, json_of(d)))]);
    let watched: Vec<(Kind, String)> = watched.flatten().collect();
    drop(output);
    for (kind, text) in watched {
        index.apply(watched_back(kind, &text));
    }
}

/// Whether a render of `index` asks for the very Services and Deployments it holds.
fn is_settled(index: &Index, settings: &RenderSettings, now: &Time) -> bool {
    render_all(index, settings, now).gateways.iter().all(|(key, gw)| {
        let held_deployment = |d: &Deployment| index.deployments().get(key) == Some(&DeploymentRecord::from(d.clone()));
        applied(&gw.service).is_none_or(|s| index.services().get(key) == Some(s))
            && applied(&gw.deployment).is_none_or(held_deployment)
    })
}

/// What a render applies of an owned object, if it applies it.
fn applied<T>(owned: &Owned<T>) -> Option<&T> {
    match owned {
        Owned::Apply(object) => Some(object),
        _ => None,
    }
}

/// An owned object as a watch event carries it: JSON text, with its apiVersion and kind.
fn json_of(object: &impl serde::Serialize) -> String {
    serde_json::to_string(object).expect("an owned object serializes")
}

/// The object a watcher decodes from `text` (into the typed object, as kube's watchers do), as
/// the index takes it.
fn watched_back(kind: Kind, text: &str) -> Resource {
    match kind {
        Kind::Service => serde_json::from_str::<Service>(text).expect("a watched Service").into(),
        Kind::Deployment => serde_json::from_str::<Deployment>(text).expect("a watched Deployment").into(),
        kind => panic!("no owned object of kind {kind:?}"),
    }
}

/// Renders every Gateway of `index` as standalone mode does (its sink); returns how many it held.
fn render_standalone(index: &Index, settings: &RenderSettings, now: &Time) -> usize {
    let mut settling = Settling { index, held: Vec::new() };
    render_each(index, &index.everything(), settings, now, &mut settling);
    settling.held.len()
}

/// An index with the shared class, config and dataplane plus `n` combos.
fn index(n: usize) -> Index {
    index_of(n, COMBO_OBJECTS)
}

/// The objects of a combo, in the order [`index_of`] makes them.
const COMBO_OBJECTS: usize = 4;

/// An index with the shared class, config and dataplane plus `n` combos of their first
/// `objects` objects: 1 the Gateway alone, 2 with its UDPRoute, 3 with the route's backend
/// Service, 4 with that Service's EndpointSlice (a whole combo).
fn index_of(n: usize, objects: usize) -> Index {
    assert!((1..=COMBO_OBJECTS).contains(&objects), "a combo has 1 to {COMBO_OBJECTS} objects");
    let mut index = Index::new();
    let shared = [
        json!({"apiVersion": "gateway.networking.k8s.io/v1", "kind": "GatewayClass", "metadata": {"name": "class"},
               "spec": {"controllerName": "stunner.l7mp.io/gateway-operator",
                        "parametersRef": {"group": "stunner.l7mp.io", "kind": "GatewayConfig", "name": "config", "namespace": "bench"}}}),
        json!({"apiVersion": "stunner.l7mp.io/v1", "kind": "GatewayConfig", "metadata": {"name": "config", "namespace": "bench"},
               "spec": {"userName": "user", "password": "pass"}}),
        json!({"apiVersion": "stunner.l7mp.io/v1", "kind": "Dataplane", "metadata": {"name": "default"}, "spec": {}}),
    ];
    for v in shared {
        index.apply(object(v));
    }
    for i in 0..n {
        let combo = [
            object(json!({
                "apiVersion": "gateway.networking.k8s.io/v1", "kind": "Gateway",
                "metadata": {"name": format!("gw-{i}"), "namespace": "bench"},
                "spec": {"gatewayClassName": "class", "listeners": [{"name": "udp", "protocol": "TURN-UDP", "port": 3478}]}
            })),
            object(json!({
                "apiVersion": "stunner.l7mp.io/v1", "kind": "UDPRoute",
                "metadata": {"name": format!("route-{i}"), "namespace": "bench"},
                "spec": {"parentRefs": [{"name": format!("gw-{i}")}], "rules": [{"backendRefs": [{"name": format!("svc-{i}")}]}]}
            })),
            object(json!({
                "apiVersion": "v1", "kind": "Service", "metadata": {"name": format!("svc-{i}"), "namespace": "bench"},
                "spec": {"clusterIP": format!("172.16.{}.{}", i / 256, i % 256)}
            })),
            slice(i, 1),
        ];
        for o in combo.into_iter().take(objects) {
            index.apply(o);
        }
    }
    index
}

/// Follows the chain of lookups a render of each Gateway makes, as the renderer makes them: the
/// Gateway, its routes (its referrers), their backend Services (named by the routes'
/// backendRefs), the Services' EndpointSlices (their referrers), reading one field of each
/// object found (through `black_box`). The index's share of a render. Returns how many objects
/// it found: four per combo of [`index`].
fn follow_lookups(index: &Index) -> usize {
    let mut found = 0;
    for key in index.gateways().keys() {
        let Some(gateway) = index.gateways().get(key) else { continue };
        black_box(gateway.spec.listeners.len());
        found += 1;
        for route in index.referrers(ObjRefView::new(Kind::Gateway, key), Kind::UdpRoute) {
            let Some(r) = index.udp_routes().get(route) else { continue };
            found += 1;
            let backends = r.spec.rules.iter().flat_map(|rule| &rule.backend_refs);
            for backend in backends.filter_map(|b| backend_target(&route.namespace, b)) {
                let Some(service) = index.services().get(&backend.key) else { continue };
                black_box(service.spec.as_ref().map(|s| &s.cluster_ip));
                found += 1;
                for slice in index.referrers(backend.view(), Kind::EndpointSlice) {
                    let Some(addresses) = index.endpoint_slices().get(slice) else { continue };
                    black_box(addresses.addresses.len());
                    found += 1;
                }
            }
        }
    }
    found
}

/// The largest cache of CPU 0 as Linux describes it (`/sys/devices/system/cpu/cpu0/cache`),
/// or 32 MiB where that is not readable.
fn last_level_cache_bytes() -> usize {
    let caches = std::fs::read_dir("/sys/devices/system/cpu/cpu0/cache").into_iter().flatten().flatten();
    let size = |dir: std::path::PathBuf| {
        let text = std::fs::read_to_string(dir.join("size")).ok()?;
        let kib: usize = text.trim().strip_suffix('K')?.parse().ok()?;
        Some(kib << 10)
    };
    caches.filter_map(|entry| size(entry.path())).max().unwrap_or(32 << 20)
}

/// Twice the last-level cache: writing this many bytes leaves none of the index in any cache.
/// Read from the machine, not fixed: the VMs these figures come from went from a 32 MiB to a
/// 260 MiB last-level cache, where a fixed 64 MiB left most of the index in it.
fn eviction_bytes() -> usize {
    2 * last_level_cache_bytes()
}

/// Writes every cache line of `buffer`, so that the next render finds the index in memory, not
/// in a cache, as a render does after the operator has done other work since the last one.
fn evict_caches(buffer: &mut [u8]) {
    for line in buffer.chunks_mut(64) {
        line[0] = line[0].wrapping_add(1);
    }
    black_box(buffer);
}

/// What one read of memory the caches do not hold costs on this machine now, in ns: a chain of
/// dependent loads, one per cache line of a `bytes` buffer, in a random order that no prefetcher
/// follows. The render's step at large N is such reads (BENCHMARKS.md, "Render cost per
/// Gateway"), and on a VM how much of the last-level cache is ours changes with the neighbours:
/// the curve tells how large a working set stays cheap here, whatever size the cache reports.
fn load_latency_ns(bytes: usize) -> f64 {
    let next = random_line_cycle(bytes / 64);
    let chase = |loads: usize| {
        let mut at = 0;
        for _ in 0..loads {
            at = next[at];
        }
        black_box(at)
    };
    chase(bytes / 64); // once round the cycle: whatever fits a cache is in it
    let loads = 1 << 22;
    let started = Instant::now();
    chase(loads);
    started.elapsed().as_secs_f64() * 1e9 / loads as f64
}

/// Slots of `usize`, a cache line's worth per line of `lines`, where the first slot of each line
/// holds the index of the first slot of the next line in one random cycle through all of them.
fn random_line_cycle(lines: usize) -> Vec<usize> {
    const SLOTS_PER_LINE: usize = 64 / size_of::<usize>();
    // A Fisher-Yates shuffle (xorshift64: the benchmark has no random crate), then each line
    // points at the one after it in that order, the last at the first.
    let mut order: Vec<usize> = (0..lines).collect();
    let mut state = 0x9e37_79b9_7f4a_7c15_u64;
    for i in (1..lines).rev() {
        state ^= state << 13;
        state ^= state >> 7;
        state ^= state << 17;
        order.swap(i, (state % (i as u64 + 1)) as usize);
    }
    let mut next = vec![0; lines * SLOTS_PER_LINE];
    for (at, to) in order.iter().zip(order.iter().cycle().skip(1)) {
        next[at * SLOTS_PER_LINE] = to * SLOTS_PER_LINE;
    }
    next
}

/// How many loads a chase through `next` takes from slot 0 back to it (at most `next.len()`).
fn cycle_length(next: &[usize]) -> usize {
    let mut at = next[0];
    let mut length = 1;
    while at != 0 && length < next.len() {
        at = next[at];
        length += 1;
    }
    length
}

/// Every `k`-th Gateway of the index, in key order, as the dirty set of a render (their routes
/// come with them: a Gateway's render hands on its routes' statuses).
fn every_kth_gateway(index: &Index, k: usize) -> Dirty {
    assert!(k > 0, "--every K takes K >= 1");
    Dirty { gateways: index.gateways().keys().step_by(k).cloned().collect(), ..Dirty::default() }
}

/// The fixture of upstream's `BenchmarkRenderPipeline` (internal/renderer/render_benchmark_test.go,
/// from internal/testutils): the shared class, config (realm, static auth, log level) and
/// Dataplane, and per combo `i` in namespace `testnamespace-i`: a Gateway with a TURN-UDP and
/// a TURN-TCP listener, a UDPRoute attached to the UDP one, its backend LoadBalancer Service
/// (owned by the Gateway, with an ingress address for both ports) and that Service's
/// EndpointSlice of four endpoints.
fn upstream_index(n: usize) -> Index {
    let mut index = Index::new();
    let shared = [
        json!({"apiVersion": "gateway.networking.k8s.io/v1", "kind": "GatewayClass", "metadata": {"name": "gatewayclass-ok"},
               "spec": {"controllerName": "stunner.l7mp.io/gateway-operator",
                        "parametersRef": {"group": "stunner.l7mp.io", "kind": "GatewayConfig", "name": "gatewayconfig-ok", "namespace": "testnamespace"}}}),
        json!({"apiVersion": "stunner.l7mp.io/v1", "kind": "GatewayConfig", "metadata": {"name": "gatewayconfig-ok", "namespace": "testnamespace"},
               "spec": {"realm": "testrealm", "authType": "static", "userName": "testuser", "password": "testpass", "logLevel": "testloglevel"}}),
        json!({"apiVersion": "stunner.l7mp.io/v1", "kind": "Dataplane", "metadata": {"name": "default"},
               "spec": {"replicas": 3, "image": "testimage-1", "command": ["testcommand-1"], "args": ["arg-1", "arg-2"]}}),
    ];
    for v in shared {
        index.apply(object(v));
    }
    for i in 0..n {
        let ns = format!("testnamespace-{i}");
        index.apply(object(json!({
            "apiVersion": "gateway.networking.k8s.io/v1", "kind": "Gateway",
            "metadata": {"name": format!("gateway-{i}"), "namespace": ns, "labels": {"dummy-label": "dummy-value"}},
            "spec": {"gatewayClassName": "gatewayclass-ok", "listeners": [
                {"name": "gateway-1-listener-udp", "protocol": "TURN-UDP", "port": 1},
                {"name": "gateway-1-listener-tcp", "protocol": "TURN-TCP", "port": 2}]}
        })));
        index.apply(object(json!({
            "apiVersion": "stunner.l7mp.io/v1", "kind": "UDPRoute",
            "metadata": {"name": format!("udproute-{i}"), "namespace": ns},
            "spec": {"parentRefs": [{"name": format!("gateway-{i}"), "sectionName": "gateway-1-listener-udp"}],
                     "rules": [{"backendRefs": [{"name": format!("testservice-{i}")}]}]}
        })));
        index.apply(object(json!({
            "apiVersion": "v1", "kind": "Service",
            "metadata": {"name": format!("testservice-{i}"), "namespace": ns,
                         "annotations": {"stunner.l7mp.io/related-gateway-name": "testnamespace/gateway-1"},
                         "ownerReferences": [{"apiVersion": "gateway.networking.k8s.io/v1", "kind": "Gateway",
                                              "uid": "test-uid", "name": format!("gateway-{i}")}]},
            "spec": {"type": "LoadBalancer", "selector": {"app": "dummy"}, "clusterIP": format!("10.0.{}.{}", i / 256, i % 256),
                     "ports": [{"name": "udp-ok", "protocol": "UDP", "port": 1}, {"name": "tcp-ok", "protocol": "TCP", "port": 2}]},
            "status": {"loadBalancer": {"ingress": [{"ip": "1.2.3.4",
                       "ports": [{"port": 1, "protocol": "UDP"}, {"port": 2, "protocol": "TCP"}]}]}}
        })));
        index.apply(object(json!({
            "apiVersion": "discovery.k8s.io/v1", "kind": "EndpointSlice",
            "metadata": {"name": format!("testendpointslice-{i}"), "namespace": ns,
                         "labels": {"kubernetes.io/service-name": format!("testservice-{i}")}},
            "addressType": "IPv4",
            "endpoints": [
                {"addresses": ["1.2.3.4", "1.2.3.5"], "conditions": {"ready": true, "serving": true, "terminating": false}},
                {"addresses": ["1.2.3.6"], "conditions": {"ready": false, "serving": false, "terminating": true}},
                {"addresses": ["1.2.3.7"], "conditions": {"ready": false, "serving": true, "terminating": false}}],
            "ports": [{"name": "udp-port", "protocol": "UDP"}, {"name": "tcp-port", "protocol": "TCP"}]
        })));
    }
    index
}

/// The most heap allocations a full render may make per Gateway of `index(n)` from 8 combos
/// on (fewer combos share the class's and config's work less): 259 before the renderer looked
/// the index up by borrowed keys and rendered each route's cluster once, 204 after, 194 since
/// object keys are held inline (their clones allocate nothing); 238 since the statuses carry a
/// Programmed condition and the supported kinds per listener, the owned objects the Gateway
/// API's labels, and addresses are kept per family (#58, #60): more to say, not yet cut back.
const ALLOCATIONS_PER_GATEWAY: f64 = 240.0;

/// Mean time per run over enough runs to fill about a second (at least 3).
fn measure(mut f: impl FnMut()) -> Duration {
    let start = Instant::now();
    let mut runs = 0u32;
    while runs < 3 || start.elapsed() < Duration::from_secs(1) {
        f();
        runs += 1;
    }
    start.elapsed() / runs
}

/// The number given after the flag `name`, if the flag is there.
fn number_after(args: &[String], name: &str) -> Option<usize> {
    let at = args.iter().position(|a| a == name)?;
    Some(args.get(at + 1).and_then(|a| a.parse().ok()).unwrap_or_else(|| panic!("usage: {name} <number>")))
}

fn main() {
    let settings = RenderSettings::default();
    let now = Time("2024-01-01T00:00:00Z".parse().unwrap());
    let args: Vec<String> = std::env::args().collect();
    if args.iter().any(|a| a == "--latency") {
        let curve: Vec<String> =
            [1, 2, 4, 8, 16, 32, 64].iter().map(|mib| format!("{mib} MiB {:.1}", load_latency_ns(mib << 20))).collect();
        println!("ns per read of memory in a random order, by buffer size: {}", curve.join(", "));
        return;
    }
    if let Some(i) = args.iter().position(|a| a == "--profile") {
        let arg = |j: usize| args.get(i + j).and_then(|a| a.parse().ok()).expect("usage: --profile N RUNS");
        let (n, runs): (usize, usize) = (arg(1), arg(2));
        let flag = |f: &str| args.iter().any(|a| a == f);
        let objects = number_after(&args, "--objects").unwrap_or(COMBO_OBJECTS);
        let heap_before = live_bytes();
        let mut index = if flag("--upstream") { upstream_index(n) } else { index_of(n, objects) };
        let kept = flag("--kept");
        // Standalone mode's settings: no Deployment rendered where the index holds none.
        let standalone = flag("--standalone");
        let settings = RenderSettings { held_deployments_only: standalone, ..settings };
        if flag("--settled") {
            settle(&mut index, &settings, &now);
        }
        let index = index;
        let index_bytes = live_bytes() - heap_before;
        let lookups = flag("--lookups");
        let every = number_after(&args, "--every").map(|k| every_kth_gateway(&index, k));
        let mut eviction = flag("--cold").then(|| vec![0u8; eviction_bytes()]);
        let mut elapsed = Duration::ZERO;
        let allocated = allocations(|| {
            for _ in 0..runs {
                if let Some(buffer) = &mut eviction {
                    evict_caches(buffer);
                }
                let started = Instant::now();
                if let Some(dirty) = &every {
                    render_each(&index, dirty, &settings, &now, &mut Dropped);
                } else if lookups {
                    assert_eq!(follow_lookups(&index), objects * n, "every combo's objects are found");
                } else if kept {
                    drop(black_box(render_all(&index, &settings, &now)));
                } else if standalone {
                    black_box(render_standalone(&index, &settings, &now));
                } else {
                    let everything = index.everything();
                    render_each(&index, &everything, &settings, &now, &mut Dropped);
                }
                elapsed += started.elapsed();
            }
        });
        let rendered = (every.as_ref().map_or(n, |d| d.gateways.len()) * runs.max(1)) as f64;
        let passes = if lookups { "lookup passes" } else { "renders" };
        println!(
            "{n} combos, {runs} {passes}: {:.1} µs/gateway, {:.1} allocations/gateway; index {:.0} bytes/combo{}",
            elapsed.as_secs_f64() * 1e6 / rendered,
            allocated as f64 / rendered,
            index_bytes as f64 / n.max(1) as f64,
            eviction.as_ref().map_or(String::new(), |b| format!("; {} MiB written before each run", b.len() >> 20)),
        );
        return;
    }
    let lines = 1000;
    assert_eq!(cycle_length(&random_line_cycle(lines)), lines, "the latency probe's chase reads every line once");
    let full = args.iter().any(|a| a == "--bench");
    let mut report = report::Report::new("render", json!({ "implementation": "ours" }));
    let (sizes, many): (&[usize], usize) = if full { (&[1, 8, 64, 512, 1024, 4096], 5000) } else { (&[1, 8], 50) };
    for &n in sizes {
        let index = index(n);
        assert_eq!(follow_lookups(&index), COMBO_OBJECTS * n, "the lookups reach every combo's four objects");
        let sparse = render(&index, &every_kth_gateway(&index, 4), &settings, &now);
        let expected = n.div_ceil(4);
        assert_eq!(
            (sparse.gateways.len(), sparse.routes.len()),
            (expected, expected),
            "every 4th Gateway and its route"
        );
        for objects in 1..COMBO_OBJECTS {
            let partial = render_all(&index_of(n, objects), &settings, &now);
            let routes = if objects > 1 { n } else { 0 };
            assert_eq!((partial.gateways.len(), partial.routes.len()), (n, routes), "combos of {objects} objects");
        }
        let allocated = allocations(|| drop(black_box(render_all(&index, &settings, &now))));
        let per_gateway = allocated as f64 / n as f64;
        assert!(n < 8 || per_gateway <= ALLOCATIONS_PER_GATEWAY, "{per_gateway} allocations per Gateway at N = {n}");
        let streamed = measure(|| {
            let everything = index.everything();
            render_each(&index, &everything, &settings, &now, &mut Dropped);
        });
        let kept = measure(|| drop(black_box(render_all(&index, &settings, &now))));
        let mut settled = index;
        settle(&mut settled, &settings, &now);
        assert!(is_settled(&settled, &settings, &now), "the watched-back objects are what a render asks for");
        let handed_on_settled = measure(|| {
            let everything = settled.everything();
            render_each(&settled, &everything, &settings, &now, &mut Dropped);
        });
        let standalone_settings = RenderSettings { held_deployments_only: true, ..settings.clone() };
        let mut settled = index_of(n, COMBO_OBJECTS);
        settle(&mut settled, &standalone_settings, &now);
        assert!(is_settled(&settled, &standalone_settings, &now), "the applied clones are what a render asks for");
        let standalone = measure(|| {
            assert_eq!(render_standalone(&settled, &standalone_settings, &now), 0, "nothing held once settled");
        });
        let micros = |t: Duration| t.as_secs_f64() * 1e6 / n as f64;
        report.row(json!({
            "of": "full render",
            "combos": n,
            "ms": streamed.as_secs_f64() * 1e3,
            "us_per_gateway": {
                "handed_on": micros(streamed),
                "kept_whole": micros(kept),
                "settled_handed_on": micros(handed_on_settled),
                "settled_standalone": micros(standalone),
            },
            "allocations_per_gateway": per_gateway,
        }));
        println!(
            "full render, {n:>5} combos: {:>10.3} ms ({:.1} µs/gateway handed on; kept whole: {:.1} µs/gateway; settled: {:.1} µs/gateway handed on, {:.1} standalone; {:.1} allocations/gateway)",
            streamed.as_secs_f64() * 1e3,
            micros(streamed),
            micros(kept),
            micros(handed_on_settled),
            micros(standalone),
            per_gateway
        );
    }
    let upstream_sizes: &[usize] = if full { &[1, 2, 4, 8, 16, 32, 64, 128, 256, 512] } else { &[1, 2] };
    for &n in upstream_sizes {
        let index = upstream_index(n);
        let out = render_all(&index, &settings, &now);
        assert_eq!(out.gateways.len(), n);
        let accepted = |c: &Condition| c.type_ == "Accepted" && c.status == "True";
        assert!(out.routes.values().all(|r| r.parents.len() == 1 && r.parents[0].conditions.iter().any(accepted)));
        let t = measure(|| drop(black_box(render_all(&index, &settings, &now))));
        report.row(json!({
            "of": "upstream shape",
            "combos": n,
            "ms": t.as_secs_f64() * 1e3,
            "us_per_gateway": t.as_secs_f64() * 1e6 / n as f64,
        }));
        println!(
            "upstream shape, {n:>3} combos: {:.3} ms ({:.1} µs/gateway)",
            t.as_secs_f64() * 1e3,
            t.as_secs_f64() * 1e6 / n as f64
        );
    }
    let mut index = index(many);
    let mut octet = 1;
    let t = measure(|| {
        octet = octet % 250 + 2;
        let dirty: Dirty = index.apply(slice(many / 2, octet));
        assert_eq!(dirty.gateways.len(), 1, "one slice change must dirty one Gateway");
        let out = render(&index, &dirty, &settings, &now);
        assert_eq!(out.gateways.len(), 1);
        black_box(out);
    });
    report.row(json!({ "of": "incremental", "gateways": many, "us": t.as_secs_f64() * 1e6 }));
    println!("incremental, 1 EndpointSlice among {many} Gateways (apply + render): {:.1} µs", t.as_secs_f64() * 1e6);
}
