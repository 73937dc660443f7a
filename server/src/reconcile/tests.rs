//! The render loop against the real index, renderer and CDS store, on a paused clock: when it
//! renders here, what it publishes in [`publication`].

use super::*;
use crate::admin::Readiness;
use crate::metrics::OperatorMetrics;
use crate::pipeline::ConfigSink;
use crate::pipeline::cluster::Cluster;
use crate::pipeline::mode::Mode;
use crate::pipeline::service_wait::SERVICE_WAIT;
use crate::pipeline::standalone::Standalone;
use std::path::Path;
use std::sync::Arc;
use stunner_gateway::cds::ConfigId;
use stunner_gateway::config::StunnerConfig;
use stunner_gateway::index::{Kind, ObjRef, ObjectKey, Resource};
use stunner_gateway::manifest;
use stunner_gateway::render::Owned;
use stunner_gateway_cds::CdsMetrics;
use stunner_gateway_cds::store::ConfigStore;
use stunner_gateway_cds::version::Version;
use stunner_gateway_k8s::nodes::NodeFeed;
use stunner_gateway_k8s::writer::Writer;

mod publication;

const THROTTLE: Duration = Duration::from_millis(250);

/// The objects of one manifest file, as changes that apply them.
fn applied(file: &str, text: &str) -> impl Iterator<Item = Change> {
    manifest::load(Path::new(file), text, manifest::Admission::Validated).unwrap().into_resources().map(Change::Apply)
}

/// The quickstart manifests, as one batch of changes.
fn quickstart() -> Vec<Change> {
    let dir = concat!(env!("CARGO_MANIFEST_DIR"), "/../deploy/examples/quickstart");
    let mut changes = Vec::new();
    for file in ["gatewayclass.yaml", "gateway.yaml", "route.yaml"] {
        let text = std::fs::read_to_string(format!("{dir}/{file}")).unwrap();
        changes.extend(applied(file, &text));
    }
    changes
}

/// A GatewayConfig change: the realm, which every config of the class carries.
fn realm(realm: &str) -> Input {
    let text = format!(
        "apiVersion: stunner.l7mp.io/v1\nkind: GatewayConfig\n\
         metadata: {{name: stunner-gatewayconfig, namespace: stunner}}\n\
         spec: {{realm: {realm}, authType: static, userName: user-1, password: pass-1}}\n"
    );
    Input::Changes(applied("gatewayconfig.yaml", &text).collect())
}

/// The real store, and every config version published to it, in order.
struct Recorder {
    store: ConfigStore,
    published: std::sync::Mutex<Vec<StunnerConfig>>,
}

impl ConfigSink for Recorder {
    fn upsert(&self, config: StunnerConfig) -> Option<Version> {
        let version = self.store.upsert(config.clone());
        if version.is_some() {
            self.published.lock().unwrap().push(config);
        }
        version
    }

    fn delete(&self, id: &ConfigId) -> bool {
        self.store.delete(id)
    }
}

/// The render loop's outputs, the configs recorded.
fn outputs(mode: Box<dyn Mode>) -> (Outputs, Arc<Recorder>) {
    let sink = Arc::new(Recorder { store: ConfigStore::new(CdsMetrics::default()), published: Default::default() });
    let outputs = Outputs {
        store: sink.clone(),
        statuses: Arc::default(),
        metrics: OperatorMetrics::default(),
        readiness: Readiness::default(),
        mode,
        nodes: NodeFeed::new(Arc::default()),
    };
    (outputs, sink)
}

struct Loop {
    tx: mpsc::Sender<Input>,
    sink: Arc<Recorder>,
    metrics: OperatorMetrics,
    readiness: Readiness,
}

impl Loop {
    /// Standalone mode: the operator's own objects go straight into the index.
    fn start() -> Loop {
        Self::start_with(Box::new(Standalone::default()))
    }

    /// Cluster mode: owned objects are queued for a writer (never run here: the queue it
    /// returns is never written from), and come back only when the test sends them, as the
    /// watchers would.
    fn start_in_cluster() -> (Loop, Writer) {
        let writer = Writer::new(Default::default());
        (Self::start_with(Box::new(Cluster::new(writer.clone()))), writer)
    }

    fn start_with(mode: Box<dyn Mode>) -> Loop {
        let (tx, rx) = mpsc::channel(64);
        let (outputs, sink) = outputs(mode);
        let (metrics, readiness) = (outputs.metrics.clone(), outputs.readiness.clone());
        tokio::spawn(Reconciler::new(RenderSettings::default(), THROTTLE, outputs).run(rx));
        Loop { tx, sink, metrics, readiness }
    }

    /// Every config published so far.
    fn published(&self) -> Vec<StunnerConfig> {
        self.sink.published.lock().unwrap().clone()
    }

    async fn send(&self, input: Input) {
        self.tx.send(input).await.unwrap();
        // Let the loop take it before the clock moves on.
        tokio::task::yield_now().await;
    }

    fn renders(&self) -> u64 {
        self.metrics.render.get()
    }

    fn throttled(&self) -> u64 {
        self.metrics.reconcile_events.get_or_create(&ReconcileLabels { result: ReconcileResult::throttled }).get()
    }

    fn realm(&self) -> Option<String> {
        let id = ConfigId::new("stunner", "udp-gateway");
        self.sink.store.get(&id).map(|s| s.config.auth.realm.clone())
    }
}

#[tokio::test(start_paused = true)]
async fn nothing_is_rendered_before_the_sources_are_synced() {
    let l = Loop::start();
    l.send(Input::Changes(quickstart())).await;
    tokio::time::sleep(THROTTLE * 4).await;
    assert_eq!((l.renders(), l.realm()), (0, None));
    assert!(!l.readiness.is_ready());
    l.send(Input::Synced).await;
    tokio::time::sleep(THROTTLE * 2).await;
    assert!(l.renders() >= 1);
    assert_eq!(l.realm().as_deref(), Some("stunner.l7mp.io"));
    assert!(l.readiness.is_ready());
}

/// The loop after its first render, with nothing rendered for longer than any window.
async fn quiet_loop() -> Loop {
    let l = Loop::start();
    l.send(Input::Changes(quickstart())).await;
    l.send(Input::Synced).await;
    tokio::time::sleep(THROTTLE * 2).await;
    l
}

#[tokio::test(start_paused = true)]
async fn the_gauges_follow_the_index_and_the_runtime() {
    // In a cluster, where the operator's own objects reach the index only from the watchers.
    let (l, _writer) = Loop::start_in_cluster();
    l.send(Input::Changes(quickstart())).await;
    l.send(Input::Synced).await;
    tokio::time::sleep(THROTTLE * 2).await;
    // The quickstart: a class, its GatewayConfig and Dataplane, a Gateway, a route; the loop
    // itself is a task of the runtime.
    let objects = quickstart().len() as i64;
    assert_eq!(l.metrics.index_objects.get(), objects);
    assert!(l.metrics.index_referred_objects.get() > 0);
    assert!(l.metrics.tasks.get() >= 1);
    let deletions = quickstart().iter().map(|c| Change::Delete(c.seen().0)).collect();
    l.send(Input::Changes(deletions)).await;
    assert_eq!((l.metrics.index_objects.get(), l.metrics.index_referred_objects.get()), (0, 0));
}

#[tokio::test(start_paused = true)]
async fn an_isolated_change_is_rendered_at_once() {
    let l = quiet_loop().await;
    let (before, sent) = (l.renders(), Instant::now());
    l.send(realm("a")).await;
    assert_eq!(l.realm().as_deref(), Some("a"));
    assert_eq!(Instant::now(), sent, "no time passed");
    assert_eq!(l.renders() - before, 1);
    assert_eq!(l.throttled(), 0, "nothing joined a pending render");
}

#[tokio::test(start_paused = true)]
async fn changes_right_after_a_render_are_rendered_once_with_their_last_state() {
    let l = quiet_loop().await;
    let before = l.renders();
    l.send(realm("a")).await;
    for r in ["b", "c", "d"] {
        tokio::time::sleep(Duration::from_millis(2)).await;
        l.send(realm(r)).await;
    }
    assert_eq!(l.realm().as_deref(), Some("a"), "b, c and d wait for the window");
    tokio::time::sleep(coalesce::MIN_WINDOW).await;
    assert_eq!(l.realm().as_deref(), Some("d"));
    // One pass each (the operator's own objects settle without another).
    assert_eq!(l.renders() - before, 2);
    assert_eq!(l.throttled(), 2, "c and d joined the render b asked for");
}

#[tokio::test(start_paused = true)]
async fn a_burst_of_1000_changes_in_a_second_renders_about_once_per_throttle_timeout() {
    let l = quiet_loop().await;
    let before = l.renders();
    for i in 0..1000 {
        l.send(realm(&format!("r{i}"))).await;
        tokio::time::sleep(Duration::from_millis(1)).await;
    }
    tokio::time::sleep(THROTTLE).await;
    assert_eq!(l.realm().as_deref(), Some("r999"));
    // 1 s / 250 ms, the first change at once, and two windows growing to the bound.
    let renders = l.renders() - before;
    assert!(renders <= 1000 / THROTTLE.as_millis() as u64 + 3, "{renders} renders");
}

#[tokio::test(start_paused = true)]
async fn a_steady_stream_of_changes_cannot_postpone_rendering() {
    let l = quiet_loop().await;
    let start = Instant::now();
    // A change every 10 ms for 3 s, never a quiet window; after each, the newest change
    // the store shows.
    let mut shown = Vec::new();
    for i in 0..300 {
        l.send(realm(&format!("r{i}"))).await;
        tokio::time::sleep(Duration::from_millis(10)).await;
        let newest = l.realm().and_then(|r| r.strip_prefix('r').and_then(|n| n.parse::<u64>().ok()));
        shown.push((Instant::now() - start, newest));
    }
    for i in 0..300 {
        let sent = Duration::from_millis(10 * i);
        let (at, newest) = shown.iter().find(|(at, _)| *at >= sent + THROTTLE).copied().unwrap_or_default();
        if at.is_zero() {
            continue; // sent too late to check within the stream
        }
        assert!(newest >= Some(i), "change {i} was not rendered {THROTTLE:?} after it was made: {newest:?}");
    }
}

#[tokio::test(start_paused = true)]
async fn unchanged_content_publishes_no_new_version() {
    let l = Loop::start();
    l.send(Input::Changes(quickstart())).await;
    l.send(Input::Synced).await;
    tokio::time::sleep(THROTTLE * 2).await;
    let id = ConfigId::new("stunner", "udp-gateway");
    let first = l.sink.store.get(&id).unwrap();
    // The same objects again, as after a relist.
    l.send(Input::Changes(quickstart())).await;
    tokio::time::sleep(THROTTLE * 2).await;
    assert!(Arc::ptr_eq(&first, &l.sink.store.get(&id).unwrap()), "the snapshot was not replaced");
}
