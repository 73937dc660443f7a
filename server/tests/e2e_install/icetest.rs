//! Issue #59: OUR `stunnerctl icetest` in cluster mode (no `--whip-server`) against our
//! operator installed with Helm, on the install test's node: it deploys our icetester image
//! (tests/images `icetester-rs`), a TURN-UDP and a TURN-TCP Gateway and a route, takes
//! credentials from the chart's credential API (`app=stunner-auth`, port-forwarded), reaches
//! the tester through the API server's pod proxy, relays a data channel through each Gateway
//! and removes what it made. The test stands in for a load balancer controller, as the
//! upstream icetest's does (`upstream_icetest::stand_in_load_balancer`).
//!
//! Runs, each to its end and each checked for its cleanup (namespace, Dataplane, GatewayClass
//! gone):
//! - over TURN-UDP and TURN-TCP: every stage completes, asymmetric then symmetric ICE (the
//!   tester allocating on each Gateway's Service by its cluster DNS name), a statistics line
//!   per test with most packets back, the client's selected candidate a relay, and the
//!   tester's too in the symmetric tests;
//! - a namespace already there: fails at "Initializing" and leaves that namespace alone; then
//!   with `--force-cleanup` it is removed and the run goes on (next case);
//! - the route deleted as soon as it exists: fails at the ICE test, naming the missing route;
//! - the GatewayConfig's shared secret changed once the credentials were obtained: an ICE test
//!   allocating with them is refused, naming the credentials;
//! - Ctrl-C (SIGINT) once the tester is up: the run says it was interrupted, exits non-zero and
//!   still removes what it made.
//!
//! Short runs (`--duration 3s`): the cost is the Gateways' dataplane pods starting, about
//! 20 s a run.

use super::upstream_icetest::{Run, cleaned_up, follow, sent_and_lost};
use super::*;

/// The image tests/images/build.sh builds from our icetester (`build.sh --ref icetester-rs`).
fn our_icetester_image() -> String {
    let out = Command::new("bash")
        .args([repo_file("tests/images/build.sh").to_str().unwrap(), "--ref", "icetester-rs"])
        .output()
        .expect("run tests/images/build.sh --ref");
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    String::from_utf8(out.stdout).unwrap().trim().to_string()
}

/// A run's bound: `--timeout` plus the cleanup.
const RUN_BOUND: Duration = Duration::from_secs(150);

/// What the test does to the cluster while icetest runs.
#[derive(Clone, Copy, PartialEq)]
enum Meddle {
    None,
    /// Deletes the UDPRoute as soon as it exists.
    DeleteRoute,
    /// Changes the GatewayConfig's shared secret once the credentials were obtained.
    ChangeSecret,
    /// Sends icetest SIGINT (Ctrl-C) once its objects are made and the tester is up.
    Interrupt,
}

/// Runs our icetest in `ns` with `args` to its end, acting as the load balancer and doing
/// `meddle`; returns whether it exited 0, and what it printed.
async fn icetest(node: &Node, client: &Client, ns: &str, args: &[&str], meddle: Meddle) -> (bool, Run) {
    let child = Command::new(stunnerctl_bin())
        .args(["--kubeconfig", node.kubeconfig.to_str().unwrap(), "-n", ns, "icetest"])
        .args(["--timeout", "90s", "--duration", "3s"])
        .args(args)
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .expect("run stunnerctl icetest");
    let pid = libc::pid_t::try_from(child.id()).unwrap();
    let routes = e2e::api_for(client, "stunner.l7mp.io/v1", "UDPRoute", Some(ns)).await;
    let configs = e2e::api_for(client, "stunner.l7mp.io/v1", "GatewayConfig", Some(ns)).await;
    let mut meddled = false;
    let (status, output) = follow(child, node, client, ns, RUN_BOUND, async |output: &str| match meddle {
        Meddle::DeleteRoute if !meddled && routes.get_opt("icetest-route").await.ok().flatten().is_some() => {
            routes.delete("icetest-route", &DeleteParams::default()).await.unwrap();
            meddled = true;
        }
        Meddle::ChangeSecret if !meddled && output.contains("Obtaining ICE server configuration... completed") => {
            let changed = json!({"spec": {"sharedSecret": "changed-under-the-test"}});
            configs.patch("icetest-gatewayconfig", &PatchParams::default(), &Patch::Merge(changed)).await.unwrap();
            meddled = true;
        }
        Meddle::Interrupt if !meddled && output.contains("Checking installation... completed") => {
            #[allow(unsafe_code)] // kill(2) on the child this test started
            let sent = unsafe { libc::kill(pid, libc::SIGINT) };
            assert_eq!(sent, 0, "SIGINT to icetest");
            meddled = true;
        }
        _ => {}
    })
    .await;
    assert!(meddle == Meddle::None || meddled, "the test did not get to break the run:\n{output}");
    (status.success(), Run::parse(output))
}

/// The passing run: all of upstream's stages, a statistics line per ICE test with most
/// packets back, the client's selected candidate a relay, and in the symmetric tests the
/// tester's too (it allocated on the Gateway's Service).
fn check_passed(run: &Run) {
    let expected = [
        "Initializing",
        "Checking installation",
        "Checking Gateway",
        "Obtaining ICE server configuration",
        "Running asymmetric ICE test over TURN-UDP",
        "Running asymmetric ICE test over TURN-TCP",
        "Running symmetric ICE test over TURN-UDP",
        "Running symmetric ICE test over TURN-TCP",
    ];
    assert_eq!(run.completed(), expected, "our icetest's stages:\n{}", run.output);
    let stats: Vec<(u64, u64)> = run.output.lines().filter_map(sent_and_lost).collect();
    assert_eq!(stats.len(), 4, "a Statistics line per ICE test:\n{}", run.output);
    for (sent, lost) in stats {
        assert!(sent > 0 && lost * 2 < sent, "{lost} of {sent} packets lost:\n{}", run.output);
    }
    let chosen = |candidates: &str| {
        candidates.lines().find(|l| l.trim_start().starts_with("* ")).unwrap_or_default().to_string()
    };
    let blocks: Vec<&str> = run.output.split("LocalICECandidates:").skip(1).collect();
    assert_eq!(blocks.len(), 4, "candidates per ICE test:\n{}", run.output);
    for (i, block) in blocks.iter().enumerate() {
        let (local, remote) = block.split_once("RemoteICECandidates:").unwrap_or((block, ""));
        let (local, remote) = (chosen(local), chosen(remote));
        assert!(local.contains("relay"), "the client's selected candidate is not a relay: {local}\n{}", run.output);
        let symmetric = i >= 2;
        assert_eq!(remote.contains("relay"), symmetric, "the tester's selected candidate: {remote}\n{}", run.output);
    }
}

/// Issue #59, deliverable 3 for our icetest, on the install test's node with the chart
/// installed.
pub async fn our_icetest_relays_and_names_broken_stages(node: &Node, client: &Client) {
    let image = our_icetester_image();
    if !node.facts.images.contains(&image) {
        let how = "run tests/images/build.sh icetester-rs (scripts/test does)";
        e2e::external::unavailable(&format!("the node has no {image}: {how}"), "CI");
        return;
    }

    let t0 = Instant::now();
    let (ok, run) = icetest(node, client, "icetest", &["udp", "tcp"], Meddle::None).await;
    assert!(ok, "our icetest failed:\n{}", run.output);
    check_passed(&run);
    cleaned_up(client, "icetest").await;
    eprintln!("node e2e: our icetest over TURN-UDP and TURN-TCP ({:.0?}):\n{}", t0.elapsed(), run.output);

    // A namespace already there is not ours to use, and not ours to delete...
    let t0 = Instant::now();
    let ns = "icetest-leftover";
    apply_yaml(client, &format!("apiVersion: v1\nkind: Namespace\nmetadata:\n  name: {ns}\n")).await;
    let (ok, run) = icetest(node, client, ns, &["udp"], Meddle::None).await;
    assert!(!ok, "{}", run.output);
    assert_eq!(run.failed_stage(), "Initializing", "{}", run.output);
    assert!(run.output.contains("already exists") && run.output.contains("--force-cleanup"), "{}", run.output);
    assert!(get(client, "v1", "Namespace", None, ns).await.is_some(), "icetest deleted a namespace it did not make");
    // ...unless --force-cleanup. The route deleted under the test: the ICE test names it.
    let (ok, run) = icetest(node, client, ns, &["udp", "--force-cleanup"], Meddle::DeleteRoute).await;
    assert!(!ok, "{}", run.output);
    assert_eq!(run.failed_stage(), "Running asymmetric ICE test over TURN-UDP", "{}", run.output);
    assert!(run.output.contains("no backend route"), "{}", run.output);
    cleaned_up(client, ns).await;
    eprintln!(
        "node e2e: our icetest: leftover namespace refused, removed with --force-cleanup; route deleted: fails at the ICE test ({:.0?})",
        t0.elapsed()
    );

    // The shared secret changed once the credentials were obtained: the allocation with them
    // is refused. The TURN-UDP test may have allocated before the change reached stunnerd; then
    // its relay stops carrying the ICE checks once it does, and that test fails with a silent
    // data channel instead (seen once in a full run): the stage is named either way.
    let t0 = Instant::now();
    let (ok, run) = icetest(node, client, "icetest-changed", &["udp", "tcp"], Meddle::ChangeSecret).await;
    assert!(!ok, "{}", run.output);
    let failed = run.failed_stage();
    assert!(failed.starts_with("Running asymmetric ICE test over TURN-"), "{}", run.output);
    let named = ["credentials refused", "the data channel did not open"];
    assert!(named.iter().any(|why| run.output.contains(why)), "{}", run.output);
    cleaned_up(client, "icetest-changed").await;
    eprintln!("node e2e: our icetest, secret changed: fails at {failed} ({:.0?})", t0.elapsed());

    // Ctrl-C once the objects are made: the run stops, says why, and removes them.
    let t0 = Instant::now();
    let (ok, run) = icetest(node, client, "icetest-interrupted", &["udp"], Meddle::Interrupt).await;
    assert!(!ok, "{}", run.output);
    assert!(run.output.contains("ICE tester stopped due to user interrupt"), "{}", run.output);
    cleaned_up(client, "icetest-interrupted").await;
    eprintln!("node e2e: our icetest, Ctrl-C after the installation check: cleaned up ({:.0?})", t0.elapsed());
}
