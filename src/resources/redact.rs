//! How the CRD types' `Debug` output shows secrets: that one is set, never what it is.

/// How secrets show in `Debug` output.
pub(crate) fn redacted(secret: &Option<String>) -> Option<&'static str> {
    secret.as_ref().map(|_| "<redacted>")
}
