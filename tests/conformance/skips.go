// The suite's tests this harness skips against the STUNner operator, each with its reason
// (docs/conformance.md lists the same; e2e_conformance.rs checks that it does).
package conformance

const (
	// A TURN server answers TURN only: a plain datagram or stream to the Gateway address is
	// not relayed anywhere, so an echo never comes back.
	plainUDP = "sends plain UDP to the Gateway address and waits for the backend's echo; a TURN server answers only TURN"
	plainDNS = "sends a plain DNS query over UDP to the Gateway address; a TURN server answers only TURN"
	plainTCP = "sends plain TCP to the Gateway address and waits for the backend's echo; a TURN server answers only TURN"
	// The operator renders TURN listeners only (UDP, TCP, TLS, DTLS and their TURN- names):
	// an HTTP or HTTPS listener is not one of its protocols, so what these tests expect of
	// it (Accepted with HTTPRoute as supported kind, Programmed) cannot hold.
	httpListeners = "its Gateways have HTTP or HTTPS listeners, which a TURN gateway does not serve"
	plainHTTP     = "sends HTTP requests through HTTP listeners of the Gateway, which a TURN gateway does not serve"
)

// skipped: suite test name -> why it is not run.
var skipped = map[string]string{
	"UDPRoute":                                  plainDNS,
	"UDPRouteMultipleRoutesAttachment":          plainUDP,
	"UDPRouteParentRefAttachAllListeners":       plainUDP,
	"UDPRouteParentRefPortAndSectionName":       plainUDP,
	"UDPRouteReferenceGrant":                    plainUDP,
	"UDPRouteWeightedRouting":                   plainUDP,
	"TCPRouteMultipleRoutesAttachment":          plainTCP,
	"TCPRouteParentRefAttachAll":                plainTCP,
	"TCPRouteParentRefPortAndSectionName":       plainTCP,
	"TCPRouteReferenceGrant":                    plainTCP,
	"TCPRouteWeightedRouting":                   plainTCP,
	"TCPRouteInvalidNonTCPListener":             httpListeners,
	"GatewayInvalidRouteKind":                   httpListeners,
	"GatewayInvalidTLSConfiguration":            httpListeners,
	"GatewayListenerUnsupportedProtocol":        httpListeners,
	"GatewayModifyListeners":                    httpListeners,
	"GatewayObservedGenerationBump":             httpListeners,
	"GatewaySecretInvalidReferenceGrant":        httpListeners,
	"GatewaySecretMissingReferenceGrant":        httpListeners,
	"GatewaySecretReferenceGrantAllInNamespace": httpListeners,
	"GatewaySecretReferenceGrantSpecific":       httpListeners,

	// Not run while the GatewayClass does not claim their feature (GatewayStaticAddresses,
	// GatewayAddressEmpty, and HTTPRoute or TLSRoute for some ListenerSet tests; the suite
	// reports them unsupported first), skipped once it does (GatewayInfrastructure and
	// ListenerSet are claimed). GatewayInvalidParametersRef is not here:
	// it checks Accepted=False/InvalidParameters alone, which its HTTP listener does not
	// change.
	"GatewayInfrastructureMetadata":               httpListeners,
	"GatewayStaticAddresses":                      httpListeners,
	"GatewayOptionalAddressValue":                 httpListeners,
	"ListenerSetAllowedNamespaceNone":             httpListeners,
	"ListenerSetAllowedNamespaceSame":             httpListeners,
	"ListenerSetAllowedNamespaceSelector":         httpListeners,
	"ListenerSetAllowedRoutesSupportedKinds":      httpListeners,
	"ListenerSetDefaultNotAllowed":                httpListeners,
	"ListenerSetHostnameConflict":                 httpListeners,
	"ListenerSetProtocolConflict":                 httpListeners,
	"ListenerSetReferenceGrant":                   httpListeners,
	"ListenerSetRouteStatusScopedToParentRef":     httpListeners,
	"ListenerSetAllowedRoutesNamespaces":          plainHTTP,
	"ListenerSetDualParentRefIndependence":        plainHTTP,
	"ListenerSetGatewayParentSectionNameNotFound": plainHTTP,
	"ListenerSetHTTPRouting":                      plainHTTP,
}
