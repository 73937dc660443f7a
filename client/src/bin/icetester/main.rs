//! `icetester`: the far end of `stunnerctl icetest`, a WHIP server that answers each offer with
//! a WebRTC peer and echoes back whatever arrives on its data channel. Upstream's `icetester`
//! (github.com/l7mp/stunner, cmd/icetester) in Rust: its `--addr` (default `:8089`), its
//! `WHIP_ENDPOINT` (default `/whip`) and `BEARER_TOKEN`, `POST` with `application/sdp`,
//! `201 Created` with a `Location`. `ICE_SERVERS` and `ICE_TRANSPORT_POLICY` (upstream's
//! symmetric mode, where the tester too goes through TURN) are refused with a message: this
//! tester answers with a host candidate only (docs/compatibility.md).
//!
//! The host candidate is the address the offer arrived at (a pod's IP in a cluster, loopback on
//! a laptop), on a fresh UDP port per session. Sessions are bounded in number and lifetime.

#![forbid(unsafe_code)] // none needed (see [workspace.lints] in Cargo.toml)

use anyhow::{Context, bail};
use clap::Parser;
use http_body_util::{BodyExt, Full, Limited};
use hyper::body::{Bytes, Incoming};
use hyper::header::{AUTHORIZATION, CONTENT_TYPE, LOCATION};
use hyper::{Method, Request, Response, StatusCode};
use hyper_util::rt::TokioIo;
use std::net::SocketAddr;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};
use stunner_gateway_client::ice::link::{Link, Socket};
use stunner_gateway_client::ice::peer::Peer;
use stunner_gateway_client::ice::probe;
use stunner_gateway_client::ice::whip::SDP_CONTENT_TYPE;
use tokio::net::{TcpListener, UdpSocket};
use tokio::sync::Semaphore;

/// The largest offer read: a data-channel offer is a few hundred bytes.
const MAX_OFFER: usize = 64 * 1024;
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
    /// A bearer token WHIP requests must carry.
    #[arg(long, env = "BEARER_TOKEN", hide_env_values = true)]
    bearer_token: Option<String>,
    /// Longest a session lives: the echo stops then even if the peer stays.
    #[arg(long, value_parser = humantime_secs, default_value = "600")]
    session_timeout: Duration,
}

fn humantime_secs(raw: &str) -> Result<Duration, String> {
    raw.parse::<u64>().map(Duration::from_secs).map_err(|_| format!("'{raw}': expected seconds"))
}

struct Server {
    endpoint: String,
    token: Option<String>,
    session_timeout: Duration,
    sessions: Arc<Semaphore>,
    next_id: AtomicU64,
}

#[tokio::main(flavor = "current_thread")]
async fn main() -> anyhow::Result<()> {
    let cli = Cli::parse();
    for refused in ["ICE_SERVERS", "ICE_TRANSPORT_POLICY"] {
        if std::env::var_os(refused).is_some_and(|v| !v.is_empty()) {
            bail!("{refused} is not supported: this tester answers with a host candidate only (no symmetric ICE)");
        }
    }
    if !cli.whip_endpoint.starts_with('/') {
        bail!("WHIP_ENDPOINT must start with '/': {:?}", cli.whip_endpoint);
    }
    let addr = if cli.addr.starts_with(':') { format!("0.0.0.0{}", cli.addr) } else { cli.addr.clone() };
    let listener = TcpListener::bind(&addr).await.with_context(|| format!("cannot listen on {addr}"))?;
    // Tests read the bound address (with `--addr 127.0.0.1:0`) from this line.
    println!("icetester: WHIP server listening on http://{}{}", listener.local_addr()?, cli.whip_endpoint);
    let server = Arc::new(Server {
        endpoint: cli.whip_endpoint,
        token: cli.bearer_token,
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

async fn handle(server: Arc<Server>, local: SocketAddr, req: Request<Incoming>) -> Result<Reply, hyper::Error> {
    let path = req.uri().path().trim_end_matches('/');
    if path != server.endpoint.trim_end_matches('/') {
        return Ok(reply(StatusCode::NOT_FOUND, "404 page not found"));
    }
    if req.method() != Method::POST {
        return Ok(reply(StatusCode::METHOD_NOT_ALLOWED, "only POST"));
    }
    if let Some(token) = &server.token {
        let sent = req.headers().get(AUTHORIZATION).and_then(|v| v.to_str().ok());
        if sent != Some(&format!("Bearer {token}")) {
            return Ok(reply(StatusCode::UNAUTHORIZED, "unauthorized WHIP request"));
        }
    }
    if req.headers().get(CONTENT_TYPE).and_then(|v| v.to_str().ok()) != Some(SDP_CONTENT_TYPE) {
        return Ok(reply(StatusCode::BAD_REQUEST, "invalid WHIP request, expected Content-Type=application/sdp"));
    }
    let Ok(permit) = server.sessions.clone().try_acquire_owned() else {
        return Ok(reply(StatusCode::SERVICE_UNAVAILABLE, "too many sessions"));
    };
    let body = match Limited::new(req.into_body(), MAX_OFFER).collect().await {
        Ok(body) => body.to_bytes(),
        Err(_) => return Ok(reply(StatusCode::PAYLOAD_TOO_LARGE, "the offer is too large or was cut off")),
    };
    let offer = String::from_utf8_lossy(&body);
    let (link, answer) = match session(local, &offer).await {
        Ok(started) => started,
        Err(e) => return Ok(reply(StatusCode::BAD_REQUEST, &format!("cannot answer the offer: {e:#}"))),
    };
    let id = server.next_id.fetch_add(1, Ordering::Relaxed);
    let deadline = Instant::now() + server.session_timeout;
    // The permit goes with the session: it is held until the echo ends.
    tokio::spawn(async move {
        let mut link = link;
        let _ = probe::echo(&mut link, deadline).await;
        drop(permit);
    });
    let mut r = Response::new(Full::new(Bytes::from(answer)));
    *r.status_mut() = StatusCode::CREATED;
    r.headers_mut().insert(CONTENT_TYPE, SDP_CONTENT_TYPE.parse().expect("a valid header value"));
    if let Ok(location) = format!("{}/{id}", server.endpoint.trim_end_matches('/')).parse() {
        r.headers_mut().insert(LOCATION, location);
    }
    Ok(r)
}

/// A peer on a fresh UDP port of the address the offer came in on, and its answer.
async fn session(local: SocketAddr, offer: &str) -> anyhow::Result<(Link, String)> {
    let socket = UdpSocket::bind(SocketAddr::new(local.ip(), 0)).await.context("binding a UDP port")?;
    let mut peer = Peer::host(socket.local_addr()?, Instant::now())?;
    let answer = peer.answer(offer)?;
    Ok((Link::new(peer, Socket::Udp(socket)), answer))
}
