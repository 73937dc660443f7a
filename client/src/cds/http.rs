//! One-shot GETs, each on a fresh HTTP/1.1 connection.
//!
//! Why hyper's connection API and not reqwest: a CDS client makes a request or two per run
//! against a plain-HTTP server, so a connection pool, redirects, proxies and TLS would be dead
//! weight; hyper is already in the workspace's dependency tree, so this adds no new crates.
//! Like the Go client, proxy variables are not honoured: the server is usually a port-forward
//! on loopback.

use super::{ClientError, ServerAddress};
use http_body_util::{BodyExt, Empty};
use hyper::StatusCode;
use hyper::body::Bytes;
use hyper::header::{CONTENT_TYPE, HOST, USER_AGENT};
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

/// A complete response; the body is small (configs, a license, statuses).
pub(super) struct Response {
    pub status: StatusCode,
    /// The body claims to be JSON (the Go client decodes such error bodies as `Error`).
    pub json: bool,
    pub body: Bytes,
}

/// Connects to `server` and GETs `url` (a URL under `server`).
pub(super) async fn get(server: &ServerAddress, url: &Url, timeouts: Timeouts) -> Result<Response, ClientError> {
    let stream = connect(server, timeouts.connect).await?;
    let exchange = async {
        let (mut sender, conn) = hyper::client::conn::http1::handshake(TokioIo::new(stream)).await?;
        // The connection task ends with the exchange: the request carries no keep-alive reuse.
        tokio::spawn(conn);
        let request = hyper::Request::get(&url[Position::BeforePath..])
            .header(HOST, server.authority())
            .header(USER_AGENT, concat!("stunner-gateway-client/", env!("CARGO_PKG_VERSION")))
            .body(Empty::<Bytes>::new())
            .expect("a GET with a valid URL is a valid request");
        let response = sender.send_request(request).await?;
        let status = response.status();
        let json = response
            .headers()
            .get(CONTENT_TYPE)
            .and_then(|v| v.to_str().ok())
            .is_some_and(|v| v.to_ascii_lowercase().contains("json"));
        let body = response.into_body().collect().await?.to_bytes();
        Ok::<_, hyper::Error>(Response { status, json, body })
    };
    match timeout(timeouts.request, exchange).await {
        Ok(Ok(response)) => Ok(response),
        Ok(Err(e)) => Err(ClientError::Protocol { server: server.to_string(), reason: e.to_string() }),
        Err(_) => Err(ClientError::Timeout { server: server.to_string(), after: timeouts.request }),
    }
}

/// A TCP connection to the server, with errors that name it.
pub(super) async fn connect(server: &ServerAddress, limit: Duration) -> Result<TcpStream, ClientError> {
    match timeout(limit, TcpStream::connect(server.authority())).await {
        Ok(Ok(stream)) => {
            let _ = stream.set_nodelay(true);
            Ok(stream)
        }
        Ok(Err(source)) => Err(ClientError::Unreachable { server: server.to_string(), source }),
        Err(_) => Err(ClientError::Timeout { server: server.to_string(), after: limit }),
    }
}
