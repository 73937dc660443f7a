//! `auth`: the TURN authentication mode and its credentials.

use super::error::ConfigError;
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::fmt;

pub const DEFAULT_REALM: &str = "stunner.l7mp.io";

#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default)]
pub struct AuthConfig {
    #[serde(rename = "type", skip_serializing_if = "String::is_empty")]
    pub auth_type: String,
    #[serde(skip_serializing_if = "String::is_empty")]
    pub realm: String,
    /// Always emitted (`{}` when empty); keys are sorted like Go's map encoding.
    pub credentials: BTreeMap<String, String>,
}

/// The authentication modes stunnerd distinguishes after normalisation.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum AuthType {
    None,
    Static,
    Ephemeral,
}

impl AuthType {
    /// Parses an auth type with its aliases; unlike other enums this match is case-sensitive.
    pub fn parse(raw: &str) -> Result<Self, ConfigError> {
        match raw {
            "static" | "plaintext" => Ok(AuthType::Static),
            "ephemeral" | "longterm" => Ok(AuthType::Ephemeral),
            "none" => Ok(AuthType::None),
            _ => Err(ConfigError(format!("unknown authentication type: \"{raw}\""))),
        }
    }

    pub(crate) fn as_str(self) -> &'static str {
        match self {
            AuthType::None => "none",
            AuthType::Static => "static",
            AuthType::Ephemeral => "ephemeral",
        }
    }
}

impl AuthConfig {
    /// Applies defaults and checks credentials, as stunnerd's `AuthConfig.Validate`.
    pub(crate) fn validate(&mut self) -> Result<(), ConfigError> {
        let raw = if self.auth_type.is_empty() { "static" } else { &self.auth_type };
        let auth_type = AuthType::parse(raw)?;
        self.auth_type = auth_type.as_str().into();
        match auth_type {
            AuthType::None => {}
            AuthType::Static => {
                if !self.credentials.contains_key("username") || !self.credentials.contains_key("password") {
                    return Err(ConfigError("static: empty username or password".into()));
                }
            }
            AuthType::Ephemeral => {
                if !self.credentials.contains_key("secret") {
                    return Err(ConfigError("no secret found in ephemeral auth config".into()));
                }
            }
        }
        if self.realm.is_empty() {
            self.realm = DEFAULT_REALM.into();
        }
        Ok(())
    }
}

/// Shows which credentials are set without revealing them (never log a secret).
impl fmt::Display for AuthConfig {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let redact = |key: &str| match self.credentials.get(key) {
            None => "-",
            Some(v) if v.is_empty() => "<MISSING>",
            Some(_) => "<SECRET>",
        };
        let mut parts = Vec::new();
        if !self.realm.is_empty() {
            parts.push(format!("realm={:?}", self.realm));
        }
        match AuthType::parse(&self.auth_type) {
            Ok(AuthType::Static) => {
                parts.push(format!("username={:?},password={:?}", redact("username"), redact("password")))
            }
            Ok(AuthType::Ephemeral) => parts.push(format!("secret={:?}", redact("secret"))),
            _ => {}
        }
        write!(f, "{}-auth:{{{}}}", self.auth_type, parts.join(","))
    }
}
