//! Human times, as `ollama` prints them: "2 weeks ago", "4 minutes from now".
//!
//! Decisions:
//! - Timestamps from servers are RFC 3339 (`2025-05-01T10:00:00.123-07:00`); they are read
//!   here by hand (date to days by the civil-calendar rule) rather than adding a date crate
//!   for one conversion. Anything unreadable is shown as it came.
//! - Units step at whole numbers: seconds under a minute are "less than a minute", then
//!   minutes, hours, days, weeks, months (30 days) and years (365 days).

use std::time::{SystemTime, UNIX_EPOCH};

/// Seconds since the epoch, now.
pub(crate) fn now() -> i64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| i64::try_from(d.as_secs()).unwrap_or(i64::MAX))
}

/// `then` relative to `now` (both seconds since the epoch).
pub(crate) fn relative(then: i64, now: i64) -> String {
    let delta = now - then;
    let secs = delta.unsigned_abs();
    if secs < 60 {
        return if delta >= 0 {
            "less than a minute ago".to_owned()
        } else {
            "less than a minute from now".to_owned()
        };
    }
    let units = [
        (365 * 86_400, "year"),
        (30 * 86_400, "month"),
        (7 * 86_400, "week"),
        (86_400, "day"),
        (3_600, "hour"),
        (60, "minute"),
    ];
    let (size, name) = units
        .iter()
        .copied()
        .find(|(size, _)| secs >= *size)
        .unwrap_or((60, "minute"));
    let n = secs / size;
    let plural = if n == 1 { "" } else { "s" };
    let direction = if delta >= 0 { "ago" } else { "from now" };
    format!("{n} {name}{plural} {direction}")
}

/// An RFC 3339 timestamp shown relative to now, or as it came when unreadable.
pub(crate) fn rfc3339_relative(text: &str) -> String {
    parse_rfc3339(text).map_or_else(|| text.to_owned(), |t| relative(t, now()))
}

/// Seconds since the epoch of an RFC 3339 timestamp.
pub(crate) fn parse_rfc3339(text: &str) -> Option<i64> {
    let (date, rest) = text.trim().split_once(['T', 't', ' '])?;
    let mut d = date.splitn(3, '-');
    let year: i64 = d.next()?.parse().ok()?;
    let month: i64 = d.next()?.parse().ok()?;
    let day: i64 = d.next()?.parse().ok()?;
    let zone_at = rest.find(['Z', 'z', '+', '-'])?;
    let (time, zone) = rest.split_at(zone_at);
    let time = time.split('.').next()?;
    let mut t = time.splitn(3, ':');
    let h: i64 = t.next()?.parse().ok()?;
    let m: i64 = t.next()?.parse().ok()?;
    let s: i64 = t.next()?.parse().ok()?;
    if !(1..=12).contains(&month) || !(1..=31).contains(&day) || h > 23 || m > 59 || s > 60 {
        return None;
    }
    let offset = match zone {
        "Z" | "z" => 0,
        _ => {
            let sign = if zone.starts_with('-') { -1 } else { 1 };
            let (oh, om) = zone[1..].split_once(':')?;
            sign * (oh.parse::<i64>().ok()? * 3600 + om.parse::<i64>().ok()? * 60)
        }
    };
    Some(days_from_civil(year, month, day) * 86_400 + h * 3600 + m * 60 + s - offset)
}

/// Days since 1970-01-01 of a proleptic Gregorian date.
fn days_from_civil(y: i64, m: i64, d: i64) -> i64 {
    let y = if m <= 2 { y - 1 } else { y };
    let era = y.div_euclid(400);
    let yoe = y - era * 400;
    let mp = (m + 9) % 12;
    let doy = (153 * mp + 2) / 5 + d - 1;
    let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    era * 146_097 + doe - 719_468
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Checks `relative` for a difference of `delta` seconds (past when positive).
    fn check(delta: i64, expected: &str) {
        assert_eq!(relative(1_000_000_000 - delta, 1_000_000_000), expected);
    }

    #[test]
    fn relative_times_read_like_ollama() {
        check(5, "less than a minute ago");
        check(60, "1 minute ago");
        check(-4 * 60, "4 minutes from now");
        check(3 * 3600 + 5, "3 hours ago");
        check(86_400, "1 day ago");
        check(15 * 86_400, "2 weeks ago");
        check(70 * 86_400, "2 months ago");
        check(800 * 86_400, "2 years ago");
    }

    #[test]
    fn rfc3339_is_read() {
        assert_eq!(parse_rfc3339("1970-01-01T00:00:00Z"), Some(0));
        assert_eq!(parse_rfc3339("2000-03-01T00:00:00Z"), Some(951_868_800));
        assert_eq!(
            parse_rfc3339("2025-05-01T12:00:00.123456789-07:00"),
            parse_rfc3339("2025-05-01T19:00:00Z")
        );
        assert_eq!(parse_rfc3339("yesterday"), None);
        assert_eq!(parse_rfc3339("2025-13-01T00:00:00Z"), None);
        assert_eq!(rfc3339_relative("soon"), "soon");
    }
}
