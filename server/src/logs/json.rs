//! zap's JSON lines, as controller-runtime's production encoder writes them: one object per
//! line, `level`, `ts`, `logger`, `msg`, then the event's fields flattened beside them, then
//! `stacktrace` when the event is at or above `--zap-stacktrace-level`. Log pipelines built
//! for the Go operator parse these lines unchanged.
//!
//! Fields are written from what tracing records: numbers and booleans as JSON numbers and
//! booleans, everything else as the string its `Display` or `Debug` makes. Secrets never get
//! here by another road: the resource types redact their `Debug` output, and nothing is
//! serialised field by field. The daemon opens no spans, so only the event's own fields are
//! written (libraries' span fields are left out).

use super::flags::{StacktraceLevel, TimeEncoding};
use super::time::Timestamp;
use tracing::field::{Field, Visit};
use tracing::{Event, Subscriber};
use tracing_log::NormalizeEvent;
use tracing_subscriber::fmt::format::Writer;
use tracing_subscriber::fmt::{FmtContext, FormatEvent, FormatFields};
use tracing_subscriber::registry::LookupSpan;

/// The event formatter of `--zap-encoder=json`.
pub struct ZapJson {
    pub time: TimeEncoding,
    pub stacktrace: StacktraceLevel,
}

/// zap's lower-case level names. zap writes levels more verbose than debug as `Level(-2)` and
/// so on; here they are `debug`, a name every pipeline knows.
fn level_name(level: tracing::Level) -> &'static str {
    match level {
        tracing::Level::ERROR => "error",
        tracing::Level::WARN => "warn",
        tracing::Level::INFO => "info",
        _ => "debug",
    }
}

impl<S, N> FormatEvent<S, N> for ZapJson
where
    S: Subscriber + for<'a> LookupSpan<'a>,
    N: for<'a> FormatFields<'a> + 'static,
{
    fn format_event(&self, _ctx: &FmtContext<'_, S, N>, mut writer: Writer<'_>, event: &Event<'_>) -> std::fmt::Result {
        // Events of the `log` crate carry their own target; tracing's is `log`.
        let normalized = event.normalized_metadata();
        let meta = normalized.as_ref().unwrap_or_else(|| event.metadata());
        let mut fields = Fields::default();
        event.record(&mut fields);

        let mut line = String::with_capacity(128 + fields.message.len() + fields.rest.len());
        line.push_str("{\"level\":\"");
        line.push_str(level_name(*meta.level()));
        line.push_str("\",\"ts\":");
        // A time's text has nothing to escape.
        let quote = if Timestamp::is_number(self.time) { "" } else { "\"" };
        line.push_str(quote);
        Timestamp::now().write(self.time, &mut line)?;
        line.push_str(quote);
        line.push_str(",\"logger\":");
        push_json_string(&mut line, meta.target());
        line.push_str(",\"msg\":\"");
        line.push_str(&fields.message);
        line.push('"');
        line.push_str(&fields.rest);
        if self.stacktrace.covers(*meta.level()) {
            line.push_str(",\"stacktrace\":");
            push_json_string(&mut line, &std::backtrace::Backtrace::force_capture().to_string());
        }
        line.push_str("}\n");
        writer.write_str(&line)
    }
}

/// A JSON string literal of `s`, escaped.
fn push_json_string(out: &mut String, s: &str) {
    out.push('"');
    escape_into(out, s);
    out.push('"');
}

/// Appends `s` escaped as zap's JSON encoder escapes a string: `"` and `\` behind a backslash,
/// `\n`, `\r` and `\t` by name, every other byte under 0x20 as `\u00xx` (zap writes `\b` and
/// `\f` so too, where serde_json names them), everything else as it is (`<`, `>`, `&`, U+2028:
/// zap leaves them, as it leaves no HTML to guard).
fn escape_into(out: &mut String, s: &str) {
    const HEX: &[u8; 16] = b"0123456789abcdef";
    let mut plain = 0;
    for (i, b) in s.bytes().enumerate() {
        let named = match b {
            b'"' => "\\\"",
            b'\\' => "\\\\",
            b'\n' => "\\n",
            b'\r' => "\\r",
            b'\t' => "\\t",
            0..0x20 => "",
            _ => continue,
        };
        // `i` is an ASCII byte's: a char boundary.
        out.push_str(&s[plain..i]);
        if named.is_empty() {
            out.push_str("\\u00");
            out.push(char::from(HEX[usize::from(b >> 4)]));
            out.push(char::from(HEX[usize::from(b & 0xf)]));
        } else {
            out.push_str(named);
        }
        plain = i + 1;
    }
    out.push_str(&s[plain..]);
}

/// Escapes what is written through it (a `Debug` or `Display` value) straight into a line.
struct Escaping<'a>(&'a mut String);

impl std::fmt::Write for Escaping<'_> {
    fn write_str(&mut self, s: &str) -> std::fmt::Result {
        escape_into(self.0, s);
        Ok(())
    }
}

/// An event's fields, escaped as they are recorded: the message apart (its string literal's
/// contents), the rest as `,"key":value` in the order recorded.
#[derive(Default)]
struct Fields {
    message: String,
    rest: String,
}

impl Fields {
    /// Appends a field's `,"key":`, unless it is none of the line's (`log.*`: the `log`
    /// crate's metadata, which the normalized metadata has).
    fn key(&mut self, field: &Field) -> bool {
        if field.name().starts_with("log.") {
            return false;
        }
        self.rest.push(',');
        push_json_string(&mut self.rest, field.name());
        self.rest.push(':');
        true
    }

    /// Appends a field with its value already in JSON.
    fn push(&mut self, field: &Field, json: &str) {
        if self.key(field) {
            self.rest.push_str(json);
        }
    }

    /// A field as a JSON string of what `text` writes; the message apart.
    fn push_text(&mut self, field: &Field, text: impl std::fmt::Display) {
        use std::fmt::Write;
        if field.name() == "message" {
            self.message.clear();
            let _ = write!(Escaping(&mut self.message), "{text}");
        } else if self.key(field) {
            self.rest.push('"');
            // Writing into a String cannot fail.
            let _ = write!(Escaping(&mut self.rest), "{text}");
            self.rest.push('"');
        }
    }
}

impl Visit for Fields {
    fn record_debug(&mut self, field: &Field, value: &dyn std::fmt::Debug) {
        self.push_text(field, format_args!("{value:?}"));
    }

    fn record_str(&mut self, field: &Field, value: &str) {
        self.push_text(field, value);
    }

    fn record_i64(&mut self, field: &Field, value: i64) {
        self.push(field, &value.to_string());
    }

    fn record_u64(&mut self, field: &Field, value: u64) {
        self.push(field, &value.to_string());
    }

    fn record_i128(&mut self, field: &Field, value: i128) {
        self.push(field, &value.to_string());
    }

    fn record_u128(&mut self, field: &Field, value: u128) {
        self.push(field, &value.to_string());
    }

    fn record_bool(&mut self, field: &Field, value: bool) {
        self.push(field, if value { "true" } else { "false" });
    }

    fn record_f64(&mut self, field: &Field, value: f64) {
        // JSON has no NaN or infinities; zap writes them as the strings "NaN", "+Inf", "-Inf".
        if value.is_finite() {
            self.push(field, &value.to_string());
        } else {
            let text = if value.is_nan() {
                "NaN"
            } else if value > 0.0 {
                "+Inf"
            } else {
                "-Inf"
            };
            self.push_text(field, text);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::logs::tests::captured;
    use serde_json::Value;

    fn lines(time: TimeEncoding, stacktrace: StacktraceLevel, emit: impl FnOnce()) -> Vec<String> {
        captured(ZapJson { time, stacktrace }, emit)
    }

    #[test]
    fn zap_keys_in_zaps_order_then_the_fields() {
        let out = lines(TimeEncoding::Rfc3339Nano, StacktraceLevel::Panic, || {
            let err = std::io::Error::other("no \"route\"\nhere");
            tracing::info!(target: "stunner_gateway_cds", address = %"127.0.0.1:13478", clients = 3_u64, ready = true, "serving config discovery");
            tracing::error!(error = %err, delta = -1_i64, ratio = 0.5, inf = f64::INFINITY, "cannot apply");
            tracing::warn!(target: "h2", "no fields");
        });
        assert_eq!(out.len(), 3, "{out:?}");
        for line in &out {
            assert!(line.starts_with("{\"level\":\"") && line.contains("\",\"ts\":\""), "{line}");
            let v: Value = serde_json::from_str(line).unwrap();
            // serde_json's map sorts its keys: the order is read off the text.
            let at: Vec<_> = ["\"level\":", ",\"ts\":", ",\"logger\":", ",\"msg\":"].map(|k| line.find(k)).into();
            assert!(at.iter().all(Option::is_some) && at.is_sorted(), "{line}");
            assert!(v["ts"].as_str().unwrap().ends_with('Z'), "{line}");
        }
        let first: Value = serde_json::from_str(&out[0]).unwrap();
        assert_eq!(first["level"], "info");
        assert_eq!(first["logger"], "stunner_gateway_cds");
        assert_eq!(first["msg"], "serving config discovery");
        assert_eq!(first["address"], "127.0.0.1:13478");
        assert_eq!(first["clients"], 3);
        assert_eq!(first["ready"], true);
        // The fields in the order they were given, after msg.
        let (a, c) = (out[0].find("\"address\"").unwrap(), out[0].find("\"clients\"").unwrap());
        assert!(out[0].find("\"msg\"").unwrap() < a && a < c, "{}", out[0]);
        let second: Value = serde_json::from_str(&out[1]).unwrap();
        assert_eq!(second["level"], "error");
        assert_eq!(second["error"], "no \"route\"\nhere");
        assert_eq!((second["delta"].as_i64(), second["ratio"].as_f64()), (Some(-1), Some(0.5)));
        assert_eq!(second["inf"], "+Inf");
        assert!(second.get("stacktrace").is_none());
        let third: Value = serde_json::from_str(&out[2]).unwrap();
        assert_eq!((third["level"].as_str(), third["logger"].as_str()), (Some("warn"), Some("h2")));
    }

    /// zap's escapes (zapcore's `safeAppendStringLike`), in a message, a field's name and its
    /// value alike: where serde_json writes `\b` and `\f`, zap writes `\u0008` and `\u000c`.
    #[test]
    fn strings_escape_as_zaps() {
        let nasty = "q\"b\\n\nr\rt\tbs\u{8}ff\u{c}nul\u{0}us\u{1f}del\u{7f}<a&b> \u{2028}é😀";
        // DEL, `<`, `&` and U+2028 as they are.
        let zap = concat!(r#""q\"b\\n\nr\rt\tbs\u0008ff\u000cnul\u0000us\u001fdel"#, "\u{7f}<a&b> \u{2028}é😀\"");
        let mut out = String::new();
        push_json_string(&mut out, nasty);
        assert_eq!(out, zap);
        assert_eq!(serde_json::from_str::<String>(&out).unwrap(), nasty, "JSON that reads back");
        let line = &lines(TimeEncoding::Rfc3339, StacktraceLevel::Panic, || tracing::info!(text = nasty, "{nasty}"))[0];
        assert!(line.contains(&format!(",\"msg\":{zap},\"text\":{zap}}}")), "{line}");
    }

    #[test]
    fn epoch_times_are_numbers_and_stacktraces_follow_their_level() {
        let out = lines(TimeEncoding::Epoch, StacktraceLevel::Error, || {
            tracing::error!("failed");
            tracing::info!("fine");
        });
        let failed: Value = serde_json::from_str(&out[0]).unwrap();
        assert!(failed["ts"].as_f64().unwrap() > 1.7e9, "{}", out[0]);
        assert!(!failed["stacktrace"].as_str().unwrap().is_empty());
        assert!(out[0].rfind("\"stacktrace\"").unwrap() > out[0].find("\"msg\"").unwrap(), "stacktrace last");
        let fine: Value = serde_json::from_str(&out[1]).unwrap();
        assert!(fine.get("stacktrace").is_none());
        let out = lines(TimeEncoding::Nanos, StacktraceLevel::Info, || tracing::info!("fine"));
        let fine: Value = serde_json::from_str(&out[0]).unwrap();
        assert!(fine["ts"].is_u64() && fine["stacktrace"].is_string(), "{}", out[0]);
    }

    /// The cost of one JSON line, formatted and thrown away: a message, a string field with
    /// characters to escape, a number and a `Display` value, for each of the time encodings
    /// that write text and a number. A timing harness, not a check: run it in release mode,
    /// `LOG_LINES` lines each (default 100,000):
    /// `cargo test --release -p stunner-gateway-operator --lib -- --ignored --nocapture log_line_cost`.
    #[test]
    #[ignore = "a timing harness"]
    fn log_line_cost() {
        let lines: u32 = std::env::var("LOG_LINES").ok().and_then(|n| n.parse().ok()).unwrap_or(100_000);
        let address: std::net::SocketAddr = "10.0.1.23:13478".parse().unwrap();
        for time in [TimeEncoding::Rfc3339Nano, TimeEncoding::Iso8601, TimeEncoding::Epoch] {
            let format = ZapJson { time, stacktrace: StacktraceLevel::Panic };
            let subscriber = tracing_subscriber::fmt().with_writer(std::io::sink).event_format(format).finish();
            let started = std::time::Instant::now();
            tracing::subscriber::with_default(subscriber, || {
                for i in 0..lines {
                    tracing::info!(
                        gateway = "stunner/udp-gateway",
                        error = "no \"route\"\n\there",
                        version = u64::from(i),
                        %address,
                        "config updated"
                    );
                }
            });
            let per_line = started.elapsed().as_nanos() as f64 / f64::from(lines);
            println!("log_line_cost: {time:?}: {per_line:.0} ns per line ({lines} lines)");
        }
    }
}
