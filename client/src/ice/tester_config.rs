//! The icetester's config as upstream's `/config` endpoint takes and returns it (pion's
//! `whipconn.Config` in JSON: `ICEServers` of `RTCIceServer`s, `ICETransportPolicy`,
//! `BearerToken`, `WHIPEndpoint`, Go's field names), so that upstream's `stunnerctl icetest`
//! can drive our tester and ours upstream's. With ICE servers and policy `relay` the tester
//! allocates on a TURN server for each session and answers with that relay candidate only:
//! upstream's symmetric ICE test, where both ends go through the Gateway.

use super::error::TesterConfigError;
use super::turn_uri::TurnUri;
use serde::{Deserialize, Deserializer, Serialize};
use stunner_gateway::turn_auth::IceServer;

/// `RTCIceTransportPolicy`: `all` (host candidates) or `relay` (TURN only). pion's third,
/// `nohost`, would need server-reflexive candidates this tester does not gather: refused.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum TransportPolicy {
    #[default]
    All,
    Relay,
}

impl TransportPolicy {
    /// As the JSON writes it.
    pub fn as_str(self) -> &'static str {
        match self {
            TransportPolicy::All => "all",
            TransportPolicy::Relay => "relay",
        }
    }
}

#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct TesterConfig {
    /// Go sends `null` for none.
    #[serde(rename = "ICEServers", default, deserialize_with = "null_as_empty")]
    pub ice_servers: Vec<IceServer>,
    #[serde(rename = "ICETransportPolicy", default)]
    pub ice_transport_policy: TransportPolicy,
    #[serde(rename = "BearerToken", default)]
    pub bearer_token: String,
    /// Reported, never changed by a POST (the listener would need a restart, as upstream says).
    #[serde(rename = "WHIPEndpoint", default)]
    pub whip_endpoint: String,
}

fn null_as_empty<'de, D: Deserializer<'de>>(d: D) -> Result<Vec<IceServer>, D::Error> {
    Ok(Option::<Vec<IceServer>>::deserialize(d)?.unwrap_or_default())
}

/// The TURN server a relayed session allocates on, with its credential.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RelayServer {
    pub uri: TurnUri,
    /// The URI as given, for messages.
    pub text: String,
    pub username: String,
    pub password: String,
}

impl RelayServer {
    /// The server at `uri` as the one ICE server of a tester config.
    pub fn ice_server(uri: &TurnUri, username: &str, password: &str) -> IceServer {
        IceServer { urls: vec![uri.to_string()], username: username.to_string(), credential: password.to_string() }
    }
}

impl TesterConfig {
    /// What a test sends the tester: relayed through `servers`, or host candidates when there
    /// are none (upstream's asymmetric test sends that empty config too, so a tester left
    /// relayed by an earlier run answers with its host candidate again).
    pub fn relayed_through(servers: Vec<IceServer>) -> TesterConfig {
        let ice_transport_policy = if servers.is_empty() { TransportPolicy::All } else { TransportPolicy::Relay };
        TesterConfig { ice_servers: servers, ice_transport_policy, ..TesterConfig::default() }
    }

    /// The TURN server sessions allocate on: none with policy `all` (ICE servers are kept but
    /// unused then: one candidate per session), else the first `turn:` URI (`stun:` ones are
    /// skipped, as a relay-only browser skips them).
    pub fn relay_server(&self) -> Result<Option<RelayServer>, TesterConfigError> {
        if self.ice_transport_policy == TransportPolicy::All {
            return Ok(None);
        }
        for server in &self.ice_servers {
            for text in &server.urls {
                let lower = text.to_ascii_lowercase();
                if lower.starts_with("stun:") || lower.starts_with("stuns:") {
                    continue;
                }
                let uri = TurnUri::parse(text)?;
                if server.username.is_empty() || server.credential.is_empty() {
                    return Err(TesterConfigError::NoCredential(text.clone()));
                }
                return Ok(Some(RelayServer {
                    uri,
                    text: text.clone(),
                    username: server.username.clone(),
                    password: server.credential.clone(),
                }));
            }
        }
        let urls = self.ice_servers.iter().flat_map(|s| s.urls.iter().cloned()).collect();
        Err(TesterConfigError::NoTurnServer(urls))
    }

    /// Takes a POSTed config as upstream's tester does: ICE servers and policy replaced, the
    /// token replaced when one is given, the WHIP endpoint kept. A config whose relay server
    /// cannot be used is refused whole.
    pub fn update(&mut self, posted: TesterConfig) -> Result<(), TesterConfigError> {
        posted.relay_server()?;
        self.ice_servers = posted.ice_servers;
        self.ice_transport_policy = posted.ice_transport_policy;
        if !posted.bearer_token.is_empty() {
            self.bearer_token = posted.bearer_token;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ice::relay::ServerTransport;

    /// What upstream's stunnerctl POSTs for a symmetric test (Go's encoding of
    /// `whipconn.Config` with pion v4.2.11's `ICEServer`, which always writes
    /// `credentialType`), and for an asymmetric one.
    const UPSTREAM_SYMMETRIC: &str = r#"{"ICEServers":[{"credential":"pass-1","credentialType":"password","urls":["turn:udp-gateway.icetest.svc.cluster.local:3478?transport=udp"],"username":"user-1"}],"ICETransportPolicy":"relay","BearerToken":"","WHIPEndpoint":""}"#;
    const UPSTREAM_ASYMMETRIC: &str =
        r#"{"ICEServers":null,"ICETransportPolicy":"all","BearerToken":"","WHIPEndpoint":""}"#;

    #[test]
    fn upstreams_configs_read_and_name_the_relay_server() {
        let symmetric: TesterConfig = serde_json::from_str(UPSTREAM_SYMMETRIC).unwrap();
        let relay = symmetric.relay_server().unwrap().expect("a relay server");
        assert_eq!(relay.uri.host, "udp-gateway.icetest.svc.cluster.local");
        assert_eq!((relay.uri.port, relay.uri.transport), (3478, ServerTransport::Udp));
        assert_eq!((relay.username.as_str(), relay.password.as_str()), ("user-1", "pass-1"));
        let asymmetric: TesterConfig = serde_json::from_str(UPSTREAM_ASYMMETRIC).unwrap();
        assert_eq!(asymmetric, TesterConfig::default());
        assert_eq!(asymmetric.relay_server(), Ok(None));
        // Go decodes what this writes: the same field names back (pion's reader defaults the
        // credential type to password).
        let mut upstream: serde_json::Value = serde_json::from_str(UPSTREAM_SYMMETRIC).unwrap();
        upstream["ICEServers"][0].as_object_mut().unwrap().remove("credentialType");
        assert_eq!(serde_json::to_value(&symmetric).unwrap(), upstream);
    }

    #[test]
    fn a_config_that_cannot_relay_is_refused_with_the_reason() {
        let parse = |json: &str| serde_json::from_str::<TesterConfig>(json);
        assert!(
            parse(r#"{"ICETransportPolicy":"nohost"}"#).unwrap_err().to_string().contains("unknown variant `nohost`")
        );
        let none = parse(r#"{"ICETransportPolicy":"relay"}"#).unwrap();
        assert_eq!(none.relay_server(), Err(TesterConfigError::NoTurnServer(vec![])));
        let tls = parse(r#"{"ICEServers":[{"urls":["turns:1.2.3.4:443?transport=tcp"],"username":"u","credential":"p"}],"ICETransportPolicy":"relay"}"#).unwrap();
        assert!(tls.relay_server().unwrap_err().to_string().contains("turns:"), "{:?}", tls.relay_server());
        let anonymous = parse(
            r#"{"ICEServers":[{"urls":["turn:1.2.3.4"],"username":"","credential":""}],"ICETransportPolicy":"relay"}"#,
        )
        .unwrap();
        assert!(matches!(anonymous.relay_server(), Err(TesterConfigError::NoCredential(_))));
        // stun: servers are skipped for the first turn: one.
        let mixed = parse(r#"{"ICEServers":[{"urls":["stun:1.2.3.4","turn:1.2.3.4:3479?transport=tcp"],"username":"u","credential":"p"}],"ICETransportPolicy":"relay"}"#).unwrap();
        assert_eq!(mixed.relay_server().unwrap().unwrap().uri.socket_addr(), Some("1.2.3.4:3479".parse().unwrap()));
    }

    #[test]
    fn an_update_keeps_the_endpoint_and_a_token_not_given() {
        let mut config =
            TesterConfig { bearer_token: "t".into(), whip_endpoint: "/whip".into(), ..TesterConfig::default() };
        let uri = TurnUri { host: "127.0.0.1".into(), port: 3478, transport: ServerTransport::Tcp };
        let server = RelayServer::ice_server(&uri, "u", "p");
        let mut posted = TesterConfig::relayed_through(vec![server.clone()]);
        posted.whip_endpoint = "/other".into();
        config.update(posted).unwrap();
        assert_eq!(
            (config.ice_transport_policy, config.ice_servers.as_slice()),
            (TransportPolicy::Relay, &[server][..])
        );
        assert_eq!((config.bearer_token.as_str(), config.whip_endpoint.as_str()), ("t", "/whip"));
        // A refused config changes nothing.
        let before = config.clone();
        assert!(
            config
                .update(TesterConfig { ice_transport_policy: TransportPolicy::Relay, ..TesterConfig::default() })
                .is_err()
        );
        assert_eq!(config, before);
        config.update(TesterConfig::relayed_through(vec![])).unwrap();
        assert_eq!((config.ice_transport_policy, config.ice_servers.len()), (TransportPolicy::All, 0));
    }
}
