//! The writer: applies rendered owned objects and statuses to the API server, off the render
//! loop. The render loop is its only feeder: it tells the writer what the watchers saw
//! ([`Writer::observe`]) and queues what to write ([`Writer::submit`]); one task drains the
//! queue, so a slow or unreachable API server delays writes but never rendering or the CDS.
//!
//! Owned objects and statuses are written with server-side apply under one field manager,
//! forced: the rendered object is the operator's whole desired state, and SSA needs no read
//! before the write and no resourceVersion, so there is no conflict loop and no lens code.
//! For statuses this replaces the whole status, as upstream's `Status().Update` does.
//! Only the leader writes; a replica that is not leading keeps queueing (latest wins per
//! object) and writes what is still pending when it becomes the leader.
//!
//! There is no client-side rate limit, as upstream has none: controller-runtime's `GetConfig`
//! turns client-go's token bucket off (QPS -1) and leaves throttling to the API server's
//! priority and fairness. The writer sends one request at a time and waits for its answer, so
//! it never has more than one in flight, and a 429 is retried after a growing delay.

use super::ops::{FIELD_MANAGER, Op, Scope, Target, WriteKind, ops_of};
use super::queue::Queue;
use super::served::Served;
use crate::metrics::{ResourceOperationLabels, UpdateLabels, UpdateResult, WriterMetrics, unix_now};
use kube::api::{Api, ApiResource, DeleteParams, DynamicObject, Patch, PatchParams};
use std::future::Future;
use std::sync::{Arc, Mutex};
use std::time::Duration;
use stunner_gateway::index::{Index, ObjRef, Resource};
use stunner_gateway::render::RenderOutput;
use tokio::sync::{Notify, watch};
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

/// Attempts per write before it is left for the next round.
const ATTEMPTS: u32 = 4;
/// The first retry delay; doubled for each further attempt.
const FIRST_RETRY: Duration = Duration::from_millis(200);
/// How long failed writes wait for their next round when nothing else wakes the writer.
const RESYNC: Duration = Duration::from_secs(10);

/// Why a write failed, and whether trying again may help.
#[derive(Debug, thiserror::Error)]
#[error("{message}")]
pub(crate) struct WriteError {
    pub(crate) transient: bool,
    pub(crate) message: String,
}

/// Where writes go: the API server, or a recorder in tests.
pub(crate) trait Sink: Send + Sync + 'static {
    /// Writes `op`; returns the object's resourceVersion after it (`None` once deleted).
    fn write(&self, target: &Target, op: &Op) -> impl Future<Output = Result<Option<String>, WriteError>> + Send;
}

/// The render loop's handle on the writer.
#[derive(Clone)]
pub struct Writer {
    shared: Arc<Shared>,
}

struct Shared {
    queue: Mutex<Queue>,
    wake: Notify,
    metrics: WriterMetrics,
    /// The writer task's passes through its loop so far, for tests to wait on.
    #[cfg(test)]
    progress: watch::Sender<tests::Progress>,
}

/// What one round of writes did.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
struct Round {
    /// Writes the API server took.
    written: usize,
    /// Writes skipped: the same content was written while they waited.
    suppressed: usize,
    /// Writes that failed, retried or not.
    failed: usize,
    /// Writes put back because this replica stopped leading.
    kept: usize,
}

impl Writer {
    pub fn new(metrics: WriterMetrics) -> Self {
        Writer {
            shared: Arc::new(Shared {
                queue: Mutex::default(),
                wake: Notify::new(),
                metrics,
                #[cfg(test)]
                progress: watch::Sender::default(),
            }),
        }
    }

    /// Queues the writes `output` asks for, unless `index` (what the watchers saw) shows them
    /// in place already, and hands them to the writer; never blocks on the API server.
    pub fn submit(&self, output: &RenderOutput, index: &Index) {
        self.stage(ops_of(output), index);
        self.flush();
    }

    /// Stages writes of single results, handed on by a render as it goes (see
    /// [`super::ops`]), unless `index` shows them in place already: the writer takes them at
    /// the next [`Self::flush`], all of one render at once.
    pub fn stage(&self, ops: impl IntoIterator<Item = (Target, Op)>, index: &Index) {
        self.with_queue(|queue| {
            for (target, op) in ops {
                let labels = labels(&target, "suppressed");
                let live = |t: &Target| index.get(&ObjRef::new(t.kind.watched()?, t.key.clone()));
                if !queue.submit(target, op, live) {
                    self.count(labels);
                }
            }
        });
    }

    /// Hands the staged writes to the writer: the end of a render.
    pub fn flush(&self) {
        if self.with_queue(Queue::flush) {
            // Only a waiting writer needs waking: one that is not waiting takes the queue next.
            self.shared.wake.notify_waiters();
        }
    }

    /// Has the writer follow the versions the route kinds are served in, which its writes go
    /// through: what it reads of our field manager's applies counts only at those versions.
    /// Before, and in tests, the kind table's versions count.
    pub(crate) fn follow_served(&self, served: watch::Receiver<Served>) {
        self.with_queue(|queue| queue.follow_served(served));
    }

    /// Tells the writer what the watchers saw of objects it may have written (see
    /// [`Queue::observed`]): each object, as it is now (`None`: deleted). The render loop
    /// calls it with every change before applying it to the index, so the next
    /// [`Self::submit`] already knows what is in place.
    pub fn observe<'a>(&self, seen: impl IntoIterator<Item = (ObjRef, Option<&'a Resource>)>) {
        self.with_queue(|queue| {
            for (object, live) in seen {
                if let Some(kind) = WriteKind::of(object.kind) {
                    queue.observed(kind, &object.key, live);
                }
            }
        });
    }

    /// Takes what is queued, for tests of what the render loop hands the writer.
    #[cfg(any(test, feature = "testing"))]
    pub fn take_queued(&self) -> Vec<super::ops::Target> {
        self.with_queue(|queue| {
            queue.flush();
            queue.take().into_keys().collect()
        })
    }

    fn count(&self, labels: ResourceOperationLabels) {
        self.shared.metrics.resource_operations.get_or_create(&labels).inc();
    }

    /// Runs `f` on the queue, then shows how many records it keeps in the records gauge.
    fn with_queue<R>(&self, f: impl FnOnce(&mut Queue) -> R) -> R {
        let mut queue = self.shared.queue.lock().unwrap_or_else(|e| e.into_inner());
        let result = f(&mut queue);
        self.shared.metrics.records.set(i64::try_from(queue.records()).unwrap_or(i64::MAX));
        result
    }

    /// Drains the queue into `sink` while `leader` is true, until `shutdown`; then, still
    /// leading, writes what is queued one last time (a last render, the finalizer's writes),
    /// so a replica hands over with nothing of its own left unwritten.
    pub(crate) async fn run(self, sink: impl Sink, mut leader: watch::Receiver<bool>, shutdown: CancellationToken) {
        let mut retry_at: Option<Instant> = None;
        // A closed channel means leadership is fixed (no election): keep its last value.
        let mut decided = false;
        loop {
            // Armed before the queue is taken: whatever is submitted from here on wakes us.
            let wake = self.shared.wake.notified();
            tokio::pin!(wake);
            wake.as_mut().enable();
            #[cfg(test)]
            self.shared.progress.send_modify(|p| p.started += 1);
            let leading = *leader.borrow_and_update();
            self.shared.metrics.set_leader(super::lease::LEASE_NAME, leading);
            let round = if leading && (retry_at.is_none_or(|t| t <= Instant::now())) {
                let round = self.write_pending(&sink, &leader).await;
                retry_at = (round.failed > 0).then(|| Instant::now() + RESYNC);
                round
            } else {
                Round::default()
            };
            self.passed(leading, round);
            let resync = async {
                match retry_at {
                    Some(t) if leading => tokio::time::sleep_until(t).await,
                    _ => std::future::pending().await,
                }
            };
            tokio::select! {
                _ = shutdown.cancelled() => {
                    if *leader.borrow() {
                        self.write_pending(&sink, &leader).await;
                    }
                    return;
                }
                _ = wake => retry_at = None,
                changed = leader.changed(), if !decided => decided = changed.is_err(),
                _ = resync => retry_at = None,
            }
        }
    }

    /// The end of a pass through the writer's loop, `leading` or not, with its `round`: what
    /// the tests wait on (nothing outside them).
    fn passed(&self, leading: bool, round: Round) {
        #[cfg(test)]
        self.shared.progress.send_modify(|p| p.finished(leading, round));
        #[cfg(not(test))]
        let _ = (leading, round);
    }

    /// Writes everything queued; returns what it did.
    async fn write_pending(&self, sink: &impl Sink, leader: &watch::Receiver<bool>) -> Round {
        let batch = self.with_queue(Queue::take);
        let mut round = Round::default();
        if batch.is_empty() {
            return round;
        }
        let started = Instant::now();
        for (target, op) in batch {
            if !*leader.borrow() {
                self.with_queue(|q| q.failed(target, op)); // no longer ours to write: keep it for later
                round.kept += 1;
                continue;
            }
            // Queued again by a render while the same content was being written (a combo's
            // objects arrive one by one, each rendered at once): written now, not twice.
            if self.with_queue(|q| q.is_written(&target, &op)) {
                self.count(labels(&target, "suppressed"));
                round.suppressed += 1;
                continue;
            }
            match self.write(sink, &target, &op).await {
                Ok(version) => {
                    self.with_queue(|q| q.written(target, &op, version));
                    round.written += 1;
                }
                Err(e) => {
                    let (kind, scope) = (target.kind.name(), target.scope.name());
                    round.failed += 1;
                    if e.transient {
                        tracing::warn!(kind, object = %target.key, scope, error = %e, "write failed; will retry");
                        self.with_queue(|q| q.failed(target, op));
                    } else {
                        // As upstream: logged and dropped (e.g. the status of an object deleted
                        // meanwhile); the next render that changes it tries again.
                        tracing::warn!(kind, object = %target.key, scope, error = %e, "write failed");
                    }
                }
            }
        }
        let m = &self.shared.metrics;
        let result = if round.failed > 0 { UpdateResult::error } else { UpdateResult::success };
        m.update.get_or_create(&UpdateLabels { result }).inc();
        if round.failed > 0 {
            m.update_errors.inc();
        }
        m.update_time.observe(started.elapsed());
        m.updater_loop_last_active.set(unix_now());
        round
    }

    /// One write with bounded retries of transient errors.
    async fn write(&self, sink: &impl Sink, target: &Target, op: &Op) -> Result<Option<String>, WriteError> {
        let mut delay = FIRST_RETRY;
        for attempt in 1..=ATTEMPTS {
            self.count(labels(target, "attempt"));
            match sink.write(target, op).await {
                Ok(version) => {
                    self.count(labels(target, done(target, op)));
                    return Ok(version);
                }
                Err(e) if e.transient && attempt < ATTEMPTS => {
                    tracing::debug!(kind = target.kind.name(), object = %target.key, error = %e, "retrying write");
                    tokio::time::sleep(delay).await;
                    delay *= 2;
                }
                Err(e) => {
                    self.count(labels(target, "error"));
                    return Err(e);
                }
            }
        }
        unreachable!("the last attempt returns")
    }
}

fn done(target: &Target, op: &Op) -> &'static str {
    match (target.scope, op) {
        (_, Op::Delete) => "deleted",
        (Scope::Spec, Op::Apply(_)) => "updated",
        (Scope::Status, Op::Apply(_)) => "updatedStatus",
    }
}

fn labels(target: &Target, operation: &str) -> ResourceOperationLabels {
    ResourceOperationLabels { scope: target.scope.name().into(), kind: target.kind.name(), operation: operation.into() }
}

/// The API server, with the route versions it serves.
pub(crate) struct KubeSink {
    client: kube::Client,
    served: watch::Receiver<Served>,
}

impl KubeSink {
    pub(crate) fn new(client: kube::Client, served: watch::Receiver<Served>) -> Self {
        KubeSink { client, served }
    }

    /// The API names of the target's kind, at the version served for a versioned route kind.
    fn resource(&self, target: &Target) -> ApiResource {
        target.kind.served_api(&self.served.borrow())
    }

    fn api(&self, target: &Target, resource: &ApiResource) -> Api<DynamicObject> {
        if target.kind.is_namespaced() {
            Api::namespaced_with(self.client.clone(), &target.key.namespace, resource)
        } else {
            Api::all_with(self.client.clone(), resource)
        }
    }
}

impl Sink for KubeSink {
    async fn write(&self, target: &Target, op: &Op) -> Result<Option<String>, WriteError> {
        let resource = self.resource(target);
        let api = self.api(target, &resource);
        let name = target.key.name.as_str();
        let apply = PatchParams::apply(FIELD_MANAGER).force();
        let result = match (op, target.scope) {
            (Op::Apply(body), Scope::Spec) => api.patch(name, &apply, &Patch::Apply(body.value())).await.map(version),
            (Op::Apply(body), Scope::Status) => {
                // A route's status goes through the served version, which may not be the
                // table's that `ops` wrote into the body.
                let mut body = body.value();
                body["apiVersion"] = resource.api_version.as_str().into();
                api.patch_status(name, &apply, &Patch::Apply(body)).await.map(version)
            }
            (Op::Delete, _) => match api.delete(name, &DeleteParams::background()).await {
                Err(kube::Error::Api(e)) if e.code == 404 => Ok(None),
                other => other.map(|_| None),
            },
        };
        result.map_err(|e| WriteError { transient: is_transient(&e), message: e.to_string() })
    }
}

fn version(obj: DynamicObject) -> Option<String> {
    obj.metadata.resource_version
}

/// Conflicts, throttling, server errors and transport failures may pass on a retry; other
/// answers of the API server (invalid, forbidden, not found) will not.
fn is_transient(e: &kube::Error) -> bool {
    match e {
        kube::Error::Api(s) => s.code == 409 || s.code == 429 || s.code >= 500,
        _ => true,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use k8s_openapi::api::core::v1::Service;
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
    use stunner_gateway::index::{Kind, ObjectKey};
    use stunner_gateway::render::{GatewayOutput, Owned, SerializedStatus};

    /// Records writes; fails the first `failures` of them, transiently unless `permanent`.
    #[derive(Clone, Default)]
    struct Recorder {
        writes: Arc<Mutex<Vec<(Target, Op)>>>,
        failures: Arc<Mutex<u32>>,
        permanent: bool,
    }

    impl Sink for Recorder {
        async fn write(&self, target: &Target, op: &Op) -> Result<Option<String>, WriteError> {
            let mut failures = self.failures.lock().unwrap();
            if *failures > 0 {
                *failures -= 1;
                return Err(WriteError { transient: !self.permanent, message: "failed".into() });
            }
            let mut writes = self.writes.lock().unwrap();
            writes.push((target.clone(), op.clone()));
            Ok(Some(writes.len().to_string()))
        }
    }

    impl Recorder {
        fn services(&self) -> Vec<String> {
            let writes = self.writes.lock().unwrap();
            writes
                .iter()
                .filter(|(t, _)| t.kind == WriteKind::Service)
                .map(|(_, op)| match op {
                    Op::Apply(v) => v.value()["metadata"]["labels"]["v"].as_str().unwrap_or("").to_string(),
                    Op::Delete => "delete".into(),
                })
                .collect()
        }
    }

    /// A render of Gateway `ns/gw` that asks for its Service labelled `v: version`.
    fn output(version: &str) -> RenderOutput {
        services(["gw"], version)
    }

    /// A render of Gateways `ns/<name>` that asks for each one's Service labelled `v: version`.
    fn services<'a>(names: impl IntoIterator<Item = &'a str>, version: &str) -> RenderOutput {
        let mut out = RenderOutput::default();
        for name in names {
            let svc = Service {
                metadata: ObjectMeta {
                    name: Some(name.into()),
                    namespace: Some("ns".into()),
                    labels: Some([("v".to_string(), version.to_string())].into()),
                    ..Default::default()
                },
                ..Default::default()
            };
            out.gateways.insert(
                ObjectKey::new("ns", name),
                GatewayOutput {
                    config: Owned::Keep,
                    status: None,
                    service: Owned::Apply(svc),
                    tcp_service: Owned::Keep,
                    deployment: Owned::Keep,
                    daemon_set: Owned::Keep,
                    invalid_config: None,
                    listener_sets: Default::default(),
                },
            );
        }
        out
    }

    /// The writer's task on `sink`, until `stop`.
    struct Running {
        task: tokio::task::JoinHandle<()>,
        shutdown: CancellationToken,
    }

    impl Running {
        fn start(writer: &Writer, sink: &Recorder, leading: watch::Receiver<bool>) -> Running {
            let shutdown = CancellationToken::new();
            let task = tokio::spawn(writer.clone().run(sink.clone(), leading, shutdown.clone()));
            Running { task, shutdown }
        }

        /// Shuts the writer down and waits until it has finished.
        async fn stop(self) {
            self.shutdown.cancel();
            self.task.await.unwrap();
        }
    }

    /// The writer task's passes through its loop: how many began and ended, and what the
    /// ones that ended did.
    #[derive(Debug, Default, Clone, Copy)]
    pub(super) struct Progress {
        pub(super) started: u64,
        ended: u64,
        done: Done,
    }

    impl Progress {
        pub(super) fn finished(&mut self, leading: bool, round: Round) {
            self.ended += 1;
            let done = &mut self.done;
            done.passes += 1;
            done.leading += u64::from(leading);
            done.round.written += round.written;
            done.round.suppressed += round.suppressed;
            done.round.failed += round.failed;
            done.round.kept += round.kept;
        }
    }

    /// What the writer task did between two readings: its passes, those it made leading, and
    /// the writes of their rounds.
    #[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
    struct Done {
        passes: u64,
        leading: u64,
        round: Round,
    }

    impl Done {
        /// What happened after `before`.
        fn since(self, before: Done) -> Done {
            let (a, b) = (self.round, before.round);
            Done {
                passes: self.passes - before.passes,
                leading: self.leading - before.leading,
                round: Round {
                    written: a.written - b.written,
                    suppressed: a.suppressed - b.suppressed,
                    failed: a.failed - b.failed,
                    kept: a.kept - b.kept,
                },
            }
        }

        /// Passes made, `leading` of them leading, with `written` writes and nothing else.
        fn wrote(passes: u64, leading: u64, written: usize) -> Done {
            Done { passes, leading, round: Round { written, ..Round::default() } }
        }
    }

    /// Wakes the writer task and waits until it has made a pass that began after everything
    /// submitted so far; returns what it did meanwhile. A pass in progress (its wake
    /// armed) ends, and the wake makes it go round once more.
    async fn settle(writer: &Writer) -> Done {
        let mut progress = writer.shared.progress.subscribe();
        let before = *progress.borrow_and_update();
        let target = before.started + 1;
        writer.shared.wake.notify_waiters();
        let after = tokio::time::timeout(Duration::from_secs(60), progress.wait_for(|p| p.ended >= target))
            .await
            .expect("the writer goes round within a minute")
            .map(|p| *p)
            .expect("the writer's progress is never dropped while it runs");
        after.done.since(before.done)
    }

    #[tokio::test(start_paused = true)]
    async fn writes_coalesce_and_unchanged_content_is_not_written() {
        let writer = Writer::new(WriterMetrics::default());
        let sink = Recorder::default();
        let (leader, leading) = watch::channel(true);
        writer.submit(&output("1"), &Index::new());
        writer.submit(&output("2"), &Index::new());
        let running = Running::start(&writer, &sink, leading);
        assert_eq!(settle(&writer).await, Done::wrote(1, 1, 1));
        assert_eq!(sink.services(), ["2"], "latest wins");
        writer.submit(&output("2"), &Index::new());
        assert_eq!(settle(&writer).await, Done::wrote(1, 1, 0), "unchanged: not written by a writer that ran");
        assert_eq!(sink.services(), ["2"]);
        writer.submit(&output("3"), &Index::new());
        assert_eq!(settle(&writer).await, Done::wrote(1, 1, 1));
        assert_eq!(sink.services(), ["2", "3"]);
        let suppressed =
            ResourceOperationLabels { scope: "spec".into(), kind: "Service".into(), operation: "suppressed".into() };
        assert_eq!(writer.shared.metrics.resource_operations.get_or_create(&suppressed).get(), 1);
        drop(leader); // no election: the writer keeps writing
        writer.submit(&output("4"), &Index::new());
        assert_eq!(settle(&writer).await.round.written, 1);
        assert_eq!(sink.services(), ["2", "3", "4"]);
        running.stop().await;
    }

    /// A render stages a Gateway's objects, then its routes' statuses: nothing is written
    /// before the render is done, and then every status before any object.
    #[tokio::test(start_paused = true)]
    async fn a_renders_statuses_are_written_before_its_objects() {
        let writer = Writer::new(WriterMetrics::default());
        let sink = Recorder::default();
        let (_leader, leading) = watch::channel(true);
        let running = Running::start(&writer, &sink, leading);
        let gateway = ObjectKey::new("ns", "gw");
        let out = output("1").gateways.remove(&gateway).unwrap();
        let status = |object| crate::ops::status_op(SerializedStatus::new(object, &serde_json::json!({})));
        let gateway_status = status(ObjRef::new(Kind::Gateway, gateway.clone()));
        writer.stage(gateway_status.into_iter().chain(crate::ops::owned_ops(&gateway, &out)), &Index::new());
        let route = ObjRef::new(Kind::UdpRoute, ObjectKey::new("ns", "r"));
        writer.stage(status(route), &Index::new());
        assert_eq!(settle(&writer).await, Done::wrote(1, 1, 0), "staged, not written by a writer that ran");
        assert!(sink.writes.lock().unwrap().is_empty());
        writer.flush();
        assert_eq!(settle(&writer).await, Done::wrote(1, 1, 3));
        let order: Vec<_> = sink.writes.lock().unwrap().iter().map(|(t, _)| (t.scope, t.kind)).collect();
        assert_eq!(
            order,
            [
                (Scope::Status, WriteKind::Gateway),
                (Scope::Status, WriteKind::UdpRoute),
                (Scope::Spec, WriteKind::Service)
            ]
        );
        running.stop().await;
    }

    /// A sink whose every write first waits for a permit, so that a test can render while a
    /// write is in flight.
    #[derive(Clone)]
    struct Gated {
        inner: Recorder,
        permits: Arc<tokio::sync::Semaphore>,
        /// Writes that have come to the gate.
        arrived: watch::Sender<usize>,
    }

    impl Sink for Gated {
        async fn write(&self, target: &Target, op: &Op) -> Result<Option<String>, WriteError> {
            self.arrived.send_modify(|n| *n += 1);
            self.permits.acquire().await.expect("never closed").forget();
            self.inner.write(target, op).await
        }
    }

    #[tokio::test(start_paused = true)]
    async fn content_queued_again_while_it_is_written_is_written_once() {
        let writer = Writer::new(WriterMetrics::default());
        let permits = Arc::new(tokio::sync::Semaphore::new(0));
        let sink = Gated { inner: Recorder::default(), permits, arrived: watch::Sender::default() };
        let (_leader, leading) = watch::channel(true);
        let shutdown = CancellationToken::new();
        let task = tokio::spawn(writer.clone().run(sink.clone(), leading, shutdown.clone()));
        writer.submit(&output("1"), &Index::new());
        let mut arrived = sink.arrived.subscribe();
        let in_flight = tokio::time::timeout(Duration::from_secs(60), arrived.wait_for(|&n| n == 1));
        in_flight.await.expect("the write comes to the gate").expect("the sink is alive");
        writer.submit(&output("1"), &Index::new()); // a render meanwhile asks for the same
        sink.permits.add_permits(10);
        let once = Round { written: 1, suppressed: 1, ..Round::default() };
        assert_eq!(settle(&writer).await.round, once, "written once; queued again, skipped");
        assert_eq!(sink.inner.services(), ["1"]);
        writer.submit(&output("2"), &Index::new());
        assert_eq!(settle(&writer).await, Done::wrote(1, 1, 1));
        assert_eq!(sink.inner.services(), ["1", "2"], "other content is written");
        shutdown.cancel();
        task.await.unwrap();
    }

    /// Upstream's client has no rate limit (module doc): a render that touches many objects is
    /// written as fast as the API server answers, not at client-go's 20 requests a second.
    #[tokio::test(start_paused = true)]
    async fn writes_are_not_paced_by_a_client_side_rate_limit() {
        let writer = Writer::new(WriterMetrics::default());
        let sink = Recorder::default();
        let (_leader, leading) = watch::channel(true);
        let running = Running::start(&writer, &sink, leading);
        let names: Vec<String> = (0..100).map(|i| format!("gw{i}")).collect();
        let start = Instant::now();
        writer.submit(&services(names.iter().map(String::as_str), "1"), &Index::new());
        assert_eq!(settle(&writer).await, Done::wrote(1, 1, 100));
        assert_eq!(sink.services().len(), 100, "all written at once");
        assert_eq!(start.elapsed(), Duration::ZERO, "no write waited");
        running.stop().await;
    }

    #[tokio::test(start_paused = true)]
    async fn only_the_leader_writes_and_a_new_leader_writes_what_is_pending() {
        let writer = Writer::new(WriterMetrics::default());
        let sink = Recorder::default();
        let (leader, leading) = watch::channel(false);
        let running = Running::start(&writer, &sink, leading);
        writer.submit(&output("1"), &Index::new());
        writer.submit(&output("2"), &Index::new());
        assert_eq!(settle(&writer).await, Done::wrote(1, 0, 0), "not the leader: it ran and wrote nothing");
        assert!(sink.services().is_empty());
        leader.send_replace(true);
        assert_eq!(settle(&writer).await.round, Round { written: 1, ..Round::default() });
        assert_eq!(sink.services(), ["2"]);
        running.stop().await;
    }

    #[tokio::test(start_paused = true)]
    async fn transient_errors_are_retried() {
        let writer = Writer::new(WriterMetrics::default());
        let sink = Recorder { failures: Arc::new(Mutex::new(ATTEMPTS + 1)), ..Default::default() };
        let (_leader, leading) = watch::channel(true);
        writer.submit(&output("1"), &Index::new());
        let running = Running::start(&writer, &sink, leading);
        // The first round gives up after ATTEMPTS (the clock is paused: the retry delays pass
        // as the writer waits them); the next round, a resync later, succeeds.
        tokio::time::sleep(Duration::from_secs(3)).await;
        assert_eq!(*sink.failures.lock().unwrap(), 1, "every attempt of the first round made");
        assert!(sink.services().is_empty());
        tokio::time::sleep(RESYNC).await;
        assert_eq!(sink.services(), ["1"]);
        running.stop().await;
    }

    #[tokio::test(start_paused = true)]
    async fn permanent_errors_are_dropped_until_the_content_changes() {
        let writer = Writer::new(WriterMetrics::default());
        let sink = Recorder { failures: Arc::new(Mutex::new(1)), permanent: true, ..Default::default() };
        let (_leader, leading) = watch::channel(true);
        writer.submit(&output("1"), &Index::new());
        let running = Running::start(&writer, &sink, leading);
        tokio::time::sleep(RESYNC * 3).await;
        let failed_once = Round { failed: 1, ..Round::default() };
        assert_eq!(writer.shared.progress.borrow().done.round, failed_once, "tried, then not retried");
        assert!(sink.services().is_empty());
        writer.submit(&output("2"), &Index::new());
        assert_eq!(settle(&writer).await, Done::wrote(1, 1, 1));
        assert_eq!(sink.services(), ["2"]);
        running.stop().await;
    }

    #[tokio::test(start_paused = true)]
    async fn shutdown_writes_what_is_still_queued() {
        let writer = Writer::new(WriterMetrics::default());
        // The first round fails, so the write waits for a resync that never comes.
        let sink = Recorder { failures: Arc::new(Mutex::new(ATTEMPTS)), ..Default::default() };
        let (_leader, leading) = watch::channel(true);
        writer.submit(&output("1"), &Index::new());
        let running = Running::start(&writer, &sink, leading);
        tokio::time::sleep(Duration::from_secs(3)).await;
        assert_eq!(*sink.failures.lock().unwrap(), 0, "every attempt of the first round made");
        assert!(sink.services().is_empty());
        running.stop().await;
        assert_eq!(sink.services(), ["1"]);
    }

    #[tokio::test(start_paused = true)]
    async fn a_replica_that_does_not_lead_writes_nothing_on_shutdown() {
        let writer = Writer::new(WriterMetrics::default());
        let sink = Recorder::default();
        let (_leader, leading) = watch::channel(false);
        writer.submit(&output("1"), &Index::new());
        let running = Running::start(&writer, &sink, leading);
        assert_eq!(settle(&writer).await, Done::wrote(1, 0, 0), "not leading: it ran and wrote nothing");
        running.stop().await;
        assert!(sink.services().is_empty());
    }
}
