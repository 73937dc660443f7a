//! The Gateway API conformance suite against the operator (issue #58, docs/conformance.md):
//! the harness of tests/conformance (the suite's module, our TURN base manifests, our skip
//! list) runs against the real operator binary on a real kube-apiserver with the v1.7.0
//! standard CRDs. Every suite test must pass, be skipped by the harness (with its reason), need
//! a feature the GatewayClass does not claim, or be one of [`EXPECTED_FAILURES`], which must
//! fail, with its quoted check in its log: a failure that is fixed fails this test until it
//! leaves the list.
//!
//! The bare API server has no kubelet, scheduler or cloud controller; this test stands in for
//! the two parts the suite waits for, and nothing more:
//! - a Node with an ExternalIP, registered as a kubelet registers it: the operator publishes
//!   the Node's address with the Service's node port (its NodePort fallback, spec §3.9) as the
//!   Gateway's address, which the suite requires of an accepted Gateway;
//! - one Pod per suite namespace, bound to that Node and reported Ready by this test as the
//!   Node's kubelet would: the suite's setup waits for a Ready pod in each namespace (its echo
//!   backends). No test run here sends traffic to a pod or to the Gateway's address (those are
//!   skipped), so nothing the suite judges depends on these pods beyond their existence.

mod e2e;

use e2e::*;
use serde_json::json;
use std::collections::BTreeMap;
use std::process::Stdio;
use std::time::Duration;

/// The quickstart's GatewayClass, which the suite's Gateways name.
const CLASS: &str = "stunner-gatewayclass";
/// The Node this test registers, and its ExternalIP (TEST-NET-1, RFC 5737: nothing is sent to
/// it, the address is only published).
const NODE: &str = "conformance-node";
const NODE_IP: &str = "192.0.2.10";
/// The suite's namespaces (its base manifests, and ours, create them).
const SUITE_NAMESPACES: [&str; 3] =
    ["gateway-conformance-infra", "gateway-conformance-app-backend", "gateway-conformance-web-backend"];
/// The whole suite's run, at most (about 35 s here).
const RUN_TIMEOUT: Duration = Duration::from_secs(20 * 60);

/// Suite tests that today's operator fails, each with a line its failure logs (quoted from
/// the suite's output, checked below) and why; each entry leaves this list with the fix that
/// makes the test pass. Empty since issue #58's statuses: every test run here passes.
const EXPECTED_FAILURES: &[(&str, &str, &str)] = &[];

/// One suite test's outcome, as the harness writes it.
#[derive(Debug, serde::Deserialize)]
struct Outcome {
    test: String,
    /// passed, failed, skipped or unsupported
    result: String,
    #[serde(default)]
    reason: String,
    /// The harness's skip-list reason, if the test is on it (whatever its result).
    #[serde(default)]
    skip_listed: String,
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_conformance_suite_passes_all_but_its_skips_and_expected_failures() {
    let Some(harness) = external::built(
        repo_root().join("tests/conformance/bin/conformance"),
        "run tests/conformance/build.sh (or scripts/test)",
    ) else {
        return;
    };
    let Some(cluster) = Cluster::start_with("conformance", GatewayApi::V17Standard).await else { return };
    apply_yaml(&cluster.admin, &namespace_yaml("stunner")).await;
    let class = std::fs::read_to_string(repo_root().join("deploy/examples/quickstart/gatewayclass.yaml")).unwrap();
    apply_yaml(&cluster.admin, &class).await;
    register_node(&cluster).await;
    for ns in SUITE_NAMESPACES {
        ready_pod(&cluster, ns).await;
    }
    // ReferenceGrants enforced: the class claims the ReferenceGrant feature.
    let op = cluster.operator("op", &["--enforce-reference-grants"]).await;

    let results = cluster.dir.0.join("conformance-results.json");
    let log_path = cluster.dir.0.join("conformance.log");
    let started = std::time::Instant::now();
    let run = tokio::process::Command::new(&harness)
        .args(["-test.v", "-test.run", "^TestConformance$", "-test.timeout", "30m", "-gateway-class", CLASS])
        .arg("-results")
        .arg(&results)
        .env("KUBECONFIG", cluster.api.admin_kubeconfig())
        .stdin(Stdio::null())
        .stderr(Stdio::inherit())
        .kill_on_drop(true)
        .output();
    let output = tokio::time::timeout(RUN_TIMEOUT, run).await.expect("the suite finishes in time").unwrap();
    let log = String::from_utf8_lossy(&output.stdout).into_owned();
    std::fs::write(&log_path, &log).unwrap();
    eprintln!("conformance: the suite ran in {:?}; its log: {}", started.elapsed(), log_path.display());

    let outcomes: Vec<Outcome> = serde_json::from_slice(
        &std::fs::read(&results).unwrap_or_else(|e| panic!("{}: {e}; log tail:\n{}", results.display(), tail(&log))),
    )
    .unwrap();
    // The suite's setup (GatewayClass accepted, base Gateways programmed) is not a subtest:
    // without it no test ran at all.
    assert!(outcomes.iter().any(|o| o.result == "passed"), "no suite test passed; log tail:\n{}", tail(&log));
    let sections = test_logs(&log);
    let mut problems = Vec::new();
    for o in &outcomes {
        let expected = EXPECTED_FAILURES.iter().find(|(name, ..)| *name == o.test);
        match (o.result.as_str(), expected) {
            ("failed", Some((_, check, _))) => {
                let section = sections.get(o.test.as_str()).copied().unwrap_or_default();
                if !section.contains(check) {
                    problems.push(format!("{}: fails, but its log lacks the expected check {check:?}", o.test));
                }
            }
            ("failed", None) => problems.push(format!("{}: fails and is not an expected failure", o.test)),
            (result, Some((_, _, why))) => problems
                .push(format!("{}: an expected failure ({why}), now {result}: take it off EXPECTED_FAILURES", o.test)),
            ("skipped", None) if o.reason.is_empty() => problems.push(format!("{}: skipped without a reason", o.test)),
            _ => {}
        }
    }
    for (name, ..) in EXPECTED_FAILURES {
        if !outcomes.iter().any(|o| o.test == *name) {
            problems.push(format!("{name}: an expected failure the suite does not have"));
        }
    }
    // docs/conformance.md lists every test on the harness's skip list.
    let docs = std::fs::read_to_string(repo_root().join("docs/conformance.md")).unwrap();
    for o in outcomes.iter().filter(|o| !o.skip_listed.is_empty() || o.result == "skipped") {
        if !docs.contains(&format!("`{}`", o.test)) {
            problems.push(format!("{}: on the skip list, but docs/conformance.md does not list it", o.test));
        }
    }
    eprintln!("conformance results:\n{}", summary(&outcomes));
    assert!(problems.is_empty(), "{}\n\nlog: {}", problems.join("\n"), log_path.display());
    assert!(
        output.status.success() || outcomes.iter().any(|o| o.result == "failed"),
        "the harness failed:\n{}",
        tail(&log)
    );
    op.assert_no_rbac_denials();
}

/// Registers [`NODE`] with an ExternalIP, as its kubelet would.
async fn register_node(cluster: &Cluster) {
    let node = json!({
        "apiVersion": "v1", "kind": "Node",
        "metadata": {"name": NODE},
        "status": {"addresses": [{"type": "InternalIP", "address": "10.0.0.10"}, {"type": "ExternalIP", "address": NODE_IP}]},
    });
    apply(&cluster.admin, node.clone()).await.unwrap();
    // Status is a subresource: written as the kubelet writes it.
    let nodes = api_for(&cluster.admin, "v1", "Node", None).await;
    let patch = json!({"status": node["status"]});
    nodes.patch_status(NODE, &kube::api::PatchParams::default(), &kube::api::Patch::Merge(&patch)).await.unwrap();
}

/// A Pod in `namespace` bound to [`NODE`], reported Running and Ready as its kubelet would
/// (with the namespace's `default` ServiceAccount, which the controller-manager would make).
async fn ready_pod(cluster: &Cluster, namespace: &str) {
    apply_yaml(&cluster.admin, &namespace_yaml(namespace)).await;
    let sa =
        json!({"apiVersion": "v1", "kind": "ServiceAccount", "metadata": {"name": "default", "namespace": namespace}});
    apply(&cluster.admin, sa).await.unwrap();
    let pod = json!({
        "apiVersion": "v1", "kind": "Pod",
        "metadata": {"name": "backend-placeholder", "namespace": namespace},
        "spec": {"nodeName": NODE, "containers": [{"name": "pause", "image": "registry.k8s.io/pause:3.10"}]},
    });
    apply(&cluster.admin, pod).await.unwrap();
    let pods = api_for(&cluster.admin, "v1", "Pod", Some(namespace)).await;
    let status = json!({"status": {
        "phase": "Running",
        "conditions": [{"type": "Ready", "status": "True"}, {"type": "ContainersReady", "status": "True"}],
    }});
    pods.patch_status("backend-placeholder", &kube::api::PatchParams::default(), &kube::api::Patch::Merge(&status))
        .await
        .unwrap();
}

/// Each top-level suite test's part of the `-test.v` log (the tests run one at a time), by
/// test name.
fn test_logs(log: &str) -> BTreeMap<&str, &str> {
    const RUN: &str = "=== RUN   TestConformance/";
    let mut out = BTreeMap::new();
    let mut starts: Vec<(usize, &str)> = Vec::new();
    let mut at = 0;
    for line in log.split_inclusive('\n') {
        if let Some(rest) = line.strip_prefix(RUN) {
            let name = rest.trim_end().split('/').next().unwrap_or_default();
            if starts.last().is_none_or(|(_, last)| *last != name) {
                starts.push((at, name));
            }
        }
        at += line.len();
    }
    for (i, (start, name)) in starts.iter().enumerate() {
        let end = starts.get(i + 1).map_or(log.len(), |(s, _)| *s);
        out.insert(*name, &log[*start..end]);
    }
    out
}

/// One line per result kind, with the tests of each.
fn summary(outcomes: &[Outcome]) -> String {
    let mut by: BTreeMap<&str, Vec<String>> = BTreeMap::new();
    for o in outcomes {
        let entry = if o.reason.is_empty() { o.test.clone() } else { format!("{} ({})", o.test, o.reason) };
        by.entry(o.result.as_str()).or_default().push(entry);
    }
    by.iter().map(|(k, v)| format!("{k} ({}):\n  {}", v.len(), v.join("\n  "))).collect::<Vec<_>>().join("\n")
}

fn tail(log: &str) -> String {
    let lines: Vec<&str> = log.lines().collect();
    lines[lines.len().saturating_sub(60)..].join("\n")
}
