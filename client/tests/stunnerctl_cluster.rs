//! `stunnerctl` against a real kube-apiserver (tests/apiserver, the harness the e2e suites
//! use): the kubeconfig, context and namespace flags, and finding the config discovery server
//! and the dataplane pods by their labels. The harness has no kubelet, so a port-forward to a
//! pod it finds fails; the tests check that the failure names that pod and port (discovery
//! worked, and what was tried). Carrying connections over a port-forward needs a node: that is
//! `cluster::PortForward`, to be tested where one runs.

#[path = "../../tests/support/external.rs"]
mod external;

use k8s_openapi::api::core::v1::{Namespace, Pod, ServiceAccount};
use kube::api::{Api, PostParams};
use kube::config::{KubeConfigOptions, Kubeconfig};
use kube::{Client, Config};
use serde_json::json;
use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Child, ChildStdin, Command, Output, Stdio};
use std::time::Duration;

/// One tests/apiserver process; closing its stdin stops it.
struct ApiServer {
    child: Child,
    stdin: Option<ChildStdin>,
    dir: PathBuf,
}

impl ApiServer {
    /// A fresh API server, or `None` when it is not built (the test is skipped).
    fn start(test: &str) -> Option<ApiServer> {
        let bin = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../tests/apiserver/bin/apiserver");
        let bin = external::built(bin, "run tests/apiserver/build.sh (or scripts/test)")?;
        let dir = std::env::temp_dir().join(format!("stunnerctl-{test}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        let mut child = Command::new(bin)
            .args(["--dir", dir.to_str().unwrap()])
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(std::fs::File::create(dir.join("apiserver.log")).unwrap())
            .spawn()
            .expect("start tests/apiserver/bin/apiserver");
        let stdin = child.stdin.take();
        let mut lines = BufReader::new(child.stdout.take().unwrap()).lines();
        loop {
            match lines.next() {
                Some(Ok(line)) if line.starts_with("READY ") => break,
                Some(Ok(_)) => {}
                other => panic!("the apiserver exited before READY ({other:?}); log in {}", dir.display()),
            }
        }
        Some(ApiServer { child, stdin, dir })
    }

    fn kubeconfig(&self) -> PathBuf {
        self.dir.join("admin.kubeconfig")
    }

    async fn client(&self) -> Client {
        let kc = Kubeconfig::read_from(self.kubeconfig()).unwrap();
        Client::try_from(Config::from_custom_kubeconfig(kc, &KubeConfigOptions::default()).await.unwrap()).unwrap()
    }
}

impl Drop for ApiServer {
    fn drop(&mut self) {
        drop(self.stdin.take());
        for _ in 0..100 {
            if let Ok(Some(_)) = self.child.try_wait() {
                let _ = std::fs::remove_dir_all(&self.dir);
                return;
            }
            std::thread::sleep(Duration::from_millis(100));
        }
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// A namespace with the `default` ServiceAccount a pod needs (no controller creates it here).
async fn namespace(client: &Client, name: &str) {
    let pp = PostParams::default();
    let ns: Namespace = serde_json::from_value(json!({"metadata": {"name": name}})).unwrap();
    Api::<Namespace>::all(client.clone()).create(&pp, &ns).await.unwrap();
    let sa: ServiceAccount = serde_json::from_value(json!({"metadata": {"name": "default"}})).unwrap();
    Api::<ServiceAccount>::namespaced(client.clone(), name).create(&pp, &sa).await.unwrap();
}

async fn pod(client: &Client, namespace: &str, name: &str, labels: serde_json::Value) {
    let pod: Pod = serde_json::from_value(json!({
        "metadata": {"name": name, "labels": labels},
        "spec": {"containers": [{"name": "main", "image": "example.invalid/none"}]}
    }))
    .unwrap();
    Api::<Pod>::namespaced(client.clone(), namespace).create(&PostParams::default(), &pod).await.unwrap();
}

/// Runs stunnerctl with `args` and a clean environment for cluster selection.
async fn stunnerctl(args: &[&str], kubeconfig_env: Option<&Path>) -> Output {
    let mut cmd = tokio::process::Command::new(env!("CARGO_BIN_EXE_stunnerctl"));
    cmd.args(args).env_remove("STUNNERCTL_CDS_SERVER_ADDRESS").env_remove("KUBERNETES_SERVICE_HOST");
    // No ~/.kube/config of the machine running the tests.
    cmd.env("HOME", std::env::temp_dir().join("stunnerctl-no-home"));
    match kubeconfig_env {
        Some(path) => cmd.env("KUBECONFIG", path),
        None => cmd.env_remove("KUBECONFIG"),
    };
    cmd.kill_on_drop(true);
    tokio::time::timeout(Duration::from_secs(60), cmd.output()).await.expect("stunnerctl finishes").unwrap()
}

fn stderr_of_failure(out: &Output) -> String {
    let stderr = String::from_utf8_lossy(&out.stderr).to_string();
    assert_eq!(out.status.code(), Some(1), "stdout: {} stderr: {stderr}", String::from_utf8_lossy(&out.stdout));
    assert!(!stderr.contains("panicked"), "{stderr}");
    stderr
}

#[tokio::test]
async fn finds_the_cds_server_and_the_dataplane_pods_by_label() {
    let Some(api) = ApiServer::start("discovery") else { return };
    let client = api.client().await;
    let kubeconfig = api.kubeconfig();
    let kc = kubeconfig.to_str().unwrap();

    // Nothing labelled yet: say what was looked for, where.
    let err = stderr_of_failure(&stunnerctl(&["--kubeconfig", kc, "config", "-A"], None).await);
    assert!(
        err.contains(
            "no config discovery server found in any namespace: no pod is labelled \
             stunner.l7mp.io/config-discovery-service=enabled"
        ),
        "{err}"
    );
    // The same through $KUBECONFIG, and narrowed to a namespace.
    let err =
        stderr_of_failure(&stunnerctl(&["license", "--cds-server-namespace", "elsewhere"], Some(&kubeconfig)).await);
    assert!(err.contains("no config discovery server found in namespace elsewhere"), "{err}");

    // A pod that is not labelled is not a CDS server; the labelled one is.
    namespace(&client, "stunner-system").await;
    pod(&client, "stunner-system", "unrelated", json!({"app": "other"})).await;
    pod(&client, "stunner-system", "operator-0", json!({"stunner.l7mp.io/config-discovery-service": "enabled"})).await;
    let err = stderr_of_failure(&stunnerctl(&["--kubeconfig", kc, "-n", "stunner", "config", "gw"], None).await);
    assert!(err.contains("cannot port-forward to pod stunner-system/operator-0 port 13478"), "{err}");
    let err = stderr_of_failure(
        &stunnerctl(
            &["--kubeconfig", kc, "license", "--cds-server-namespace", "stunner-system", "--cds-server-port", "1234"],
            None,
        )
        .await,
    );
    assert!(err.contains("cannot port-forward to pod stunner-system/operator-0 port 1234"), "{err}");

    // Dataplane pods: none for the Gateway yet, which is said on stderr, not an error.
    namespace(&client, "stunner").await;
    let out = stunnerctl(&["--kubeconfig", kc, "-n", "stunner", "status", "udp-gateway"], None).await;
    assert!(out.status.success() && out.stdout.is_empty(), "{out:?}");
    assert_eq!(
        String::from_utf8_lossy(&out.stderr),
        "stunnerctl: No dataplane pods of gateway stunner/udp-gateway found in namespace stunner; \
         use -A (--all-namespaces) to look in every namespace.\n"
    );
    let labels = |gw: &str| {
        json!({"app": "stunner", "stunner.l7mp.io/related-gateway-name": gw,
               "stunner.l7mp.io/related-gateway-namespace": "stunner"})
    };
    pod(&client, "stunner", "udp-gateway-1", labels("udp-gateway")).await;
    pod(&client, "stunner", "tcp-gateway-1", labels("tcp-gateway")).await;
    let err =
        stderr_of_failure(&stunnerctl(&["--kubeconfig", kc, "-n", "stunner", "status", "udp-gateway"], None).await);
    assert!(
        err.contains("pod stunner/udp-gateway-1: cannot port-forward to pod stunner/udp-gateway-1 port 8086"),
        "{err}"
    );
    assert!(!err.contains("tcp-gateway-1"), "only the Gateway's pods: {err}");
    assert!(err.ends_with("error: 1 of 1 dataplane pods did not report a status\n"), "{err}");
    // Every Gateway of the namespace, then one pod by name, on another port.
    let err = stderr_of_failure(&stunnerctl(&["--kubeconfig", kc, "-n", "stunner", "status"], None).await);
    assert!(err.ends_with("error: 2 of 2 dataplane pods did not report a status\n"), "{err}");
    let args = ["--kubeconfig", kc, "-n", "stunner", "status", "udp-gateway", "--pod-name", "nope"];
    let err = stderr_of_failure(&stunnerctl(&args, None).await);
    assert!(err.contains("pod nope not found among the dataplane pods of gateway stunner/udp-gateway"), "{err}");
    let args = [
        "--kubeconfig",
        kc,
        "-n",
        "stunner",
        "status",
        "udp-gateway",
        "--pod-name",
        "udp-gateway-1",
        "--pod-port",
        "9",
    ];
    let err = stderr_of_failure(&stunnerctl(&args, None).await);
    assert!(err.contains("cannot port-forward to pod stunner/udp-gateway-1 port 9"), "{err}");
}

#[tokio::test]
async fn cluster_flags_that_cannot_work_say_why() {
    let Some(api) = ApiServer::start("flags") else { return };
    let kubeconfig = api.kubeconfig();
    let kc = kubeconfig.to_str().unwrap();
    let err = stderr_of_failure(&stunnerctl(&["--kubeconfig", kc, "--context", "nope", "config"], None).await);
    assert!(err.starts_with("error: cannot load the Kubernetes config:") && err.contains("nope"), "{err}");
    let err = stderr_of_failure(&stunnerctl(&["--kubeconfig", "/nonexistent/kubeconfig", "config"], None).await);
    assert!(err.contains("/nonexistent/kubeconfig"), "{err}");
    // No kubeconfig anywhere and not in a pod: kubectl's failure, not a guess.
    let err = stderr_of_failure(&stunnerctl(&["config"], None).await);
    assert!(err.starts_with("error: cannot load the Kubernetes config:"), "{err}");
    // --cds-server-address never touches the cluster.
    let err = stderr_of_failure(
        &stunnerctl(&["--context", "nope", "--cds-server-address", "127.0.0.1:1", "config"], None).await,
    );
    assert!(err.contains("cannot reach the config discovery server at http://127.0.0.1:1"), "{err}");
}
