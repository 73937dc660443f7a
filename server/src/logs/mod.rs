//! The daemon's log lines as controller-runtime's logger flags ask for them: `--zap-encoder`
//! picks zap's JSON lines ([`json`]) or lines for people ([`console`]), `--zap-time-encoding`
//! the time's form ([`time`]), `--zap-stacktrace-level` which events carry a stack trace; the
//! level filter comes from `--zap-log-level` or `RUST_LOG` (`cli::log_filter`). The flags'
//! values are parsed in [`flags`].

pub mod console;
pub mod flags;
pub mod json;
pub mod time;

use flags::{Encoder, StacktraceLevel, TimeEncoding};
use tracing_subscriber::EnvFilter;

/// How the daemon logs, from its flags.
#[derive(Debug)]
pub struct LogSettings {
    pub encoder: Encoder,
    pub filter: EnvFilter,
    pub stacktrace: StacktraceLevel,
    pub time: TimeEncoding,
}

/// Installs the process's logger, writing to stderr. Colours only on a terminal, never in JSON.
pub fn init(settings: LogSettings) {
    let builder = tracing_subscriber::fmt().with_env_filter(settings.filter).with_writer(std::io::stderr);
    match settings.encoder {
        Encoder::Json => {
            let format = json::ZapJson { time: settings.time, stacktrace: settings.stacktrace };
            builder.with_ansi(false).event_format(format).init();
        }
        Encoder::Console => {
            let ansi = std::io::IsTerminal::is_terminal(&std::io::stderr());
            builder.with_ansi(ansi).event_format(console::Console::new(settings.time, settings.stacktrace)).init();
        }
    }
}

#[cfg(test)]
pub(crate) mod tests {
    use std::sync::{Arc, Mutex};
    use tracing_subscriber::Registry;
    use tracing_subscriber::fmt::FormatEvent;
    use tracing_subscriber::fmt::format::DefaultFields;

    /// Collects what a subscriber writes (clone it into `with_writer(move || c.clone())`).
    #[derive(Clone, Default)]
    pub struct Capture(Arc<Mutex<Vec<u8>>>);

    impl Capture {
        /// Everything written so far.
        pub fn text(&self) -> String {
            String::from_utf8(self.0.lock().unwrap().clone()).unwrap()
        }
    }

    impl std::io::Write for Capture {
        fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
            self.0.lock().unwrap().extend_from_slice(buf);
            Ok(buf.len())
        }
        fn flush(&mut self) -> std::io::Result<()> {
            Ok(())
        }
    }

    /// The lines `format` writes for what `emit` logs (every level, no colours).
    pub fn captured(
        format: impl FormatEvent<Registry, DefaultFields> + Send + Sync + 'static,
        emit: impl FnOnce(),
    ) -> Vec<String> {
        let capture = Capture::default();
        let writer = capture.clone();
        let subscriber = tracing_subscriber::fmt()
            .with_max_level(tracing::Level::TRACE)
            .with_ansi(false)
            .with_writer(move || writer.clone())
            .event_format(format)
            .finish();
        tracing::subscriber::with_default(subscriber, emit);
        capture.text().lines().map(String::from).collect()
    }
}
