//! One WebSocket watch stream: sends what its [`Watch`] yields, keeps reading the socket.
//!
//! stunnerd pings every 5 s and gives up after 8 s without a Pong, so the socket is read
//! all the time (tungstenite answers Pings while reading). A frame the client does not take
//! within the write timeout, or a peer silent for the idle timeout despite our Pings, ends
//! the session: one stuck client costs one task and at most one frame of memory, and
//! never delays the store or any other client.

use super::clients::Registration;
use super::metrics::{CdsMetrics, WEBSOCKET};
use super::watch::{Update, Watch};
use axum::extract::ws::{Message, WebSocket, WebSocketUpgrade};
use std::sync::Arc;
use std::time::Duration;
use tokio::sync::OwnedSemaphorePermit;
use tokio::time::{Instant, MissedTickBehavior, timeout};
use tokio_util::sync::CancellationToken;

/// Limits and timers of watch sessions.
#[derive(Debug, Clone)]
pub struct Settings {
    /// How long one frame may take to go out before the client is dropped.
    pub write_timeout: Duration,
    /// How often we Ping a client; a client silent for three intervals is dropped.
    pub ping_interval: Duration,
    /// Largest message accepted from a client (clients only send control frames).
    pub max_client_message: usize,
}

impl Default for Settings {
    fn default() -> Self {
        Settings {
            write_timeout: Duration::from_secs(10),
            ping_interval: Duration::from_secs(20),
            max_client_message: 4096,
        }
    }
}

impl Settings {
    /// Small buffers: an idle stream should cost a few KiB, and clients send almost nothing.
    pub(super) fn configure(&self, ws: WebSocketUpgrade) -> WebSocketUpgrade {
        ws.read_buffer_size(4096)
            .write_buffer_size(0)
            .max_message_size(self.max_client_message)
            .max_frame_size(self.max_client_message)
    }
}

/// Holds one slot of the server's connection limit for as long as the connection lives,
/// including after it was upgraded to a WebSocket.
#[derive(Clone)]
pub struct ConnectionPermit {
    _slot: Arc<OwnedSemaphorePermit>,
}

impl ConnectionPermit {
    pub fn new(slot: OwnedSemaphorePermit) -> Self {
        ConnectionPermit { _slot: Arc::new(slot) }
    }
}

pub(super) struct Session {
    pub socket: WebSocket,
    pub watch: Watch,
    pub settings: Settings,
    pub metrics: CdsMetrics,
    pub shutdown: CancellationToken,
    /// This client's row in the client table (and the `clients` gauge) while it is connected.
    pub client: Registration,
    pub _permit: Option<ConnectionPermit>,
}

/// Why a session ended, for the log and the metrics.
#[derive(Debug)]
enum End {
    ClientClosed,
    ShuttingDown,
    TooSlow,
    Silent,
}

impl Session {
    pub async fn run(mut self, initial: Vec<Update>) {
        let end = self.serve(initial).await;
        match end {
            End::TooSlow | End::Silent => {
                self.metrics.dropped_clients.get_or_create(&WEBSOCKET).inc();
                tracing::info!(reason = ?end, "dropped CDS watch client");
            }
            End::ShuttingDown => {
                // An empty Close frame, as upstream sends: the client reconnects to a live replica.
                let _ = timeout(self.settings.write_timeout, self.socket.send(Message::Close(None))).await;
            }
            End::ClientClosed => {}
        }
    }

    async fn serve(&mut self, initial: Vec<Update>) -> End {
        let mut pending = initial;
        let mut ping =
            tokio::time::interval_at(Instant::now() + self.settings.ping_interval, self.settings.ping_interval);
        ping.set_missed_tick_behavior(MissedTickBehavior::Delay);
        let mut last_heard = Instant::now();
        loop {
            for update in pending.drain(..) {
                let len = update.frame().len() as u64;
                let frame = Message::Text(update.variant.frame);
                match timeout(self.settings.write_timeout, self.socket.send(frame)).await {
                    Ok(Ok(())) => {
                        self.client.sent(&update.snapshot.id, update.snapshot.version);
                        self.metrics.pushes.get_or_create(&WEBSOCKET).inc();
                        self.metrics.push_bytes.get_or_create(&WEBSOCKET).inc_by(len);
                    }
                    Ok(Err(_)) => return End::ClientClosed,
                    Err(_) => return End::TooSlow,
                }
            }
            tokio::select! {
                biased;
                _ = self.shutdown.cancelled() => return End::ShuttingDown,
                msg = self.socket.recv() => match msg {
                    Some(Ok(Message::Close(_))) | Some(Err(_)) | None => return End::ClientClosed,
                    // Pings are answered by tungstenite itself; data is read and discarded.
                    Some(Ok(_)) => last_heard = Instant::now(),
                },
                next = self.watch.next_updates() => match next {
                    Ok(updates) => pending = updates,
                    Err(_) => return End::ShuttingDown,
                },
                _ = ping.tick() => {
                    if last_heard.elapsed() >= self.settings.ping_interval * 3 {
                        return End::Silent;
                    }
                    let ping = Message::Ping(axum::body::Bytes::from_static(b"keepalive"));
                    match timeout(self.settings.write_timeout, self.socket.send(ping)).await {
                        Ok(Ok(())) => {}
                        Ok(Err(_)) => return End::ClientClosed,
                        Err(_) => return End::TooSlow,
                    }
                }
            }
        }
    }
}
