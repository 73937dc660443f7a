//! One WHIP session: the offer in, a peer that answers it and echoes its data channel until
//! the peer goes away. The peer's one candidate is, by the config in force when the offer
//! arrives, a host one (a fresh UDP port on the address the offer came in on: a pod's IP in a
//! cluster, loopback on a laptop) or, with policy `relay`, an allocation on the config's TURN
//! server (upstream's symmetric ICE test: the tester too goes through the Gateway).

use super::{Reply, Server, reply};
use anyhow::Context;
use http_body_util::{BodyExt, Full, Limited};
use hyper::body::{Bytes, Incoming};
use hyper::header::{CONTENT_TYPE, LOCATION};
use hyper::{Method, Request, Response, StatusCode};
use std::net::SocketAddr;
use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};
use stunner_gateway_client::ice::link::{Link, Socket};
use stunner_gateway_client::ice::peer::Peer;
use stunner_gateway_client::ice::probe;
use stunner_gateway_client::ice::tester_config::{RelayServer, TesterConfig};
use stunner_gateway_client::ice::whip::SDP_CONTENT_TYPE;
use tokio::net::UdpSocket;

/// The largest offer read: a data-channel offer is a few hundred bytes.
const MAX_OFFER: usize = 64 * 1024;
/// How long resolving the TURN server, connecting to it and allocating may take together.
const ALLOCATE_TIMEOUT: Duration = Duration::from_secs(10);

/// Answers the offer in `req` as `config` (the one in force when it arrived) says.
pub(super) async fn handle(server: &Server, config: &TesterConfig, local: SocketAddr, req: Request<Incoming>) -> Reply {
    if req.method() != Method::POST {
        return reply(StatusCode::METHOD_NOT_ALLOWED, "only POST");
    }
    if req.headers().get(CONTENT_TYPE).and_then(|v| v.to_str().ok()) != Some(SDP_CONTENT_TYPE) {
        return reply(StatusCode::BAD_REQUEST, "invalid WHIP request, expected Content-Type=application/sdp");
    }
    let Ok(permit) = server.sessions.clone().try_acquire_owned() else {
        return reply(StatusCode::SERVICE_UNAVAILABLE, "too many sessions");
    };
    let body = match Limited::new(req.into_body(), MAX_OFFER).collect().await {
        Ok(body) => body.to_bytes(),
        Err(_) => return reply(StatusCode::PAYLOAD_TOO_LARGE, "the offer is too large or was cut off"),
    };
    let offer = String::from_utf8_lossy(&body);
    // The config was checked when it was set; a failure here is a bug, answered as one.
    let relay = match config.relay_server() {
        Ok(relay) => relay,
        Err(e) => return reply(StatusCode::INTERNAL_SERVER_ERROR, &format!("the config cannot relay: {e}")),
    };
    let started = match &relay {
        None => {
            host(local, &offer).await.map_err(|e| (StatusCode::BAD_REQUEST, format!("cannot answer the offer: {e:#}")))
        }
        Some(relay) => relayed(relay, &offer).await,
    };
    let (link, answer) = match started {
        Ok(started) => started,
        Err((status, message)) => {
            eprintln!("icetester: {message}");
            return reply(status, &message);
        }
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
    if let Ok(location) = format!("{}/{id}", config.whip_endpoint.trim_end_matches('/')).parse() {
        r.headers_mut().insert(LOCATION, location);
    }
    r
}

/// A peer on a fresh UDP port of the address the offer came in on, and its answer.
async fn host(local: SocketAddr, offer: &str) -> anyhow::Result<(Link, String)> {
    let socket = UdpSocket::bind(SocketAddr::new(local.ip(), 0)).await.context("binding a UDP port")?;
    let mut peer = Peer::host(socket.local_addr()?, Instant::now())?;
    let answer = peer.answer(offer)?;
    Ok((Link::new(peer, Socket::Udp(socket)), answer))
}

/// A peer on an allocation on `relay`, and its answer with the relayed candidate. Failing to
/// allocate is the TURN server's doing, `502 Bad Gateway`, said as such; a bad offer is `400`.
async fn relayed(relay: &RelayServer, offer: &str) -> Result<(Link, String), (StatusCode, String)> {
    let deadline = Instant::now() + ALLOCATE_TIMEOUT;
    let failed = |reason: String| {
        (StatusCode::BAD_GATEWAY, format!("the tester could not allocate a relay on {}: {reason}", relay.text))
    };
    let addr = match tokio::time::timeout(ALLOCATE_TIMEOUT, relay.uri.resolve()).await {
        Ok(Ok(addr)) => addr,
        Ok(Err(e)) => return Err(failed(format!("cannot resolve {}: {e}", relay.uri.host))),
        Err(_) => return Err(failed(format!("resolving {} took over {ALLOCATE_TIMEOUT:?}", relay.uri.host))),
    };
    let left = deadline.saturating_duration_since(Instant::now());
    let mut link = Link::relayed(relay.uri.transport, addr, &relay.username, &relay.password, left)
        .await
        .map_err(|e| failed(format!("cannot reach {addr}: {e}")))?;
    match link.allocated(deadline).await {
        Ok(Some(_)) => {}
        Ok(None) => return Err(failed(format!("no answer from {addr} within {ALLOCATE_TIMEOUT:?}"))),
        Err(e) => return Err(failed(e.to_string())),
    }
    let answer =
        link.peer.answer(offer).map_err(|e| (StatusCode::BAD_REQUEST, format!("cannot answer the offer: {e}")))?;
    Ok((link, answer))
}
