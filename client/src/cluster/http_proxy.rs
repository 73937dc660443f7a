//! HTTP to one port of one pod through the API server's pod proxy
//! (`/api/v1/namespaces/NS/pods/NAME:PORT/proxy/PATH`), served on an ephemeral loopback port,
//! so that a plain HTTP client (`stunnerctl icetest`'s WHIP client) reaches a pod from outside
//! the cluster with only a kubeconfig.
//!
//! Why not a port-forward: the kubelet carries a port-forward to the pod's loopback, so the pod
//! sees the request arrive at 127.0.0.1, and a WHIP server that answers with the address the
//! offer came in on (our icetester) would offer a candidate no dataplane can reach. Through the
//! pod proxy the API server connects to the pod's IP, which is the address a TURN relay in the
//! cluster reaches it at.
//!
//! Each request is read whole and sent on; bodies are bounded both ways (WHIP's SDP and a
//! tester's JSON config are a few KiB).

use super::error::ClusterError;
use http_body_util::{BodyExt, Full, Limited};
use hyper::body::{Bytes, Incoming};
use hyper::header::{CONTENT_TYPE, LOCATION};
use hyper::{Request, Response, StatusCode};
use hyper_util::rt::TokioIo;
use kube::Client;
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;
use tokio::net::TcpListener;
use tokio::sync::Semaphore;
use tokio::task::JoinHandle;

/// The largest body carried either way.
const MAX_BODY: usize = 64 * 1024;
/// Connections served at once: a test makes one request at a time.
const MAX_CONNECTIONS: usize = 8;
/// How long one proxied request may take, the API server's round trip included.
const REQUEST_TIMEOUT: Duration = Duration::from_secs(30);

/// A running proxy; dropping it closes the listener and every connection it serves.
pub struct PodHttpProxy {
    local: SocketAddr,
    task: JoinHandle<()>,
}

impl PodHttpProxy {
    /// Serves `http://<local_addr>/PATH` as `PATH` of port `port` of pod `namespace/pod`.
    pub async fn start(client: Client, namespace: &str, pod: &str, port: u16) -> Result<Self, ClusterError> {
        let failed = |e: std::io::Error| ClusterError::PortForward {
            pod: format!("{namespace}/{pod}"),
            port,
            reason: e.to_string(),
        };
        let listener = TcpListener::bind("127.0.0.1:0").await.map_err(failed)?;
        let local = listener.local_addr().map_err(failed)?;
        let target =
            Arc::new(Target { client, prefix: format!("/api/v1/namespaces/{namespace}/pods/{pod}:{port}/proxy") });
        let task = tokio::spawn(serve(listener, target));
        Ok(PodHttpProxy { local, task })
    }

    /// Where to send requests: a loopback address of this process.
    pub fn local_addr(&self) -> SocketAddr {
        self.local
    }
}

impl Drop for PodHttpProxy {
    fn drop(&mut self) {
        self.task.abort();
    }
}

/// The API server and the pod proxy path requests go to.
struct Target {
    client: Client,
    prefix: String,
}

async fn serve(listener: TcpListener, target: Arc<Target>) {
    let slots = Arc::new(Semaphore::new(MAX_CONNECTIONS));
    let mut served = tokio::task::JoinSet::new();
    loop {
        let Ok(permit) = slots.clone().acquire_owned().await else { return };
        let Ok((stream, _)) = listener.accept().await else { return };
        let target = target.clone();
        served.spawn(async move {
            let _permit = permit;
            let service = hyper::service::service_fn(move |req| forward(target.clone(), req));
            let _ = hyper::server::conn::http1::Builder::new()
                .header_read_timeout(REQUEST_TIMEOUT)
                .timer(hyper_util::rt::TokioTimer::new())
                .serve_connection(TokioIo::new(stream), service)
                .await;
        });
        while served.try_join_next().is_some() {}
    }
}

type Reply = Response<Full<Bytes>>;

fn reply(status: StatusCode, text: String) -> Reply {
    let mut r = Response::new(Full::new(Bytes::from(text)));
    *r.status_mut() = status;
    r
}

/// One request through the pod proxy; the API server's or the pod's answer comes back with its
/// status, content type and location. What fails on the way is a 502 that says why.
async fn forward(target: Arc<Target>, req: Request<Incoming>) -> Result<Reply, std::convert::Infallible> {
    match tokio::time::timeout(REQUEST_TIMEOUT, relay(&target, req)).await {
        Ok(Ok(reply)) => Ok(reply),
        Ok(Err(why)) => Ok(reply(StatusCode::BAD_GATEWAY, format!("through the API server's pod proxy: {why}\n"))),
        Err(_) => Ok(reply(
            StatusCode::GATEWAY_TIMEOUT,
            format!("no answer through the API server's pod proxy in {REQUEST_TIMEOUT:?}\n"),
        )),
    }
}

async fn relay(target: &Target, req: Request<Incoming>) -> Result<Reply, String> {
    let path = req.uri().path_and_query().map_or("/", |pq| pq.as_str()).to_string();
    let mut out = Request::builder().method(req.method().clone()).uri(format!("{}{path}", target.prefix));
    if let Some(ct) = req.headers().get(CONTENT_TYPE) {
        out = out.header(CONTENT_TYPE, ct.clone());
    }
    let body = Limited::new(req.into_body(), MAX_BODY).collect().await.map_err(|e| format!("the request body: {e}"))?;
    let out = out.body(kube::client::Body::from(body.to_bytes().to_vec())).map_err(|e| e.to_string())?;
    let response = target.client.send(out).await.map_err(|e| e.to_string())?;
    let (parts, body) = response.into_parts();
    let body = Limited::new(body, MAX_BODY).collect().await.map_err(|e| format!("the answer's body: {e}"))?;
    let mut r = Response::new(Full::new(body.to_bytes()));
    *r.status_mut() = parts.status;
    for name in [CONTENT_TYPE, LOCATION] {
        if let Some(v) = parts.headers.get(&name) {
            r.headers_mut().insert(name, v.clone());
        }
    }
    Ok(r)
}
