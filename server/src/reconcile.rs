//! The render loop: applies source changes to the index, coalesces them, renders only what
//! they made dirty, and hands the results to the outputs (the CDS store and the statuses).
//!
//! An isolated change is rendered at once; changes that come while a render runs or right
//! after one are coalesced in a window that grows under a sustained burst, up to
//! `--throttle-timeout` ([`coalesce`]). A render's time is fixed by the change that asked for
//! it, so a steady stream of changes cannot postpone rendering.
//! Nothing is rendered before the sources report their first complete state, so a dataplane
//! never sees a config built from half the cluster. Nor does it see configs that are about to
//! be replaced: in standalone mode only the settled result of a render is published (not the
//! pass before the operator's own objects came back), in cluster mode a Gateway's config waits
//! for the Service the render asked for ([`service_wait`]).

mod coalesce;
mod service_wait;

use crate::admin::Readiness;
use crate::cds::store::ConfigStore;
use crate::cds::version::Version;
use crate::cluster::nodes::NodeFeed;
use crate::cluster::writer::Writer;
use crate::metrics::{Controller, OperatorMetrics, ReconcileLabels, ReconcileResult, unix_now};
use crate::source::Change;
use crate::source::owned::OwnedObjects;
use crate::status::StatusBoard;
use coalesce::Coalescer;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use service_wait::{SERVICE_WAIT, ServiceWait};
use std::sync::Arc;
use std::time::Duration;
use stunner_gateway::cds::{Condition, ConfigId, ObjectStatus};
use stunner_gateway::config::StunnerConfig;
use stunner_gateway::index::{Dirty, Index, Kind, ObjRef, ObjectKey};
use stunner_gateway::render::{GatewayOutput, InvalidConfig, Owned, RenderOutput, RenderSettings, render};
use tokio::sync::mpsc;
use tokio::time::Instant;

/// What sources tell the render loop.
#[derive(Debug)]
pub enum Input {
    Changes(Vec<Change>),
    /// Every source has delivered its complete initial state.
    Synced,
}

/// Where configs are published: the CDS store (a test wraps it to see every version).
pub trait ConfigSink: Send + Sync {
    /// See [`ConfigStore::upsert`].
    fn upsert(&self, config: StunnerConfig) -> Option<Version>;
    /// See [`ConfigStore::delete`].
    fn delete(&self, id: &ConfigId) -> bool;
}

impl ConfigSink for ConfigStore {
    fn upsert(&self, config: StunnerConfig) -> Option<Version> {
        ConfigStore::upsert(self, config)
    }

    fn delete(&self, id: &ConfigId) -> bool {
        ConfigStore::delete(self, id)
    }
}

/// Where rendered results go.
pub struct Outputs {
    pub store: Arc<dyn ConfigSink>,
    pub statuses: Arc<StatusBoard>,
    pub metrics: OperatorMetrics,
    pub readiness: Readiness,
    /// Standalone mode: no API server stores the objects the operator owns, so the index
    /// takes them directly, merged into the stored ones as if applied and watched back (the
    /// renderer reads the Gateway's Service for its public address).
    pub apply_owned_to_index: bool,
    /// Cluster mode: where owned objects and statuses are queued for the API server.
    pub writer: Option<Writer>,
    /// Where Node changes go for the CDS's per-node patcher.
    pub nodes: NodeFeed,
}

/// Renders caused by the operator's own objects coming back, per window: they settle in one
/// pass; the bound only guards against a render that never reaches a fixed point.
const MAX_PASSES: usize = 3;

/// How often the loop says it is alive when nothing happens (upstream's operator loop ticker).
const HEARTBEAT: Duration = Duration::from_secs(5);

pub struct Reconciler {
    index: Index,
    settings: RenderSettings,
    coalescer: Coalescer,
    /// When the changes taken so far are rendered; `None` while nothing waits.
    render_at: Option<Instant>,
    outputs: Outputs,
    dirty: Dirty,
    synced: bool,
    generation: i64,
    /// Cluster mode (a writer): configs waiting for their Gateway's Service.
    service_wait: Option<ServiceWait>,
    /// Standalone mode: the owned objects applied to the index (see `apply_owned_to_index`).
    owned: OwnedObjects,
}

impl Reconciler {
    /// `throttle` is `--throttle-timeout`: the longest a change waits for its render.
    pub fn new(settings: RenderSettings, throttle: Duration, outputs: Outputs) -> Self {
        let service_wait = outputs.writer.is_some().then(|| ServiceWait::new(SERVICE_WAIT));
        outputs.metrics.init_controllers();
        Reconciler {
            index: Index::new(),
            settings,
            coalescer: Coalescer::new(throttle),
            render_at: None,
            outputs,
            dirty: Dirty::default(),
            synced: false,
            generation: 0,
            service_wait,
            owned: OwnedObjects::default(),
        }
    }

    /// Runs until every sender of `inputs` is gone; returns itself for [`Self::finalize`].
    pub async fn run(mut self, mut inputs: mpsc::Receiver<Input>) -> Self {
        let mut heartbeat = tokio::time::interval(HEARTBEAT);
        heartbeat.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        loop {
            let service_deadline = self.service_wait.as_ref().and_then(ServiceWait::next_deadline);
            tokio::select! {
                input = inputs.recv() => match input {
                    Some(input) => self.take(input),
                    None => break,
                },
                _ = sleep_until(self.render_at) => {}
                _ = sleep_until(service_deadline) => self.publish_expired(),
                _ = heartbeat.tick() => {}
            }
            self.outputs.metrics.operator_loop_last_active.set(unix_now());
            // What queued up meanwhile (e.g. during the last render) joins this render; bounded,
            // so sources that never pause cannot keep the loop from rendering.
            for _ in 0..inputs.max_capacity() {
                match inputs.try_recv() {
                    Ok(input) => self.take(input),
                    Err(_) => break,
                }
            }
            if self.render_at.is_some_and(|at| at <= Instant::now()) {
                self.render_at = None;
                self.render_dirty();
                self.coalescer.rendered(Instant::now());
            }
        }
        self
    }

    /// Applies one input and, when it opens a window, fixes the time of the render that covers
    /// it (later inputs never move that time).
    fn take(&mut self, input: Input) {
        let pending = self.render_at.is_some();
        self.count(if pending { ReconcileResult::throttled } else { ReconcileResult::passed });
        let synced_now = matches!(input, Input::Synced);
        self.absorb(input);
        if !pending && self.synced && (synced_now || !self.dirty.is_empty()) {
            self.render_at = Some(self.coalescer.schedule(Instant::now()));
        }
    }

    /// `--enable-finalizer` at exit: queues the invalidation of every class of ours and the
    /// removal of their dataplanes for the writer (only the leader writes it), never for the
    /// CDS: the dataplanes keep their configs until their Deployments are gone.
    pub fn finalize(&self) {
        let Some(writer) = &self.outputs.writer else { return };
        if !self.synced {
            return;
        }
        let now = Time(k8s_openapi::jiff::Timestamp::now());
        let output = stunner_gateway::render::finalize(&self.index, &self.settings, &now);
        tracing::info!(gateways = output.gateways.len(), "finalizer: invalidating Gateways and removing dataplanes");
        writer.submit(&output, &self.index);
    }

    fn count(&self, result: ReconcileResult) {
        self.outputs.metrics.reconcile_events.get_or_create(&ReconcileLabels { result }).inc();
    }

    fn absorb(&mut self, input: Input) {
        match input {
            Input::Synced => {
                self.synced = true;
                self.dirty.merge(self.index.everything());
            }
            Input::Changes(changes) => {
                for change in changes {
                    self.outputs.nodes.observe(&change);
                    let kind = match &change {
                        Change::Apply(resource) => resource.kind(),
                        Change::Delete(r) => r.kind,
                    };
                    let controller = Controller::of(kind);
                    self.outputs.metrics.set_active(controller, true);
                    let started = std::time::Instant::now();
                    let dirty = match change {
                        Change::Apply(resource) => self.index.apply(*resource),
                        Change::Delete(r) => {
                            self.forget_status(&r);
                            self.index.delete(r.kind, &r.key.namespace, &r.key.name)
                        }
                    };
                    self.dirty.merge(dirty);
                    self.outputs.metrics.reconciled(controller, started.elapsed());
                    self.outputs.metrics.set_active(controller, false);
                }
            }
        }
    }

    fn render_dirty(&mut self) {
        if !self.synced {
            return;
        }
        // Only the last pass's result counts for what it rendered again: earlier ones are
        // never published (standalone mode's own objects settle in the later passes).
        let mut settled = RenderOutput::default();
        for _ in 0..MAX_PASSES {
            if self.dirty.is_empty() {
                break;
            }
            let dirty = std::mem::take(&mut self.dirty);
            let output = self.render_pass(&dirty);
            if self.outputs.apply_owned_to_index {
                let dirty = self.owned.apply(&mut self.index, &output);
                self.dirty.merge(dirty);
            }
            supersede(&mut settled, output);
        }
        self.publish(settled);
        self.publish_expired();
        self.outputs.readiness.set_ready();
    }

    fn render_pass(&mut self, dirty: &Dirty) -> RenderOutput {
        let metrics = &self.outputs.metrics;
        self.generation += 1;
        metrics.generation.set(self.generation);
        metrics.renderer_loop_last_active.set(unix_now());
        let started = std::time::Instant::now();
        let now = Time(k8s_openapi::jiff::Timestamp::now());
        let output = render(&self.index, dirty, &self.settings, &now);
        metrics.render.inc();
        metrics.render_time.observe(started.elapsed().as_secs_f64());
        metrics.generation_last_acked.set(self.generation);
        tracing::debug!(
            generation = self.generation,
            gateways = dirty.gateways.len(),
            elapsed = ?started.elapsed(),
            "rendered"
        );
        output
    }

    fn publish(&mut self, mut output: RenderOutput) {
        for (key, gw) in &mut output.gateways {
            if let Some(status) = &gw.status {
                let changed = self.show_status(Kind::Gateway, &key.namespace, &key.name, status);
                // Said once per change, like the status line, but at WARN with what to fix.
                if let Some(invalid) = output.invalid_configs.get(key).filter(|_| changed) {
                    let InvalidConfig { config, field, message } = invalid;
                    tracing::warn!(gateway = %key, gateway_config = %config, field, "invalid GatewayConfig {config}: {field}: {message}; the Gateway is withdrawn");
                }
            }
            // The writer never reads configs: taken here, the rest goes to it below.
            match std::mem::replace(&mut gw.config, Owned::Keep) {
                Owned::Apply(config) => {
                    let admitted = match &mut self.service_wait {
                        Some(wait) => wait.admit(key, config, &gw.service, &self.index),
                        None => Some(config),
                    };
                    match admitted {
                        Some(config) => self.upsert(key, config),
                        None => {
                            tracing::debug!(gateway = %key, "config waits for the Gateway's Service");
                            // And so does its status, not to be written twice (see service_wait).
                            if let (Some(wait), Some(status)) = (&mut self.service_wait, gw.status.take()) {
                                gw.status = wait.hold_status(key, status);
                            }
                        }
                    }
                }
                Owned::Delete => {
                    if let Some(wait) = &mut self.service_wait {
                        wait.forget(key);
                    }
                    // The id the store filed the config under: parsed from its `admin.name`,
                    // the key as text. Built from the key's parts instead, a namespace holding
                    // a `/` (no API server allows one) named an id that was never stored, and
                    // the config was never withdrawn.
                    let id = ConfigId::parse(&key.to_string());
                    if id.is_some_and(|id| self.outputs.store.delete(&id)) {
                        tracing::info!(gateway = %key, "config deleted");
                    }
                }
                Owned::Keep => {}
            }
        }
        if let Some(writer) = &self.outputs.writer {
            writer.submit(&output, &self.index);
        }
        for (r, status) in output.routes {
            self.show_status(r.kind, &r.key.namespace, &r.key.name, &status);
        }
        for (name, status) in output.classes {
            self.show_status(Kind::GatewayClass, "", &name, &status);
        }
    }

    fn upsert(&self, key: &ObjectKey, config: StunnerConfig) {
        if let Some(version) = self.outputs.store.upsert(config) {
            tracing::info!(gateway = %key, %version, "config updated");
        }
    }

    /// Publishes the configs whose wait for their Service ran out, and writes the statuses
    /// held with them.
    fn publish_expired(&mut self) {
        let Some(wait) = &mut self.service_wait else { return };
        let mut held = RenderOutput::default();
        for (key, config, status) in wait.expired() {
            tracing::info!(gateway = %key, bound = ?SERVICE_WAIT, "the Gateway's Service did not come back in time");
            self.upsert(&key, config);
            let status_only = GatewayOutput {
                config: Owned::Keep,
                status,
                service: Owned::Keep,
                deployment: Owned::Keep,
                delete_daemon_set: false,
            };
            held.gateways.insert(key, status_only);
        }
        if let Some(writer) = &self.outputs.writer
            && !held.gateways.is_empty()
        {
            writer.submit(&held, &self.index);
        }
    }

    /// Records a status for people to read, and logs it when it changed; returns whether it did.
    fn show_status(&self, kind: Kind, namespace: &str, name: &str, status: &impl serde::Serialize) -> bool {
        let api = kind.api();
        let entry = ObjectStatus {
            api_version: api.api_version,
            kind: api.kind.clone(),
            namespace: namespace.into(),
            name: name.into(),
            status: serde_json::to_value(status).unwrap_or_default(),
        };
        let summary = condition_summary(&entry);
        let changed = self.outputs.statuses.set(entry);
        if changed {
            let object = if namespace.is_empty() { name.to_string() } else { format!("{namespace}/{name}") };
            tracing::info!("{} {object}: {summary}", api.kind);
        }
        changed
    }

    fn forget_status(&self, r: &ObjRef) {
        if matches!(r.kind, Kind::Gateway | Kind::GatewayClass | Kind::UdpRoute | Kind::GatewayUdpRoute) {
            let api = r.kind.api();
            self.outputs.statuses.remove(&api.api_version, &api.kind, &r.key.namespace, &r.key.name);
        }
    }
}

/// Sleeps until `deadline`; forever without one.
async fn sleep_until(deadline: Option<tokio::time::Instant>) {
    match deadline {
        Some(t) => tokio::time::sleep_until(t).await,
        None => std::future::pending().await,
    }
}

/// Lets a later pass's results replace an earlier pass's for the same objects.
fn supersede(settled: &mut RenderOutput, later: RenderOutput) {
    settled.gateways.extend(later.gateways);
    settled.config_maps.extend(later.config_maps);
    settled.routes.extend(later.routes);
    settled.classes.extend(later.classes);
    settled.invalid_configs.extend(later.invalid_configs);
}

/// `Accepted=True, Programmed=False (AddressNotAssigned: ...)`, from a status's conditions and,
/// for routes, its parents' conditions.
fn condition_summary(status: &ObjectStatus) -> String {
    let describe = |c: &Condition| {
        if c.status == "True" {
            format!("{}=True", c.condition_type)
        } else {
            format!("{}={} ({}: {})", c.condition_type, c.status, c.reason, c.message)
        }
    };
    let mut parts: Vec<String> = status.conditions().iter().map(describe).collect();
    for parent in status.parents() {
        let name = &parent.parent_ref.name;
        parts.extend(parent.conditions.iter().map(|c| format!("parent {name}: {}", describe(c))));
    }
    if parts.is_empty() { "no conditions".into() } else { parts.join(", ") }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cds::CdsMetrics;
    use crate::metrics::ReconcileLabels;
    use std::path::Path;
    use stunner_gateway::index::Resource;
    use stunner_gateway::manifest;

    const THROTTLE: Duration = Duration::from_millis(250);

    /// The objects of one manifest file, as changes that apply them.
    fn applied(file: &str, text: &str) -> impl Iterator<Item = Change> {
        manifest::load(Path::new(file), text, manifest::Admission::Validated)
            .unwrap()
            .into_resources()
            .map(|r| Change::Apply(Box::new(r)))
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

    struct Loop {
        tx: mpsc::Sender<Input>,
        /// Cluster mode: the writer's queue, never written from.
        writer: Option<Writer>,
        sink: Arc<Recorder>,
        metrics: OperatorMetrics,
        readiness: Readiness,
    }

    impl Loop {
        /// Standalone mode: the operator's own objects go straight into the index.
        fn start() -> Loop {
            Self::start_with(None)
        }

        /// Cluster mode: owned objects are queued for a writer (never run here), and come
        /// back only when the test sends them, as the watchers would.
        fn start_in_cluster() -> Loop {
            Self::start_with(Some(Writer::new(OperatorMetrics::default())))
        }

        fn start_with(writer: Option<Writer>) -> Loop {
            let (tx, rx) = mpsc::channel(64);
            let sink =
                Arc::new(Recorder { store: ConfigStore::new(CdsMetrics::default()), published: Default::default() });
            let outputs = Outputs {
                store: sink.clone(),
                statuses: Arc::default(),
                metrics: OperatorMetrics::default(),
                readiness: Readiness::default(),
                apply_owned_to_index: writer.is_none(),
                writer,
                nodes: NodeFeed::new(Arc::default()),
            };
            let (metrics, readiness) = (outputs.metrics.clone(), outputs.readiness.clone());
            let writer = outputs.writer.clone();
            tokio::spawn(Reconciler::new(RenderSettings::default(), THROTTLE, outputs).run(rx));
            Loop { tx, writer, sink, metrics, readiness }
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

    /// The quickstart with `extra` listeners on its Gateway.
    fn quickstart_with_listeners(extra: &str) -> Vec<Change> {
        let dir = concat!(env!("CARGO_MANIFEST_DIR"), "/../deploy/examples/quickstart");
        let text = std::fs::read_to_string(format!("{dir}/gateway.yaml")).unwrap();
        let text = text.replace("  listeners:\n", &format!("  listeners:\n{extra}"));
        let gateway = applied("gateway.yaml", &text);
        let mut changes: Vec<Change> = quickstart().into_iter().filter(|c| !is_gateway(c)).collect();
        changes.extend(gateway);
        changes
    }

    fn is_gateway(c: &Change) -> bool {
        matches!(c, Change::Apply(r) if r.kind() == Kind::Gateway)
    }

    /// The Gateway's Service as the API server would return it after the operator's apply:
    /// what a render of `changes` asks for.
    fn applied_service(changes: Vec<Change>) -> Input {
        let mut index = Index::new();
        for c in changes {
            if let Change::Apply(r) = c {
                index.apply(*r);
            }
        }
        let now = Time(k8s_openapi::jiff::Timestamp::now());
        let out = stunner_gateway::render::render_all(&index, &RenderSettings::default(), &now);
        let Owned::Apply(service) = &out.gateways[&ObjectKey::new("stunner", "udp-gateway")].service else {
            panic!("a Service is asked for")
        };
        Input::Changes(vec![Change::Apply(Box::new(Resource::Service(service.clone())))])
    }

    /// The listeners of published configs that have no public address.
    fn without_public_address(configs: &[StunnerConfig]) -> Vec<String> {
        let listeners = configs.iter().flat_map(|c| &c.listeners);
        listeners.filter(|l| l.public_addr.is_empty() || l.public_port == 0).map(|l| l.name.clone()).collect()
    }

    /// Standalone: the first pass renders the Gateway before its Service is in the index (no
    /// public address), the second with it; only the second is published.
    #[tokio::test(start_paused = true)]
    async fn standalone_publishes_only_the_settled_config() {
        let l = Loop::start();
        l.send(Input::Changes(quickstart())).await;
        l.send(Input::Synced).await;
        tokio::time::sleep(THROTTLE * 2).await;
        l.send(Input::Changes(quickstart_with_listeners("    - name: udp-2\n      port: 3480\n      protocol: UDP\n")))
            .await;
        tokio::time::sleep(THROTTLE * 2).await;
        let published = l.published();
        assert_eq!(published.iter().map(|c| c.listeners.len()).collect::<Vec<_>>(), [2, 3], "one version per change");
        assert_eq!(without_public_address(&published), Vec::<String>::new());
    }

    /// Cluster mode: a new Gateway's config, and one with a new listener, wait until the
    /// watchers bring back the Service the render asked for; no version without the address.
    #[tokio::test(start_paused = true)]
    async fn in_a_cluster_a_config_waits_for_the_service_it_asked_for() {
        let l = Loop::start_in_cluster();
        l.send(Input::Changes(quickstart())).await;
        l.send(Input::Synced).await;
        tokio::time::sleep(THROTTLE * 2).await;
        assert_eq!(l.published().len(), 0, "the Service is not back yet");
        l.send(applied_service(quickstart())).await;
        tokio::time::sleep(THROTTLE * 2).await;
        assert_eq!(l.published().len(), 1);

        let added = || quickstart_with_listeners("    - name: udp-2\n      port: 3480\n      protocol: UDP\n");
        l.send(Input::Changes(added())).await;
        tokio::time::sleep(THROTTLE * 2).await;
        assert_eq!(l.published().len(), 1, "the Service's new port is not back yet");
        l.send(applied_service(added())).await;
        tokio::time::sleep(THROTTLE * 2).await;
        let published = l.published();
        assert_eq!(published.iter().map(|c| c.listeners.len()).collect::<Vec<_>>(), [2, 3]);
        assert_eq!(without_public_address(&published), Vec::<String>::new());
    }

    /// Cluster mode: the Gateway's status waits with its config, so that it is written once,
    /// with the address the Service brings; or as held, once the wait runs out.
    #[tokio::test(start_paused = true)]
    async fn in_a_cluster_a_gateway_status_waits_with_its_config() {
        use crate::cluster::ops::{Scope, WriteKind};
        let l = Loop::start_in_cluster();
        let queued = |kind| {
            let targets = l.writer.as_ref().unwrap().take_queued();
            targets.iter().filter(|t| (t.scope, t.kind) == (Scope::Status, kind)).count()
        };
        l.send(Input::Changes(quickstart())).await;
        l.send(Input::Synced).await;
        tokio::time::sleep(THROTTLE * 2).await;
        assert_eq!(queued(WriteKind::Gateway), 0, "the Service is not back yet");
        l.send(applied_service(quickstart())).await;
        tokio::time::sleep(THROTTLE * 2).await;
        assert_eq!(queued(WriteKind::Gateway), 1, "written with the Service's address");

        let added = || quickstart_with_listeners("    - name: udp-2\n      port: 3480\n      protocol: UDP\n");
        l.send(Input::Changes(added())).await;
        tokio::time::sleep(THROTTLE * 2).await;
        assert_eq!(queued(WriteKind::Gateway), 0, "the Service's new port is not back yet");
        tokio::time::sleep(SERVICE_WAIT).await;
        assert_eq!(queued(WriteKind::Gateway), 1, "written as held once the wait ran out");
    }

    /// Cluster mode: a Service that never comes back holds the config only for the bound,
    /// and the same Service is not waited for again.
    #[tokio::test(start_paused = true)]
    async fn in_a_cluster_a_config_waits_for_its_service_only_so_long() {
        let l = Loop::start_in_cluster();
        l.send(Input::Changes(quickstart())).await;
        l.send(Input::Synced).await;
        tokio::time::sleep(THROTTLE * 2).await;
        assert_eq!(l.published().len(), 0);
        tokio::time::sleep(SERVICE_WAIT).await;
        assert_eq!(l.published().len(), 1, "published once the bound passed");
        l.send(realm("other")).await;
        tokio::time::sleep(THROTTLE * 2).await;
        assert_eq!(l.realm().as_deref(), Some("other"), "no second wait for the same Service");
    }

    /// A Gateway whose namespace holds a `/` (only a manifest no API server checked can have
    /// one) is withdrawn like any other when it goes away.
    #[tokio::test(start_paused = true)]
    async fn a_gateway_in_a_namespace_with_a_slash_is_withdrawn_when_deleted() {
        let l = Loop::start();
        let moved = |r: Resource| match r {
            Resource::Gateway(mut gw) => {
                gw.metadata.namespace = Some("a/b".into());
                Resource::Gateway(gw)
            }
            other => other,
        };
        let changes = quickstart().into_iter().map(|c| match c {
            Change::Apply(r) => Change::Apply(Box::new(moved(*r))),
            other => other,
        });
        l.send(Input::Changes(changes.collect())).await;
        l.send(Input::Synced).await;
        tokio::time::sleep(THROTTLE * 2).await;
        let served = || {
            l.sink.store.list(&crate::cds::Scope::All).iter().map(|s| s.config.admin.name.clone()).collect::<Vec<_>>()
        };
        assert_eq!(served(), ["a/b/udp-gateway"]);
        let gone = ObjRef::new(Kind::Gateway, ObjectKey::new("a/b", "udp-gateway"));
        l.send(Input::Changes(vec![Change::Delete(gone)])).await;
        tokio::time::sleep(THROTTLE * 2).await;
        assert!(served().is_empty(), "still served: {:?}", served());
    }
}
