//! The render loop: applies source changes to the index, coalesces them, renders only what
//! they made dirty ([`render`]), and hands the results to the outputs ([`publish`]: the CDS
//! store, the owned objects and statuses where the [`Mode`] puts them, and the
//! statuses shown to people, [`statuses`]). In a cluster it is the writer's only feeder: every
//! change reaches it before the index.
//!
//! An isolated change is rendered at once; changes that come while a render runs or right
//! after one are coalesced in a window that grows under a sustained burst, up to
//! `--throttle-timeout` ([`coalesce`]). A render's time is fixed by the change that asked for
//! it, so a steady stream of changes cannot postpone rendering.
//! Nothing is rendered before the sources report their first complete state, so a dataplane
//! never sees a config built from half the cluster. Nor does it see configs that are about to
//! be replaced: in standalone mode only the settled result of a render is published (not the
//! pass before the operator's own objects came back), in cluster mode a Gateway's config waits
//! for the Service the render asked for ([`ServiceWait`]).
//!
//! [`Mode`]: crate::pipeline::mode::Mode
//! [`ServiceWait`]: crate::pipeline::service_wait::ServiceWait

mod coalesce;
mod publish;
mod render;
mod settle;
mod statuses;
#[cfg(test)]
mod tests;

use crate::metrics::{Controller, ReconcileLabels, ReconcileResult};
use crate::pipeline::Outputs;
use coalesce::Coalescer;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use std::time::Duration;
use stunner_gateway::index::{Change, Dirty, Index, Input};
use stunner_gateway::render::RenderSettings;
use stunner_gateway_k8s::metrics::unix_now;
use tokio::sync::mpsc;
use tokio::time::Instant;

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
}

impl Reconciler {
    /// `throttle` is `--throttle-timeout`: the longest a change waits for its render.
    pub fn new(settings: RenderSettings, throttle: Duration, outputs: Outputs) -> Self {
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
        }
    }

    /// Runs until every sender of `inputs` is gone; returns itself for [`Self::finalize`].
    pub async fn run(mut self, mut inputs: mpsc::Receiver<Input>) -> Self {
        let mut heartbeat = tokio::time::interval(HEARTBEAT);
        heartbeat.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        loop {
            let service_deadline = self.outputs.mode.publication().next_deadline();
            tokio::select! {
                input = inputs.recv() => match input {
                    Some(input) => self.take(input),
                    None => break,
                },
                _ = sleep_until(self.render_at) => {}
                _ = sleep_until(service_deadline) => {
                    self.publish_expired();
                    self.outputs.mode.flush();
                }
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
            self.sample_sizes();
        }
        self
    }

    /// Applies one input and, when it opens a window, fixes the time of the render that covers
    /// it (later inputs never move that time).
    fn take(&mut self, input: Input) {
        let input = match input {
            Input::Held(held) => return self.show_held(&held),
            other => other,
        };
        let pending = self.render_at.is_some();
        self.count(if pending { ReconcileResult::throttled } else { ReconcileResult::passed });
        let synced_now = matches!(input, Input::Synced);
        self.absorb(input);
        if !pending && self.synced && (synced_now || !self.dirty.is_empty()) {
            self.render_at = Some(self.coalescer.schedule(Instant::now()));
        }
    }

    /// `--enable-finalizer` at exit: queues the invalidation of every class of ours and the
    /// removal of their dataplanes for the writer in a cluster (only the leader writes it),
    /// never for the CDS: the dataplanes keep their configs until their Deployments are gone.
    pub fn finalize(&self) {
        if !self.synced {
            return;
        }
        self.outputs.mode.finalize(&self.index, &|| {
            let now = Time(k8s_openapi::jiff::Timestamp::now());
            stunner_gateway::render::finalize(&self.index, &self.settings, &now)
        });
    }

    /// What the daemon holds, for its gauges: the index's sizes and the runtime's live tasks.
    fn sample_sizes(&self) {
        let gauge = |n: usize| i64::try_from(n).unwrap_or(i64::MAX);
        let sizes = self.index.sizes();
        let metrics = &self.outputs.metrics;
        metrics.index_objects.set(gauge(sizes.objects));
        metrics.index_referred_objects.set(gauge(sizes.referred));
        metrics.tasks.set(gauge(tokio::runtime::Handle::current().metrics().num_alive_tasks()));
    }

    fn count(&self, result: ReconcileResult) {
        self.outputs.metrics.reconcile_events.get_or_create(&ReconcileLabels { result }).inc();
    }

    fn absorb(&mut self, input: Input) {
        match input {
            Input::Held(held) => self.show_held(&held),
            Input::Synced => {
                self.synced = true;
                self.dirty.merge(self.index.everything());
            }
            Input::Changes(changes) => {
                // The writer learns what the watchers saw before the index does, so the
                // submit of the render these changes cause finds it (see `Writer::observe`).
                self.outputs.mode.observe(&changes);
                for (object, now) in changes.iter().map(Change::seen) {
                    // The CDS's per-node patcher follows the Nodes the same way.
                    self.outputs.nodes.observe(&object, now);
                }
                for change in changes {
                    self.outputs.mode.before_change(&self.index, &change);
                    let kind = change.kind();
                    let controller = Controller::of(kind);
                    self.outputs.metrics.set_active(controller, true);
                    let started = std::time::Instant::now();
                    if let Change::Delete(r) = &change {
                        self.forget_status(r);
                    }
                    let dirty = change.apply_to(&mut self.index);
                    self.dirty.merge(dirty);
                    self.outputs.metrics.reconciled(controller, started.elapsed());
                    self.outputs.metrics.set_active(controller, false);
                }
            }
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
