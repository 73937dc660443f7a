//! Issue #59: upstream's `stunnerctl icetest` (github.com/l7mp/stunner at the version
//! tests/interop pins, its ICE test peer the icetester image tests/images builds from the same
//! module) against our operator installed with Helm, on the install test's node. It makes its
//! own namespace, Dataplane, GatewayClass, GatewayConfig (ephemeral auth), a Gateway per TURN
//! transport, a route and the icetester pod; it reads the Gateways' public addresses from our
//! CDS, credentials from our credential API (`/ice`), connects a WebRTC peer through each
//! Gateway to the icetester (asymmetric: relay to host; symmetric: relay to relay), sends over
//! a data channel for 20 s each and removes what it made.
//!
//! Over TURN-UDP it passes. Over TURN-TCP upstream's v1.2.1 cannot pass against any operator:
//! its WebRTC stack (pion/webrtc v4.2.11, pion/ice v4.2.2) gathers a relay candidate from a
//! `turn:…?transport=tcp` server only for TCP network types, which the default setting engine
//! of its WHIP dialer leaves out, so its offer has no candidate and every dial fails. The test
//! pins that (the stage, and no relay candidate offered) and, while that run waits, allocates
//! over TCP through the same Gateway with the same credentials (turnprobe): the allocation and
//! its permission to the icetester pod succeed.
//!
//! What it needs of the cluster and how this node gives it:
//! - the CRDs it checks for, TCPRoute among them (which this node's Gateway API v1.4.0
//!   standard channel lacks): the test adds v1.4.0's experimental TCPRoute CRD;
//! - a public address per listener, on port 3478 (or a NodePort with `--allow-nodeport`, but
//!   then a node ExternalIP, which this node cannot have: see e2e_install.rs): the test stands
//!   in for a cloud's load balancer controller and gives each Gateway's LoadBalancer Service
//!   the node's IP as its ingress; kube-proxy then forwards `<node IP>:3478` to stunnerd, as
//!   MetalLB's L2 mode would;
//! - one CDS server pod: ours runs two replicas, which upstream's discovery refuses ("too
//!   many CDS servers", pinned below); `--cds-server-address` names the CDS Service instead;
//! - the credential API on a pod labelled `app=stunner-auth` (our chart labels the operator
//!   pods so), port-forwarded to at 8088.
//!
//! Upstream's stunnerctl exits 0 whatever the outcome, so the test reads the stages it prints
//! (`<time>: <stage>... completed` or `... error`).
//!
//! The negative cases, each in its own run (upstream's runs share cluster-scoped names, so
//! they cannot overlap): the route deleted as soon as icetest creates it fails at "Checking
//! Gateway" (upstream's check wants a cluster with endpoints before the public address, and
//! names the latter); the GatewayConfig's shared secret rotated once icetest has its
//! credentials fails the ICE test that dials with them ("could not send WHIP request"), after
//! upstream's 90 s of retries.
//!
//! Cost: about 5 min of the install test (measured, run by run: 13 s without the CDS address,
//! 55 s over TURN-UDP, 132 s over TURN-TCP before it was bounded by `--timeout` (60 s now),
//! 71 s without the route, 102 s with the rotated secret), most of it upstream's fixed waits
//! (20 s of data per ICE test, 60 s and 90 s of retries before a failing stage is reported).

use super::*;
use std::process::{Child, ExitStatus};
use std::sync::mpsc::{Receiver, RecvTimeoutError};

/// The ICE test peer image tests/images/build.sh builds (upstream's name, the pinned version).
const ICETESTER_IMAGE: &str = "docker.io/l7mp/icetester:1.2.1";
/// The Gateways upstream's icetest makes, one per TURN transport.
const ICETEST_GATEWAYS: [&str; 2] = ["icetest-udp-gateway", "icetest-tcp-gateway"];
/// The TURN-TCP run's `--timeout`: past the stages before the ICE test (about 15 s here, 60 s
/// at most for the Gateway), short of the 90 s of dialling upstream spends before it fails.
const TCP_RUN_TIMEOUT: &str = "60s";
/// Upstream's own bound is 5 min (`--timeout`); this one is the test's, past it.
const RUN_BOUND: Duration = Duration::from_secs(6 * 60);

/// One stage icetest printed: `<RFC822 time>: <stage>... <completed|error>` (ours prints
/// upstream's stages the same way).
#[derive(Debug, Clone, PartialEq)]
struct Stage {
    name: String,
    completed: bool,
}

/// What one run printed: its stages in order, and the whole text (for the failure message).
pub(super) struct Run {
    stages: Vec<Stage>,
    pub(super) output: String,
}

impl Run {
    pub(super) fn parse(output: String) -> Run {
        let stages = output
            .lines()
            .filter_map(|line| {
                let (_time, rest) = line.split_once(": ")?;
                let (name, verdict) = rest.split_once("... ")?;
                Some(Stage { name: name.to_string(), completed: verdict.trim() == "completed" })
            })
            .collect();
        Run { stages, output }
    }

    /// The stages that completed, in order.
    pub(super) fn completed(&self) -> Vec<&str> {
        self.stages.iter().filter(|s| s.completed).map(|s| s.name.as_str()).collect()
    }

    /// The stage that failed, with every stage before it completed; panics otherwise.
    pub(super) fn failed_stage(&self) -> &str {
        let (last, before) = self.stages.split_last().unwrap_or_else(|| panic!("no stage:\n{}", self.output));
        assert!(before.iter().all(|s| s.completed), "a stage before the last failed:\n{}", self.output);
        assert!(!last.completed, "no stage failed:\n{}", self.output);
        &last.name
    }
}

/// What the test does to the cluster while icetest runs.
#[derive(Clone, Copy)]
enum Meddle {
    /// Nothing: the run is to pass.
    None,
    /// Deletes icetest's UDPRoute as soon as it exists.
    DeleteRoute,
    /// Rotates the GatewayConfig's shared secret once this stage completed.
    RotateSecretAfter(&'static str),
    /// Once this stage completed, allocates over TURN-TCP through the TCP Gateway with
    /// icetest's own credentials and checks the allocation and its permission to the
    /// icetester pod succeed.
    ProbeTurnTcpAfter(&'static str),
}

/// Runs upstream's icetest over `transports` in namespace `ns` to its end, acting as the load
/// balancer controller and doing `meddle`; returns what it printed. Also checks it removed
/// what it made.
async fn icetest(node: &Node, client: &Client, ns: &str, transports: &[&str], extra: &[&str], meddle: Meddle) -> Run {
    let child = Command::new(tool("tests/interop/bin/stunnerctl"))
        .args(["--kubeconfig", node.kubeconfig.to_str().unwrap(), "-n", ns, "icetest"])
        .args(transports)
        .args(["--ice-tester-image", ICETESTER_IMAGE])
        .args(extra)
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .expect("run upstream stunnerctl icetest");
    let routes = e2e::api_for(client, "stunner.l7mp.io/v1", "UDPRoute", Some(ns)).await;
    let configs = e2e::api_for(client, "stunner.l7mp.io/v1", "GatewayConfig", Some(ns)).await;
    let mut meddled = false;
    let (status, output) = follow(child, node, client, ns, RUN_BOUND, async |output: &str| match meddle {
        Meddle::DeleteRoute if !meddled && routes.get_opt("icetest-route").await.ok().flatten().is_some() => {
            routes.delete("icetest-route", &DeleteParams::default()).await.unwrap();
            meddled = true;
            eprintln!("node e2e: upstream icetest: deleted its route");
        }
        Meddle::ProbeTurnTcpAfter(stage) if !meddled && output.contains(&format!("{stage}... completed")) => {
            let verdict = turn_tcp_probe(node, client, ns).await;
            assert_eq!(verdict["stage"], "relay", "TURN-TCP through icetest's Gateway: {verdict}");
            meddled = true;
            eprintln!("node e2e: TURN-TCP through icetest's TCP Gateway allocates and is permitted: {verdict}");
        }
        Meddle::RotateSecretAfter(stage) if !meddled && output.contains(&format!("{stage}... completed")) => {
            let rotated = json!({"spec": {"sharedSecret": "rotated-under-the-test"}});
            configs.patch("icetest-gatewayconfig", &PatchParams::default(), &Patch::Merge(rotated)).await.unwrap();
            meddled = true;
            eprintln!("node e2e: upstream icetest: rotated the shared secret after \"{stage}\"");
        }
        _ => {}
    })
    .await;
    assert!(status.success(), "upstream stunnerctl icetest exited with {status}:\n{output}");
    assert!(matches!(meddle, Meddle::None) || meddled, "the test did not get to break the run:\n{output}");
    // Upstream's cleanup, on our operator: the dataplane goes with the Gateways.
    cleaned_up(client, ns).await;
    Run::parse(output)
}

/// What an icetest run (ours or upstream's, same names) made is gone: the namespace (with the
/// Gateways, route and tester), and the cluster-scoped Dataplane and GatewayClass.
pub(super) async fn cleaned_up(client: &Client, ns: &str) {
    e2e::wait_gone(client, "v1", "Namespace", None, ns).await;
    e2e::wait_gone(client, "stunner.l7mp.io/v1", "Dataplane", None, "icetester-dataplane").await;
    e2e::wait_gone(client, "gateway.networking.k8s.io/v1", "GatewayClass", None, "icetest-gatewayclass").await;
}

/// Follows a spawned icetest (ours or upstream's) to its end, within `bound`: stands in for
/// the load balancer controller and, after each line it prints (or 250 ms without one), calls
/// `meddle` with all it printed so far. Returns its exit status and its output, stdout then
/// stderr.
pub(super) async fn follow(
    mut child: Child,
    node: &Node,
    client: &Client,
    ns: &str,
    bound: Duration,
    mut meddle: impl AsyncFnMut(&str),
) -> (ExitStatus, String) {
    let lines = line_reader(child.stdout.take().unwrap());
    let services: Api<Service> = Api::namespaced(client.clone(), ns);
    let (mut output, mut exposed) = (String::new(), BTreeSet::new());
    let started = Instant::now();
    let status = loop {
        assert!(started.elapsed() < bound, "icetest ran past {bound:?}:\n{output}");
        match tokio::task::block_in_place(|| lines.recv_timeout(Duration::from_millis(250))) {
            Ok(line) => {
                output.push_str(&line);
                output.push('\n');
            }
            Err(RecvTimeoutError::Disconnected) => {
                if let Some(status) = child.try_wait().unwrap() {
                    break status;
                }
                tokio::time::sleep(Duration::from_millis(100)).await;
            }
            Err(RecvTimeoutError::Timeout) => {}
        }
        stand_in_load_balancer(&services, node, &mut exposed).await;
        meddle(&output).await;
    };
    let mut stderr = String::new();
    std::io::Read::read_to_string(&mut child.stderr.take().unwrap(), &mut stderr).unwrap();
    output.push_str(&stderr);
    (status, output)
}

/// The load balancer controller this node lacks: each icetest Gateway's LoadBalancer Service
/// (upstream's names, which ours uses too) gets the node's IP as its ingress once it exists.
pub(super) async fn stand_in_load_balancer(services: &Api<Service>, node: &Node, exposed: &mut BTreeSet<&'static str>) {
    let lb = json!({"status": {"loadBalancer": {"ingress": [{"ip": node.node_ip.to_string()}]}}});
    for name in ICETEST_GATEWAYS {
        if !exposed.contains(name) && services.get_opt(name).await.ok().flatten().is_some() {
            services.patch_status(name, &PatchParams::default(), &Patch::Merge(&lb)).await.unwrap();
            exposed.insert(name);
        }
    }
}

/// One allocation over TCP at the TCP Gateway's public address (the node's IP, port 3478)
/// with icetest's ephemeral auth (its GatewayConfig's realm and shared secret), sending to the
/// icetester pod, which does not echo: a verdict at stage `relay` means the allocation and the
/// permission (the route) succeeded. Retried (bounded) while the Gateway's stunnerd starts:
/// icetest does not wait for it.
async fn turn_tcp_probe(node: &Node, client: &Client, ns: &str) -> Value {
    let pods: Api<Pod> = Api::namespaced(client.clone(), ns);
    let pod = pods.get("icetest-backend").await.unwrap();
    let ip = pod.status.and_then(|s| s.pod_ip).expect("the icetester pod's IP");
    let probe = || {
        let out = Command::new(tool("tests/interop/bin/turnprobe"))
            .args(["--server", &format!("{}:3478", node.node_ip), "--transport", "tcp"])
            .args(["--secret", "icetest-secret", "--realm", "icetest.l7mp.io"])
            .args(["--peer", &format!("{ip}:8089"), "--count", "1", "--wait", "1s", "--timeout", "10s"])
            .output()
            .expect("run turnprobe");
        serde_json::from_slice::<Value>(&out.stdout)
            .unwrap_or_else(|e| panic!("turnprobe: {e}: {}", String::from_utf8_lossy(&out.stderr)))
    };
    let mut verdict = Value::Null;
    for _ in 0..20 {
        verdict = tokio::task::block_in_place(probe);
        if verdict["stage"] == "relay" {
            break;
        }
        tokio::time::sleep(Duration::from_secs(1)).await;
    }
    verdict
}

/// The lines `out` gives, through a channel a thread fills (ends when `out` does).
pub(super) fn line_reader(out: std::process::ChildStdout) -> Receiver<String> {
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        for line in std::io::BufRead::lines(std::io::BufReader::new(out)).map_while(Result::ok) {
            if tx.send(line).is_err() {
                return;
            }
        }
    });
    rx
}

/// The statistics line after an ICE test: `Statistics: rate=…pps, loss=<lost>/<sent>pkts=…`;
/// returns (sent, lost).
pub(super) fn sent_and_lost(line: &str) -> Option<(u64, u64)> {
    let loss = line.split_once("loss=")?.1;
    let (lost, rest) = loss.split_once('/')?;
    let sent = rest.split_once("pkts")?.0;
    Some((sent.parse().ok()?, lost.parse().ok()?))
}

/// The passing run's checks: every stage completed, each ICE test relayed most of its packets
/// and selected a relay candidate on the client.
fn check_passed(run: &Run) {
    let expected = [
        "Initializing",
        "Checking installation",
        "Checking Gateway",
        "Obtaining ICE server configuration",
        "Running asymmetric ICE test over TURN-UDP",
        "Running symmetric ICE test over TURN-UDP",
    ];
    assert_eq!(run.completed(), expected, "upstream icetest's stages:\n{}", run.output);
    let stats: Vec<(u64, u64)> = run.output.lines().filter_map(sent_and_lost).collect();
    assert_eq!(stats.len(), 2, "a Statistics line per ICE test:\n{}", run.output);
    for (sent, lost) in stats {
        // A busy 2-core machine drops some of an unpaced flood; most must arrive.
        assert!(sent > 0 && lost * 2 < sent, "{lost} of {sent} packets lost:\n{}", run.output);
    }
    // The client's selected candidate (marked `*`, first list after each Statistics line) is
    // a relay candidate: the media went through a Gateway.
    let selected = run.output.lines().filter(|l| l.trim_start().starts_with("* ")).count();
    assert!(selected >= 2, "a selected candidate pair per ICE test:\n{}", run.output);
    for block in run.output.split("LocalICECandidates:").skip(1) {
        let local = block.split("RemoteICECandidates:").next().unwrap_or_default();
        let chosen = local.lines().find(|l| l.trim_start().starts_with("* ")).unwrap_or_default();
        assert!(chosen.contains("relay"), "the client's selected candidate is not a relay: {chosen}\n{}", run.output);
    }
}

/// Issue #59, deliverable 2 and its negative cases, on the install test's node with the chart
/// installed (two operator replicas).
pub async fn upstream_icetest_relays_and_names_broken_stages(node: &Node, client: &Client) {
    let how = "run tests/interop/build.sh and tests/images/build.sh (scripts/test does)";
    if e2e::external::built(repo_file("tests/interop/bin/stunnerctl"), how).is_none() {
        return;
    }
    if !node.facts.images.iter().any(|i| i == ICETESTER_IMAGE) {
        e2e::external::unavailable(&format!("the node has no {ICETESTER_IMAGE}: {how}"), "CI");
        return;
    }
    let tcproutes =
        e2e::gateway_api_dir("v1.4.0").join("config/crd/experimental/gateway.networking.k8s.io_tcproutes.yaml");
    e2e::install_crd_files(client, &[tcproutes]).await;
    let cds = cluster_ip(client, OPERATOR_NS, "stunner-config-discovery").await.to_string();
    let cds_flags = ["--cds-server-address", cds.as_str(), "--cds-server-port", "13478"];

    // Pinned deviation: two CDS pods, and upstream's discovery refuses to pick one.
    let t0 = Instant::now();
    let run = icetest(node, client, "icetest-discovery", &["udp"], &[], Meddle::None).await;
    assert_eq!(run.failed_stage(), "Checking installation", "{}", run.output);
    assert!(run.output.contains("too many CDS servers"), "{}", run.output);
    eprintln!("node e2e: upstream icetest without --cds-server-address: too many CDS servers ({:.0?})", t0.elapsed());

    // TURN-UDP, asymmetric and symmetric.
    let t0 = Instant::now();
    let run = icetest(node, client, "icetest", &["udp"], &cds_flags, Meddle::None).await;
    check_passed(&run);
    eprintln!("node e2e: upstream icetest over TURN-UDP ({:.0?}):\n{}", t0.elapsed(), run.output);

    // TURN-TCP: upstream's client offers no candidate (see above), while TURN-TCP through the
    // same Gateway with the same credentials allocates. Its dial is retried for 90 s before the
    // stage fails; `--timeout` ends the run sooner, at the same stage, with the same logs.
    let t0 = Instant::now();
    let probe = Meddle::ProbeTurnTcpAfter("Obtaining ICE server configuration");
    let tcp_flags = [&cds_flags[..], &["--timeout", TCP_RUN_TIMEOUT]].concat();
    let run = icetest(node, client, "icetest-tcp", &["tcp"], &tcp_flags, probe).await;
    assert_eq!(run.failed_stage(), "Running asymmetric ICE test over TURN-TCP", "{}", run.output);
    assert!(run.output.contains("turn:") && run.output.contains("transport=tcp"), "{}", run.output);
    assert!(!run.output.contains("typ relay"), "upstream's client offered a relay candidate:\n{}", run.output);
    eprintln!("node e2e: upstream icetest over TURN-TCP: no relay candidate offered ({:.0?})", t0.elapsed());

    // The route removed: no cluster with endpoints, and upstream names the stage.
    let t0 = Instant::now();
    let run = icetest(node, client, "icetest-no-route", &["udp"], &cds_flags, Meddle::DeleteRoute).await;
    assert_eq!(run.failed_stage(), "Checking Gateway", "{}", run.output);
    assert!(run.output.contains("failed to find public address for Gateway"), "{}", run.output);
    eprintln!("node e2e: upstream icetest, route deleted: fails at Checking Gateway ({:.0?})", t0.elapsed());

    // The credentials rotated once icetest has them: the ICE test that dials with them fails.
    let t0 = Instant::now();
    let meddle = Meddle::RotateSecretAfter("Obtaining ICE server configuration");
    let run = icetest(node, client, "icetest-rotated", &["udp"], &cds_flags, meddle).await;
    let failed = run.failed_stage();
    assert!(failed.starts_with("Running") && failed.ends_with("ICE test over TURN-UDP"), "{}", run.output);
    assert!(run.output.contains("could not send WHIP request to ICE tester backend"), "{}", run.output);
    eprintln!("node e2e: upstream icetest, secret rotated: fails at {failed} ({:.0?})", t0.elapsed());
}
