//! EndpointSlices as the index keeps them: their metadata, their Service and their endpoints'
//! addresses.
//!
//! The index reads two things of a slice: the `kubernetes.io/service-name` label (which
//! Service it belongs to) and every endpoint's addresses, ready or not, in order. A Kubernetes
//! `Endpoint` is 352 bytes inline whatever it sets, so with 10,000 endpoints the index held
//! 3.5 MiB of endpoint structs (conditions, hostnames, zones, target references) that nothing
//! reads; as a list of addresses a slice of ten takes 240 bytes beside its strings. The labels
//! go too, once the Service's name is taken out of them: a map of one label is a 544-byte
//! B-tree leaf, more than the addresses of ten endpoints.

use crate::keys::SERVICE_NAME_LABEL;
use k8s_openapi::api::discovery::v1::EndpointSlice;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use serde::Serialize;

/// An EndpointSlice in the index (see the kind table): its metadata without labels, the
/// Service its `kubernetes.io/service-name` label names, and the addresses of all its
/// endpoints, in the order the slice lists them.
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct EndpointAddresses {
    pub metadata: ObjectMeta,
    pub service: Option<String>,
    pub addresses: Vec<String>,
}

impl From<EndpointSlice> for EndpointAddresses {
    fn from(slice: EndpointSlice) -> Self {
        let mut metadata = slice.metadata;
        let service = metadata.labels.take().and_then(|mut labels| labels.remove(SERVICE_NAME_LABEL));
        let addresses = slice.endpoints.into_iter().flatten().flat_map(|e| e.addresses).collect();
        EndpointAddresses { metadata, service, addresses }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn every_address_of_every_endpoint_is_kept_in_order() {
        let slice: EndpointSlice = serde_json::from_value(json!({
            "metadata": {"name": "s", "namespace": "ns", "labels": {"kubernetes.io/service-name": "svc"}},
            "addressType": "IPv4",
            "endpoints": [
                {"addresses": ["10.0.0.2", "10.0.0.1"], "conditions": {"ready": true}},
                {"addresses": ["10.0.0.3"], "conditions": {"ready": false, "terminating": true}, "nodeName": "n"}],
            "ports": [{"name": "udp", "protocol": "UDP", "port": 1}]
        }))
        .unwrap();
        let kept = EndpointAddresses::from(slice.clone());
        assert_eq!(kept.addresses, ["10.0.0.2", "10.0.0.1", "10.0.0.3"]);
        assert_eq!(kept.service.as_deref(), Some("svc"));
        assert_eq!(kept.metadata, ObjectMeta { labels: None, ..slice.metadata });
    }

    #[test]
    fn a_slice_without_the_service_label_belongs_to_no_service() {
        let slice: EndpointSlice = serde_json::from_value(json!({
            "metadata": {"name": "s", "namespace": "ns", "labels": {"app": "svc"}},
            "addressType": "IPv4",
            "endpoints": [{"addresses": ["10.0.0.1"]}]
        }))
        .unwrap();
        let kept = EndpointAddresses::from(slice);
        assert_eq!((kept.service, kept.metadata.labels), (None, None));
    }
}
