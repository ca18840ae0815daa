//! `lawsync probe`: a few dozen calls that check, on the user's own key and against the
//! configured API, the assumptions the mirror rests on, before a backfill spends a day of
//! calls on them.
//!
//! Each [`Check`] ends [`Verdict::Ok`], [`Verdict::Differs`] or [`Verdict::CouldNotCheck`]
//! with its evidence in words and figures. Every call goes through the shared gate (the
//! client the functions use), and no call starts unless its attempts fit in
//! [`PROBE_BUDGET`](crate::policy::PROBE_BUDGET). Nothing is stored; the report holds
//! counts, spellings and ids, never the key.
//!
//! - [`caller`]: the budgeted calls.
//! - [`seen`]: the tally of what the replies showed (date and court spellings, undated hits).
//! - [`checks`]: each check, from the calls it makes to its finding.
//! - `cli` (feature `cli`): `lawsync probe`'s flags, wiring and output.

pub mod caller;
mod checks;
#[cfg(feature = "cli")]
pub mod cli;
pub mod seen;

use serde::Serialize;
use serde_json::Value;

pub use caller::CallFailed;
use caller::Caller;
use seen::Seen;

use crate::law::LawClient;

/// An assumption of the mirror that the probe checks.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Check {
    /// `display=100` gives pages of 100 hits.
    PageSize,
    /// A reply of one hit gives `prec` as an object (the reader takes an array too).
    SingleHit,
    /// Every page of a large result answers, down to the last: no depth limit.
    PagingDepth,
    /// `totalCnt` is the same on every page of one query, and no hit is listed twice.
    TotalStable,
    /// Undated hits exist, only the whole list reaches them, and the whole list holds
    /// every dated hit.
    Undated,
    /// Every date spelling seen is read by the project's reader; courts as sent.
    Spellings,
    /// The detail of a 국세 hit is either answered or "일치하는 판례가 없습니다" (the
    /// missing marker), nothing else.
    NtsDetail,
    /// The key is served in the format `LAW_API_FORMAT` asks for (with `auto`, in one of
    /// JSON and XML): each asked once.
    Formats,
}

impl Check {
    pub fn name(self) -> &'static str {
        match self {
            Check::PageSize => "page_size",
            Check::SingleHit => "single_hit",
            Check::PagingDepth => "paging_depth",
            Check::TotalStable => "total_stable",
            Check::Undated => "undated",
            Check::Spellings => "spellings",
            Check::NtsDetail => "nts_detail",
            Check::Formats => "formats",
        }
    }
}

/// How a check ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Verdict {
    /// The API behaves as the mirror assumes.
    Ok,
    /// It does not: the evidence says how.
    Differs,
    /// The calls needed failed, or the replies held nothing to judge by.
    CouldNotCheck,
}

impl Verdict {
    fn label(self) -> &'static str {
        match self {
            Verdict::Ok => "ok",
            Verdict::Differs => "differs",
            Verdict::CouldNotCheck => "could not check",
        }
    }
}

/// One check's outcome.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Finding {
    pub check: Check,
    pub verdict: Verdict,
    /// What was seen, in words, with its figures.
    pub evidence: String,
    /// The same figures, for scripts.
    pub figures: Value,
}

impl Finding {
    fn new(check: Check, verdict: Verdict, evidence: impl Into<String>, figures: Value) -> Self {
        Self {
            check,
            verdict,
            evidence: evidence.into(),
            figures,
        }
    }
}

/// What the probe found, and what it cost.
#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct ProbeReport {
    /// Calls made.
    pub calls: u32,
    /// Requests sent to law.go.kr, retries included; never more than `budget`.
    pub requests: u32,
    pub budget: u32,
    /// The date window whose pages were compared, `YYYYMMDD~YYYYMMDD`.
    pub window: String,
    pub checks: Vec<Finding>,
    /// The tally the spellings were judged on.
    pub seen: Seen,
    /// The cluster's key-health circuit, if open (see [`crate::key_health`]).
    pub key_circuit: Option<crate::key_health::OpenCircuit>,
    /// Replies of no known shape kept by any instance, newest first, the key masked.
    pub unknown_replies: Vec<crate::key_health::UnknownReply>,
}

impl ProbeReport {
    /// Checks that ended [`Verdict::Differs`].
    pub fn differing(&self) -> Vec<Check> {
        self.checks
            .iter()
            .filter(|f| f.verdict == Verdict::Differs)
            .map(|f| f.check)
            .collect()
    }

    /// The report for people: one paragraph per check, then the cost.
    pub fn text(&self) -> String {
        let mut out = String::new();
        for f in &self.checks {
            out.push_str(&format!(
                "[{}] {}: {}\n",
                f.verdict.label(),
                f.check.name(),
                f.evidence
            ));
        }
        if let Some(c) = &self.key_circuit {
            out.push_str(&format!(
                "[open] key-health circuit: law.go.kr refused the key ({}, {} refusals); the functions make no call until a probe finds it accepted (lawsync gate status)\n",
                c.reason, c.refusals
            ));
        }
        if !self.unknown_replies.is_empty() {
            out.push_str(&format!(
                "{} repl{} of no known shape kept (newest first; the key masked):\n",
                self.unknown_replies.len(),
                if self.unknown_replies.len() == 1 {
                    "y"
                } else {
                    "ies"
                }
            ));
            for r in &self.unknown_replies {
                let head: String = r.head.chars().take(300).collect();
                out.push_str(&format!(
                    "  {} {} {} ({} bytes, {}): {}\n",
                    httpdate::fmt_http_date(
                        std::time::UNIX_EPOCH + std::time::Duration::from_millis(r.at_ms)
                    ),
                    r.endpoint,
                    r.format,
                    r.bytes,
                    r.why,
                    head.replace('\n', " ")
                ));
            }
        }
        let differ = self.differing().len();
        out.push_str(&format!(
            "{} calls, {} requests of a budget of {}; {}\n",
            self.calls,
            self.requests,
            self.budget,
            match differ {
                0 => "every assumption checked holds".to_owned(),
                1 => "1 assumption differs".to_owned(),
                n => format!("{n} assumptions differ"),
            }
        ));
        out
    }
}

/// Why the probe could not run at all.
#[derive(Debug, thiserror::Error)]
pub enum ProbeError {
    /// Its first call (the whole list's first page) got no reply to read: nothing can be
    /// checked on this key, this way.
    #[error("law.go.kr did not answer the probe's first search, so nothing was checked: {0}")]
    NoAnswer(CallFailed),
}

/// What the probe reads besides the whole list.
#[derive(Debug, Clone)]
pub struct ProbeOptions {
    /// A date window, `YYYYMMDD` each, whose first pages are compared: a full year has
    /// several pages on the real service.
    pub window: (String, String),
    /// Today in Korea, `YYYYMMDD`: the dated count runs from 1900 to the end of the year
    /// after it.
    pub today: String,
    /// The client's attempts per call (`LAW_API_MAX_ATTEMPTS`).
    pub max_attempts: u32,
    /// Requests allowed, retries included.
    pub budget: u32,
    /// `LAW_API_FORMAT`, which the format check holds the replies against.
    pub format: crate::law::FormatSetting,
}

/// Runs every check through `client` (and so its gate).
pub async fn run(client: LawClient, opts: &ProbeOptions) -> Result<ProbeReport, ProbeError> {
    let mut caller = Caller::new(client, opts.max_attempts, opts.budget);
    let mut seen = Seen::default();
    let checks = checks::run_all(&mut caller, &mut seen, opts).await?;
    let key_circuit = caller.health().status().await.unwrap_or_else(|e| {
        tracing::warn!(error = %e, "probe: the key-health circuit could not be read");
        None
    });
    let unknown_replies = caller.health().unknown_replies().await.unwrap_or_default();
    Ok(ProbeReport {
        calls: caller.calls(),
        requests: caller.requests(),
        budget: caller.budget(),
        window: format!("{}~{}", opts.window.0, opts.window.1),
        checks,
        seen,
        key_circuit,
        unknown_replies,
    })
}
