//! Calendar arithmetic for the API's YYYYMMDD dates and the schedule's instants: proleptic
//! Gregorian day numbers counted from 1970-01-01, with no time zone of their own.

/// Days in month `m` (1-12) of year `y`.
pub fn days_in_month(y: i64, m: i64) -> i64 {
    let leap = (y % 4 == 0 && y % 100 != 0) || y % 400 == 0;
    match m {
        2 if leap => 29,
        2 => 28,
        4 | 6 | 9 | 11 => 30,
        _ => 31,
    }
}

/// Days since 1970-01-01 of a calendar day, by counting whole eras of 400 years. The day is
/// not checked; [`day_number`] checks.
pub fn days_from_civil(y: i64, m: i64, d: i64) -> i64 {
    // Years start in March, so the leap day ends a year.
    let y = if m <= 2 { y - 1 } else { y };
    let era = y.div_euclid(400);
    let year_of_era = y - era * 400;
    let month_from_march = (m + 9) % 12;
    let day_of_year = (153 * month_from_march + 2) / 5 + d - 1;
    let day_of_era = year_of_era * 365 + year_of_era / 4 - year_of_era / 100 + day_of_year;
    era * 146_097 + day_of_era - 719_468
}

/// Why a YYYYMMDD text is not a calendar day. It never holds the text itself, which may be
/// anything a caller sent.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum BadDate {
    /// Not exactly eight ASCII digits; the length in characters.
    Shape(usize),
    /// A month outside 1-12.
    Month,
    /// A day the month does not have.
    Day,
}

impl std::fmt::Display for BadDate {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Self::Shape(n) => write!(f, "not 8 ASCII digits (got {n} characters)"),
            Self::Month => f.write_str("its month is not 01-12"),
            Self::Day => f.write_str("its day does not exist in that month"),
        }
    }
}

/// Days since 1970-01-01 of a YYYYMMDD date, or why it is not one.
pub fn day_number(yyyymmdd: &str) -> Result<i64, BadDate> {
    let b = yyyymmdd.as_bytes();
    if b.len() != 8 || !b.iter().all(u8::is_ascii_digit) {
        return Err(BadDate::Shape(yyyymmdd.chars().count()));
    }
    let num = |r: std::ops::Range<usize>| b[r].iter().fold(0i64, |n, c| n * 10 + i64::from(c - b'0'));
    let (y, m, d) = (num(0..4), num(4..6), num(6..8));
    if !(1..=12).contains(&m) {
        return Err(BadDate::Month);
    }
    if d < 1 || d > days_in_month(y, m) {
        return Err(BadDate::Day);
    }
    Ok(days_from_civil(y, m, d))
}

/// YYYYMMDD of a day number (the inverse of [`day_number`]).
pub fn yyyymmdd(day: i64) -> String {
    // Walk from an estimate: at most a couple of steps either way.
    let mut y = 1970 + day.div_euclid(365);
    while days_from_civil(y, 1, 1) > day {
        y -= 1;
    }
    while days_from_civil(y + 1, 1, 1) <= day {
        y += 1;
    }
    let mut m = 1;
    while m < 12 && days_from_civil(y, m + 1, 1) <= day {
        m += 1;
    }
    format!("{y:04}{m:02}{:02}", day - days_from_civil(y, m, 1) + 1)
}

/// Korea Standard Time, UTC+9 with no daylight saving: the calendar of law.go.kr's dates.
const KST_OFFSET_MS: i64 = 9 * 3_600_000;

/// The day number (see [`day_number`]) of the Korean calendar day an instant falls on,
/// given in milliseconds since the Unix epoch.
pub fn kst_day(epoch_millis: u64) -> i64 {
    (epoch_millis as i64 + KST_OFFSET_MS).div_euclid(86_400_000)
}

/// A decision date as `YYYYMMDD`, from any spelling law.go.kr uses (`2026.01.29`,
/// `20260312`, `2026. 1. 15.`); `None` for an empty or impossible one.
pub fn normalize_date(text: &str) -> Option<String> {
    let parts: Vec<&str> = text
        .split(|c: char| !c.is_ascii_digit())
        .filter(|p| !p.is_empty())
        .collect();
    let candidate = match parts.as_slice() {
        [one] if one.len() == 8 => (*one).to_owned(),
        [y, m, d] if y.len() == 4 && m.len() <= 2 && d.len() <= 2 => {
            format!("{y}{:0>2}{:0>2}", m, d)
        }
        _ => return None,
    };
    day_number(&candidate).ok()?;
    Some(candidate)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn day_numbers_round_trip() {
        assert_eq!(day_number("19700101"), Ok(0));
        assert_eq!(day_number("20000301"), Ok(11_017));
        for d in [-1, 0, 59, 10_957, 19_782, 20_787, 47_482] {
            let s = yyyymmdd(d);
            assert_eq!(day_number(&s), Ok(d), "{s}");
        }
        for s in ["20240229", "20261130", "20201231", "20210101", "19000228"] {
            assert_eq!(yyyymmdd(day_number(s).expect("valid")), s);
        }
    }

    #[test]
    fn impossible_days_say_why_without_the_text() {
        assert_eq!(day_number("2026010"), Err(BadDate::Shape(7)));
        assert_eq!(day_number("2026-1-1"), Err(BadDate::Shape(8)));
        assert_eq!(day_number("２０２６０１０１"), Err(BadDate::Shape(8)));
        assert_eq!(day_number("20261301"), Err(BadDate::Month));
        assert_eq!(day_number("20260001"), Err(BadDate::Month));
        assert_eq!(day_number("20230229"), Err(BadDate::Day));
        assert_eq!(day_number("20260132"), Err(BadDate::Day));
        assert_eq!(day_number("20260431"), Err(BadDate::Day));
        assert!(!BadDate::Shape(7).to_string().contains("2026010"));
    }

    #[test]
    fn the_korean_day_turns_at_15_00_utc() {
        // 2026-12-01T14:59:59.999Z is 23:59 KST; a millisecond later it is 2 December there.
        let before = 1_796_137_199_999;
        assert_eq!(yyyymmdd(kst_day(before)), "20261201");
        assert_eq!(yyyymmdd(kst_day(before + 1)), "20261202");
    }

    #[test]
    fn decision_dates_read_in_every_spelling_law_go_kr_uses() {
        for (text, want) in [
            ("2026.01.29", Some("20260129")),
            ("20260312", Some("20260312")),
            ("2026. 1. 15.", Some("20260115")),
            ("", None),
            ("2026.02.30", None),
            ("2026.1", None),
        ] {
            assert_eq!(normalize_date(text).as_deref(), want, "{text:?}");
        }
    }
}
