//! The watch protocol's rules, each tested once, on the machine alone: no socket, no runtime,
//! the time passed in.

use super::*;
use crate::store::{ConfigStore, Scope};
use crate::watch::{Held, Watch};
use crate::websocket::WebSocketFrame;
use std::sync::Arc;
use stunner_gateway::cds::ConfigId;
use stunner_gateway::config::StunnerConfig;

const SECOND: Duration = Duration::from_secs(1);

fn settings() -> Settings {
    Settings { ping_interval: 20 * SECOND, write_timeout: 10 * SECOND, ..Default::default() }
}

/// Config `ns/<name>` at a version named by `realm`, as a push.
fn push(store: &Arc<ConfigStore>, name: &str, realm: &str) -> Push {
    let mut config = StunnerConfig::zero(&format!("ns/{name}"));
    config.auth.realm = realm.into();
    store.upsert(config);
    let id = ConfigId::new("ns", name);
    let (_, mut initial) = Watch::resume(store.clone(), Scope::Config(id), None, &Held::new());
    let update = initial.pop().expect("the stored version");
    Push { frame: update.snapshot.encoded::<WebSocketFrame>(&update.variant), update }
}

fn store() -> Arc<ConfigStore> {
    Arc::new(ConfigStore::new(crate::CdsMetrics::default()))
}

/// What a frame handed out is, for the assertions: a config by its realm, the others by kind
/// (a Close with its bytes).
fn kind(transmit: &Transmit) -> String {
    match transmit.out() {
        Out::Config(push) => push.update.snapshot.config.auth.realm.clone(),
        Out::Pong(frame) => format!("pong {:?}", &frame[2..]),
        Out::Ping(_) => "ping".into(),
        Out::Close(frame) => format!("close {:?}", &frame[..]),
    }
}

/// Writes every frame handed out, starting with `first`, as the client takes them at once at
/// `now`: what went out, in order.
fn drain(machine: &mut WatchProtocol, first: Option<Transmit>, now: Instant) -> Vec<String> {
    let mut sent = Vec::new();
    let mut next = first;
    while let Some(transmit) = next {
        sent.push(kind(&transmit));
        next = machine.on_written(now);
    }
    sent
}

/// What the client sent, as one read brings it.
fn inbox(heard: bool, pong: Option<&'static [u8]>, close: Option<Option<u16>>) -> Inbox {
    Inbox { heard, pong: pong.map(|p| Bytes::from([b"\x8a", &[p.len() as u8][..], p].concat())), close, end: None }
}

#[test]
fn a_ping_goes_out_every_interval_and_a_client_silent_for_three_is_dropped() {
    let s = settings();
    let t0 = Instant::now();
    let mut machine = WatchProtocol::new(&s, t0);
    assert_eq!(machine.deadline(&s), Some(t0 + s.ping_interval));
    assert!(machine.on_timer(t0 + s.ping_interval - s.slack() - SECOND, &s).is_none(), "not before its time");
    // Up to the slack early, so one timer turn serves connections due about now.
    let ping = machine.on_timer(t0 + s.ping_interval - s.slack(), &s);
    assert_eq!(drain(&mut machine, ping, t0 + s.ping_interval), ["ping"]);
    // Any frame from the client shows it alive: the silence counts from there.
    let heard = t0 + s.ping_interval + SECOND;
    assert!(machine.on_received(inbox(true, None, None), heard).is_none());
    let (mut now, mut pings) = (heard, 0);
    while machine.over().is_none() {
        assert!(pings <= 3, "more Pings than three intervals hold");
        now = machine.deadline(&s).expect("a Ping's timer");
        let ping = machine.on_timer(now, &s);
        pings += drain(&mut machine, ping, now).len();
    }
    assert_eq!(machine.over(), Some(End::Silent), "dropped, without a Close");
    assert_eq!(pings, 3, "a Ping every interval until then");
    let silent = now.duration_since(heard);
    assert!(silent >= s.ping_interval * 3 && silent < s.ping_interval * 4, "after {silent:?}");
    assert_eq!(machine.deadline(&s), None);
}

#[test]
fn a_clients_latest_ping_is_answered_before_what_waits() {
    let s = settings();
    let store = store();
    let t0 = Instant::now();
    let mut machine = WatchProtocol::new(&s, t0);
    let pong = machine.on_received(inbox(true, Some(b"one"), None), t0);
    assert_eq!(drain(&mut machine, pong, t0), ["pong [111, 110, 101]"]);
    // While a frame is on its way, Pings keep coming: the latest one's Pong goes next, then
    // the config that waits.
    let first = machine.on_update(push(&store, "gw", "r1"), t0).expect("handed out at once");
    assert!(machine.on_update(push(&store, "gw", "r2"), t0).is_none());
    for payload in [&b"a"[..], b"b", b"c"] {
        assert!(machine.on_received(inbox(true, Some(payload), None), t0).is_none());
    }
    assert_eq!(machine.held(), 3 + push(&store, "gw", "r2").frame.len());
    assert_eq!(drain(&mut machine, Some(first), t0), ["r1", "pong [99]", "r2"]);
    assert_eq!(machine.held(), 0);
}

#[test]
fn a_frame_not_written_within_the_write_timeout_drops_the_client() {
    let s = settings();
    let store = store();
    let t0 = Instant::now();
    let mut machine = WatchProtocol::new(&s, t0);
    let _first = machine.on_update(push(&store, "gw", "r1"), t0).expect("handed out");
    assert!(machine.on_update(push(&store, "other", "o1"), t0).is_none(), "waits behind the first");
    assert_eq!(machine.deadline(&s), Some(t0 + s.write_timeout));
    // Each frame's timeout starts when the one before it is out.
    let t1 = t0 + s.write_timeout - SECOND;
    let second = machine.on_written(t1).expect("the next frame");
    assert_eq!(kind(&second), "o1");
    assert!(machine.on_timer(t0 + s.write_timeout, &s).is_none());
    assert_eq!(machine.over(), None, "the second frame's own timeout runs");
    assert_eq!(machine.deadline(&s), Some(t1 + s.write_timeout));
    assert!(machine.on_timer(t1 + s.write_timeout, &s).is_none());
    assert_eq!(machine.over(), Some(End::TooSlow), "dropped, without a Close");
}

#[test]
fn only_the_latest_version_waits_and_a_superseded_one_is_never_sent() {
    let s = settings();
    let store = store();
    let t0 = Instant::now();
    let mut machine = WatchProtocol::new(&s, t0);
    assert!(machine.wants_updates());
    let first = machine.on_update(push(&store, "gw", "r1"), t0);
    assert!(!machine.wants_updates(), "the watch is not read while a frame is on its way");
    // Versions that arrive anyway (a scope's initial configs, say) wait, each replacing the
    // version of its config before it; another config waits beside them.
    for realm in ["r2", "r3", "r4"] {
        assert!(machine.on_update(push(&store, "gw", realm), t0).is_none());
    }
    assert!(machine.on_update(push(&store, "other", "o1"), t0).is_none());
    assert_eq!(machine.held(), push(&store, "gw", "r4").frame.len() + push(&store, "other", "o1").frame.len());
    assert_eq!(drain(&mut machine, first, t0), ["r1", "r4", "o1"]);
    assert!(machine.wants_updates(), "caught up: the watch is read again");
}

#[test]
fn a_close_is_answered_with_its_code_when_one_may_send_it_else_with_1002() {
    let s = settings();
    let t0 = Instant::now();
    let answer = |code: Option<u16>| {
        let mut machine = WatchProtocol::new(&s, t0);
        let close = machine.on_received(inbox(true, None, Some(code)), t0);
        let sent = drain(&mut machine, close, t0);
        (sent, machine.over())
    };
    let echoed = |code: u16| (vec![format!("close {:?}", &close_frame(Some(code))[..])], Some(End::ClientClosed));
    // Codes RFC 6455 §7.4.1 defines for endpoints to send, IANA's 1012 and 1013, and the
    // ranges §7.4.2 gives libraries and applications: echoed.
    for code in [1000, 1001, 1002, 1003, 1007, 1008, 1009, 1010, 1011, 1012, 1013, 3000, 3999, 4000, 4999] {
        assert_eq!(answer(Some(code)), echoed(code), "{code}");
    }
    // No code: an empty Close (its code reads as 1005, which may not be sent).
    assert_eq!(answer(None), (vec!["close [136, 0]".to_string()], Some(End::ClientClosed)));
    // Codes no endpoint may send: 1005, 1006, 1015 (§7.4.1), under 1000, reserved or
    // unassigned in 1000–2999 (§7.4.2; 1014 too, as upstream's gorilla/websocket reads it),
    // past 4999. A protocol error: 1002.
    for code in [0, 999, 1004, 1005, 1006, 1014, 1015, 1016, 2000, 2999, 5000, u16::MAX] {
        let (sent, over) = answer(Some(code));
        assert_eq!(sent, echoed(1002).0, "{code}");
        assert_eq!(over, Some(End::Broken(ProtocolError::BadCloseCode(code))), "{code}");
    }
}

#[test]
fn a_broken_frame_is_answered_with_its_close_code_and_nothing_is_taken_after_a_close() {
    let s = settings();
    let store = store();
    let t0 = Instant::now();
    let mut machine = WatchProtocol::new(&s, t0);
    let first = machine.on_update(push(&store, "gw", "r1"), t0);
    // In one read: a Ping, then a message too big. The Pong and the Close wait, in that order.
    let broken = Inbox { end: Some(End::Broken(ProtocolError::TooBig)), ..inbox(true, Some(b"p"), None) };
    assert!(machine.on_received(broken, t0).is_none());
    assert!(!machine.is_open());
    assert!(machine.on_update(push(&store, "gw", "r2"), t0).is_none());
    assert!(machine.on_received(inbox(true, Some(b"q"), None), t0).is_none());
    assert!(machine.on_shutdown(t0).is_none());
    assert_eq!(machine.over(), None, "over once the Close is out");
    let close = format!("close {:?}", &close_frame(Some(1009))[..]);
    assert_eq!(drain(&mut machine, first, t0), ["r1".to_string(), "pong [112]".into(), close]);
    assert_eq!(machine.over(), Some(End::Broken(ProtocolError::TooBig)));
}

#[test]
fn shutdown_sends_an_empty_close_behind_what_is_on_its_way_which_still_has_its_timeout() {
    let s = settings();
    let store = store();
    let t0 = Instant::now();
    let mut machine = WatchProtocol::new(&s, t0);
    let _first = machine.on_update(push(&store, "gw", "r1"), t0).expect("handed out");
    assert!(machine.on_shutdown(t0).is_none(), "behind the frame on its way");
    assert_eq!(machine.deadline(&s), Some(t0 + s.write_timeout), "no Ping timer once closing");
    let close = machine.on_written(t0).expect("the Close");
    assert_eq!(kind(&close), "close [136, 0]");
    assert!(machine.on_timer(t0 + s.write_timeout, &s).is_none());
    assert_eq!(machine.over(), Some(End::ShuttingDown), "a Close not taken in time is not waited for");

    // A client gone meanwhile ends it too, for the reason it was ending for.
    let mut machine = WatchProtocol::new(&s, t0);
    let _close = machine.on_shutdown(t0).expect("at once");
    machine.on_broken();
    assert_eq!(machine.over(), Some(End::ShuttingDown));
    let mut machine = WatchProtocol::new(&s, t0);
    machine.on_broken();
    assert_eq!(machine.over(), Some(End::ClientClosed));
}

/// However many Pongs, Pings and config versions come while a frame is on its way, what waits
/// is the last Pong, the last version of each config and a Close: no more.
#[test]
fn what_waits_is_bounded_whatever_the_client_sends() {
    // A write timeout past the Ping interval: a Ping falls due while the frame is on its way.
    let s = Settings { write_timeout: 30 * SECOND, ..settings() };
    let store = store();
    let t0 = Instant::now();
    let mut machine = WatchProtocol::new(&s, t0);
    let first = machine.on_update(push(&store, "gw", "r1"), t0);
    for i in 0..10_000u32 {
        let payload: &'static [u8] = if i % 2 == 0 { b"even" } else { b"odd" };
        machine.on_received(inbox(true, Some(payload), None), t0);
        assert!(machine.held() <= 6, "after {i} Pings");
    }
    assert!(machine.on_timer(t0 + s.ping_interval, &s).is_none());
    assert_eq!(machine.deadline(&s), Some(t0 + s.write_timeout), "the Ping was due, and is done");
    assert_eq!(machine.held(), 5, "no Ping of ours waits");
    machine.on_received(inbox(true, None, Some(None)), t0);
    assert_eq!(drain(&mut machine, first, t0), ["r1", "pong [111, 100, 100]", "close [136, 0]"]);
    assert_eq!(machine.held(), 0);
}

#[test]
fn frames_decode_into_one_inbox_up_to_a_close() {
    // A client's masked frames (all-zero key: the payload reads as it is).
    let frame = |first: u8, payload: &[u8]| [&[first, 0x80 | payload.len() as u8, 0, 0, 0, 0][..], payload].concat();
    let bytes = [frame(0x89, b"a"), frame(0x89, b"b"), frame(0x88, &1000u16.to_be_bytes()), frame(0x89, b"c")].concat();
    let mut inbox = Inbox::default();
    inbox.take(&mut FrameReader::new(4096), &bytes);
    assert!(inbox.heard);
    assert_eq!(inbox.pong.as_deref(), Some(&b"\x8a\x01b"[..]), "the latest Ping's Pong");
    assert_eq!(inbox.close, Some(Some(1000)));
    assert!(inbox.is_final());
}
