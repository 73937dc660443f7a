//! The Gateway API features this operator supports, as its GatewayClasses publish them in
//! `status.supportedFeatures` (GEP-2162): the conformance suite reads the list to choose its
//! tests, and users read it to learn what a class offers. Only what is true with the current
//! flags is listed; names are the v1.7.0 `pkg/features` ones, sorted as the CRD requires.

use super::settings::RenderSettings;
use gateway_api::gatewayclasses::GatewayClassStatusSupportedFeatures;

/// Gateways of the class are reconciled (the one core feature of the Gateway profile).
const GATEWAY: &str = "Gateway";
/// `spec.infrastructure`: labels and annotations reach the generated objects, a
/// `parametersRef` to a GatewayConfig replaces the class's.
const GATEWAY_INFRASTRUCTURE: &str = "GatewayInfrastructure";
/// ListenerSets (GEP-1713): a Gateway's `allowedListeners` admits them, their listeners are
/// merged into its config and Service, and they and the routes naming them get statuses.
const LISTENER_SET: &str = "ListenerSet";
/// Every cross-namespace reference needs a ReferenceGrant: certificates always, route
/// backends only with `--enforce-reference-grants`.
const REFERENCE_GRANT: &str = "ReferenceGrant";
/// TCPRoutes attach to TCP-like listeners (peers relayed over RFC 6062 TCP allocations).
const TCP_ROUTE: &str = "TCPRoute";
/// UDPRoutes attach to every TURN listener.
const UDP_ROUTE: &str = "UDPRoute";

/// The features of a class of ours, sorted by name.
pub(crate) fn supported(settings: &RenderSettings) -> Vec<GatewayClassStatusSupportedFeatures> {
    let mut names = vec![GATEWAY, GATEWAY_INFRASTRUCTURE, LISTENER_SET, TCP_ROUTE, UDP_ROUTE];
    if settings.enforce_reference_grants {
        names.push(REFERENCE_GRANT);
    }
    names.sort_unstable();
    names.into_iter().map(|name| GatewayClassStatusSupportedFeatures { name: name.into() }).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn names(settings: &RenderSettings) -> Vec<String> {
        supported(settings).into_iter().map(|f| f.name).collect()
    }

    #[test]
    fn reference_grant_is_published_only_while_grants_are_enforced() {
        let off = RenderSettings::default();
        assert_eq!(names(&off), ["Gateway", "GatewayInfrastructure", "ListenerSet", "TCPRoute", "UDPRoute"]);
        let on = RenderSettings { enforce_reference_grants: true, ..off };
        let all = ["Gateway", "GatewayInfrastructure", "ListenerSet", "ReferenceGrant", "TCPRoute", "UDPRoute"];
        assert_eq!(names(&on), all);
    }
}
