//! `ts` in each of zap's time encodings, in UTC (a container's local time zone): the dates by
//! jiff, the epoch numbers as zap computes them.

use super::flags::TimeEncoding;
use jiff::Timestamp as Instant;
use std::fmt::Write;
use std::time::SystemTime;

/// A point in time as zap writes it: numbers for the epoch encodings, text for the others.
pub struct Timestamp(Instant);

impl Timestamp {
    pub fn now() -> Self {
        Timestamp(Instant::now())
    }

    /// `t`; a clock before the Unix epoch (or past jiff's range) reads as the epoch.
    pub fn at(t: SystemTime) -> Self {
        Timestamp(Instant::try_from(t).ok().filter(|t| *t >= Instant::UNIX_EPOCH).unwrap_or(Instant::UNIX_EPOCH))
    }

    /// Whether `encoding` writes a JSON number (else a string).
    pub fn is_number(encoding: TimeEncoding) -> bool {
        matches!(encoding, TimeEncoding::Epoch | TimeEncoding::Millis | TimeEncoding::Nanos)
    }

    /// The time in `encoding`, without quotes.
    pub fn write(&self, encoding: TimeEncoding, out: &mut impl Write) -> std::fmt::Result {
        let t = self.0;
        // zap divides the nanoseconds as floats and writes the shortest form that reads back.
        // jiff's RFC 3339 is zap's in UTC: `Z`, the fraction cut (not rounded) to the digits
        // asked for, and by default only as many as it needs (Go's `RFC3339Nano`).
        match encoding {
            TimeEncoding::Epoch => write!(out, "{}", t.as_nanosecond() as f64 / 1e9),
            TimeEncoding::Millis => write!(out, "{}", t.as_nanosecond() as f64 / 1e6),
            TimeEncoding::Nanos => write!(out, "{}", t.as_nanosecond()),
            TimeEncoding::Iso8601 => write!(out, "{t:.3}"),
            TimeEncoding::Rfc3339 => write!(out, "{t:.0}"),
            TimeEncoding::Rfc3339Nano => write!(out, "{t}"),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::{Duration, UNIX_EPOCH};

    fn at(nanos: u64) -> Timestamp {
        Timestamp::at(UNIX_EPOCH + Duration::from_nanos(nanos))
    }

    fn text(t: &Timestamp, e: TimeEncoding) -> String {
        let mut s = String::new();
        t.write(e, &mut s).unwrap();
        s
    }

    #[test]
    fn every_encoding_as_zap_writes_it() {
        // 2024-02-29T13:05:09.120000500Z: a leap day, a fraction with inner and trailing zeros.
        let t = at(1_709_211_909_120_000_500);
        assert_eq!(text(&t, TimeEncoding::Epoch), "1709211909.1200006");
        assert_eq!(text(&t, TimeEncoding::Millis), "1709211909120.0005");
        assert_eq!(text(&t, TimeEncoding::Nanos), "1709211909120000500");
        assert_eq!(text(&t, TimeEncoding::Iso8601), "2024-02-29T13:05:09.120Z");
        assert_eq!(text(&t, TimeEncoding::Rfc3339), "2024-02-29T13:05:09Z");
        assert_eq!(text(&t, TimeEncoding::Rfc3339Nano), "2024-02-29T13:05:09.1200005Z");
        // Cut, never rounded up: .999 stays in its second.
        let t = at(1_709_211_909_999_999_999);
        assert_eq!(text(&t, TimeEncoding::Iso8601), "2024-02-29T13:05:09.999Z");
        assert_eq!(text(&t, TimeEncoding::Rfc3339), "2024-02-29T13:05:09Z");
        // A whole second: no fraction at all.
        let t = at(1_000_000_000 * 86_400 * 365);
        assert_eq!(text(&t, TimeEncoding::Rfc3339Nano), "1971-01-01T00:00:00Z");
        assert_eq!(text(&t, TimeEncoding::Epoch), "31536000");
        assert_eq!(text(&at(0), TimeEncoding::Iso8601), "1970-01-01T00:00:00.000Z");
        assert_eq!(text(&Timestamp::at(UNIX_EPOCH - Duration::from_secs(1)), TimeEncoding::Nanos), "0");
        assert!(Timestamp::is_number(TimeEncoding::Millis) && !Timestamp::is_number(TimeEncoding::Rfc3339));
    }

    #[test]
    fn dates_across_centuries() {
        let day = |days: u64| text(&at(days * 86_400 * 1_000_000_000), TimeEncoding::Rfc3339);
        assert_eq!(day(11_016), "2000-02-29T00:00:00Z");
        assert_eq!(day(47_541), "2100-03-01T00:00:00Z");
        assert_eq!(day(20_818), "2026-12-31T00:00:00Z");
    }
}
