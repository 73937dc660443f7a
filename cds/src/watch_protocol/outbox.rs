//! What a watching connection keeps behind the frame on its way to its client, bounded by
//! construction.
//!
//! A frame goes straight to its socket whenever nothing else is on its way; only while one is
//! (a socket that would block, or a write still running) do the others wait here. What waits is
//! fields, not a queue, because a client decides how often the server answers it: it sends
//! Pings as fast as it likes, and each read that sees one makes a Pong. So a Pong replaces the
//! one that waits (RFC 6455 §5.5.3 lets earlier Pings go unanswered); a config replaces a
//! waiting version of the same config (latest wins); a keepalive Ping of ours does not wait
//! (the write timeout already watches a client that does not read); and a Close goes last. A
//! client that pings continuously and reads now and then, just fast enough to dodge the write
//! timeout, holds no more here than any slow client: a Pong and its configs.

use crate::watch::Update;
use bytes::Bytes;
use std::collections::BTreeMap;
use stunner_gateway::cds::ConfigId;

/// A config version, encoded for one connection.
pub(crate) struct Push {
    pub(crate) frame: Bytes,
    pub(crate) update: Update,
}

/// A frame for one connection.
pub(crate) enum Out {
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
    pub(crate) fn bytes(&self) -> &[u8] {
        match self {
            Out::Config(push) => &push.frame,
            Out::Pong(frame) | Out::Ping(frame) | Out::Close(frame) => frame,
        }
    }
}

/// Frames waiting behind the one on its way. Empty nearly always, and then it holds nothing
/// but a null pointer (an idle watcher's memory is what a shard's connections cost).
#[derive(Default)]
pub(super) struct Outbox(Option<Box<Waiting>>);

/// What waits, each kind in its place; written in this order.
#[derive(Default)]
struct Waiting {
    pong: Option<Bytes>,
    /// At most one version per config (the client's scope may hold several configs).
    configs: BTreeMap<ConfigId, Push>,
    close: Option<Bytes>,
}

impl Outbox {
    /// Keeps `out` in the place of its kind, replacing what waits there (a Ping: not kept).
    pub(super) fn keep(&mut self, out: Out) {
        let waiting = self.0.get_or_insert_with(Box::default);
        match out {
            Out::Config(push) => {
                waiting.configs.insert(push.update.snapshot.id.clone(), push);
            }
            Out::Pong(pong) => waiting.pong = Some(pong),
            Out::Ping(_) => {}
            Out::Close(close) => waiting.close = Some(close),
        }
    }

    /// The frame to write next: the Pong first (the client waits for it: stunnerd gives up
    /// 8 s after its Ping), then the configs, then the Close. Once nothing is left the outbox
    /// holds nothing.
    pub(super) fn next(&mut self) -> Option<Out> {
        let waiting = self.0.as_mut()?;
        let next = match waiting.pong.take() {
            Some(pong) => Some(Out::Pong(pong)),
            None => match waiting.configs.pop_first() {
                Some((_, push)) => Some(Out::Config(push)),
                None => waiting.close.take().map(Out::Close),
            },
        };
        if waiting.pong.is_none() && waiting.configs.is_empty() && waiting.close.is_none() {
            self.0 = None;
        }
        next
    }

    /// The bytes that wait (config frames are shared with the store and every other client of
    /// the version: they count here all the same).
    pub(super) fn held(&self) -> usize {
        self.0.as_ref().map_or(0, |w| {
            w.pong.as_ref().map_or(0, Bytes::len)
                + w.configs.values().map(|push| push.frame.len()).sum::<usize>()
                + w.close.as_ref().map_or(0, Bytes::len)
        })
    }
}
