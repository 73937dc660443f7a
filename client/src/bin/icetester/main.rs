//! `icetester`: the far end of `stunnerctl icetest`, a WHIP server that answers each offer with
//! a WebRTC peer and echoes back whatever arrives on its data channel. Upstream's `icetester`
//! (github.com/l7mp/stunner, cmd/icetester) in Rust: its `--addr` (default `:8089`), its
//! `WHIP_ENDPOINT` (default `/whip`), `BEARER_TOKEN`, `ICE_SERVERS` and `ICE_TRANSPORT_POLICY`,
//! `POST` with `application/sdp`, `201 Created` with a `Location`, and its `/config` endpoint
//! ([`config_api`]) that switches it between host candidates and relay candidates (upstream's
//! symmetric ICE test, where the tester too allocates on the Gateway: [`session`]).
//!
//! Sessions are bounded in number and lifetime; request bodies in size.

#![forbid(unsafe_code)] // none needed (see [workspace.lints] in Cargo.toml)

mod config_api;
mod session;

use anyhow::{Context, bail};
use clap::Parser;
use http_body_util::Full;
use hyper::body::{Bytes, Incoming};
use hyper::header::AUTHORIZATION;
use hyper::{Request, Response, StatusCode};
use hyper_util::rt::TokioIo;
use std::net::SocketAddr;
use std::sync::atomic::AtomicU64;
use std::sync::{Arc, Mutex};
use std::time::Duration;
use stunner_gateway::turn_auth::IceServer;
use stunner_gateway_client::ice::tester_config::{TesterConfig, TransportPolicy};
use stunner_gateway_client::ice::whip::CONFIG_PATH;
use tokio::net::TcpListener;
use tokio::sync::Semaphore;

/// Sessions at once: a test makes one per transport and mode.
const MAX_SESSIONS: usize = 64;
/// How long an HTTP request may take to arrive.
const REQUEST_TIMEOUT: Duration = Duration::from_secs(10);

/// A WHIP server that echoes WebRTC data-channel messages.
#[derive(Debug, Parser)]
#[command(name = "icetester", version)]
struct Cli {
    /// WHIP server listener address.
    #[arg(short, long, default_value = ":8089")]
    addr: String,
    /// The WHIP API path.
    #[arg(long, env = "WHIP_ENDPOINT", default_value = "/whip")]
    whip_endpoint: String,
    /// A bearer token WHIP and config requests must carry.
    #[arg(long, env = "BEARER_TOKEN", hide_env_values = true)]
    bearer_token: Option<String>,
    /// ICE servers to allocate on, a JSON list of RTCIceServers (used with policy relay).
    #[arg(long, env = "ICE_SERVERS", hide_env_values = true)]
    ice_servers: Option<String>,
    /// ICE transport policy: all (answer with a host candidate) or relay (a TURN allocation's).
    #[arg(long, env = "ICE_TRANSPORT_POLICY", value_parser = policy)]
    ice_transport_policy: Option<TransportPolicy>,
    /// Longest a session lives: the echo stops then even if the peer stays.
    #[arg(long, value_parser = humantime_secs, default_value = "600")]
    session_timeout: Duration,
}

fn humantime_secs(raw: &str) -> Result<Duration, String> {
    raw.parse::<u64>().map(Duration::from_secs).map_err(|_| format!("'{raw}': expected seconds"))
}

fn policy(raw: &str) -> Result<TransportPolicy, String> {
    [TransportPolicy::All, TransportPolicy::Relay]
        .into_iter()
        .find(|p| p.as_str() == raw)
        .ok_or_else(|| format!("'{raw}': expected all or relay"))
}

/// What every request handler shares.
struct Server {
    /// The config `/config` sets; each session reads it when it starts.
    config: Mutex<TesterConfig>,
    session_timeout: Duration,
    sessions: Arc<Semaphore>,
    next_id: AtomicU64,
}

impl Server {
    fn config(&self) -> TesterConfig {
        self.config.lock().unwrap_or_else(|e| e.into_inner()).clone()
    }
}

/// Whether `req` carries the bearer token of `config`, when one is set.
fn authorized(config: &TesterConfig, req: &Request<Incoming>) -> bool {
    let token = &config.bearer_token;
    token.is_empty() || {
        let sent = req.headers().get(AUTHORIZATION).and_then(|v| v.to_str().ok());
        sent == Some(&format!("Bearer {token}"))
    }
}

/// The config the flags and environment give, refused at start when it cannot relay.
fn initial_config(cli: &Cli) -> anyhow::Result<TesterConfig> {
    if !cli.whip_endpoint.starts_with('/') {
        bail!("WHIP_ENDPOINT must start with '/': {:?}", cli.whip_endpoint);
    }
    let ice_servers: Vec<IceServer> = match cli.ice_servers.as_deref().filter(|s| !s.is_empty()) {
        Some(json) => serde_json::from_str(json).context("ICE_SERVERS is not a JSON list of ICE servers")?,
        None => Vec::new(),
    };
    let config = TesterConfig {
        ice_servers,
        ice_transport_policy: cli.ice_transport_policy.unwrap_or_default(),
        bearer_token: cli.bearer_token.clone().unwrap_or_default(),
        whip_endpoint: cli.whip_endpoint.clone(),
    };
    config.relay_server().context("ICE_SERVERS and ICE_TRANSPORT_POLICY")?;
    Ok(config)
}

#[tokio::main(flavor = "current_thread")]
async fn main() -> anyhow::Result<()> {
    let cli = Cli::parse();
    let config = initial_config(&cli)?;
    let addr = if cli.addr.starts_with(':') { format!("0.0.0.0{}", cli.addr) } else { cli.addr.clone() };
    let listener = TcpListener::bind(&addr).await.with_context(|| format!("cannot listen on {addr}"))?;
    // Tests read the bound address (with `--addr 127.0.0.1:0`) from this line.
    println!("icetester: WHIP server listening on http://{}{}", listener.local_addr()?, cli.whip_endpoint);
    let server = Arc::new(Server {
        config: Mutex::new(config),
        session_timeout: cli.session_timeout,
        sessions: Arc::new(Semaphore::new(MAX_SESSIONS)),
        next_id: AtomicU64::new(1),
    });
    loop {
        tokio::select! {
            _ = tokio::signal::ctrl_c() => return Ok(()),
            accepted = listener.accept() => {
                let Ok((stream, _)) = accepted else { continue };
                let Ok(local) = stream.local_addr() else { continue };
                let server = server.clone();
                tokio::spawn(async move {
                    let service = hyper::service::service_fn(move |req| handle(server.clone(), local, req));
                    let conn = hyper::server::conn::http1::Builder::new()
                        .header_read_timeout(REQUEST_TIMEOUT)
                        .timer(hyper_util::rt::TokioTimer::new())
                        .serve_connection(TokioIo::new(stream), service);
                    let _ = conn.await;
                });
            }
        }
    }
}

type Reply = Response<Full<Bytes>>;

fn reply(status: StatusCode, text: &str) -> Reply {
    let mut r = Response::new(Full::new(Bytes::from(format!("{text}\n"))));
    *r.status_mut() = status;
    r
}

/// Routes: the config, the WHIP endpoint; both behind the bearer token when one is set.
async fn handle(server: Arc<Server>, local: SocketAddr, req: Request<Incoming>) -> Result<Reply, hyper::Error> {
    // One look at the config per request: its endpoint, its token and, for an offer, how the
    // session answers.
    let config = server.config();
    let path = req.uri().path().trim_end_matches('/');
    let is_config = path == CONFIG_PATH;
    if !is_config && path != config.whip_endpoint.trim_end_matches('/') {
        return Ok(reply(StatusCode::NOT_FOUND, "404 page not found"));
    }
    if !authorized(&config, &req) {
        return Ok(reply(StatusCode::UNAUTHORIZED, "unauthorized request"));
    }
    if is_config {
        Ok(config_api::handle(&server, req).await)
    } else {
        Ok(session::handle(&server, &config, local, req).await)
    }
}
