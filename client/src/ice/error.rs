//! What goes wrong in an ICE test, by the part that failed: the TURN allocation, the WebRTC
//! session, the offer/answer exchange, a TURN URI or a tester config that cannot be used.

use std::net::IpAddr;

#[derive(Debug, thiserror::Error)]
pub enum RelayError {
    #[error("TURN allocation refused: {0}")]
    Refused(String),

    #[error("the TURN server refused a permission for peer {0}")]
    Permission(IpAddr),

    #[error("no relayed address yet: the allocation is still under way")]
    NotAllocated,

    #[error("the TURN allocation ended")]
    Closed,

    #[error("TURN protocol error: {0}")]
    Protocol(String),
}

#[derive(Debug, thiserror::Error)]
pub enum PeerError {
    #[error(transparent)]
    Relay(#[from] RelayError),

    #[error("WebRTC: {0}")]
    Rtc(#[from] str0m::RtcError),

    #[error("invalid SDP: {0}")]
    Sdp(String),

    #[error("the data channel is not open")]
    NoChannel,
}

#[derive(Debug, thiserror::Error)]
pub enum WhipError {
    #[error("cannot reach the WHIP server at {url}: {reason}")]
    Unreachable { url: String, reason: String },

    #[error("the WHIP server at {url} answered {status}: {body}")]
    Status { url: String, status: String, body: String },

    #[error("invalid WHIP URL {url}: {reason}")]
    Url { url: String, reason: String },

    #[error("the tester at {url} answered its config with {reason}")]
    Config { url: String, reason: String },
}

#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum TurnUriError {
    #[error("{0:?}: TURN over TLS or DTLS (turns:) is not supported, only turn:")]
    Tls(String),

    #[error("{0:?} is not a TURN URI (turn:HOST[:PORT][?transport=udp|tcp])")]
    NotTurn(String),

    #[error("{uri:?}: {reason}")]
    Invalid { uri: String, reason: String },
}

#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum TesterConfigError {
    #[error(transparent)]
    Uri(#[from] TurnUriError),

    #[error("ICETransportPolicy \"relay\" needs an ICE server with a turn: URI (got {0:?})")]
    NoTurnServer(Vec<String>),

    #[error("the ICE server of {0:?} has no username or credential")]
    NoCredential(String),
}

#[derive(Debug, thiserror::Error)]
pub enum LinkError {
    #[error(transparent)]
    Peer(#[from] PeerError),

    #[error("socket: {0}")]
    Io(#[from] std::io::Error),

    #[error("the TURN server closed the connection")]
    ServerClosed,
}
