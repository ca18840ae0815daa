//! Parsing `Retry-After` (RFC 9110 §10.2.3): delay-seconds or an HTTP-date.

use std::time::{Duration, SystemTime};

use crate::policy::RETRY_AFTER_CAP;

/// The wait a `Retry-After` value asks for, capped at [`RETRY_AFTER_CAP`].
///
/// `None` for a value that is neither form (it is then ignored, as RFC 9110 allows); a
/// date in the past is zero; a number too large for any integer type is the cap.
pub fn parse_retry_after(value: &str, now: SystemTime) -> Option<Duration> {
    let v = value.trim();
    if v.is_empty() {
        return None;
    }
    if v.bytes().all(|b| b.is_ascii_digit()) {
        let secs = v.parse::<u64>().unwrap_or(u64::MAX);
        return Some(Duration::from_secs(secs.min(RETRY_AFTER_CAP.as_secs())));
    }
    let at = httpdate::parse_http_date(v).ok()?;
    Some(
        at.duration_since(now)
            .unwrap_or(Duration::ZERO)
            .min(RETRY_AFTER_CAP),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    fn now() -> SystemTime {
        httpdate::parse_http_date("Mon, 30 Nov 2026 09:00:00 GMT").expect("valid date")
    }

    #[test]
    fn seconds() {
        assert_eq!(parse_retry_after("4", now()), Some(Duration::from_secs(4)));
        assert_eq!(parse_retry_after(" 0 ", now()), Some(Duration::ZERO));
        assert_eq!(parse_retry_after("3600", now()), Some(Duration::from_secs(3600)));
    }

    #[test]
    fn absurd_values_are_capped_at_one_day() {
        assert_eq!(parse_retry_after("99999999", now()), Some(RETRY_AFTER_CAP));
        assert_eq!(
            parse_retry_after("999999999999999999999999999", now()),
            Some(RETRY_AFTER_CAP)
        );
        assert_eq!(
            parse_retry_after("Fri, 31 Dec 9999 23:59:59 GMT", now()),
            Some(RETRY_AFTER_CAP)
        );
    }

    #[test]
    fn http_dates() {
        assert_eq!(
            parse_retry_after("Mon, 30 Nov 2026 09:00:42 GMT", now()),
            Some(Duration::from_secs(42))
        );
        assert_eq!(
            parse_retry_after("Mon, 30 Nov 2026 08:00:00 GMT", now()),
            Some(Duration::ZERO),
            "past date"
        );
        // The two obsolete forms RFC 9110 still requires recipients to accept.
        assert_eq!(
            parse_retry_after("Monday, 30-Nov-26 09:00:10 GMT", now()),
            Some(Duration::from_secs(10))
        );
        assert_eq!(
            parse_retry_after("Mon Nov 30 09:00:05 2026", now()),
            Some(Duration::from_secs(5))
        );
    }

    #[test]
    fn garbage_is_ignored() {
        for v in ["", "-5", "1.5", "soon", "4s", "Mon, 99 Nov 2026 09:00:00 GMT"] {
            assert_eq!(parse_retry_after(v, now()), None, "{v:?}");
        }
    }
}
