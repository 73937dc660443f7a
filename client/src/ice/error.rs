//! What goes wrong in an ICE test, by the part that failed: the TURN allocation, the WebRTC
//! session, the offer/answer exchange.

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
