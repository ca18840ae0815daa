//! Wall-clock instants as Unix epoch milliseconds, the form every stored record, event line
//! and metric uses. A clock before 1970 reads as 0 rather than failing.

use std::time::{SystemTime, UNIX_EPOCH};

/// Whole milliseconds since the Unix epoch.
pub fn epoch_millis(t: SystemTime) -> u64 {
    t.duration_since(UNIX_EPOCH).map_or(0, |d| d.as_millis() as u64)
}

/// Milliseconds since the Unix epoch with the sub-millisecond part, for timelines.
pub fn epoch_millis_f64(t: SystemTime) -> f64 {
    t.duration_since(UNIX_EPOCH)
        .map_or(0.0, |d| d.as_secs_f64() * 1000.0)
}

/// [`epoch_millis`] of now.
pub fn now_millis() -> u64 {
    epoch_millis(SystemTime::now())
}

/// `2026-12-02T07:30:00.123Z`: an epoch-millisecond instant as RFC 3339 in UTC, the form
/// every stored document and record gives its times in.
pub fn rfc3339_millis(ms: u64) -> String {
    let secs = (ms / 1000) as i64;
    let day = secs.div_euclid(86_400);
    let rest = secs.rem_euclid(86_400);
    let date = crate::law::calendar::yyyymmdd(day);
    format!(
        "{}-{}-{}T{:02}:{:02}:{:02}.{:03}Z",
        &date[..4],
        &date[4..6],
        &date[6..],
        rest / 3600,
        rest % 3600 / 60,
        rest % 60,
        ms % 1000
    )
}

/// The UTC calendar day (`YYYY-MM-DD`) of an epoch-millisecond instant.
pub fn utc_day(ms: u64) -> String {
    rfc3339_millis(ms)[..10].to_owned()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn instants_print_as_rfc3339_utc() {
        assert_eq!(rfc3339_millis(0), "1970-01-01T00:00:00.000Z");
        assert_eq!(rfc3339_millis(1_795_000_000_123), "2026-11-18T11:06:40.123Z");
        assert_eq!(utc_day(1_709_164_800_000), "2024-02-29");
    }
}
