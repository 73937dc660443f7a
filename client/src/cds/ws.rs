//! The WebSocket transport of a watch: one connection, kept alive with Pings as `stunnerd`
//! does (cds-protocol.md §3.3). Reconnecting is the [`Watcher`](super::Watcher)'s job.

use super::wire::WatchSettings;
use super::{ClientError, ServerAddress, http};
use futures_util::{SinkExt, StreamExt};
use hyper::body::Bytes;
use tokio::net::TcpStream;
use tokio::time::{Instant, Interval, MissedTickBehavior, sleep_until, timeout};
use tokio_tungstenite::WebSocketStream;
use tokio_tungstenite::tungstenite::protocol::WebSocketConfig;
use tokio_tungstenite::tungstenite::{self, Message};
use url::Url;

/// One open WebSocket with its keepalive state.
/// How much tungstenite reads at a time. It zeroes the whole chunk before every read: its
/// default of 128 KiB cost a 128 KiB memset per frame, and 128 KiB per open watch. A config is
/// a few KiB; a larger one takes a few more reads.
const READ_BUFFER_BYTES: usize = 8 * 1024;

pub(super) struct Connection {
    ws: WebSocketStream<TcpStream>,
    ping: Interval,
    /// Without data or a Pong by then, the server is gone.
    deadline: Instant,
}

impl Connection {
    pub async fn open(server: &ServerAddress, url: &Url, settings: &WatchSettings) -> Result<Self, ClientError> {
        let handshake = async {
            let stream = http::connect(server, settings.connect_timeout).await?;
            let config = WebSocketConfig::default().read_buffer_size(READ_BUFFER_BYTES);
            tokio_tungstenite::client_async_with_config(url.as_str(), stream, Some(config))
                .await
                .map_err(|e| handshake_error(server, url, e))
        };
        let (ws, _response) = timeout(settings.connect_timeout, handshake)
            .await
            .map_err(|_| ClientError::Timeout { server: server.to_string(), after: settings.connect_timeout })??;
        let opened = Instant::now();
        let mut ping = tokio::time::interval_at(opened + settings.ping_period, settings.ping_period);
        ping.set_missed_tick_behavior(MissedTickBehavior::Delay);
        Ok(Connection { ws, ping, deadline: opened + settings.pong_wait })
    }

    /// The next text frame. Pings from the server are answered by tungstenite while reading.
    /// Cancel-safe: a frame is either returned or still in the stream.
    pub async fn next_text(&mut self, server: &ServerAddress, settings: &WatchSettings) -> Result<String, ClientError> {
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

    /// An empty Close frame, as stunnerd sends on shutdown.
    pub async fn close(mut self, settings: &WatchSettings) {
        let _ = timeout(settings.write_wait, self.ws.close(None)).await;
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
