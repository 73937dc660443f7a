//! Config versions: a digest of what the dataplane runs, not a counter.
//!
//! Replicas of the operator render the same cluster state into the same configs, so a
//! digest gives the same version on every replica and across restarts: a client that
//! reconnects to another replica and resumes from the version it holds is sent nothing.
//! The price is that versions are not ordered; they are only ever compared for equality.

use std::fmt;
use stunner_gateway::config::StunnerConfig;

/// [`StunnerConfig::digest`]: configs that differ only in defaults the dataplane fills in
/// (which the store treats as equal) share a version.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Version(u64);

impl Version {
    pub fn of(config: &StunnerConfig) -> Self {
        Version(config.digest())
    }

    /// Parses the wire form (16 hex digits); anything else is no version.
    pub fn parse(s: &str) -> Option<Self> {
        (s.len() == 16).then(|| u64::from_str_radix(s, 16).ok().map(Version)).flatten()
    }
}

/// The wire form: 16 lower-case hex digits.
impl fmt::Display for Version {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{:016x}", self.0)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn equal_after_normalisation_means_equal_version() {
        let plain = StunnerConfig::zero("ns/a");
        let mut explicit = plain.clone();
        explicit.admin.loglevel = "all:INFO".into();
        assert_eq!(Version::of(&plain), Version::of(&explicit));
        let mut other = plain.clone();
        other.auth.realm = "elsewhere".into();
        assert_ne!(Version::of(&plain), Version::of(&other));
    }

    #[test]
    fn wire_form_round_trips() {
        let v = Version::of(&StunnerConfig::zero("ns/a"));
        let s = v.to_string();
        assert_eq!(s.len(), 16);
        assert!(s.chars().all(|c| c.is_ascii_hexdigit() && !c.is_ascii_uppercase()));
        assert_eq!(Version::parse(&s), Some(v));
        assert_eq!(Version::parse("xyz"), None);
        assert_eq!(Version::parse(&format!("{s}0")), None);
    }

    /// Pinned so that a change of the digest (which would make every client refetch after
    /// an upgrade) is a deliberate decision.
    #[test]
    fn digest_is_stable_across_builds() {
        assert_eq!(Version::of(&StunnerConfig::zero("ns/a")).to_string(), PINNED_ZERO_NS_A);
    }

    const PINNED_ZERO_NS_A: &str = "f618c560d48a0d64";
}
