//! Command line and environment of the daemon, compatible with the Go operator's
//! (operator-behavior.md §6): same flag names and defaults, the same environment variables.
//!
//! Deliberate differences, all documented in docs/compatibility.md:
//! - an invalid value is a start-up error naming the flag (upstream silently falls back);
//! - an explicit flag beats its environment variable (upstream lets
//!   STUNNER_GATEWAY_OPERATOR_DATAPLANE_MODE override an explicit `--dataplane-mode=managed`);
//! - Go's single-dash long flags (`-leader-elect`) are accepted and mean the same as `--`.

use clap::builder::{PossibleValuesParser, TypedValueParser};
use clap::{ArgAction, Parser};
use std::net::{IpAddr, Ipv6Addr, SocketAddr};
use std::path::PathBuf;
use std::time::Duration;
use stunner_gateway::render::DataplaneMode;

#[derive(Debug, Clone, Parser)]
#[command(name = "stunner-gateway-operator", version, about = "The STUNner Kubernetes gateway operator")]
pub struct Args {
    /// Run without a cluster: read Gateway API and STUNner manifests from this directory and
    /// follow changes to its files.
    #[arg(long, value_name = "DIR")]
    pub standalone: Option<PathBuf>,

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
    /// by default: any namespace is allowed, as upstream.
    #[arg(long, default_value_t = false, action = ArgAction::Set, num_args = 0..=1, default_missing_value = "true", value_parser = parse_go_bool)]
    pub enforce_reference_grants: bool,

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
    #[arg(long, value_enum, default_value_t = crate::cds::authz::Mode::None)]
    pub cds_authorization: crate::cds::authz::Mode,

    /// With `--cds-authorization=pod`: a client that sends `Authorization: Bearer <token>` (a
    /// Kubernetes token) is let in when a TokenReview accepts the token and a
    /// SubjectAccessReview lets its user `readconfig` the requested Gateways.
    #[arg(long, default_value_t = false, action = ArgAction::Set, num_args = 0..=1, default_missing_value = "true", value_parser = parse_go_bool)]
    pub cds_token_review: bool,

    /// A CDS client that does not take a config within this time is disconnected.
    #[arg(long, default_value = "10s", value_parser = parse_go_duration)]
    pub cds_write_timeout: Duration,

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

    /// Log level (zap's flag, kept for compatibility): debug, info, error, or a number.
    #[arg(long, default_value = "info")]
    pub zap_log_level: String,

    /// Accepted for compatibility with the Go operator's logger flags.
    #[arg(long, hide = true, action = ArgAction::Set, num_args = 0..=1, default_missing_value = "true")]
    pub zap_devel: Option<String>,
    #[arg(long, hide = true)]
    pub zap_encoder: Option<String>,
    #[arg(long, hide = true)]
    pub zap_stacktrace_level: Option<String>,
    #[arg(long, hide = true)]
    pub zap_time_encoding: Option<String>,
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

    /// Gateway label keys not copied to dataplane Deployments: STUNNER_GATEWAY_OPERATOR_LABEL_FILTER
    /// (a comma-separated list) replaces the default list; set but empty, nothing is filtered.
    pub fn label_filter(&self) -> Vec<String> {
        match &self.label_filter {
            None => stunner_gateway::render::DEFAULT_LABEL_FILTER.iter().map(|s| s.to_string()).collect(),
            Some(list) => list.split(',').map(str::trim).filter(|s| !s.is_empty()).map(String::from).collect(),
        }
    }
}

/// Rewrites `-long-flag` to `--long-flag`, as Go's flag package accepts both.
pub fn normalize_go_flags(args: impl IntoIterator<Item = String>) -> Vec<String> {
    let mut out = Vec::new();
    let mut after_separator = false;
    for (i, a) in args.into_iter().enumerate() {
        after_separator |= a == "--";
        let single_dash_long = a.starts_with('-') && !a.starts_with("--") && a.len() > 2;
        if i > 0 && !after_separator && single_dash_long {
            out.push(format!("-{a}"));
        } else {
            out.push(a);
        }
    }
    out
}

/// A flag value that does not parse; clap shows it after `invalid value '...' for '--flag'`.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum InvalidValue {
    #[error("invalid duration {0:?} (examples: 250ms, 1s, 1m30s)")]
    Duration(String),
    #[error("invalid count {0:?} (a whole number, at least 1)")]
    Count(String),
    #[error("invalid boolean {0:?}")]
    Bool(String),
    #[error("invalid address {0:?} (want host:port or :port)")]
    Address(String),
}

/// Go's `time.ParseDuration` for the units that make sense here.
pub fn parse_go_duration(s: &str) -> Result<Duration, InvalidValue> {
    let bad = || InvalidValue::Duration(s.into());
    if s == "0" {
        return Ok(Duration::ZERO);
    }
    let mut total = 0f64;
    let mut rest = s;
    if rest.is_empty() {
        return Err(bad());
    }
    while !rest.is_empty() {
        let num_end = rest.find(|c: char| !(c.is_ascii_digit() || c == '.')).ok_or_else(bad)?;
        let value: f64 = rest[..num_end].parse().map_err(|_| bad())?;
        rest = &rest[num_end..];
        let unit_end = rest.find(|c: char| c.is_ascii_digit() || c == '.').unwrap_or(rest.len());
        let scale = match &rest[..unit_end] {
            "ns" => 1e-9,
            "us" | "µs" => 1e-6,
            "ms" => 1e-3,
            "s" => 1.0,
            "m" => 60.0,
            "h" => 3600.0,
            _ => return Err(bad()),
        };
        total += value * scale;
        rest = &rest[unit_end..];
    }
    Ok(Duration::from_secs_f64(total))
}

/// A count that must be at least 1 (a limit of 0 would refuse everything).
pub fn parse_positive(s: &str) -> Result<usize, InvalidValue> {
    match s.parse::<usize>() {
        Ok(n) if n > 0 => Ok(n),
        _ => Err(InvalidValue::Count(s.into())),
    }
}

/// Go's `strconv.ParseBool`, as Go's boolean flags use it.
pub fn parse_go_bool(s: &str) -> Result<bool, InvalidValue> {
    match s {
        "1" | "t" | "T" | "TRUE" | "true" | "True" => Ok(true),
        "0" | "f" | "F" | "FALSE" | "false" | "False" => Ok(false),
        _ => Err(InvalidValue::Bool(s.into())),
    }
}

/// A Go listen address: `host:port`, `:port` (every interface) or `[v6]:port`.
pub fn parse_bind_address(s: &str) -> Result<SocketAddr, InvalidValue> {
    let bad = || InvalidValue::Address(s.into());
    let (host, port) = s.rsplit_once(':').ok_or_else(bad)?;
    let port: u16 = port.parse().map_err(|_| bad())?;
    let ip: IpAddr = match host.trim_start_matches('[').trim_end_matches(']') {
        "" => IpAddr::V6(Ipv6Addr::UNSPECIFIED),
        "localhost" => IpAddr::V4(std::net::Ipv4Addr::LOCALHOST),
        h => h.parse().map_err(|_| bad())?,
    };
    Ok(SocketAddr::new(ip, port))
}

/// A listen address that `0` (controller-runtime's convention) turns off.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct BindAddress(pub Option<SocketAddr>);

/// Like [`parse_bind_address`], with `0` for disabled.
pub fn parse_optional_bind_address(s: &str) -> Result<BindAddress, InvalidValue> {
    if s == "0" || s.is_empty() { Ok(BindAddress(None)) } else { parse_bind_address(s).map(|a| BindAddress(Some(a))) }
}

/// Libraries whose debug logs are about each frame of a remote peer (h2 writes two lines per
/// PING frame): a peer would decide how much we log. They log at `info` unless the level asked
/// for is `trace`.
const FRAME_LOGGING_LIBRARIES: [&str; 3] = ["h2", "hyper", "hyper_util"];

/// The log filter: `RUST_LOG` verbatim when it is set and valid (it names every target's level
/// itself, e.g. `debug,h2=debug`), else `--zap-log-level`: `debug` (or `1`), `error`, a
/// number above 1 for `trace`, anything else `info`.
pub fn log_filter(zap_log_level: &str, rust_log: Option<&str>) -> tracing_subscriber::EnvFilter {
    if let Some(filter) =
        rust_log.filter(|s| !s.is_empty()).and_then(|s| tracing_subscriber::EnvFilter::try_new(s).ok())
    {
        return filter;
    }
    let level = match zap_log_level {
        "debug" => "debug",
        "error" => "error",
        l if l.parse::<u8>().is_ok_and(|n| n > 1) => "trace",
        l if l.parse::<u8>().is_ok_and(|n| n == 1) => "debug",
        _ => "info",
    };
    let mut directives = vec![level.to_string()];
    if level != "trace" {
        // Not above the level asked for: `error` stays `error` for them too.
        let library_level = if level == "debug" { "info" } else { level };
        directives.extend(FRAME_LOGGING_LIBRARIES.iter().map(|lib| format!("{lib}={library_level}")));
    }
    tracing_subscriber::EnvFilter::new(directives.join(","))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(args: &[&str]) -> Result<Args, clap::Error> {
        let argv = std::iter::once("op").chain(args.iter().copied()).map(String::from);
        Args::try_parse_from(normalize_go_flags(argv))
    }

    #[test]
    fn defaults_match_upstream() {
        let a = parse(&[]).unwrap();
        assert_eq!(a.controller_name, "stunner.l7mp.io/gateway-operator");
        assert_eq!(a.throttle_timeout, Duration::from_millis(250));
        assert!(a.endpoint_discovery);
        assert_eq!(a.dataplane_mode, DataplaneMode::Managed);
        assert_eq!(a.config_discovery_address.port(), 13478);
        assert_eq!(a.metrics_bind_address.0.unwrap().port(), 8080);
        assert_eq!(a.health_probe_bind_address.0.unwrap().port(), 8081);
        assert_eq!(a.pprof_bind_address, BindAddress(None));
        assert!(!a.leader_elect && !a.enable_finalizer && !a.disable_endpointslice_controller);
        assert!(!a.enforce_reference_grants, "upstream never consults ReferenceGrants");
        assert_eq!(a.pod_namespace, "stunner-system");
    }

    #[test]
    fn enforce_reference_grants_is_a_go_bool_flag() {
        assert!(parse(&["--enforce-reference-grants"]).unwrap().enforce_reference_grants);
        assert!(parse(&["-enforce-reference-grants=true"]).unwrap().enforce_reference_grants);
        assert!(!parse(&["--enforce-reference-grants=false"]).unwrap().enforce_reference_grants);
        assert!(parse(&["--enforce-reference-grants=maybe"]).is_err());
    }

    #[test]
    fn go_style_flags_are_accepted() {
        let a = parse(&[
            "-leader-elect",
            "--endpoint-discovery=false",
            "--disable-endpontslice-controller",
            "--dataplane-mode=LEGACY",
            "--throttle-timeout=1m30s",
            "--zap-log-level=debug",
            "--zap-devel=true",
        ])
        .unwrap();
        assert!(a.leader_elect && !a.endpoint_discovery && a.disable_endpointslice_controller);
        assert_eq!(a.dataplane_mode, DataplaneMode::Legacy);
        assert_eq!(a.throttle_timeout, Duration::from_secs(90));
        assert!(parse(&["--disable-endpointslice-controller"]).unwrap().disable_endpointslice_controller);
    }

    #[test]
    fn invalid_values_name_the_flag() {
        for bad in [["--throttle-timeout", "soon"], ["--dataplane-mode", "weird"], ["--metrics-bind-address", "8080"]] {
            let err = parse(&bad).unwrap_err().to_string();
            assert!(err.contains(bad[0]), "{err}");
        }
    }

    #[test]
    fn advertised_address_takes_the_host_and_the_bind_port() {
        let with = |addr: &str, host: Option<&str>| {
            let mut a = parse(&["--config-discovery-address", addr]).unwrap();
            a.advertised_host = host.map(String::from);
            a.advertised_cds_address(None)
        };
        assert_eq!(with(":13478", None), ":13478");
        assert_eq!(with("127.0.0.1:1234", None), "127.0.0.1:1234");
        assert_eq!(with(":13478", Some("10.0.0.5")), "10.0.0.5:13478");
        assert_eq!(with(":13478", Some("2600::9")), "[2600::9]:13478");
        assert_eq!(with(":13478", Some("[2600::9]")), "[2600::9]:13478");
        assert_eq!(with(":13478", Some("cds.stunner-system.svc")), "cds.stunner-system.svc:13478");
    }

    #[test]
    fn in_a_cluster_dataplanes_are_told_the_cds_service() {
        let a = parse(&[]).unwrap();
        assert_eq!(
            a.advertised_cds_address(Some("stunner-system")),
            "stunner-config-discovery.stunner-system.svc:13478"
        );
        // Upstream's variable keeps its meaning when set, even empty.
        let a = parse(&["--operator-address", "10.0.0.7"]).unwrap();
        assert_eq!(a.advertised_cds_address(Some("stunner-system")), "10.0.0.7:13478");
        let a = parse(&["--operator-address", ""]).unwrap();
        assert_eq!(a.advertised_cds_address(Some("stunner-system")), ":13478");
        // The flag beats the variable.
        let a = parse(&[
            "--config-discovery-advertised-host",
            "cds.example",
            "--config-discovery-address",
            ":2000",
            "--operator-address",
            "10.0.0.7",
        ])
        .unwrap();
        assert_eq!(a.advertised_cds_address(Some("x")), "cds.example:2000");
        // Another Service name, or none.
        // The Service's port, whatever port this pod binds.
        let a = parse(&["--config-discovery-address", "127.0.0.1:2000"]).unwrap();
        assert_eq!(a.advertised_cds_address(Some("ops")), "stunner-config-discovery.ops.svc:13478");
        let a = parse(&["--config-discovery-service", "my-cds"]).unwrap();
        assert_eq!(a.advertised_cds_address(Some("ops")), "my-cds.ops.svc:13478");
        let a = parse(&["--config-discovery-service", ""]).unwrap();
        assert_eq!(a.advertised_cds_address(Some("ops")), ":13478");
    }

    #[test]
    fn label_filter_env_replaces_the_default() {
        let filter =
            |list: Option<&str>| Args { label_filter: list.map(String::from), ..parse(&[]).unwrap() }.label_filter();
        assert_eq!(filter(None).len(), 6);
        assert_eq!(filter(Some(" a , ,b")), ["a", "b"]);
        assert!(filter(Some("")).is_empty());
    }

    /// Parses `Args` in a child process with `var=value` set and hands them to `check` there:
    /// the environment is the process's, so setting it in this one would race the other tests.
    /// `test` is the calling test's path, which the child runs alone.
    fn with_env(test: &str, var: &str, value: &str, check: impl FnOnce(Args)) {
        const CHILD: &str = "STUNNER_CLI_ENV_TEST_CHILD";
        if std::env::var_os(CHILD).is_some() {
            return check(parse(&[]).unwrap());
        }
        let child = std::process::Command::new(std::env::current_exe().unwrap())
            .args([test, "--exact", "--nocapture", "--test-threads=1"])
            .env(CHILD, "1")
            .env(var, value)
            .output()
            .unwrap();
        let output = String::from_utf8_lossy(&child.stdout) + String::from_utf8_lossy(&child.stderr);
        assert!(child.status.success(), "{test} with {var}={value:?}: {}\n{output}", child.status);
        assert!(output.contains("1 passed"), "the child ran no test:\n{output}");
    }

    #[test]
    fn rust_log_comes_from_the_environment() {
        with_env("cli::tests::rust_log_comes_from_the_environment", "RUST_LOG", "debug,h2=info", |a| {
            assert_eq!(a.rust_log.as_deref(), Some("debug,h2=info"))
        });
    }

    #[test]
    fn pod_namespace_comes_from_the_environment() {
        with_env("cli::tests::pod_namespace_comes_from_the_environment", "POD_NAMESPACE", "ops", |a| {
            assert_eq!(a.pod_namespace, "ops")
        });
    }

    #[test]
    fn pod_ips_come_from_the_environment() {
        with_env("cli::tests::pod_ips_come_from_the_environment", "POD_IPS", "10.0.0.1,fd00::1", |a| {
            assert_eq!(a.pod_ips.as_deref(), Some("10.0.0.1,fd00::1"))
        });
    }

    #[test]
    fn pod_name_comes_from_the_environment() {
        with_env("cli::tests::pod_name_comes_from_the_environment", "POD_NAME", "op-0", |a| {
            assert_eq!(a.pod_name.as_deref(), Some("op-0"))
        });
    }

    #[test]
    fn hostname_comes_from_the_environment() {
        with_env("cli::tests::hostname_comes_from_the_environment", "HOSTNAME", "node-a", |a| {
            assert_eq!(a.hostname.as_deref(), Some("node-a"))
        });
    }

    #[test]
    fn operator_address_comes_from_the_environment_even_empty() {
        let test = "cli::tests::operator_address_comes_from_the_environment_even_empty";
        with_env(test, "STUNNER_GATEWAY_OPERATOR_ADDRESS", "", |a| assert_eq!(a.operator_address.as_deref(), Some("")));
    }

    #[test]
    fn label_filter_comes_from_the_environment() {
        let test = "cli::tests::label_filter_comes_from_the_environment";
        with_env(test, "STUNNER_GATEWAY_OPERATOR_LABEL_FILTER", "a,b", |a| assert_eq!(a.label_filter(), ["a", "b"]));
    }

    #[test]
    fn dataplane_mode_comes_from_the_environment() {
        let test = "cli::tests::dataplane_mode_comes_from_the_environment";
        with_env(test, "STUNNER_GATEWAY_OPERATOR_DATAPLANE_MODE", "Legacy", |a| {
            assert_eq!(a.dataplane_mode, DataplaneMode::Legacy)
        });
    }

    #[test]
    fn invalid_values_say_what_is_wanted() {
        let err = parse(&["--throttle-timeout", "soon"]).unwrap_err().to_string();
        assert!(
            err.contains(
                "'--throttle-timeout <THROTTLE_TIMEOUT>': invalid duration \"soon\" (examples: 250ms, 1s, 1m30s)"
            ),
            "{err}"
        );
        let err = parse(&["--cds-max-grpc-watches", "0"]).unwrap_err().to_string();
        assert!(err.contains("invalid count \"0\" (a whole number, at least 1)"), "{err}");
        let err = parse(&["--leader-elect=maybe"]).unwrap_err().to_string();
        assert!(err.contains("invalid boolean \"maybe\""), "{err}");
        let err = parse(&["--metrics-bind-address", "8080"]).unwrap_err().to_string();
        assert!(err.contains("invalid address \"8080\" (want host:port or :port)"), "{err}");
    }

    #[test]
    fn go_durations() {
        assert_eq!(parse_go_duration("250ms").unwrap(), Duration::from_millis(250));
        assert_eq!(parse_go_duration("1.5s").unwrap(), Duration::from_millis(1500));
        assert_eq!(parse_go_duration("0").unwrap(), Duration::ZERO);
        assert!(parse_go_duration("10").is_err());
        assert!(parse_go_duration("").is_err());
    }

    /// The lines a subscriber with `filter` writes for a debug and a trace line of each target.
    fn logged(filter: tracing_subscriber::EnvFilter) -> String {
        #[derive(Clone, Default)]
        struct Capture(std::sync::Arc<std::sync::Mutex<Vec<u8>>>);
        impl std::io::Write for Capture {
            fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
                self.0.lock().unwrap().extend_from_slice(buf);
                Ok(buf.len())
            }
            fn flush(&mut self) -> std::io::Result<()> {
                Ok(())
            }
        }
        let capture = Capture::default();
        let writer = capture.clone();
        let subscriber = tracing_subscriber::fmt()
            .with_env_filter(filter)
            .with_writer(move || writer.clone())
            .with_ansi(false)
            .finish();
        tracing::subscriber::with_default(subscriber, || {
            tracing::debug!(target: "h2::codec::framed_read", "h2 debug: received Ping");
            tracing::trace!(target: "h2::codec::framed_read", "h2 trace");
            tracing::debug!(target: "hyper::proto::h1::conn", "hyper debug");
            tracing::debug!(target: "hyper_util::client::legacy::pool", "hyper_util debug");
            tracing::debug!(target: "stunner_gateway_operator::cds", "ours debug");
            tracing::trace!(target: "stunner_gateway_operator::cds", "ours trace");
            tracing::info!(target: "hyper::server", "hyper info");
        });
        String::from_utf8(capture.0.lock().unwrap().clone()).unwrap()
    }

    #[test]
    fn debug_level_keeps_library_frame_logs_out() {
        for level in ["debug", "1"] {
            let log = logged(log_filter(level, None));
            assert!(log.contains("ours debug") && log.contains("hyper info"), "{level}: {log}");
            for quiet in ["h2 debug", "hyper debug", "hyper_util debug", "ours trace"] {
                assert!(!log.contains(quiet), "{level}: {quiet} in\n{log}");
            }
        }
        // Only trace shows them.
        let log = logged(log_filter("2", None));
        for shown in ["h2 debug", "h2 trace", "hyper debug", "ours trace"] {
            assert!(log.contains(shown), "{shown} not in\n{log}");
        }
        let log = logged(log_filter("error", None));
        assert!(!log.contains("hyper info"), "{log}");
        // RUST_LOG says for itself; an invalid one falls back to the flag.
        let log = logged(log_filter("info", Some("debug,h2=debug")));
        assert!(log.contains("h2 debug") && log.contains("ours debug"), "{log}");
        let log = logged(log_filter("debug", Some("debug,h2=notalevel")));
        assert!(log.contains("ours debug") && !log.contains("h2 debug"), "{log}");
    }
}
