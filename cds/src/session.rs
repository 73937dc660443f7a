//! One WebSocket watch stream: sends what its [`Watch`] yields, keeps reading the socket.
//!
//! stunnerd pings every 5 s and gives up after 8 s without a Pong, so the socket is read
//! all the time and Pings are answered at once. A frame the client does not take within the
//! write timeout, or a peer silent for three of our Ping intervals, ends the session: one
//! stuck client costs one task and what the kernel buffers for it, and never delays the
//! store or any other client. The session owns the upgraded connection (any byte stream:
//! plain TCP today, TLS just as well) and writes each config's shared, ready-made frame to it
//! ([`super::websocket`]).

use super::clients::Registration;
use super::connection::ConnectionPermit;
use super::metrics::{CdsMetrics, WEBSOCKET};
use super::watch::{Update, Watch};
use super::websocket::{Event, FrameReader, ProtocolError, WebSocketFrame, close_frame, ping_frame};
use bytes::Bytes;
use std::future::{Future, poll_fn};
use std::pin::{Pin, pin};
use std::task::{Context, Poll};
use tokio::io::{AsyncRead, AsyncWrite, AsyncWriteExt, ReadBuf};
use tokio::time::{Instant, MissedTickBehavior, timeout};
use tokio_util::sync::CancellationToken;

pub use super::watch_protocol::Settings;

/// One watch client's session on `S`, the upgraded connection (with whatever the client sent
/// right after its request still to be read from it).
pub(super) struct Session<S> {
    pub(crate) stream: S,
    pub(crate) watch: Watch,
    pub(crate) settings: Settings,
    pub(crate) metrics: CdsMetrics,
    pub(crate) shutdown: CancellationToken,
    /// This client's row in the client table (and the `clients` gauge) while it is connected.
    pub(crate) client: Registration,
    pub(crate) _permit: Option<ConnectionPermit>,
}

/// Why a session ended, for the log and the metrics.
#[derive(Debug)]
pub(super) enum End {
    ClientClosed,
    ShuttingDown,
    TooSlow,
    Silent,
    Broken(ProtocolError),
}

impl<S: AsyncRead + AsyncWrite + Unpin> Session<S> {
    pub(crate) async fn run(mut self, initial: Vec<Update>) {
        let end = self.serve(initial).await;
        if let Some(frame) = end.goodbye(&self.metrics) {
            let _ = self.write(&frame).await;
        }
    }

    async fn serve(&mut self, initial: Vec<Update>) -> End {
        // Looked up once: every push then costs two atomic increments.
        let pushes = self.metrics.pushes.get_or_create(&WEBSOCKET).clone();
        let push_bytes = self.metrics.push_bytes.get_or_create(&WEBSOCKET).clone();
        let mut reader = FrameReader::new(self.settings.max_client_message);
        let mut last_heard = Instant::now();
        // What came along with the request is answered before the first config goes out.
        let early = match poll_fn(|cx| Poll::Ready(Inbox::poll_read(&mut self.stream, cx, &mut reader))).await {
            Poll::Ready(inbox) => inbox,
            Poll::Pending => Inbox::default(),
        };
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
                let frame = update.snapshot.encoded::<WebSocketFrame>(&update.variant);
                if let Err(end) = self.write(&frame).await {
                    return end;
                }
                self.client.sent(&update.snapshot);
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
                inbox = poll_fn(|cx| Inbox::poll_read(&mut self.stream, cx, &mut reader)) => {
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
        let stream = &mut self.stream;
        let mut send = pin!(async move {
            stream.write_all(bytes).await?;
            stream.flush().await
        });
        // Almost always the connection takes the whole frame at once: no timer needed then.
        let sent = match poll_fn(|cx| Poll::Ready(send.as_mut().poll(cx))).await {
            Poll::Ready(sent) => sent,
            Poll::Pending => match timeout(self.settings.write_timeout, send).await {
                Ok(sent) => sent,
                Err(_) => return Err(End::TooSlow),
            },
        };
        sent.map_err(|_| End::ClientClosed)
    }
}

impl End {
    /// Logs and counts the end of a session; returns the Close frame to send the client, if
    /// any.
    pub(super) fn goodbye(&self, metrics: &CdsMetrics) -> Option<Bytes> {
        match self {
            End::TooSlow | End::Silent => {
                metrics.dropped_clients.get_or_create(&WEBSOCKET).inc();
                tracing::info!(reason = ?self, "dropped CDS watch client");
                None
            }
            End::Broken(error) => {
                tracing::debug!(?error, "CDS watch client broke the WebSocket protocol");
                Some(close_frame(Some(error.close_code())))
            }
            // An empty Close frame, as upstream sends: the client reconnects to a live replica.
            End::ShuttingDown => Some(close_frame(None)),
            End::ClientClosed => None,
        }
    }
}

/// What the client's frames read so far ask of the session.
#[derive(Default)]
pub(super) struct Inbox {
    /// Any frame arrived: the client is alive.
    pub(crate) heard: bool,
    /// The answer to the latest Ping (RFC 6455 §5.5.3 lets earlier ones go unanswered).
    pub(crate) pong: Option<Bytes>,
    /// The client closed, with this status code.
    pub(crate) close: Option<Option<u16>>,
    /// The connection is over (end of stream, an error, a protocol violation).
    pub(crate) end: Option<End>,
}

/// Reads per wake-up at most this many chunks: a client that floods us cannot keep the task
/// from its other work (the socket stays readable, so the rest is read on the next turn).
pub(super) const READS_PER_WAKE: usize = 8;

/// What one read of a client's socket brings in.
pub(super) const READ_CHUNK: usize = 512;

impl Inbox {
    /// Reads what the connection has now and parses it; pending (the task woken when there
    /// is more) only when there was nothing to read. The read buffer lives only for this
    /// call, so an idle session holds none.
    fn poll_read<S: AsyncRead + Unpin>(stream: &mut S, cx: &mut Context<'_>, reader: &mut FrameReader) -> Poll<Inbox> {
        let mut inbox = Inbox::default();
        let mut chunk = [0u8; READ_CHUNK];
        let mut read = false;
        for _ in 0..READS_PER_WAKE {
            let mut buf = ReadBuf::new(&mut chunk);
            match Pin::new(&mut *stream).poll_read(cx, &mut buf) {
                Poll::Pending => break,
                Poll::Ready(Ok(())) if buf.filled().is_empty() => inbox.end = Some(End::ClientClosed),
                Poll::Ready(Ok(())) => inbox.take(reader, buf.filled()),
                Poll::Ready(Err(_)) => inbox.end = Some(End::ClientClosed),
            }
            read = true;
            if inbox.close.is_some() || inbox.end.is_some() {
                break;
            }
        }
        if read { Poll::Ready(inbox) } else { Poll::Pending }
    }

    /// Parses `bytes`, the next ones read from the client, into what they ask for.
    pub(super) fn take(&mut self, reader: &mut FrameReader, mut bytes: &[u8]) {
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::clients::{ClientInfo, ClientTable};
    use crate::metrics::Transport;
    use crate::store::{ConfigStore, Scope};
    use crate::watch::Held;
    use crate::websocket::text_frame;
    use std::sync::Arc;
    use stunner_gateway::cds::ConfigId;
    use stunner_gateway::config::StunnerConfig;
    use tokio::io::{AsyncReadExt, DuplexStream};

    /// A client's Ping (masked, with an all-zero key: the payload reads as it is).
    fn client_ping(payload: &[u8]) -> Vec<u8> {
        let mut frame = vec![0x89, 0x80 | payload.len() as u8, 0, 0, 0, 0];
        frame.extend_from_slice(payload);
        frame
    }

    async fn read_exactly(client: &mut DuplexStream, want: &[u8]) {
        let mut got = vec![0; want.len()];
        client.read_exact(&mut got).await.unwrap();
        assert_eq!(got, want);
    }

    fn config(realm: &str) -> StunnerConfig {
        let mut c = StunnerConfig::zero("ns/gw");
        c.auth.realm = realm.into();
        c
    }

    /// The session needs a byte stream, not a TCP socket (a TLS stream will do): here an
    /// in-memory pipe carries the whole watch.
    #[tokio::test]
    async fn a_watch_runs_over_any_byte_stream() {
        let metrics = CdsMetrics::default();
        let store = Arc::new(ConfigStore::new(metrics.clone()));
        store.upsert(config("r1"));
        let id = ConfigId::new("ns", "gw");
        let (watch, initial) = Watch::resume(store.clone(), Scope::Config(id.clone()), None, &Held::new());
        let clients = Arc::new(ClientTable::new(metrics.clone()));
        let info = ClientInfo {
            transport: Transport::Websocket,
            remote_address: None,
            node: Box::default(),
            scope: Scope::Config(id.clone()),
            client_name: Box::default(),
            identity: Box::default(),
        };
        let client = clients.register(info);
        let (stream, mut peer) = tokio::io::duplex(64 * 1024);
        // Sent along with the request: answered before the first config goes out.
        peer.write_all(&client_ping(b"early")).await.unwrap();
        let shutdown = CancellationToken::new();
        let settings = Settings::default();
        let session = Session {
            stream,
            watch,
            settings,
            metrics: metrics.clone(),
            shutdown: shutdown.clone(),
            client,
            _permit: None,
        };
        let task = tokio::spawn(session.run(initial));

        read_exactly(&mut peer, b"\x8a\x05early").await;
        read_exactly(&mut peer, &text_frame(&store.get(&id).unwrap().json)).await;
        store.upsert(config("r2"));
        read_exactly(&mut peer, &text_frame(&store.get(&id).unwrap().json)).await;
        peer.write_all(&client_ping(b"later")).await.unwrap();
        read_exactly(&mut peer, b"\x8a\x05later").await;
        shutdown.cancel();
        read_exactly(&mut peer, &close_frame(None)).await;
        task.await.unwrap();
        assert_eq!(clients.count(Transport::Websocket), 0, "the session left the client table");
        assert_eq!(metrics.pushes.get_or_create(&WEBSOCKET).get(), 2);
    }
}
