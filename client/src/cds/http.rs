//! One-shot GETs (and the WHIP offer's and the tester config's POSTs), each on a fresh HTTP/1.1
//! connection.
//!
//! Why hyper's connection API and not reqwest: a CDS client makes a request or two per run
//! against a plain-HTTP server, so a connection pool, redirects, proxies and TLS would be dead
//! weight; hyper is already in the workspace's dependency tree, so this adds no new crates.
//! Like the Go client, proxy variables are not honoured: the server is usually a port-forward
//! on loopback.

use super::{ClientError, ServerAddress};
use http_body_util::{BodyExt, Full, Limited};
use hyper::body::Bytes;
use hyper::header::{CONTENT_TYPE, HOST, USER_AGENT};
use hyper::{Method, StatusCode};
use hyper_util::rt::TokioIo;
use std::time::Duration;
use tokio::net::TcpStream;
use tokio::time::timeout;
use url::{Position, Url};

/// How long a one-shot request may take.
#[derive(Debug, Clone, Copy)]
pub struct Timeouts {
    /// TCP connect (including name resolution).
    pub connect: Duration,
    /// The whole exchange once connected: request, headers and body.
    pub request: Duration,
}

impl Default for Timeouts {
    fn default() -> Self {
        Timeouts { connect: Duration::from_secs(10), request: Duration::from_secs(30) }
    }
}

/// The largest body read: configs, a license, statuses and client tables are far smaller,
/// and a peer that sends more is not one of ours.
const MAX_BODY: usize = 64 << 20;

/// A complete response; the body is small (configs, a license, statuses).
pub(crate) struct Response {
    pub status: StatusCode,
    /// The body claims to be JSON (the Go client decodes such error bodies as `Error`).
    pub json: bool,
    pub body: Bytes,
}

/// Why a GET got no response, before it is worded for the server it was sent to.
#[derive(Debug)]
pub(crate) enum Failure {
    Connect(std::io::Error),
    Timeout(Duration),
    Protocol(String),
}

impl Failure {
    /// Why, for a message about a server that is not a config discovery server.
    pub(crate) fn reason(self) -> String {
        match self {
            Failure::Connect(e) => super::io_reason(&e),
            Failure::Timeout(after) => format!("no answer within {after:?}"),
            Failure::Protocol(reason) => reason,
        }
    }

    fn for_server(self, server: &ServerAddress) -> ClientError {
        let server = server.to_string();
        match self {
            Failure::Connect(source) => ClientError::Unreachable { server, source },
            Failure::Timeout(after) => ClientError::Timeout { server, after },
            Failure::Protocol(reason) => ClientError::Protocol { server, reason },
        }
    }
}

/// Connects to `server` and GETs `url` (a URL under `server`).
pub(super) async fn get(server: &ServerAddress, url: &Url, timeouts: Timeouts) -> Result<Response, ClientError> {
    fetch(&server.authority(), url, timeouts).await.map_err(|f| f.for_server(server))
}

/// Connects to `authority` (`host:port`) and GETs `url`: the transport under [`get`], also
/// for servers that are not config discovery servers (stunnerd's status).
pub(crate) async fn fetch(authority: &str, url: &Url, timeouts: Timeouts) -> Result<Response, Failure> {
    exchange(authority, url, Method::GET, None, String::new(), timeouts).await
}

/// A GET that names the content type it expects (upstream's icetester refuses its config's
/// GET without `Content-Type: application/json`).
pub(crate) async fn fetch_as(
    authority: &str,
    url: &Url,
    content_type: &'static str,
    timeouts: Timeouts,
) -> Result<Response, Failure> {
    exchange(authority, url, Method::GET, Some(content_type), String::new(), timeouts).await
}

/// Connects to `authority` and POSTs `body` of `content_type` to `url` (a WHIP offer).
pub(crate) async fn post(
    authority: &str,
    url: &Url,
    content_type: &'static str,
    body: String,
    timeouts: Timeouts,
) -> Result<Response, Failure> {
    exchange(authority, url, Method::POST, Some(content_type), body, timeouts).await
}

/// One request on a fresh connection: a GET (empty body), or a POST with its content type and body.
async fn exchange(
    authority: &str,
    url: &Url,
    method: Method,
    content_type: Option<&'static str>,
    body: String,
    timeouts: Timeouts,
) -> Result<Response, Failure> {
    let stream = connect_to(authority, timeouts.connect).await?;
    let exchange = async {
        let (mut sender, conn) = hyper::client::conn::http1::handshake(TokioIo::new(stream)).await?;
        // The connection task ends with the exchange: the request carries no keep-alive reuse.
        tokio::spawn(conn);
        let request = hyper::Request::builder()
            .uri(&url[Position::BeforePath..])
            .header(HOST, authority)
            .header(USER_AGENT, concat!("stunner-gateway-client/", env!("CARGO_PKG_VERSION")));
        let request = match content_type {
            Some(content_type) => request.header(CONTENT_TYPE, content_type),
            None => request,
        };
        let request = request
            .method(method)
            .body(Full::new(Bytes::from(body)))
            .expect("a request with a valid URL is a valid request");
        let response = sender.send_request(request).await?;
        let status = response.status();
        let json = response
            .headers()
            .get(CONTENT_TYPE)
            .and_then(|v| v.to_str().ok())
            .is_some_and(|v| v.to_ascii_lowercase().contains("json"));
        let body = Limited::new(response.into_body(), MAX_BODY)
            .collect()
            .await
            .map_err(|e| Failure::Protocol(format!("reading the body: {e}")))?
            .to_bytes();
        Ok::<_, Failure>(Response { status, json, body })
    };
    match timeout(timeouts.request, exchange).await {
        Ok(result) => result,
        Err(_) => Err(Failure::Timeout(timeouts.request)),
    }
}

impl From<hyper::Error> for Failure {
    fn from(e: hyper::Error) -> Self {
        Failure::Protocol(e.to_string())
    }
}

/// A TCP connection to the server, with errors that name it.
pub(super) async fn connect(server: &ServerAddress, limit: Duration) -> Result<TcpStream, ClientError> {
    connect_to(&server.authority(), limit).await.map_err(|f| f.for_server(server))
}

async fn connect_to(authority: &str, limit: Duration) -> Result<TcpStream, Failure> {
    match timeout(limit, TcpStream::connect(authority)).await {
        Ok(Ok(stream)) => {
            let _ = stream.set_nodelay(true);
            Ok(stream)
        }
        Ok(Err(source)) => Err(Failure::Connect(source)),
        Err(_) => Err(Failure::Timeout(limit)),
    }
}
