//! The protocol of one WebSocket watch connection, as a state machine without I/O: every rule
//! of a watch (keepalive Pings and the deadline for the client's answer, Pongs to the
//! client's Pings, the write timeout, latest wins, Close frames with a valid code) is stated
//! here once, and each transport only drives it.
//!
//! Its inputs are what the client sent, decoded ([`Inbox`]), a config version to send, the
//! server's shutdown, the time (passed in: the machine reads no clock), and the completion of
//! the write it asked for. Its outputs are the frame to write ([`Transmit`]; one at a time,
//! each handed out only once the one before it is written whole), the instant it next needs
//! to be told the time ([`WatchProtocol::deadline`]), and the end of the connection
//! ([`WatchProtocol::over`]). The fan-out's shards ([`crate::fanout`]) drive it for every TCP
//! watch; [`crate::session`] drives it on any other byte stream.
//!
//! stunnerd pings every 5 s and gives up 8 s after a Ping without a Pong, so a client's Ping
//! is answered before anything else that waits. A frame the client does not take within the
//! write timeout, or a client silent for three of our Ping intervals, ends the connection.

mod outbox;

pub(crate) use outbox::{Out, Push};

use crate::clients::Registration;
use crate::metrics::{CdsMetrics, WEBSOCKET};
use crate::websocket::{Event, FrameReader, ProtocolError, close_frame, ping_frame};
use bytes::Bytes;
use outbox::Outbox;
use prometheus_client::metrics::counter::Counter;
use std::time::{Duration, Instant};

/// Limits and timers of watch connections.
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
    /// How early a Ping may go: a driver that serves many connections on one timer then serves
    /// every connection due about now in one turn (connections that joined within a moment of
    /// each other would each cost a turn).
    pub(crate) fn slack(&self) -> Duration {
        self.ping_interval.min(self.write_timeout) / 16
    }
}

/// Why a watch connection ended, for the log and the metrics.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum End {
    /// The client closed, or its connection broke.
    ClientClosed,
    ShuttingDown,
    /// A frame was not taken within the write timeout.
    TooSlow,
    /// Nothing heard from the client for three Ping intervals.
    Silent,
    Broken(ProtocolError),
}

impl End {
    /// The Close frame the client is sent for this end, if any: none to a client that is gone
    /// or does not read; the code of the client's breach; an empty one at shutdown, as
    /// upstream sends (the client reconnects to a live replica).
    fn farewell(self) -> Option<Bytes> {
        match self {
            End::ClientClosed | End::TooSlow | End::Silent => None,
            End::Broken(error) => Some(close_frame(Some(error.close_code()))),
            End::ShuttingDown => Some(close_frame(None)),
        }
    }

    /// Logs and counts the end of a connection.
    pub(crate) fn record(self, metrics: &CdsMetrics) {
        match self {
            End::TooSlow | End::Silent => {
                metrics.dropped_clients.get_or_create(&WEBSOCKET).inc();
                tracing::info!(reason = ?self, "dropped CDS watch client");
            }
            End::Broken(error) => tracing::debug!(?error, "CDS watch client broke the WebSocket protocol"),
            End::ClientClosed | End::ShuttingDown => {}
        }
    }
}

/// What a frame written whole is counted as, by either driver: a config push is counted and
/// recorded as sent to its client.
pub(crate) struct PushCounters {
    pushes: Counter,
    bytes: Counter,
}

impl PushCounters {
    /// Looked up once per driver: each push then costs two atomic increments.
    pub(crate) fn new(metrics: &CdsMetrics) -> Self {
        PushCounters {
            pushes: metrics.pushes.get_or_create(&WEBSOCKET).clone(),
            bytes: metrics.push_bytes.get_or_create(&WEBSOCKET).clone(),
        }
    }

    pub(crate) fn record(&self, client: &Registration, out: &Out) {
        if let Out::Config(Push { update, .. }) = out {
            client.sent(&update.snapshot);
            self.pushes.inc();
            self.bytes.inc_by(update.frame().len() as u64);
        }
    }
}

/// The status code of the Close that answers a client's Close carrying `code` (`None`: an
/// empty Close), or the protocol error the code is.
///
/// RFC 6455 §5.5.1: a Close is answered with a Close, "typically echoing the status code it
/// received". Not every code may be echoed: §7.4.1 says 1005, 1006 and 1015 "MUST NOT be set
/// as a status code in a Close control frame by an endpoint", and §7.4.2 leaves 0–999 unused
/// and 1000–2999 to the protocol itself, of which only 1000–1003 and 1007–1011 are defined
/// (1012 and 1013 since, in IANA's WebSocket Close Code Number Registry that §11.7 creates);
/// 3000–4999 are for libraries, frameworks and applications. A code outside these a client
/// had no right to send: it broke the protocol, and the answer is §7.4.1's 1002 ("terminating
/// the connection due to a protocol error"), as the Autobahn test suite (cases 7.9.*)
/// expects. These are the codes gorilla/websocket, on which upstream's CDS server runs,
/// accepts (its `isValidReceivedCloseCode`; 1014, registered later, is refused there and so
/// here). An empty Close is answered with an empty Close: its code reads as 1005 (§7.1.5),
/// which may not be sent.
fn close_reply(code: Option<u16>) -> Result<Option<u16>, ProtocolError> {
    match code {
        None => Ok(None),
        Some(code @ (1000..=1003 | 1007..=1013 | 3000..=4999)) => Ok(Some(code)),
        Some(code) => Err(ProtocolError::BadCloseCode(code)),
    }
}

/// What the client's frames read in one go ask of the connection: a flood of Pings is
/// answered once (RFC 6455 §5.5.3 lets earlier Pings go unanswered).
#[derive(Default)]
pub(crate) struct Inbox {
    /// Any frame arrived: the client is alive.
    pub(crate) heard: bool,
    /// The answer to the latest Ping.
    pub(crate) pong: Option<Bytes>,
    /// The client closed, with this status code.
    pub(crate) close: Option<Option<u16>>,
    /// The connection is over (end of stream, an error, a protocol violation).
    pub(crate) end: Option<End>,
}

/// A driver reads at most this many chunks of a client's socket per turn: a client that
/// floods us cannot keep the driver from its other work (the rest is read on a later turn).
pub(crate) const READS_PER_WAKE: usize = 8;

/// What one read of a client's socket brings in.
pub(crate) const READ_CHUNK: usize = 512;

impl Inbox {
    /// Parses `bytes`, the next ones read from the client, into what they ask for; nothing
    /// after a Close or the end.
    pub(crate) fn take(&mut self, reader: &mut FrameReader, mut bytes: &[u8]) {
        while !bytes.is_empty() && !self.is_final() {
            match reader.read(bytes) {
                Ok((used, event)) => {
                    bytes = &bytes[used..];
                    self.heard |= event.is_some();
                    match event {
                        None | Some(Event::Pong | Event::Data) => {}
                        Some(Event::Close(code)) => self.close = Some(code),
                        Some(Event::Ping(pong)) => self.pong = Some(pong),
                    }
                }
                Err(error) => self.end = Some(End::Broken(error)),
            }
        }
    }

    /// Nothing the client sends after this counts: it closed, or the connection is over.
    pub(crate) fn is_final(&self) -> bool {
        self.close.is_some() || self.end.is_some()
    }
}

/// A frame on its way: the driver writes [`Self::rest`] and reports progress with
/// [`Self::advance`], then the whole frame's completion with [`WatchProtocol::on_written`].
pub(crate) struct Transmit {
    out: Out,
    written: usize,
}

impl Transmit {
    fn new(out: Out) -> Self {
        Transmit { out, written: 0 }
    }

    /// What is still to be written.
    pub(crate) fn rest(&self) -> &[u8] {
        &self.out.bytes()[self.written..]
    }

    /// `n` more bytes were written.
    pub(crate) fn advance(&mut self, n: usize) {
        self.written += n;
    }

    /// The frame (for the driver's bookkeeping once it is written).
    pub(crate) fn out(&self) -> &Out {
        &self.out
    }
}

/// Where a connection is in its life.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Phase {
    Open,
    /// Its last frame, a Close, is on its way or waits; nothing else is taken.
    Closing(End),
    /// Done: the driver closes the connection now.
    Over(End),
}

/// One watching connection's protocol state. Small: a fan-out shard holds one per idle
/// watcher.
pub(crate) struct WatchProtocol {
    /// Ping intervals that passed since the client was last heard (a count, not an instant:
    /// 15 bytes less per idle watcher).
    silent_intervals: u8,
    next_ping: Instant,
    /// When the frame handed out last started on its way; `None` when no frame is.
    writing_since: Option<Instant>,
    /// What waits behind that frame.
    waiting: Outbox,
    phase: Phase,
}

impl WatchProtocol {
    /// A connection that opened at `now`.
    pub(crate) fn new(settings: &Settings, now: Instant) -> Self {
        WatchProtocol {
            silent_intervals: 0,
            next_ping: now + settings.ping_interval,
            writing_since: None,
            waiting: Outbox::default(),
            phase: Phase::Open,
        }
    }

    /// The client sent `inbox`: any frame shows it alive, its latest Ping is answered, its
    /// Close answered with a Close ([`close_reply`]), a breach of the protocol answered with
    /// the breach's Close code. Nothing is read once the connection is closing.
    pub(crate) fn on_received(&mut self, inbox: Inbox, now: Instant) -> Option<Transmit> {
        if self.phase != Phase::Open {
            return None;
        }
        if inbox.heard {
            self.silent_intervals = 0;
        }
        let pong = inbox.pong.and_then(|pong| self.send(Out::Pong(pong), now));
        let last = match (inbox.close, inbox.end) {
            (Some(code), _) => match close_reply(code) {
                Ok(echo) => self.close(End::ClientClosed, close_frame(echo), now),
                Err(error) => self.end(End::Broken(error), now),
            },
            (None, Some(end)) => self.end(end, now),
            (None, None) => None,
        };
        // One frame is handed out at a time: with a Pong on its way, the Close waits.
        pong.or(last)
    }

    /// A config version for the client. While a frame is on its way it waits, replacing any
    /// version of the same config that waits (latest wins); a driver asks its watch for
    /// versions only when [`Self::wants_updates`], so it yields the latest once the frame is
    /// out.
    pub(crate) fn on_update(&mut self, push: Push, now: Instant) -> Option<Transmit> {
        match self.phase {
            Phase::Open => self.send(Out::Config(push), now),
            Phase::Closing(_) | Phase::Over(_) => None,
        }
    }

    /// The server shuts down: the client gets an empty Close behind what is on its way.
    pub(crate) fn on_shutdown(&mut self, now: Instant) -> Option<Transmit> {
        match self.phase {
            Phase::Open => self.end(End::ShuttingDown, now),
            Phase::Closing(_) | Phase::Over(_) => None,
        }
    }

    /// The frame handed out last is written whole at `now`: the next one that waits, if any,
    /// is handed out; the connection is over once its Close is out.
    pub(crate) fn on_written(&mut self, now: Instant) -> Option<Transmit> {
        self.writing_since = None;
        if let Some(next) = self.waiting.next() {
            return self.send(next, now);
        }
        if let Phase::Closing(end) = self.phase {
            self.phase = Phase::Over(end);
        }
        None
    }

    /// The connection broke (a write or read failed): it is over, for the reason it was
    /// already ending for, if any.
    pub(crate) fn on_broken(&mut self) {
        self.phase = Phase::Over(match self.phase {
            Phase::Open => End::ClientClosed,
            Phase::Closing(end) | Phase::Over(end) => end,
        });
    }

    /// It is `now`: a frame on its way past the write timeout ends the connection; a Ping is
    /// due every interval (up to [`Settings::slack`] early), unless the client was silent for
    /// the three intervals before, which ends it. A Ping is not sent behind a frame on its way (the write
    /// timeout already watches a client that does not read).
    pub(crate) fn on_timer(&mut self, now: Instant, settings: &Settings) -> Option<Transmit> {
        if self.writing_since.is_some_and(|since| now >= since + settings.write_timeout) {
            self.phase = Phase::Over(match self.phase {
                Phase::Open => End::TooSlow,
                Phase::Closing(end) | Phase::Over(end) => end,
            });
            return None;
        }
        if self.phase != Phase::Open || now + settings.slack() < self.next_ping {
            return None;
        }
        if self.silent_intervals >= 3 {
            self.phase = Phase::Over(End::Silent);
            return None;
        }
        self.silent_intervals += 1;
        self.next_ping = now + settings.ping_interval;
        self.send(Out::Ping(ping_frame(b"keepalive")), now)
    }

    /// When the machine must next be told the time ([`Self::on_timer`]), if it has a timer.
    pub(crate) fn deadline(&self, settings: &Settings) -> Option<Instant> {
        let write = self.writing_since.map(|since| since + settings.write_timeout);
        match self.phase {
            Phase::Open => Some(write.map_or(self.next_ping, |write| write.min(self.next_ping))),
            Phase::Closing(_) => write,
            Phase::Over(_) => None,
        }
    }

    /// Whether the driver should ask its watch for what changed: only while the connection is
    /// open and no frame is on its way, so a client that is behind gets the latest version
    /// once it caught up, never the ones between.
    pub(crate) fn wants_updates(&self) -> bool {
        self.phase == Phase::Open && self.writing_since.is_none()
    }

    /// The connection is over, for this reason: the driver closes it now.
    pub(crate) fn over(&self) -> Option<End> {
        match self.phase {
            Phase::Over(end) => Some(end),
            Phase::Open | Phase::Closing(_) => None,
        }
    }

    /// Whether the connection takes what the client sends and new versions.
    pub(crate) fn is_open(&self) -> bool {
        self.phase == Phase::Open
    }

    /// The bytes that wait behind the frame on its way.
    pub(crate) fn held(&self) -> usize {
        self.waiting.held()
    }

    /// Hands `out` out if no frame is on its way, else keeps it behind that frame.
    fn send(&mut self, out: Out, now: Instant) -> Option<Transmit> {
        if self.writing_since.is_some() {
            self.waiting.keep(out);
            return None;
        }
        self.writing_since = Some(now);
        Some(Transmit::new(out))
    }

    /// Ends the connection for `end`: with its farewell Close, if it has one, else at once.
    fn end(&mut self, end: End, now: Instant) -> Option<Transmit> {
        match end.farewell() {
            Some(farewell) => self.close(end, farewell, now),
            None => {
                self.phase = Phase::Over(end);
                None
            }
        }
    }

    /// Sends the last frame, `farewell`, and takes nothing more.
    fn close(&mut self, end: End, farewell: Bytes, now: Instant) -> Option<Transmit> {
        self.phase = Phase::Closing(end);
        self.send(Out::Close(farewell), now)
    }
}

#[cfg(test)]
mod tests;
