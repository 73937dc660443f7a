//! Messages encoded ahead of time: a `ConfigUpdate` per snapshot variant, made once and shared
//! by every watcher of it, and `ListResponse`s assembled from those.

use crate::store::{Encoding, Frame, Snapshot};
use bytes::{Buf, BufMut, Bytes, BytesMut};
use prost::encoding::{DecodeContext, WireType, encode_key, encode_varint, skip_field};
use stunner_gateway::proto;

/// A message encoded ahead of time: `ConfigUpdate` and `ListResponse` on the server side
/// (build.rs maps them here). Sending it copies the bytes out, nothing is re-encoded, so N
/// watchers of a version cost one encode. The server never decodes one.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Encoded(pub Bytes);

impl prost::Message for Encoded {
    fn encode_raw(&self, buf: &mut impl BufMut) {
        buf.put_slice(&self.0);
    }

    fn merge_field(
        &mut self,
        tag: u32,
        wire_type: WireType,
        buf: &mut impl Buf,
        ctx: DecodeContext,
    ) -> Result<(), prost::DecodeError> {
        skip_field(wire_type, tag, buf, ctx)
    }

    fn encoded_len(&self) -> usize {
        self.0.len()
    }

    fn clear(&mut self) {
        self.0 = Bytes::new();
    }
}

/// The gRPC encoding of a snapshot variant: its `ConfigUpdate` message.
pub(crate) struct GrpcUpdate;

impl Encoding for GrpcUpdate {
    fn encode(snapshot: &Snapshot, json: &Frame) -> Bytes {
        let update = proto::ConfigUpdate {
            id: Some(proto::ConfigId { namespace: snapshot.id.namespace.clone(), name: snapshot.id.name.clone() }),
            version: snapshot.version.to_string(),
            deleted: snapshot.deleted,
            config_json: std::str::from_utf8(json).expect("a frame is JSON text").to_owned(),
        };
        Bytes::from(prost::Message::encode_to_vec(&update))
    }
}

/// A `ListResponse` (field 1, `repeated ConfigUpdate`) assembled from encoded updates.
pub(super) fn encode_list(updates: &[Bytes]) -> Bytes {
    let mut buf = BytesMut::with_capacity(updates.iter().map(|u| u.len() + 8).sum());
    for u in updates {
        encode_key(1, WireType::LengthDelimited, &mut buf);
        encode_varint(u.len() as u64, &mut buf);
        buf.put_slice(u);
    }
    buf.freeze()
}
