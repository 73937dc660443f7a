//! `stunner-gateway-operator`: the daemon. Wires the sources, the render loop and the
//! outputs together (design.md §2); each piece lives in its own module of the library.

#![forbid(unsafe_code)] // none needed (see [workspace.lints] in Cargo.toml)

use anyhow::{Context, bail};
use prometheus_client::registry::Registry;
use std::process::ExitCode;
use std::sync::Arc;
use std::time::Duration;
use stunner_gateway::index::Input;
use stunner_gateway::render::RenderSettings;
use stunner_gateway_cds::authz::{self, Authorizer, DataplaneIndex};
use stunner_gateway_cds::{self as cds, CdsMetrics, ConfigStore, Opening, ServerSettings};
use stunner_gateway_k8s::metrics::WriterMetrics;
use stunner_gateway_k8s::nodes::NodeFeed;
use stunner_gateway_k8s::{self as cluster, crds, lease, review::KubeTokenReviewer, writer::Writer};
use stunner_gateway_operator::admin::{self, Readiness};
use stunner_gateway_operator::auth::{self, AuthApi, AuthMetrics};
use stunner_gateway_operator::cli::Args;
use stunner_gateway_operator::console::Console;
use stunner_gateway_operator::console::charts::Charts;
use stunner_gateway_operator::console::scrape::Scraper;
use stunner_gateway_operator::metrics::OperatorMetrics;
use stunner_gateway_operator::pipeline::{self, Outputs};
use stunner_gateway_operator::pprof;
use stunner_gateway_operator::reconcile::Reconciler;
use stunner_gateway_operator::source::{files::FileSource, manifests::Budget, run};
use stunner_gateway_operator::status::StatusBoard;
use tokio::sync::mpsc;
use tokio::task::{JoinHandle, JoinSet};
use tokio_util::sync::CancellationToken;

fn main() -> ExitCode {
    let runtime = tokio::runtime::Builder::new_multi_thread().enable_all().build().expect("the tokio runtime starts");
    runtime.block_on(operator())
}

async fn operator() -> ExitCode {
    let args = Args::from_env();
    stunner_gateway_operator::logs::init(args.log_settings());
    match run(args).await {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            // The whole chain, `context: cause: cause`.
            tracing::error!("{e:#}");
            ExitCode::FAILURE
        }
    }
}

async fn run(args: Args) -> anyhow::Result<()> {
    let operator_metrics = OperatorMetrics::default();
    let writer_metrics = WriterMetrics::default();
    if args.crd_dir.is_some() && !args.install_crds {
        bail!("--crd-dir needs --install-crds");
    }
    if args.standalone.is_some() && args.install_crds {
        bail!("--install-crds needs a cluster; it cannot be used with --standalone");
    }
    // The source first: an unreadable directory or an unreachable API server is a start-up error.
    let mode = match &args.standalone {
        Some(dir) => Mode::Standalone(
            FileSource::new(dir)
                .with_context(|| format!("cannot read --standalone directory {}", dir.display()))?
                .with_budget(Budget { max_bytes: args.standalone_max_bytes, max_objects: args.standalone_max_objects }),
        ),
        None => {
            let client = cluster::connect().await?;
            install_crds(&args, &client).await?;
            Mode::Cluster(client, Writer::new(writer_metrics.clone()))
        }
    };

    // The operator's own namespace: where its Lease and its CDS Service live.
    let namespace = args.pod_namespace.clone();
    // Shutdown goes in stages (see `stop`): sources and the CDS, then the writer, then the
    // admin endpoints, each with its own token.
    let shutdown = CancellationToken::new();
    let stop_writing = CancellationToken::new();
    let stop_admin = CancellationToken::new();
    let readiness = Readiness::default();
    let cds_metrics = CdsMetrics::default();
    let auth_metrics = AuthMetrics::default();
    let registry = Arc::new(registry(&cds_metrics, &operator_metrics, &writer_metrics, &auth_metrics));
    let charts = Charts::of(&operator_metrics, &writer_metrics, &cds_metrics);
    let store = Arc::new(ConfigStore::new(cds_metrics));
    let statuses = Arc::new(StatusBoard::default());

    let dataplane_pods = Arc::new(DataplaneIndex::default());
    let cds_settings = cds_settings(&args, authorizer(&args, &mode, dataplane_pods.clone())?);
    // The admin ports take the CDS's header read timeout
    // and its DNS rebinding guard.
    let serving = admin::Serving {
        name: "admin",
        header_read_timeout: cds_settings.header_read_timeout,
        local_names: cds_settings.local_names.clone(),
    };
    // Bind everything first: a busy port is a start-up error, not a late surprise.
    let cds_listener = bind(args.config_discovery_address, "--config-discovery-address")?;
    let mut tasks = JoinSet::new();
    serve_admin(&args, registry, &readiness, &serving, &stop_admin, &mut tasks)?;
    serve_auth(&args, store.clone(), auth_metrics, &serving, &stop_admin, &mut tasks)?;

    let settings = render_settings(&args, &mode, &namespace);
    // The console reads the dataplane pods' metrics endpoints only where they are pods.
    let dataplane_metrics = matches!(mode, Mode::Cluster(..)).then(Scraper::default);
    let (tx, rx) = mpsc::channel(64);
    let outputs = Outputs {
        store: store.clone(),
        statuses: statuses.clone(),
        metrics: operator_metrics,
        readiness: readiness.clone(),
        mode: mode.outputs(),
        nodes: NodeFeed::new(store.nodes().clone()),
    };
    let reconciler = tokio::spawn(Reconciler::new(settings, args.throttle_timeout, outputs).run(rx));
    let source =
        Source { tx, readiness: readiness.clone(), shutdown: shutdown.clone(), stop_writing: stop_writing.clone() };
    let follow = source.start(mode, &args, namespace, dataplane_pods).await?;

    let stages = Stages { readiness, shutdown, stop_writing, stop_admin, finalize: args.enable_finalizer };
    let console = Console { statuses, charts, dataplane_metrics };
    let cds = Cds { listener: cds_listener, store, settings: cds_settings, console };
    stages.serve(cds, reconciler, follow, tasks).await
}

/// STUNner's CRDs applied and Established before any watcher starts (`--install-crds`), from
/// `--crd-dir` or the ones built in.
async fn install_crds(args: &Args, client: &cluster::Client) -> anyhow::Result<()> {
    if !args.install_crds {
        return Ok(());
    }
    let crds = match &args.crd_dir {
        Some(dir) => crds::files::read_dir(dir).context("cannot read --crd-dir")?,
        None => stunner_gateway::resources::crds(),
    };
    crds::install(client, &crds, crds::ESTABLISH_TIMEOUT)
        .await
        .context("cannot install the STUNner CRDs (--install-crds)")
}

/// The admin endpoints that are asked for (metrics, pprof, health probes), bound now and
/// served until `stop`: a busy port is a start-up error.
fn serve_admin(
    args: &Args,
    registry: Arc<Registry>,
    readiness: &Readiness,
    serving: &admin::Serving,
    stop: &CancellationToken,
    tasks: &mut JoinSet<()>,
) -> anyhow::Result<()> {
    let named = |name| admin::Serving { name, ..serving.clone() };
    if let Some(addr) = args.metrics_bind_address.0 {
        let l = bind(addr, "--metrics-bind-address")?;
        let router = admin::metrics_router(registry.clone());
        tasks.spawn(admin::serve_router(l, router, named("metrics"), stop.clone()));
    }
    if let Some(addr) = args.pprof_bind_address.0 {
        pprof::check_exposure(addr);
        let l = bind(addr, "--pprof-bind-address")?;
        tasks.spawn(admin::serve_router(l, pprof::router(), named("pprof"), stop.clone()));
    }
    if let Some(addr) = args.health_probe_bind_address.0 {
        let l = bind(addr, "--health-probe-bind-address")?;
        let router = admin::health_router(readiness.clone());
        tasks.spawn(admin::serve_router(l, router, named("health probe"), stop.clone()));
    }
    Ok(())
}

/// The TURN credential API (`--auth-bind-address`), answered from the CDS store, bound now and
/// served until `stop`.
fn serve_auth(
    args: &Args,
    store: Arc<ConfigStore>,
    metrics: AuthMetrics,
    serving: &admin::Serving,
    stop: &CancellationToken,
    tasks: &mut JoinSet<()>,
) -> anyhow::Result<()> {
    let Some(addr) = args.auth_bind_address.0 else { return Ok(()) };
    let l = bind(addr, "--auth-bind-address")?;
    if let Ok(address) = l.local_addr() {
        tracing::info!(%address, "serving the TURN credential API");
    }
    let api = AuthApi { store, metrics, public_addr: args.auth_public_addr.clone() };
    let router = auth::router(Arc::new(api));
    let serving = admin::Serving { name: "credential API", ..serving.clone() };
    tasks.spawn(admin::serve_router_with_limit(l, router, serving, auth::MAX_CONNECTIONS, stop.clone()));
    Ok(())
}

/// What the renderer is told in `mode`; `namespace`: the operator's own (its CDS Service's in
/// a cluster).
fn render_settings(args: &Args, mode: &Mode, namespace: &str) -> RenderSettings {
    let standalone = matches!(mode, Mode::Standalone(_));
    RenderSettings {
        controller_name: args.controller_name.clone(),
        dataplane_mode: args.dataplane_mode,
        endpoint_discovery: args.endpoint_discovery,
        endpoint_slices: !args.disable_endpointslice_controller,
        cds_address: args.advertised_cds_address((!standalone).then_some(namespace)),
        label_filter: args.label_filter(),
        finalizing: false,
        enforce_reference_grants: args.enforce_reference_grants,
        // Standalone mode runs no dataplane: only a Deployment the manifests hold takes ours
        // (`pipeline::owned`).
        held_deployments_only: standalone,
    }
}

/// What a source needs to feed the render loop until shutdown.
struct Source {
    tx: mpsc::Sender<Input>,
    readiness: Readiness,
    shutdown: CancellationToken,
    stop_writing: CancellationToken,
}

impl Source {
    /// Starts following the manifest directory, or the API server's watchers (and the writer);
    /// the task ends with the source, with its error if it failed.
    async fn start(
        self,
        mode: Mode,
        args: &Args,
        namespace: String,
        dataplane_pods: Arc<DataplaneIndex>,
    ) -> anyhow::Result<JoinHandle<anyhow::Result<()>>> {
        Ok(match mode {
            Mode::Standalone(source) => {
                tracing::info!(dir = %source.dir().display(), "standalone mode: reading manifests");
                let follow = run::follow(source, self.tx, self.readiness, self.shutdown);
                tokio::spawn(async move { Ok(follow.await?) })
            }
            Mode::Cluster(client, writer) => {
                let settings = cluster::Settings {
                    endpoints: args.disable_endpointslice_controller,
                    leader_elect: args.leader_elect,
                    namespace,
                    identity: lease::identity(args.pod_name.as_deref(), args.hostname.as_deref()),
                    dataplane_pods: (authz::Mode::from(args.cds_authorization) == authz::Mode::Pod)
                        .then_some(dataplane_pods),
                };
                let mut watchers =
                    cluster::start(client, settings, self.tx, writer, self.shutdown, self.stop_writing).await?;
                tokio::spawn(async move {
                    while watchers.join_next().await.is_some() {}
                    anyhow::Ok(())
                })
            }
        })
    }
}

/// Every metric the daemon exports, in one registry.
fn registry(cds: &CdsMetrics, operator: &OperatorMetrics, writer: &WriterMetrics, auth: &AuthMetrics) -> Registry {
    let mut registry = Registry::default();
    cds.register(&mut registry);
    operator.register(&mut registry);
    writer.register(&mut registry);
    auth.register(&mut registry);
    registry
}

/// The CDS listener's settings from the flags.
fn cds_settings(args: &Args, authorizer: Authorizer) -> ServerSettings {
    ServerSettings {
        authorizer: Arc::new(authorizer),
        max_connections: args.cds_max_connections,
        session: cds::session::Settings { write_timeout: args.cds_write_timeout, ..Default::default() },
        grpc: cds_grpc_settings(args),
        local_names: args.local_names(),
        ..Default::default()
    }
}

/// Who may read which configs (`--cds-authorization`, `--cds-token-review`).
fn authorizer(args: &Args, mode: &Mode, dataplane_pods: Arc<DataplaneIndex>) -> anyhow::Result<Authorizer> {
    match (authz::Mode::from(args.cds_authorization), mode) {
        (authz::Mode::Pod, Mode::Standalone(_)) => bail!(
            "--cds-authorization=pod needs a cluster (it knows clients by their pods' IPs); it cannot be used with \
             --standalone"
        ),
        (authz::Mode::None, _) if args.cds_token_review => {
            bail!("--cds-token-review needs --cds-authorization=pod (with none, anyone is let in anyway)")
        }
        (authz_mode, _) => {
            let own = authz::operator_ips(args.pod_ips.as_deref());
            let authorizer = Authorizer::new(authz_mode, dataplane_pods, own);
            Ok(match mode {
                Mode::Cluster(client, _) if args.cds_token_review => {
                    authorizer.with_token_review(Arc::new(KubeTokenReviewer::new(client.clone())))
                }
                _ => authorizer,
            })
        }
    }
}

fn cds_grpc_settings(args: &Args) -> stunner_gateway_cds::grpc::Settings {
    stunner_gateway_cds::grpc::Settings {
        max_watches: args.cds_max_grpc_watches,
        max_watches_per_connection: args.cds_max_grpc_watches_per_connection,
        ..Default::default()
    }
}

/// How long each shutdown stage may take before the next one starts anyway.
const STAGE_GRACE: Duration = Duration::from_secs(15);

/// The tokens of the shutdown stages, in the order `stop` cancels them.
struct Stages {
    readiness: Readiness,
    /// Sources, the render loop and the CDS.
    shutdown: CancellationToken,
    /// The writer; the lease is released after its last write.
    stop_writing: CancellationToken,
    /// Metrics, health and pprof: up until the end, so probes see the stop.
    stop_admin: CancellationToken,
    finalize: bool,
}

/// The CDS, bound: it accepts clients at once and answers them once the first render is complete.
struct Cds {
    listener: tokio::net::TcpListener,
    store: Arc<ConfigStore>,
    settings: ServerSettings,
    /// The console, which also serves the statuses.
    console: Console,
}

impl Stages {
    /// Serves the CDS from the first complete render on, until a signal or the source's end,
    /// then stops in stages; the source's error, if it failed, is the daemon's.
    async fn serve(
        self,
        cds: Cds,
        reconciler: JoinHandle<Reconciler>,
        mut follow: JoinHandle<anyhow::Result<()>>,
        mut tasks: JoinSet<()>,
    ) -> anyhow::Result<()> {
        let address = cds.listener.local_addr().context("the config discovery listener has no address")?;
        // Clients are accepted from now on, and answered from the first complete render on:
        // nothing is served from an empty store (cds::opening).
        let readiness = self.readiness.clone();
        let settings = ServerSettings { opening: Opening::when(async move { readiness.wait().await }), ..cds.settings };
        let extra = (cds.console.statuses.clone().router(), cds.console);
        tasks.spawn(cds::serve(cds.listener, cds.store, settings, extra, self.shutdown.clone()));
        tokio::select! {
            _ = self.readiness.wait() => {}
            _ = wait_for_signal() => {
                self.stop(reconciler, follow, tasks).await;
                return Ok(());
            }
        }
        tracing::info!(%address, "serving config discovery");
        let failure = tokio::select! {
            _ = wait_for_signal() => None,
            result = &mut follow => match result {
                Ok(Err(e)) => Some(e),
                _ => None,
            },
        };
        self.stop(reconciler, follow, tasks).await;
        failure.map_or(Ok(()), Err)
    }
}

impl Stages {
    /// Stops in the order that no client and no write notices: `/readyz` fails first (the
    /// Service stops sending new clients here); the CDS closes every stream with a Close frame
    /// (clients reconnect at once, to another replica) and the sources stop; the render loop
    /// ends, queueing the finalizer's writes if asked; the writer writes what is queued, then
    /// the lease is given up; the admin endpoints go last.
    async fn stop(
        self,
        reconciler: JoinHandle<Reconciler>,
        follow: JoinHandle<anyhow::Result<()>>,
        mut tasks: JoinSet<()>,
    ) {
        self.readiness.set_stopping();
        self.shutdown.cancel();
        match tokio::time::timeout(STAGE_GRACE, reconciler).await {
            Ok(Ok(reconciler)) if self.finalize => reconciler.finalize(),
            Ok(_) => {}
            Err(_) => tracing::warn!("the render loop did not stop in time"),
        }
        self.stop_writing.cancel();
        if tokio::time::timeout(STAGE_GRACE, follow).await.is_err() {
            tracing::warn!("the writer did not finish in time; the lease will expire instead");
        }
        self.stop_admin.cancel();
        let _ = tokio::time::timeout(STAGE_GRACE, async { while tasks.join_next().await.is_some() {} }).await;
    }
}

/// Where the operator's view of the world comes from.
enum Mode {
    Standalone(FileSource),
    /// The API server, and the writer the render loop queues for it.
    Cluster(cluster::Client, Writer),
}

impl Mode {
    /// Where the render loop puts owned objects and statuses, and when it publishes configs:
    /// in a cluster, the writer's queue (the watchers see the written objects come back), a
    /// config once its Service is in place; standalone, the index, a config as it is rendered.
    fn outputs(&self) -> Box<dyn pipeline::mode::Mode> {
        match self {
            Mode::Cluster(_, writer) => Box::new(pipeline::cluster::Cluster::new(writer.clone())),
            Mode::Standalone(_) => Box::new(pipeline::standalone::Standalone::default()),
        }
    }
}

fn bind(addr: std::net::SocketAddr, flag: &str) -> anyhow::Result<tokio::net::TcpListener> {
    admin::bind(addr).with_context(|| format!("cannot listen on {flag} {addr}"))
}

async fn wait_for_signal() {
    let mut term = tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()).expect("SIGTERM handler");
    tokio::select! {
        _ = tokio::signal::ctrl_c() => {}
        _ = term.recv() => {}
    }
    tracing::info!("shutting down");
}
