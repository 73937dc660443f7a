//! What the render loop publishes, and when: the settled config in standalone mode, configs
//! and statuses that wait for their Service in cluster mode, what the writer is handed.

use super::super::publish::Publisher;
use super::*;

/// The quickstart with `extra` listeners on its Gateway.
fn quickstart_with_listeners(extra: &str) -> Vec<Change> {
    let dir = concat!(env!("CARGO_MANIFEST_DIR"), "/../deploy/examples/quickstart");
    let text = std::fs::read_to_string(format!("{dir}/gateway.yaml")).unwrap();
    let text = text.replace("  listeners:\n", &format!("  listeners:\n{extra}"));
    let gateway = applied("gateway.yaml", &text);
    let mut changes: Vec<Change> = quickstart().into_iter().filter(|c| !is_gateway(c)).collect();
    changes.extend(gateway);
    changes
}

fn is_gateway(c: &Change) -> bool {
    matches!(c, Change::Apply(r) if r.kind() == Kind::Gateway)
}

/// The Gateway's Service as the API server would return it after the operator's apply:
/// what a render of `changes` asks for.
fn applied_service(changes: Vec<Change>) -> Input {
    let mut index = Index::new();
    for c in changes {
        if let Change::Apply(r) = c {
            index.apply(r);
        }
    }
    let now = Time(k8s_openapi::jiff::Timestamp::now());
    let out = stunner_gateway::render::render_all(&index, &RenderSettings::default(), &now);
    let Owned::Apply(service) = &out.gateways[&ObjectKey::new("stunner", "udp-gateway")].service else {
        panic!("a Service is asked for")
    };
    Input::Changes(vec![Change::Apply(service.clone().into())])
}

/// The listeners of published configs that have no public address.
fn without_public_address(configs: &[StunnerConfig]) -> Vec<String> {
    let listeners = configs.iter().flat_map(|c| &c.listeners);
    listeners.filter(|l| l.public_addr.is_empty() || l.public_port == 0).map(|l| l.name.clone()).collect()
}

/// Standalone: the first pass renders the Gateway before its Service is in the index (no
/// public address), the second with it; only the second is published.
#[tokio::test(start_paused = true)]
async fn standalone_publishes_only_the_settled_config() {
    let l = Loop::start();
    l.send(Input::Changes(quickstart())).await;
    l.send(Input::Synced).await;
    tokio::time::sleep(THROTTLE * 2).await;
    l.send(Input::Changes(quickstart_with_listeners("    - name: udp-2\n      port: 3480\n      protocol: UDP\n")))
        .await;
    tokio::time::sleep(THROTTLE * 2).await;
    let published = l.published();
    assert_eq!(published.iter().map(|c| c.listeners.len()).collect::<Vec<_>>(), [2, 3], "one version per change");
    assert_eq!(without_public_address(&published), Vec::<String>::new());
}

/// Standalone, one pass's sink: a Gateway whose Service is not in the index yet is held, with
/// the change that puts it there; rendered again once it is, it is published at once, during
/// the pass, and what was held of it goes.
#[test]
fn standalone_holds_a_gateway_only_while_its_service_changes_the_index() {
    let (mut outputs, recorder) = outputs(Box::new(Standalone::default()));
    let mut index = Index::new();
    for change in quickstart() {
        change.apply_to(&mut index);
    }
    let mut held = super::settle::Held::new();
    let key = ObjectKey::new("stunner", "udp-gateway");
    let mut pass = |index: &Index, held: &mut super::settle::Held| {
        let now = Time(k8s_openapi::jiff::Timestamp::now());
        let mut publisher = Publisher { outputs: &mut outputs, index };
        let mut settling = super::settle::Settling { publisher: &mut publisher, held, changes: Vec::new() };
        stunner_gateway::render::render_each(
            index,
            &index.everything(),
            &RenderSettings::default(),
            &now,
            &mut settling,
        );
        settling.changes
    };

    let changes = pass(&index, &mut held);
    assert!(matches!(changes.as_slice(), [Change::Apply(r)] if r.kind() == Kind::Service), "{changes:?}");
    assert_eq!(held.iter().collect::<Vec<_>>(), [&key], "held while its Service changes the index");
    assert!(recorder.published.lock().unwrap().is_empty(), "nothing published of it");

    changes.into_iter().for_each(|c| drop(c.apply_to(&mut index)));
    let changes = pass(&index, &mut held);
    assert!(changes.is_empty(), "the Service is in place: {changes:?}");
    assert!(held.is_empty(), "published, and the earlier result dropped");
    let published = recorder.published.lock().unwrap();
    assert_eq!(published.iter().map(|c| c.admin.name.as_str()).collect::<Vec<_>>(), ["stunner/udp-gateway"]);
}

/// Cluster mode: a new Gateway's config, and one with a new listener, wait until the
/// watchers bring back the Service the render asked for; no version without the address.
#[tokio::test(start_paused = true)]
async fn in_a_cluster_a_config_waits_for_the_service_it_asked_for() {
    let (l, _) = Loop::start_in_cluster();
    l.send(Input::Changes(quickstart())).await;
    l.send(Input::Synced).await;
    tokio::time::sleep(THROTTLE * 2).await;
    assert_eq!(l.published().len(), 0, "the Service is not back yet");
    l.send(applied_service(quickstart())).await;
    tokio::time::sleep(THROTTLE * 2).await;
    assert_eq!(l.published().len(), 1);

    let added = || quickstart_with_listeners("    - name: udp-2\n      port: 3480\n      protocol: UDP\n");
    l.send(Input::Changes(added())).await;
    tokio::time::sleep(THROTTLE * 2).await;
    assert_eq!(l.published().len(), 1, "the Service's new port is not back yet");
    l.send(applied_service(added())).await;
    tokio::time::sleep(THROTTLE * 2).await;
    let published = l.published();
    assert_eq!(published.iter().map(|c| c.listeners.len()).collect::<Vec<_>>(), [2, 3]);
    assert_eq!(without_public_address(&published), Vec::<String>::new());
}

/// Cluster mode: the Gateway's status waits with its config, so that it is written once,
/// with the address the Service brings; or as held, once the wait runs out.
#[tokio::test(start_paused = true)]
async fn in_a_cluster_a_gateway_status_waits_with_its_config() {
    use stunner_gateway_k8s::ops::{Scope, WriteKind};
    let (l, writer) = Loop::start_in_cluster();
    let queued = |kind| {
        let targets = writer.take_queued();
        targets.iter().filter(|t| (t.scope, t.kind) == (Scope::Status, kind)).count()
    };
    l.send(Input::Changes(quickstart())).await;
    l.send(Input::Synced).await;
    tokio::time::sleep(THROTTLE * 2).await;
    assert_eq!(queued(WriteKind::Gateway), 0, "the Service is not back yet");
    l.send(applied_service(quickstart())).await;
    tokio::time::sleep(THROTTLE * 2).await;
    assert_eq!(queued(WriteKind::Gateway), 1, "written with the Service's address");

    let added = || quickstart_with_listeners("    - name: udp-2\n      port: 3480\n      protocol: UDP\n");
    l.send(Input::Changes(added())).await;
    tokio::time::sleep(THROTTLE * 2).await;
    assert_eq!(queued(WriteKind::Gateway), 0, "the Service's new port is not back yet");
    tokio::time::sleep(SERVICE_WAIT).await;
    assert_eq!(queued(WriteKind::Gateway), 1, "written as held once the wait ran out");
}

/// Cluster mode: the writer learns what the watchers saw from the render loop alone, before
/// the render the change causes. A Service in place is not written again; changed by someone
/// else (another resourceVersion), the next render writes it again.
#[tokio::test(start_paused = true)]
async fn in_a_cluster_a_service_someone_else_changed_is_written_again() {
    use stunner_gateway_k8s::ops::{FIELD_MANAGER, Scope, WriteKind};
    use stunner_gateway_k8s::owned_fields::applied_entry;
    let (l, writer) = Loop::start_in_cluster();
    let queued = || {
        let targets = writer.take_queued();
        targets.iter().filter(|t| (t.scope, t.kind) == (Scope::Spec, WriteKind::Service)).count()
    };
    l.send(Input::Changes(quickstart())).await;
    l.send(Input::Synced).await;
    tokio::time::sleep(THROTTLE * 2).await;
    assert_eq!(queued(), 1, "the render asks for the Gateway's Service");
    let Input::Changes(mut back) = applied_service(quickstart()) else { unreachable!() };
    let Some(Change::Apply(service)) = back.pop() else { unreachable!() };
    let Resource::Service(mut service) = service else { unreachable!() };
    // As the API server shows it: with the fields our manager applied.
    let body = serde_json::to_value(&service).unwrap();
    service.metadata.managed_fields = Some(vec![applied_entry(FIELD_MANAGER, &body)]);
    service.metadata.resource_version = Some("1".into());
    let watched = |s: &k8s_openapi::api::core::v1::Service| Input::Changes(vec![Change::Apply(s.clone().into())]);
    l.send(watched(&service)).await;
    l.send(realm("other")).await;
    tokio::time::sleep(THROTTLE * 2).await;
    assert_eq!(queued(), 0, "in place: not written again");

    service.metadata.resource_version = Some("2".into());
    service.spec.as_mut().unwrap().session_affinity = Some("None".into());
    l.send(watched(&service)).await;
    tokio::time::sleep(THROTTLE * 2).await;
    assert_eq!(queued(), 1, "changed by someone else: written again");
}

/// Cluster mode: a Service that never comes back holds the config only for the bound,
/// and the same Service is not waited for again.
#[tokio::test(start_paused = true)]
async fn in_a_cluster_a_config_waits_for_its_service_only_so_long() {
    let (l, _) = Loop::start_in_cluster();
    l.send(Input::Changes(quickstart())).await;
    l.send(Input::Synced).await;
    tokio::time::sleep(THROTTLE * 2).await;
    assert_eq!(l.published().len(), 0);
    tokio::time::sleep(SERVICE_WAIT).await;
    assert_eq!(l.published().len(), 1, "published once the bound passed");
    l.send(realm("other")).await;
    tokio::time::sleep(THROTTLE * 2).await;
    assert_eq!(l.realm().as_deref(), Some("other"), "no second wait for the same Service");
}

/// A Gateway whose namespace holds a `/` (only a manifest no API server checked can have
/// one) is withdrawn like any other when it goes away.
#[tokio::test(start_paused = true)]
async fn a_gateway_in_a_namespace_with_a_slash_is_withdrawn_when_deleted() {
    let l = Loop::start();
    let moved = |r: Resource| match r {
        Resource::Gateway(mut gw) => {
            gw.metadata.namespace = Some("a/b".into());
            Resource::Gateway(gw)
        }
        other => other,
    };
    let changes = quickstart().into_iter().map(|c| match c {
        Change::Apply(r) => Change::Apply(moved(r)),
        other => other,
    });
    l.send(Input::Changes(changes.collect())).await;
    l.send(Input::Synced).await;
    tokio::time::sleep(THROTTLE * 2).await;
    let served = || {
        l.sink
            .store
            .list(&stunner_gateway_cds::Scope::All)
            .iter()
            .map(|s| s.config.admin.name.clone())
            .collect::<Vec<_>>()
    };
    assert_eq!(served(), ["a/b/udp-gateway"]);
    let gone = ObjRef::new(Kind::Gateway, ObjectKey::new("a/b", "udp-gateway"));
    l.send(Input::Changes(vec![Change::Delete(gone)])).await;
    tokio::time::sleep(THROTTLE * 2).await;
    assert!(served().is_empty(), "still served: {:?}", served());
}
