//! The WebRTC side of the ICE test (`stunnerctl icetest` and the `icetester` peer): a data
//! channel between two peers, one of them (or both) behind a TURN allocation on a STUNner
//! Gateway, and the packets timed over it.
//!
//! Why these crates. WebRTC is str0m's: a maintained sans-IO stack with full ICE, DTLS and SCTP
//! data channels, no runtime of its own (this crate drives it on tokio, [`link`]), and with its
//! `rust-crypto` provider no C library to link (webrtc-rs is the other Rust stack: it brings its
//! own runtime and sockets, which a test that must route every datagram through a TURN
//! allocation would have to work around). str0m has no TURN client, and TURN is
//! `turn-client-proto`'s (ystreet/turn-proto, the TURN client of the `librice` ICE stack): sans-IO
//! too, with long-term credentials, permissions, Send/Data indications and channels over UDP and
//! TCP framing, so [`relay`] only fixes what one allocation for one test needs of it.
//! `stun_codec` would have left the TURN state machine (401 retry, nonces, refreshes,
//! permissions) to write here.
//!
//! The sans-IO parts ([`relay`], [`peer`], [`candidate`], [`stats`]) are tested without
//! sockets; [`link`] and [`probe`] put them on sockets, [`whip`] exchanges the SDPs and sets
//! the tester's config ([`tester_config`]: relayed or not, through which [`turn_uri`]).

pub mod candidate;
pub mod error;
pub mod link;
pub mod peer;
pub mod probe;
pub mod relay;
pub mod stats;
pub mod tester_config;
pub mod turn_uri;
pub mod whip;
