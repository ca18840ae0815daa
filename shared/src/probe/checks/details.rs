//! What a 국세 hit's detail answers, and the spellings of every date and court read.

use serde_json::json;

use crate::law::LawError;
use crate::policy::PROBE_NTS_DETAILS;
use crate::probe::caller::{CallFailed, Caller};
use crate::probe::seen::Seen;
use crate::probe::{Check, Finding, Verdict};

/// Asks for the details of up to [`PROBE_NTS_DETAILS`] 국세 hits seen.
pub(super) async fn nts_detail(caller: &mut Caller, seen: &mut Seen) -> Finding {
    let ids: Vec<String> = seen.nts_ids.iter().take(PROBE_NTS_DETAILS).cloned().collect();
    if ids.is_empty() {
        let evidence = format!(
            "no hit from a 국세 source (데이터출처명 containing 국세) among the {} hits read",
            seen.hits
        );
        return Finding::new(
            Check::NtsDetail,
            Verdict::CouldNotCheck,
            evidence,
            json!({ "hitsRead": seen.hits }),
        );
    }
    let (mut answered, mut missing, mut other) = (Vec::new(), Vec::new(), Vec::new());
    let mut failed = None;
    for id in ids {
        match caller.detail(&id).await {
            Ok(d) => {
                seen.detail(&d);
                answered.push(id);
            }
            Err(CallFailed::Law(LawError::NotFound)) => missing.push(id),
            Err(e) if e.is_refusal() => other.push(format!("{id}: {e}")),
            Err(e) => {
                failed = Some(e);
                break;
            }
        }
    }
    let figures = json!({ "answered": answered, "missing": missing, "other": other });
    if !other.is_empty() {
        let evidence = format!(
            "a 국세 detail answered neither the detail nor the missing marker: {}",
            other.join("; ")
        );
        return Finding::new(Check::NtsDetail, Verdict::Differs, evidence, figures);
    }
    if answered.is_empty() && missing.is_empty() {
        let why = failed.map_or("no detail asked".to_owned(), |e| e.to_string());
        return Finding::new(Check::NtsDetail, Verdict::CouldNotCheck, why, figures);
    }
    let evidence = format!(
        "{} 국세 details asked: {} answered with the detail [{}], {} with 일치하는 판례가 없습니다, the missing marker, which the mirror files under missing/ and asks again later [{}]",
        answered.len() + missing.len(),
        answered.len(),
        answered.join(", "),
        missing.len(),
        missing.join(", ")
    );
    Finding::new(Check::NtsDetail, Verdict::Ok, evidence, figures)
}

/// Judges every date spelling seen by the project's reader; lists the courts as sent.
pub(super) fn spellings(seen: &Seen) -> Finding {
    let figures = json!({ "listDates": seen.list_dates, "detailDates": seen.detail_dates, "courts": seen.courts, "courtlessSources": seen.courtless_sources });
    if seen.hits == 0 {
        return Finding::new(Check::Spellings, Verdict::CouldNotCheck, "no hits read", figures);
    }
    let seen_text = format!(
        "list dates {}; detail dates {}; courts (kept as sent) {}",
        seen.list_dates.describe(),
        seen.detail_dates.describe(),
        seen.describe_courts()
    );
    let unread = seen.list_dates.unread() + seen.detail_dates.unread();
    if unread > 0 {
        let evidence = format!(
            "{unread} dates in a spelling the reader (law::calendar::normalize_date) does not take, so their hits would be filed as undated: {seen_text}"
        );
        return Finding::new(Check::Spellings, Verdict::Differs, evidence, figures);
    }
    Finding::new(
        Check::Spellings,
        Verdict::Ok,
        format!("every date spelling seen is read: {seen_text}"),
        figures,
    )
}
