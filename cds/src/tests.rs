//! Store and watch semantics, without sockets.

use super::CdsMetrics;
use super::store::{ConfigStore, Encoding, Frame, Scope, Snapshot};
use super::watch::Watch;
use bytes::Bytes;
use std::sync::Arc;
use std::time::Duration;
use stunner_gateway::cds::ConfigId;
use stunner_gateway::config::{ListenerConfig, NODE_ADDRESS_PLACEHOLDER, StunnerConfig};

fn store() -> Arc<ConfigStore> {
    Arc::new(ConfigStore::new(CdsMetrics::default()))
}

fn config(id: &str, realm: &str) -> StunnerConfig {
    let mut c = StunnerConfig::zero(id);
    c.auth.realm = realm.into();
    c.listeners.push(ListenerConfig {
        name: format!("{id}/udp"),
        protocol: "TURN-UDP".into(),
        addr: "$STUNNER_ADDR".into(),
        port: 3478,
        ..Default::default()
    });
    c
}

fn parsed(frame: &Frame) -> StunnerConfig {
    serde_json::from_slice(frame).unwrap()
}

/// The next batch of a watch, or `None` if nothing arrives within a short while.
async fn next(w: &mut Watch) -> Option<Vec<StunnerConfig>> {
    tokio::time::timeout(Duration::from_millis(100), w.next())
        .await
        .ok()
        .map(|r| r.unwrap().iter().map(parsed).collect())
}

fn id(s: &str) -> ConfigId {
    ConfigId::parse(s).unwrap()
}

#[test]
fn upsert_versions_follow_content_and_equal_content_is_a_no_op() {
    let s = store();
    let v1 = s.upsert(config("ns/a", "r1")).unwrap();
    assert_eq!(s.upsert(config("ns/a", "r1")), None);
    // Equal after normalisation (explicit defaults) is still the same content.
    let mut explicit = config("ns/a", "r1");
    explicit.admin.loglevel = "all:INFO".into();
    explicit.listeners[0].routes = vec![];
    assert_eq!(s.upsert(explicit), None);
    let v2 = s.upsert(config("ns/a", "r2")).unwrap();
    assert_ne!(v2, v1);
    // Back to the first content: back to the first version.
    assert_eq!(s.upsert(config("ns/a", "r1")), Some(v1));
    let v3 = s.upsert(config("ns/b", "r1")).unwrap();
    assert_ne!(v3, v1);
    assert_eq!(s.get(&id("ns/a")).unwrap().version, v1);
    // Another store (another replica, or this one after a restart) agrees.
    let other = store();
    assert_eq!(other.upsert(config("ns/a", "r1")), Some(v1));
}

#[test]
fn configs_without_a_namespaced_name_are_refused() {
    let s = store();
    assert_eq!(s.upsert(config("no-slash", "r")), None);
    assert!(s.list(&Scope::All).is_empty());
}

#[test]
fn lists_are_sorted_and_scoped() {
    let s = store();
    for i in ["b/2", "a/1", "b/1", "c/1", "ab/1"] {
        s.upsert(config(i, "r"));
    }
    let ids = |scope| s.list(&scope).iter().map(|x| x.id.to_string()).collect::<Vec<_>>();
    assert_eq!(ids(Scope::All), ["a/1", "ab/1", "b/1", "b/2", "c/1"]);
    assert_eq!(ids(Scope::Namespace("b".into())), ["b/1", "b/2"]);
    assert_eq!(ids(Scope::Namespace("a".into())), ["a/1"]);
    assert!(ids(Scope::Namespace("zz".into())).is_empty());
}

#[tokio::test]
async fn single_watch_gets_snapshot_updates_and_the_zero_config_on_delete() {
    let s = store();
    s.upsert(config("ns/a", "r1"));
    let (mut w, initial) = Watch::new(s.clone(), Scope::Config(id("ns/a")), None);
    assert_eq!(initial.len(), 1);
    assert_eq!(parsed(&initial[0]).auth.realm, "r1");
    assert!(next(&mut w).await.is_none(), "nothing new yet");
    s.upsert(config("ns/b", "other"));
    assert!(next(&mut w).await.is_none(), "other ids are not sent");
    s.upsert(config("ns/a", "r2"));
    assert_eq!(next(&mut w).await.unwrap()[0].auth.realm, "r2");
    s.delete(&id("ns/a"));
    let got = next(&mut w).await.unwrap();
    assert_eq!(got[0], StunnerConfig::zero("ns/a"));
    s.upsert(config("ns/a", "r3"));
    assert_eq!(next(&mut w).await.unwrap()[0].auth.realm, "r3", "a re-created id is delivered");
}

#[tokio::test]
async fn a_missing_id_is_silent_until_created() {
    let s = store();
    let (mut w, initial) = Watch::new(s.clone(), Scope::Config(id("ns/a")), None);
    assert!(initial.is_empty());
    assert!(next(&mut w).await.is_none());
    s.upsert(config("ns/a", "r"));
    assert_eq!(next(&mut w).await.unwrap().len(), 1);
}

#[tokio::test]
async fn a_slow_watch_skips_to_the_latest_version() {
    let s = store();
    let (mut w, _) = Watch::new(s.clone(), Scope::Config(id("ns/a")), None);
    for i in 0..100 {
        s.upsert(config("ns/a", &format!("r{i}")));
    }
    let got = next(&mut w).await.unwrap();
    assert_eq!(got.len(), 1);
    assert_eq!(got[0].auth.realm, "r99");
    assert!(next(&mut w).await.is_none());
}

#[tokio::test]
async fn list_watch_diffs_changes_and_deletions() {
    let s = store();
    s.upsert(config("ns/a", "r"));
    s.upsert(config("other/x", "r"));
    let (mut w, initial) = Watch::new(s.clone(), Scope::Namespace("ns".into()), None);
    assert_eq!(initial.len(), 1);
    s.upsert(config("other/y", "r"));
    assert!(next(&mut w).await.is_none(), "other namespaces are not sent");
    s.upsert(config("ns/b", "r"));
    s.upsert(config("ns/a", "r2"));
    let got = next(&mut w).await.unwrap();
    let names: Vec<_> = got.iter().map(|c| (c.admin.name.as_str(), c.auth.realm.as_str())).collect();
    assert_eq!(names, [("ns/a", "r2"), ("ns/b", "r")]);
    s.delete(&id("ns/a"));
    assert_eq!(next(&mut w).await.unwrap(), [StunnerConfig::zero("ns/a")]);
    // Created and deleted while the client was not looking: nothing to tell it.
    s.upsert(config("ns/c", "r"));
    s.delete(&id("ns/c"));
    assert!(next(&mut w).await.is_none());
}

#[tokio::test]
async fn all_watch_sees_every_namespace() {
    let s = store();
    let (mut w, initial) = Watch::new(s.clone(), Scope::All, None);
    assert!(initial.is_empty());
    s.upsert(config("a/1", "r"));
    s.upsert(config("b/1", "r"));
    assert_eq!(next(&mut w).await.unwrap().len(), 2);
}

#[tokio::test]
async fn node_patching_follows_the_node_address() {
    let s = store();
    let mut c = config("ns/a", "r");
    c.listeners[0].addr = NODE_ADDRESS_PLACEHOLDER.into();
    c.listeners.push(ListenerConfig { name: "ns/a/tcp".into(), addr: "$STUNNER_ADDR".into(), ..Default::default() });
    s.upsert(c);
    s.nodes().set("node-1", Some("203.0.113.7".parse().unwrap()));
    let (mut on_node, initial) = Watch::new(s.clone(), Scope::Config(id("ns/a")), Some("node-1".into()));
    let got = parsed(&initial[0]);
    assert_eq!(got.listeners[0].addr, "203.0.113.7");
    assert_eq!(got.listeners[1].addr, "$STUNNER_ADDR", "only placeholder listeners are patched");
    let (_, unknown) = Watch::new(s.clone(), Scope::Config(id("ns/a")), Some("node-2".into()));
    assert_eq!(parsed(&unknown[0]).listeners[0].addr, "$STUNNER_ADDR", "unknown node falls back");
    let (_, no_node) = Watch::new(s.clone(), Scope::Config(id("ns/a")), None);
    assert_eq!(parsed(&no_node[0]).listeners[0].addr, NODE_ADDRESS_PLACEHOLDER, "no node, no patch");

    // An address change reaches the node's clients; a no-op change does not.
    s.nodes().set("node-1", Some("203.0.113.7".parse().unwrap()));
    assert!(next(&mut on_node).await.is_none());
    s.nodes().set("node-1", Some("2001:db8::1".parse().unwrap()));
    assert_eq!(next(&mut on_node).await.unwrap()[0].listeners[0].addr, "2001:db8::1");
    s.nodes().set("node-1", None);
    assert_eq!(next(&mut on_node).await.unwrap()[0].listeners[0].addr, "$STUNNER_ADDR");
    // Deletions are sent unpatched.
    s.delete(&id("ns/a"));
    assert_eq!(next(&mut on_node).await.unwrap()[0], StunnerConfig::zero("ns/a"));
}

#[test]
fn patched_bytes_are_cached_per_version_and_address() {
    let s = store();
    let mut c = config("ns/a", "r");
    c.listeners[0].addr = NODE_ADDRESS_PLACEHOLDER.into();
    s.upsert(c);
    s.nodes().set("n1", Some("192.0.2.1".parse().unwrap()));
    s.nodes().set("n2", Some("192.0.2.1".parse().unwrap()));
    let snap = s.get(&id("ns/a")).unwrap();
    let a = snap.frame_for(Some("n1"), s.nodes());
    let b = snap.frame_for(Some("n2"), s.nodes());
    assert_eq!(a.as_ptr(), b.as_ptr(), "same version and address share one encoding");
    let plain = snap.frame_for(None, s.nodes());
    assert_eq!(plain.as_ptr(), snap.json.as_ptr());
}

#[tokio::test]
async fn watches_leave_nothing_behind() {
    let s = store();
    s.upsert(config("ns/a", "r"));
    {
        let _w1 = Watch::new(s.clone(), Scope::Config(id("ns/a")), Some("client-chosen-node".into()));
        let _w2 = Watch::new(s.clone(), Scope::Config(id("ns/missing")), Some("another".into()));
        assert_eq!(s.topic_count(), 2);
    }
    assert_eq!(s.topic_count(), 0);
    assert!(s.nodes().is_empty(), "node names chosen by clients are never recorded");
}

#[tokio::test]
async fn only_watches_of_patched_configs_follow_the_node_table() {
    let s = store();
    s.upsert(config("ns/plain", "r"));
    let (_plain, _) = Watch::new(s.clone(), Scope::Config(id("ns/plain")), Some("node-1".into()));
    let (_missing, _) = Watch::new(s.clone(), Scope::Config(id("ns/missing")), Some("node-1".into()));
    assert_eq!(s.nodes().followers(), 0, "a config without the placeholder never looks at the node table");

    let mut c = config("ns/a", "r");
    c.listeners[0].addr = NODE_ADDRESS_PLACEHOLDER.into();
    s.upsert(c);
    let (_no_node, _) = Watch::new(s.clone(), Scope::Config(id("ns/a")), None);
    assert_eq!(s.nodes().followers(), 0, "a client without a node is never patched");
    let (mut on_node, _) = Watch::new(s.clone(), Scope::Config(id("ns/a")), Some("node-1".into()));
    assert_eq!(s.nodes().followers(), 1);
    // Its config loses the placeholder: the watch stops following the table.
    s.upsert(config("ns/a", "r2"));
    assert_eq!(next(&mut on_node).await.unwrap()[0].auth.realm, "r2");
    assert_eq!(s.nodes().followers(), 0);
}

/// A fan-out shard's sink: a burst of changes leaves each changed id once and one wake, so the
/// shard wakes once for the burst and fans out each config once.
#[tokio::test]
async fn a_burst_of_changes_wakes_a_sink_once_with_each_id_once() {
    let s = store();
    let sink = s.register_sink();
    s.upsert(config("ns/a", "r1"));
    s.upsert(config("ns/b", "r1"));
    s.upsert(config("ns/a", "r2"));
    s.upsert(config("other/c", "r1"));
    s.upsert(config("ns/b", "r2"));
    assert!(s.delete(&id("ns/b")));
    assert_eq!(s.upsert(config("ns/a", "r2")), None, "no change, nothing to tell");
    let woken = || tokio::time::timeout(Duration::ZERO, sink.changed());
    assert!(woken().await.is_ok(), "the burst stored a wake");
    assert!(woken().await.is_err(), "one wake for the whole burst");
    let mut ids = std::collections::HashSet::new();
    sink.take(&mut ids);
    let mut taken: Vec<_> = ids.iter().map(ToString::to_string).collect();
    taken.sort();
    assert_eq!(taken, ["ns/a", "ns/b", "other/c"]);
    ids.clear();
    sink.take(&mut ids);
    assert!(ids.is_empty(), "nothing changed since the last take");
}

/// Three transports' worth of encodings, told apart by what they make of the JSON.
struct Upper;
struct Framed;
struct Counted;

impl Encoding for Upper {
    fn encode(_: &Snapshot, json: &Frame) -> Bytes {
        json.to_ascii_uppercase().into()
    }
}

impl Encoding for Framed {
    fn encode(s: &Snapshot, json: &Frame) -> Bytes {
        [s.id.to_string().as_bytes(), b":", json].concat().into()
    }
}

impl Encoding for Counted {
    fn encode(_: &Snapshot, json: &Frame) -> Bytes {
        json.len().to_string().into()
    }
}

#[test]
fn each_encoding_is_made_once_per_snapshot_and_shared() {
    let s = store();
    s.upsert(config("ns/a", "r"));
    let snap = s.get(&id("ns/a")).unwrap();
    let plain = snap.plain();
    let json = snap.json.clone();
    // Two encodings without a lock, the third beside the per-node variants: all kept apart.
    let upper = snap.encoded::<Upper>(&plain);
    let framed = snap.encoded::<Framed>(&plain);
    let counted = snap.encoded::<Counted>(&plain);
    assert_eq!(upper, json.to_ascii_uppercase());
    assert_eq!(framed, [b"ns/a:", &json[..]].concat());
    assert_eq!(counted, json.len().to_string());
    for (first, again) in [
        (upper, snap.encoded::<Upper>(&plain)),
        (framed, snap.encoded::<Framed>(&plain)),
        (counted, snap.encoded::<Counted>(&plain)),
    ] {
        assert_eq!(first.as_ptr(), again.as_ptr(), "encoded once, the same bytes for every client");
    }
    // Another version is another snapshot, encoded anew.
    s.upsert(config("ns/a", "r2"));
    let next = s.get(&id("ns/a")).unwrap();
    assert_eq!(next.encoded::<Upper>(&next.plain()), next.json.to_ascii_uppercase());
}
