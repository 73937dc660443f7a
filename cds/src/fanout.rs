//! WebSocket watches on TCP without a task per watcher: a few shard loops (one per core) each
//! own their connections as plain data and write an update's shared, ready-made frame straight
//! to every socket of its scope that can take it.
//!
//! A shard is one task with an epoll instance of its own (mio's), registered with the runtime
//! as one file descriptor. The store tells the shard directly which config ids changed (its
//! [`ChangedIds`] sink: a set of ids and one wake), so a storm of changes wakes the shard once,
//! whatever the number of configs or watchers; a node address change wakes it once through
//! the node table's signal. The shard then does, for each connection whose scope holds a
//! changed id (or that is patched for its node, after a node change): takes what its
//! [`Watch`] yields, hands it to the connection's [`WatchProtocol`], and writes what that hands
//! out with one non-blocking `write`. Only a socket that would block gets more attention: the
//! rest of its frame waits in the connection until epoll says it is writable (what comes
//! meanwhile waits in the protocol's bounded outbox, and the watch is not read, so the
//! connection gets the latest version once it drains). Everything else (Pings, Pongs, Closes,
//! write timeouts, shutdown) is the protocol's, driven by the shard's epoll and one timer for
//! all its connections.
//!
//! Connections of other byte streams (none today; TLS one day) are driven by a session task
//! ([`super::session`]).

use super::clients::Registration;
use super::connection::ConnectionPermit;
use super::metrics::CdsMetrics;
use super::store::{ChangedIds, ConfigStore, Scope};
use super::watch::{Update, Watch};
use super::watch_protocol::{
    End, Inbox, Push, PushCounters, READ_CHUNK, READS_PER_WAKE, Settings, Transmit, WatchProtocol,
};
use super::websocket::{FrameReader, WebSocketFrame, close_frame};
use mio::net::TcpStream;
use mio::{Events, Interest, Poll, Token};
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
    /// The connection's group, by its index in the shard's groups (32 bits, like
    /// `member_at`: an idle connection's state is kept small).
    group: u32,
    /// Where this connection is in its group's members.
    member_at: u32,
    client: Registration,
    reader: FrameReader,
    protocol: WatchProtocol,
    /// The rest of the frame on its way, when the socket would not take it whole (boxed: a
    /// connection nearly always has none).
    blocked: Option<Box<Transmit>>,
    /// The socket may have more to read than was read at its last readable event.
    unread: bool,
    _permit: Option<ConnectionPermit>,
}

impl Conn {
    /// The bytes waiting to be written to this connection.
    fn held(&self) -> usize {
        self.protocol.held() + self.blocked.as_ref().map_or(0, |t| t.rest().len())
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
        let counters = PushCounters::new(&metrics);
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
                    let now = Instant::now();
                    for slot in std::mem::take(&mut state.unread) {
                        state.read(slot, now);
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
        // Both below 2^32: a shard's connections are file descriptors, which are fewer.
        let (member_at, group) = (members.len() as u32, group as u32);
        members.push(slot);
        let now = Instant::now();
        self.conns[slot] = Some(Conn {
            socket,
            watch,
            group,
            member_at,
            client,
            reader: FrameReader::new(self.settings.max_client_message),
            protocol: WatchProtocol::new(&self.settings, now.into_std()),
            blocked: None,
            unread: false,
            _permit: permit,
        });
        self.lower_wake(now + self.settings.ping_interval);
        // What came along with the request is answered before the first config goes out.
        if !early.is_empty() {
            let conn = self.conns[slot].as_mut().expect("just placed");
            let mut inbox = Inbox::default();
            inbox.take(&mut conn.reader, &early);
            self.drive(slot, now, |conn, now| conn.protocol.on_received(inbox, now));
        }
        for update in initial {
            self.push(slot, now, update);
        }
        // A change stored after the watch's subscription, which the shard may have been told
        // of before the connection was here, is not missed.
        self.push_due(slot, now);
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
        let mut now = Instant::now();
        for (i, slot) in members.iter().enumerate() {
            if i > 0 && i % WRITES_PER_TURN == 0 {
                tokio::task::yield_now().await;
                now = Instant::now();
            }
            self.push_due(*slot, now);
        }
        members.clear();
        self.members = members;
    }

    /// Sends the connection in `slot` what its watch has for it now, if its protocol wants
    /// updates (not while a frame is on its way: it catches up, with the latest, once it can).
    fn push_due(&mut self, slot: usize, now: Instant) {
        let Some(conn) = self.conns.get_mut(slot).and_then(Option::as_mut) else { return };
        if !conn.protocol.wants_updates() {
            return;
        }
        let mut updates = std::mem::take(&mut self.updates);
        match conn.watch.poll_updates(&mut updates) {
            Ok(_) => {
                for update in updates.drain(..) {
                    self.push(slot, now, update);
                }
            }
            Err(_) => self.drive(slot, now, |conn, now| conn.protocol.on_shutdown(now)),
        }
        updates.clear();
        self.updates = updates;
    }

    /// Hands `update` to the protocol of the connection in `slot`, encoded for it.
    fn push(&mut self, slot: usize, now: Instant, update: Update) {
        let frame = update.snapshot.encoded::<WebSocketFrame>(&update.variant);
        self.drive(slot, now, |conn, now| conn.protocol.on_update(Push { frame, update }, now));
    }

    /// Gives the connection in `slot` an input at `now`, `input`, which returns the frame the
    /// connection's protocol hands out, if any; writes it, and each next frame the protocol
    /// hands out, as far as the socket takes them; removes the connection once its protocol
    /// says it is over.
    fn drive(
        &mut self,
        slot: usize,
        now: Instant,
        input: impl FnOnce(&mut Conn, std::time::Instant) -> Option<Transmit>,
    ) {
        let Some(conn) = self.conns.get_mut(slot).and_then(Option::as_mut) else { return };
        let before = conn.held();
        let mut next = input(conn, now.into_std());
        while let Some(mut transmit) = next.take() {
            let Some(written) = write_some(&conn.socket, transmit.rest()) else {
                conn.protocol.on_broken();
                break;
            };
            transmit.advance(written);
            if !transmit.rest().is_empty() {
                conn.blocked = Some(Box::new(transmit));
                break;
            }
            self.counters.record(&conn.client, transmit.out());
            next = conn.protocol.on_written(now.into_std());
        }
        let after = conn.held();
        if after != before {
            self.outbox_bytes.inc_by(after as i64 - before as i64);
        }
        match (conn.protocol.over(), conn.protocol.deadline(&self.settings)) {
            (Some(end), _) => self.remove(slot, end),
            (None, Some(deadline)) => self.lower_wake(Instant::from_std(deadline)),
            (None, None) => {}
        }
    }

    /// A readiness event for the connection in `slot`.
    fn on_ready(&mut self, slot: usize, readable: bool, writable: bool) {
        let Some(conn) = self.conns.get(slot).and_then(Option::as_ref) else { return };
        let now = Instant::now();
        if writable && conn.blocked.is_some() {
            self.drive(slot, now, |conn, _| conn.blocked.take().map(|rest| *rest));
            // Caught up: the latest of what changed meanwhile.
            self.push_due(slot, now);
        }
        if readable {
            self.read(slot, now);
        }
    }

    /// Reads what the client of `slot` sent and hands it to the connection's protocol.
    fn read(&mut self, slot: usize, now: Instant) {
        let Some(conn) = self.conns.get_mut(slot).and_then(Option::as_mut) else { return };
        if !conn.protocol.is_open() {
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
            if inbox.is_final() {
                drained = true;
                break;
            }
        }
        if !drained {
            // A flood: the rest on a later turn, after the other connections.
            conn.unread = true;
            self.unread.push(slot);
        }
        self.drive(slot, now, |conn, now| conn.protocol.on_received(inbox, now));
    }

    /// Removes the connection in `slot` (closing its socket) for `end`, which is logged and
    /// counted.
    fn remove(&mut self, slot: usize, end: End) {
        let Some(conn) = self.conns[slot].take() else { return };
        self.outbox_bytes.dec_by(conn.held() as i64);
        end.record(&self.metrics);
        self.free.push(slot);
        let (at, member_at) = (conn.group as usize, conn.member_at as usize);
        let group = self.groups[at].as_mut().expect("a connection's group");
        group.members.swap_remove(member_at);
        match group.members.get(member_at) {
            Some(&moved) => self.conns[moved].as_mut().expect("a member").member_at = conn.member_at,
            None if group.members.is_empty() => {
                let group = self.groups[at].take().expect("the group");
                self.group_at.remove(&group.key);
                self.broad_groups.retain(|&group| group != at);
                self.free_groups.push(at);
            }
            None => {}
        }
        // Dropping the socket closes it, which also takes it out of the shard's epoll.
    }

    /// Tells every connection the time: Pings that are due, clients silent for too long,
    /// writes past their timeout.
    fn on_timer(&mut self) {
        let now = Instant::now();
        let settings = self.settings.clone();
        let mut next = now + settings.ping_interval;
        for slot in 0..self.conns.len() {
            self.drive(slot, now, |conn, now| conn.protocol.on_timer(now, &settings));
            if let Some(deadline) = self.conns[slot].as_ref().and_then(|c| c.protocol.deadline(&settings)) {
                next = next.min(Instant::from_std(deadline));
            }
        }
        self.wake_at = next.max(now + settings.slack());
    }

    /// Shutdown: every connection gets an empty Close frame, as upstream sends (its client
    /// reconnects to a live replica), and goes once it is written or times out.
    fn close_all(&mut self) {
        let now = Instant::now();
        for slot in 0..self.conns.len() {
            self.drive(slot, now, |conn, now| conn.protocol.on_shutdown(now));
        }
        self.closing = true;
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
