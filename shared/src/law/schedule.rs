//! The daily sync's message, `{"dayBefore":"<instant>"}`: EventBridge Scheduler fills in
//! its own scheduled time (`<aws.scheduler.scheduled-time>`, RFC 3339), and the search
//! function turns it into the window of the Korean calendar day before that instant's.
//! Resolving from the schedule's time, not the clock at delivery, keeps a late or repeated
//! delivery on the same day.

use serde::Deserialize;

use super::calendar::{days_from_civil, days_in_month, yyyymmdd};
use super::{LawError, SearchRequest};

/// Korea Standard Time, UTC+9, no daylight saving.
const KST_OFFSET_SECS: i64 = 9 * 3600;

/// `{"dayBefore":"2026-11-30T19:00:00Z"}`.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct DayBefore {
    pub day_before: String,
}

impl DayBefore {
    /// The one-day window before the KST day of `day_before`.
    pub fn window(&self) -> Result<SearchRequest, LawError> {
        let secs = parse_rfc3339(&self.day_before).ok_or_else(|| {
            // The value is not echoed: a message body may carry anything, a key included.
            LawError::InvalidRequest(format!(
                "dayBefore must be an RFC 3339 instant such as 2026-11-30T19:00:00Z (got {} characters that are not one)",
                self.day_before.chars().count()
            ))
        })?;
        let kst_day = (secs + KST_OFFSET_SECS).div_euclid(86_400);
        let day = yyyymmdd(kst_day - 1);
        Ok(SearchRequest {
            from: day.clone(),
            to: day,
            query: None,
            page: None,
            display: None,
            ..Default::default()
        })
    }
}

/// Seconds since the Unix epoch of `YYYY-MM-DDTHH:MM:SS[.frac](Z|±HH:MM)`.
pub(crate) fn parse_rfc3339(s: &str) -> Option<i64> {
    let b = s.as_bytes();
    if b.len() < 20
        || b[4] != b'-'
        || b[7] != b'-'
        || !matches!(b[10], b'T' | b't' | b' ')
        || b[13] != b':'
        || b[16] != b':'
    {
        return None;
    }
    let num = |r: std::ops::Range<usize>| -> Option<i64> {
        let part = s.get(r)?;
        part.bytes()
            .all(|c| c.is_ascii_digit())
            .then(|| part.parse().ok())?
    };
    let (y, mo, d) = (num(0..4)?, num(5..7)?, num(8..10)?);
    let (h, mi, sec) = (num(11..13)?, num(14..16)?, num(17..19)?);
    if !(1..=12).contains(&mo) || d < 1 || d > days_in_month(y, mo) || h > 23 || mi > 59 || sec > 60 {
        return None;
    }
    let mut rest = &s[19..];
    if let Some(frac) = rest.strip_prefix('.') {
        let digits = frac.bytes().take_while(u8::is_ascii_digit).count();
        if digits == 0 {
            return None;
        }
        rest = &frac[digits..];
    }
    let offset = match rest {
        "Z" | "z" => 0,
        _ if rest.len() == 6 && matches!(rest.as_bytes()[0], b'+' | b'-') && rest.as_bytes()[3] == b':' => {
            let oh: i64 = rest.get(1..3)?.parse().ok()?;
            let om: i64 = rest.get(4..6)?.parse().ok()?;
            if oh > 23 || om > 59 {
                return None;
            }
            let sign = if rest.starts_with('-') { -1 } else { 1 };
            sign * (oh * 3600 + om * 60)
        }
        _ => return None,
    };
    Some(days_from_civil(y, mo, d) * 86_400 + h * 3600 + mi * 60 + sec.min(59) - offset)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn window(s: &str) -> Result<(String, String), LawError> {
        DayBefore { day_before: s.into() }
            .window()
            .map(|w| (w.from, w.to))
    }

    #[test]
    fn the_day_before_is_the_korean_calendar_day_before() {
        // 04:00 KST on 1 Dec is 19:00 UTC on 30 Nov: the window is 30 Nov.
        assert_eq!(
            window("2026-11-30T19:00:00Z").expect("ok"),
            ("20261130".into(), "20261130".into())
        );
        // 08:59 UTC is still 17:59 KST the same day; 15:00 UTC is already the next KST day.
        assert_eq!(window("2026-03-01T08:59:00Z").expect("ok").0, "20260228");
        assert_eq!(window("2026-03-01T15:00:00Z").expect("ok").0, "20260301");
        // Leap years, year ends, offsets and fractions.
        assert_eq!(window("2024-03-01T00:00:00+09:00").expect("ok").0, "20240229");
        assert_eq!(window("2027-01-01T10:00:00.123Z").expect("ok").0, "20261231");
        assert_eq!(window("2026-06-15T12:00:00-05:00").expect("ok").0, "20260615");
    }

    #[test]
    fn a_malformed_instant_is_a_clear_error() {
        for bad in [
            "",
            "yesterday",
            "2026-11-30",
            "2026-13-01T00:00:00Z",
            "2026-02-30T00:00:00Z",
            "2026-11-30T19:00:00",
            "2026-11-30T19:00:00+9",
            "2026-11-30T25:00:00Z",
        ] {
            let e = window(bad).expect_err(bad);
            assert!(
                e.to_string().contains("dayBefore must be an RFC 3339 instant"),
                "{bad}: {e}"
            );
        }
    }
}
