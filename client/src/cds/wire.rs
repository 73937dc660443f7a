//! What a watch shares with the two wires under it ([`super::ws`], [`super::grpc`]): its
//! timers, and a config as it comes off the wire and an acknowledgement as it goes on.

use std::time::Duration;
use stunner_gateway::cds::ConfigId;

/// Timers of a watch. The keepalive defaults are stunnerd's, so a server tuned for stunnerd
/// sees the same traffic from us (on gRPC they become HTTP/2 PING settings); the reconnect
/// defaults are gentler than stunnerd's fixed second in lockstep (see [`WatchSettings::stunnerd`]
/// for all of stunnerd's).
#[derive(Debug, Clone)]
pub struct WatchSettings {
    /// How often we Ping the server.
    pub ping_period: Duration,
    /// Longest silence (no data, no Pong) before the connection counts as dead.
    pub pong_wait: Duration,
    /// How long one Ping may take to go out.
    pub write_wait: Duration,
    /// TCP connect plus WebSocket handshake (or HTTP/2 connection setup).
    pub connect_timeout: Duration,
    /// First reconnect delay; it doubles after each failure...
    pub retry_initial: Duration,
    /// ...up to this bound.
    pub retry_max: Duration,
    /// Whether each reconnect delay is drawn from the upper half of the current one, so that
    /// clients that lost the server together do not come back together.
    pub retry_jitter: bool,
    /// How this client is named in the server's client table (gRPC only: the WebSocket
    /// protocol has no place for it).
    pub client_name: String,
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
            retry_jitter: true,
            client_name: String::new(),
        }
    }
}

impl WatchSettings {
    /// What stunnerd's watch does (cds-protocol.md §4.3 and §3.1): after any failure, a fixed
    /// second before the next attempt, no backoff, no jitter, so every dataplane that lost an
    /// operator comes back in the same instant; 45 s for connect and handshake (gorilla's
    /// default dialer). For a load generator that must load the server as real dataplanes do.
    pub fn stunnerd() -> Self {
        let retry = Duration::from_secs(1);
        WatchSettings {
            connect_timeout: Duration::from_secs(45),
            retry_initial: retry,
            retry_max: retry,
            retry_jitter: false,
            ..Default::default()
        }
    }
}

/// One config off the wire, before validation.
pub(super) struct Frame {
    /// gRPC names the id; on WebSocket it is the config's `admin.name`.
    pub id: Option<ConfigId>,
    /// gRPC's version; WebSocket frames have none.
    pub version: Option<String>,
    pub deleted: bool,
    pub json: String,
}

/// An acknowledgement (or, with an error, a rejection) of a version, for gRPC.
#[derive(Debug, Clone)]
pub(super) struct Ack {
    pub id: ConfigId,
    pub version: String,
    pub error: String,
}
