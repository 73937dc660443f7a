//! A WebSocket watch as a task of its own, on any byte stream: a thin driver of the watch
//! protocol ([`super::watch_protocol`]), for the streams the fan-out cannot take.
//!
//! The fan-out's shards ([`super::fanout`]) serve every watch on a plain TCP socket, which they
//! register with their epoll. This task serves the others: a watch upgraded on any other byte
//! stream (none today; a TLS stream one day), and every watch when the fan-out could not start
//! (no epoll instance to be had). It feeds the protocol what the client sends, what the watch
//! yields, the shutdown, the time and each write's completion, and writes what the protocol
//! hands out, reading on while a write is under way (so a client's Ping is answered behind that
//! write, as the shards answer it, not after).

use super::clients::Registration;
use super::connection::ConnectionPermit;
use super::metrics::CdsMetrics;
use super::watch::{Update, Watch};
use super::watch_protocol::{End, Inbox, Push, PushCounters, READ_CHUNK, READS_PER_WAKE, Transmit, WatchProtocol};
use super::websocket::{FrameReader, WebSocketFrame};
use std::future::poll_fn;
use std::io;
use std::pin::Pin;
use std::task::{Context, Poll};
use tokio::io::{AsyncRead, AsyncWrite, AsyncWriteExt, ReadBuf};
use tokio::time::Instant;
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

impl<S: AsyncRead + AsyncWrite> Session<S> {
    pub(crate) async fn run(self, initial: Vec<Update>) {
        let Session { stream, mut watch, settings, metrics, shutdown, client, _permit } = self;
        let counters = PushCounters::new(&metrics);
        let (mut rx, mut tx) = tokio::io::split(stream);
        let mut reader = FrameReader::new(settings.max_client_message);
        let mut protocol = WatchProtocol::new(&settings, now());
        // The frame the protocol handed out, on its way.
        let mut writing: Option<Transmit> = None;
        // What came along with the request is answered before the first config goes out.
        if let Poll::Ready(inbox) = poll_fn(|cx| Poll::Ready(poll_read(&mut rx, cx, &mut reader))).await {
            on_its_way(&mut writing, protocol.on_received(inbox, now()));
        }
        for update in initial {
            on_its_way(&mut writing, protocol.on_update(push(update), now()));
        }
        let cancelled = shutdown.cancelled();
        tokio::pin!(cancelled);
        let mut updates = Vec::new();
        let end = loop {
            if let Some(end) = protocol.over() {
                break end;
            }
            let deadline = protocol.deadline(&settings).map(Instant::from_std);
            tokio::select! {
                biased;
                written = write(&mut tx, writing.as_mut()), if writing.is_some() => match written {
                    Ok(()) => {
                        counters.record(&client, writing.take().expect("a frame on its way").out());
                        on_its_way(&mut writing, protocol.on_written(now()));
                    }
                    Err(_) => protocol.on_broken(),
                },
                next = watch.next_updates(&mut updates), if protocol.wants_updates() => match next {
                    Ok(()) => {
                        for update in updates.drain(..) {
                            on_its_way(&mut writing, protocol.on_update(push(update), now()));
                        }
                    }
                    Err(_) => on_its_way(&mut writing, protocol.on_shutdown(now())),
                },
                () = &mut cancelled, if protocol.is_open() => on_its_way(&mut writing, protocol.on_shutdown(now())),
                inbox = poll_fn(|cx| poll_read(&mut rx, cx, &mut reader)), if protocol.is_open() => {
                    on_its_way(&mut writing, protocol.on_received(inbox, now()));
                }
                () = sleep_until(deadline) => on_its_way(&mut writing, protocol.on_timer(now(), &settings)),
            }
        };
        end.record(&metrics);
    }
}

/// Takes the frame the protocol `handed` out, if it did (it hands one out only when none is
/// on its way).
fn on_its_way(writing: &mut Option<Transmit>, handed: Option<Transmit>) {
    if handed.is_some() {
        *writing = handed;
    }
}

/// The time, as the protocol takes it (the runtime's clock: a paused test clock too).
fn now() -> std::time::Instant {
    Instant::now().into_std()
}

/// `update`, encoded for a WebSocket.
fn push(update: Update) -> Push {
    Push { frame: update.snapshot.encoded::<WebSocketFrame>(&update.variant), update }
}

/// Waits until `deadline`, or forever without one.
async fn sleep_until(deadline: Option<Instant>) {
    match deadline {
        Some(deadline) => tokio::time::sleep_until(deadline).await,
        None => std::future::pending().await,
    }
}

/// Writes the rest of `transmit` and flushes it. Cancel-safe: what was written is recorded in
/// `transmit` as it goes.
async fn write<W: AsyncWrite + Unpin>(tx: &mut W, transmit: Option<&mut Transmit>) -> io::Result<()> {
    let transmit = transmit.expect("called only with a frame on its way");
    while !transmit.rest().is_empty() {
        match tx.write(transmit.rest()).await? {
            0 => return Err(io::ErrorKind::WriteZero.into()),
            n => transmit.advance(n),
        }
    }
    tx.flush().await
}

/// Reads what the connection has now and parses it; pending (the task woken when there is
/// more) only when there was nothing to read. The read buffer lives only for this call, so an
/// idle session holds none.
fn poll_read<R: AsyncRead + Unpin>(stream: &mut R, cx: &mut Context<'_>, reader: &mut FrameReader) -> Poll<Inbox> {
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
        if inbox.is_final() {
            break;
        }
    }
    if read { Poll::Ready(inbox) } else { Poll::Pending }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::clients::{ClientInfo, ClientTable};
    use crate::metrics::{Transport, WEBSOCKET};
    use crate::store::{ConfigStore, Scope};
    use crate::watch::Held;
    use crate::websocket::{close_frame, text_frame};
    use std::sync::Arc;
    use std::time::Duration;
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

    /// A watch of ns/gw in `store` as a session on an in-memory pipe of `capacity` bytes: the
    /// session with its initial configs, the client's end of the pipe, the client table.
    fn session(
        store: &Arc<ConfigStore>,
        capacity: usize,
        shutdown: &CancellationToken,
    ) -> (Session<DuplexStream>, Vec<Update>, DuplexStream, Arc<ClientTable>) {
        let scope = Scope::Config(ConfigId::new("ns", "gw"));
        let (watch, initial) = Watch::resume(store.clone(), scope.clone(), None, &Held::new());
        let clients = Arc::new(ClientTable::new(store.metrics.clone()));
        let info = ClientInfo {
            transport: Transport::Websocket,
            remote_address: None,
            node: Box::default(),
            scope,
            client_name: Box::default(),
            identity: Box::default(),
        };
        let client = clients.register(info);
        let (stream, peer) = tokio::io::duplex(capacity);
        let session = Session {
            stream,
            watch,
            settings: Settings::default(),
            metrics: store.metrics.clone(),
            shutdown: shutdown.clone(),
            client,
            _permit: None,
        };
        (session, initial, peer, clients)
    }

    /// The session needs a byte stream, not a TCP socket (a TLS stream will do): here an
    /// in-memory pipe carries the whole watch.
    #[tokio::test]
    async fn a_watch_runs_over_any_byte_stream() {
        let store = Arc::new(ConfigStore::new(CdsMetrics::default()));
        store.upsert(config("r1"));
        let id = ConfigId::new("ns", "gw");
        let shutdown = CancellationToken::new();
        let (session, initial, mut peer, clients) = session(&store, 64 * 1024, &shutdown);
        // Sent along with the request: answered before the first config goes out.
        peer.write_all(&client_ping(b"early")).await.unwrap();
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
        assert_eq!(store.metrics.pushes.get_or_create(&WEBSOCKET).get(), 2);
    }

    /// The session tells its protocol the time: a client that takes nothing of a config larger
    /// than the pipe holds is dropped once the write timeout passes (on a paused clock, which
    /// moves on when the session has nothing else to do).
    #[tokio::test(start_paused = true)]
    async fn a_client_that_takes_nothing_is_dropped_at_the_write_timeout() {
        let store = Arc::new(ConfigStore::new(CdsMetrics::default()));
        let mut big = config("r1");
        big.auth.credentials.insert("padding".into(), "x".repeat(8192));
        store.upsert(big);
        let shutdown = CancellationToken::new();
        let (session, initial, peer, _clients) = session(&store, 1024, &shutdown);
        let started = Instant::now();
        tokio::time::timeout(Duration::from_secs(60), session.run(initial)).await.expect("the session ended");
        assert_eq!(started.elapsed(), Settings::default().write_timeout, "at the write timeout");
        assert_eq!(store.metrics.dropped_clients.get_or_create(&WEBSOCKET).get(), 1);
        assert_eq!(store.metrics.pushes.get_or_create(&WEBSOCKET).get(), 0, "the config never went out whole");
        drop(peer);
    }
}
