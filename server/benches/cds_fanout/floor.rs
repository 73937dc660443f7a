//! The floors of the CDS scenarios: what the kernel alone costs for the same work, measured in
//! the same run with the same pinning, so that a figure of ours or Go's can be read against
//! what this machine allows at that moment.
//!
//! - The fan-out's floor ([`fan_out`]): rounds of one frame of the update's size written
//!   without blocking to N loopback TCP sockets from one thread (on core 0 when pinned, where
//!   the servers run). The readers live in a child process (this binary, role
//!   `floor-readers`, [`run_readers`]) so that neither process holds more than N sockets: at
//!   10,000 watchers, both ends in one process would exceed the file descriptor limit.
//! - The connect storm's floor ([`run_raw_server`], role `raw-server`): a server speaking the
//!   benchmark's stdin protocol that accepts on one thread (epoll), reads the upgrade request,
//!   and answers with a fixed `101` and the current config as one WebSocket frame in one write.
//!   No HTTP parsing, no key hash, no authorization, no session: the least a CDS server can do
//!   per connection.

use std::collections::HashMap;
use std::io::{BufRead, BufReader, Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};
use std::process::{Command, Stdio};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};
use stunner_gateway::config::StunnerConfig;

/// `updates` rounds of one `frame_len` byte frame written to `watchers` sockets; the readers
/// take every byte of a round before the next. Returns each round's time until the last socket
/// was written and the writing thread's CPU time over all rounds. Blocking.
pub fn fan_out(watchers: usize, updates: usize, frame_len: usize) -> (Vec<Duration>, Duration) {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let mut readers = Command::new(std::env::current_exe().unwrap())
        .env("CDS_BENCH_ROLE", "floor-readers")
        .env("CDS_BENCH_FLOOR_ADDR", listener.local_addr().unwrap().to_string())
        .env("CDS_BENCH_FLOOR_SOCKETS", watchers.to_string())
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .spawn()
        .expect("the floor's reader process");
    let mut to_readers = readers.stdin.take().unwrap();
    let mut from_readers = BufReader::new(readers.stdout.take().unwrap());
    let mut expect = |bytes: u64| {
        writeln!(to_readers, "{bytes}").unwrap();
        let mut ack = String::new();
        from_readers.read_line(&mut ack).unwrap();
        assert_eq!(ack.trim(), "ok", "the floor's readers");
    };
    let mut writers: Vec<TcpStream> = (0..watchers)
        .map(|_| {
            let (s, _) = listener.accept().unwrap();
            s.set_nonblocking(true).unwrap();
            s.set_nodelay(true).unwrap();
            s
        })
        .collect();
    expect(0); // Every reader connected and reading.
    let result = std::thread::scope(|scope| {
        scope
            .spawn(|| {
                if super::pinned() {
                    super::pin_to_core(0);
                }
                let frame = vec![b'x'; frame_len];
                let mut rounds = Vec::with_capacity(updates);
                let mut cpu = Duration::ZERO;
                for round in 1..=updates {
                    let (t0, cpu0) = (Instant::now(), thread_cpu_time());
                    write_round(&mut writers, &frame, t0);
                    rounds.push(t0.elapsed());
                    cpu += thread_cpu_time() - cpu0;
                    expect((round * watchers * frame_len) as u64);
                }
                (rounds, cpu)
            })
            .join()
            .expect("the floor's writer")
    });
    drop(writers);
    let _ = readers.kill();
    let _ = readers.wait();
    result
}

/// Writes `frame` to every socket, without blocking: a socket whose buffer is full is retried
/// after the others, until all are written (bounded: two minutes from `t0`).
fn write_round(writers: &mut [TcpStream], frame: &[u8], t0: Instant) {
    let mut pending: Vec<(usize, usize)> = (0..writers.len()).map(|i| (i, 0)).collect();
    while !pending.is_empty() {
        assert!(t0.elapsed() < Duration::from_secs(120), "the floor's writes stalled");
        pending.retain_mut(|(i, written)| {
            while *written < frame.len() {
                match writers[*i].write(&frame[*written..]) {
                    Ok(n) => *written += n,
                    Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => return true,
                    Err(e) => panic!("floor write: {e}"),
                }
            }
            false
        });
    }
}

/// The `floor-readers` role: connects `CDS_BENCH_FLOOR_SOCKETS` sockets to
/// `CDS_BENCH_FLOOR_ADDR` and reads them all; for each stdin line holding a byte count, answers
/// `ok` once that many bytes were read in all.
pub fn run_readers() {
    let addr: SocketAddr = std::env::var("CDS_BENCH_FLOOR_ADDR").unwrap().parse().unwrap();
    let sockets: usize = std::env::var("CDS_BENCH_FLOOR_SOCKETS").unwrap().parse().unwrap();
    let rt = tokio::runtime::Builder::new_multi_thread().enable_all().build().unwrap();
    let received = Arc::new(AtomicU64::new(0));
    rt.block_on(async {
        for _ in 0..sockets {
            let mut s = tokio::net::TcpStream::connect(addr).await.unwrap();
            let received = received.clone();
            tokio::spawn(async move {
                let mut buf = [0u8; 4096];
                while let Ok(n @ 1..) = tokio::io::AsyncReadExt::read(&mut s, &mut buf).await {
                    received.fetch_add(n as u64, Ordering::Relaxed);
                }
            });
        }
    });
    let mut out = std::io::stdout();
    for line in std::io::stdin().lock().lines() {
        let Ok(line) = line else { break };
        let expected: u64 = line.trim().parse().unwrap();
        let deadline = Instant::now() + Duration::from_secs(120);
        while received.load(Ordering::Relaxed) < expected {
            assert!(Instant::now() < deadline, "the floor's readers stalled");
            std::thread::sleep(Duration::from_millis(1));
        }
        writeln!(out, "ok").unwrap();
        out.flush().unwrap();
    }
}

/// The `raw-server` role: the connect storm's floor (see the module's doc), on the stdin
/// protocol of the benchmark's servers. One thread, one epoll set: accepts while connections
/// are pending, reads each request as it arrives, answers it and holds the connection (out of
/// the set) until the process exits. A blocking accept-read-write loop would not do: waiting
/// on one client's request, it lets the accept queue overflow into the kernel's SYN retransmits.
pub fn run_raw_server() {
    let socket = socket2::Socket::new(socket2::Domain::IPV4, socket2::Type::STREAM, None).unwrap();
    socket.bind(&SocketAddr::from(([127, 0, 0, 1], 0)).into()).unwrap();
    socket.listen(4096).unwrap(); // As the daemon's listeners (and Go's, through somaxconn).
    socket.set_nonblocking(true).unwrap();
    let listener: TcpListener = socket.into();
    println!("listening {}", listener.local_addr().unwrap());
    let frame = Arc::new(Mutex::new(Arc::new(Vec::new())));
    let published = frame.clone();
    std::thread::spawn(move || {
        let mut out = std::io::stdout();
        for line in std::io::stdin().lock().lines() {
            let Ok(line) = line else { break };
            let configs: Vec<StunnerConfig> = serde_json::from_str(&line).unwrap();
            let last = configs.last().expect("a config");
            *published.lock().unwrap() = Arc::new(text_frame(&serde_json::to_vec(last).unwrap()));
            writeln!(out, "ok").unwrap();
            out.flush().unwrap();
        }
        std::process::exit(0);
    });
    let epoll = Epoll::new();
    let listening = listener.as_raw_fd();
    epoll.add(listening);
    let mut reading: HashMap<RawFd, (TcpStream, Vec<u8>)> = HashMap::new();
    let mut held = Vec::new();
    let mut ready = Vec::new();
    loop {
        epoll.wait(&mut ready);
        for &fd in &ready {
            if fd == listening {
                while let Ok((s, _)) = listener.accept() {
                    s.set_nonblocking(true).unwrap();
                    epoll.add(s.as_raw_fd());
                    reading.insert(s.as_raw_fd(), (s, Vec::with_capacity(512)));
                }
                continue;
            }
            let Some((s, request)) = reading.get_mut(&fd) else { continue };
            let mut buf = [0u8; 4096];
            let closed = loop {
                match s.read(&mut buf) {
                    Ok(0) => break true,
                    Ok(n) => request.extend_from_slice(&buf[..n]),
                    Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => break false,
                    Err(_) => break true,
                }
            };
            if closed || request.ends_with(b"\r\n\r\n") || request.len() > 64 * 1024 {
                epoll.remove(fd);
                let (mut s, request) = reading.remove(&fd).unwrap();
                if !closed && request.ends_with(b"\r\n\r\n") {
                    let mut answer = SWITCHING.to_vec();
                    answer.extend_from_slice(&frame.lock().unwrap());
                    // A few hundred bytes into a fresh socket's empty buffer: written at once.
                    if s.write(&answer).is_ok_and(|n| n == answer.len()) {
                        held.push(s);
                    }
                }
            }
        }
    }
}

/// A level-triggered epoll set of readable file descriptors.
struct Epoll(OwnedFd);

#[allow(unsafe_code)] // epoll has no safe wrapper in std (see the SAFETY comments)
impl Epoll {
    fn new() -> Epoll {
        // SAFETY: epoll_create1 takes no pointers; a valid descriptor is owned from here on.
        let fd = unsafe { libc::epoll_create1(libc::EPOLL_CLOEXEC) };
        assert!(fd >= 0, "epoll_create1: {}", std::io::Error::last_os_error());
        // SAFETY: `fd` was just opened and nothing else owns it.
        Epoll(unsafe { OwnedFd::from_raw_fd(fd) })
    }

    fn add(&self, fd: RawFd) {
        let mut event = libc::epoll_event { events: libc::EPOLLIN as u32, u64: fd as u64 };
        // SAFETY: `event` is a valid epoll_event for the duration of the call.
        let r = unsafe { libc::epoll_ctl(self.0.as_raw_fd(), libc::EPOLL_CTL_ADD, fd, &mut event) };
        assert_eq!(r, 0, "epoll_ctl add: {}", std::io::Error::last_os_error());
    }

    fn remove(&self, fd: RawFd) {
        // SAFETY: EPOLL_CTL_DEL ignores the event pointer (null allowed since Linux 2.6.9).
        unsafe { libc::epoll_ctl(self.0.as_raw_fd(), libc::EPOLL_CTL_DEL, fd, std::ptr::null_mut()) };
    }

    /// Blocks until some descriptors are readable; `ready` gets them.
    fn wait(&self, ready: &mut Vec<RawFd>) {
        let mut events = [libc::epoll_event { events: 0, u64: 0 }; 1024];
        // SAFETY: `events` is valid for writes of `events.len()` entries.
        let n = unsafe { libc::epoll_wait(self.0.as_raw_fd(), events.as_mut_ptr(), events.len() as i32, -1) };
        ready.clear();
        ready.extend(events[..n.max(0) as usize].iter().map(|e| e.u64 as RawFd));
    }
}

/// The upgrade answer to the benchmark's fixed `Sec-WebSocket-Key` (RFC 6455 §1.3's example).
const SWITCHING: &[u8] = b"HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\nConnection: Upgrade\r\nSec-WebSocket-Accept: s3pPLMBiTxaQ9kYGzzhZRbK+xOo=\r\n\r\n";

/// One unmasked, final WebSocket text frame holding `payload`.
fn text_frame(payload: &[u8]) -> Vec<u8> {
    let mut f = vec![0x81];
    match payload.len() {
        n @ 0..126 => f.push(n as u8),
        n @ 126..65_536 => {
            f.push(126);
            f.extend_from_slice(&(n as u16).to_be_bytes());
        }
        n => {
            f.push(127);
            f.extend_from_slice(&(n as u64).to_be_bytes());
        }
    }
    f.extend_from_slice(payload);
    f
}

/// CPU time of the calling thread.
#[allow(unsafe_code)] // libc calls without a safe wrapper in std (see the SAFETY comments)
fn thread_cpu_time() -> Duration {
    let mut t = libc::timespec { tv_sec: 0, tv_nsec: 0 };
    // SAFETY: `t` is a valid, writable timespec for the duration of the call.
    unsafe { libc::clock_gettime(libc::CLOCK_THREAD_CPUTIME_ID, &mut t) };
    Duration::new(t.tv_sec as u64, t.tv_nsec as u32)
}
