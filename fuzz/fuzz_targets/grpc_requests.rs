//! The gRPC request decode (the prost messages of proto/stunner/cds/v1/cds.proto) and the
//! unary calls of ConfigDiscovery that take them.
//!
//! Input: a selector byte, then one request message. Every message that decodes re-encodes to
//! no more bytes than it came in (unknown fields and repeats dropped, nothing added) and
//! decodes back to itself. A unary call answers with a gRPC status; an OK answer is the
//! response message of its method, and carries exactly what the request names.

#![no_main]

use libfuzzer_sys::fuzz_target;
use prost::Message;
use std::sync::LazyLock;
use stunner_gateway::config::StunnerConfig;
use stunner_gateway::proto;
use stunner_gateway_operator::fuzzing::CdsServer;

static SERVER: LazyLock<CdsServer> = LazyLock::new(CdsServer::new);

const METHOD: &str = "/stunner.cds.v1.ConfigDiscovery/";

fuzz_target!(|data: &[u8]| {
    let Some((&selector, message)) = data.split_first() else { return };
    match selector % 6 {
        0 => {
            let request = round_trip::<proto::ListRequest>(message);
            let answer = call("List", message, request.is_some());
            if let (Some(request), Some(body)) = (request, answer) {
                let listed = proto::ListResponse::decode(body.as_slice()).expect("a ListResponse");
                let ids: Vec<String> = listed.configs.iter().map(served_id).collect();
                let expected: Vec<String> = CdsServer::CONFIGS
                    .iter()
                    .filter(|id| in_scope(request.scope.as_ref(), id))
                    .map(|id| id.to_string())
                    .collect();
                assert_eq!(ids, expected, "List serves its scope");
            }
        }
        1 => {
            let request = round_trip::<proto::GetRequest>(message);
            let answer = call("Get", message, request.is_some());
            if let (Some(request), Some(body)) = (request, answer) {
                let update = proto::ConfigUpdate::decode(body.as_slice()).expect("a ConfigUpdate");
                let id = request.id.expect("Get needs an id");
                assert_eq!(served_id(&update), format!("{}/{}", id.namespace, id.name), "Get serves its id");
            }
        }
        2 => {
            round_trip::<proto::WatchRequest>(message);
        }
        3 => {
            let decoded = round_trip::<proto::GetLicenseRequest>(message).is_some();
            if let Some(body) = call("GetLicense", message, decoded) {
                proto::LicenseStatus::decode(body.as_slice()).expect("a LicenseStatus");
            }
        }
        4 => {
            let decoded = round_trip::<proto::ListClientsRequest>(message).is_some();
            if let Some(body) = call("ListClients", message, decoded) {
                proto::ListClientsResponse::decode(body.as_slice()).expect("a ListClientsResponse");
            }
        }
        _ => {
            round_trip::<proto::Ack>(message);
            round_trip::<proto::WatchStart>(message);
        }
    }
});

/// Decodes `bytes` as `M`; a decoded message re-encodes to at most as many bytes, and those
/// decode back to it.
fn round_trip<M: Message + Default + PartialEq>(bytes: &[u8]) -> Option<M> {
    let message = M::decode(bytes).ok()?;
    let encoded = message.encode_to_vec();
    assert_eq!(encoded.len(), message.encoded_len());
    assert!(encoded.len() <= bytes.len(), "{} bytes re-encoded from {}", encoded.len(), bytes.len());
    assert!(M::decode(encoded.as_slice()).ok().as_ref() == Some(&message), "decode → encode → decode");
    Some(message)
}

/// Calls `method` with `message`: the response message's bytes when the status is OK. A
/// message that does not decode must not be answered with OK.
fn call(method: &str, message: &[u8], decodes: bool) -> Option<Vec<u8>> {
    let answer = SERVER.grpc(&format!("{METHOD}{method}"), message);
    let status = answer.headers.get("grpc-status").expect("every answer has a grpc-status");
    if status != "0" {
        return None;
    }
    assert!(decodes, "OK for a request that does not decode");
    let body = answer.body;
    assert!(body.len() >= 5, "one message frame");
    let len = u32::from_be_bytes(body[1..5].try_into().unwrap()) as usize;
    assert_eq!((body[0], body.len()), (0, 5 + len), "one uncompressed message frame");
    Some(body[5..].to_vec())
}

/// The id of an update, checked against its config's own name.
fn served_id(update: &proto::ConfigUpdate) -> String {
    let id = update.id.as_ref().expect("an update names its config");
    let id = format!("{}/{}", id.namespace, id.name);
    let config: StunnerConfig = serde_json::from_str(&update.config_json).expect("a config");
    assert_eq!(config.admin.name, id, "the update's id is its config's");
    id
}

fn in_scope(scope: Option<&proto::Scope>, id: &str) -> bool {
    use proto::scope::Kind;
    let (ns, _) = id.split_once('/').unwrap();
    match scope.and_then(|s| s.kind.as_ref()) {
        None | Some(Kind::All(_)) => true,
        Some(Kind::Namespace(n)) => n == ns,
        Some(Kind::Config(c)) => format!("{}/{}", c.namespace, c.name) == id,
    }
}
