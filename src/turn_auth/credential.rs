//! A config's TURN credential, as stunnerd checks it.
//!
//! Static auth hands out the configured username and password. Ephemeral (time-windowed)
//! auth follows the "REST API For Access To TURN Services" draft
//! (draft-uberti-behave-turn-rest-00) as stunner's `pkg/authentication` implements it: the
//! username is `<expiry unix time>:<user id>` (a trailing colon without a user id), the
//! password the base64 of HMAC-SHA1(shared secret, username).

use crate::config::{AuthType, StunnerConfig};
use base64::Engine;
use hmac::{Hmac, Mac};
use sha1::Sha1;
use std::time::{SystemTime, UNIX_EPOCH};

/// The auth service's default credential lifetime: one day, in seconds.
pub const DEFAULT_TTL_SECS: i64 = 86_400;

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum AuthError {
    #[error("gateway {gateway} has authentication type \"none\": no TURN credentials to hand out")]
    NoCredentials { gateway: String },

    #[error("gateway {gateway}: {reason}")]
    Invalid { gateway: String, reason: String },
}

/// One TURN credential, good for every listener of a Gateway.
#[derive(Clone, PartialEq, Eq)]
pub struct Credential {
    pub username: String,
    pub password: String,
}

impl std::fmt::Debug for Credential {
    /// The password is a secret: said to be there, never shown.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Credential").field("username", &self.username).field("password", &"<redacted>").finish()
    }
}

/// The credential of a config's auth. `user_id` and `ttl_secs` (which may be zero or
/// negative, as the service takes any integer) matter for ephemeral auth only; `now` is when
/// the validity window starts. The auth type takes the service's aliases: `static` and
/// `plaintext`; `ephemeral`, `timewindowed` and `longterm`; `none` has no credential.
pub fn credential(
    config: &StunnerConfig,
    user_id: &str,
    ttl_secs: i64,
    now: SystemTime,
) -> Result<Credential, AuthError> {
    let gateway = || config.admin.name.clone();
    let invalid = |reason: String| AuthError::Invalid { gateway: gateway(), reason };
    let cred = |key: &str| config.auth.credentials.get(key).cloned();
    let raw_type = match config.auth.auth_type.as_str() {
        "" => "static",
        "timewindowed" => "ephemeral",
        other => other,
    };
    match AuthType::parse(raw_type).map_err(|e| invalid(e.to_string()))? {
        AuthType::Static => match (cred("username"), cred("password")) {
            (Some(username), Some(password)) => Ok(Credential { username, password }),
            _ => Err(invalid("static auth without a username or password".into())),
        },
        AuthType::Ephemeral => {
            let secret = cred("secret").ok_or_else(|| invalid("ephemeral auth without a shared secret".into()))?;
            let username = timewindowed_username(now, ttl_secs, user_id);
            let password = timewindowed_password(&username, &secret);
            Ok(Credential { username, password })
        }
        AuthType::None => Err(AuthError::NoCredentials { gateway: gateway() }),
    }
}

/// `<now + ttl, unix seconds>:<user id>`.
fn timewindowed_username(now: SystemTime, ttl_secs: i64, user_id: &str) -> String {
    let now = match now.duration_since(UNIX_EPOCH) {
        Ok(d) => i64::try_from(d.as_secs()).unwrap_or(i64::MAX),
        Err(before) => -i64::try_from(before.duration().as_secs()).unwrap_or(i64::MAX),
    };
    format!("{}:{user_id}", now.saturating_add(ttl_secs))
}

/// base64(HMAC-SHA1(secret, username)): stunner's `GetLongTermCredential`.
pub fn timewindowed_password(username: &str, secret: &str) -> String {
    let mut mac = Hmac::<Sha1>::new_from_slice(secret.as_bytes()).expect("HMAC takes keys of any length");
    mac.update(username.as_bytes());
    base64::engine::general_purpose::STANDARD.encode(mac.finalize().into_bytes())
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    fn hex(s: &str) -> Vec<u8> {
        (0..s.len()).step_by(2).map(|i| u8::from_str_radix(&s[i..i + 2], 16).unwrap()).collect()
    }

    #[test]
    fn hmac_sha1_matches_rfc_2202_and_the_services_vector() {
        // RFC 2202 test case 2: key "Jefe", data "what do ya want for nothing?".
        let want = base64::engine::general_purpose::STANDARD.encode(hex("effcdf6ae5eb2fa2d27416d5f184df9c259a7c79"));
        assert_eq!(timewindowed_password("what do ya want for nothing?", "Jefe"), want);
        // What upstream's service answered (docs: the credential API's test vector).
        assert_eq!(timewindowed_password("1796463320:u1", "bar-shared-secret"), "Vy0eRoHjjf4EjI1DvIPKzS0as44=");
    }

    fn with_auth(auth_type: &str, credentials: &[(&str, &str)]) -> StunnerConfig {
        let mut c = StunnerConfig::zero("ns/gw");
        c.auth.auth_type = auth_type.into();
        c.auth.credentials = credentials.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect();
        c
    }

    #[test]
    fn ephemeral_usernames_carry_the_expiry_under_every_alias() {
        let now = UNIX_EPOCH + Duration::from_millis(1_700_000_000_900);
        for alias in ["ephemeral", "timewindowed", "longterm"] {
            let c = with_auth(alias, &[("secret", "my-secret")]);
            let cred = credential(&c, "alice", 3600, now).unwrap();
            assert_eq!(cred.username, "1700003600:alice");
            assert_eq!(cred.password, timewindowed_password("1700003600:alice", "my-secret"));
        }
        let c = with_auth("ephemeral", &[("secret", "s")]);
        assert_eq!(credential(&c, "", DEFAULT_TTL_SECS, now).unwrap().username, "1700086400:", "trailing colon");
        assert_eq!(credential(&c, "u", -100, now).unwrap().username, "1699999900:u", "any integer");
        assert!(matches!(credential(&with_auth("ephemeral", &[]), "", 1, now), Err(AuthError::Invalid { .. })));
    }

    #[test]
    fn static_credentials_whatever_the_user_and_none_has_none() {
        let now = SystemTime::now();
        for alias in ["static", "plaintext", ""] {
            let c = with_auth(alias, &[("username", "user-1"), ("password", "pass-1")]);
            let cred = credential(&c, "someone", 5, now).unwrap();
            assert_eq!((cred.username.as_str(), cred.password.as_str()), ("user-1", "pass-1"));
            assert!(!format!("{cred:?}").contains("pass-1"), "the password never shows in Debug");
        }
        assert!(matches!(
            credential(&with_auth("static", &[("username", "u")]), "", 1, now),
            Err(AuthError::Invalid { .. })
        ));
        assert!(matches!(credential(&with_auth("none", &[]), "", 1, now), Err(AuthError::NoCredentials { .. })));
        assert!(matches!(credential(&with_auth("Static", &[]), "", 1, now), Err(AuthError::Invalid { .. })));
    }
}
