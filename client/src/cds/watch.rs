//! Watches: one subscription that reconnects after any failure, over either transport.
//!
//! What the caller sees is the same on both: each config change once, validated as the
//! dataplane validates it. What differs is what the wire can do, and the watch hides it:
//!
//! - **gRPC** has versions, resume and acks. On reconnect the watch tells the server which
//!   versions it holds (`resume`), so nothing it has is sent again; after the caller took a
//!   config the watch acknowledges its version, and a config that fails validation is
//!   rejected with the validation error (both visible in the server's client table).
//! - **WebSocket** (stunnerd's protocol) has none of that: every reconnect starts with the full
//!   snapshot. The watch remembers a digest of the last frame per config id and drops a frame
//!   identical to it, so a reconnect does not show the caller configs it already has.

use super::backoff::Backoff;
use super::scope::ConfigScope;
use super::wire::{Ack, Frame, WatchSettings};
use super::{ClientError, ServerAddress, grpc, ws};
use futures_util::{Stream, stream};
use std::collections::HashMap;
use std::hash::{DefaultHasher, Hash, Hasher};
use std::time::Duration;
use stunner_gateway::cds::ConfigId;
use stunner_gateway::config::StunnerConfig;
use tokio::time::{Instant, sleep_until};
use url::Url;

/// Which API a client uses. Both serve the same configs from the same port set; the
/// difference is what the protocol itself can carry (see the module docs).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, clap::ValueEnum)]
pub enum Transport {
    /// The upstream HTTP/WebSocket API, the one `stunnerd` speaks: no versions, no resume,
    /// no acknowledgements.
    #[default]
    #[value(name = "ws", alias = "websocket")]
    WebSocket,
    /// The typed gRPC API (`stunner.cds.v1.ConfigDiscovery`): versions, resume, acks.
    Grpc,
}

impl std::fmt::Display for Transport {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            Transport::WebSocket => "websocket",
            Transport::Grpc => "grpc",
        })
    }
}

/// What a watch reports.
#[derive(Debug)]
pub enum WatchEvent {
    /// A config, validated and normalised as the dataplane does it. A deleted Gateway arrives
    /// as its zero config: [`StunnerConfig::is_deleted`] tells. On gRPC it is acknowledged when
    /// the caller asks for the next event, unless the caller [`Watcher::reject`]s it first.
    Config(Box<StunnerConfig>),
    /// A frame that is not a valid config; it was skipped, as stunnerd skips it (and on gRPC
    /// rejected with `reason`).
    Rejected { reason: String },
    /// The connection failed or could not be opened; the watch retries after `retry_in`.
    Disconnected { error: ClientError, retry_in: Duration },
}

/// The last frame seen for an id.
#[derive(Debug, Clone)]
struct Held {
    /// The server's version (gRPC) or a digest of the frame's bytes (WebSocket): equal means
    /// the same content, which the caller has already seen.
    version: String,
    /// Whether it came with a server version the server can resume from.
    resumable: bool,
    /// Why it was rejected, if it was: a resend is rejected again rather than resumed.
    rejected: Option<String>,
}

/// Where a watch connects.
enum Target {
    WebSocket(Url),
    Grpc(ConfigScope),
}

enum Connection {
    WebSocket(ws::Connection),
    Grpc(grpc::Connection),
}

/// A watch that never gives up: call [`Watcher::next`] (or use [`Watcher::into_stream`]) for
/// as long as you want configs.
pub struct Watcher {
    server: ServerAddress,
    target: Target,
    settings: WatchSettings,
    backoff: Backoff,
    conn: Option<Connection>,
    /// When the current connection was opened: one that held a while resets the backoff.
    opened: Instant,
    /// Set after a failure: no connection attempt before this instant.
    retry_at: Option<Instant>,
    /// What the caller has been shown, per config id.
    held: HashMap<ConfigId, Held>,
    /// The version last handed to the caller, acknowledged on the next call (gRPC).
    pending: Option<Ack>,
}

impl Watcher {
    pub(super) fn websocket(server: ServerAddress, url: Url, settings: WatchSettings) -> Self {
        Self::new(server, Target::WebSocket(url), settings)
    }

    pub(super) fn grpc(server: ServerAddress, scope: ConfigScope, settings: WatchSettings) -> Self {
        Self::new(server, Target::Grpc(scope), settings)
    }

    fn new(server: ServerAddress, target: Target, settings: WatchSettings) -> Self {
        let backoff = Backoff::new(settings.retry_initial, settings.retry_max, settings.retry_jitter);
        Watcher {
            server,
            target,
            settings,
            backoff,
            conn: None,
            opened: Instant::now(),
            retry_at: None,
            held: HashMap::new(),
            pending: None,
        }
    }

    /// The WebSocket URL watched, or for gRPC the server's address.
    pub fn url(&self) -> String {
        match &self.target {
            Target::WebSocket(url) => url.to_string(),
            Target::Grpc(_) => self.server.to_string(),
        }
    }

    pub fn transport(&self) -> Transport {
        match self.target {
            Target::WebSocket(_) => Transport::WebSocket,
            Target::Grpc(_) => Transport::Grpc,
        }
    }

    /// The next event. Acknowledges the config returned by the previous call (gRPC).
    /// Cancel-safe: dropping the future loses no config and keeps the backoff.
    pub async fn next(&mut self) -> WatchEvent {
        self.flush_ack();
        loop {
            let conn = match &mut self.conn {
                Some(conn) => conn,
                None => {
                    if let Some(at) = self.retry_at {
                        sleep_until(at).await;
                        self.retry_at = None;
                    }
                    let opened = match &self.target {
                        Target::WebSocket(url) => {
                            ws::Connection::open(&self.server, url, &self.settings).await.map(Connection::WebSocket)
                        }
                        Target::Grpc(scope) => {
                            let resume = self.resume();
                            grpc::Connection::open(&self.server, scope, &self.settings, resume)
                                .await
                                .map(Connection::Grpc)
                        }
                    };
                    match opened {
                        Ok(conn) => {
                            self.opened = Instant::now();
                            self.conn.insert(conn)
                        }
                        Err(error) => return self.disconnected(error),
                    }
                }
            };
            let frame = match conn {
                Connection::WebSocket(c) => c.next_text(&self.server, &self.settings).await.map(|json| Frame {
                    id: None,
                    version: None,
                    deleted: false,
                    json,
                }),
                Connection::Grpc(c) => c.next_frame(&self.server).await,
            };
            match frame {
                // stunnerd ignores empty frames too.
                Ok(frame) if frame.json.is_empty() => continue,
                Ok(frame) => {
                    if let Some(event) = self.take(frame) {
                        return event;
                    }
                }
                Err(error) => {
                    // A connection that held for a while worked: start the backoff afresh. One
                    // that failed at once (a server that accepts and drops) keeps backing off.
                    if self.opened.elapsed() >= self.settings.ping_period {
                        self.backoff.reset();
                    }
                    self.conn = None;
                    return self.disconnected(error);
                }
            }
        }
    }

    /// The config last returned by [`Watcher::next`] could not be applied: on gRPC it is
    /// reported to the server as rejected with `reason` instead of acknowledged. It still
    /// counts as seen: the same version is not shown again.
    pub fn reject(&mut self, reason: impl Into<String>) {
        if let Some(ack) = &mut self.pending {
            ack.error = reason.into();
            if let Some(held) = self.held.get_mut(&ack.id) {
                held.rejected = Some(ack.error.clone());
            }
        }
    }

    /// The watch as a never-ending stream of events.
    pub fn into_stream(self) -> impl Stream<Item = WatchEvent> {
        stream::unfold(self, |mut watcher| async move { Some((watcher.next().await, watcher)) })
    }

    /// Ends the watch politely: acknowledges the last config (gRPC), then closes (an empty
    /// Close frame on WebSocket, as stunnerd sends on shutdown; the end of the request stream
    /// on gRPC).
    pub async fn close(mut self) {
        self.flush_ack();
        match self.conn.take() {
            Some(Connection::WebSocket(c)) => c.close(&self.settings).await,
            Some(Connection::Grpc(c)) => c.close(&self.settings).await,
            None => {}
        }
    }

    fn flush_ack(&mut self) {
        if let Some(ack) = self.pending.take()
            && let Some(Connection::Grpc(c)) = &self.conn
        {
            c.ack(ack);
        }
    }

    /// What to tell a gRPC server we hold: every version we accepted.
    fn resume(&self) -> Vec<(ConfigId, String)> {
        let mut held: Vec<_> = self
            .held
            .iter()
            .filter(|(_, h)| h.resumable && h.rejected.is_none())
            .map(|(id, h)| (id.clone(), h.version.clone()))
            .collect();
        held.sort();
        held
    }

    /// Turns a frame into what the caller sees: nothing if it has seen it already.
    fn take(&mut self, frame: Frame) -> Option<WatchEvent> {
        let resumable = frame.version.is_some();
        let version = frame.version.unwrap_or_else(|| digest(&frame.json));
        if let Some(id) = &frame.id
            && let Some(held) = self.held.get(id)
            && held.version == version
        {
            // A resend of what we have. A rejection is repeated, so this stream knows too.
            if let Some(error) = held.rejected.clone() {
                self.send_ack(Ack { id: id.clone(), version, error });
            }
            return None;
        }
        let parsed = parse(&frame.json);
        let id = frame.id.or_else(|| match &parsed {
            Ok(c) => ConfigId::parse(&c.admin.name),
            Err((id, _)) => id.clone(),
        });
        match (id, parsed.map_err(|(_, reason)| reason)) {
            (Some(id), Ok(config)) => {
                if frame.deleted || config.is_deleted() {
                    // Gone: a later re-creation with the same content is news again.
                    self.held.remove(&id);
                    return Some(WatchEvent::Config(Box::new(config)));
                }
                if self.held.get(&id).is_some_and(|h| h.version == version) {
                    return None;
                }
                self.held.insert(id.clone(), Held { version: version.clone(), resumable, rejected: None });
                if resumable {
                    self.pending = Some(Ack { id, version, error: String::new() });
                }
                Some(WatchEvent::Config(Box::new(config)))
            }
            (Some(id), Err(reason)) => {
                if self.held.get(&id).is_some_and(|h| h.version == version) {
                    return None;
                }
                self.held
                    .insert(id.clone(), Held { version: version.clone(), resumable, rejected: Some(reason.clone()) });
                if resumable {
                    self.send_ack(Ack { id, version, error: reason.clone() });
                }
                Some(WatchEvent::Rejected { reason })
            }
            (None, Ok(config)) => Some(WatchEvent::Config(Box::new(config))),
            (None, Err(reason)) => Some(WatchEvent::Rejected { reason }),
        }
    }

    fn send_ack(&self, ack: Ack) {
        if let Some(Connection::Grpc(c)) = &self.conn {
            c.ack(ack);
        }
    }

    fn disconnected(&mut self, error: ClientError) -> WatchEvent {
        // An ack not sent goes with the connection; resume tells the next one what we hold.
        self.pending = None;
        let retry_in = self.backoff.next_delay();
        self.retry_at = Some(Instant::now() + retry_in);
        WatchEvent::Disconnected { error, retry_in }
    }
}

/// Decodes and validates one frame like stunnerd's watcher (JSON only: our server sends JSON).
/// A config that decodes but fails validation still names its id (its `admin.name`).
fn parse(text: &str) -> Result<StunnerConfig, (Option<ConfigId>, String)> {
    let mut config: StunnerConfig =
        serde_json::from_str(text).map_err(|e| (None, format!("could not parse config: {e}")))?;
    match config.validate() {
        Ok(()) => Ok(config),
        Err(e) => Err((ConfigId::parse(&config.admin.name), format!("invalid config {:?}: {e}", config.admin.name))),
    }
}

/// A digest of a WebSocket frame, standing in for the version the protocol does not carry.
/// The server encodes each version once and sends the same bytes to everyone, so equal bytes
/// mean the same version. std's SipHash with fixed keys: 64 bits is plenty to tell one config
/// from the next, and it needs no extra crate.
fn digest(text: &str) -> String {
    let mut h = DefaultHasher::new();
    text.hash(&mut h);
    format!("ws:{:016x}", h.finish())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ws_watcher() -> Watcher {
        let server = ServerAddress::parse("127.0.0.1:1").unwrap();
        Watcher::websocket(server, Url::parse("ws://127.0.0.1:1/").unwrap(), WatchSettings::default())
    }

    fn config_json(id: &str, realm: &str) -> String {
        let mut c = StunnerConfig::zero(id);
        c.auth.realm = realm.into();
        c.to_json()
    }

    fn ws_frame(json: String) -> Frame {
        Frame { id: None, version: None, deleted: false, json }
    }

    #[test]
    fn with_stunnerds_settings_every_reconnect_waits_one_second() {
        let server = ServerAddress::parse("127.0.0.1:1").unwrap();
        let url = Url::parse("ws://127.0.0.1:1/").unwrap();
        let mut w = Watcher::websocket(server, url, WatchSettings::stunnerd());
        let error = || ClientError::Timeout { server: "127.0.0.1:1".into(), after: Duration::ZERO };
        let waits: Vec<Duration> = (0..4)
            .map(|_| match w.disconnected(error()) {
                WatchEvent::Disconnected { retry_in, .. } => retry_in,
                other => panic!("{other:?}"),
            })
            .collect();
        assert_eq!(waits, [Duration::from_secs(1); 4], "stunnerd's RetryPeriod, in lockstep");
    }

    #[test]
    fn frames_are_validated_like_stunnerd_does() {
        let c = parse(&StunnerConfig::zero("ns/gw").to_json()).expect("the zero config is valid");
        assert!(c.is_deleted());
        assert_eq!(c.admin.loglevel, "all:INFO", "normalised");
        assert!(matches!(parse("{"), Err((None, _))));
        let (id, reason) = parse(r#"{"version":"v2","admin":{"name":"ns/gw"}}"#).unwrap_err();
        assert!(reason.contains("unsupported API version"), "{reason}");
        assert_eq!(id, Some(ConfigId::new("ns", "gw")));
    }

    #[test]
    fn websocket_resends_of_the_same_config_are_shown_once() {
        let mut w = ws_watcher();
        assert!(matches!(w.take(ws_frame(config_json("ns/a", "r1"))), Some(WatchEvent::Config(_))));
        // A reconnect's snapshot: the same bytes again, for a and for a new b.
        assert!(w.take(ws_frame(config_json("ns/a", "r1"))).is_none());
        assert!(matches!(w.take(ws_frame(config_json("ns/b", "r1"))), Some(WatchEvent::Config(_))));
        assert!(matches!(w.take(ws_frame(config_json("ns/a", "r2"))), Some(WatchEvent::Config(_))));
        // Deleted, then re-created as it was: both are news.
        let zero = StunnerConfig::zero("ns/a").to_json();
        assert!(matches!(w.take(ws_frame(zero)), Some(WatchEvent::Config(c)) if c.is_deleted()));
        assert!(matches!(w.take(ws_frame(config_json("ns/a", "r2"))), Some(WatchEvent::Config(_))));
        // An invalid config is reported once too.
        let bad = r#"{"version":"v2","admin":{"name":"ns/a"}}"#.to_string();
        assert!(matches!(w.take(ws_frame(bad.clone())), Some(WatchEvent::Rejected { .. })));
        assert!(w.take(ws_frame(bad)).is_none());
        assert!(w.pending.is_none(), "nothing to acknowledge on WebSocket");
        assert!(w.resume().is_empty(), "nothing to resume from on WebSocket");
    }

    #[test]
    fn grpc_versions_are_acked_rejected_and_resumed() {
        let mut w = ws_watcher();
        let frame = |id: &str, version: &str, json: String| Frame {
            id: ConfigId::parse(id),
            version: Some(version.into()),
            deleted: false,
            json,
        };
        assert!(matches!(w.take(frame("ns/a", "v1", config_json("ns/a", "r1"))), Some(WatchEvent::Config(_))));
        assert_eq!(w.pending.as_ref().map(|a| (a.version.as_str(), a.error.as_str())), Some(("v1", "")));
        w.reject("cannot apply");
        assert_eq!(w.pending.as_ref().unwrap().error, "cannot apply");
        assert!(w.take(frame("ns/a", "v1", config_json("ns/a", "r1"))).is_none(), "seen");
        assert!(matches!(w.take(frame("ns/b", "v2", r#"{"version":"v2"}"#.into())), Some(WatchEvent::Rejected { .. })));
        assert!(w.take(frame("ns/b", "v2", r#"{"version":"v2"}"#.into())).is_none(), "rejected once");
        assert!(matches!(w.take(frame("ns/c", "v3", config_json("ns/c", "r1"))), Some(WatchEvent::Config(_))));
        assert_eq!(w.resume(), [(ConfigId::new("ns", "c"), "v3".to_string())], "only what was accepted");
        let deleted = Frame { deleted: true, ..frame("ns/c", "v4", StunnerConfig::zero("ns/c").to_json()) };
        assert!(matches!(w.take(deleted), Some(WatchEvent::Config(c)) if c.is_deleted()));
        assert!(w.resume().is_empty());
    }
}
