//! The render loop: applies source changes to the index, coalesces them, renders only what
//! they made dirty, and hands the results to the outputs (the CDS store and the statuses).
//!
//! Throttling follows the Go operator: the first change after a render opens a window of
//! `--throttle-timeout`; when it closes, one render covers every change made in it. The
//! window is never extended, so a steady stream of changes cannot postpone a render.
//! Nothing is rendered before the sources report their first complete state, so a dataplane
//! never sees a config built from half the cluster.

use crate::admin::Readiness;
use crate::cds::ConfigStore;
use crate::cluster::writer::Writer;
use crate::metrics::{OperatorMetrics, ReconcileLabels, ReconcileResult, unix_now};
use crate::source::Change;
use crate::status::StatusBoard;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use std::sync::Arc;
use std::time::{Duration, Instant};
use stunner_gateway::cds::{Condition, ConfigId, ObjectStatus};
use stunner_gateway::index::{Dirty, Index, Kind, ObjRef, ObjectKey, Resource};
use stunner_gateway::render::{Owned, RenderOutput, RenderSettings, render};
use tokio::sync::mpsc;

/// What sources tell the render loop.
#[derive(Debug)]
pub enum Input {
    Changes(Vec<Change>),
    /// Every source has delivered its complete initial state.
    Synced,
}

/// Where rendered results go.
pub struct Outputs {
    pub store: Arc<ConfigStore>,
    pub statuses: Arc<StatusBoard>,
    pub metrics: OperatorMetrics,
    pub readiness: Readiness,
    /// Standalone mode: no API server stores the objects the operator owns, so the index
    /// takes them directly, as if written and watched back (the renderer reads the
    /// Gateway's Service for its public address).
    pub apply_owned_to_index: bool,
    /// Cluster mode: where owned objects and statuses are queued for the API server.
    pub writer: Option<Writer>,
}

/// Renders caused by the operator's own objects coming back, per window: they settle in one
/// pass; the bound only guards against a render that never reaches a fixed point.
const MAX_PASSES: usize = 3;

pub struct Reconciler {
    index: Index,
    settings: RenderSettings,
    throttle: Duration,
    outputs: Outputs,
    dirty: Dirty,
    synced: bool,
    generation: i64,
}

impl Reconciler {
    pub fn new(settings: RenderSettings, throttle: Duration, outputs: Outputs) -> Self {
        Reconciler {
            index: Index::new(),
            settings,
            throttle,
            outputs,
            dirty: Dirty::default(),
            synced: false,
            generation: 0,
        }
    }

    /// Runs until every sender of `inputs` is gone; returns itself for [`Self::finalize`].
    pub async fn run(mut self, mut inputs: mpsc::Receiver<Input>) -> Self {
        while let Some(first) = inputs.recv().await {
            self.count(ReconcileResult::passed);
            self.absorb(first);
            let window = tokio::time::sleep(self.throttle);
            tokio::pin!(window);
            let mut open = true;
            while open {
                tokio::select! {
                    _ = &mut window => break,
                    input = inputs.recv() => match input {
                        Some(input) => {
                            self.count(ReconcileResult::throttled);
                            self.absorb(input);
                        }
                        None => open = false,
                    },
                }
            }
            self.render_dirty();
        }
        self
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
                    let dirty = match change {
                        Change::Apply(resource) => self.index.apply(*resource),
                        Change::Delete(r) => {
                            self.forget_status(&r);
                            self.index.delete(r.kind, &r.key.namespace, &r.key.name)
                        }
                    };
                    self.dirty.merge(dirty);
                }
            }
        }
    }

    fn render_dirty(&mut self) {
        if !self.synced {
            return;
        }
        for _ in 0..MAX_PASSES {
            if self.dirty.is_empty() {
                break;
            }
            let dirty = std::mem::take(&mut self.dirty);
            let output = self.render_pass(&dirty);
            if self.outputs.apply_owned_to_index {
                self.apply_owned(&output);
            }
            self.publish(output);
        }
        self.outputs.readiness.set_ready();
    }

    fn render_pass(&mut self, dirty: &Dirty) -> RenderOutput {
        let metrics = &self.outputs.metrics;
        self.generation += 1;
        metrics.generation.set(self.generation);
        metrics.renderer_loop_last_active.set(unix_now());
        let started = Instant::now();
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

    /// Stores the owned objects of `output` in the index; what that changes is rendered in
    /// the next pass.
    fn apply_owned(&mut self, output: &RenderOutput) {
        for (key, gw) in &output.gateways {
            let changes = [
                owned_change(&gw.service, Kind::Service, key, Resource::Service),
                owned_change(&gw.deployment, Kind::Deployment, key, Resource::Deployment),
            ];
            for change in changes.into_iter().flatten() {
                let dirty = match change {
                    Change::Apply(r) if self.index.get(&r.obj_ref()).as_ref() != Some(&*r) => self.index.apply(*r),
                    Change::Delete(r) if self.index.contains(&r) => {
                        self.index.delete(r.kind, &r.key.namespace, &r.key.name)
                    }
                    _ => continue,
                };
                self.dirty.merge(dirty);
            }
        }
    }

    fn publish(&self, output: RenderOutput) {
        if let Some(writer) = &self.outputs.writer {
            writer.submit(&output, &self.index);
        }
        let store = &self.outputs.store;
        for (key, gw) in output.gateways {
            match gw.config {
                Owned::Apply(config) => {
                    if let Some(version) = store.upsert(config) {
                        tracing::info!(gateway = %key, %version, "config updated");
                    }
                }
                Owned::Delete => {
                    if store.delete(&ConfigId::new(key.namespace.clone(), key.name.clone())) {
                        tracing::info!(gateway = %key, "config deleted");
                    }
                }
                Owned::Keep => {}
            }
            if let Some(status) = gw.status {
                self.show_status("gateway.networking.k8s.io/v1", "Gateway", &key.namespace, &key.name, &status);
            }
        }
        for (r, status) in output.routes {
            let (api_version, _) = route_kind(r.kind);
            self.show_status(api_version, "UDPRoute", &r.key.namespace, &r.key.name, &status);
        }
        for (name, status) in output.classes {
            self.show_status("gateway.networking.k8s.io/v1", "GatewayClass", "", &name, &status);
        }
    }

    /// Records a status for people to read, and logs it when it changed.
    fn show_status(&self, api_version: &str, kind: &str, namespace: &str, name: &str, status: &impl serde::Serialize) {
        let entry = ObjectStatus {
            api_version: api_version.into(),
            kind: kind.into(),
            namespace: namespace.into(),
            name: name.into(),
            status: serde_json::to_value(status).unwrap_or_default(),
        };
        let summary = condition_summary(&entry);
        if self.outputs.statuses.set(entry) {
            let object = if namespace.is_empty() { name.to_string() } else { format!("{namespace}/{name}") };
            tracing::info!("{kind} {object}: {summary}");
        }
    }

    fn forget_status(&self, r: &ObjRef) {
        let kind = match r.kind {
            Kind::Gateway => "Gateway",
            Kind::GatewayClass => "GatewayClass",
            Kind::UdpRoute | Kind::GatewayUdpRoute => "UDPRoute",
            _ => return,
        };
        self.outputs.statuses.remove(kind, &r.key.namespace, &r.key.name);
    }
}

/// The index change an owned-object decision amounts to.
fn owned_change<T: Clone>(owned: &Owned<T>, kind: Kind, key: &ObjectKey, wrap: fn(T) -> Resource) -> Option<Change> {
    match owned {
        Owned::Apply(obj) => Some(Change::Apply(Box::new(wrap(obj.clone())))),
        Owned::Delete => Some(Change::Delete(ObjRef::new(kind, key.clone()))),
        Owned::Keep => None,
    }
}

/// The API version of a route kind and its kind name.
fn route_kind(kind: Kind) -> (&'static str, &'static str) {
    match kind {
        Kind::GatewayUdpRoute => ("gateway.networking.k8s.io/v1alpha2", "UDPRoute"),
        _ => ("stunner.l7mp.io/v1", "UDPRoute"),
    }
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
