//! Flags and environment variables as the daemon reads them.

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
fn install_crds_is_off_by_default_and_a_go_bool_flag_with_an_optional_directory() {
    let a = parse(&[]).unwrap();
    assert!(!a.install_crds && a.crd_dir.is_none(), "the binary installs no CRDs unless asked");
    let a = parse(&["--install-crds", "--crd-dir", "/crds"]).unwrap();
    assert!(a.install_crds);
    assert_eq!(a.crd_dir.as_deref(), Some(std::path::Path::new("/crds")));
    assert!(!parse(&["-install-crds=false"]).unwrap().install_crds);
    assert!(parse(&["--install-crds=maybe"]).is_err());
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
    assert_eq!(a.advertised_cds_address(Some("stunner-system")), "stunner-config-discovery.stunner-system.svc:13478");
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
        err.contains("'--throttle-timeout <THROTTLE_TIMEOUT>': invalid duration \"soon\" (examples: 250ms, 1s, 1m30s)"),
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
fn zap_flags_reach_the_log_settings() {
    use crate::logs::flags::{Encoder, StacktraceLevel, TimeEncoding};
    let s = parse(&[]).unwrap().log_settings();
    assert_eq!(
        (s.encoder, s.stacktrace, s.time),
        (Encoder::Console, StacktraceLevel::Panic, TimeEncoding::Rfc3339Nano)
    );
    assert_eq!(s.filter.max_level_hint(), Some(tracing::level_filters::LevelFilter::INFO));
    let s = parse(&[
        "--zap-encoder=JSON",
        "--zap-log-level=3",
        "--zap-stacktrace-level=error",
        "--zap-time-encoding",
        "epoch",
    ])
    .unwrap()
    .log_settings();
    assert_eq!((s.encoder, s.stacktrace, s.time), (Encoder::Json, StacktraceLevel::Error, TimeEncoding::Epoch));
    assert_eq!(s.filter.max_level_hint(), Some(tracing::level_filters::LevelFilter::TRACE));
    // --zap-devel moves the defaults only: console and debug; false, JSON.
    let s = parse(&["-zap-devel"]).unwrap().log_settings();
    assert_eq!(s.encoder, Encoder::Console);
    assert_eq!(s.filter.max_level_hint(), Some(tracing::level_filters::LevelFilter::DEBUG));
    let s = parse(&["--zap-devel=false", "--zap-log-level=error"]).unwrap().log_settings();
    assert_eq!(s.encoder, Encoder::Json);
    assert_eq!(s.filter.max_level_hint(), Some(tracing::level_filters::LevelFilter::ERROR));
    assert_eq!(parse(&["--zap-devel=true", "--zap-encoder=json"]).unwrap().log_settings().encoder, Encoder::Json);
}

#[test]
fn unknown_zap_values_are_refused_naming_the_flag() {
    for bad in [
        ["--zap-encoder", "text"],
        ["--zap-log-level", "warn"],
        ["--zap-log-level", "0"],
        ["--zap-stacktrace-level", "debug"],
        ["--zap-time-encoding", "unix"],
        ["--zap-devel", "maybe"],
    ] {
        let err = parse(&bad).unwrap_err().to_string();
        assert!(err.contains(bad[0]) && err.contains(bad[1]), "{err}");
    }
}

#[test]
fn local_names_are_the_service_the_advertised_host_and_the_flag() {
    let a = parse(&["--pod-namespace", "ops"]).unwrap();
    let service = ["stunner-config-discovery", "stunner-config-discovery.ops", "stunner-config-discovery.ops.svc"];
    let mut want: Vec<String> = service.iter().map(|s| s.to_string()).collect();
    want.push("stunner-config-discovery.ops.svc.cluster.local".into());
    want.sort();
    assert_eq!(a.local_names().names(), want);
    let a = parse(&[
        "--pod-namespace",
        "ops",
        "--config-discovery-service",
        "",
        "--config-discovery-advertised-host",
        "CDS.Example.",
        "--loopback-allowed-hosts",
        "my-cds.ops.svc.corp.internal,proxy.local",
    ])
    .unwrap();
    assert_eq!(a.local_names().names(), ["cds.example", "my-cds.ops.svc.corp.internal", "proxy.local"]);
}
