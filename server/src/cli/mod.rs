//! Command line and environment of the daemon, compatible with the Go operator's
//! (operator-behavior.md §6): same flag names and defaults, the same environment variables.
//!
//! Deliberate differences, all documented in docs/compatibility.md:
//! - an invalid value is a start-up error naming the flag (upstream silently falls back);
//! - an explicit flag beats its environment variable (upstream lets
//!   STUNNER_GATEWAY_OPERATOR_DATAPLANE_MODE override an explicit `--dataplane-mode=managed`);
//! - Go's single-dash long flags (`-leader-elect`) are accepted and mean the same as `--`.
//!
//! The Go value forms are parsed in [`go_values`], the log filter is made in [`logging`].

mod go_values;
mod logging;

pub use go_values::{
    BindAddress, InvalidValue, normalize_go_flags, parse_bind_address, parse_go_bool, parse_go_duration,
    parse_optional_bind_address, parse_positive,
};
pub use logging::log_filter;

use crate::logs::LogSettings;
use crate::logs::flags::{Encoder, Level, StacktraceLevel, TimeEncoding};
use clap::builder::{PossibleValuesParser, TypedValueParser};
use clap::{ArgAction, Parser};
use std::net::SocketAddr;
use std::path::PathBuf;
use std::time::Duration;
use stunner_gateway::render::DataplaneMode;
use stunner_gateway_cds::authz;
use stunner_gateway_cds::host::LocalNames;

#[derive(Debug, Clone, Parser)]
#[command(name = "stunner-gateway-operator", version, about = "The STUNner Kubernetes gateway operator")]
pub struct Args {
    /// Run without a cluster: read Gateway API and STUNner manifests from this directory and
    /// follow changes to its files.
    #[arg(long, value_name = "DIR")]
    pub standalone: Option<PathBuf>,

    /// Standalone mode: the most bytes of manifests read, all files together; a directory past
    /// it is refused as a whole and the last good state stays in force.
    #[arg(long, default_value_t = crate::source::manifests::DEFAULT_MAX_BYTES, value_parser = clap::value_parser!(u64).range(1..))]
    pub standalone_max_bytes: u64,

    /// Standalone mode: the most objects the manifests may hold, all files together; past it
    /// the scan is refused as a whole and the last good state stays in force.
    #[arg(long, default_value_t = crate::source::manifests::DEFAULT_MAX_OBJECTS, value_parser = parse_positive)]
    pub standalone_max_objects: usize,

    /// The controller name GatewayClasses must name in spec.controllerName.
    #[arg(long, env = "STUNNER_GATEWAY_OPERATOR_CONTROLLER_NAME", default_value = "stunner.l7mp.io/gateway-operator")]
    pub controller_name: String,

    /// The longest a change waits for its render (Go duration, e.g. 250ms, 1s): an isolated
    /// change renders at once, a burst is coalesced in windows that grow up to this.
    #[arg(long, default_value = "250ms", value_parser = parse_go_duration)]
    pub throttle_timeout: Duration,

    /// Use endpoint IPs of backend Services (EndpointSlices) instead of DNS names.
    #[arg(long, default_value_t = true, action = ArgAction::Set, num_args = 0..=1, default_missing_value = "true", value_parser = parse_go_bool)]
    pub endpoint_discovery: bool,

    /// managed: one dataplane Deployment per Gateway, configs over CDS; legacy: one ConfigMap per GatewayClass.
    #[arg(long, env = "STUNNER_GATEWAY_OPERATOR_DATAPLANE_MODE", default_value = "managed", ignore_case = true, value_parser = dataplane_mode_parser())]
    pub dataplane_mode: DataplaneMode,

    /// Where the config discovery service listens.
    #[arg(long, default_value = ":13478", value_parser = parse_bind_address)]
    pub config_discovery_address: SocketAddr,

    /// Host the dataplanes are told to reach the CDS at (the port comes from
    /// --config-discovery-address). Beats STUNNER_GATEWAY_OPERATOR_ADDRESS and the Service default.
    #[arg(long = "config-discovery-advertised-host", value_name = "HOST")]
    pub advertised_host: Option<String>,

    /// The Service in front of the operators' CDS ports, in the operator's namespace. In a
    /// cluster, dataplanes are told `<service>.<namespace>.svc:13478` (the Service's port, not
    /// the pods'), an address that outlives every operator pod. Empty: advertise the bind
    /// address, as upstream does.
    #[arg(
        long,
        env = "STUNNER_GATEWAY_OPERATOR_CDS_SERVICE",
        default_value = "stunner-config-discovery",
        value_name = "NAME"
    )]
    pub config_discovery_service: String,

    /// Where Prometheus metrics are served (`0` disables).
    #[arg(long, default_value = ":8080", value_parser = parse_optional_bind_address)]
    pub metrics_bind_address: BindAddress,

    /// Where /healthz and /readyz are served (`0` disables).
    #[arg(long, default_value = ":8081", value_parser = parse_optional_bind_address)]
    pub health_probe_bind_address: BindAddress,

    /// Where CPU profiles are served (`0` disables). Exposes internals: keep it on loopback.
    #[arg(long, env = "STUNNER_GATEWAY_OPERATOR_PPROF_BIND_ADDRESS", default_value = "0", value_parser = parse_optional_bind_address)]
    pub pprof_bind_address: BindAddress,

    /// Where the TURN credential API (stunner-auth-service's `GET /` and `GET /ice`) is served
    /// (`0` disables, the default). Keep it inside the cluster: docs/deploy.md.
    #[arg(long, default_value = "0", value_parser = parse_optional_bind_address)]
    pub auth_bind_address: BindAddress,

    /// The credential API's public address for TURN URIs, as upstream's service takes it from
    /// its environment; a request's `public-addr` beats it.
    #[arg(long, env = "STUNNER_PUBLIC_ADDR", hide = true)]
    pub auth_public_addr: Option<String>,

    /// Watch Endpoints instead of EndpointSlices (upstream's spelling).
    #[arg(long = "disable-endpontslice-controller", alias = "disable-endpointslice-controller", default_value_t = false, action = ArgAction::Set, num_args = 0..=1, default_missing_value = "true", value_parser = parse_go_bool)]
    pub disable_endpointslice_controller: bool,

    /// Elect a leader among replicas; only the leader writes to the API server.
    #[arg(long, default_value_t = false, action = ArgAction::Set, num_args = 0..=1, default_missing_value = "true", value_parser = parse_go_bool)]
    pub leader_elect: bool,

    /// On shutdown, invalidate Gateways and remove the dataplanes.
    #[arg(long, default_value_t = false, action = ArgAction::Set, num_args = 0..=1, default_missing_value = "true", value_parser = parse_go_bool)]
    pub enable_finalizer: bool,

    /// Resolve a route backend in another namespace only if a ReferenceGrant there allows it
    /// (Gateway API semantics; the refused route gets ResolvedRefs=False, RefNotPermitted). Off
    /// by default: any namespace is allowed, as upstream. A listener's certificate Secret in
    /// another namespace always needs a ReferenceGrant, with or without this flag.
    #[arg(long, default_value_t = false, action = ArgAction::Set, num_args = 0..=1, default_missing_value = "true", value_parser = parse_go_bool)]
    pub enforce_reference_grants: bool,

    /// Apply STUNner's CRDs at start (server-side apply), unless the cluster has newer ones,
    /// and wait until they are Established before watching: `helm upgrade` never upgrades a
    /// chart's `crds/`. Needs RBAC for CustomResourceDefinitions (docs/deploy.md).
    #[arg(long, default_value_t = false, action = ArgAction::Set, num_args = 0..=1, default_missing_value = "true", value_parser = parse_go_bool)]
    pub install_crds: bool,

    /// With --install-crds: the directory of CRD manifests to apply (the chart mounts its
    /// `crds/` there); without it, the CRDs built into the operator.
    #[arg(long, value_name = "DIR")]
    pub crd_dir: Option<PathBuf>,

    /// Most CDS connections open at once.
    #[arg(long, default_value_t = 16384)]
    pub cds_max_connections: usize,

    /// Most gRPC watches open at once on the server; past it a watch ends with RESOURCE_EXHAUSTED.
    #[arg(long, default_value_t = 16384, value_parser = parse_positive)]
    pub cds_max_grpc_watches: usize,

    /// Most gRPC watches open at once on one connection; past it a watch ends with
    /// RESOURCE_EXHAUSTED.
    #[arg(long, default_value_t = 16, value_parser = parse_positive)]
    pub cds_max_grpc_watches_per_connection: usize,

    /// Who may read which configs: `none` (anyone who reaches the port, as upstream) or `pod`
    /// (a config only to its Gateway's running dataplane pods, lists only to loopback and the
    /// operator's pods; cluster mode only). docs/deploy.md, "CDS authorization".
    #[arg(long, value_enum, default_value_t = CdsAuthorization::None)]
    pub cds_authorization: CdsAuthorization,

    /// With `--cds-authorization=pod`: a client that sends `Authorization: Bearer <token>` (a
    /// Kubernetes token) is let in when a TokenReview accepts the token and a
    /// SubjectAccessReview lets its user `readconfig` the requested Gateways.
    #[arg(long, default_value_t = false, action = ArgAction::Set, num_args = 0..=1, default_missing_value = "true", value_parser = parse_go_bool)]
    pub cds_token_review: bool,

    /// A CDS client that does not take a config within this time is disconnected.
    #[arg(long, default_value = "10s", value_parser = parse_go_duration)]
    pub cds_write_timeout: Duration,

    /// Host names a request arriving over loopback may name in its `Host` besides `localhost`,
    /// loopback addresses, the advertised CDS host and the CDS Service's names (comma-separated;
    /// e.g. the Service's name under another cluster domain). Anything else is answered 421:
    /// the DNS rebinding guard, docs/security.md.
    #[arg(long, env = "STUNNER_GATEWAY_OPERATOR_LOOPBACK_ALLOWED_HOSTS", value_delimiter = ',', value_name = "HOST")]
    pub loopback_allowed_hosts: Vec<String>,

    /// The log filter (tracing's `EnvFilter` syntax); beats --zap-log-level when set and valid.
    /// Upstream has no flag for it: the environment variable only.
    #[arg(long, env = "RUST_LOG", hide = true)]
    pub rust_log: Option<String>,

    /// The operator's own namespace (the downward API's `POD_NAMESPACE`): where its Lease and
    /// its CDS Service live.
    #[arg(long, env = "POD_NAMESPACE", hide = true, default_value = "stunner-system")]
    pub pod_namespace: String,

    /// The operator pod's IPs (`POD_IPS`, comma-separated): tools run in its pods may list configs.
    #[arg(long, env = "POD_IPS", hide = true)]
    pub pod_ips: Option<String>,

    /// This replica's name in the leader election (`POD_NAME`, else `HOSTNAME`).
    #[arg(long, env = "POD_NAME", hide = true)]
    pub pod_name: Option<String>,
    #[arg(long, env = "HOSTNAME", hide = true)]
    pub hostname: Option<String>,

    /// Upstream's CDS address variable (the operator pod's IP); see
    /// [`Args::advertised_cds_address`].
    #[arg(long, env = "STUNNER_GATEWAY_OPERATOR_ADDRESS", hide = true)]
    pub operator_address: Option<String>,

    /// Gateway label keys not copied to dataplane Deployments; see [`Args::label_filter`].
    #[arg(long, env = "STUNNER_GATEWAY_OPERATOR_LABEL_FILTER", hide = true)]
    pub label_filter: Option<String>,

    /// Log level: debug, info, error, panic, or an integer above 0 (1 is debug, more is
    /// trace). Default: info (debug with --zap-devel). RUST_LOG, when set, beats it.
    #[arg(long, value_name = "LEVEL")]
    pub zap_log_level: Option<Level>,

    /// zap's development defaults: console lines and the debug level (each flag still beats it);
    /// `--zap-devel=false` makes JSON lines the default.
    #[arg(long, action = ArgAction::Set, num_args = 0..=1, default_missing_value = "true", value_parser = parse_go_bool)]
    pub zap_devel: Option<bool>,

    /// Log line layout: json (zap's keys, one object per line) or console.
    #[arg(long, value_name = "ENCODER")]
    pub zap_encoder: Option<Encoder>,

    /// Events at or above this level carry a stack trace: info, error, or panic (none, the default).
    #[arg(long, value_name = "LEVEL", default_value = "panic")]
    pub zap_stacktrace_level: StacktraceLevel,

    /// How log times are written: epoch, millis, nano, iso8601, rfc3339, rfc3339nano.
    #[arg(long, value_name = "ENCODING", default_value = "rfc3339nano")]
    pub zap_time_encoding: TimeEncoding,
}

/// `managed` or `legacy` (any case) as the renderer's [`DataplaneMode`]: one type for the mode
/// from the flag to the render.
fn dataplane_mode_parser() -> impl TypedValueParser<Value = DataplaneMode> {
    PossibleValuesParser::new(["managed", "legacy"]).map(|mode| match mode.to_ascii_lowercase().as_str() {
        "legacy" => DataplaneMode::Legacy,
        _ => DataplaneMode::Managed,
    })
}

/// The port of the CDS Service in the Helm chart and the plain manifests (upstream's CDS port).
pub const CDS_SERVICE_PORT: u16 = 13478;

/// The cluster domain the CDS Service's full name is taken under; another is added with
/// `--loopback-allowed-hosts`.
pub const CLUSTER_DOMAIN: &str = "cluster.local";

impl Args {
    /// Parses the process arguments, accepting Go's single-dash long flags.
    pub fn from_env() -> Self {
        Self::parse_from(normalize_go_flags(std::env::args()))
    }

    /// The CDS `host:port` told to dataplanes; the renderer turns it into `STUNNER_CONFIG_ORIGIN`.
    /// The host, first that applies: --config-discovery-advertised-host;
    /// STUNNER_GATEWAY_OPERATOR_ADDRESS (`operator_address`) when set, even empty (upstream's meaning: the
    /// operator pod's IP, which rolls every dataplane when the pod changes); in a cluster
    /// (`namespace` given) the CDS Service, at its port; the host of the bind address.
    /// Except for the Service, the port is the bind address's.
    pub fn advertised_cds_address(&self, namespace: Option<&str>) -> String {
        let port = self.config_discovery_address.port();
        let service = namespace.filter(|_| !self.config_discovery_service.is_empty());
        let host = match (self.advertised_host.as_deref(), self.operator_address.as_deref(), service) {
            (Some(h), _, _) | (None, Some(h), _) => h.trim_start_matches('[').trim_end_matches(']').to_string(),
            (None, None, Some(ns)) => {
                return format!("{}.{ns}.svc:{CDS_SERVICE_PORT}", self.config_discovery_service);
            }
            (None, None, None) if self.config_discovery_address.ip().is_unspecified() => String::new(),
            (None, None, None) => self.config_discovery_address.ip().to_string(),
        };
        if host.contains(':') { format!("[{host}]:{port}") } else { format!("{host}:{port}") }
    }

    /// The names besides `localhost` and loopback addresses that a request over loopback may
    /// carry in `Host` on every port (the DNS rebinding guard, docs/security.md): the CDS
    /// Service's names in the operator's namespace (short forms and under `cluster.local`), the
    /// advertised CDS host, and `--loopback-allowed-hosts`.
    pub fn local_names(&self) -> LocalNames {
        let service = (!self.config_discovery_service.is_empty())
            .then(|| LocalNames::service(&self.config_discovery_service, &self.pod_namespace, CLUSTER_DOMAIN));
        let advertised = self.advertised_host.iter().chain(&self.operator_address);
        let advertised = advertised.map(|h| h.trim_start_matches('[').trim_end_matches(']').to_string());
        LocalNames::new(
            service.into_iter().flatten().chain(advertised).chain(self.loopback_allowed_hosts.iter().cloned()),
        )
    }

    /// How to log, from the `--zap-*` flags and `RUST_LOG`; `--zap-devel` only moves the
    /// defaults of the encoder and the level.
    pub fn log_settings(&self) -> LogSettings {
        let encoder = self.zap_encoder.unwrap_or(match self.zap_devel {
            Some(false) => Encoder::Json,
            _ => Encoder::Console,
        });
        let level = self.zap_log_level.unwrap_or(match self.zap_devel {
            Some(true) => Level::Debug,
            _ => Level::Info,
        });
        LogSettings {
            encoder,
            filter: log_filter(level, self.rust_log.as_deref()),
            stacktrace: self.zap_stacktrace_level,
            time: self.zap_time_encoding,
        }
    }

    /// Gateway label keys not copied to dataplane Deployments: STUNNER_GATEWAY_OPERATOR_LABEL_FILTER
    /// (a comma-separated list) replaces the default list; set but empty, nothing is filtered.
    pub fn label_filter(&self) -> Vec<String> {
        match &self.label_filter {
            None => stunner_gateway::render::DEFAULT_LABEL_FILTER.iter().map(|s| s.to_string()).collect(),
            Some(list) => list.split(',').map(str::trim).filter(|s| !s.is_empty()).map(String::from).collect(),
        }
    }
}

/// The values of `--cds-authorization`, one per [`authz::Mode`]: the CDS crate knows no flags.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, clap::ValueEnum)]
pub enum CdsAuthorization {
    /// Anyone who reaches the port reads every config (upstream's behaviour).
    #[default]
    None,
    /// A config only to its Gateway's dataplane pods; lists only to loopback and the operator.
    Pod,
}

impl From<CdsAuthorization> for authz::Mode {
    fn from(flag: CdsAuthorization) -> Self {
        match flag {
            CdsAuthorization::None => authz::Mode::None,
            CdsAuthorization::Pod => authz::Mode::Pod,
        }
    }
}

#[cfg(test)]
mod tests;
