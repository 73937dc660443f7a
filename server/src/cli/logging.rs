//! The log filter of `--zap-log-level` and `RUST_LOG`.

use crate::logs::flags::Level;

/// Libraries whose debug logs are about each frame of a remote peer (h2 writes two lines per
/// PING frame): a peer would decide how much we log. They log at `info` unless the level asked
/// for is `trace`.
const FRAME_LOGGING_LIBRARIES: [&str; 3] = ["h2", "hyper", "hyper_util"];

/// The log filter: `RUST_LOG` verbatim when it is set and valid (it names every target's level
/// itself, e.g. `debug,h2=debug`), else `--zap-log-level`: `debug` (or `1`), `info`, `error`,
/// a number above 1 for `trace`, `panic` for nothing.
pub fn log_filter(zap_log_level: Level, rust_log: Option<&str>) -> tracing_subscriber::EnvFilter {
    if let Some(filter) =
        rust_log.filter(|s| !s.is_empty()).and_then(|s| tracing_subscriber::EnvFilter::try_new(s).ok())
    {
        return filter;
    }
    let Some(max) = zap_log_level.max_tracing_level() else {
        return tracing_subscriber::EnvFilter::new("off");
    };
    let level = max.as_str().to_ascii_lowercase();
    let mut directives = vec![level.clone()];
    if max != tracing::Level::TRACE {
        // Not above the level asked for: `error` stays `error` for them too.
        let library_level = if max == tracing::Level::DEBUG { "info" } else { level.as_str() };
        directives.extend(FRAME_LOGGING_LIBRARIES.iter().map(|lib| format!("{lib}={library_level}")));
    }
    tracing_subscriber::EnvFilter::new(directives.join(","))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The lines a subscriber with `filter` writes for a debug and a trace line of each target.
    fn logged(filter: tracing_subscriber::EnvFilter) -> String {
        let capture = crate::logs::tests::Capture::default();
        let writer = capture.clone();
        let subscriber = tracing_subscriber::fmt()
            .with_env_filter(filter)
            .with_writer(move || writer.clone())
            .with_ansi(false)
            .finish();
        tracing::subscriber::with_default(subscriber, || {
            tracing::debug!(target: "h2::codec::framed_read", "h2 debug: received Ping");
            tracing::trace!(target: "h2::codec::framed_read", "h2 trace");
            tracing::debug!(target: "hyper::proto::h1::conn", "hyper debug");
            tracing::debug!(target: "hyper_util::client::legacy::pool", "hyper_util debug");
            tracing::debug!(target: "stunner_gateway_cds", "ours debug");
            tracing::trace!(target: "stunner_gateway_cds", "ours trace");
            tracing::info!(target: "hyper::server", "hyper info");
        });
        capture.text()
    }

    #[test]
    fn debug_level_keeps_library_frame_logs_out() {
        for level in [Level::Debug, Level::Verbosity(1)] {
            let log = logged(log_filter(level, None));
            assert!(log.contains("ours debug") && log.contains("hyper info"), "{level:?}: {log}");
            for quiet in ["h2 debug", "hyper debug", "hyper_util debug", "ours trace"] {
                assert!(!log.contains(quiet), "{level:?}: {quiet} in\n{log}");
            }
        }
        // Only trace shows them.
        let log = logged(log_filter(Level::Verbosity(2), None));
        for shown in ["h2 debug", "h2 trace", "hyper debug", "ours trace"] {
            assert!(log.contains(shown), "{shown} not in\n{log}");
        }
        let log = logged(log_filter(Level::Error, None));
        assert!(!log.contains("hyper info"), "{log}");
        assert!(logged(log_filter(Level::Panic, None)).is_empty());
        // RUST_LOG says for itself; an invalid one falls back to the flag.
        let log = logged(log_filter(Level::Info, Some("debug,h2=debug")));
        assert!(log.contains("h2 debug") && log.contains("ours debug"), "{log}");
        let log = logged(log_filter(Level::Debug, Some("debug,h2=notalevel")));
        assert!(log.contains("ours debug") && !log.contains("h2 debug"), "{log}");
    }
}
