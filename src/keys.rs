//! Well-known label and annotation keys and values that the operator reads and writes.

/// Label on every object the operator owns.
pub const OWNED_BY_LABEL: &str = "stunner.l7mp.io/owned-by";
pub const OWNED_BY_VALUE: &str = "stunner";
/// Annotation on the Services and Deployments the operator creates: the `--controller-name`
/// of the operator that made them. Every STUNner operator uses the same owned-by label, so
/// only this tells one operator's dataplanes from another's.
pub(crate) const CONTROLLER_NAME: &str = "stunner.l7mp.io/controller-name";
/// Label (the Gateway's name) and annotation (`<ns>/<name>`) tying an object to its Gateway.
pub const RELATED_GATEWAY_NAME: &str = "stunner.l7mp.io/related-gateway-name";
/// Label holding the namespace of the related Gateway.
pub const RELATED_GATEWAY_NAMESPACE: &str = "stunner.l7mp.io/related-gateway-namespace";
/// The Gateway API's label naming the Gateway an object was made for (GEP-1762), on the
/// Service, the dataplane and its pods; never in a selector.
pub const GATEWAY_NAME_LABEL: &str = "gateway.networking.k8s.io/gateway-name";
/// The Gateway API's label naming that Gateway's class.
pub const GATEWAY_CLASS_NAME_LABEL: &str = "gateway.networking.k8s.io/gateway-class-name";
/// The dataplane pods' app label.
pub const APP_LABEL: &str = "app";
pub const APP_VALUE: &str = "stunner";
/// The label of an EndpointSlice naming its Service.
pub(crate) const SERVICE_NAME_LABEL: &str = "kubernetes.io/service-name";

/// Gateway annotation: do not run a dataplane Deployment for this Gateway.
pub(crate) const DISABLE_MANAGED_DATAPLANE: &str = "stunner.l7mp.io/disable-managed-dataplane";
/// Service type of the Gateway's Service (GatewayConfig or Gateway annotation).
pub(crate) const SERVICE_TYPE: &str = "stunner.l7mp.io/service-type";
/// Allow UDP and TCP ports in one LoadBalancer Service.
pub(crate) const ENABLE_MIXED_PROTOCOL_LB: &str = "stunner.l7mp.io/enable-mixed-protocol-lb";
/// Gateway annotation: `true` renders a Service per protocol, the Gateway's own for its
/// UDP-like listeners and a second one, `<gateway>-tcp`, for its TCP-like ones, for load
/// balancers that take one protocol each (see `render::service`).
pub(crate) const SERVICE_PER_PROTOCOL: &str = "stunner.l7mp.io/service-per-protocol";
/// The `ipFamilyPolicy` of the Gateway's Services (GatewayConfig `ipFamilyPolicy` otherwise).
pub(crate) const IP_FAMILY_POLICY: &str = "stunner.l7mp.io/ip-family-policy";
/// The `ipFamilies` of the Gateway's Services, comma-separated, the primary first
/// (GatewayConfig `ipFamilies` otherwise).
pub(crate) const IP_FAMILIES: &str = "stunner.l7mp.io/ip-families";
/// `local` sets `externalTrafficPolicy: Local`.
pub(crate) const EXTERNAL_TRAFFIC_POLICY: &str = "stunner.l7mp.io/external-traffic-policy";
/// `true` sets `sessionAffinity: None`.
pub(crate) const DISABLE_SESSION_AFFINITY: &str = "stunner.l7mp.io/disable-session-affinity";
/// `true` keeps the cloud health-check port out of the Service.
pub(crate) const DISABLE_HEALTH_CHECK_EXPOSE: &str = "stunner.l7mp.io/disable-health-check-expose";
/// `true`: each listener relays from the public address of the node its dataplane pod runs on
/// (the CDS fills it in per node; see `render::relay`).
pub(crate) const ENABLE_RELAY_ADDRESS_DISCOVERY: &str = "stunner.l7mp.io/enable-relay-address-discovery";
/// JSON map of listener name to node port.
pub(crate) const NODE_PORT: &str = "stunner.l7mp.io/nodeport";
/// JSON map of listener name to target port (also the dataplane's listening port).
pub(crate) const TARGET_PORT: &str = "stunner.l7mp.io/targetport";
/// On a dataplane Deployment whose pods were started against another config discovery address
/// (e.g. by the Go operator, which uses its pod IP): the digest of the config at the time it
/// was adopted; see `render::adopt`.
pub(crate) const ADOPTED_CONFIG: &str = "stunner.l7mp.io/adopted-config";

/// Annotation on each STUNner CRD: the release of the operator (and chart) whose types it was
/// generated from. The operator's `--install-crds` compares it with the live CRD's and never
/// applies an older schema over a newer one (docs/upgrade.md).
pub const CRD_BUNDLE_VERSION: &str = "stunner.l7mp.io/bundle-version";

/// The dataplane's environment variable naming its config discovery server.
pub(crate) const CONFIG_ORIGIN_ENV: &str = "STUNNER_CONFIG_ORIGIN";
