//! The labels upstream stunnerctl finds pods by (stunner `pkg/apis/v1/default.go`).

/// The label the operator's pods carry when they serve config discovery.
pub const CDS_LABEL: &str = "stunner.l7mp.io/config-discovery-service";
/// `app=stunner` marks the dataplane pods.
pub const APP_LABEL: &str = "app";
pub const DATAPLANE_APP: &str = "stunner";
/// `app=stunner-auth` marks the pods that serve the credential API (`DefaultAuthAppLabelValue`).
pub const AUTH_APP: &str = "stunner-auth";
/// The Gateway a dataplane pod serves.
pub const RELATED_GATEWAY_NAME_LABEL: &str = "stunner.l7mp.io/related-gateway-name";
pub const RELATED_GATEWAY_NAMESPACE_LABEL: &str = "stunner.l7mp.io/related-gateway-namespace";
