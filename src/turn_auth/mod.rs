//! TURN credentials and ICE server configurations from a Gateway's config: what STUNner's
//! authentication service (l7mp/stunner-auth-service) hands to WebRTC application servers.
//! One implementation for the operator's credential API and for `stunnerctl auth`.
//!
//! - [`credential`]: the username and password of a config's auth, static or ephemeral.
//! - [`uri`]: the `turn:`/`turns:` URI of a listener.
//! - [`bodies`]: the JSON bodies of the service's two answers, keys in its order.

pub mod bodies;
pub mod credential;
pub mod uri;

pub use bodies::{IceConfig, IceServer, TurnCredential};
pub use credential::{AuthError, Credential, DEFAULT_TTL_SECS, credential, timewindowed_password};
pub use uri::{listener_uris, uris};
