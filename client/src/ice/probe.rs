//! The measurement over an open data channel: numbered, timestamped packets at a fixed rate,
//! echoed back by the tester, each one's round trip timed; and the tester's side, the echo.

use super::error::LinkError;
use super::link::{Link, LinkEvent};
use super::stats::Stats;
use std::time::{Duration, Instant};

/// How long, after the last packet is sent, its echo may still come back.
pub const ECHO_GRACE: Duration = Duration::from_secs(1);

/// A probe packet: its number and when it left, in nanoseconds since the probe started.
const PACKET_LEN: usize = 16;

/// Sends `rate` packets a second (0: one per turn of the loop, as fast as the channel takes
/// them) for `duration` and times their echoes.
pub async fn measure(link: &mut Link, rate: u32, duration: Duration) -> Result<Stats, LinkError> {
    let start = Instant::now();
    let end = start + duration;
    let interval = if rate == 0 { Duration::ZERO } else { Duration::from_secs(1) / rate };
    let mut next_send = start;
    let mut stats = Stats::default();
    loop {
        let now = Instant::now();
        if now >= end && (stats.received() >= stats.sent || now >= end + ECHO_GRACE) {
            break;
        }
        if now < end && now >= next_send {
            let mut packet = [0u8; PACKET_LEN];
            packet[..8].copy_from_slice(&stats.sent.to_be_bytes());
            let sent_at = u64::try_from(now.duration_since(start).as_nanos()).unwrap_or(u64::MAX);
            packet[8..].copy_from_slice(&sent_at.to_be_bytes());
            if link.peer.send(&packet)? {
                stats.sent += 1;
            }
            next_send += interval;
            stats.elapsed = now.duration_since(start);
            if interval.is_zero() {
                next_send = now;
            }
        }
        let deadline = if now < end { next_send.clamp(now, end) } else { end + ECHO_GRACE };
        match link.next(deadline).await? {
            LinkEvent::Message(m) if m.len() == PACKET_LEN => {
                let sent_at = u64::from_be_bytes(m[8..].try_into().expect("8 bytes"));
                let rtt = Instant::now().duration_since(start).saturating_sub(Duration::from_nanos(sent_at));
                stats.rtts.push(rtt);
            }
            LinkEvent::Closed => break,
            LinkEvent::Message(_) | LinkEvent::Open | LinkEvent::Deadline => {}
        }
    }
    stats.elapsed = stats.elapsed.max(Duration::from_millis(1)).min(duration);
    Ok(stats)
}

/// The tester's side: every message back to where it came from, until the peer goes away or
/// `deadline`. Returns how many it echoed.
pub async fn echo(link: &mut Link, deadline: Instant) -> Result<u64, LinkError> {
    let mut echoed = 0;
    loop {
        match link.next(deadline).await? {
            LinkEvent::Message(m) => {
                if link.peer.send(&m)? {
                    echoed += 1;
                }
            }
            LinkEvent::Open => {}
            LinkEvent::Closed | LinkEvent::Deadline => return Ok(echoed),
        }
    }
}
