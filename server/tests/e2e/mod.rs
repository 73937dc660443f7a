//! End-to-end harness (design.md §6, layer 3): a real kube-apiserver with etcd
//! (`tests/apiserver/bin/apiserver`), the STUNner and Gateway API CRDs (v1.4.0 unless a test
//! asks for another bundle, see [`GatewayApi`]), the operator's
//! RBAC from `deploy/manifests/rbac.yaml`, and the real operator binary running as its
//! ServiceAccount, watched through its CDS like a dataplane watches it.
//!
//! Every test gets its own API server (about 300 MB and 4-10 s to start), so tests share
//! nothing and may run in parallel. Processes stop when their guards drop, also on panic;
//! on failure the operator's log tail and the paths of the full logs are printed.

#![allow(dead_code)] // each e2e test crate uses its own subset

#[path = "../../../tests/support/external.rs"]
pub mod external;
#[path = "../../../tests/support/ports.rs"]
pub mod ports;

use futures_util::StreamExt;
use k8s_openapi::api::authentication::v1::{TokenRequest, TokenRequestSpec};
use k8s_openapi::api::core::v1::ServiceAccount;
use kube::api::{Api, DeleteParams, DynamicObject, Patch, PatchParams, PostParams};
use kube::config::{KubeConfigOptions, Kubeconfig};
use kube::core::GroupVersionKind;
use kube::discovery::{self, ApiResource, Scope};
use kube::{Client, Config};
use serde_json::Value;
use std::io::{BufRead, BufReader};
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::process::{Child, ChildStdin, Command, Stdio};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};
use stunner_gateway::config::StunnerConfig;
use tokio::io::AsyncBufReadExt;
use tokio_tungstenite::tungstenite::Message;

/// The Gateway API module whose CRDs the tests install, at [`GatewayApi::version`].
pub const GATEWAY_API_MODULE: &str = "sigs.k8s.io/gateway-api";
/// The operator's namespace and ServiceAccount, as deploy/manifests/rbac.yaml has them.
pub const OPERATOR_NAMESPACE: &str = "stunner-system";
pub const OPERATOR_SA: &str = "stunner-gateway-operator";
/// The field manager the tests write with (the operator's is `stunner-gateway-operator`).
pub const TEST_MANAGER: &str = "e2e-test";
/// Generous: the machine running the tests may be busy with builds.
pub const TIMEOUT: Duration = Duration::from_secs(90);

pub fn repo_root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("..")
}

/// The API server program, if built (else the test is skipped, see tests/support/external.rs).
fn apiserver_bin() -> Option<PathBuf> {
    external::built(repo_root().join("tests/apiserver/bin/apiserver"), "run tests/apiserver/build.sh (or scripts/test)")
}

/// The Gateway API module's directory at `version` (its `config/crd` at least), downloaded if
/// missing. A module that needs a newer Go than the one on PATH (v1.7.0 needs Go 1.27) is not
/// unpacked by `go mod download`, which still fetches its zip: its `config/crd` is then
/// extracted with `unzip` into a directory of the system's temporary directory.
pub fn gateway_api_dir(version: &str) -> PathBuf {
    static DIRS: Mutex<Vec<(String, PathBuf)>> = Mutex::new(Vec::new());
    let mut dirs = DIRS.lock().unwrap_or_else(|e| e.into_inner());
    if let Some((_, dir)) = dirs.iter().find(|(v, _)| v == version) {
        return dir.clone();
    }
    let module = format!("{GATEWAY_API_MODULE}@{version}");
    // Outside any module, `go mod download path@version` only fills the module cache.
    let out = Command::new("go")
        .args(["mod", "download", "-json", &module])
        .current_dir(std::env::temp_dir())
        .env("GOFLAGS", "-mod=mod")
        .env("GO111MODULE", "on")
        .output()
        .expect("`go` on PATH (needed for the Gateway API CRDs)");
    let info: Value = serde_json::from_slice(&out.stdout).unwrap_or_else(|e| {
        panic!(
            "go mod download {module}: {e}: {}{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        )
    });
    let dir = match (info["Dir"].as_str(), info["Zip"].as_str()) {
        (Some(dir), _) if Path::new(dir).join("config/crd").is_dir() => PathBuf::from(dir),
        (_, Some(zip)) if Path::new(zip).is_file() => unzip_crds(zip, &module),
        _ => panic!("go mod download {module}: neither a directory nor a zip: {info}"),
    };
    dirs.push((version.to_string(), dir.clone()));
    dir
}

/// `config/crd` of the module zip `zip`, extracted once per machine (into a scratch directory
/// first, then renamed, so a test binary running beside this one never sees half of it).
fn unzip_crds(zip: &str, module: &str) -> PathBuf {
    let root = std::env::temp_dir().join("stunner-e2e-modules");
    let dir = root.join(module);
    if dir.join("config/crd").is_dir() {
        return dir;
    }
    let scratch = root.join(format!("scratch-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&scratch);
    std::fs::create_dir_all(&scratch).unwrap();
    let status = Command::new("unzip")
        .args(["-q", "-o", zip, &format!("{module}/config/crd/*"), "-d"])
        .arg(&scratch)
        .status()
        .expect("`unzip` on PATH (scripts/test installs it) for a Gateway API module newer than the Go on PATH");
    assert!(status.success(), "unzip {zip}");
    std::fs::create_dir_all(dir.parent().unwrap()).unwrap();
    if std::fs::rename(scratch.join(module), &dir).is_err() && !dir.join("config/crd").is_dir() {
        panic!("cannot move the extracted CRDs to {}", dir.display());
    }
    let _ = std::fs::remove_dir_all(&scratch);
    dir
}

/// The Gateway API CRDs a cluster is given: the bundles STUNner users run.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum GatewayApi {
    /// v1.4.0's standard channel plus the experimental UDPRoute (v1alpha2): what most e2e
    /// suites run, as the README asked before v1.7.
    V14StandardWithUdpRoute,
    /// v1.4.0's experimental channel (UDPRoute and TCPRoute v1alpha2).
    V14Experimental,
    /// v1.7.0's standard channel (UDPRoute and TCPRoute v1 only), with its safe-upgrades
    /// ValidatingAdmissionPolicy, as the README installs it.
    V17Standard,
    /// v1.7.0's experimental channel (UDPRoute and TCPRoute as v1 and v1alpha2), with its
    /// policy.
    V17Experimental,
    /// None at all: STUNner's CRDs alone.
    None,
}

impl GatewayApi {
    pub fn version(self) -> &'static str {
        match self {
            GatewayApi::V14StandardWithUdpRoute | GatewayApi::V14Experimental | GatewayApi::None => "v1.4.0",
            GatewayApi::V17Standard | GatewayApi::V17Experimental => "v1.7.0",
        }
    }

    /// The bundle's files: its CRDs (of group gateway.networking.k8s.io), then its policy.
    pub fn files(self) -> Vec<PathBuf> {
        let crd = gateway_api_dir(self.version()).join("config/crd");
        let channel = |name: &str| {
            let mut files: Vec<PathBuf> = std::fs::read_dir(crd.join(name))
                .unwrap()
                .map(|e| e.unwrap().path())
                .filter(|p| p.file_name().unwrap().to_str().unwrap().starts_with("gateway.networking.k8s.io_"))
                .collect();
            // The policy last: it judges CRD writes, not itself.
            files.sort_by_key(|p| (p.to_str().unwrap().contains("_vap_"), p.clone()));
            files
        };
        match self {
            GatewayApi::V14StandardWithUdpRoute => {
                let mut files = channel("standard");
                files.push(crd.join("experimental/gateway.networking.k8s.io_udproutes.yaml"));
                files
            }
            GatewayApi::V14Experimental | GatewayApi::V17Experimental => channel("experimental"),
            GatewayApi::V17Standard => channel("standard"),
            GatewayApi::None => Vec::new(),
        }
    }
}

/// A scratch directory for one test; removed on drop, except the logs of a failed test.
pub struct TestDir(pub PathBuf);

impl TestDir {
    pub fn new(test: &str) -> TestDir {
        let dir = std::env::temp_dir().join(format!("stunner-e2e-{test}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        TestDir(dir)
    }
}

impl Drop for TestDir {
    fn drop(&mut self) {
        if std::thread::panicking() {
            // The logs stay for a look; etcd's data (tens of MB) goes.
            let _ = std::fs::remove_dir_all(self.0.join("state/etcd"));
            eprintln!("e2e: logs and kubeconfigs kept in {}", self.0.display());
        } else {
            let _ = std::fs::remove_dir_all(&self.0);
        }
    }
}

/// One `tests/apiserver` process. Closing its stdin stops it (about 1 s); drop does that
/// and waits. With a state directory and a fixed port it can be stopped and started again
/// as the same cluster.
pub struct ApiServer {
    bin: PathBuf,
    child: Option<Child>,
    stdin: Option<ChildStdin>,
    pub dir: PathBuf,
    state: PathBuf,
    pub port: u16,
    runs: u32,
}

impl ApiServer {
    /// Starts a new cluster of the program `bin` with its files under `dir`.
    pub async fn start(bin: PathBuf, dir: &Path) -> ApiServer {
        let port = free_port();
        let (kube, state) = (dir.join("kube"), dir.join("state"));
        let mut s = ApiServer { bin, child: None, stdin: None, dir: kube, state, port, runs: 0 };
        s.launch().await;
        s
    }

    async fn launch(&mut self) {
        self.runs += 1;
        let log = std::fs::File::create(self.state.with_file_name(format!("apiserver-{}.log", self.runs))).unwrap();
        let mut child = Command::new(&self.bin)
            .args(["--dir", self.dir.to_str().unwrap(), "--state-dir", self.state.to_str().unwrap()])
            .args(["--port", &self.port.to_string()])
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(log)
            .spawn()
            .expect("start tests/apiserver/bin/apiserver");
        self.stdin = child.stdin.take();
        let stdout = child.stdout.take().unwrap();
        self.child = Some(child);
        let ready = tokio::task::spawn_blocking(move || {
            let mut lines = BufReader::new(stdout).lines();
            loop {
                match lines.next() {
                    Some(Ok(line)) if line.starts_with("READY ") => return Ok(()),
                    Some(Ok(_)) => continue,
                    Some(Err(e)) => return Err(e.to_string()),
                    None => return Err("the apiserver exited before READY".to_string()),
                }
            }
        });
        let ready = tokio::time::timeout(Duration::from_secs(180), ready).await;
        match ready {
            Ok(Ok(Ok(()))) => {}
            other => panic!("apiserver did not start ({other:?}); log: {}", self.state.parent().unwrap().display()),
        }
    }

    /// Stops the process (the cluster's state stays).
    pub fn stop(&mut self) {
        drop(self.stdin.take());
        if let Some(mut child) = self.child.take() {
            for _ in 0..300 {
                if let Ok(Some(_)) = child.try_wait() {
                    return;
                }
                std::thread::sleep(Duration::from_millis(100));
            }
            let _ = child.kill();
            let _ = child.wait();
        }
    }

    /// Starts the same cluster again: same port, data, CA and tokens.
    pub async fn restart(&mut self) {
        self.stop();
        self.launch().await;
    }

    pub fn admin_kubeconfig(&self) -> PathBuf {
        self.dir.join("admin.kubeconfig")
    }

    pub fn server_url(&self) -> String {
        format!("https://127.0.0.1:{}", self.port)
    }
}

impl Drop for ApiServer {
    fn drop(&mut self) {
        self.stop();
    }
}

/// A client from a kubeconfig file.
pub async fn client_from(kubeconfig: &Path) -> Client {
    let kc = Kubeconfig::read_from(kubeconfig).unwrap();
    let config = Config::from_custom_kubeconfig(kc, &KubeConfigOptions::default()).await.unwrap();
    Client::try_from(config).unwrap()
}

/// A free port for a server the test starts (tests/support/ports.rs).
pub fn free_port() -> u16 {
    ports::free_ports(1)[0]
}

/// An API server with the CRDs and the operator's RBAC installed, and a kubeconfig of the
/// operator's ServiceAccount.
pub struct Cluster {
    pub api: ApiServer,
    pub admin: Client,
    pub operator_kubeconfig: PathBuf,
    pub dir: TestDir,
}

impl Cluster {
    /// A fresh cluster, or `None` when the API server is not built (the test is skipped).
    pub async fn start(test: &str) -> Option<Cluster> {
        Self::start_with(test, GatewayApi::V14StandardWithUdpRoute).await
    }

    /// A fresh cluster with the STUNner CRDs and the Gateway API bundle `gateway_api`.
    pub async fn start_with(test: &str, gateway_api: GatewayApi) -> Option<Cluster> {
        Self::start_crds(test, gateway_api, true).await
    }

    /// A fresh cluster with the Gateway API bundle `gateway_api` and, if `stunner_crds`,
    /// STUNner's CRDs from deploy/crds (without, for an operator that installs its own).
    pub async fn start_crds(test: &str, gateway_api: GatewayApi, stunner_crds: bool) -> Option<Cluster> {
        let bin = apiserver_bin()?;
        let dir = TestDir::new(test);
        let api = ApiServer::start(bin, &dir.0).await;
        let admin = client_from(&api.admin_kubeconfig()).await;
        if stunner_crds {
            install_stunner_crds(&admin).await;
        }
        install_gateway_api(&admin, gateway_api).await;
        let rbac = std::fs::read_to_string(repo_root().join("deploy/manifests/rbac.yaml"))
            .expect("deploy/manifests/rbac.yaml");
        apply_yaml(&admin, &namespace_yaml(OPERATOR_NAMESPACE)).await;
        apply_yaml(&admin, &rbac).await;
        let operator_kubeconfig = dir.0.join("operator-sa.kubeconfig");
        write_sa_kubeconfig(&admin, &api, &operator_kubeconfig).await;
        Some(Cluster { api, admin, operator_kubeconfig, dir })
    }

    /// Starts the operator as the ServiceAccount of deploy/manifests/rbac.yaml.
    pub async fn operator(&self, name: &str, args: &[&str]) -> Operator {
        Operator::start(self, name, args).await
    }

    /// After an API server restart: new clients (the old ones' connections are gone).
    pub async fn reconnect(&mut self) {
        self.admin = client_from(&self.api.admin_kubeconfig()).await;
    }
}

pub fn namespace_yaml(name: &str) -> String {
    format!("apiVersion: v1\nkind: Namespace\nmetadata:\n  name: {name}\n")
}

/// A token of the operator's ServiceAccount (TokenRequest, as the kubelet gets one for a
/// pod), in a kubeconfig next to the admin's: the API server authenticates it as
/// `system:serviceaccount:stunner-system:stunner-gateway-operator`, so exactly the bindings
/// of rbac.yaml apply.
async fn write_sa_kubeconfig(admin: &Client, api: &ApiServer, path: &Path) {
    let sas: Api<ServiceAccount> = Api::namespaced(admin.clone(), OPERATOR_NAMESPACE);
    let request = TokenRequest {
        spec: Some(TokenRequestSpec { expiration_seconds: Some(24 * 3600), ..Default::default() }),
        ..Default::default()
    };
    let token = sas
        .create_token_request(OPERATOR_SA, &PostParams::default(), &request)
        .await
        .expect("TokenRequest for the operator's ServiceAccount")
        .status
        .and_then(|s| s.token)
        .expect("a token in the TokenRequest status");
    let kubeconfig = format!(
        "apiVersion: v1\nkind: Config\nclusters:\n- name: harness\n  cluster:\n    server: {server}\n    certificate-authority: {ca}\nusers:\n- name: operator\n  user:\n    token: {token}\ncontexts:\n- name: operator\n  context:\n    cluster: harness\n    user: operator\n    namespace: {OPERATOR_NAMESPACE}\ncurrent-context: operator\n",
        server = api.server_url(),
        ca = api.dir.join("ca.crt").display(),
    );
    std::fs::write(path, kubeconfig).unwrap();
}

/// The STUNner CRDs from deploy/crds, Established.
pub async fn install_stunner_crds(admin: &Client) {
    let files: Vec<PathBuf> = std::fs::read_dir(repo_root().join("deploy/crds"))
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|e| e == "yaml"))
        .collect();
    install_crd_files(admin, &files).await;
}

/// A Gateway API bundle's CRDs, Established, and its policy, if any.
pub async fn install_gateway_api(admin: &Client, bundle: GatewayApi) {
    install_crd_files(admin, &bundle.files()).await;
}

/// Applies `files`, then waits for the CRDs among their objects to be Established.
async fn install_crd_files(admin: &Client, files: &[PathBuf]) {
    let mut names = Vec::new();
    for f in files {
        let text = std::fs::read_to_string(f).unwrap_or_else(|e| panic!("{}: {e}", f.display()));
        for obj in apply_yaml(admin, &text).await {
            if resource_of(&obj).1 == "CustomResourceDefinition" {
                names.push(obj.metadata.name.unwrap());
            }
        }
    }
    let crds = api_for(admin, "apiextensions.k8s.io/v1", "CustomResourceDefinition", None).await;
    for name in names {
        wait_for(&format!("CRD {name} Established"), || {
            let crds = crds.clone();
            let name = name.clone();
            async move {
                let crd = crds.get(&name).await.ok()?;
                condition(&crd.data["status"], "Established").filter(|c| c["status"] == "True").map(|_| ())
            }
        })
        .await;
    }
}

/// The dynamic API of a kind; `namespace` only for namespaced kinds (else all namespaces).
pub async fn api_for(client: &Client, api_version: &str, kind: &str, namespace: Option<&str>) -> Api<DynamicObject> {
    let (resource, scope) = discover(client, api_version, kind).await;
    match (scope, namespace) {
        (Scope::Namespaced, Some(ns)) => Api::namespaced_with(client.clone(), ns, &resource),
        _ => Api::all_with(client.clone(), &resource),
    }
}

/// The API resource of `kind` and its scope, as discovery finds them.
pub async fn discover(client: &Client, api_version: &str, kind: &str) -> (ApiResource, Scope) {
    let (group, version) = api_version.rsplit_once('/').unwrap_or(("", api_version));
    let gvk = GroupVersionKind::gvk(group, version, kind);
    let mut last = None;
    for _ in 0..50 {
        match discovery::pinned_kind(client, &gvk).await {
            Ok((resource, caps)) => return (resource, caps.scope),
            // A CRD applied a moment ago may not be served yet.
            Err(e) => last = Some(e),
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    panic!("cannot discover {api_version} {kind}: {last:?}");
}

fn resource_of(obj: &DynamicObject) -> (String, String) {
    let types = obj.types.as_ref().expect("apiVersion and kind");
    (types.api_version.clone(), types.kind.clone())
}

/// Applies every document of `text` with server-side apply as [`TEST_MANAGER`].
pub async fn apply_yaml(client: &Client, text: &str) -> Vec<DynamicObject> {
    let mut applied = Vec::new();
    for doc in serde_yaml_ng::Deserializer::from_str(text) {
        let value: Value = serde::Deserialize::deserialize(doc).unwrap();
        if value.is_null() {
            continue;
        }
        applied.push(apply(client, value).await.unwrap_or_else(|e| panic!("apply: {e}")));
    }
    applied
}

/// Applies one object (server-side apply, forced, as [`TEST_MANAGER`]).
pub async fn apply(client: &Client, value: Value) -> Result<DynamicObject, kube::Error> {
    let obj: DynamicObject = serde_json::from_value(value.clone()).unwrap();
    let (api_version, kind) = resource_of(&obj);
    let name = obj.metadata.name.clone().expect("metadata.name");
    let api = api_for(client, &api_version, &kind, Some(obj.metadata.namespace.as_deref().unwrap_or("default"))).await;
    api.patch(&name, &PatchParams::apply(TEST_MANAGER).force(), &Patch::Apply(&value)).await
}

/// Deletes one object; a missing one is fine.
pub async fn delete(client: &Client, api_version: &str, kind: &str, namespace: Option<&str>, name: &str) {
    let api = api_for(client, api_version, kind, namespace).await;
    match api.delete(name, &DeleteParams::default()).await {
        Ok(_) => {}
        Err(kube::Error::Api(e)) if e.code == 404 => {}
        Err(e) => panic!("delete {kind} {name}: {e}"),
    }
}

/// One object, if it exists.
pub async fn get(
    client: &Client,
    api_version: &str,
    kind: &str,
    namespace: Option<&str>,
    name: &str,
) -> Option<DynamicObject> {
    api_for(client, api_version, kind, namespace).await.get_opt(name).await.unwrap()
}

/// The condition of `type_` in `status.conditions` (or in `conditions` of `status` itself).
pub fn condition<'a>(status: &'a Value, type_: &str) -> Option<&'a Value> {
    status["conditions"].as_array()?.iter().find(|c| c["type"] == type_)
}

/// Whether `status` has condition `type_` with `status` and `reason`.
pub fn has_condition(status: &Value, type_: &str, expect_status: &str, reason: &str) -> bool {
    condition(status, type_).is_some_and(|c| c["status"] == expect_status && c["reason"] == reason)
}

/// Polls `check` until it returns `Some`, for up to [`TIMEOUT`].
pub async fn wait_for<T, F, Fut>(what: &str, mut check: F) -> T
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = Option<T>>,
{
    let deadline = Instant::now() + TIMEOUT;
    loop {
        if let Some(v) = check().await {
            return v;
        }
        assert!(Instant::now() < deadline, "timed out waiting for {what}");
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}

/// Waits until `kind/name` exists and `pred` holds for it; returns it.
pub async fn wait_object(
    client: &Client,
    api_version: &str,
    kind: &str,
    namespace: Option<&str>,
    name: &str,
    what: &str,
    pred: impl Fn(&DynamicObject) -> bool,
) -> DynamicObject {
    let api = api_for(client, api_version, kind, namespace).await;
    let deadline = Instant::now() + TIMEOUT;
    loop {
        let last = api.get_opt(name).await.unwrap();
        if let Some(o) = &last
            && pred(o)
        {
            return o.clone();
        }
        assert!(
            Instant::now() < deadline,
            "timed out waiting for {kind} {name}: {what}; last seen: {}",
            serde_json::to_string_pretty(&last).unwrap()
        );
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}

/// Waits until `kind/name` is gone.
pub async fn wait_gone(client: &Client, api_version: &str, kind: &str, namespace: Option<&str>, name: &str) {
    let api = api_for(client, api_version, kind, namespace).await;
    wait_for(&format!("{kind} {name} to be deleted"), || {
        let api = api.clone();
        async move { api.get_opt(name).await.unwrap().is_none().then_some(()) }
    })
    .await
}

/// The operator binary, running as the ServiceAccount against a [`Cluster`].
pub struct Operator {
    child: tokio::process::Child,
    pub name: String,
    /// The CDS address it serves on.
    pub cds: SocketAddr,
    log: Arc<Mutex<Vec<String>>>,
    log_path: PathBuf,
    /// Copies the operator's stderr into `log`; ends when the process has closed it.
    log_reader: tokio::task::JoinHandle<()>,
}

impl Operator {
    /// `args` are added to loopback-only defaults (the CDS on a free port of 127.0.0.1,
    /// metrics and probes off, a short throttle); a default flag given in `args` is
    /// replaced.
    pub async fn start(cluster: &Cluster, name: &str, args: &[&str]) -> Operator {
        Self::start_with(&cluster.operator_kubeconfig, &cluster.dir.0, name, args).await
    }

    pub async fn start_with(kubeconfig: &Path, dir: &Path, name: &str, args: &[&str]) -> Operator {
        let bin = Path::new(env!("CARGO_BIN_EXE_stunner-gateway-operator"));
        Self::start_binary(bin, kubeconfig, dir, name, args).await
    }

    /// [`Self::start_with`] of another build of the operator (a benchmark's "before").
    pub async fn start_binary(bin: &Path, kubeconfig: &Path, dir: &Path, name: &str, args: &[&str]) -> Operator {
        let log_path = dir.join(format!("operator-{name}.log"));
        let mut argv: Vec<&str> = Vec::new();
        for (flag, value) in [
            ("--config-discovery-address", "127.0.0.1:0"),
            ("--metrics-bind-address", "0"),
            ("--health-probe-bind-address", "0"),
            ("--throttle-timeout", "50ms"),
        ] {
            if !args.iter().any(|a| a.split('=').next() == Some(flag)) {
                argv.extend([flag, value]);
            }
        }
        argv.extend(args);
        let mut command = tokio::process::Command::new(bin);
        // RUST_LOG beats the zap flags: a test that sets the level gets exactly that.
        if !args.iter().any(|a| a.starts_with("--zap-log-level")) {
            command.env("RUST_LOG", "info,kube=warn");
        }
        let mut child = command
            .args(&argv)
            .env("KUBECONFIG", kubeconfig)
            .env("POD_NAMESPACE", OPERATOR_NAMESPACE)
            .env("POD_NAME", name)
            .env("NO_COLOR", "1")
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .kill_on_drop(true)
            .spawn()
            .unwrap();
        let log = Arc::new(Mutex::new(Vec::new()));
        let mut lines = tokio::io::BufReader::new(child.stderr.take().unwrap()).lines();
        let (tx, rx) = tokio::sync::oneshot::channel();
        let sink = log.clone();
        let file_path = log_path.clone();
        let log_reader = tokio::spawn(async move {
            let mut tx = Some(tx);
            let mut file = std::fs::OpenOptions::new().create(true).append(true).open(file_path).unwrap();
            while let Ok(Some(line)) = lines.next_line().await {
                let served = served_address(&line);
                if let Some(addr) = served
                    && let Some(tx) = tx.take()
                {
                    let _ = tx.send(addr.trim().to_string());
                }
                let _ = std::io::Write::write_all(&mut file, format!("{line}\n").as_bytes());
                sink.lock().unwrap_or_else(|e| e.into_inner()).push(line);
            }
        });
        let cds = "127.0.0.1:1".parse().unwrap();
        let mut op = Operator { child, name: name.to_string(), cds, log, log_path, log_reader };
        match tokio::time::timeout(TIMEOUT, rx).await {
            Ok(Ok(addr)) => op.cds = addr.parse().unwrap(),
            _ => panic!("operator {name} did not serve the CDS; log:\n{}", op.log_tail(60)),
        }
        op
    }

    pub fn log_contains(&self, needle: &str) -> bool {
        self.log.lock().unwrap_or_else(|e| e.into_inner()).iter().any(|l| l.contains(needle))
    }

    pub fn log_tail(&self, n: usize) -> String {
        let log = self.log.lock().unwrap_or_else(|e| e.into_inner());
        log[log.len().saturating_sub(n)..].join("\n")
    }

    /// The process's id while it runs (a benchmark reads its /proc files).
    pub fn pid(&self) -> Option<u32> {
        self.child.id()
    }

    /// The process's resident memory (VmRSS), in KiB.
    pub fn rss_kib(&self) -> u64 {
        let pid = self.child.id().expect("the operator runs");
        let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap();
        let line = status.lines().find(|l| l.starts_with("VmRSS:")).expect("VmRSS in /proc/PID/status");
        line.split_whitespace().nth(1).and_then(|kib| kib.parse().ok()).expect("VmRSS in KiB")
    }

    /// Whether the process is still running.
    pub fn running(&mut self) -> bool {
        matches!(self.child.try_wait(), Ok(None))
    }

    /// SIGTERM, then waits for the exit (SIGKILL after a while).
    pub async fn stop(mut self) {
        self.terminate().await;
    }

    /// Stops the operator and returns every line it logged, to the last: a check that
    /// something is never logged sees what the operator would have logged later too.
    pub async fn stop_and_read_log(mut self) -> String {
        self.terminate().await;
        tokio::time::timeout(TIMEOUT, &mut self.log_reader)
            .await
            .expect("the operator's stderr closes when it exits")
            .expect("the log reader does not panic");
        self.log_tail(usize::MAX)
    }

    /// SIGTERM, and SIGKILL if it has not exited after 30 s.
    #[allow(unsafe_code)] // kill(2): std can only send SIGKILL
    async fn terminate(&mut self) {
        if let Some(pid) = self.child.id() {
            // SAFETY: a plain kill(2) of our own child.
            unsafe { libc::kill(pid as libc::pid_t, libc::SIGTERM) };
        }
        if tokio::time::timeout(Duration::from_secs(30), self.child.wait()).await.is_err() {
            let _ = self.child.kill().await;
        }
    }

    /// SIGKILL: a crash, with no chance to clean up.
    pub async fn kill(mut self) {
        let _ = self.child.kill().await;
    }

    /// A WebSocket watch of one Gateway's config, as a dataplane does it.
    pub async fn watch(&self, namespace: &str, gateway: &str) -> Ws {
        let url = format!("ws://{}/api/v1/configs/{namespace}/{gateway}?watch=true", self.cds);
        tokio_tungstenite::connect_async(url).await.unwrap().0
    }

    /// A one-off GET of one Gateway's config: `None` when there is none.
    pub async fn config(&self, namespace: &str, gateway: &str) -> Option<StunnerConfig> {
        cds_config(self.cds, namespace, gateway).await
    }
}

/// A one-off GET of one Gateway's config from the CDS at `cds`: `None` when there is none.
pub async fn cds_config(cds: SocketAddr, namespace: &str, gateway: &str) -> Option<StunnerConfig> {
    cds_get(cds, &format!("/api/v1/configs/{namespace}/{gateway}")).await
}

/// [`cds_config`] as a dataplane on `node` asks for it (`?node=`, patched for that node).
pub async fn cds_node_config(cds: SocketAddr, namespace: &str, gateway: &str, node: &str) -> Option<StunnerConfig> {
    cds_get(cds, &format!("/api/v1/configs/{namespace}/{gateway}?node={node}")).await
}

async fn cds_get(cds: SocketAddr, path: &str) -> Option<StunnerConfig> {
    let body = http_get(cds, path).await;
    let (status, body) = body?;
    if status != 200 {
        return None;
    }
    let list: Value = serde_json::from_str(&body).ok()?;
    // GET returns a list (upstream's ConfigList) or a bare config; accept both.
    let item = if let Some(items) = list["items"].as_array() { items.first()?.clone() } else { list };
    serde_json::from_value(item).ok()
}

/// The CDS address from the operator's "serving config discovery" line, in either log encoding.
fn served_address(line: &str) -> Option<&str> {
    if !line.contains("serving config discovery") {
        return None;
    }
    let console = line.split("address=").nth(1).map(|rest| rest.split_whitespace().next().unwrap_or(rest));
    console.or_else(|| line.split("\"address\":\"").nth(1)?.split('"').next())
}

impl Drop for Operator {
    fn drop(&mut self) {
        if std::thread::panicking() {
            eprintln!(
                "e2e: operator {} log ({}), last lines:\n{}",
                self.name,
                self.log_path.display(),
                self.log_tail(40)
            );
        }
    }
}

/// A minimal HTTP/1.1 GET: (status, body).
pub async fn http_get(addr: SocketAddr, path: &str) -> Option<(u16, String)> {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let mut s = tokio::net::TcpStream::connect(addr).await.ok()?;
    s.write_all(format!("GET {path} HTTP/1.1\r\nHost: {addr}\r\nConnection: close\r\n\r\n").as_bytes()).await.ok()?;
    let mut buf = Vec::new();
    tokio::time::timeout(Duration::from_secs(10), s.read_to_end(&mut buf)).await.ok()?.ok()?;
    let text = String::from_utf8_lossy(&buf).to_string();
    let (head, body) = text.split_once("\r\n\r\n")?;
    let status = head.split_whitespace().nth(1)?.parse().ok()?;
    let body =
        if head.to_ascii_lowercase().contains("transfer-encoding: chunked") { dechunk(body) } else { body.into() };
    Some((status, body))
}

fn dechunk(mut body: &str) -> String {
    let mut out = String::new();
    while let Some((size, rest)) = body.split_once("\r\n") {
        let Ok(n) = usize::from_str_radix(size.trim(), 16) else { break };
        if n == 0 || rest.len() < n {
            break;
        }
        out.push_str(&rest[..n]);
        body = rest[n..].trim_start_matches("\r\n");
    }
    out
}

pub type Ws = tokio_tungstenite::WebSocketStream<tokio_tungstenite::MaybeTlsStream<tokio::net::TcpStream>>;

/// The next config on a watch.
pub async fn next_config(ws: &mut Ws) -> StunnerConfig {
    let deadline = Instant::now() + TIMEOUT;
    loop {
        let left = deadline.saturating_duration_since(Instant::now());
        let msg = tokio::time::timeout(left, ws.next()).await.expect("a config in time");
        match msg.expect("watch open").expect("watch healthy") {
            Message::Text(t) => return serde_json::from_str(&t).unwrap(),
            Message::Close(c) => panic!("watch closed: {c:?}"),
            _ => {}
        }
    }
}

/// Configs from a watch until `pred` holds for one; returns it.
pub async fn config_until(ws: &mut Ws, what: &str, pred: impl Fn(&StunnerConfig) -> bool) -> StunnerConfig {
    let mut seen = Vec::new();
    let deadline = Instant::now() + TIMEOUT;
    loop {
        let left = deadline.saturating_duration_since(Instant::now());
        let next = tokio::time::timeout(left, next_config(ws)).await;
        let Ok(c) = next else {
            panic!("no config with {what}; saw: {}", serde_json::to_string_pretty(&seen).unwrap())
        };
        if pred(&c) {
            return c;
        }
        seen.push(c);
    }
}

/// Every config a watch receives within `quiet` (a window with no frame ends it).
pub async fn drain(ws: &mut Ws, quiet: Duration) -> Vec<StunnerConfig> {
    let mut out = Vec::new();
    for _ in 0..1000 {
        match tokio::time::timeout(quiet, ws.next()).await {
            Ok(Some(Ok(Message::Text(t)))) => out.push(serde_json::from_str(&t).unwrap()),
            Ok(Some(Ok(_))) => {}
            _ => break,
        }
    }
    out
}

/// Whether a config is the zero config a dataplane takes as "deleted".
pub fn is_zero(c: &StunnerConfig) -> bool {
    c.normalized().map(|n| n.is_deleted()).unwrap_or(false)
}

/// The resourceVersion of an object, `None` when missing.
pub async fn resource_version(
    client: &Client,
    api_version: &str,
    kind: &str,
    namespace: Option<&str>,
    name: &str,
) -> Option<String> {
    get(client, api_version, kind, namespace, name).await.and_then(|o| o.metadata.resource_version)
}

/// The quickstart's objects the operator writes (statuses or whole objects).
pub const QUICKSTART_WRITTEN: [ObjectId; 5] = [
    ("gateway.networking.k8s.io/v1", "GatewayClass", None, "stunner-gatewayclass"),
    ("gateway.networking.k8s.io/v1", "Gateway", Some("stunner"), "udp-gateway"),
    ("stunner.l7mp.io/v1", "UDPRoute", Some("stunner"), "media-plane"),
    ("v1", "Service", Some("stunner"), "udp-gateway"),
    ("apps/v1", "Deployment", Some("stunner"), "udp-gateway"),
];

/// The quickstart manifests (deploy/examples/quickstart), the GatewayClass's controller name
/// and namespaced objects as they are there.
pub fn quickstart_yaml() -> String {
    let dir = repo_root().join("deploy/examples/quickstart");
    ["gatewayclass.yaml", "gateway.yaml", "route.yaml"]
        .iter()
        .map(|f| std::fs::read_to_string(dir.join(f)).unwrap())
        .collect::<Vec<_>>()
        .join("\n---\n")
}

/// Label selector helpers over a dynamic object's metadata.
pub fn label<'a>(obj: &'a DynamicObject, key: &str) -> Option<&'a str> {
    obj.metadata.labels.as_ref()?.get(key).map(String::as_str)
}

/// The owner reference of `obj` to a `kind` named `name`, if any.
pub fn owner<'a>(
    obj: &'a DynamicObject,
    kind: &str,
    name: &str,
) -> Option<&'a k8s_openapi::apimachinery::pkg::apis::meta::v1::OwnerReference> {
    obj.metadata.owner_references.as_ref()?.iter().find(|o| o.kind == kind && o.name == name)
}

/// Managers of `obj` per field manager name and subresource.
pub fn managers(obj: &DynamicObject) -> Vec<(String, String)> {
    obj.metadata
        .managed_fields
        .iter()
        .flatten()
        .map(|m| (m.manager.clone().unwrap_or_default(), m.subresource.clone().unwrap_or_default()))
        .collect()
}

/// The resourceVersion of an object as a number: this harness's API server stores in one
/// etcd, whose revisions order every write of the cluster, so tests can tell which of two
/// writes came first.
pub async fn revision(client: &Client, api_version: &str, kind: &str, namespace: Option<&str>, name: &str) -> u64 {
    let rv = resource_version(client, api_version, kind, namespace, name).await.expect("the object exists");
    rv.parse().expect("an etcd revision")
}

/// An object the tests track by resourceVersion: (apiVersion, kind, namespace, name).
pub type ObjectId = (&'static str, &'static str, Option<&'static str>, &'static str);

/// The resourceVersions of `objects` (a status write changes the object's too).
pub async fn versions(client: &Client, objects: &[ObjectId]) -> Vec<(String, Option<String>)> {
    let mut out = Vec::new();
    for (av, kind, ns, name) in objects {
        out.push((format!("{kind} {name}"), resource_version(client, av, kind, *ns, name).await));
    }
    out
}

/// Waits until the resourceVersions of `objects` stay the same over a few seconds, so
/// that a later comparison does not see writes of a start that was still going on.
pub async fn settle(client: &Client, objects: &[ObjectId]) -> Vec<(String, Option<String>)> {
    let mut last = versions(client, objects).await;
    for _ in 0..30 {
        tokio::time::sleep(Duration::from_secs(3)).await;
        let now = versions(client, objects).await;
        if now == last {
            return now;
        }
        last = now;
    }
    panic!("objects keep changing: {last:?}");
}

/// The sum of a Prometheus counter's samples whose line starts with `prefix` (metric name
/// and optionally the start of the labels), from a `/metrics` endpoint.
pub async fn metric_sum(metrics: SocketAddr, prefix: &str, label_filter: &str) -> f64 {
    let (status, body) = http_get(metrics, "/metrics").await.expect("metrics endpoint answers");
    assert_eq!(status, 200);
    body.lines()
        .filter(|l| l.starts_with(prefix) && l.contains(label_filter))
        .filter_map(|l| l.rsplit_once(' ')?.1.parse::<f64>().ok())
        .sum()
}

/// Write attempts (to the API server) an operator made so far.
pub async fn write_attempts(metrics: SocketAddr) -> f64 {
    metric_sum(metrics, "stunner_gateway_operator_resource_operations_total{", "operation=\"attempt\"").await
}

/// The holder of the leader election Lease.
pub async fn lease_holder(client: &Client) -> Option<String> {
    let lease = get(client, "coordination.k8s.io/v1", "Lease", Some(OPERATOR_NAMESPACE), "92062b70.l7mp.io").await?;
    lease.data["spec"]["holderIdentity"].as_str().map(String::from)
}

impl Operator {
    /// Fails if the API server refused the operator anything: the RBAC of deploy/ must cover
    /// everything it does.
    pub fn assert_no_rbac_denials(&self) {
        let denied: Vec<String> = {
            let log = self.log.lock().unwrap_or_else(|e| e.into_inner());
            log.iter().filter(|l| l.contains("forbidden") || l.contains("Forbidden")).cloned().collect()
        };
        assert!(denied.is_empty(), "operator {} was denied by RBAC:\n{denied:#?}", self.name);
    }
}
