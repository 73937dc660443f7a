//! WebSocket watches on TCP without a task per watcher: a few shard loops (one per core) each
//! own their connections as plain data and write an update's shared, ready-made frame straight
//! to every socket of its scope that can take it.
//!
//! A shard is one task with an epoll instance of its own (mio's), registered with the runtime
//! as one file descriptor. The store tells the shard directly which config ids changed (its
//! [`ChangedIds`] sink: a set of ids and one wake), so a storm of changes wakes the shard once,
//! whatever the number of configs or watchers; a node address change wakes it once through
//! the node table's signal. The shard then does, for each connection whose scope holds a
//! changed id (or that is patched for its node, after a node change), what a
//! [`super::session::Session`] does after its own wake: takes what its [`Watch`] yields and
//! writes it with one non-blocking `write`. Only a socket that would block gets more
//! attention: its frames wait in its [`Outbox`] (a frame, a Pong, a version per config and a
//! Close at most, whatever the client sends meanwhile) until epoll says it is writable, and
//! its watch is not read meanwhile, so it gets the latest version once it drains (latest wins,
//! as with sessions). Reads (Pings, Closes), Pings of our own, write timeouts and shutdown are the
//! same events the session handles, driven by the shard's epoll and one timer for all its
//! connections.
//!
//! Connections of other byte streams (none today; TLS one day) keep the session task.

use super::clients::Registration;
use super::connection::ConnectionPermit;
use super::metrics::{CdsMetrics, WEBSOCKET};
use super::outbox::{Flushed, Out, Outbox, Push, Sent};
use super::session::{End, Inbox, READ_CHUNK, READS_PER_WAKE, Settings};
use super::store::{ChangedIds, ConfigStore, Scope};
use super::watch::{Update, Watch};
use super::websocket::{FrameReader, WebSocketFrame, close_frame, ping_frame};
use bytes::Bytes;
use mio::net::TcpStream;
use mio::{Events, Interest, Poll, Token};
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::gauge::Gauge;
use std::collections::{HashMap, HashSet};
use std::io::{self, Read, Write};
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;
use stunner_gateway::cds::ConfigId;
use tokio::io::unix::AsyncFd;
use tokio::sync::{mpsc, watch};
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;

/// Epoll events taken per wake-up.
const EVENTS_PER_WAKE: usize = 1024;

/// Connections written per turn of a fan-out before the shard lets its worker run other tasks.
const WRITES_PER_TURN: usize = 512;

/// A watch client handed over from its upgraded connection.
pub(super) struct Joining {
    pub(crate) stream: std::net::TcpStream,
    /// What the client sent after its request and the HTTP server already read.
    pub(crate) early: Vec<u8>,
    pub(crate) watch: Watch,
    pub(crate) initial: Vec<Update>,
    pub(crate) client: Registration,
    pub(crate) permit: Option<ConnectionPermit>,
}

impl Joining {
    /// Turns the client away at shutdown with an empty Close frame (best effort: one
    /// non-blocking write, as the server is going, and so is this connection).
    fn refuse(self) {
        let _ = (&self.stream).write(&close_frame(None));
    }
}

/// The shards of the server: where upgraded TCP watch connections go.
pub struct Fanout {
    shards: Vec<mpsc::UnboundedSender<Joining>>,
    next: AtomicUsize,
}

impl Fanout {
    /// One shard per core the process may run on, each a task on `tasks` that ends once
    /// `shutdown` is cancelled and its connections are closed.
    pub(super) fn start(
        store: &ConfigStore,
        settings: Settings,
        shutdown: CancellationToken,
        tasks: &TaskTracker,
    ) -> io::Result<Self> {
        let count = std::thread::available_parallelism().map_or(1, |n| n.get());
        let mut shards = Vec::with_capacity(count);
        for _ in 0..count {
            let (tx, joins) = mpsc::unbounded_channel();
            let shard = Shard::new(store, settings.clone(), shutdown.clone())?;
            tasks.spawn(shard.run(joins));
            shards.push(tx);
        }
        Ok(Fanout { shards, next: AtomicUsize::new(0) })
    }

    /// Hands `joining` to a shard (in turn). A connection that comes after its shard ended
    /// (the server shut down) gets the empty Close frame the shard sends every client then.
    pub(super) fn join(&self, joining: Joining) {
        let at = self.next.fetch_add(1, Ordering::Relaxed) % self.shards.len();
        if let Err(mpsc::error::SendError(late)) = self.shards[at].send(joining) {
            late.refuse();
        }
    }
}

/// The scope a group of a shard's connections follow, and whether it is patched per node
/// (then node address changes concern it too).
#[derive(Clone, PartialEq, Eq, Hash)]
struct GroupKey {
    scope: Scope,
    per_node: bool,
}

/// A shard's connections of one scope.
struct Group {
    key: GroupKey,
    members: Vec<usize>,
}

/// One watch client, as plain data.
struct Conn {
    socket: TcpStream,
    watch: Watch,
    /// The connection's group, by its index in the shard's groups.
    group: usize,
    /// Where this connection is in its group's members.
    member_at: usize,
    client: Registration,
    reader: FrameReader,
    last_heard: Instant,
    next_ping: Instant,
    outbox: Outbox,
    /// The socket may have more to read than was read at its last readable event.
    unread: bool,
    /// Set once the connection is over: it goes when its outbox is empty (its Close sent).
    leaving: Option<End>,
    _permit: Option<ConnectionPermit>,
}

/// What a frame that went out whole is counted as.
struct PushCounters {
    pushes: Counter,
    bytes: Counter,
}

impl PushCounters {
    /// Bookkeeping of a frame that went out whole: a config push is counted and recorded as
    /// sent to its client.
    fn record(&self, client: &Registration, out: &Out) {
        if let Out::Config(Push { update, .. }) = out {
            client.sent(&update.snapshot);
            self.pushes.inc();
            self.bytes.inc_by(update.frame().len() as u64);
        }
    }
}

struct Shard {
    poll: AsyncFd<Poll>,
    /// The ids the store changed since the shard last looked, and its wake for them.
    changes: Arc<ChangedIds>,
    /// Fires when any node's address changes: every per-node group is then due.
    nodes: watch::Receiver<()>,
    state: State,
}

/// A shard's connections and what it needs to serve them.
struct State {
    settings: Settings,
    metrics: CdsMetrics,
    counters: PushCounters,
    /// The bytes every outbox of the shard holds, in the process-wide gauge.
    outbox_bytes: Gauge,
    shutdown: CancellationToken,
    closing: bool,
    conns: Vec<Option<Conn>>,
    free: Vec<usize>,
    /// Groups by index (a connection's group is an index), and their index by key.
    groups: Vec<Option<Group>>,
    free_groups: Vec<usize>,
    group_at: HashMap<GroupKey, usize>,
    /// The groups of a namespace or of all configs: a changed id is matched against each.
    broad_groups: Vec<usize>,
    /// Connections with more to read (see [`Conn::unread`]).
    unread: Vec<usize>,
    /// The earliest deadline (a Ping, a write timeout) of any connection, or later.
    wake_at: Instant,
    /// Reused buffers: a fan-out allocates nothing.
    updates: Vec<Update>,
    /// The connections of the groups due in this fan-out.
    members: Vec<usize>,
    /// The ids taken from the store's sink, emptied by each fan-out.
    changed: HashSet<ConfigId>,
}

/// What woke a shard.
enum Wake {
    Shutdown,
    Changed,
    Nodes,
    /// Boxed: a wake-up is mostly one of the small ones.
    Join(Box<Joining>),
    Io,
    Timer,
    Unread,
}

impl Shard {
    /// A shard of `store`'s watches, told of its changes from now on.
    fn new(store: &ConfigStore, settings: Settings, shutdown: CancellationToken) -> io::Result<Self> {
        let poll = Poll::new()?;
        // SAFETY: the epoll descriptor is the `Poll`'s own, open from its creation to its
        // drop, and the `AsyncFd` owns the `Poll`, so it is valid for the `AsyncFd`'s lifetime
        // and `as_raw_fd` always returns it.
        #[allow(unsafe_code)]
        let poll =
            unsafe { AsyncFd::register_with_interest(poll, tokio::io::Interest::READABLE) }.map_err(io::Error::from)?;
        let metrics = store.metrics.clone();
        let counters = PushCounters {
            pushes: metrics.pushes.get_or_create(&WEBSOCKET).clone(),
            bytes: metrics.push_bytes.get_or_create(&WEBSOCKET).clone(),
        };
        let state = State {
            counters,
            outbox_bytes: metrics.outbox_bytes.clone(),
            metrics,
            wake_at: Instant::now() + settings.ping_interval,
            settings,
            shutdown,
            closing: false,
            conns: Vec::new(),
            free: Vec::new(),
            groups: Vec::new(),
            free_groups: Vec::new(),
            group_at: HashMap::new(),
            broad_groups: Vec::new(),
            unread: Vec::new(),
            updates: Vec::new(),
            members: Vec::new(),
            changed: HashSet::new(),
        };
        // Both before any connection joins: a change after a watch's subscription is seen.
        let changes = store.register_sink();
        let nodes = store.nodes.subscribe();
        Ok(Shard { poll, changes, nodes, state })
    }

    async fn run(self, mut joins: mpsc::UnboundedReceiver<Joining>) {
        let Shard { mut poll, changes, mut nodes, mut state } = self;
        let mut events = Events::with_capacity(EVENTS_PER_WAKE);
        let shutdown = state.shutdown.clone();
        while !(state.closing && state.is_empty()) {
            let wake = tokio::select! {
                biased;
                _ = shutdown.cancelled(), if !state.closing => Wake::Shutdown,
                // Before the busy branches, which must not starve Pings and write timeouts
                // (a turn of the timer sets its next deadline ahead: it cannot starve them).
                _ = tokio::time::sleep_until(state.wake_at) => Wake::Timer,
                () = changes.changed() => Wake::Changed,
                Ok(()) = nodes.changed() => Wake::Nodes,
                Some(joining) = joins.recv() => Wake::Join(Box::new(joining)),
                ready = poll.readable_mut() => {
                    let mut ready = match ready {
                        Ok(ready) => ready,
                        Err(error) => {
                            tracing::error!(%error, "CDS fan-out cannot wait for its sockets");
                            return;
                        }
                    };
                    let polled = ready.get_inner_mut().poll(&mut events, Some(Duration::ZERO));
                    // Edge-triggered: ready again only once every event was taken.
                    if polled.is_err() || events.iter().count() < EVENTS_PER_WAKE {
                        ready.clear_ready();
                    }
                    Wake::Io
                }
                _ = std::future::ready(()), if !state.unread.is_empty() => Wake::Unread,
            };
            match wake {
                Wake::Shutdown => state.close_all(),
                Wake::Changed => state.fan_out_changes(&changes).await,
                Wake::Nodes => state.fan_out_per_node().await,
                Wake::Join(joining) => state.join(poll.get_ref(), *joining),
                Wake::Io => {
                    for event in events.iter() {
                        let writable = event.is_writable() || event.is_write_closed() || event.is_error();
                        let readable = event.is_readable() || event.is_read_closed() || event.is_error();
                        state.on_ready(event.token().0, readable, writable);
                    }
                }
                Wake::Timer => state.on_timer(),
                Wake::Unread => {
                    for slot in std::mem::take(&mut state.unread) {
                        state.read(slot);
                    }
                    tokio::task::yield_now().await;
                }
            }
        }
        // Connections handed over while the last ones left are turned away, not dropped.
        joins.close();
        while let Ok(late) = joins.try_recv() {
            late.refuse();
        }
    }
}

impl State {
    fn is_empty(&self) -> bool {
        self.conns.len() == self.free.len()
    }

    fn lower_wake(&mut self, at: Instant) {
        self.wake_at = self.wake_at.min(at);
    }

    /// Takes a connection in: answers what came with its request, sends its initial configs.
    fn join(&mut self, poll: &Poll, joining: Joining) {
        if self.closing {
            return joining.refuse();
        }
        let Joining { stream, early, watch, initial, client, permit } = joining;
        let mut socket = TcpStream::from_std(stream);
        let slot = self.free.pop().unwrap_or_else(|| {
            self.conns.push(None);
            self.conns.len() - 1
        });
        if let Err(error) = poll.registry().register(&mut socket, Token(slot), Interest::READABLE | Interest::WRITABLE)
        {
            tracing::debug!(%error, "CDS fan-out cannot follow a watch connection");
            self.free.push(slot);
            return;
        }
        let group = self.group_of(GroupKey { scope: watch.scope(), per_node: watch.has_node() });
        let members = &mut self.groups[group].as_mut().expect("a live group").members;
        let member_at = members.len();
        members.push(slot);
        let now = Instant::now();
        let next_ping = now + self.settings.ping_interval;
        self.conns[slot] = Some(Conn {
            socket,
            watch,
            group,
            member_at,
            client,
            reader: FrameReader::new(self.settings.max_client_message),
            last_heard: now,
            next_ping,
            outbox: Outbox::default(),
            unread: false,
            leaving: None,
            _permit: permit,
        });
        self.lower_wake(next_ping);
        // What came along with the request is answered before the first config goes out.
        if !early.is_empty() {
            let mut inbox = Inbox::default();
            inbox.take(&mut self.conns[slot].as_mut().expect("just placed").reader, &early);
            self.answer(slot, inbox);
        }
        for update in initial {
            if !self.is_open(slot) {
                return;
            }
            let frame = update.snapshot.encoded::<WebSocketFrame>(&update.variant);
            self.send(slot, Out::Config(Push { frame, update }));
        }
        // A change stored after the watch's subscription, which the shard may have been told
        // of before the connection was here, is not missed.
        self.push_due(slot);
    }

    /// A connection in `slot` that is not leaving.
    fn is_open(&self, slot: usize) -> bool {
        self.conns[slot].as_ref().is_some_and(|c| c.leaving.is_none())
    }

    /// The index of the group of `key`, made if there is none.
    fn group_of(&mut self, key: GroupKey) -> usize {
        if let Some(&at) = self.group_at.get(&key) {
            return at;
        }
        let at = self.free_groups.pop().unwrap_or_else(|| {
            self.groups.push(None);
            self.groups.len() - 1
        });
        if !matches!(key.scope, Scope::Config(_)) {
            self.broad_groups.push(at);
        }
        self.group_at.insert(key.clone(), at);
        self.groups[at] = Some(Group { key, members: Vec::new() });
        at
    }

    /// Sends what is due to every connection whose scope holds a config that changed since the
    /// last look: each group at most once, however many of its ids changed.
    async fn fan_out_changes(&mut self, changes: &ChangedIds) {
        let mut ids = std::mem::take(&mut self.changed);
        changes.take(&mut ids);
        for &at in &self.broad_groups {
            let group = self.groups[at].as_ref().expect("a live group");
            if ids.iter().any(|id| group.key.scope.matches(id)) {
                self.members.extend_from_slice(&group.members);
            }
        }
        for id in ids.drain() {
            // The id moves into the keys it is looked up by: a look-up clones nothing.
            let mut key = GroupKey { scope: Scope::Config(id), per_node: false };
            for per_node in [false, true] {
                key.per_node = per_node;
                if let Some(&at) = self.group_at.get(&key) {
                    self.members.extend_from_slice(&self.groups[at].as_ref().expect("a live group").members);
                }
            }
        }
        self.changed = ids;
        self.fan_out().await;
    }

    /// Sends what is due to every connection patched for its node, after a node's address
    /// changed (the watch sends only what the change altered).
    async fn fan_out_per_node(&mut self) {
        for group in self.groups.iter().flatten().filter(|g| g.key.per_node) {
            self.members.extend_from_slice(&group.members);
        }
        self.fan_out().await;
    }

    /// Sends every connection queued in `members` what its watch has for it now, if it can
    /// take it, letting the worker run other tasks every [`WRITES_PER_TURN`] connections.
    async fn fan_out(&mut self) {
        let mut members = std::mem::take(&mut self.members);
        for (i, slot) in members.iter().enumerate() {
            if i > 0 && i % WRITES_PER_TURN == 0 {
                tokio::task::yield_now().await;
            }
            self.push_due(*slot);
        }
        members.clear();
        self.members = members;
    }

    /// Sends the connection in `slot` what its watch has for it now, unless it is waiting to
    /// write (it catches up, with the latest, once it can) or leaving.
    fn push_due(&mut self, slot: usize) {
        let Some(conn) = self.conns.get_mut(slot).and_then(Option::as_mut) else { return };
        if self.closing || conn.leaving.is_some() || !conn.outbox.is_empty() {
            return;
        }
        let mut updates = std::mem::take(&mut self.updates);
        match conn.watch.poll_updates(&mut updates) {
            Ok(_) => {
                for update in updates.drain(..) {
                    if !self.is_open(slot) {
                        break;
                    }
                    let frame = update.snapshot.encoded::<WebSocketFrame>(&update.variant);
                    self.send(slot, Out::Config(Push { frame, update }));
                }
            }
            Err(_) => self.leave(slot, End::ShuttingDown, None),
        }
        updates.clear();
        self.updates = updates;
    }

    /// Writes `out` to the connection in `slot` now if it has nothing waiting and takes it,
    /// else keeps it behind what waits (see [`Outbox`]).
    fn send(&mut self, slot: usize, out: Out) {
        let Some(conn) = self.conns[slot].as_mut() else { return };
        let before = conn.outbox.held();
        let sent = conn.outbox.send(out, &conn.socket);
        self.outbox_bytes.inc_by(conn.outbox.held() as i64 - before as i64);
        match sent {
            Sent::Whole(out) => self.counters.record(&conn.client, &out),
            Sent::Started(since) => self.lower_wake(since + self.settings.write_timeout),
            Sent::Kept => {}
            Sent::Broken => self.remove(slot, End::ClientClosed),
        }
    }

    /// Writes what waits in the outbox of `slot` as far as the socket takes it.
    fn flush(&mut self, slot: usize) -> Flushed {
        let Some(conn) = self.conns[slot].as_mut() else { return Flushed::Broken };
        let before = conn.outbox.held();
        let counters = &self.counters;
        let flushed = conn.outbox.flush(&conn.socket, |out| counters.record(&conn.client, &out));
        self.outbox_bytes.inc_by(conn.outbox.held() as i64 - before as i64);
        flushed
    }

    /// A readiness event for the connection in `slot`.
    fn on_ready(&mut self, slot: usize, readable: bool, writable: bool) {
        let Some(conn) = self.conns.get(slot).and_then(Option::as_ref) else { return };
        if writable && !conn.outbox.is_empty() {
            match self.flush(slot) {
                Flushed::Blocked => {}
                Flushed::Broken => return self.remove(slot, End::ClientClosed),
                Flushed::All => match self.conns[slot].as_ref().and_then(|c| c.leaving.as_ref()) {
                    Some(_) => return self.remove_left(slot),
                    // Caught up: the latest of what changed meanwhile.
                    None => self.push_due(slot),
                },
            }
        }
        if readable && self.is_open(slot) {
            self.read(slot);
        }
    }

    /// Reads what the client of `slot` sent and acts on it.
    fn read(&mut self, slot: usize) {
        let Some(conn) = self.conns.get_mut(slot).and_then(Option::as_mut) else { return };
        if conn.leaving.is_some() {
            return;
        }
        conn.unread = false;
        let mut inbox = Inbox::default();
        let mut chunk = [0u8; READ_CHUNK];
        let mut drained = false;
        for _ in 0..READS_PER_WAKE {
            match (&conn.socket).read(&mut chunk) {
                Ok(0) => inbox.end = Some(End::ClientClosed),
                Ok(n) => inbox.take(&mut conn.reader, &chunk[..n]),
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => {
                    drained = true;
                    break;
                }
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(_) => inbox.end = Some(End::ClientClosed),
            }
            if inbox.close.is_some() || inbox.end.is_some() {
                drained = true;
                break;
            }
        }
        if !drained {
            // A flood: the rest on a later turn, after the other connections.
            conn.unread = true;
            self.unread.push(slot);
        }
        self.answer(slot, inbox);
    }

    /// Acts on what the client sent: answers its last Ping, echoes its Close.
    fn answer(&mut self, slot: usize, inbox: Inbox) {
        let Some(conn) = self.conns[slot].as_mut() else { return };
        if inbox.heard {
            conn.last_heard = Instant::now();
        }
        if let Some(pong) = inbox.pong {
            self.send(slot, Out::Pong(pong));
        }
        if let Some(code) = inbox.close {
            self.leave(slot, End::ClientClosed, Some(close_frame(code)));
        } else if let Some(end) = inbox.end {
            self.leave(slot, end, None);
        }
    }

    /// Ends the connection in `slot` for `end`: it goes once `farewell` (or the Close frame
    /// `end` calls for) is written, or at once when there is none.
    fn leave(&mut self, slot: usize, end: End, farewell: Option<Bytes>) {
        if !self.is_open(slot) {
            return;
        }
        let farewell = farewell.or_else(|| end.goodbye(&self.metrics));
        let Some(farewell) = farewell else { return self.remove_left(slot) };
        self.send(slot, Out::Close(farewell));
        if let Some(conn) = self.conns[slot].as_mut() {
            conn.leaving = Some(end);
            if conn.outbox.is_empty() {
                self.remove_left(slot);
            }
        }
    }

    /// Removes a connection whose end was already logged and counted (or needs neither).
    fn remove_left(&mut self, slot: usize) {
        self.remove(slot, End::ClientClosed);
    }

    /// Removes the connection in `slot` (closing its socket) for `end`, which is logged and
    /// counted as a session's end is.
    fn remove(&mut self, slot: usize, end: End) {
        let Some(conn) = self.conns[slot].take() else { return };
        self.outbox_bytes.dec_by(conn.outbox.held() as i64);
        if !matches!(end, End::ClientClosed) {
            end.goodbye(&self.metrics);
        }
        self.free.push(slot);
        let group = self.groups[conn.group].as_mut().expect("a connection's group");
        group.members.swap_remove(conn.member_at);
        match group.members.get(conn.member_at) {
            Some(&moved) => self.conns[moved].as_mut().expect("a member").member_at = conn.member_at,
            None if group.members.is_empty() => {
                let group = self.groups[conn.group].take().expect("the group");
                self.group_at.remove(&group.key);
                self.broad_groups.retain(|&at| at != conn.group);
                self.free_groups.push(conn.group);
            }
            None => {}
        }
        // Dropping the socket closes it, which also takes it out of the shard's epoll.
    }

    /// Pings that are due, clients silent for too long, writes past their timeout.
    fn on_timer(&mut self) {
        let now = Instant::now();
        let interval = self.settings.ping_interval;
        // Pings up to this much early, so one turn serves every connection due about now
        // (connections that joined within a moment of each other would each cost a turn).
        let slack = interval.min(self.settings.write_timeout) / 16;
        let mut next = now + interval;
        for slot in 0..self.conns.len() {
            let Some(conn) = self.conns[slot].as_mut() else { continue };
            let leaving = conn.leaving.is_some();
            if conn.outbox.waiting_since().is_some_and(|since| now >= since + self.settings.write_timeout) {
                match leaving {
                    true => self.remove_left(slot),
                    false => self.remove(slot, End::TooSlow),
                }
                continue;
            }
            if !leaving && now + slack >= conn.next_ping {
                if now.duration_since(conn.last_heard) >= interval * 3 {
                    self.remove(slot, End::Silent);
                    continue;
                }
                conn.next_ping = now + interval;
                self.send(slot, Out::Ping(ping_frame(b"keepalive")));
            }
            if let Some(conn) = self.conns[slot].as_ref() {
                next = next.min(conn.next_ping);
                if let Some(since) = conn.outbox.waiting_since() {
                    next = next.min(since + self.settings.write_timeout);
                }
            }
        }
        self.wake_at = next.max(now + slack);
    }

    /// Shutdown: every connection gets an empty Close frame, as upstream sends (its client
    /// reconnects to a live replica), and goes once it is written or times out.
    fn close_all(&mut self) {
        for slot in 0..self.conns.len() {
            self.leave(slot, End::ShuttingDown, None);
        }
        self.closing = true;
    }
}

#[cfg(test)]
mod tests {
    use std::mem::size_of;

    /// An idle watcher is a `Conn` in its shard's table and a `Client` in the client table
    /// (jemalloc's 320-byte size class): with its ids and the tables' slots, under the 1 KiB
    /// per idle watcher BENCHMARKS.md's fan-out table shows (issue #48). A field added to
    /// either is paid 10,000 times over.
    #[test]
    fn an_idle_watcher_keeps_its_state_within_budget() {
        assert!(size_of::<super::Conn>() <= 320, "a Conn is {} bytes", size_of::<super::Conn>());
        let client = size_of::<crate::clients::Client>();
        assert!(client <= 320, "a Client is {client} bytes");
    }
}
