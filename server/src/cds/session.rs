//! One WebSocket watch stream: sends what its [`Watch`] yields, keeps reading the socket.
//!
//! stunnerd pings every 5 s and gives up after 8 s without a Pong, so the socket is read
//! all the time and Pings are answered at once. A frame the client does not take within the
//! write timeout, or a peer silent for three of our Ping intervals, ends the session: one
//! stuck client costs one task and what the kernel buffers for it, and never delays the
//! store or any other client. The session owns the TCP socket and writes each config's
//! shared, ready-made frame to it ([`super::websocket`]).

use super::clients::Registration;
use super::metrics::{CdsMetrics, WEBSOCKET};
use super::store::Encoding;
use super::watch::{Update, Watch};
use super::websocket::{Event, FrameReader, ProtocolError, close_frame, ping_frame};
use bytes::Bytes;
use std::io;
use std::sync::Arc;
use std::time::Duration;
use tokio::io::AsyncWriteExt;
use tokio::net::TcpStream;
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
    pub stream: TcpStream,
    /// What the client sent right after its request, read along with it.
    pub received: Bytes,
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
    Broken(ProtocolError),
}

impl Session {
    pub async fn run(mut self, initial: Vec<Update>) {
        let end = self.serve(initial).await;
        let goodbye = match end {
            End::TooSlow | End::Silent => {
                self.metrics.dropped_clients.get_or_create(&WEBSOCKET).inc();
                tracing::info!(reason = ?end, "dropped CDS watch client");
                None
            }
            End::Broken(error) => {
                tracing::debug!(?error, "CDS watch client broke the WebSocket protocol");
                Some(close_frame(Some(error.close_code())))
            }
            // An empty Close frame, as upstream sends: the client reconnects to a live replica.
            End::ShuttingDown => Some(close_frame(None)),
            End::ClientClosed => None,
        };
        if let Some(frame) = goodbye {
            let _ = self.write(&frame).await;
        }
    }

    async fn serve(&mut self, initial: Vec<Update>) -> End {
        // Looked up once: every push then costs two atomic increments.
        let pushes = self.metrics.pushes.get_or_create(&WEBSOCKET).clone();
        let push_bytes = self.metrics.push_bytes.get_or_create(&WEBSOCKET).clone();
        let mut reader = FrameReader::new(self.settings.max_client_message);
        let mut last_heard = Instant::now();
        let early = Inbox::parse(&mut reader, &std::mem::take(&mut self.received));
        if let Err(end) = self.answer(early, &mut last_heard).await {
            return end;
        }
        let cancelled = self.shutdown.clone().cancelled_owned();
        tokio::pin!(cancelled);
        let mut ping =
            tokio::time::interval_at(Instant::now() + self.settings.ping_interval, self.settings.ping_interval);
        ping.set_missed_tick_behavior(MissedTickBehavior::Delay);
        let mut pending = initial;
        loop {
            for update in pending.drain(..) {
                let frame = update.snapshot.encoded(&update.variant, Encoding::WebSocketFrame);
                if let Err(end) = self.write(&frame).await {
                    return end;
                }
                self.client.sent(&update.snapshot.id, update.snapshot.version);
                pushes.inc();
                push_bytes.inc_by(update.frame().len() as u64);
            }
            // Updates first: a wake-up for an update polls nothing else before it goes out.
            tokio::select! {
                biased;
                next = self.watch.next_updates(&mut pending) => {
                    if next.is_err() {
                        return End::ShuttingDown;
                    }
                },
                _ = &mut cancelled => return End::ShuttingDown,
                ready = std::future::poll_fn(|cx| self.stream.poll_read_ready(cx)) => {
                    if ready.is_err() {
                        return End::ClientClosed;
                    }
                    let inbox = Inbox::read(&self.stream, &mut reader);
                    if let Err(end) = self.answer(inbox, &mut last_heard).await {
                        return end;
                    }
                },
                _ = ping.tick() => {
                    if last_heard.elapsed() >= self.settings.ping_interval * 3 {
                        return End::Silent;
                    }
                    if let Err(end) = self.write(&ping_frame(b"keepalive")).await {
                        return end;
                    }
                }
            }
        }
    }

    /// Acts on what the client sent: answers its last Ping, echoes its Close.
    async fn answer(&mut self, inbox: Inbox, last_heard: &mut Instant) -> Result<(), End> {
        if inbox.heard {
            *last_heard = Instant::now();
        }
        if let Some(pong) = inbox.pong {
            self.write(&pong).await?;
        }
        if let Some(code) = inbox.close {
            let _ = self.write(&close_frame(code)).await;
            return Err(End::ClientClosed);
        }
        match inbox.end {
            Some(end) => Err(end),
            None => Ok(()),
        }
    }

    async fn write(&mut self, bytes: &[u8]) -> Result<(), End> {
        // Almost always the socket takes the whole frame at once: no timer needed then.
        let written = match self.stream.try_write(bytes) {
            Ok(n) => n,
            Err(e) if e.kind() == io::ErrorKind::WouldBlock => 0,
            Err(_) => return Err(End::ClientClosed),
        };
        if written == bytes.len() {
            return Ok(());
        }
        match timeout(self.settings.write_timeout, self.stream.write_all(&bytes[written..])).await {
            Ok(Ok(())) => Ok(()),
            Ok(Err(_)) => Err(End::ClientClosed),
            Err(_) => Err(End::TooSlow),
        }
    }
}

/// What the client's frames read so far ask of the session.
#[derive(Default)]
struct Inbox {
    /// Any frame arrived: the client is alive.
    heard: bool,
    /// The answer to the latest Ping (RFC 6455 §5.5.3 lets earlier ones go unanswered).
    pong: Option<Bytes>,
    /// The client closed, with this status code.
    close: Option<Option<u16>>,
    /// The connection is over (end of stream, an error, a protocol violation).
    end: Option<End>,
}

/// Reads per wake-up at most this many chunks: a client that floods us cannot keep the task
/// from its other work (the socket stays readable, so the rest is read on the next turn).
const READS_PER_WAKE: usize = 8;

impl Inbox {
    /// Reads what the socket has now (without waiting) and parses it.
    fn read(stream: &TcpStream, reader: &mut FrameReader) -> Inbox {
        let mut inbox = Inbox::default();
        let mut chunk = [0u8; 512];
        for _ in 0..READS_PER_WAKE {
            match stream.try_read(&mut chunk) {
                Ok(0) => inbox.end = Some(End::ClientClosed),
                Ok(n) => inbox.take(reader, &chunk[..n]),
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => break,
                Err(_) => inbox.end = Some(End::ClientClosed),
            }
            if inbox.close.is_some() || inbox.end.is_some() {
                break;
            }
        }
        inbox
    }

    fn parse(reader: &mut FrameReader, bytes: &[u8]) -> Inbox {
        let mut inbox = Inbox::default();
        inbox.take(reader, bytes);
        inbox
    }

    fn take(&mut self, reader: &mut FrameReader, mut bytes: &[u8]) {
        while !bytes.is_empty() && self.close.is_none() && self.end.is_none() {
            match reader.read(bytes) {
                Ok((used, event)) => {
                    bytes = &bytes[used..];
                    self.heard |= event.is_some();
                    match event {
                        None => {}
                        Some(Event::Close(code)) => self.close = Some(code),
                        Some(Event::Ping(pong)) => self.pong = Some(pong),
                        Some(Event::Pong | Event::Data) => {}
                    }
                }
                Err(error) => self.end = Some(End::Broken(error)),
            }
        }
    }
}
