//! `Retry-After` values: capped, or ignored; never a panic.
//!
//! Input: `NOW\nVALUE`, NOW the clock in Unix seconds (any other first line: a fixed
//! clock), VALUE the header value; or just VALUE.
#![no_main]

use std::time::{Duration, UNIX_EPOCH};

use lawsync::law::parse_retry_after;
use lawsync::policy::RETRY_AFTER_CAP;
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let text = String::from_utf8_lossy(data);
    let (now, value) = match text.split_once('\n') {
        Some((n, v)) => (n.trim().parse::<u64>().unwrap_or(1_795_942_800), v),
        None => (1_795_942_800, text.as_ref()),
    };
    // Up to the end of year 9999, as far as HTTP-dates go.
    let now = UNIX_EPOCH + Duration::from_secs(now % 253_402_300_800);
    let got = parse_retry_after(value, now);
    let t = value.trim();
    if let Some(d) = got {
        assert!(d <= RETRY_AFTER_CAP, "{value:?} gave {d:?}, above the cap");
        assert!(
            !t.is_empty() && (t.bytes().all(|b| b.is_ascii_digit()) || httpdate::parse_http_date(t).is_ok()),
            "{value:?} is neither delay-seconds nor an HTTP-date, yet gave {d:?}"
        );
    }
    if !t.is_empty() && t.bytes().all(|b| b.is_ascii_digit()) {
        let want = t
            .parse::<u64>()
            .map_or(RETRY_AFTER_CAP, |s| Duration::from_secs(s).min(RETRY_AFTER_CAP));
        assert_eq!(got, Some(want), "{value:?}");
    }
    if t.is_empty() || t.starts_with('-') {
        assert_eq!(got, None, "{value:?}");
    }
});
