//! The StunnerConfig JSON decode (what a CDS client reads, what stunnerctl and the tests parse).
//!
//! For every document that decodes: the wire encoding decodes back to the same config and is
//! stable; it carries no character stunnerd's YAML parser chokes on nor Go's HTML-unsafe ones
//! raw; validation is idempotent and the digest (the CDS version) is that of the normalised
//! config; and the log form never shows a credential, certificate or key.

#![no_main]

use libfuzzer_sys::fuzz_target;
use stunner_gateway::config::StunnerConfig;

fuzz_target!(|data: &[u8]| {
    let Ok(config) = serde_json::from_slice::<StunnerConfig>(data) else { return };
    let json = config.to_json();
    let back: StunnerConfig = serde_json::from_str(&json).expect("our encoding decodes");
    assert_eq!(back, config, "decode → encode → decode");
    assert_eq!(back.to_json(), json, "the encoding is stable");
    let unsafe_char = |c: char| {
        matches!(c, '<' | '>' | '&' | '\u{7f}'..='\u{9f}' | '\u{2028}' | '\u{2029}' | '\u{fffe}' | '\u{ffff}')
    };
    assert!(!json.chars().any(unsafe_char), "raw YAML- or HTML-unsafe character in {json}");

    if let Ok(normalized) = config.normalized() {
        assert_eq!(normalized.normalized().as_ref(), Ok(&normalized), "validation is idempotent");
        assert_eq!(normalized.digest(), config.digest(), "the digest is the normalised config's");
    }

    let logged = config.to_string();
    for secret in secrets(&config) {
        // Only a secret that nothing else in the log form spells out (the other fields, the
        // redaction markers) can be told apart.
        let elsewhere = format!("{} <SECRET> <MISSING>", without_secrets(&config));
        if secret.len() >= 8 && !elsewhere.contains(secret.as_str()) {
            assert!(!logged.contains(secret.as_str()), "a secret in the log form: {logged}");
        }
    }
});

fn secrets(config: &StunnerConfig) -> Vec<String> {
    let listeners = config.listeners.iter().flat_map(|l| [l.cert.clone(), l.key.clone()]);
    config.auth.credentials.values().cloned().chain(listeners).collect()
}

/// `config` with every secret (credential values, certificates, keys) emptied.
fn without_secrets(config: &StunnerConfig) -> StunnerConfig {
    let mut c = config.clone();
    c.auth.credentials.values_mut().for_each(String::clear);
    for l in &mut c.listeners {
        l.cert.clear();
        l.key.clear();
    }
    c
}
