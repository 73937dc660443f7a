//! The operator-wide settings a render depends on (flags and environment, spec §6).

/// The default `--controller-name`.
pub const DEFAULT_CONTROLLER_NAME: &str = "stunner.l7mp.io/gateway-operator";
/// The default advertised config discovery address.
pub const DEFAULT_CDS_ADDRESS: &str = ":13478";
/// The CDS port assumed when the advertised address has none.
const DEFAULT_CDS_PORT: &str = "13478";
/// Gateway labels never copied to Deployments: they belong to the tools that manage the
/// Gateway and would make those tools adopt (or prune) the Deployment.
pub const DEFAULT_LABEL_FILTER: [&str; 6] = [
    "applyset.kubernetes.io/part-of",
    "applyset.k8s.io/part-of",
    "app.kubernetes.io/managed-by",
    "argocd.argoproj.io/instance",
    "kustomize.toolkit.fluxcd.io/name",
    "kustomize.toolkit.fluxcd.io/namespace",
];

/// How dataplanes are run.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum DataplaneMode {
    /// One Deployment and one CDS config per Gateway.
    #[default]
    Managed,
    /// One config per GatewayClass in a ConfigMap; the user runs the dataplane.
    Legacy,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RenderSettings {
    /// The `controllerName` of the GatewayClasses this operator manages.
    pub controller_name: String,
    pub dataplane_mode: DataplaneMode,
    /// Resolve Service backends to pod IPs (STATIC clusters) rather than DNS names (STRICT_DNS).
    pub endpoint_discovery: bool,
    /// Read endpoints from EndpointSlices; `false` falls back to Endpoints objects.
    pub endpoint_slices: bool,
    /// The config discovery address advertised to dataplanes (`host:port`, host optional).
    pub cds_address: String,
    /// Gateway label keys not copied to Deployments.
    pub label_filter: Vec<String>,
    /// The exit-time cleanup of `--enable-finalizer` (see [`super::finalize`]): every class
    /// of ours renders as invalid.
    pub finalizing: bool,
    /// `--enforce-reference-grants`: a backend in another namespace than its route needs a
    /// ReferenceGrant (Gateway API semantics); off, any namespace is allowed, as upstream.
    pub enforce_reference_grants: bool,
    /// Standalone mode: a Gateway's Deployment is rendered only where the index holds one (from
    /// the manifests), to be merged into it; elsewhere it is left alone. With no API server and
    /// no kubelet, a Deployment nothing holds goes nowhere (the server's `pipeline::owned` drops
    /// it), and building it was 74 of the ~190 allocations of a Gateway's render.
    pub held_deployments_only: bool,
}

impl Default for RenderSettings {
    fn default() -> Self {
        RenderSettings {
            controller_name: DEFAULT_CONTROLLER_NAME.into(),
            dataplane_mode: DataplaneMode::Managed,
            endpoint_discovery: true,
            endpoint_slices: true,
            cds_address: DEFAULT_CDS_ADDRESS.into(),
            label_filter: DEFAULT_LABEL_FILTER.iter().map(|s| s.to_string()).collect(),
            finalizing: false,
            enforce_reference_grants: false,
            held_deployments_only: false,
        }
    }
}

impl RenderSettings {
    /// `STUNNER_CONFIG_ORIGIN` for dataplanes: `http://host:port` from the advertised address,
    /// as Go's `net.SplitHostPort` and `net.JoinHostPort` shape it (spec §3.12): an address that
    /// does not split is all host with the default port, and a host with a colon is bracketed.
    pub(crate) fn cds_origin(&self) -> String {
        let (host, port) = split_host_port(&self.cds_address).unwrap_or((&self.cds_address, DEFAULT_CDS_PORT));
        if host.contains(':') { format!("http://[{host}]:{port}") } else { format!("http://{host}:{port}") }
    }
}

/// Go's `net.SplitHostPort`: `host:port` or `[host]:port`; `None` where Go returns an error.
fn split_host_port(addr: &str) -> Option<(&str, &str)> {
    if let Some(rest) = addr.strip_prefix('[') {
        let (host, tail) = rest.split_once(']')?;
        let port = tail.strip_prefix(':')?;
        return (!port.contains([':', '[', ']']) && !host.contains(['[', ']'])).then_some((host, port));
    }
    let (host, port) = addr.rsplit_once(':')?;
    (!host.contains([':', '[', ']']) && !port.contains(['[', ']'])).then_some((host, port))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn origin(addr: &str) -> String {
        RenderSettings { cds_address: addr.into(), ..Default::default() }.cds_origin()
    }

    #[test]
    fn cds_uri_cases_of_upstream() {
        assert_eq!(origin(":13478"), "http://:13478");
        assert_eq!(origin("1.2.3.4:1234"), "http://1.2.3.4:1234");
        assert_eq!(origin("1.2.3.4"), "http://1.2.3.4:13478");
        assert_eq!(origin("example.com:80"), "http://example.com:80");
        assert_eq!(origin("example.com"), "http://example.com:13478");
        assert_eq!(origin("2600::9"), "http://[2600::9]:13478");
        assert_eq!(origin("[2600::9]:13478"), "http://[2600::9]:13478");
        assert_eq!(origin("[2600::9]"), "http://[[2600::9]]:13478");
    }
}
