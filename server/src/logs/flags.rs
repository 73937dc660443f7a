//! The values of controller-runtime's logger flags (`--zap-*`), as its flag parsers take them:
//! the same names, case-insensitive, and the same refusals. A value they do not know is an
//! error naming the flag at start, never a silent fallback.

use std::str::FromStr;

/// A `--zap-*` value that controller-runtime would refuse too.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("invalid value {value:?} (one of {expected})")]
pub struct UnknownValue {
    value: String,
    expected: &'static str,
}

fn unknown(value: &str, expected: &'static str) -> UnknownValue {
    UnknownValue { value: value.into(), expected }
}

/// `--zap-encoder`: how a line is laid out.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Encoder {
    /// One JSON object per line with zap's production keys.
    Json,
    /// A line for people: time, level, where, message, fields.
    Console,
}

impl FromStr for Encoder {
    type Err = UnknownValue;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        match s.to_ascii_lowercase().as_str() {
            "json" => Ok(Encoder::Json),
            "console" => Ok(Encoder::Console),
            _ => Err(unknown(s, "json, console")),
        }
    }
}

/// `--zap-log-level`: zap's named levels, or a verbosity `n > 0` (zap level `-n`: `1` is
/// debug, more is more verbose than debug, which is tracing's trace).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Level {
    Debug,
    Info,
    Error,
    /// Only panics, which this daemon does not log: nothing is written.
    Panic,
    /// zap level `-n`, `n >= 1`.
    Verbosity(u32),
}

impl FromStr for Level {
    type Err = UnknownValue;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        const EXPECTED: &str = "debug, info, error, panic, or an integer above 0";
        match s.to_ascii_lowercase().as_str() {
            "debug" => Ok(Level::Debug),
            "info" => Ok(Level::Info),
            "error" => Ok(Level::Error),
            "panic" => Ok(Level::Panic),
            // As Go's strconv.Atoi, an optional `+` before the digits.
            n => match n.parse::<u32>() {
                Ok(v) if v > 0 => Ok(Level::Verbosity(v)),
                _ => Err(unknown(s, EXPECTED)),
            },
        }
    }
}

impl Level {
    /// The most verbose tracing level written, `None` for nothing at all.
    pub fn max_tracing_level(self) -> Option<tracing::Level> {
        match self {
            Level::Debug | Level::Verbosity(1) => Some(tracing::Level::DEBUG),
            Level::Verbosity(_) => Some(tracing::Level::TRACE),
            Level::Info => Some(tracing::Level::INFO),
            Level::Error => Some(tracing::Level::ERROR),
            Level::Panic => None,
        }
    }
}

/// `--zap-stacktrace-level`: events at or above this severity carry a stack trace.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum StacktraceLevel {
    Info,
    Error,
    /// Only panics, which are not logged: no stack traces (the Go operator's default).
    Panic,
}

impl FromStr for StacktraceLevel {
    type Err = UnknownValue;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        match s.to_ascii_lowercase().as_str() {
            "info" => Ok(StacktraceLevel::Info),
            "error" => Ok(StacktraceLevel::Error),
            "panic" => Ok(StacktraceLevel::Panic),
            _ => Err(unknown(s, "info, error, panic")),
        }
    }
}

impl StacktraceLevel {
    /// Whether an event at `level` carries a stack trace.
    pub fn covers(self, level: tracing::Level) -> bool {
        match self {
            // tracing orders the more verbose levels as greater.
            StacktraceLevel::Info => level <= tracing::Level::INFO,
            StacktraceLevel::Error => level <= tracing::Level::ERROR,
            StacktraceLevel::Panic => false,
        }
    }
}

/// `--zap-time-encoding`: how `ts` is written.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TimeEncoding {
    /// Seconds since the epoch, a float.
    Epoch,
    /// Milliseconds since the epoch, a float.
    Millis,
    /// Nanoseconds since the epoch, an integer.
    Nanos,
    /// `2006-01-02T15:04:05.000Z0700`.
    Iso8601,
    /// `2006-01-02T15:04:05Z07:00`.
    Rfc3339,
    /// RFC 3339 with the nanoseconds, trailing zeros trimmed (the Go operator's default).
    Rfc3339Nano,
}

impl FromStr for TimeEncoding {
    type Err = UnknownValue;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        match s.to_ascii_lowercase().as_str() {
            "epoch" => Ok(TimeEncoding::Epoch),
            "millis" => Ok(TimeEncoding::Millis),
            // controller-runtime's parser takes `nanos`; its help text says `nano`.
            "nanos" | "nano" => Ok(TimeEncoding::Nanos),
            "iso8601" => Ok(TimeEncoding::Iso8601),
            "rfc3339" => Ok(TimeEncoding::Rfc3339),
            "rfc3339nano" => Ok(TimeEncoding::Rfc3339Nano),
            _ => Err(unknown(s, "epoch, millis, nano, iso8601, rfc3339, rfc3339nano")),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn levels_as_zap_takes_them() {
        assert_eq!("DEBUG".parse(), Ok(Level::Debug));
        assert_eq!("info".parse(), Ok(Level::Info));
        assert_eq!("Error".parse(), Ok(Level::Error));
        assert_eq!("panic".parse(), Ok(Level::Panic));
        assert_eq!("3".parse(), Ok(Level::Verbosity(3)));
        assert_eq!("+2".parse(), Ok(Level::Verbosity(2)));
        for refused in ["0", "-1", "warn", "trace", "", "1.5", "++1"] {
            let err = refused.parse::<Level>().unwrap_err().to_string();
            assert!(err.contains(&format!("{refused:?}")) && err.contains("debug, info"), "{refused}: {err}");
        }
        assert_eq!(Level::Verbosity(1).max_tracing_level(), Some(tracing::Level::DEBUG));
        assert_eq!(Level::Verbosity(2).max_tracing_level(), Some(tracing::Level::TRACE));
        assert_eq!(Level::Panic.max_tracing_level(), None);
    }

    #[test]
    fn encoders_stacktrace_levels_and_time_encodings() {
        assert_eq!("JSON".parse(), Ok(Encoder::Json));
        assert_eq!("console".parse(), Ok(Encoder::Console));
        assert!("text".parse::<Encoder>().is_err(), "the chart's `text` becomes console before the flag");
        assert_eq!("error".parse(), Ok(StacktraceLevel::Error));
        assert!("debug".parse::<StacktraceLevel>().is_err(), "controller-runtime refuses debug here");
        assert!(StacktraceLevel::Info.covers(tracing::Level::WARN));
        assert!(!StacktraceLevel::Error.covers(tracing::Level::WARN));
        assert!(!StacktraceLevel::Panic.covers(tracing::Level::ERROR));
        for (s, want) in [
            ("epoch", TimeEncoding::Epoch),
            ("millis", TimeEncoding::Millis),
            ("nano", TimeEncoding::Nanos),
            ("nanos", TimeEncoding::Nanos),
            ("ISO8601", TimeEncoding::Iso8601),
            ("rfc3339", TimeEncoding::Rfc3339),
            ("rfc3339nano", TimeEncoding::Rfc3339Nano),
        ] {
            assert_eq!(s.parse(), Ok(want));
        }
        assert!("unix".parse::<TimeEncoding>().is_err());
    }
}
