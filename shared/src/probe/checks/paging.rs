//! How deep paging goes: the whole list's last page, then a binary search for the deepest
//! page that answers.

use serde_json::json;

use super::{Totals, could_not, whole_list};
use crate::policy::{MAX_DISPLAY, PROBE_DEPTH_STEPS};
use crate::probe::caller::{CallFailed, Caller};
use crate::probe::seen::Seen;
use crate::probe::{Check, Finding, Verdict};

/// A page of the whole list as the depth search sees it.
enum PageAnswer {
    Hits(usize),
    /// No hits, or a refusal: how, in words.
    Refused(String),
}

/// Reads pages of the whole list, tallying them.
pub(super) struct Pager<'a> {
    pub(super) caller: &'a mut Caller,
    pub(super) seen: &'a mut Seen,
    pub(super) whole: &'a mut Totals,
    pub(super) undated: &'a mut u32,
}

impl Pager<'_> {
    async fn read(&mut self, page: u32) -> Result<PageAnswer, CallFailed> {
        match self.caller.search(&whole_list(page, MAX_DISPLAY)).await {
            Ok((p, _)) => {
                self.whole.add(page, MAX_DISPLAY, p.total);
                *self.undated += self.seen.page(&p.items);
                let n = p.items.len() + p.skipped_items as usize;
                Ok(if n == 0 {
                    PageAnswer::Refused(format!("with no hits (totalCnt {})", p.total))
                } else {
                    PageAnswer::Hits(n)
                })
            }
            Err(e) if e.is_refusal() => Ok(PageAnswer::Refused(format!("with an error ({e})"))),
            Err(e) => Err(e),
        }
    }

    /// The last page of the whole list; when it does not answer, a binary search for the
    /// deepest page that does.
    pub(super) async fn depth(&mut self, total: u64, first_answered: bool) -> Finding {
        let display = u64::from(MAX_DISPLAY);
        let pages = total.div_ceil(display);
        let mut figures = json!({ "totalCnt": total, "pages": pages, "display": MAX_DISPLAY });
        if pages < 2 || !first_answered {
            let why = format!(
                "the whole list has no second page to reach (totalCnt {total}, first page answered: {first_answered})"
            );
            return Finding::new(Check::PagingDepth, Verdict::CouldNotCheck, why, figures);
        }
        let last = u32::try_from(pages).unwrap_or(u32::MAX);
        let mut refused = match self.read(last).await {
            Err(e) => return could_not(Check::PagingDepth, &e),
            Ok(PageAnswer::Hits(n)) => {
                figures["deepestAnswered"] = json!(last);
                let evidence = format!(
                    "the last page ({last} of {last} at display={MAX_DISPLAY}) answered with {n} hits: all {total} hits of the whole list are reachable by paging"
                );
                return Finding::new(Check::PagingDepth, Verdict::Ok, evidence, figures);
            }
            Ok(PageAnswer::Refused(how)) => how,
        };
        let (mut lo, mut hi, mut steps) = (1u32, last, 0);
        let mut cut_short = None;
        while hi - lo > 1 && steps < PROBE_DEPTH_STEPS {
            steps += 1;
            let mid = lo + (hi - lo) / 2;
            match self.read(mid).await {
                Ok(PageAnswer::Hits(_)) => lo = mid,
                Ok(PageAnswer::Refused(how)) => (hi, refused) = (mid, how),
                Err(e) => {
                    cut_short = Some(e);
                    break;
                }
            }
        }
        let reachable = u64::from(lo) * display;
        figures["deepestAnswered"] = json!(lo);
        figures["firstRefused"] = json!(hi);
        figures["refused"] = json!(refused);
        figures["reachableHits"] = json!(reachable);
        let stop = if hi - lo == 1 {
            format!("paging stops after page {lo}: page {hi} answered {refused}")
        } else {
            let why = cut_short.map_or_else(|| format!("after {steps} steps"), |e| e.to_string());
            format!(
                "paging stops between page {lo} and page {hi} (page {hi} answered {refused}; the search stopped: {why})"
            )
        };
        let evidence = format!(
            "{stop}, although totalCnt is {total} ({last} pages of {MAX_DISPLAY}): about {reachable} of {total} hits are reachable by paging, so a window must list at most {reachable} hits (split larger ones)"
        );
        Finding::new(Check::PagingDepth, Verdict::Differs, evidence, figures)
    }
}
