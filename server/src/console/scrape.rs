//! Reads dataplane pods' metrics endpoints for the console's Gateway page (cluster mode only):
//! a plain HTTP/1.1 GET of stunnerd's text exposition, bounded everywhere a pod (or whatever
//! answers at its address) could hold the operator up or make it buffer: the answer's size,
//! the time per pod (connecting, waiting for a turn and reading all count), how many pods are
//! read at once across every page view, and how often: a reading is kept for [`Limits::ttl`]
//! and page views within it share it, so reloads, the live page's refreshes and several
//! viewers cost each pod at most one read per TTL, and nothing is read while nobody looks.

use super::exposition::Figures;
use bytes::Bytes;
use http_body_util::{BodyExt, Empty, Limited};
use hyper::header;
use hyper_util::rt::TokioIo;
use std::collections::HashMap;
use std::net::SocketAddr;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};
use tokio::sync::Semaphore;

/// The bounds of [`Scraper`].
#[derive(Debug, Clone, Copy)]
pub struct Limits {
    /// One pod's whole read, its wait for a turn included.
    pub timeout: Duration,
    /// The largest answer read (stunnerd's is a few KiB per listener and cluster).
    pub max_bytes: usize,
    /// Pods read at once, over all page views.
    pub concurrent: usize,
    /// How long a reading is shown before the pod is read again.
    pub ttl: Duration,
    /// Readings kept at most (one per pod); beyond, a reading is shown but not kept.
    pub max_cached: usize,
}

impl Default for Limits {
    fn default() -> Self {
        Limits {
            timeout: Duration::from_secs(2),
            max_bytes: 256 * 1024,
            concurrent: 8,
            ttl: Duration::from_secs(5),
            max_cached: 4096,
        }
    }
}

/// Where a pod serves its metrics: its address, and the endpoint's port and path.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct Target {
    pub addr: SocketAddr,
    pub path: String,
}

impl Target {
    /// The endpoint `http://[host]:port/path` (a config's `admin.metrics_endpoint`) on the pod
    /// at `ip`: stunnerd binds the host it names in its own pod, so only the port and path
    /// carry over. `None` for another scheme or an unreadable port.
    pub fn on(ip: std::net::IpAddr, endpoint: &str) -> Option<Target> {
        let rest = endpoint.strip_prefix("http://")?;
        let (authority, path) = rest.find('/').map_or((rest, "/"), |i| (&rest[..i], &rest[i..]));
        let port = match authority.rsplit_once(':') {
            Some((_, port)) if !authority.ends_with(']') => port.parse().ok()?,
            _ => 80,
        };
        Some(Target { addr: SocketAddr::new(ip, port), path: path.to_string() })
    }

    pub fn url(&self) -> String {
        format!("http://{}{}", self.addr, self.path)
    }
}

/// Why a pod's figures could not be read.
#[derive(Debug, Clone, thiserror::Error)]
pub enum ScrapeError {
    #[error("no answer within {0:?}")]
    Timeout(Duration),
    #[error("cannot connect: {0}")]
    Connect(String),
    #[error("HTTP: {0}")]
    Http(String),
    #[error("answered {0}")]
    Status(u16),
    #[error("answer over {0} bytes")]
    TooLarge(usize),
}

/// A pod's figures as read at a time, or why not.
#[derive(Debug, Clone)]
pub struct Reading {
    pub figures: Result<Arc<Figures>, ScrapeError>,
    pub at: k8s_openapi::jiff::Timestamp,
}

/// The console's reader of pods' metrics endpoints, with its bounds and its recent readings.
pub struct Scraper {
    limits: Limits,
    turns: Semaphore,
    recent: Mutex<HashMap<Target, (Instant, Reading)>>,
}

impl Default for Scraper {
    fn default() -> Self {
        Scraper::new(Limits::default())
    }
}

impl Scraper {
    pub fn new(limits: Limits) -> Self {
        Scraper { limits, turns: Semaphore::new(limits.concurrent), recent: Mutex::default() }
    }

    pub fn limits(&self) -> Limits {
        self.limits
    }

    /// `target`'s figures: a reading younger than the TTL, or a fresh one.
    pub async fn read(&self, target: &Target) -> Reading {
        if let Some((taken, reading)) = self.recent.lock().expect("scrape cache lock").get(target)
            && taken.elapsed() < self.limits.ttl
        {
            return reading.clone();
        }
        let figures = match tokio::time::timeout(self.limits.timeout, self.fetch(target)).await {
            Ok(result) => result.map(|text| Arc::new(Figures::parse(&text))),
            Err(_) => Err(ScrapeError::Timeout(self.limits.timeout)),
        };
        let reading = Reading { figures, at: k8s_openapi::jiff::Timestamp::now() };
        self.keep(target, &reading);
        reading
    }

    /// Keeps `reading`, dropping expired ones first; a full cache keeps nothing more.
    fn keep(&self, target: &Target, reading: &Reading) {
        let mut recent = self.recent.lock().expect("scrape cache lock");
        recent.retain(|_, (taken, _)| taken.elapsed() < self.limits.ttl);
        if recent.len() < self.limits.max_cached || recent.contains_key(target) {
            recent.insert(target.clone(), (Instant::now(), reading.clone()));
        }
    }

    /// One GET, in its turn; the caller bounds its time.
    async fn fetch(&self, target: &Target) -> Result<String, ScrapeError> {
        let _turn = self.turns.acquire().await.expect("the semaphore is never closed");
        let stream =
            tokio::net::TcpStream::connect(target.addr).await.map_err(|e| ScrapeError::Connect(e.to_string()))?;
        let http = |e: hyper::Error| ScrapeError::Http(e.to_string());
        let (mut sender, connection) =
            hyper::client::conn::http1::handshake(TokioIo::new(stream)).await.map_err(http)?;
        let request = hyper::Request::get(target.path.as_str())
            .header(header::HOST, target.addr.to_string())
            // The text format (no protobuf, no OpenMetrics), uncompressed.
            .header(header::ACCEPT, "text/plain;version=0.0.4")
            .body(Empty::<Bytes>::new())
            .map_err(|e| ScrapeError::Http(e.to_string()))?;
        let max = self.limits.max_bytes;
        let exchange = async {
            let response = sender.send_request(request).await.map_err(http)?;
            if !response.status().is_success() {
                return Err(ScrapeError::Status(response.status().as_u16()));
            }
            let body = Limited::new(response.into_body(), max).collect().await.map_err(|e| {
                if e.is::<http_body_util::LengthLimitError>() {
                    ScrapeError::TooLarge(max)
                } else {
                    ScrapeError::Http(e.to_string())
                }
            })?;
            Ok(String::from_utf8_lossy(&body.to_bytes()).into_owned())
        };
        tokio::pin!(exchange, connection);
        // The connection runs beside the exchange; if it ends first, the exchange says why.
        tokio::select! {
            result = &mut exchange => result,
            ended = &mut connection => match ended {
                Err(e) => Err(http(e)),
                Ok(()) => exchange.await,
            },
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use tokio::io::{AsyncReadExt, AsyncWriteExt};

    #[test]
    fn targets_take_the_endpoints_port_and_path_on_the_pods_address() {
        let ip: std::net::IpAddr = "10.0.0.7".parse().unwrap();
        let t = |e| Target::on(ip, e).map(|t| t.url());
        assert_eq!(t("http://:8080/metrics").as_deref(), Some("http://10.0.0.7:8080/metrics"));
        assert_eq!(t("http://0.0.0.0:9000").as_deref(), Some("http://10.0.0.7:9000/"));
        assert_eq!(t("http://[::]:8080/m").as_deref(), Some("http://10.0.0.7:8080/m"));
        assert_eq!(t("http://host/x").as_deref(), Some("http://10.0.0.7:80/x"));
        assert_eq!(t("http://[::1]/x").as_deref(), Some("http://10.0.0.7:80/x"));
        assert_eq!(t("https://:8080/metrics"), None);
        assert_eq!(t("http://:port/metrics"), None);
    }

    /// A server on loopback that answers every connection with `answer` after `delay`, and
    /// counts the connections.
    async fn server(answer: Vec<u8>, delay: Duration) -> (Target, Arc<std::sync::atomic::AtomicUsize>) {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        let count = Arc::new(std::sync::atomic::AtomicUsize::new(0));
        let seen = count.clone();
        tokio::spawn(async move {
            while let Ok((mut s, _)) = listener.accept().await {
                seen.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
                let answer = answer.clone();
                tokio::spawn(async move {
                    let mut buf = [0; 1024];
                    let _ = s.read(&mut buf).await;
                    tokio::time::sleep(delay).await;
                    let _ = s.write_all(&answer).await;
                });
            }
        });
        (Target { addr, path: "/metrics".into() }, count)
    }

    fn answer(body: &str) -> Vec<u8> {
        format!("HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\nContent-Length: {}\r\n\r\n{body}", body.len())
            .into_bytes()
    }

    #[tokio::test]
    async fn reads_kept_for_the_ttl() {
        let (target, connections) = server(answer("stunner_allocations_active 3\n"), Duration::ZERO).await;
        let scraper = Scraper::default();
        let first = scraper.read(&target).await;
        assert_eq!(first.figures.unwrap().allocations, Some(3.0));
        let again = scraper.read(&target).await;
        assert_eq!((again.at, connections.load(std::sync::atomic::Ordering::SeqCst)), (first.at, 1));
        let short = Scraper::new(Limits { ttl: Duration::ZERO, ..Limits::default() });
        short.read(&target).await.figures.unwrap();
        short.read(&target).await.figures.unwrap();
        assert_eq!(connections.load(std::sync::atomic::Ordering::SeqCst), 3, "an expired reading is read again");
    }

    #[tokio::test]
    async fn an_answer_too_large_too_slow_or_refused_is_not_read() {
        let limits = Limits { timeout: Duration::from_millis(300), max_bytes: 1024, ..Limits::default() };
        let large = answer(&"stunner_allocations_active 1\n".repeat(100));
        let (target, _) = server(large, Duration::ZERO).await;
        assert!(matches!(Scraper::new(limits).read(&target).await.figures, Err(ScrapeError::TooLarge(1024))));
        let (target, _) = server(answer("late"), Duration::from_secs(30)).await;
        assert!(matches!(Scraper::new(limits).read(&target).await.figures, Err(ScrapeError::Timeout(_))));
        let (target, _) = server(b"HTTP/1.1 404 Not Found\r\nContent-Length: 0\r\n\r\n".to_vec(), Duration::ZERO).await;
        assert!(matches!(Scraper::new(limits).read(&target).await.figures, Err(ScrapeError::Status(404))));
    }

    #[tokio::test]
    async fn pods_are_read_a_few_at_a_time() {
        // One turn: while a slow pod holds it, another waits, within its own timeout.
        let limits = Limits { timeout: Duration::from_millis(500), concurrent: 1, ..Limits::default() };
        let scraper = Scraper::new(limits);
        let (slow, _) = server(answer("late"), Duration::from_secs(30)).await;
        let (fast, connections) = server(answer("stunner_allocations_active 1\n"), Duration::ZERO).await;
        let (slow, fast) = tokio::join!(scraper.read(&slow), async {
            tokio::task::yield_now().await;
            scraper.read(&fast).await
        });
        assert!(matches!(slow.figures, Err(ScrapeError::Timeout(_))));
        assert!(matches!(fast.figures, Err(ScrapeError::Timeout(_))), "it waited its turn");
        assert_eq!(connections.load(std::sync::atomic::Ordering::SeqCst), 0);
    }
}
