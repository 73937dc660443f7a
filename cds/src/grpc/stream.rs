//! One gRPC watch: the outbound stream of updates and the task that reads the client's acks.
//!
//! The outbound stream is polled only when the HTTP/2 stream has send capacity, so a client
//! that does not read stops the polling; its [`Watch`] meanwhile keeps only the latest version
//! of each config, and the client is sent that when it reads again (conflation), never a
//! queue of versions. Acks are read by their own task, whether or not the client reads.

#![allow(clippy::result_large_err)]

use super::convert::{ack_id, version};
use super::encoded::{Encoded, GrpcUpdate};
use super::limits::WatchSlots;
use crate::clients::{Client, Registration};
use crate::metrics::{CdsMetrics, GRPC};
use crate::watch::{Update, Watch};
use futures_util::Stream;
use std::collections::VecDeque;
use std::sync::Arc;
use stunner_gateway::proto::{self, watch_request};
use tokio::sync::oneshot;
use tokio::task::JoinHandle;
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;
use tonic::{Status, Streaming};

pub(super) struct Outbound {
    watch: Watch,
    pending: VecDeque<Update>,
    /// The client's row in the table: removed when the stream is dropped (client gone).
    client: Registration,
    acks: AckReader,
    /// Given back when the stream is dropped.
    _slots: WatchSlots,
    shutdown: CancellationToken,
    metrics: CdsMetrics,
    done: bool,
}

impl Outbound {
    pub(crate) fn new(
        watch: Watch,
        initial: Vec<Update>,
        client: Registration,
        acks: AckReader,
        slots: WatchSlots,
        shutdown: CancellationToken,
        metrics: CdsMetrics,
    ) -> Self {
        Outbound { watch, pending: initial.into(), client, acks, _slots: slots, shutdown, metrics, done: false }
    }

    pub(crate) fn into_stream(self) -> impl Stream<Item = Result<Encoded, Status>> + Send {
        futures_util::stream::unfold(self, |mut out| async move { out.next().await.map(|item| (item, out)) })
    }

    async fn next(&mut self) -> Option<Result<Encoded, Status>> {
        if self.done {
            return None;
        }
        if self.pending.is_empty() {
            tokio::select! {
                biased;
                _ = self.shutdown.cancelled() => {
                    return self.end(Status::unavailable("the config discovery server is shutting down"));
                }
                status = protocol_error(&mut self.acks.errors) => return self.end(status),
                next = self.watch.next_updates(&mut self.pending) => match next {
                    Ok(()) => {}
                    Err(_) => return self.end(Status::unavailable("the config discovery server is shutting down")),
                },
            }
        }
        let update = self.pending.pop_front()?;
        let bytes = update.snapshot.encoded::<GrpcUpdate>(&update.variant);
        self.client.sent(&update.snapshot);
        self.metrics.pushes.get_or_create(&GRPC).inc();
        self.metrics.push_bytes.get_or_create(&GRPC).inc_by(bytes.len() as u64);
        Some(Ok(Encoded(bytes)))
    }

    fn end(&mut self, status: Status) -> Option<Result<Encoded, Status>> {
        self.done = true;
        Some(Err(status))
    }
}

/// The task that reads a watch's acks, and how it reports a protocol error; the task ends
/// with the watch.
pub(super) struct AckReader {
    /// A protocol error found by the reader; `None` once the reader ended without one.
    errors: Option<oneshot::Receiver<Status>>,
    task: JoinHandle<()>,
}

impl AckReader {
    /// Starts the reader on `tasks` (the listener's).
    pub(crate) fn spawn(tasks: &TaskTracker, inbound: Streaming<proto::WatchRequest>, client: Arc<Client>) -> Self {
        let (errors_tx, errors_rx) = oneshot::channel();
        AckReader { errors: Some(errors_rx), task: tasks.spawn(read_acks(inbound, client, errors_tx)) }
    }
}

impl Drop for AckReader {
    fn drop(&mut self) {
        self.task.abort();
    }
}

/// The reader's error, or never once the reader ended without one.
async fn protocol_error(errors: &mut Option<oneshot::Receiver<Status>>) -> Status {
    if let Some(rx) = errors {
        if let Ok(status) = rx.await {
            return status;
        }
        *errors = None;
    }
    std::future::pending().await
}

/// Reads what the client sends after `start`: acks, recorded in its table row. Another
/// `start` or a malformed ack ends the watch with INVALID_ARGUMENT; messages of a kind this
/// server does not know are skipped. Ends when the client closes its side.
async fn read_acks(mut inbound: Streaming<proto::WatchRequest>, client: Arc<Client>, errors: oneshot::Sender<Status>) {
    let status = loop {
        match inbound.message().await {
            Ok(Some(proto::WatchRequest { msg: Some(watch_request::Msg::Ack(ack)) })) => {
                match ack_id(ack.id).and_then(|id| Ok((id, version(&ack.version)?))) {
                    Ok((id, v)) => {
                        if !client.ack(&id, v, &ack.error) {
                            tracing::debug!(%id, "ignored an ack of a config never sent to this client");
                        }
                    }
                    Err(status) => break status,
                }
            }
            Ok(Some(proto::WatchRequest { msg: Some(watch_request::Msg::Start(_)) })) => {
                break Status::invalid_argument("a watch takes one `start`; after it, only `ack`s");
            }
            Ok(Some(proto::WatchRequest { msg: None })) => {}
            Ok(None) => return,
            Err(status) => break status,
        }
    };
    let _ = errors.send(status);
}
