//! `stunnerctl icetest`: proves that a Gateway relays. It asks the operator's credential API
//! (`/ice`) for the Gateway's TURN URIs and credentials, allocates on each TURN transport asked
//! for, makes a WebRTC data channel through the allocation to an `icetester` (a WHIP server
//! that echoes), times packets over it and prints upstream's stages, statistics line and
//! candidates; or the stage that failed and what to check, and exits non-zero. Upstream's two
//! tests, in its order: asymmetric ICE over each transport (the tester answers with a host
//! candidate), then symmetric (the tester, told so through its `/config`, allocates on the
//! Gateway too and answers with its relay candidate).
//!
//! This runs against a tester and a Gateway that are already there (`--whip-server`,
//! `--auth-server-address`): the standalone operator with a local stunnerd and icetester, or
//! an installation reached through port-forwards. Without `--whip-server`, `icetest_cluster`
//! deploys the tester and the Gateways into the cluster itself and runs the ICE tests here.

use super::cli::IceTestArgs;
use jiff::Timestamp;
use std::error::Error;
use std::fmt;
use std::net::SocketAddr;
use std::time::{Duration, Instant};
use stunner_gateway::turn_auth::{IceConfig, IceServer};
use stunner_gateway_client::auth_api;
use stunner_gateway_client::cds::Timeouts;
use stunner_gateway_client::ice::candidate::{self, CandidateDesc};
use stunner_gateway_client::ice::error::{LinkError, PeerError, RelayError};
use stunner_gateway_client::ice::link::{Link, LinkEvent};
use stunner_gateway_client::ice::relay::ServerTransport;
use stunner_gateway_client::ice::stats::Stats;
use stunner_gateway_client::ice::tester_config::{RelayServer, TesterConfig};
use stunner_gateway_client::ice::turn_uri::TurnUri;
use stunner_gateway_client::ice::{probe, whip};
use url::Url;

/// How long ICE and DTLS may take to open the data channel once the answer is in.
const CONNECT_TIMEOUT: Duration = Duration::from_secs(15);

/// A TURN transport the test runs over, named as upstream's listener protocols.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TurnTransport {
    Udp,
    Tcp,
}

impl TurnTransport {
    /// upstream's `NewListenerProtocol`, then its icetest's choice: UDP and TCP mean TURN over
    /// them; TLS and DTLS are refused as upstream refuses them.
    pub fn parse(raw: &str) -> Result<TurnTransport, String> {
        match raw.to_ascii_uppercase().as_str() {
            "UDP" | "TURN-UDP" => Ok(TurnTransport::Udp),
            "TCP" | "TURN-TCP" => Ok(TurnTransport::Tcp),
            p @ ("TLS" | "DTLS" | "TURN-TLS" | "TURN-DTLS") => {
                let p = if p.starts_with("TURN-") { p.to_string() } else { format!("TURN-{p}") };
                Err(format!("ICE test is currently not available on TURN transport protocol {p}"))
            }
            _ => Err(format!("invalid protocol: {raw:?}")),
        }
    }

    fn server_transport(self) -> ServerTransport {
        match self {
            TurnTransport::Udp => ServerTransport::Udp,
            TurnTransport::Tcp => ServerTransport::Tcp,
        }
    }
}

/// Upstream's two ICE tests (`ICETestType`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum IceTestType {
    /// Only this side goes through the Gateway; the tester answers with a host candidate.
    Asymmetric,
    /// Both sides do: the tester allocates on the Gateway too.
    Symmetric,
}

impl fmt::Display for IceTestType {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            IceTestType::Asymmetric => "asymmetric",
            IceTestType::Symmetric => "symmetric",
        })
    }
}

impl fmt::Display for TurnTransport {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            TurnTransport::Udp => "TURN-UDP",
            TurnTransport::Tcp => "TURN-TCP",
        })
    }
}

/// The transports asked for, upstream's default (both) when none is.
pub(super) fn transports(protocols: &[String]) -> Result<Vec<TurnTransport>, String> {
    if protocols.is_empty() {
        return Ok(vec![TurnTransport::Udp, TurnTransport::Tcp]);
    }
    protocols.iter().map(|p| TurnTransport::parse(p)).collect()
}

/// A stage that failed: what happened and what to check.
#[derive(Debug)]
pub(super) struct StageError {
    pub(super) error: String,
    diagnostics: String,
}

impl StageError {
    pub(super) fn new(error: impl fmt::Display, diagnostics: impl Into<String>) -> StageError {
        StageError { error: error.to_string(), diagnostics: diagnostics.into() }
    }
}

/// The test failed: the stage has been printed with its error.
#[derive(Debug)]
pub struct Failed;

impl fmt::Display for Failed {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("the ICE test failed")
    }
}

impl Error for Failed {}

/// One TURN server of the Gateway: where, with which credential.
#[derive(Debug, Clone)]
pub(super) struct TurnServer {
    pub(super) addr: SocketAddr,
    username: String,
    password: String,
}

impl TurnServer {
    /// This server as the one ICE server of a tester's config, reached at `host` on the port
    /// and with the credential the dialer uses: the dialer's own address standalone, the
    /// Gateway's Service name in a cluster (upstream's `updateICEServerAddr`).
    pub(super) fn ice_server(&self, transport: TurnTransport, host: &str) -> IceServer {
        let uri = TurnUri { host: host.to_string(), port: self.addr.port(), transport: transport.server_transport() };
        RelayServer::ice_server(&uri, &self.username, &self.password)
    }
}

/// What a successful run over one transport measured.
struct Report {
    stats: Stats,
    local: Vec<CandidateDesc>,
    remote: Vec<CandidateDesc>,
}

/// Runs the stages in order, stopping at the first that fails; Ctrl-C and `--timeout` stop it
/// as upstream's do.
pub async fn run(args: &IceTestArgs, namespace: &str) -> Result<(), Box<dyn Error>> {
    let transports = transports(&args.protocols)?;
    let auth = args.auth_server_address.as_deref().ok_or(
        "with --whip-server, stunnerctl icetest needs --auth-server-address (the operator's credential API); \
         without both it deploys its own tester and Gateways into the cluster",
    )?;
    let whip = args.whip_server.as_deref().ok_or("stunnerctl icetest needs --whip-server (an icetester's WHIP URL)")?;
    let deadline = Instant::now() + args.timeout;
    let stages = stages(args, auth, whip, namespace, &transports, deadline);
    tokio::select! {
        result = stages => result,
        _ = tokio::time::sleep_until(tokio::time::Instant::from_std(deadline)) => {
            println!("\nICE tester timed out after {}", go_duration(args.timeout));
            Err(Failed.into())
        }
        _ = tokio::signal::ctrl_c() => {
            println!("\nICE tester stopped due to user interrupt");
            Err(Failed.into())
        }
    }
}

async fn stages(
    args: &IceTestArgs,
    auth: &str,
    whip: &str,
    namespace: &str,
    transports: &[TurnTransport],
    deadline: Instant,
) -> Result<(), Box<dyn Error>> {
    let timeouts = Timeouts { connect: Duration::from_secs(10), request: Duration::from_secs(30) };
    stage("Initializing", None, async { check_whip_url(whip) }).await?;
    let ice = stage("Checking installation", None, async {
        auth_api::ice_config(auth, namespace, args.gateway.as_deref(), timeouts).await.map_err(|e| {
            StageError::new(
                e,
                "check --auth-server-address and that the operator serves its credential API \
                 (--auth-bind-address, or the chart's stunner-auth Service), and that the Gateway exists \
                 in the namespace (-n)",
            )
        })
    })
    .await?;
    let servers = stage("Checking Gateway", None, async { turn_servers(&ice, transports) }).await?;
    let servers: Vec<_> = transports.iter().copied().zip(servers).collect();
    // Standalone, the tester reaches the Gateway where this side does.
    let tester_servers =
        |transport, server: &TurnServer| vec![server.ice_server(transport, &server.addr.ip().to_string())];
    ice_tests(args, whip, &servers, tester_servers, timeouts, deadline).await
}

/// Upstream's ICE tests in its order: asymmetric over each transport, then symmetric over
/// each, where the tester allocates on the ICE servers `tester_servers` gives for the
/// transport (where the tester reaches the Gateway: the dialer's own address standalone, the
/// Gateway's Service in a cluster). Stops at the first that fails.
pub(super) async fn ice_tests(
    args: &IceTestArgs,
    whip: &str,
    servers: &[(TurnTransport, TurnServer)],
    tester_servers: impl Fn(TurnTransport, &TurnServer) -> Vec<IceServer>,
    timeouts: Timeouts,
    deadline: Instant,
) -> Result<(), Box<dyn Error>> {
    for kind in [IceTestType::Asymmetric, IceTestType::Symmetric] {
        for (transport, server) in servers {
            let label = format!("{kind} ICE test over {transport}");
            let relay_through = match kind {
                IceTestType::Asymmetric => Vec::new(),
                IceTestType::Symmetric => tester_servers(*transport, server),
            };
            let test = async {
                configure_tester(whip, relay_through, timeouts).await?;
                ice_test(kind, *transport, server, whip, args, timeouts, deadline).await
            };
            let report = stage("Running", Some(&label), test).await?;
            print_report(&report);
        }
    }
    Ok(())
}

/// Sets the tester's `/config` as upstream's icetest does before each test: relayed through
/// `servers` (policy `relay`), or host candidates when there are none; and reads it back.
async fn configure_tester(whip: &str, servers: Vec<IceServer>, timeouts: Timeouts) -> Result<(), StageError> {
    let config = TesterConfig::relayed_through(servers);
    let set = whip::configure(whip, &config, timeouts).await.map_err(|e| {
        StageError::new(
            format!("could not update config on ICE tester backend: {e}"),
            "check that the icetester runs and --whip-server points at it (its /config is beside its WHIP endpoint), \
             and the tester's log",
        )
    })?;
    if (&set.ice_servers, set.ice_transport_policy) != (&config.ice_servers, config.ice_transport_policy) {
        return Err(StageError::new(
            "the ICE tester backend reports another config than the one set",
            "another icetest may be using the same tester at once: run one at a time",
        ));
    }
    Ok(())
}

/// Prints a stage's line, runs it, and ends the line with `completed` or the error.
pub(super) async fn stage<T>(
    name: &str,
    over: Option<&str>,
    body: impl Future<Output = Result<T, StageError>>,
) -> Result<T, Box<dyn Error>> {
    use std::io::Write;
    let what = match over {
        Some(over) => format!("{name} {over}"),
        None => name.to_string(),
    };
    print!("{}: {what}... ", Timestamp::now().strftime("%d %b %y %H:%M UTC"));
    let _ = std::io::stdout().flush();
    match body.await {
        Ok(value) => {
            println!("completed");
            Ok(value)
        }
        Err(e) => {
            println!("error");
            println!("Error: {:?}", e.error);
            println!("TimeStamp: {}", Timestamp::now().strftime("%Y-%m-%d %H:%M:%S"));
            println!("Diagnostics: {}", e.diagnostics);
            Err(Failed.into())
        }
    }
}

fn check_whip_url(whip: &str) -> Result<(), StageError> {
    match Url::parse(whip) {
        Ok(url) if url.scheme() == "http" && url.host_str().is_some() => Ok(()),
        _ => Err(StageError::new(
            format!("invalid WHIP server URL {whip:?}"),
            "--whip-server takes the tester's URL, e.g. http://127.0.0.1:8089/whip",
        )),
    }
}

/// The Gateway's TURN server for each transport, from the URIs of the ICE config.
pub(super) fn turn_servers(ice: &IceConfig, transports: &[TurnTransport]) -> Result<Vec<TurnServer>, StageError> {
    transports
        .iter()
        .map(|t| {
            ice.ice_servers
                .iter()
                .find_map(|server| {
                    server.urls.iter().find_map(|uri| turn_addr(uri, *t)).map(|addr| TurnServer {
                        addr,
                        username: server.username.clone(),
                        password: server.credential.clone(),
                    })
                })
                .ok_or_else(|| {
                    let uris: Vec<&str> =
                        ice.ice_servers.iter().flat_map(|s| s.urls.iter().map(String::as_str)).collect();
                    StageError::new(
                        format!("no {t} URI with a public address in the ICE config (got {uris:?})"),
                        format!(
                            "the Gateway needs a {t} listener ({} listener) and a public address: check \
                             `stunnerctl gateway-status` (the Gateway's addresses and listeners) and the Gateway's \
                             Service (no external IP yet?)",
                            t.server_transport().as_str().to_uppercase()
                        ),
                    )
                })
        })
        .collect()
}

/// `turn:HOST:PORT?transport=udp` with an IP literal for host.
fn turn_addr(uri: &str, transport: TurnTransport) -> Option<SocketAddr> {
    TurnUri::parse(uri).ok().filter(|u| u.transport == transport.server_transport())?.socket_addr()
}

/// Allocation, offer/answer, the data channel, the measurement: the first that fails names
/// what to check. The tester's config for `kind` is set already.
async fn ice_test(
    kind: IceTestType,
    transport: TurnTransport,
    server: &TurnServer,
    whip_url: &str,
    args: &IceTestArgs,
    timeouts: Timeouts,
    deadline: Instant,
) -> Result<Report, StageError> {
    let io = |e: std::io::Error| {
        StageError::new(
            format!("cannot reach the TURN server {} over {}: {e}", server.addr, transport),
            "check that stunnerd runs the Gateway's config (`stunnerctl status`) and that its public address is reachable",
        )
    };
    let mut link =
        Link::relayed(transport.server_transport(), server.addr, &server.username, &server.password, timeouts.connect)
            .await
            .map_err(io)?;
    let local = link.local_addr().map_err(io)?;

    let allocation_check = "check the Gateway's credentials (`stunnerctl auth`, the GatewayConfig's authType, \
                            userName and password or secret) and that stunnerd runs the config (`stunnerctl status`)";
    let alloc_deadline = deadline.min(Instant::now() + CONNECT_TIMEOUT);
    let relayed = match link.allocated(alloc_deadline).await {
        Ok(Some(addr)) => addr,
        Ok(None) => {
            return Err(StageError::new(
                format!("no relay candidate: the TURN server {} did not answer the allocation", server.addr),
                allocation_check,
            ));
        }
        Err(LinkError::Peer(PeerError::Relay(e @ RelayError::Refused(_)))) => {
            return Err(StageError::new(format!("credentials refused: {e}"), allocation_check));
        }
        Err(e) => return Err(StageError::new(format!("no relay candidate: {e}"), allocation_check)),
    };

    let (offer, pending) = link.peer.offer().map_err(|e| StageError::new(e, "a bug: please report it"))?;
    let answer = whip::exchange(whip_url, offer, timeouts).await.map_err(|e| match kind {
        IceTestType::Asymmetric => {
            StageError::new(e, "check that the icetester runs and --whip-server points at its WHIP endpoint")
        }
        IceTestType::Symmetric => StageError::new(
            e,
            "the tester answers from its own allocation on the Gateway: if it could not allocate, check that \
             the tester reaches the Gateway's TURN server at the address it was given (GET its /config) and \
             the Gateway's credentials; else that the icetester runs at --whip-server",
        ),
    })?;
    link.peer.accept_answer(pending, &answer).map_err(|e| {
        StageError::new(e, "the tester's answer is not one this test can use: check the tester's version")
    })?;
    let mut remote = candidate::from_sdp(&answer);

    let no_route = match kind {
        IceTestType::Asymmetric => {
            "no backend route: ICE checks through the relay got no answer. Check that a UDPRoute attached \
             to the Gateway has the tester among its backends (`stunnerctl config`, the route's status) \
             and that the tester's address is reachable from stunnerd"
        }
        IceTestType::Symmetric => {
            "no route between the two allocations: ICE checks from relay to relay got no answer. Check \
             that the Gateway's routes let its allocations reach the tester's relayed address (an address \
             of the dataplane itself: `stunnerctl config`, the route's backends) and that the asymmetric \
             test over this transport passed"
        }
    };
    let open_deadline = deadline.min(Instant::now() + CONNECT_TIMEOUT);
    loop {
        match link.next(open_deadline).await {
            Ok(LinkEvent::Open) => break,
            Ok(LinkEvent::Message(_)) => {}
            Ok(LinkEvent::Closed | LinkEvent::Deadline) => {
                return Err(StageError::new("the data channel did not open", no_route));
            }
            Err(e) => return Err(StageError::new(format!("the data channel did not open: {e}"), no_route)),
        }
    }

    let stats = probe::measure(&mut link, args.packet_rate, args.duration)
        .await
        .map_err(|e| StageError::new(format!("the probe failed: {e}"), no_route))?;
    if stats.received() == 0 {
        return Err(StageError::new(
            format!("data channel silent: none of {} packets came back", stats.sent),
            "the channel opened but nothing echoed: check the tester's log and stunnerd's (packets dropped?)",
        ));
    }
    let selected = link.peer.remote();
    for c in &mut remote {
        c.selected = c.address.is_some() && c.address == selected;
    }
    let local = vec![CandidateDesc {
        text: candidate::describe("relay", relayed, Some(local)),
        address: Some(relayed),
        selected: true,
    }];
    Ok(Report { stats, local, remote })
}

fn print_report(report: &Report) {
    println!("\t{}", report.stats.line());
    for (name, candidates) in [("LocalICECandidates", &report.local), ("RemoteICECandidates", &report.remote)] {
        println!("\t{name}:");
        for c in candidates {
            println!("\t  {}{}", if c.selected { "* " } else { "  " }, c.text);
        }
    }
}

/// A duration as Go prints it (`5m0s`, `30s`), for upstream's timeout line.
pub(super) fn go_duration(d: Duration) -> String {
    let s = d.as_secs();
    match (s / 3600, s % 3600 / 60, s % 60) {
        (0, 0, s) => format!("{s}s"),
        (0, m, s) => format!("{m}m{s}s"),
        (h, m, s) => format!("{h}h{m}m{s}s"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn transports_as_upstream_names_them() {
        assert_eq!(TurnTransport::parse("udp"), Ok(TurnTransport::Udp));
        assert_eq!(TurnTransport::parse("TURN-TCP"), Ok(TurnTransport::Tcp));
        assert_eq!(
            TurnTransport::parse("tls"),
            Err("ICE test is currently not available on TURN transport protocol TURN-TLS".into())
        );
        assert!(TurnTransport::parse("sctp").is_err());
    }

    #[test]
    fn turn_uris_give_the_server_of_their_transport() {
        let udp = "turn:127.0.0.1:3478?transport=udp";
        assert_eq!(turn_addr(udp, TurnTransport::Udp), Some("127.0.0.1:3478".parse().unwrap()));
        assert_eq!(turn_addr(udp, TurnTransport::Tcp), None);
        assert_eq!(turn_addr("turn:[::1]:3479?transport=tcp", TurnTransport::Tcp), Some("[::1]:3479".parse().unwrap()));
        assert_eq!(turn_addr("turn:stunner.example.com:3478?transport=udp", TurnTransport::Udp), None);
        assert_eq!(go_duration(Duration::from_secs(300)), "5m0s");
    }

    /// The tester is told the server the dialer uses: the same port, transport and credential,
    /// at the host it reaches (standalone the same address; IPv6 bracketed).
    #[test]
    fn the_testers_ice_server_is_the_dialers() {
        let server = TurnServer { addr: "[::1]:3478".parse().unwrap(), username: "u".into(), password: "p".into() };
        for transport in [TurnTransport::Udp, TurnTransport::Tcp] {
            let ice = server.ice_server(transport, &server.addr.ip().to_string());
            assert_eq!(ice.urls.len(), 1);
            assert_eq!(turn_addr(&ice.urls[0], transport), Some(server.addr), "{ice:?}");
            assert_eq!((ice.username.as_str(), ice.credential.as_str()), ("u", "p"));
        }
        let ice = server.ice_server(TurnTransport::Tcp, "icetest-tcp-gateway.icetest.svc.cluster.local");
        assert_eq!(ice.urls, ["turn:icetest-tcp-gateway.icetest.svc.cluster.local:3478?transport=tcp"]);
    }
}
