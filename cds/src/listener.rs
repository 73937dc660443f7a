//! Accepting connections within bounds, for every port the daemon serves (the CDS, and the
//! metrics, health and pprof endpoints): a cap on open connections, answered with a 503 past
//! it; a 503 rather than a hang for a client that arrives while the process is out of file
//! descriptors; and an accept-error log that cannot flood.
//!
//! Out of file descriptors, `accept` fails and the connection stays in the kernel's queue: its
//! client waits for nothing, and the listener, still readable, fails again at once (and keeps
//! failing, even once the queue is empty: the descriptor is taken before the queue is looked
//! at). Each [`Acceptor`] therefore keeps one descriptor in reserve; when `accept` fails for
//! want of one, the reserve is closed, the waiting connection, if any, is accepted on the freed
//! descriptor, told 503 and closed, and the reserve is taken again; with nothing waiting, the
//! listener waits for the next connection.

use prometheus_client::metrics::counter::Counter;
use std::fs::File;
use std::io::{self, Read, Write};
use std::net::SocketAddr;
use std::pin::Pin;
use std::sync::Arc;
use std::time::Duration;
use tokio::io::AsyncWriteExt;
use tokio::io::Interest;
use tokio::io::unix::AsyncFd;
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::{OwnedSemaphorePermit, Semaphore};
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

/// At most one accept-error line per listener in this time; the errors in between are
/// counted in the next line.
const ERROR_LOG_INTERVAL: Duration = Duration::from_secs(10);

/// How long to wait after an accept error that could not be answered before trying again
/// (the listener stays readable, so an immediate retry would spin).
const ERROR_BACKOFF: Duration = Duration::from_millis(50);

/// At most this much of what a refused client already sent is read before closing: closing
/// a socket with unread data resets it, and the reset can overtake the 503.
const DRAIN_BYTES: usize = 16 * 1024;

/// Accepts connections on one listener within its connection limit.
pub struct Acceptor {
    /// Polled by hand, not through tokio's `TcpListener`: out of descriptors, accept(2) fails
    /// even with nothing queued (the descriptor is taken first), and only when the queue is
    /// seen empty may the listener's readiness be cleared.
    listener: AsyncFd<std::net::TcpListener>,
    /// What the port serves, in messages: "config discovery", "metrics", ...
    name: &'static str,
    slots: Arc<Semaphore>,
    limit: usize,
    /// Counts clients refused for the connection limit, when the port has such a metric.
    rejected: Option<Counter>,
    /// The descriptor given up to answer a client when there is no other (see the module doc).
    reserve: Option<File>,
    errors: ErrorLog,
}

/// What became of a client when accept(2) found no descriptor for it.
enum Answer {
    /// Told 503 and closed on the reserve descriptor.
    Refused,
    /// No client was waiting after all.
    NoneWaiting,
    /// It still waits: no reserve descriptor, or another thread took the freed one.
    NotAnswered(io::Error),
}

impl Acceptor {
    /// Takes over `listener` (fails only if the runtime cannot register it).
    pub fn new(
        listener: TcpListener,
        name: &'static str,
        max_connections: usize,
        rejected: Option<Counter>,
    ) -> io::Result<Self> {
        let listener = listener.into_std()?;
        // SAFETY: the std listener owns its descriptor, open until the `AsyncFd` drops it,
        // and `as_raw_fd` always returns that one.
        #[allow(unsafe_code)] // tokio registers a raw descriptor only through this unsafe call
        let listener = unsafe { AsyncFd::register_with_interest(listener, Interest::READABLE) }?;
        Ok(Acceptor {
            listener,
            name,
            slots: Arc::new(Semaphore::new(max_connections)),
            limit: max_connections,
            rejected,
            reserve: open_reserve(),
            errors: ErrorLog::default(),
        })
    }

    /// The next connection within the limit, and the slot it holds until dropped. Clients past
    /// the limit, and clients that arrive while the process is out of file descriptors, are
    /// answered 503 and closed on the way.
    pub async fn accept(&mut self) -> (TcpStream, SocketAddr, OwnedSemaphorePermit) {
        loop {
            let mut ready = match self.listener.readable().await {
                Ok(ready) => ready,
                Err(e) => {
                    self.errors.record(self.name, &e, "retrying");
                    tokio::time::sleep(ERROR_BACKOFF).await;
                    continue;
                }
            };
            let (stream, peer) = match ready.get_inner().accept() {
                Ok(accepted) => accepted,
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => {
                    ready.clear_ready();
                    continue;
                }
                Err(e) if is_out_of_descriptors(&e) => {
                    match answer_from_reserve(ready.get_inner(), &mut self.reserve, self.name) {
                        Answer::Refused => self.errors.record(self.name, &e, "a new client was refused with 503"),
                        Answer::NoneWaiting => ready.clear_ready(),
                        Answer::NotAnswered(why) => {
                            let outcome = format!("a new client waits: {why}");
                            self.errors.record(self.name, &e, &outcome);
                            tokio::time::sleep(ERROR_BACKOFF).await;
                        }
                    }
                    continue;
                }
                Err(e) => {
                    self.errors.record(self.name, &e, "retrying");
                    // A connection reset while it waited in the queue is that client's; anything
                    // else (out of kernel memory, ...) may last, and must not spin.
                    if !matches!(e.kind(), io::ErrorKind::ConnectionAborted | io::ErrorKind::ConnectionReset) {
                        tokio::time::sleep(ERROR_BACKOFF).await;
                    }
                    continue;
                }
            };
            if self.reserve.is_none() {
                self.reserve = open_reserve();
            }
            let stream = match stream.set_nonblocking(true).and_then(|()| TcpStream::from_std(stream)) {
                Ok(stream) => stream,
                Err(e) => {
                    self.errors.record(self.name, &e, "connection dropped");
                    continue;
                }
            };
            match self.slots.clone().try_acquire_owned() {
                Ok(slot) => return (stream, peer, slot),
                Err(_) => {
                    if let Some(rejected) = &self.rejected {
                        rejected.inc();
                    }
                    let message = format!("too many {} connections (limit {})", self.name, self.limit);
                    tokio::spawn(refuse(stream, message));
                }
            }
        }
    }
}

/// Spends the reserve descriptor on the connection waiting in `listener`'s queue, tells its
/// client 503 and closes it, then takes the reserve again.
fn answer_from_reserve(listener: &std::net::TcpListener, reserve: &mut Option<File>, name: &str) -> Answer {
    let Some(spent) = reserve.take() else {
        *reserve = open_reserve();
        return Answer::NotAnswered(io::Error::other("no reserve descriptor"));
    };
    drop(spent);
    let answer = match listener.accept() {
        Ok((stream, _)) => {
            refuse_now(&stream, &format!("the {name} server is out of file descriptors"));
            Answer::Refused
        }
        Err(e) if e.kind() == io::ErrorKind::WouldBlock => Answer::NoneWaiting,
        Err(e) => Answer::NotAnswered(e),
    };
    *reserve = open_reserve();
    answer
}

fn open_reserve() -> Option<File> {
    File::open("/dev/null").ok()
}

fn is_out_of_descriptors(e: &io::Error) -> bool {
    // EMFILE: this process's limit; ENFILE: the system's.
    matches!(e.raw_os_error(), Some(libc::EMFILE | libc::ENFILE))
}

/// Counts accept errors and logs at most one line per [`ERROR_LOG_INTERVAL`].
#[derive(Default)]
struct ErrorLog {
    last_line: Option<Instant>,
    unlogged: u64,
}

impl ErrorLog {
    fn record(&mut self, listener: &str, error: &io::Error, outcome: &str) {
        let now = Instant::now();
        if self.last_line.is_some_and(|t| now.duration_since(t) < ERROR_LOG_INTERVAL) {
            self.unlogged += 1;
            return;
        }
        tracing::warn!(
            listener,
            error = %error,
            outcome,
            errors_not_logged = self.unlogged,
            "accept failed (at most one line per {}s)",
            ERROR_LOG_INTERVAL.as_secs()
        );
        self.last_line = Some(now);
        self.unlogged = 0;
    }
}

/// The 503 a refused client is sent: a JSON `Error` body, as the CDS's other errors.
fn refusal(message: &str) -> String {
    let body = format!("{{\"code\":503,\"message\":\"{message}\"}}\n");
    format!(
        "HTTP/1.1 503 Service Unavailable\r\ncontent-type: application/json\r\ncontent-length: {}\r\nconnection: close\r\nretry-after: 1\r\n\r\n{body}",
        body.len()
    )
}

/// Tells a client past the connection limit why, then closes.
async fn refuse(mut stream: TcpStream, message: String) {
    let _ = tokio::time::timeout(Duration::from_secs(1), stream.write_all(refusal(&message).as_bytes())).await;
    let _ = stream.shutdown().await;
}

/// [`refuse`] without waiting, for when the descriptor must be given back at once: a fresh
/// socket's send buffer takes the few bytes of the 503 in one write. Closed when dropped.
fn refuse_now(mut stream: &std::net::TcpStream, message: &str) {
    let _ = stream.set_nonblocking(true);
    let _ = stream.write(refusal(message).as_bytes());
    let _ = stream.shutdown(std::net::Shutdown::Write);
    let mut buf = [0u8; 4096];
    let mut drained = 0;
    while drained < DRAIN_BYTES {
        match stream.read(&mut buf) {
            Ok(n) if n > 0 => drained += n,
            _ => break,
        }
    }
}

/// Serves `conn` until it ends or `shutdown`; then `graceful` tells it to finish what is in
/// flight and take nothing new, and it is served until it has.
pub async fn until_shutdown<C: Future>(conn: C, shutdown: &CancellationToken, graceful: fn(Pin<&mut C>)) {
    tokio::pin!(conn);
    tokio::select! {
        _ = conn.as_mut() => {}
        _ = shutdown.cancelled() => {
            graceful(conn.as_mut());
            let _ = conn.await;
        }
    }
}
