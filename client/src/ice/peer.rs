//! One end of a WebRTC data channel, sans-IO: str0m's `Rtc` (ICE, DTLS, SCTP) bound to one
//! local candidate, a host socket's address or a TURN allocation's relayed address ([`Relay`]).
//! The caller owns the socket: it hands in what arrived ([`Peer::receive`]), writes out what
//! [`Peer::poll`] says, and calls [`Peer::timeout`] when the time [`Peer::poll`] named has come.
//! Over a relay every datagram goes through the allocation, so the peer sees only the relayed
//! address: what `iceTransportPolicy: relay` means in a browser.

use super::error::PeerError;
use super::relay::{Relay, RelayState};
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Instant;
use str0m::change::{SdpAnswer, SdpOffer, SdpPendingOffer};
use str0m::channel::ChannelId;
use str0m::net::{Protocol, Receive};
use str0m::{Candidate, Event, IceConnectionState, Input, Output, Rtc, RtcConfig};

/// The data channel's label, as upstream's tester names it.
pub const CHANNEL_LABEL: &str = "icetest";

/// How datagrams leave and arrive.
#[derive(Debug)]
enum Path {
    /// A socket of our own at this address.
    Host(SocketAddr),
    /// A TURN allocation: everything goes to and comes from the TURN server (boxed: the
    /// client's state is large beside an address).
    Relay(Box<Relay>),
}

/// What the caller does next.
#[derive(Debug, PartialEq, Eq)]
pub enum PeerOutput {
    /// Write `data` to `to` (the TURN server over a relay, else the remote peer).
    Transmit { to: SocketAddr, data: Vec<u8> },
    /// The data channel is open: [`Peer::send`] works.
    Open,
    /// A message arrived on the data channel.
    Message(Vec<u8>),
    /// ICE disconnected or the channel closed.
    Closed,
    /// Nothing to do until this time, or until something arrives.
    Wait(Instant),
}

#[derive(Debug)]
pub struct Peer {
    rtc: Rtc,
    path: Path,
    channel: Option<ChannelId>,
    /// The remote address data last came from: the selected remote candidate.
    remote: Option<SocketAddr>,
}

fn rtc(now: Instant) -> Rtc {
    RtcConfig::new().set_crypto_provider(Arc::new(str0m::crypto::from_feature_flags())).build(now)
}

impl Peer {
    /// A peer with a host candidate at `addr` (the socket the caller reads and writes).
    pub fn host(addr: SocketAddr, now: Instant) -> Result<Peer, PeerError> {
        let mut rtc = rtc(now);
        let candidate = Candidate::host(addr, "udp").map_err(|e| PeerError::Sdp(e.to_string()))?;
        rtc.add_local_candidate(candidate);
        Ok(Peer { rtc, path: Path::Host(addr), channel: None, remote: None })
    }

    /// A peer whose only candidate will be `relay`'s relayed address; the allocation must be
    /// made ([`Peer::poll`] drives it) before [`Peer::offer`].
    pub fn relayed(relay: Relay, now: Instant) -> Peer {
        Peer { rtc: rtc(now), path: Path::Relay(Box::new(relay)), channel: None, remote: None }
    }

    /// The relayed address, once the allocation is made (`None` for a host peer too).
    pub fn relayed_address(&self) -> Option<SocketAddr> {
        match &self.path {
            Path::Relay(relay) => match relay.state() {
                RelayState::Allocated(addr) => Some(addr),
                RelayState::Allocating => None,
            },
            Path::Host(_) => None,
        }
    }

    /// The local candidate: the host address, or the relayed one with the socket it is reached from.
    pub fn local_candidate(&self) -> Option<Candidate> {
        match &self.path {
            Path::Host(addr) => Candidate::host(*addr, "udp").ok(),
            Path::Relay(relay) => {
                self.relayed_address().and_then(|addr| Candidate::relayed(addr, relay.local(), "udp").ok())
            }
        }
    }

    /// The offer of a data channel, with the relayed candidate.
    pub fn offer(&mut self) -> Result<(String, SdpPendingOffer), PeerError> {
        self.add_relayed_candidate()?;
        let mut api = self.rtc.sdp_api();
        api.add_channel(CHANNEL_LABEL.to_string());
        let (offer, pending) = api.apply().ok_or_else(|| PeerError::Sdp("nothing to offer".into()))?;
        Ok((offer.to_sdp_string(), pending))
    }

    pub fn accept_answer(&mut self, pending: SdpPendingOffer, answer: &str) -> Result<(), PeerError> {
        let answer = SdpAnswer::from_sdp_string(answer).map_err(|e| PeerError::Sdp(e.to_string()))?;
        self.rtc.sdp_api().accept_answer(pending, answer)?;
        Ok(())
    }

    /// Answers an offer (the tester's side), with the relayed candidate over a relay.
    pub fn answer(&mut self, offer: &str) -> Result<String, PeerError> {
        let offer = SdpOffer::from_sdp_string(offer).map_err(|e| PeerError::Sdp(e.to_string()))?;
        self.add_relayed_candidate()?;
        Ok(self.rtc.sdp_api().accept_offer(offer)?.to_sdp_string())
    }

    /// A host peer's candidate was added when it was made; a relayed one's once allocated.
    fn add_relayed_candidate(&mut self) -> Result<(), PeerError> {
        if matches!(self.path, Path::Relay(_)) {
            let candidate = self.local_candidate().ok_or(super::error::RelayError::NotAllocated)?;
            self.rtc.add_local_candidate(candidate);
        }
        Ok(())
    }

    /// Takes what arrived on the socket from `from`.
    pub fn receive(&mut self, from: SocketAddr, data: &[u8], now: Instant) -> Result<(), PeerError> {
        match &mut self.path {
            Path::Host(local) => {
                let local = *local;
                self.deliver(from, local, data, now)
            }
            Path::Relay(relay) => {
                let datagrams = relay.receive(data, now);
                let Some(relayed) = self.relayed_address() else { return Ok(()) };
                for datagram in datagrams {
                    self.deliver(datagram.peer, relayed, &datagram.data, now)?;
                }
                Ok(())
            }
        }
    }

    fn deliver(
        &mut self,
        source: SocketAddr,
        destination: SocketAddr,
        data: &[u8],
        now: Instant,
    ) -> Result<(), PeerError> {
        // Not STUN, DTLS or SRTP (a stray datagram): dropped, as a browser drops it.
        let Ok(receive) = Receive::new(Protocol::Udp, source, destination, data) else { return Ok(()) };
        self.remote = Some(source);
        self.rtc.handle_input(Input::Receive(now, receive))?;
        Ok(())
    }

    /// The time [`PeerOutput::Wait`] named has come.
    pub fn timeout(&mut self, now: Instant) -> Result<(), PeerError> {
        self.rtc.handle_input(Input::Timeout(now))?;
        Ok(())
    }

    /// The next thing to do; call until it is [`PeerOutput::Wait`].
    pub fn poll(&mut self, now: Instant) -> Result<PeerOutput, PeerError> {
        let relay_wait = match &mut self.path {
            Path::Relay(relay) => {
                if let Some(data) = relay.poll_transmit(now) {
                    return Ok(PeerOutput::Transmit { to: relay.server(), data });
                }
                Some(relay.poll(now)?)
            }
            Path::Host(_) => None,
        };
        loop {
            match self.rtc.poll_output()? {
                Output::Transmit(t) => match &mut self.path {
                    Path::Host(_) => return Ok(PeerOutput::Transmit { to: t.destination, data: t.contents.to_vec() }),
                    Path::Relay(relay) => {
                        if let Some(data) = relay.send(t.destination, &t.contents, now)? {
                            return Ok(PeerOutput::Transmit { to: relay.server(), data });
                        }
                        if let Some(data) = relay.poll_transmit(now) {
                            return Ok(PeerOutput::Transmit { to: relay.server(), data });
                        }
                    }
                },
                Output::Event(Event::ChannelOpen(id, _)) => {
                    self.channel = Some(id);
                    return Ok(PeerOutput::Open);
                }
                Output::Event(Event::ChannelData(d)) => return Ok(PeerOutput::Message(d.data)),
                Output::Event(Event::ChannelClose(_))
                | Output::Event(Event::IceConnectionStateChange(IceConnectionState::Disconnected)) => {
                    return Ok(PeerOutput::Closed);
                }
                Output::Event(_) => {}
                Output::Timeout(at) => {
                    return Ok(PeerOutput::Wait(relay_wait.map_or(at, |r| r.min(at)).max(now)));
                }
            }
        }
    }

    /// Sends a binary message on the data channel; `false` when it is full (back off).
    pub fn send(&mut self, message: &[u8]) -> Result<bool, PeerError> {
        let id = self.channel.ok_or(PeerError::NoChannel)?;
        let mut channel = self.rtc.channel(id).ok_or(PeerError::NoChannel)?;
        Ok(channel.write(true, message)?)
    }

    /// The address the remote peer's datagrams come from (its selected candidate).
    pub fn remote(&self) -> Option<SocketAddr> {
        self.remote
    }

    pub fn is_relayed(&self) -> bool {
        matches!(self.path, Path::Relay(_))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    /// Runs `peer` until it waits; datagrams it sends are queued for the other side.
    fn drain(peer: &mut Peer, now: Instant, wire: &mut Vec<(SocketAddr, Vec<u8>)>, events: &mut Vec<PeerOutput>) {
        for _ in 0..10_000 {
            match peer.poll(now).unwrap() {
                PeerOutput::Transmit { to, data } => wire.push((to, data)),
                PeerOutput::Wait(_) => return,
                event => events.push(event),
            }
        }
        panic!("the peer never waits");
    }

    /// Two host peers, no sockets: the datagrams go from one to the other in memory, time is
    /// stepped by hand. The channel opens on both sides and a message comes back echoed.
    #[test]
    fn two_peers_open_a_data_channel_and_echo_in_memory() {
        let (a_addr, b_addr): (SocketAddr, SocketAddr) =
            ("10.0.0.1:1000".parse().unwrap(), "10.0.0.2:2000".parse().unwrap());
        let mut now = Instant::now();
        let mut a = Peer::host(a_addr, now).unwrap();
        let mut b = Peer::host(b_addr, now).unwrap();
        let (offer, pending) = a.offer().unwrap();
        let answer = b.answer(&offer).unwrap();
        a.accept_answer(pending, &answer).unwrap();
        let (mut a_events, mut b_events) = (Vec::new(), Vec::new());
        let mut echoed = false;
        for _ in 0..2_000 {
            let (mut to_b, mut to_a) = (Vec::new(), Vec::new());
            drain(&mut a, now, &mut to_b, &mut a_events);
            drain(&mut b, now, &mut to_a, &mut b_events);
            for (to, data) in to_b {
                assert_eq!(to, b_addr);
                b.receive(a_addr, &data, now).unwrap();
            }
            for (to, data) in to_a {
                assert_eq!(to, a_addr);
                a.receive(b_addr, &data, now).unwrap();
            }
            if a_events.contains(&PeerOutput::Open) && !echoed && a.send(b"ping").unwrap() {
                echoed = true;
            }
            for event in b_events.drain(..) {
                if let PeerOutput::Message(m) = event {
                    assert!(b.send(&m).unwrap());
                }
            }
            if a_events.contains(&PeerOutput::Message(b"ping".to_vec())) {
                assert_eq!(a.remote(), Some(b_addr));
                return;
            }
            now += Duration::from_millis(5);
            a.timeout(now).unwrap();
            b.timeout(now).unwrap();
        }
        panic!("no echo: a saw {a_events:?}");
    }
}
