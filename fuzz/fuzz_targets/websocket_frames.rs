//! The CDS WebSocket frame reader (what a watch client sends after the upgrade).
//!
//! Input: four chunk sizes, then the client's bytes. The reader must (1) always make progress,
//! (2) give the same events and the same error whatever the chunking (bytes arrive as the
//! socket yields them), and (3) agree with a reference reading of RFC 6455 from the whole
//! buffer, Pong payloads included.

#![no_main]

use bytes::Bytes;
use libfuzzer_sys::fuzz_target;
use stunner_gateway_operator::fuzzing::{Event, FrameReader, ProtocolError};

/// The session's default limit on a client message.
const MAX_MESSAGE: u64 = 4096;

type Outcome = (Vec<Event>, Option<ProtocolError>);

fuzz_target!(|data: &[u8]| {
    let Some((sizes, input)) = data.split_first_chunk::<4>() else { return };
    // 1..=64 bytes per read, or everything at once.
    let chunks: Vec<usize> =
        sizes.iter().map(|&b| if b == 0xFF { input.len().max(1) } else { 1 + usize::from(b % 64) }).collect();
    let whole = read(input, &[input.len().max(1)]);
    let chunked = read(input, &chunks);
    assert_eq!(whole, chunked, "chunking changed the outcome (chunks {chunks:?})");
    assert_eq!(whole, reference(input), "the reader disagrees with RFC 6455");
});

/// Feeds `input` in pieces of the sizes of `chunks` (cycled) until the first error.
fn read(input: &[u8], chunks: &[usize]) -> Outcome {
    let mut reader = FrameReader::new(MAX_MESSAGE as usize);
    let mut events = Vec::new();
    for piece in chunks.iter().cycle().scan(0, |at, &n| {
        let start = *at;
        *at = (start + n).min(input.len());
        (start < input.len()).then(|| &input[start..*at])
    }) {
        let mut rest = piece;
        while !rest.is_empty() {
            match reader.read(rest) {
                Ok((used, event)) => {
                    assert!(used > 0 && used <= rest.len(), "used {used} of {}", rest.len());
                    rest = &rest[used..];
                    events.extend(event);
                }
                Err(e) => return (events, Some(e)),
            }
        }
    }
    (events, None)
}

/// The client-frame rules of RFC 6455 (§5.2, §5.4, §5.5, §5.1: masked, no extensions), read
/// from a complete buffer; a frame cut short by the end of input is no event and no error. A
/// frame is judged once its header is complete (an unmasked header has no mask to wait for).
fn reference(input: &[u8]) -> Outcome {
    let mut events = Vec::new();
    let mut open: Option<u64> = None;
    let mut at = 0;
    loop {
        let rest = &input[at..];
        let &[b0, b1, ..] = rest else { return (events, None) };
        let masked = b1 & 0x80 != 0;
        let (len_bytes, short) = match b1 & 0x7F {
            126 => (2, None),
            127 => (8, None),
            n => (0, Some(u64::from(n))),
        };
        let header = 2 + len_bytes + if masked { 4 } else { 0 };
        if rest.len() < header {
            return (events, None);
        }
        let fail = |e| (events.clone(), Some(e));
        if b0 & 0x70 != 0 {
            return fail(ProtocolError::ReservedBits);
        }
        if !masked {
            return fail(ProtocolError::Unmasked);
        }
        let len = short.unwrap_or_else(|| rest[2..2 + len_bytes].iter().fold(0u64, |n, &b| n << 8 | u64::from(b)));
        let (fin, opcode) = (b0 & 0x80 != 0, b0 & 0x0F);
        match opcode {
            0x8..=0xA if !fin || len > 125 => return fail(ProtocolError::BadControlFrame),
            0x8..=0xA => {}
            0x0..=0x2 => {
                let so_far = match (opcode, open) {
                    (0, Some(n)) => n,
                    (0, None) | (_, Some(_)) => return fail(ProtocolError::BadFragmentation),
                    _ => 0,
                };
                let total = so_far.saturating_add(len);
                if total > MAX_MESSAGE {
                    return fail(ProtocolError::TooBig);
                }
                open = (!fin).then_some(total);
            }
            other => return fail(ProtocolError::UnknownOpcode(other)),
        }
        let mask = &rest[header - 4..header];
        if ((rest.len() - header) as u64) < len {
            return (events, None);
        }
        let payload: Vec<u8> =
            rest[header..header + len as usize].iter().enumerate().map(|(i, b)| b ^ mask[i % 4]).collect();
        let event = match opcode {
            0x9 => {
                let mut pong = vec![0x8A, payload.len() as u8];
                pong.extend_from_slice(&payload);
                Event::Ping(Bytes::from(pong))
            }
            0xA => Event::Pong,
            0x8 => match payload.as_slice() {
                [] => Event::Close(None),
                [_] => return fail(ProtocolError::BadClosePayload),
                [hi, lo, ..] => Event::Close(Some(u16::from_be_bytes([*hi, *lo]))),
            },
            _ => Event::Data,
        };
        events.push(event);
        at += header + len as usize;
    }
}
