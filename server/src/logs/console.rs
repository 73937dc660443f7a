//! `--zap-encoder=console`: the daemon's lines for people (tracing's layout: time, level,
//! target, message, `key=value` fields), with the time in `--zap-time-encoding` and, as zap's
//! console encoder does, a stack trace on the lines after an event at or above
//! `--zap-stacktrace-level`.

use super::flags::{StacktraceLevel, TimeEncoding};
use super::time::Timestamp;
use tracing::{Event, Subscriber};
use tracing_subscriber::fmt::format::{Format, Full, Writer};
use tracing_subscriber::fmt::time::FormatTime;
use tracing_subscriber::fmt::{FmtContext, FormatEvent, FormatFields};
use tracing_subscriber::registry::LookupSpan;

/// The time of a console line, in a zap time encoding.
#[derive(Debug, Clone, Copy)]
pub struct ZapTime(pub TimeEncoding);

impl FormatTime for ZapTime {
    fn format_time(&self, w: &mut Writer<'_>) -> std::fmt::Result {
        Timestamp::now().write(self.0, w)
    }
}

/// The event formatter of `--zap-encoder=console`.
pub struct Console {
    line: Format<Full, ZapTime>,
    stacktrace: StacktraceLevel,
}

impl Console {
    pub fn new(time: TimeEncoding, stacktrace: StacktraceLevel) -> Self {
        Console { line: tracing_subscriber::fmt::format().with_timer(ZapTime(time)), stacktrace }
    }
}

impl<S, N> FormatEvent<S, N> for Console
where
    S: Subscriber + for<'a> LookupSpan<'a>,
    N: for<'a> FormatFields<'a> + 'static,
{
    fn format_event(&self, ctx: &FmtContext<'_, S, N>, mut writer: Writer<'_>, event: &Event<'_>) -> std::fmt::Result {
        self.line.format_event(ctx, writer.by_ref(), event)?;
        if self.stacktrace.covers(*event.metadata().level()) {
            let trace = std::backtrace::Backtrace::force_capture().to_string();
            writer.write_str(&trace)?;
            if !trace.ends_with('\n') {
                writer.write_char('\n')?;
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::logs::tests::captured;

    #[test]
    fn the_time_encoding_opens_the_line_and_stacktraces_follow_it() {
        let out = captured(Console::new(TimeEncoding::Iso8601, StacktraceLevel::Error), || {
            tracing::info!(address = "127.0.0.1:1", "serving config discovery");
            tracing::error!("failed");
        });
        let first = &out[0];
        // 2026-12-05T09:07:52.123Z INFO ...
        assert_eq!((first.len() > 24, &first[4..5], &first[23..24]), (true, "-", "Z"), "{first}");
        assert!(
            first.contains(" INFO ") && first.ends_with("serving config discovery address=\"127.0.0.1:1\""),
            "{first}"
        );
        assert!(out[1].contains(" ERROR ") && out[1].ends_with("failed"), "{out:?}");
        assert!(out.len() > 2, "a stack trace follows the error: {out:?}");
    }
}
