//! Render errors: a reason that decides the status condition, and the text that statuses show.

use crate::config::ConfigError;
use crate::index::ObjectKey;
use std::fmt;

/// Why rendering (part of) a Gateway failed. Critical reasons abort the Gateway or drop a
/// cluster; the others only show in statuses (spec §4.0).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Reason {
    // Critical.
    InvalidAuthType,
    InvalidUsernamePassword,
    InvalidSharedSecret,
    InvalidAuthConfig,
    InvalidDataplane,
    NoRuleFound,
    ExternalAuthCredentialsNotFound,
    MissingGatewayConfig,
    /// A GatewayClass of ours whose `parametersRef` names no GatewayConfig (missing, another
    /// group or kind, no namespace or name).
    InvalidParametersRef,
    /// A Gateway whose `spec.infrastructure.parametersRef` names something other than a
    /// GatewayConfig of its namespace, or one that does not exist.
    InvalidGatewayParameters,
    /// A stunner validation failure; the text is the dataplane's own.
    Validation,
    /// The operator is exiting with `--enable-finalizer`: every class is invalidated.
    OperatorShutdown,
    // Non-critical.
    InvalidProtocol,
    InvalidCertificateRef,
    InvalidBackendGroup,
    InvalidBackendKind,
    /// A backend in another namespace that no ReferenceGrant opens to the route, or a
    /// listener's certificate Secret in another namespace that none opens to the Gateway.
    RefNotPermitted,
    ServiceNotFound,
    ClusterIpNotFound,
    EndpointNotFound,
    BackendNotFound,
    InconsistentClusterType,
}

impl Reason {
    fn text(self) -> &'static str {
        match self {
            Reason::InvalidAuthType => "invalid authentication type",
            Reason::InvalidUsernamePassword => "missing username and/or password for plaintext authentication",
            Reason::InvalidSharedSecret => "missing shared-secret for longterm authentication",
            Reason::InvalidAuthConfig => "internal error: could not validate generated auth config",
            Reason::InvalidDataplane => "missing Dataplane resource for Gateway",
            Reason::NoRuleFound => "no rules found in route",
            Reason::OperatorShutdown => "Operator unavailable after graceful shutdown",
            Reason::InvalidGatewayParameters => {
                "spec.infrastructure.parametersRef must name an existing GatewayConfig (group stunner.l7mp.io) of the Gateway's namespace"
            }
            Reason::InvalidParametersRef => {
                "parametersRef must name a GatewayConfig (group stunner.l7mp.io) by namespace and name"
            }
            Reason::ExternalAuthCredentialsNotFound => "missing or invalid external authentication credentials",
            Reason::InvalidProtocol => "invalid protocol",
            Reason::InvalidCertificateRef => "invalid certificate reference",
            Reason::InvalidBackendGroup => "invalid backend group",
            Reason::InvalidBackendKind => "invalid backend kind",
            Reason::RefNotPermitted => "backend reference not permitted by any ReferenceGrant",
            Reason::ServiceNotFound => "service not found",
            Reason::ClusterIpNotFound => "cluster IP not found",
            Reason::EndpointNotFound => "endpoint not found",
            Reason::BackendNotFound => "backend not found",
            Reason::InconsistentClusterType => "inconsistent cluster type",
            Reason::MissingGatewayConfig | Reason::Validation => "",
        }
    }
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RenderError {
    pub reason: Reason,
    message: String,
    field: Option<&'static str>,
}

impl RenderError {
    pub(crate) fn new(reason: Reason) -> Self {
        RenderError { reason, message: reason.text().into(), field: None }
    }

    /// Upstream's text for a class whose GatewayConfig is missing.
    pub(crate) fn missing_gateway_config(key: &impl fmt::Display) -> Self {
        let message = format!("No GatewayConfig found for name: {key}");
        RenderError { reason: Reason::MissingGatewayConfig, message, field: None }
    }

    /// A listener's certificate reference to `secret`, a Secret in another namespace that no
    /// ReferenceGrant there opens to the Gateways of `gateway_namespace`: the message names
    /// the reference and the grant it lacks.
    pub(crate) fn certificate_not_permitted(secret: &ObjectKey, referrers: &str, namespace: &str) -> Self {
        let message = format!(
            "certificate reference {secret} not permitted: no ReferenceGrant in namespace {} allows {referrers} of namespace {namespace} to refer to it",
            secret.namespace
        );
        RenderError { reason: Reason::RefNotPermitted, message, field: None }
    }

    /// The same error, blamed on a field of the GatewayConfig (`spec.authType`): what a
    /// person must fix, which the status text (upstream's) does not say.
    pub(crate) fn at(self, field: &'static str) -> Self {
        RenderError { field: Some(field), ..self }
    }

    /// The GatewayConfig field at fault, when the error is one of a GatewayConfig's content.
    pub(crate) fn field(&self) -> Option<&'static str> {
        self.field
    }
}

impl From<ConfigError> for RenderError {
    fn from(e: ConfigError) -> Self {
        RenderError { reason: Reason::Validation, message: e.0, field: None }
    }
}

impl fmt::Display for RenderError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.message)
    }
}
