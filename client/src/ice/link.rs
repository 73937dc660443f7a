//! A [`Peer`] on a real socket: a UDP socket (the tester's host candidate, or a TURN-UDP
//! client) or a TCP stream to the TURN server (TURN-TCP). It pumps datagrams and timers between
//! the two until the peer has something to say: the channel opened, a message, the end.

use super::error::LinkError;
use super::peer::{Peer, PeerOutput};
use super::relay::{Relay, ServerTransport};
use std::net::SocketAddr;
use std::time::{Duration, Instant};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpStream, UdpSocket};

/// The largest datagram or TCP read taken at once (a UDP datagram fits; TCP reads continue).
const READ_BUFFER: usize = 64 * 1024;

#[derive(Debug)]
pub enum Socket {
    Udp(UdpSocket),
    Tcp(TcpStream),
}

/// What the peer said.
#[derive(Debug, PartialEq, Eq)]
pub enum LinkEvent {
    Open,
    Message(Vec<u8>),
    Closed,
    /// The deadline passed first.
    Deadline,
}

#[derive(Debug)]
pub struct Link {
    pub peer: Peer,
    socket: Socket,
    buf: Vec<u8>,
}

impl Link {
    pub fn new(peer: Peer, socket: Socket) -> Link {
        Link { peer, socket, buf: vec![0; READ_BUFFER] }
    }

    /// A peer whose only candidate is an allocation on `server` (both ends of the ICE test
    /// make one so): a fresh UDP socket, or a TCP connection made within `connect_timeout`.
    /// The allocation starts with the first [`Link::allocated`].
    pub async fn relayed(
        transport: ServerTransport,
        server: SocketAddr,
        username: &str,
        password: &str,
        connect_timeout: Duration,
    ) -> std::io::Result<Link> {
        let socket = match transport {
            ServerTransport::Udp => {
                let unspecified: SocketAddr = if server.is_ipv4() {
                    (std::net::Ipv4Addr::UNSPECIFIED, 0).into()
                } else {
                    (std::net::Ipv6Addr::UNSPECIFIED, 0).into()
                };
                Socket::Udp(UdpSocket::bind(unspecified).await?)
            }
            ServerTransport::Tcp => {
                let connect = tokio::time::timeout(connect_timeout, TcpStream::connect(server));
                Socket::Tcp(connect.await.map_err(|_| std::io::Error::from(std::io::ErrorKind::TimedOut))??)
            }
        };
        let local = local_addr(&socket)?;
        let now = Instant::now();
        let relay = Relay::allocate(transport, local, server, username, password, now);
        Ok(Link::new(Peer::relayed(relay, now), socket))
    }

    /// The socket's own address (a relayed candidate's related address).
    pub fn local_addr(&self) -> std::io::Result<SocketAddr> {
        local_addr(&self.socket)
    }

    /// Runs until the peer has an event, or until `deadline`.
    pub async fn next(&mut self, deadline: Instant) -> Result<LinkEvent, LinkError> {
        loop {
            if let Some(event) = self.step(deadline).await? {
                return Ok(event);
            }
        }
    }

    /// Runs until the TURN allocation is made: its relayed address.
    pub async fn allocated(&mut self, deadline: Instant) -> Result<Option<SocketAddr>, LinkError> {
        loop {
            if let Some(addr) = self.peer.relayed_address() {
                return Ok(Some(addr));
            }
            if let Some(LinkEvent::Deadline | LinkEvent::Closed) = self.step(deadline).await? {
                return Ok(None);
            }
        }
    }

    /// Writes what the peer has to send, then waits once for input or its timer.
    async fn step(&mut self, deadline: Instant) -> Result<Option<LinkEvent>, LinkError> {
        let wait = loop {
            match self.peer.poll(Instant::now())? {
                PeerOutput::Transmit { to, data } => self.write(to, &data).await?,
                PeerOutput::Open => return Ok(Some(LinkEvent::Open)),
                PeerOutput::Message(m) => return Ok(Some(LinkEvent::Message(m))),
                PeerOutput::Closed => return Ok(Some(LinkEvent::Closed)),
                PeerOutput::Wait(at) => break at,
            }
        };
        if Instant::now() >= deadline {
            return Ok(Some(LinkEvent::Deadline));
        }
        let timer = tokio::time::Instant::from_std(wait.min(deadline));
        let received = tokio::select! {
            _ = tokio::time::sleep_until(timer) => None,
            read = read(&mut self.socket, &mut self.buf) => Some(read?),
        };
        let now = Instant::now();
        match received {
            None => self.peer.timeout(now)?,
            Some((_, 0)) if matches!(self.socket, Socket::Tcp(_)) => return Err(LinkError::ServerClosed),
            Some((from, n)) => self.peer.receive(from, &self.buf[..n], now)?,
        }
        Ok(None)
    }

    async fn write(&mut self, to: SocketAddr, data: &[u8]) -> Result<(), LinkError> {
        match &mut self.socket {
            Socket::Udp(socket) => {
                socket.send_to(data, to).await?;
            }
            Socket::Tcp(stream) => stream.write_all(data).await?,
        }
        Ok(())
    }
}

fn local_addr(socket: &Socket) -> std::io::Result<SocketAddr> {
    match socket {
        Socket::Udp(socket) => socket.local_addr(),
        Socket::Tcp(stream) => stream.local_addr(),
    }
}

/// One read: a datagram with its sender, or the next bytes of the TCP stream (from its peer).
async fn read(socket: &mut Socket, buf: &mut [u8]) -> std::io::Result<(SocketAddr, usize)> {
    match socket {
        Socket::Udp(socket) => socket.recv_from(buf).await.map(|(n, from)| (from, n)),
        Socket::Tcp(stream) => {
            let from = stream.peer_addr()?;
            stream.read(buf).await.map(|n| (from, n))
        }
    }
}
