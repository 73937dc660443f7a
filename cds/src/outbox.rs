//! What a WebSocket watch connection could not write at once: the frame on its way, and at
//! most one frame of each kind behind it, bounded by construction.
//!
//! A fan-out shard ([`super::fanout`]) writes each frame straight to its socket; only a socket
//! that would block leaves the rest of a frame here, and whatever the connection is sent
//! meanwhile waits behind it. What waits is fields, not a queue, because a client decides how
//! often the server answers it: it sends Pings as fast as it likes, and each read that sees
//! one makes a Pong. So a Pong replaces the one that waits (RFC 6455 §5.5.3 lets earlier
//! Pings go unanswered); a config replaces a waiting version of the same config (latest wins;
//! the watch is not even read while a frame waits, so it yields the latest once the socket
//! drains); a keepalive Ping of ours is not sent behind a blocked write (the write timeout
//! already watches a client that does not read); and nothing is taken after a Close. A client
//! that pings continuously and reads now and then, just fast enough to dodge the write
//! timeout, holds no more here than any slow client: a frame, a Pong and its configs.

use super::watch::Update;
use bytes::Bytes;
use std::collections::BTreeMap;
use std::io::{self, Write};
use stunner_gateway::cds::ConfigId;
use tokio::time::Instant;

/// A config version, encoded for one connection.
pub(super) struct Push {
    pub(super) frame: Bytes,
    pub(super) update: Update,
}

/// A frame for one connection.
pub(super) enum Out {
    /// A config version: recorded as sent to its client once written whole.
    Config(Push),
    /// The answer to the client's latest Ping.
    Pong(Bytes),
    /// A keepalive Ping of ours.
    Ping(Bytes),
    /// The connection's last frame.
    Close(Bytes),
}

impl Out {
    pub(super) fn bytes(&self) -> &[u8] {
        match self {
            Out::Config(push) => &push.frame,
            Out::Pong(frame) | Out::Ping(frame) | Out::Close(frame) => frame,
        }
    }
}

/// How [`Outbox::send`] went.
pub(super) enum Sent {
    /// Written whole, at once.
    Whole(Out),
    /// Written in part: the rest waits in front from this instant (its write timeout runs from
    /// there).
    Started(Instant),
    /// Kept behind the frame that waits (a Ping of ours: dropped).
    Kept,
    /// The connection is broken.
    Broken,
}

/// How one attempt to write what waits ended.
pub(super) enum Flushed {
    All,
    Blocked,
    Broken,
}

/// Frames a connection could not take at once. Empty nearly always, and then it holds
/// nothing but a null pointer (an idle watcher's memory is what a shard's connections cost).
#[derive(Default)]
pub(super) struct Outbox(Option<Box<Waiting>>);

/// What waits: the front frame, partly written, then each of the others in this order.
struct Waiting {
    front: Out,
    /// The bytes of `front` already written.
    written: usize,
    /// When `front` started to wait: the write timeout runs from here.
    since: Instant,
    pong: Option<Bytes>,
    /// At most one version per config (the client's scope may hold several configs).
    configs: BTreeMap<ConfigId, Push>,
    close: Option<Bytes>,
}

impl Waiting {
    /// Keeps `out` for after the front frame, in the place of its kind.
    fn keep(&mut self, out: Out) {
        if self.close.is_some() {
            return; // nothing follows a Close
        }
        match out {
            Out::Config(push) => {
                self.configs.insert(push.update.snapshot.id.clone(), push);
            }
            Out::Pong(pong) => self.pong = Some(pong),
            Out::Ping(_) => {}
            Out::Close(close) => self.close = Some(close),
        }
    }

    /// The frame to write after the front one: the Pong first (the client waits for it:
    /// stunnerd gives up 8 s after its Ping), then the configs, then the Close.
    fn next(&mut self) -> Option<Out> {
        if let Some(pong) = self.pong.take() {
            return Some(Out::Pong(pong));
        }
        if let Some((_, push)) = self.configs.pop_first() {
            return Some(Out::Config(push));
        }
        self.close.take().map(Out::Close)
    }

    fn held(&self) -> usize {
        let behind = self.pong.as_ref().map_or(0, Bytes::len)
            + self.configs.values().map(|push| push.frame.len()).sum::<usize>()
            + self.close.as_ref().map_or(0, Bytes::len);
        self.front.bytes().len() - self.written + behind
    }
}

impl Outbox {
    pub(super) fn is_empty(&self) -> bool {
        self.0.is_none()
    }

    /// When the frame in front started to wait, if one does.
    pub(super) fn waiting_since(&self) -> Option<Instant> {
        self.0.as_ref().map(|w| w.since)
    }

    /// The bytes that wait to be written (config frames are shared with the store and every
    /// other client of the version: they count here all the same).
    pub(super) fn held(&self) -> usize {
        self.0.as_ref().map_or(0, |w| w.held())
    }

    /// Writes `out` to `socket` now, as much of it as the socket takes, if nothing waits; else
    /// keeps it behind what waits.
    pub(super) fn send(&mut self, out: Out, socket: impl Write) -> Sent {
        if let Some(waiting) = self.0.as_mut() {
            waiting.keep(out);
            return Sent::Kept;
        }
        match write_some(socket, out.bytes()) {
            None => Sent::Broken,
            Some(written) if written == out.bytes().len() => Sent::Whole(out),
            Some(written) => {
                let since = Instant::now();
                let waiting = Waiting { front: out, written, since, pong: None, configs: BTreeMap::new(), close: None };
                self.0 = Some(Box::new(waiting));
                Sent::Started(since)
            }
        }
    }

    /// Writes what waits as far as `socket` takes it, handing each frame written whole to
    /// `written`; each next frame's write timeout starts when the one before it is out.
    pub(super) fn flush(&mut self, mut socket: impl Write, mut written: impl FnMut(Out)) -> Flushed {
        loop {
            let Some(waiting) = self.0.as_mut() else { return Flushed::All };
            let rest = &waiting.front.bytes()[waiting.written..];
            let Some(took) = write_some(&mut socket, rest) else { return Flushed::Broken };
            if took < rest.len() {
                waiting.written += took;
                return Flushed::Blocked;
            }
            let done = match waiting.next() {
                Some(next) => {
                    waiting.written = 0;
                    waiting.since = Instant::now();
                    std::mem::replace(&mut waiting.front, next)
                }
                // Nothing waits: hold nothing.
                None => self.0.take().expect("a waiting outbox").front,
            };
            written(done);
        }
    }
}

/// Writes as much of `bytes` as the socket takes now: all of it, the count written before it
/// would block, or `None` when the connection is broken.
fn write_some(mut socket: impl Write, bytes: &[u8]) -> Option<usize> {
    let mut written = 0;
    while written < bytes.len() {
        match socket.write(&bytes[written..]) {
            Ok(0) => return None,
            Ok(n) => written += n,
            Err(e) if e.kind() == io::ErrorKind::WouldBlock => break,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(_) => return None,
        }
    }
    Some(written)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::metrics::CdsMetrics;
    use crate::store::{ConfigStore, Scope};
    use crate::watch::{Held, Watch};
    use crate::websocket::{WebSocketFrame, close_frame, ping_frame, text_frame};
    use std::sync::Arc;
    use stunner_gateway::config::StunnerConfig;

    /// A socket that takes `room` more bytes, then would block.
    struct Socket {
        got: Vec<u8>,
        room: usize,
    }

    impl Write for &mut Socket {
        fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
            if self.room == 0 {
                return Err(io::ErrorKind::WouldBlock.into());
            }
            let n = buf.len().min(self.room);
            self.got.extend_from_slice(&buf[..n]);
            self.room -= n;
            Ok(n)
        }

        fn flush(&mut self) -> io::Result<()> {
            Ok(())
        }
    }

    /// Config `ns/<name>` at a version named by `realm`, padded to about `size` bytes, as a
    /// push.
    fn push(store: &Arc<ConfigStore>, name: &str, realm: &str, size: usize) -> Push {
        let mut config = StunnerConfig::zero(&format!("ns/{name}"));
        config.auth.realm = realm.into();
        config.auth.credentials.insert("padding".into(), "x".repeat(size));
        store.upsert(config);
        let id = ConfigId::new("ns", name);
        let (_, mut initial) = Watch::resume(store.clone(), Scope::Config(id), None, &Held::new());
        let update = initial.pop().expect("the stored version");
        Push { frame: update.snapshot.encoded::<WebSocketFrame>(&update.variant), update }
    }

    /// The Pong answering a client's Ping of the most a control frame carries (125 bytes),
    /// numbered `i`.
    fn pong(i: u32) -> Bytes {
        let mut frame = vec![0x8a, 125];
        frame.extend_from_slice(format!("{i:0125}").as_bytes());
        Bytes::from(frame)
    }

    /// However many Pongs, Pings and config versions come while a frame waits, the outbox
    /// holds that frame's rest, the last Pong, the last version of each config and a Close:
    /// written in that order once the socket drains.
    #[test]
    fn what_waits_is_bounded_whatever_is_sent_meanwhile() {
        let store = Arc::new(ConfigStore::new(CdsMetrics::default()));
        let mut socket = Socket { got: Vec::new(), room: 100 };
        let mut outbox = Outbox::default();
        let first = push(&store, "gw", "r1", 1000);
        let first_frame = first.frame.clone();
        assert!(matches!(outbox.send(Out::Config(first), &mut socket), Sent::Started(_)));
        let front = first_frame.len() - 100;
        assert_eq!(outbox.held(), front);

        // A client that pings on and on: one Pong waits, the latest.
        for i in 0..10_000 {
            assert!(matches!(outbox.send(Out::Pong(pong(i)), &mut socket), Sent::Kept));
            assert_eq!(outbox.held(), front + 127, "after {i} Pongs");
        }
        outbox.send(Out::Ping(ping_frame(b"keepalive")), &mut socket);
        assert_eq!(outbox.held(), front + 127, "no Ping of ours behind a blocked write");
        // Versions of one config: the latest waits; another config waits beside it.
        let _older = outbox.send(Out::Config(push(&store, "gw", "r2", 500)), &mut socket);
        let latest = push(&store, "gw", "r3", 500);
        let other = push(&store, "other", "o1", 10);
        let (latest_frame, other_frame) = (latest.frame.clone(), other.frame.clone());
        outbox.send(Out::Config(latest), &mut socket);
        outbox.send(Out::Config(other), &mut socket);
        assert_eq!(outbox.held(), front + 127 + latest_frame.len() + other_frame.len());
        outbox.send(Out::Close(close_frame(None)), &mut socket);
        outbox.send(Out::Pong(pong(10_001)), &mut socket);
        let held = front + 127 + latest_frame.len() + other_frame.len() + 2;
        assert_eq!(outbox.held(), held, "nothing is taken after a Close");

        socket.room = usize::MAX;
        let mut written = Vec::new();
        assert!(matches!(outbox.flush(&mut socket, |out| written.push(out)), Flushed::All));
        assert!(outbox.is_empty());
        assert_eq!(outbox.held(), 0);
        let kinds: Vec<_> = written
            .iter()
            .map(|out| match out {
                Out::Config(push) => push.update.snapshot.config.auth.realm.clone(),
                Out::Pong(_) => "pong".into(),
                Out::Ping(_) => "ping".into(),
                Out::Close(_) => "close".into(),
            })
            .collect();
        assert_eq!(kinds, ["r1", "pong", "r3", "o1", "close"]);
        let expected = [&first_frame[..], &pong(9_999), &latest_frame, &other_frame, &close_frame(None)].concat();
        assert_eq!(socket.got, expected, "the first frame whole, then each of the others whole");
    }

    /// A frame written whole leaves nothing; one written in part waits, with its write timeout
    /// starting over for each next frame.
    #[test]
    fn a_frame_waits_only_when_the_socket_would_block() {
        let mut socket = Socket { got: Vec::new(), room: 1000 };
        let mut outbox = Outbox::default();
        let frame = text_frame(b"{}");
        assert!(matches!(outbox.send(Out::Pong(frame.clone()), &mut socket), Sent::Whole(_)));
        assert!(outbox.is_empty() && outbox.waiting_since().is_none());
        socket.room = 1;
        let Sent::Started(since) = outbox.send(Out::Pong(frame.clone()), &mut socket) else { panic!("waits") };
        assert_eq!(outbox.waiting_since(), Some(since));
        outbox.send(Out::Close(close_frame(None)), &mut socket);
        socket.room = frame.len() - 1;
        assert!(matches!(outbox.flush(&mut socket, |_| {}), Flushed::Blocked));
        assert!(outbox.waiting_since().is_some_and(|at| at >= since), "the Close's own wait");
        assert_eq!(outbox.held(), 2);
    }
}
