//! The JSON bodies of the credential service, keys in the order its Go encoder writes them
//! (sorted): an `RTCConfiguration` (`GET /ice`) and the TURN REST API draft's answer (`GET /`).

use super::credential::Credential;
use serde::{Deserialize, Serialize};

/// A WebRTC `RTCConfiguration`: one `RTCIceServer` per Gateway.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct IceConfig {
    #[serde(rename = "iceServers")]
    pub ice_servers: Vec<IceServer>,
    #[serde(rename = "iceTransportPolicy")]
    pub ice_transport_policy: String,
}

/// An `RTCIceServer`: a Gateway's URIs with its credential.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct IceServer {
    pub credential: String,
    pub urls: Vec<String>,
    pub username: String,
}

/// The TURN REST API draft's answer (draft-uberti-behave-turn-rest-00, §2.2).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct TurnCredential {
    pub password: String,
    pub ttl: i64,
    pub uris: Vec<String>,
    pub username: String,
}

impl IceServer {
    pub fn new(urls: Vec<String>, cred: Credential) -> Self {
        IceServer { credential: cred.password, urls, username: cred.username }
    }
}

impl TurnCredential {
    /// The first ICE server's credential and URIs, valid for `ttl` seconds.
    pub fn new(server: IceServer, ttl: i64) -> Self {
        TurnCredential { password: server.credential, ttl, uris: server.urls, username: server.username }
    }
}
