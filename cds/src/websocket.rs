//! The part of RFC 6455 a CDS watch stream needs on the server side, and no more.
//!
//! A watch sends the same few frames to thousands of clients, so a frame is built once per
//! config version ([`text_frame`], cached with the snapshot) and every session writes those
//! shared bytes with one `write`: no per-connection copy, no per-connection write buffer.
//! Clients only send control frames (stunnerd pings every 5 s, and closes): [`FrameReader`]
//! parses frames as the bytes arrive, keeps at most one control payload (125 bytes), and
//! skips data payloads without storing them, so what a client sends never costs memory.

use super::store::{Encoding, Frame, Snapshot};
use bytes::{BufMut, Bytes, BytesMut};

const OP_CONTINUATION: u8 = 0x0;
const OP_TEXT: u8 = 0x1;
const OP_BINARY: u8 = 0x2;
const OP_CLOSE: u8 = 0x8;
const OP_PING: u8 = 0x9;
const OP_PONG: u8 = 0xA;

/// Longest payload of a control frame (RFC 6455 §5.5).
const MAX_CONTROL_PAYLOAD: usize = 125;

/// Close status codes we send (RFC 6455 §7.4.1).
pub(crate) const CLOSE_PROTOCOL_ERROR: u16 = 1002;
pub(crate) const CLOSE_TOO_BIG: u16 = 1009;

/// An unfragmented, unmasked text frame carrying `payload`.
pub(crate) fn text_frame(payload: &[u8]) -> Bytes {
    frame(OP_TEXT, payload)
}

/// The WebSocket encoding of a snapshot variant: a complete text frame, written as is to every
/// watch connection.
pub(crate) struct WebSocketFrame;

impl Encoding for WebSocketFrame {
    fn encode(_: &Snapshot, json: &Frame) -> Bytes {
        text_frame(json)
    }
}

/// A Ping with `payload` (at most 125 bytes).
pub(crate) fn ping_frame(payload: &'static [u8]) -> Bytes {
    frame(OP_PING, payload)
}

/// A Close frame: empty, or with a status code.
pub(crate) fn close_frame(code: Option<u16>) -> Bytes {
    match code {
        Some(code) => frame(OP_CLOSE, &code.to_be_bytes()),
        None => frame(OP_CLOSE, &[]),
    }
}

fn frame(opcode: u8, payload: &[u8]) -> Bytes {
    let mut buf = BytesMut::with_capacity(payload.len() + 10);
    buf.put_u8(0x80 | opcode);
    match payload.len() {
        len @ 0..=125 => buf.put_u8(len as u8),
        len @ 126..=0xFFFF => {
            buf.put_u8(126);
            buf.put_u16(len as u16);
        }
        len => {
            buf.put_u8(127);
            buf.put_u64(len as u64);
        }
    }
    buf.put_slice(payload);
    buf.freeze()
}

/// A complete frame from the client.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Event {
    /// A Ping; carries the Pong frame that answers it.
    Ping(Bytes),
    Pong,
    /// A Close, with the status code it carried.
    Close(Option<u16>),
    /// A text, binary or continuation frame (read and dropped).
    Data,
}

/// A client broke the protocol; the connection ends with a Close carrying [`Self::close_code`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ProtocolError {
    /// Client frames must be masked (RFC 6455 §5.1).
    Unmasked,
    /// No extension was negotiated, so the RSV bits must be zero.
    ReservedBits,
    UnknownOpcode(u8),
    /// A control frame longer than 125 bytes or fragmented.
    BadControlFrame,
    /// A Close payload of one byte (a status code needs two).
    BadClosePayload,
    /// A Close with a status code no endpoint may send (the watch protocol's rule:
    /// [`crate::watch_protocol`]).
    BadCloseCode(u16),
    /// A continuation with no message open, or a new message while one is open.
    BadFragmentation,
    /// A message longer than the limit.
    TooBig,
}

impl ProtocolError {
    pub(crate) fn close_code(self) -> u16 {
        match self {
            ProtocolError::TooBig => CLOSE_TOO_BIG,
            _ => CLOSE_PROTOCOL_ERROR,
        }
    }
}

/// Parses client frames incrementally from whatever the socket yields.
#[derive(Debug)]
pub struct FrameReader {
    max_message: u64,
    /// Length of the fragmented data message being received, if one is open.
    open_message: Option<u64>,
    state: State,
}

#[derive(Debug)]
enum State {
    Header {
        bytes: [u8; 14],
        /// At most 14 (a byte: an idle connection's reader is small).
        len: u8,
    },
    /// Boxed: a watch connection waits in `Header` nearly all its life, and the control
    /// buffer would make every idle connection 128 bytes larger.
    Payload(Box<Payload>),
}

#[derive(Debug)]
struct Payload {
    opcode: u8,
    mask: [u8; 4],
    remaining: u64,
    /// Bytes of the payload seen so far (the mask's phase).
    seen: usize,
    /// Unmasked control payload; data payloads are not kept.
    control: [u8; MAX_CONTROL_PAYLOAD],
}

impl FrameReader {
    /// A reader refusing messages longer than `max_message` bytes.
    pub fn new(max_message: usize) -> Self {
        FrameReader { max_message: max_message as u64, open_message: None, state: State::header() }
    }

    /// Consumes `input` up to the end of the first frame it completes. Returns the number of
    /// bytes used (all of `input` when no frame completed) and the frame's event, if any.
    pub fn read(&mut self, input: &[u8]) -> Result<(usize, Option<Event>), ProtocolError> {
        let mut used = 0;
        if let State::Header { bytes, len } = &mut self.state {
            // The first two bytes tell how long the header is; then read the rest of it.
            loop {
                let have = usize::from(*len);
                let want = header_len(&bytes[..have]);
                if have == want {
                    break;
                }
                if used == input.len() {
                    return Ok((used, None));
                }
                let take = (want - have).min(input.len() - used);
                bytes[have..have + take].copy_from_slice(&input[used..used + take]);
                *len += take as u8; // at most 14
                used += take;
            }
            let (header, len) = (*bytes, usize::from(*len));
            self.state = State::Payload(Box::new(self.start_payload(&header[..len])?));
        }
        let State::Payload(payload) = &mut self.state else { unreachable!("header state handled above") };
        let take = payload.remaining.min((input.len() - used) as u64) as usize;
        if is_control(payload.opcode) {
            for (i, b) in input[used..used + take].iter().enumerate() {
                let at = payload.seen + i;
                payload.control[at] = b ^ payload.mask[at % 4];
            }
        }
        payload.seen += take;
        payload.remaining -= take as u64;
        used += take;
        if payload.remaining > 0 {
            return Ok((used, None));
        }
        let State::Payload(done) = std::mem::replace(&mut self.state, State::header()) else { unreachable!() };
        Ok((used, Some((*done).event()?)))
    }

    /// Checks a complete header and what it says about the message in progress.
    fn start_payload(&mut self, header: &[u8]) -> Result<Payload, ProtocolError> {
        let fin = header[0] & 0x80 != 0;
        let opcode = header[0] & 0x0F;
        if header[0] & 0x70 != 0 {
            return Err(ProtocolError::ReservedBits);
        }
        if header[1] & 0x80 == 0 {
            return Err(ProtocolError::Unmasked);
        }
        let (len, mask_at) = match header[1] & 0x7F {
            126 => (u16::from_be_bytes([header[2], header[3]]) as u64, 4),
            127 => (u64::from_be_bytes(header[2..10].try_into().expect("8 bytes")), 10),
            len => (len as u64, 2),
        };
        match opcode {
            OP_CLOSE | OP_PING | OP_PONG => {
                if !fin || len > MAX_CONTROL_PAYLOAD as u64 {
                    return Err(ProtocolError::BadControlFrame);
                }
            }
            OP_TEXT | OP_BINARY | OP_CONTINUATION => {
                let so_far = match (opcode, self.open_message) {
                    (OP_CONTINUATION, Some(so_far)) => so_far,
                    (OP_CONTINUATION, None) | (_, Some(_)) => return Err(ProtocolError::BadFragmentation),
                    _ => 0,
                };
                let total = so_far.saturating_add(len);
                if total > self.max_message {
                    return Err(ProtocolError::TooBig);
                }
                self.open_message = (!fin).then_some(total);
            }
            other => return Err(ProtocolError::UnknownOpcode(other)),
        }
        let mask = header[mask_at..mask_at + 4].try_into().expect("4 bytes");
        Ok(Payload { opcode, mask, remaining: len, seen: 0, control: [0; MAX_CONTROL_PAYLOAD] })
    }
}

impl State {
    fn header() -> Self {
        State::Header { bytes: [0; 14], len: 0 }
    }
}

impl Payload {
    fn event(self) -> Result<Event, ProtocolError> {
        let body = &self.control[..self.seen.min(MAX_CONTROL_PAYLOAD)];
        Ok(match self.opcode {
            OP_PING => Event::Ping(frame(OP_PONG, body)),
            OP_PONG => Event::Pong,
            OP_CLOSE => match body {
                [] => Event::Close(None),
                [_] => return Err(ProtocolError::BadClosePayload),
                [hi, lo, ..] => Event::Close(Some(u16::from_be_bytes([*hi, *lo]))),
            },
            _ => Event::Data,
        })
    }
}

fn is_control(opcode: u8) -> bool {
    opcode & 0x8 != 0
}

/// Length of a frame header given its first bytes; 2 until the second byte is known. An
/// unmasked header is complete without a mask, so it is refused without waiting for more.
fn header_len(start: &[u8]) -> usize {
    let Some(second) = start.get(1) else { return 2 };
    let mask = if second & 0x80 != 0 { 4 } else { 0 };
    match second & 0x7F {
        126 => 2 + 2 + mask,
        127 => 2 + 8 + mask,
        _ => 2 + mask,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A client frame as a browser or gorilla would send it: masked with `mask`.
    fn client_frame(first: u8, payload: &[u8], mask: [u8; 4]) -> Vec<u8> {
        let mut out = vec![first];
        match payload.len() {
            len @ 0..=125 => out.push(0x80 | len as u8),
            len @ 126..=0xFFFF => {
                out.push(0x80 | 126);
                out.extend_from_slice(&(len as u16).to_be_bytes());
            }
            len => {
                out.push(0x80 | 127);
                out.extend_from_slice(&(len as u64).to_be_bytes());
            }
        }
        out.extend_from_slice(&mask);
        out.extend(payload.iter().enumerate().map(|(i, b)| b ^ mask[i % 4]));
        out
    }

    /// Feeds `input` in pieces of `chunk` bytes and collects every event.
    fn events(reader: &mut FrameReader, input: &[u8], chunk: usize) -> Result<Vec<Event>, ProtocolError> {
        let mut out = Vec::new();
        for piece in input.chunks(chunk) {
            let mut rest = piece;
            while !rest.is_empty() {
                let (used, event) = reader.read(rest)?;
                assert!(used > 0, "the reader makes progress");
                rest = &rest[used..];
                out.extend(event);
            }
        }
        Ok(out)
    }

    const MASK: [u8; 4] = [0x37, 0xfa, 0x21, 0x3d];

    #[test]
    fn server_frames_have_the_shortest_length_encoding() {
        assert_eq!(&text_frame(b"hi")[..], b"\x81\x02hi");
        let medium = text_frame(&[b'x'; 300]);
        assert_eq!(&medium[..4], &[0x81, 126, 0x01, 0x2c]);
        assert_eq!(medium.len(), 304);
        let large = text_frame(&vec![b'x'; 70_000]);
        assert_eq!(&large[..10], &[0x81, 127, 0, 0, 0, 0, 0, 0x01, 0x11, 0x70]);
        assert_eq!(&ping_frame(b"keepalive")[..], b"\x89\x09keepalive");
        assert_eq!(&close_frame(None)[..], b"\x88\x00");
        assert_eq!(&close_frame(Some(1002))[..], b"\x88\x02\x03\xea");
    }

    #[test]
    fn answers_a_ping_with_its_payload_whatever_the_chunking() {
        let mut input = client_frame(0x89, b"Hello", MASK);
        input.extend(client_frame(0x8A, b"", MASK));
        input.extend(client_frame(0x88, &1000u16.to_be_bytes(), MASK));
        for chunk in [1, 2, 3, 7, input.len()] {
            let got = events(&mut FrameReader::new(4096), &input, chunk).unwrap();
            assert_eq!(
                got,
                vec![Event::Ping(Bytes::from_static(b"\x8a\x05Hello")), Event::Pong, Event::Close(Some(1000))],
                "chunks of {chunk}"
            );
        }
    }

    #[test]
    fn skips_data_of_every_length_and_fragmented_messages() {
        let mut input = client_frame(0x81, &[b'a'; 125], MASK);
        input.extend(client_frame(0x82, &[7; 300], MASK));
        input.extend(client_frame(0x01, b"frag", MASK));
        input.extend(client_frame(0x89, b"in between", MASK));
        input.extend(client_frame(0x80, b"ment", MASK));
        input.extend(client_frame(0x88, b"", MASK));
        let got = events(&mut FrameReader::new(4096), &input, 5).unwrap();
        assert_eq!(got.len(), 6);
        assert_eq!(&got[..3], &[Event::Data, Event::Data, Event::Data]);
        assert!(matches!(got[3], Event::Ping(_)));
        assert_eq!(&got[4..], &[Event::Data, Event::Close(None)]);
        let mut big = FrameReader::new(1 << 20);
        assert_eq!(events(&mut big, &client_frame(0x82, &vec![1; 70_000], MASK), 4096).unwrap(), vec![Event::Data]);
    }

    #[test]
    fn refuses_what_a_client_may_not_send() {
        let refused = |input: Vec<u8>| events(&mut FrameReader::new(4096), &input, 1000).unwrap_err();
        // Refused as soon as its two bytes are in, with no mask to wait for.
        assert_eq!(FrameReader::new(4096).read(b"\x89\x00"), Err(ProtocolError::Unmasked));
        assert_eq!(refused(client_frame(0xC1, b"x", MASK)), ProtocolError::ReservedBits);
        assert_eq!(refused(client_frame(0x83, b"x", MASK)), ProtocolError::UnknownOpcode(3));
        assert_eq!(refused(client_frame(0x89, &[0; 126], MASK)), ProtocolError::BadControlFrame);
        assert_eq!(refused(client_frame(0x09, b"x", MASK)), ProtocolError::BadControlFrame);
        assert_eq!(refused(client_frame(0x88, b"x", MASK)), ProtocolError::BadClosePayload);
        assert_eq!(refused(client_frame(0x80, b"x", MASK)), ProtocolError::BadFragmentation);
        let mut twice = client_frame(0x01, b"x", MASK);
        twice.extend(client_frame(0x81, b"y", MASK));
        assert_eq!(refused(twice), ProtocolError::BadFragmentation);
        assert_eq!(refused(client_frame(0x81, &[0; 4097], MASK)), ProtocolError::TooBig);
        let mut split = client_frame(0x01, &[0; 4000], MASK);
        split.extend(client_frame(0x80, &[0; 97], MASK));
        assert_eq!(refused(split), ProtocolError::TooBig, "the limit is on the whole message");
        assert_eq!(ProtocolError::TooBig.close_code(), 1009);
        assert_eq!(ProtocolError::Unmasked.close_code(), 1002);
    }
}
