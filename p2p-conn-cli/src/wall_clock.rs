//! Wall-clock times as an operator reads them in a log: RFC 3339, UTC, to
//! the millisecond (`2026-12-03T10:20:53.123Z`). Written out here (the
//! civil-from-days conversion) rather than taken from a date crate: the
//! CLI needs this one format only.

use std::time::{SystemTime, UNIX_EPOCH};

/// `t` as `YYYY-MM-DDTHH:MM:SS.mmmZ`; a time before 1970 prints as the
/// epoch (a clock that far off is not worth a second format).
pub(crate) fn rfc3339_ms(t: SystemTime) -> String {
    let since = t.duration_since(UNIX_EPOCH).unwrap_or_default();
    let secs = since.as_secs();
    let (days, rem) = (secs / 86_400, secs % 86_400);
    let (year, month, day) = civil_from_days(days);
    format!(
        "{year:04}-{month:02}-{day:02}T{:02}:{:02}:{:02}.{:03}Z",
        rem / 3600,
        rem / 60 % 60,
        rem % 60,
        since.subsec_millis()
    )
}

/// Now, as [`rfc3339_ms`].
pub fn now() -> String {
    rfc3339_ms(SystemTime::now())
}

/// The proleptic Gregorian date of day `days` since 1970-01-01 (Howard
/// Hinnant's `civil_from_days`, for days at or after the epoch).
fn civil_from_days(days: u64) -> (u64, u64, u64) {
    let z = days + 719_468;
    let era = z / 146_097;
    let doe = z % 146_097;
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let day = doy - (153 * mp + 2) / 5 + 1;
    let month = if mp < 10 { mp + 3 } else { mp - 9 };
    let year = yoe + era * 400 + u64::from(month <= 2);
    (year, month, day)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    fn at(secs: u64, millis: u64) -> String {
        rfc3339_ms(UNIX_EPOCH + Duration::from_millis(secs * 1000 + millis))
    }

    /// Dates checked against `date -u -d @SECS` (GNU coreutils).
    #[test]
    fn known_instants() {
        assert_eq!(at(0, 0), "1970-01-01T00:00:00.000Z");
        assert_eq!(at(951_782_400, 5), "2000-02-29T00:00:00.005Z");
        assert_eq!(at(1_798_761_599, 999), "2026-12-31T23:59:59.999Z");
        assert_eq!(at(1_796_293_253, 123), "2026-12-03T10:20:53.123Z");
        assert_eq!(at(4_107_542_400, 0), "2100-03-01T00:00:00.000Z");
        assert_eq!(at(253_402_300_799, 0), "9999-12-31T23:59:59.000Z");
    }
}
