//! Watches: one WebSocket per subscription that reconnects after any failure and keeps
//! itself alive with Pings, as `stunnerd` does (cds-protocol.md §3.3, §4.3).

use super::backoff::Backoff;
use super::{ClientError, ServerAddress, http};
use futures_util::{SinkExt, Stream, StreamExt, stream};
use hyper::body::Bytes;
use std::time::Duration;
use stunner_gateway::config::StunnerConfig;
use tokio::net::TcpStream;
use tokio::time::{Instant, Interval, MissedTickBehavior, sleep_until, timeout};
use tokio_tungstenite::WebSocketStream;
use tokio_tungstenite::tungstenite::{self, Message};
use url::Url;

/// Timers of a watch. The keepalive defaults are stunnerd's, so a server tuned for stunnerd
/// sees the same traffic from us.
#[derive(Debug, Clone)]
pub struct WatchSettings {
    /// How often we Ping the server.
    pub ping_period: Duration,
    /// Longest silence (no data, no Pong) before the connection counts as dead.
    pub pong_wait: Duration,
    /// How long one Ping may take to go out.
    pub write_wait: Duration,
    /// TCP connect plus WebSocket handshake.
    pub connect_timeout: Duration,
    /// First reconnect delay; it doubles after each failure...
    pub retry_initial: Duration,
    /// ...up to this bound.
    pub retry_max: Duration,
}

impl Default for WatchSettings {
    fn default() -> Self {
        WatchSettings {
            ping_period: Duration::from_secs(5),
            pong_wait: Duration::from_secs(8),
            write_wait: Duration::from_secs(2),
            connect_timeout: Duration::from_secs(10),
            retry_initial: Duration::from_millis(100),
            retry_max: Duration::from_secs(5),
        }
    }
}

/// What a watch reports.
#[derive(Debug)]
pub enum WatchEvent {
    /// A config, validated and normalised as the dataplane does it. A deleted Gateway arrives
    /// as its zero config: [`StunnerConfig::is_deleted`] tells.
    Config(Box<StunnerConfig>),
    /// A frame that is not a valid config; it was skipped, as stunnerd skips it.
    Rejected { reason: String },
    /// The connection failed or could not be opened; the watch retries after `retry_in`.
    Disconnected { error: ClientError, retry_in: Duration },
}

/// A watch that never gives up: call [`Watcher::next`] (or use [`Watcher::into_stream`]) for
/// as long as you want configs. Every reconnect starts with the full snapshot again.
pub struct Watcher {
    server: ServerAddress,
    url: Url,
    settings: WatchSettings,
    backoff: Backoff,
    conn: Option<Connection>,
    /// Set after a failure: no connection attempt before this instant.
    retry_at: Option<Instant>,
}

impl Watcher {
    pub(super) fn new(server: ServerAddress, url: Url, settings: WatchSettings) -> Self {
        let backoff = Backoff::new(settings.retry_initial, settings.retry_max);
        Watcher { server, url, settings, backoff, conn: None, retry_at: None }
    }

    /// The WebSocket URL watched.
    pub fn url(&self) -> &Url {
        &self.url
    }

    /// The next event. Cancel-safe: dropping the future loses no config and keeps the backoff.
    pub async fn next(&mut self) -> WatchEvent {
        loop {
            let conn = match &mut self.conn {
                Some(conn) => conn,
                None => {
                    if let Some(at) = self.retry_at {
                        sleep_until(at).await;
                        self.retry_at = None;
                    }
                    match Connection::open(&self.server, &self.url, &self.settings).await {
                        Ok(conn) => self.conn.insert(conn),
                        Err(error) => return self.disconnected(error),
                    }
                }
            };
            match conn.next_text(&self.server, &self.settings).await {
                // stunnerd ignores empty frames too.
                Ok(text) if text.is_empty() => continue,
                Ok(text) => return parse(&text),
                Err(error) => {
                    // A connection that held for a while worked: start the backoff afresh. One
                    // that failed at once (a server that accepts and drops) keeps backing off.
                    if conn.opened.elapsed() >= self.settings.ping_period {
                        self.backoff.reset();
                    }
                    self.conn = None;
                    return self.disconnected(error);
                }
            }
        }
    }

    /// The watch as a never-ending stream of events.
    pub fn into_stream(self) -> impl Stream<Item = WatchEvent> {
        stream::unfold(self, |mut watcher| async move { Some((watcher.next().await, watcher)) })
    }

    /// Ends the watch politely: an empty Close frame, as stunnerd sends on shutdown.
    pub async fn close(mut self) {
        if let Some(mut conn) = self.conn.take() {
            let _ = timeout(self.settings.write_wait, conn.ws.close(None)).await;
        }
    }

    fn disconnected(&mut self, error: ClientError) -> WatchEvent {
        let retry_in = self.backoff.next_delay();
        self.retry_at = Some(Instant::now() + retry_in);
        WatchEvent::Disconnected { error, retry_in }
    }
}

/// Decodes and validates one frame like stunnerd's watcher (JSON only: our server sends JSON).
fn parse(text: &str) -> WatchEvent {
    let mut config: StunnerConfig = match serde_json::from_str(text) {
        Ok(c) => c,
        Err(e) => return WatchEvent::Rejected { reason: format!("could not parse config: {e}") },
    };
    match config.validate() {
        Ok(()) => WatchEvent::Config(Box::new(config)),
        Err(e) => WatchEvent::Rejected { reason: format!("invalid config {:?}: {e}", config.admin.name) },
    }
}

/// One open WebSocket with its keepalive state.
struct Connection {
    ws: WebSocketStream<TcpStream>,
    ping: Interval,
    /// Without data or a Pong by then, the server is gone.
    deadline: Instant,
    opened: Instant,
}

impl Connection {
    async fn open(server: &ServerAddress, url: &Url, settings: &WatchSettings) -> Result<Self, ClientError> {
        let handshake = async {
            let stream = http::connect(server, settings.connect_timeout).await?;
            tokio_tungstenite::client_async(url.as_str(), stream).await.map_err(|e| handshake_error(server, url, e))
        };
        let (ws, _response) = timeout(settings.connect_timeout, handshake)
            .await
            .map_err(|_| ClientError::Timeout { server: server.to_string(), after: settings.connect_timeout })??;
        let opened = Instant::now();
        let mut ping = tokio::time::interval_at(opened + settings.ping_period, settings.ping_period);
        ping.set_missed_tick_behavior(MissedTickBehavior::Delay);
        Ok(Connection { ws, ping, deadline: opened + settings.pong_wait, opened })
    }

    /// The next text frame. Pings from the server are answered by tungstenite while reading.
    async fn next_text(&mut self, server: &ServerAddress, settings: &WatchSettings) -> Result<String, ClientError> {
        let broken = |reason: String| ClientError::Protocol { server: server.to_string(), reason };
        loop {
            tokio::select! {
                msg = self.ws.next() => {
                    let msg = match msg {
                        None => return Err(ClientError::Closed { server: server.to_string() }),
                        Some(Err(e)) => return Err(stream_error(server, e)),
                        Some(Ok(msg)) => msg,
                    };
                    match msg {
                        Message::Text(text) => {
                            self.deadline = Instant::now() + settings.pong_wait;
                            return Ok(text.as_str().to_owned());
                        }
                        Message::Pong(_) => self.deadline = Instant::now() + settings.pong_wait,
                        Message::Ping(_) | Message::Frame(_) => {}
                        Message::Binary(_) => return Err(broken("unexpected binary frame".into())),
                        Message::Close(_) => return Err(ClientError::Closed { server: server.to_string() }),
                    }
                }
                _ = self.ping.tick() => {
                    let ping = self.ws.send(Message::Ping(Bytes::from_static(b"keepalive")));
                    match timeout(settings.write_wait, ping).await {
                        Ok(Ok(())) => {}
                        Ok(Err(e)) => return Err(stream_error(server, e)),
                        Err(_) => return Err(broken(format!("could not send a ping within {:?}", settings.write_wait))),
                    }
                }
                _ = sleep_until(self.deadline) => {
                    return Err(ClientError::Silent { server: server.to_string(), after: settings.pong_wait });
                }
            }
        }
    }
}

fn handshake_error(server: &ServerAddress, url: &Url, e: tungstenite::Error) -> ClientError {
    match e {
        tungstenite::Error::Http(response) => {
            let message = response
                .body()
                .as_deref()
                .map(|b| String::from_utf8_lossy(b).trim().to_string())
                .filter(|m| !m.is_empty())
                .unwrap_or_else(|| "WebSocket handshake refused".into());
            ClientError::Status { url: url.to_string(), status: response.status().to_string(), message }
        }
        e => stream_error(server, e),
    }
}

fn stream_error(server: &ServerAddress, e: tungstenite::Error) -> ClientError {
    match e {
        tungstenite::Error::ConnectionClosed | tungstenite::Error::AlreadyClosed => {
            ClientError::Closed { server: server.to_string() }
        }
        e => ClientError::Protocol { server: server.to_string(), reason: e.to_string() },
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn frames_are_validated_like_stunnerd_does() {
        let zero = StunnerConfig::zero("ns/gw").to_json();
        let WatchEvent::Config(c) = parse(&zero) else { panic!("the zero config is valid") };
        assert!(c.is_deleted());
        assert_eq!(c.admin.loglevel, "all:INFO", "normalised");
        assert!(matches!(parse("{"), WatchEvent::Rejected { .. }));
        let WatchEvent::Rejected { reason } = parse(r#"{"version":"v2"}"#) else { panic!("bad version") };
        assert!(reason.contains("unsupported API version"), "{reason}");
    }
}
