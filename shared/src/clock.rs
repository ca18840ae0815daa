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
