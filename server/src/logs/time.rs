//! `ts` in each of zap's time encodings, in UTC (a container's local time zone).

use super::flags::TimeEncoding;
use std::fmt::Write;
use std::time::{SystemTime, UNIX_EPOCH};

/// A point in time as zap writes it: numbers for the epoch encodings, text for the others.
pub struct Timestamp {
    /// Since the Unix epoch (a clock before it reads as the epoch).
    nanos: u128,
}

impl Timestamp {
    pub fn now() -> Self {
        Self::at(SystemTime::now())
    }

    pub fn at(t: SystemTime) -> Self {
        Timestamp { nanos: t.duration_since(UNIX_EPOCH).map_or(0, |d| d.as_nanos()) }
    }

    /// Whether `encoding` writes a JSON number (else a string).
    pub fn is_number(encoding: TimeEncoding) -> bool {
        matches!(encoding, TimeEncoding::Epoch | TimeEncoding::Millis | TimeEncoding::Nanos)
    }

    /// The time in `encoding`, without quotes.
    pub fn write(&self, encoding: TimeEncoding, out: &mut impl Write) -> std::fmt::Result {
        // zap divides the nanoseconds as floats and writes the shortest form that reads back.
        match encoding {
            TimeEncoding::Epoch => write!(out, "{}", self.nanos as f64 / 1e9),
            TimeEncoding::Millis => write!(out, "{}", self.nanos as f64 / 1e6),
            TimeEncoding::Nanos => write!(out, "{}", self.nanos),
            TimeEncoding::Iso8601 => {
                self.write_date_time(out)?;
                write!(out, ".{:03}Z", self.subsec_nanos() / 1_000_000)
            }
            TimeEncoding::Rfc3339 => {
                self.write_date_time(out)?;
                out.write_char('Z')
            }
            TimeEncoding::Rfc3339Nano => {
                self.write_date_time(out)?;
                let fraction = format!("{:09}", self.subsec_nanos());
                let fraction = fraction.trim_end_matches('0');
                if !fraction.is_empty() {
                    write!(out, ".{fraction}")?;
                }
                out.write_char('Z')
            }
        }
    }

    fn subsec_nanos(&self) -> u32 {
        (self.nanos % 1_000_000_000) as u32
    }

    /// `YYYY-MM-DDTHH:MM:SS` in UTC.
    fn write_date_time(&self, out: &mut impl Write) -> std::fmt::Result {
        let secs = (self.nanos / 1_000_000_000) as u64;
        let (year, month, day) = civil_date(secs / 86_400);
        let in_day = secs % 86_400;
        write!(out, "{year:04}-{month:02}-{day:02}T{:02}:{:02}:{:02}", in_day / 3600, in_day / 60 % 60, in_day % 60)
    }
}

/// The proleptic Gregorian date of `days` since 1970-01-01 (Howard Hinnant's `civil_from_days`,
/// for days on or after the epoch).
fn civil_date(days: u64) -> (u64, u64, u64) {
    let z = days + 719_468;
    let era = z / 146_097;
    let day_of_era = z % 146_097;
    let year_of_era = (day_of_era - day_of_era / 1460 + day_of_era / 36_524 - day_of_era / 146_096) / 365;
    let day_of_year = day_of_era - (365 * year_of_era + year_of_era / 4 - year_of_era / 100);
    let mp = (5 * day_of_year + 2) / 153;
    let day = day_of_year - (153 * mp + 2) / 5 + 1;
    let month = if mp < 10 { mp + 3 } else { mp - 9 };
    let year = year_of_era + era * 400 + u64::from(month <= 2);
    (year, month, day)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

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
        // A whole second: no fraction at all.
        let t = at(1_000_000_000 * 86_400 * 365);
        assert_eq!(text(&t, TimeEncoding::Rfc3339Nano), "1971-01-01T00:00:00Z");
        assert_eq!(text(&t, TimeEncoding::Epoch), "31536000");
        assert_eq!(text(&at(0), TimeEncoding::Iso8601), "1970-01-01T00:00:00.000Z");
        assert!(Timestamp::is_number(TimeEncoding::Millis) && !Timestamp::is_number(TimeEncoding::Rfc3339));
    }

    #[test]
    fn civil_dates_across_centuries() {
        assert_eq!(civil_date(0), (1970, 1, 1));
        assert_eq!(civil_date(11_016), (2000, 2, 29));
        assert_eq!(civil_date(47_541), (2100, 3, 1));
        assert_eq!(civil_date(20_818), (2026, 12, 31));
    }
}
