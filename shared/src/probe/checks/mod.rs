//! The checks, in the order they spend calls. A call that fails makes its check
//! [`Verdict::CouldNotCheck`] (with the failure) and the next check goes on; only the first
//! call, without which nothing can be judged, ends the probe.

//!
//! - [`paging`]: how deep paging goes.
//! - [`counts`]: `totalCnt` across pages, and undated hits against the dated count.
//! - [`details`]: 국세 details, and the date and court spellings of everything read.

mod counts;
mod details;
mod paging;

use std::collections::BTreeSet;

use serde_json::{Value, json};

use super::caller::{CallFailed, Caller};
use super::seen::Seen;
use super::{Check, Finding, ProbeError, ProbeOptions, Verdict};
use crate::law::{SearchPage, SearchRequest};
use crate::policy::MAX_DISPLAY;
use counts::{total_stable, undated, window_pages};
use details::{nts_detail, spellings};
use paging::Pager;

/// The first decision date of the dated count: [`crate::law::check_date`]'s earliest.
pub(super) const FIRST_DATE: &str = "19000101";

/// The dated count's window: every decision date from [`FIRST_DATE`] to the end of next
/// year, so that a clock a day off (or a date entered a year ahead) is still counted.
pub(super) fn dated_span(today: &str) -> (String, String) {
    let year: u32 = today.get(..4).and_then(|y| y.parse().ok()).unwrap_or(2026);
    (FIRST_DATE.to_owned(), format!("{}1231", year + 1))
}

pub(super) fn whole_list(page: u32, display: u32) -> SearchRequest {
    SearchRequest {
        all: true,
        page: Some(page),
        display: Some(display),
        ..Default::default()
    }
}

pub(super) fn dated(from: &str, to: &str, page: u32, display: u32) -> SearchRequest {
    SearchRequest {
        from: from.to_owned(),
        to: to.to_owned(),
        page: Some(page),
        display: Some(display),
        ..Default::default()
    }
}

pub(super) fn could_not(check: Check, e: &CallFailed) -> Finding {
    Finding::new(
        check,
        Verdict::CouldNotCheck,
        e.to_string(),
        json!({ "error": e.to_string() }),
    )
}

/// The `totalCnt` of one query as each page read gave it.
#[derive(Debug, Default)]
pub(super) struct Totals(pub(super) Vec<(u32, u32, u64)>);

impl Totals {
    pub(super) fn add(&mut self, page: u32, display: u32, total: u64) {
        self.0.push((page, display, total));
    }

    pub(super) fn distinct(&self) -> BTreeSet<u64> {
        self.0.iter().map(|t| t.2).collect()
    }

    /// `page 1: 2855, page 29: 2855, page 1 (display=1): 2855`.
    pub(super) fn describe(&self) -> String {
        let parts: Vec<String> = self
            .0
            .iter()
            .map(|(page, display, total)| match *display {
                MAX_DISPLAY => format!("page {page}: {total}"),
                d => format!("page {page} (display={d}): {total}"),
            })
            .collect();
        parts.join(", ")
    }

    pub(super) fn figures(&self) -> Value {
        self.0
            .iter()
            .map(|(page, display, total)| json!({ "page": page, "display": display, "totalCnt": total }))
            .collect()
    }
}

/// Every check; `Err` only when the first call gets no reply.
pub(super) async fn run_all(
    caller: &mut Caller,
    seen: &mut Seen,
    opts: &ProbeOptions,
) -> Result<Vec<Finding>, ProbeError> {
    let (first, _) = caller
        .search(&whole_list(1, MAX_DISPLAY))
        .await
        .map_err(ProbeError::NoAnswer)?;
    let mut undated_seen = seen.page(&first.items);
    let mut whole = Totals::default();
    whole.add(1, MAX_DISPLAY, first.total);
    let mut found = vec![page_size(&first)];
    found.push(formats(caller, opts.format).await);
    found.push(single_hit(caller, &mut whole).await);
    let (span_from, span_to) = dated_span(&opts.today);
    let dated_total = caller
        .search(&dated(&span_from, &span_to, 1, 1))
        .await
        .map(|(p, _)| p.total);
    let mut pager = Pager {
        caller,
        seen,
        whole: &mut whole,
        undated: &mut undated_seen,
    };
    found.push(pager.depth(first.total, !first.items.is_empty()).await);
    let win = window_pages(caller, seen, opts).await;
    found.push(total_stable(&whole, &win));
    found.push(undated(
        first.total,
        dated_total,
        undated_seen,
        seen.hits,
        &win,
        opts,
    ));
    let nts = nts_detail(caller, seen).await;
    // One detail of another source, for the detail's date spelling.
    if let Some(id) = seen.other_id.clone()
        && let Ok(d) = caller.detail(&id).await
    {
        seen.detail(&d);
    }
    found.push(spellings(seen));
    found.push(nts);
    Ok(found)
}

/// Which formats the key is served: one `display=1` search in each.
async fn formats(caller: &mut Caller, setting: crate::law::FormatSetting) -> Finding {
    use crate::law::{Format, FormatSetting, KeyProblem, LawError};
    let mut served = Vec::new();
    let mut said = Vec::new();
    let mut figures = serde_json::Map::new();
    for format in [Format::Json, Format::Xml] {
        let (state, words) = match caller.served_in(format).await {
            Ok(()) => ("served", "served".to_owned()),
            Err(CallFailed::Law(LawError::KeyRefused(KeyProblem::NotApplied { .. }))) => {
                ("not_applied", "not applied for (미신청된 목록/본문)".to_owned())
            }
            Err(e) => ("unknown", format!("not known: {e}")),
        };
        if state == "served" {
            served.push(format);
        }
        figures.insert(format.name().to_owned(), json!(state));
        said.push(format!("{}: {words}", format.param()));
    }
    let wanted_served = match setting {
        FormatSetting::Auto => !served.is_empty(),
        FormatSetting::Only(f) => served.contains(&f),
    };
    let asked = match setting {
        FormatSetting::Auto => "auto".to_owned(),
        FormatSetting::Only(f) => f.name().to_owned(),
    };
    figures.insert("setting".to_owned(), json!(asked));
    let unknown = figures.values().any(|v| v == "unknown");
    let verdict = if wanted_served {
        Verdict::Ok
    } else if unknown {
        Verdict::CouldNotCheck
    } else {
        Verdict::Differs
    };
    let tail = match (verdict, setting) {
        (Verdict::Ok, _) => format!("LAW_API_FORMAT={asked} is served"),
        (_, FormatSetting::Only(_)) if !served.is_empty() => {
            format!(
                "LAW_API_FORMAT={asked} is not served; set LAW_API_FORMAT=auto (or {})",
                served[0].name()
            )
        }
        _ => {
            "neither format is served: apply for the list and body APIs of 판례 at open.law.go.kr".to_owned()
        }
    };
    Finding::new(
        Check::Formats,
        verdict,
        format!("{}; {tail}", said.join(", ")),
        serde_json::Value::Object(figures),
    )
}

fn page_size(first: &SearchPage) -> Finding {
    let got = first.items.len() as u64 + u64::from(first.skipped_items);
    let due = first.total.min(u64::from(MAX_DISPLAY));
    let figures = json!({ "display": MAX_DISPLAY, "hits": got, "due": due, "totalCnt": first.total, "withoutId": first.skipped_items });
    let without_id = match first.skipped_items {
        0 => String::new(),
        n => format!("; {n} of them without a 판례일련번호, which cannot be fetched"),
    };
    if first.total == 0 {
        return Finding::new(
            Check::PageSize,
            Verdict::CouldNotCheck,
            "the whole list is empty (totalCnt 0)",
            figures,
        );
    }
    let (verdict, how) = if got == due {
        (Verdict::Ok, "as asked")
    } else {
        (
            Verdict::Differs,
            "not as asked: the mirror's pages would not line up with law.go.kr's",
        )
    };
    let evidence = format!(
        "display={MAX_DISPLAY} gave {got} hits on the whole list's first page where {due} were due (totalCnt {}), {how}{without_id}",
        first.total
    );
    Finding::new(Check::PageSize, verdict, evidence, figures)
}

async fn single_hit(caller: &mut Caller, whole: &mut Totals) -> Finding {
    let (page, raw) = match caller.search(&whole_list(1, 1)).await {
        Ok(r) => r,
        Err(e) => return could_not(Check::SingleHit, &e),
    };
    whole.add(1, 1, page.total);
    let (verdict, shape, evidence) = match raw.get("prec") {
        Some(Value::Object(_)) => (Verdict::Ok, "object", "a reply of one hit (display=1) gave prec as an object, as the reader expects".to_owned()),
        Some(Value::Array(a)) if a.len() == 1 => (Verdict::Differs, "array", "a reply of one hit (display=1) gave prec as an array of one; the reader takes both, so nothing is lost".to_owned()),
        Some(Value::Array(a)) => (Verdict::Differs, "array", format!("display=1 gave {} hits: the page size asked for is not honoured", a.len())),
        None if page.total == 0 => (Verdict::CouldNotCheck, "missing", "the whole list is empty (totalCnt 0)".to_owned()),
        None => (Verdict::Differs, "missing", format!("display=1 gave no prec although totalCnt is {}", page.total)),
        Some(_) => (Verdict::Differs, "other", "display=1 gave a prec that is neither an object nor an array".to_owned()),
    };
    Finding::new(
        Check::SingleHit,
        verdict,
        evidence,
        json!({ "prec": shape, "totalCnt": page.total }),
    )
}
