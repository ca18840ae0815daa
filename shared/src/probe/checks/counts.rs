//! `totalCnt` across the pages of one query, and the whole list against the dated count.

use std::collections::HashSet;

use serde_json::json;

use super::{Totals, dated, dated_span};
use crate::policy::{MAX_DISPLAY, PROBE_WINDOW_PAGES};
use crate::probe::caller::{CallFailed, Caller};
use crate::probe::seen::Seen;
use crate::probe::{Check, Finding, ProbeOptions, Verdict};

/// The first pages of the date window.
#[derive(Debug, Default)]
pub(super) struct WindowRead {
    totals: Totals,
    /// Hits listed on more than one of its pages.
    duplicates: u32,
    /// Hits without a decision date it listed.
    undated: u32,
    failed: Option<CallFailed>,
}

/// Reads the first [`PROBE_WINDOW_PAGES`] pages of the date window (fewer if it has fewer).
pub(super) async fn window_pages(caller: &mut Caller, seen: &mut Seen, opts: &ProbeOptions) -> WindowRead {
    let (from, to) = (&opts.window.0, &opts.window.1);
    let mut read = WindowRead::default();
    let mut ids = HashSet::new();
    for page in 1..=PROBE_WINDOW_PAGES {
        match caller.search(&dated(from, to, page, MAX_DISPLAY)).await {
            Ok((p, _)) => {
                read.totals.add(page, MAX_DISPLAY, p.total);
                read.undated += seen.page(&p.items);
                read.duplicates += p.items.iter().filter(|h| !ids.insert(h.id.clone())).count() as u32;
                if !p.has_more(MAX_DISPLAY) || p.items.is_empty() {
                    break;
                }
            }
            Err(e) => {
                read.failed = Some(e);
                break;
            }
        }
    }
    read
}

/// Compares the `totalCnt` of every page of each query, and the window's ids.
pub(super) fn total_stable(whole: &Totals, win: &WindowRead) -> Finding {
    let figures =
        json!({ "wholeList": whole.figures(), "window": win.totals.figures(), "duplicates": win.duplicates });
    let both = format!(
        "the whole list gave {}; the window gave {}",
        whole.describe(),
        match win.totals.0.len() {
            0 => "nothing".to_owned(),
            _ => win.totals.describe(),
        }
    );
    let moved = whole.distinct().len() > 1 || win.totals.distinct().len() > 1;
    if moved || win.duplicates > 0 {
        let twice = match win.duplicates {
            0 => String::new(),
            n => format!("{n} hits were listed on two pages of the window (as many others are missed); "),
        };
        let total = if moved {
            "totalCnt moved across pages of one query; "
        } else {
            ""
        };
        let evidence = format!("{total}{twice}{both}");
        return Finding::new(Check::TotalStable, Verdict::Differs, evidence, figures);
    }
    if whole.0.len() < 2 && win.totals.0.len() < 2 {
        let why = win
            .failed
            .as_ref()
            .map_or("no query answered twice".to_owned(), |e| e.to_string());
        return Finding::new(
            Check::TotalStable,
            Verdict::CouldNotCheck,
            format!("{why}; {both}"),
            figures,
        );
    }
    let evidence = format!("totalCnt held on every page of each query, and no hit was listed twice: {both}");
    Finding::new(Check::TotalStable, Verdict::Ok, evidence, figures)
}

/// Compares the whole list with the dated count, and counts the empty dates seen.
pub(super) fn undated(
    total: u64,
    dated_total: Result<u64, CallFailed>,
    undated_seen: u32,
    hits: u32,
    win: &WindowRead,
    opts: &ProbeOptions,
) -> Finding {
    let (from, to) = dated_span(&opts.today);
    let span = format!("{from}~{to}");
    let in_window = match win.undated {
        0 => String::new(),
        n => format!("; the date window listed {n} hits without one"),
    };
    let dated = match dated_total {
        Ok(d) => d,
        Err(e) => {
            let evidence = format!(
                "the dated count ({span}) failed: {e}; {undated_seen} hits without a 선고일자 on the whole-list pages read{in_window}"
            );
            return Finding::new(
                Check::Undated,
                Verdict::CouldNotCheck,
                evidence,
                json!({ "undatedSeen": undated_seen, "error": e.to_string() }),
            );
        }
    };
    let figures = json!({ "wholeList": total, "dated": dated, "datedWindow": span, "gap": total as i64 - dated as i64, "undatedSeen": undated_seen, "undatedInWindow": win.undated, "hitsRead": hits });
    let counts = format!(
        "the whole list holds {total} hits, the dated window {span} (every month window together) {dated}"
    );
    if total < dated {
        let evidence = format!(
            "{counts}: the whole-list pass (`sync --all`) does not reach {} dated hits{in_window}",
            dated - total
        );
        return Finding::new(Check::Undated, Verdict::Differs, evidence, figures);
    }
    let evidence = if total > dated || undated_seen > 0 {
        format!(
            "undated hits exist: {counts}, {} more, which only the whole-list pass reaches; {undated_seen} hits without a 선고일자 on the whole-list pages read{in_window}",
            total - dated
        )
    } else {
        format!("no undated hits: {counts}, and none of the {hits} hits read lacks a 선고일자{in_window}")
    };
    Finding::new(Check::Undated, Verdict::Ok, evidence, figures)
}
