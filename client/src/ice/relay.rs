//! One TURN allocation, sans-IO: Allocate with long-term credentials, a permission per peer,
//! Send indications out and Data indications in, over UDP or a TCP stream (RFC 8656, RFC 6062
//! framing), with no socket: the caller hands in what the server sent and writes out what
//! [`Relay::poll_transmit`] and [`Relay::send`] give back.
//!
//! The protocol is `turn-client-proto`'s (see the module doc of [`super`] for why that crate);
//! this wrapper fixes what an ICE test needs of it: one server, one relayed address, a
//! permission created the first time a peer is sent to, and time as `std::time::Instant`.

use super::error::RelayError;
use std::collections::HashSet;
use std::net::{IpAddr, SocketAddr};
use std::time::{Duration, Instant};
use turn_client_proto::api::{TurnClientApi, TurnConfig, TurnEvent, TurnPollRet, TurnRecvRet};
use turn_client_proto::client::TurnClient;
use turn_client_proto::stun::agent::Transmit;
use turn_client_proto::tcp::TurnClientTcp;
use turn_client_proto::types::{TransportType, TurnCredentials};
use turn_client_proto::udp::TurnClientUdp;

/// The transport between the client and the TURN server (the allocation relays UDP either way).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ServerTransport {
    Udp,
    Tcp,
}

impl ServerTransport {
    /// As a TURN URI's `transport=` parameter names it.
    pub fn as_str(self) -> &'static str {
        match self {
            ServerTransport::Udp => "udp",
            ServerTransport::Tcp => "tcp",
        }
    }
}

/// Where the allocation stands.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RelayState {
    /// The Allocate request (and its authenticated retry) is under way.
    Allocating,
    /// The server relays from this address.
    Allocated(SocketAddr),
}

/// A datagram a peer sent to the relayed address.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PeerDatagram {
    pub peer: SocketAddr,
    pub data: Vec<u8>,
}

/// An allocation on one TURN server.
#[derive(Debug)]
pub struct Relay {
    client: TurnClient,
    /// What `turn-client-proto`'s clock counts from.
    epoch: Instant,
    state: RelayState,
    /// Peers a CreatePermission was sent for (it is asked once; the client refreshes it).
    permissions_asked: HashSet<IpAddr>,
    /// Allocate error responses the server sent, by code: the first 401 is the challenge for
    /// credentials, a second one refuses them. `turn-client-proto` drops such a response
    /// when its integrity does not check out (the server signs it with the password it
    /// expects) and would retransmit until it times out; the code says why at once.
    allocate_errors: Vec<u16>,
}

impl Relay {
    /// Starts allocating: the Allocate request is the first [`Relay::poll_transmit`].
    pub fn allocate(
        transport: ServerTransport,
        local: SocketAddr,
        server: SocketAddr,
        username: &str,
        password: &str,
        now: Instant,
    ) -> Relay {
        let config = TurnConfig::new(TurnCredentials::new(username, password));
        let client = match transport {
            ServerTransport::Udp => TurnClient::Udp(TurnClientUdp::allocate(local, server, config)),
            ServerTransport::Tcp => TurnClient::Tcp(TurnClientTcp::allocate(local, server, config)),
        };
        Relay {
            client,
            epoch: now,
            state: RelayState::Allocating,
            permissions_asked: HashSet::new(),
            allocate_errors: Vec::new(),
        }
    }

    pub fn state(&self) -> RelayState {
        self.state
    }

    pub fn server(&self) -> SocketAddr {
        self.client.remote_addr()
    }

    pub fn local(&self) -> SocketAddr {
        self.client.local_addr()
    }

    fn clock(&self, now: Instant) -> turn_client_proto::types::Instant {
        let nanos = now.saturating_duration_since(self.epoch).as_nanos();
        turn_client_proto::types::Instant::from_nanos(i64::try_from(nanos).unwrap_or(i64::MAX))
    }

    /// Bytes the client must write to the server now (requests, retransmits, refreshes).
    pub fn poll_transmit(&mut self, now: Instant) -> Option<Vec<u8>> {
        let clock = self.clock(now);
        self.client.poll_transmit(clock).map(|t| t.data.as_ref().to_vec())
    }

    /// When the relay next needs [`Relay::poll`], or that the allocation failed or ended.
    pub fn poll(&mut self, now: Instant) -> Result<Instant, RelayError> {
        if self.state == RelayState::Allocating {
            // A stale nonce (438) is answered with a fresh request by the client.
            if let Some(code) = self.allocate_errors.iter().find(|c| ![UNAUTHORIZED, STALE_NONCE].contains(c)) {
                return Err(RelayError::Refused(format!("the server answered the Allocate with error {code}")));
            }
            if self.allocate_errors.iter().filter(|c| **c == UNAUTHORIZED).count() > 1 {
                return Err(RelayError::Refused("the server refused the credentials (401 Unauthorized)".into()));
            }
        }
        let clock = self.clock(now);
        let wait = match self.client.poll(clock) {
            TurnPollRet::WaitUntil(at) => at,
            TurnPollRet::Closed => return Err(self.closed()),
            // Only TCP allocations (RFC 6062 Connect) ask for sockets: this relay makes UDP ones.
            TurnPollRet::AllocateTcpSocket { .. } | TurnPollRet::TcpClose { .. } => clock,
        };
        while let Some(event) = self.client.poll_event() {
            match event {
                TurnEvent::AllocationCreated(_, relayed) => self.state = RelayState::Allocated(relayed),
                TurnEvent::AllocationCreateFailed(family) => {
                    return Err(RelayError::Refused(format!("the server refused an {family:?} allocation")));
                }
                TurnEvent::PermissionCreateFailed(_, peer) => return Err(RelayError::Permission(peer)),
                _ => {}
            }
        }
        let after = wait.checked_duration_since(clock).unwrap_or(Duration::ZERO);
        Ok(now + after)
    }

    fn closed(&self) -> RelayError {
        match self.state {
            RelayState::Allocating => RelayError::Refused(
                "the server did not grant an allocation (wrong credentials, or no TURN server there)".into(),
            ),
            RelayState::Allocated(_) => RelayError::Closed,
        }
    }

    /// Takes bytes the server sent: the datagrams peers sent through it, in order. With TCP
    /// the bytes may hold part of a message or several; the rest waits for the next call.
    pub fn receive(&mut self, from_server: &[u8], now: Instant) -> Vec<PeerDatagram> {
        if self.state == RelayState::Allocating
            && let Some(code) = allocate_error_code(from_server)
        {
            self.allocate_errors.push(code);
        }
        let clock = self.clock(now);
        let transmit =
            Transmit::new(from_server, self.client.transport(), self.client.remote_addr(), self.client.local_addr());
        let mut out = Vec::new();
        match self.client.recv(transmit, clock) {
            TurnRecvRet::PeerData(data) => out.push(PeerDatagram { peer: data.peer, data: data.data().to_vec() }),
            TurnRecvRet::Handled | TurnRecvRet::Ignored(_) | TurnRecvRet::PeerIcmp { .. } => {}
        }
        while let Some(data) = self.client.poll_recv(clock) {
            out.push(PeerDatagram { peer: data.peer, data: data.data().to_vec() });
        }
        out
    }

    /// Bytes to write to the server that carry `data` to `peer`; `None` while the peer's
    /// permission is being created (the datagram is dropped, as a network would: ICE
    /// retransmits).
    pub fn send(&mut self, peer: SocketAddr, data: &[u8], now: Instant) -> Result<Option<Vec<u8>>, RelayError> {
        let clock = self.clock(now);
        let transport = TransportType::Udp;
        if !self.client.have_permission(transport, peer.ip()) {
            self.relayed()?;
            if self.permissions_asked.insert(peer.ip()) {
                self.client
                    .create_permission(transport, peer.ip(), clock)
                    .map_err(|e| RelayError::Protocol(e.to_string()))?;
            }
            return Ok(None);
        }
        match self.client.send_to(transport, peer, data, clock) {
            Ok(Some(transmit)) => Ok(Some(transmit.build().data)),
            Ok(None) => Ok(None),
            Err(e) => Err(RelayError::Protocol(e.to_string())),
        }
    }

    fn relayed(&self) -> Result<SocketAddr, RelayError> {
        match self.state {
            RelayState::Allocated(addr) => Ok(addr),
            RelayState::Allocating => Err(RelayError::NotAllocated),
        }
    }

    /// Whether the server's transport is a byte stream (TCP).
    pub fn transport(&self) -> ServerTransport {
        match self.client.transport() {
            TransportType::Tcp => ServerTransport::Tcp,
            TransportType::Udp => ServerTransport::Udp,
        }
    }
}

/// ERROR-CODE values (RFC 8489 §14.8): credentials missing or refused, a nonce expired.
const UNAUTHORIZED: u16 = 401;
const STALE_NONCE: u16 = 438;

/// The error code of an Allocate error response (type 0x0113) that starts `bytes`: a look at
/// the header and the ERROR-CODE attribute (0x0009), nothing else checked.
fn allocate_error_code(bytes: &[u8]) -> Option<u16> {
    const HEADER: usize = 20;
    if bytes.len() < HEADER || bytes[..2] != [0x01, 0x13] || bytes[4..8] != [0x21, 0x12, 0xa4, 0x42] {
        return None;
    }
    let length = usize::from(u16::from_be_bytes([bytes[2], bytes[3]]));
    let attributes = bytes.get(HEADER..HEADER + length)?;
    let mut at = 0;
    // Each attribute is at least 4 bytes, so this ends within length / 4 turns.
    while let Some(head) = attributes.get(at..at + 4) {
        let (kind, len) = (u16::from_be_bytes([head[0], head[1]]), usize::from(u16::from_be_bytes([head[2], head[3]])));
        if kind == 0x0009 {
            let value = attributes.get(at + 4..at + 4 + len).filter(|v| v.len() >= 4)?;
            return Some(u16::from(value[2] & 0x07) * 100 + u16::from(value[3]));
        }
        at += 4 + len.div_ceil(4) * 4;
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    fn relay(transport: ServerTransport, now: Instant) -> Relay {
        let (local, server) = ("10.0.0.1:40000".parse().unwrap(), "10.0.0.2:3478".parse().unwrap());
        Relay::allocate(transport, local, server, "user-1", "pass-1", now)
    }

    /// A STUN Allocate request (method 0x003, class request) with the magic cookie.
    fn is_allocate(bytes: &[u8]) -> bool {
        bytes.len() >= 20 && bytes[..2] == [0x00, 0x03] && bytes[4..8] == [0x21, 0x12, 0xa4, 0x42]
    }

    #[test]
    fn the_first_thing_sent_is_an_allocate_request() {
        for transport in [ServerTransport::Udp, ServerTransport::Tcp] {
            let now = Instant::now();
            let mut r = relay(transport, now);
            assert_eq!(r.state(), RelayState::Allocating);
            let sent = r.poll_transmit(now).expect("a request to send");
            assert!(is_allocate(&sent), "{transport:?}: {sent:02x?}");
            // Before the allocation there is nothing to relay through.
            assert!(matches!(r.send("10.0.0.3:5000".parse().unwrap(), b"x", now), Err(RelayError::NotAllocated)));
        }
    }

    /// An Allocate error response with ERROR-CODE `code` and a REALM before it.
    fn allocate_error(code: u16) -> Vec<u8> {
        let mut attrs = vec![0x00, 0x14, 0x00, 0x03, b'a', b'b', b'c', 0];
        attrs.extend([0x00, 0x09, 0x00, 0x04, 0, 0, (code / 100) as u8, (code % 100) as u8]);
        let mut msg = vec![0x01, 0x13, 0, attrs.len() as u8, 0x21, 0x12, 0xa4, 0x42];
        msg.extend([7u8; 12]);
        msg.extend(attrs);
        msg
    }

    #[test]
    fn error_codes_of_allocate_responses_are_read() {
        assert_eq!(allocate_error_code(&allocate_error(401)), Some(401));
        assert_eq!(allocate_error_code(&allocate_error(486)), Some(486));
        let mut success = allocate_error(401);
        success[1] = 0x03;
        assert_eq!(allocate_error_code(&success), None);
        assert_eq!(allocate_error_code(&allocate_error(401)[..24]), None, "cut short");
    }

    /// The challenge is expected; a second 401 refuses the credentials and says so.
    #[test]
    fn a_second_401_refuses_the_credentials() {
        let now = Instant::now();
        let mut r = relay(ServerTransport::Udp, now);
        r.poll_transmit(now).unwrap();
        r.receive(&allocate_error(401), now);
        assert!(r.poll(now).is_ok(), "the first 401 is the challenge");
        r.receive(&allocate_error(401), now);
        let e = r.poll(now).unwrap_err();
        assert_eq!(e.to_string(), "TURN allocation refused: the server refused the credentials (401 Unauthorized)");
        let mut r = relay(ServerTransport::Udp, now);
        r.receive(&allocate_error(486), now);
        assert!(r.poll(now).unwrap_err().to_string().contains("error 486"));
    }

    /// A server that never answers: the request is retransmitted, then the allocation fails
    /// and says why, after a bounded time (stepped by hand, no socket).
    #[test]
    fn a_silent_server_ends_the_allocation_with_a_reason() {
        let start = Instant::now();
        let mut r = relay(ServerTransport::Udp, start);
        let mut now = start;
        let mut requests = 0;
        for _ in 0..1_000 {
            while let Some(sent) = r.poll_transmit(now) {
                assert!(is_allocate(&sent));
                requests += 1;
            }
            match r.poll(now) {
                Ok(at) => now = at.max(now + Duration::from_millis(1)),
                Err(e) => {
                    assert!(matches!(e, RelayError::Refused(_)), "{e}");
                    assert!(e.to_string().contains("wrong credentials, or no TURN server there"), "{e}");
                    assert!(requests > 1, "retransmitted");
                    assert!(now - start < Duration::from_secs(60), "gave up in {:?}", now - start);
                    return;
                }
            }
        }
        panic!("the allocation never ended");
    }
}
