//! The protobuf codec of the ConfigDiscovery service: tonic's prost codec with smaller
//! per-call buffers (server/build.rs makes it the stubs' codec).
//!
//! tonic allocates an encode and a decode buffer of `buffer_size` bytes when a call starts,
//! 8 KiB each by default, and a watch keeps both for as long as it lives: 16 KiB of the ~58 KiB
//! an idle gRPC watch had allocated, the only large part the server can size (h2's 16 KiB write
//! and 8 KiB read buffers per connection are fixed). An idle watch needs neither: what it sends
//! is one config per update, which the buffer grows to on demand, and what it receives is a
//! `start` and small acks. With the sizes below an idle watch costs the server ~28 KiB of RSS
//! instead of ~36 KiB (BENCHMARKS.md's history in git, "Where an idle gRPC
//! watch's memory goes").

use std::marker::PhantomData;
use tonic::codec::{BufferSettings, Codec};
use tonic_prost::{ProstDecoder, ProstEncoder};

/// Initial encode buffer. A `ConfigUpdate` is copied in whole (it is encoded ahead of time,
/// see [`super::Encoded`]) and the buffer grows to fit it, so the initial size only has to
/// hold the 5-byte gRPC message header and a small update (a deletion); anything more is memory
/// an idle watch holds for nothing (0 bytes measured the same as 256).
const ENCODE_BUFFER_BYTES: usize = 256;

/// Initial decode buffer: enough for an ack (namespace, name, version, usually no error) and
/// a usual `start`; a larger `start` (a long resume list, up to [`super::Settings`]'
/// `max_request_bytes`) grows it.
const DECODE_BUFFER_BYTES: usize = 512;

/// tonic's default (32 KiB): how many bytes of ready messages (a backlog of updates, or the
/// initial configs of a namespace or everything) are batched into one write before the
/// stream yields. It bounds a burst; an idle watch measured the same with 4 KiB.
const YIELD_THRESHOLD_BYTES: usize = 32 * 1024;

/// [`tonic_prost::ProstCodec`] with the buffer sizes above.
#[derive(Debug, Clone, Copy)]
pub struct SmallBufferCodec<T, U>(PhantomData<(T, U)>);

impl<T, U> Default for SmallBufferCodec<T, U> {
    fn default() -> Self {
        SmallBufferCodec(PhantomData)
    }
}

impl<T, U> Codec for SmallBufferCodec<T, U>
where
    T: prost::Message + Send + 'static,
    U: prost::Message + Default + Send + 'static,
{
    type Encode = T;
    type Decode = U;
    type Encoder = ProstEncoder<T>;
    type Decoder = ProstDecoder<U>;

    fn encoder(&mut self) -> Self::Encoder {
        ProstEncoder::new(BufferSettings::new(ENCODE_BUFFER_BYTES, YIELD_THRESHOLD_BYTES))
    }

    fn decoder(&mut self) -> Self::Decoder {
        ProstDecoder::new(BufferSettings::new(DECODE_BUFFER_BYTES, YIELD_THRESHOLD_BYTES))
    }
}
