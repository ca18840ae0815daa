//! The backfill: a range of decision dates mirrored in windows, resumable, polite to
//! daily work, and visible in `lawsync sync status`.
//!
//! `lawsync backfill --from --to`, or `{"backfill":{"from","to"}}` on the search queue,
//! plans the range into month windows, newest first, and a last window for the hits
//! without a decision date (the whole list: held ones are skipped, so it fetches only what
//! no window listed). Each window is a run of its own, `backfill-<from>-<to>` (or
//! `backfill-undated`), counted and recorded like any run. A window whose first page
//! lists more than [`BACKFILL_SPLIT_HITS`] is split in two by date instead of paged.
//!
//! Redis keeps the windows' states in one hash (`w:<window>` → `planned`, `released:<ms>`,
//! `split`, `done:<ms>`). A window is released (its run opened, its first page sent) by
//! [`pump`], which runs after every backfill page and record and after every drainer pass,
//! and releases windows only
//! - while the work waiting (the backfill's detail messages not settled, its pages not
//!   read, and everything parked in the retry queue) is under [`BACKFILL_WATERMARK`], so
//!   SQS and Redis hold thousands of entries, never the corpus; and
//! - while no other run (a daily run, a sweep, a sync) is open: daily work goes first.
//!   Backfill messages met while one is open go back to their queue for
//!   [`BACKFILL_YIELD`] ([`yields`]).
//!
//! Resuming: a window is done when its run is recorded complete; a plan made again (the
//! command or message repeated, after a crash, or on a Redis that forgot the backfill)
//! keeps done windows done (looking for their records in the store when Redis does not
//! know them), releases the windows in flight again from their first page (their pages
//! count once and their held precedents cost nothing), and goes on. `again` searches done
//! windows again.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use super::Deps;
use super::jobs::JobError;
use crate::law::calendar::{days_from_civil, yyyymmdd};

/// A `YYYYMMDD` date as a day number.
fn day_number(text: &str) -> Option<i64> {
    crate::law::calendar::day_number(text).ok()
}
use crate::law::{LawError, SearchRequest};
use crate::mirror::runs::{BACKFILL_RUN_PREFIX, IdState, RunId, RunPlan, RunStatus};
use crate::policy::{
    BACKFILL_RECORD_LOOKUPS_IN_FLIGHT, BACKFILL_RELEASE_GRACE, BACKFILL_SPLIT_HITS, BACKFILL_WATERMARK,
    BACKFILL_YIELD, MAX_DISPLAY,
};
use crate::redis_conn::RedisFailure;

/// The window of the hits without a decision date: the whole list.
pub const UNDATED: &str = "all";
/// Its run.
pub const UNDATED_RUN: &str = "backfill-undated";

/// `{"backfill":{"from":"YYYYMMDD","to":"YYYYMMDD","again"?:true}}`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct BackfillMessage {
    pub backfill: BackfillRequest,
}

/// A range of decision dates to backfill.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct BackfillRequest {
    /// First decision date, `YYYYMMDD`.
    pub from: String,
    /// Last decision date, `YYYYMMDD`, inclusive.
    pub to: String,
    /// Search windows already done again (their held precedents still cost no call).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub again: bool,
}

impl BackfillRequest {
    /// Its windows, newest first, the undated window last; a clear error naming the field
    /// otherwise.
    pub fn windows(&self) -> Result<Vec<Window>, LawError> {
        self.windows_as("backfill.from", "backfill.to")
    }

    /// [`Self::windows`], errors naming the dates as `from_name` and `to_name` (a message's
    /// fields, a command's flags).
    pub fn windows_as(&self, from_name: &str, to_name: &str) -> Result<Vec<Window>, LawError> {
        let bad = |m: String| Err(LawError::InvalidRequest(m));
        let Some(from) = day_number(&self.from) else {
            return bad(format!("{from_name} must be a date as YYYYMMDD"));
        };
        let Some(to) = day_number(&self.to) else {
            return bad(format!("{to_name} must be a date as YYYYMMDD"));
        };
        if from > to {
            return bad(format!("{from_name} must not be after {to_name}"));
        }
        let earliest = day_number(crate::policy::BACKFILL_EARLIEST).unwrap_or(from);
        if from < earliest {
            return bad(format!(
                "{from_name} must not be before {} (law.go.kr has no earlier precedents)",
                crate::policy::BACKFILL_EARLIEST
            ));
        }
        let today = crate::law::calendar::kst_day(crate::clock::now_millis());
        if to > today {
            return bad(format!(
                "{to_name} must not be after today ({} in Korea): a later window lists nothing",
                yyyymmdd(today)
            ));
        }
        let mut out = Vec::new();
        let mut last = to;
        while last >= from {
            let t = yyyymmdd(last);
            let (y, m): (i64, i64) = (t[..4].parse().unwrap_or(1970), t[4..6].parse().unwrap_or(1));
            let first = days_from_civil(y, m, 1).max(from);
            out.push(Window::dated(first, last));
            last = days_from_civil(y, m, 1) - 1;
        }
        out.push(Window::undated());
        Ok(out)
    }
}

/// One backfill window: a span of decision dates, or the undated hits.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
pub struct Window {
    /// `YYYYMMDD~YYYYMMDD`, or [`UNDATED`].
    pub name: String,
}

impl Window {
    fn dated(from: i64, to: i64) -> Self {
        Self {
            name: format!("{}~{}", yyyymmdd(from), yyyymmdd(to)),
        }
    }

    fn undated() -> Self {
        Self { name: UNDATED.into() }
    }

    fn parse(name: &str) -> Option<Self> {
        if name == UNDATED {
            return Some(Self::undated());
        }
        let (a, b) = name.split_once('~')?;
        let (from, to) = (day_number(a)?, day_number(b)?);
        (from <= to).then(|| Self::dated(from, to))
    }

    /// Its decision dates as day numbers; `None` for the undated window.
    fn span(&self) -> Option<(i64, i64)> {
        let (a, b) = self.name.split_once('~')?;
        Some((day_number(a)?, day_number(b)?))
    }

    pub fn is_undated(&self) -> bool {
        self.name == UNDATED
    }

    /// The window's run: `backfill-20251101-20251130`, `backfill-undated`.
    pub fn run(&self) -> RunId {
        let name = match self.span() {
            Some((a, b)) => format!("{BACKFILL_RUN_PREFIX}{}-{}", yyyymmdd(a), yyyymmdd(b)),
            None => UNDATED_RUN.to_owned(),
        };
        RunId::parse(&name).expect("a window's run id is made of digits and dashes")
    }

    /// The window's first page, under its run.
    pub fn first_page(&self) -> SearchRequest {
        let run = Some(self.run());
        match self.span() {
            Some((a, b)) => SearchRequest {
                from: yyyymmdd(a),
                to: yyyymmdd(b),
                run,
                ..Default::default()
            },
            None => SearchRequest {
                all: true,
                run,
                ..Default::default()
            },
        }
    }

    /// The window halved by date; `None` for one day or the undated window.
    fn halves(&self) -> Option<(Self, Self)> {
        let (a, b) = self.span()?;
        if a >= b {
            return None;
        }
        let mid = a + (b - a) / 2;
        Some((Self::dated(mid + 1, b), Self::dated(a, mid)))
    }

    /// Newest first, the undated window last.
    fn order_key(&self) -> (bool, std::cmp::Reverse<i64>) {
        match self.span() {
            Some((_, b)) => (false, std::cmp::Reverse(b)),
            None => (true, std::cmp::Reverse(0)),
        }
    }
}

/// A window's state in the backfill.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum WindowState {
    Planned,
    /// Its run opened and first page sent (`sent`), or about to be by the caller that
    /// claimed it at `at_ms`.
    Released {
        at_ms: u64,
        sent: bool,
    },
    /// Split into two windows of its own.
    Split,
    Done {
        at_ms: u64,
    },
    /// Its run completed with a page or an id dead-lettered: precedents of it may be
    /// missing. Searched again when the backfill is run again.
    Failed {
        at_ms: u64,
    },
}

impl WindowState {
    fn parse(text: &str) -> Option<Self> {
        let ms = |t: &str| t.parse::<u64>().ok();
        Some(match text.split_once(':') {
            None if text == "planned" => Self::Planned,
            None if text == "split" => Self::Split,
            Some(("released", t)) => Self::Released {
                at_ms: ms(t)?,
                sent: false,
            },
            Some(("sent", t)) => Self::Released {
                at_ms: ms(t)?,
                sent: true,
            },
            Some(("done", t)) => Self::Done { at_ms: ms(t)? },
            Some(("failed", t)) => Self::Failed { at_ms: ms(t)? },
            _ => return None,
        })
    }

    fn text(self) -> String {
        match self {
            Self::Planned => "planned".into(),
            Self::Split => "split".into(),
            Self::Released { at_ms, sent: false } => format!("released:{at_ms}"),
            Self::Released { at_ms, sent: true } => format!("sent:{at_ms}"),
            Self::Done { at_ms } => format!("done:{at_ms}"),
            Self::Failed { at_ms } => format!("failed:{at_ms}"),
        }
    }
}

/// Why the backfill could not go on.
#[derive(Debug, thiserror::Error)]
pub enum BackfillError {
    #[error("{0}")]
    Request(#[from] LawError),
    #[error("Redis: {0}")]
    Redis(#[from] RedisFailure),
    #[error("runs: {0}")]
    Run(#[from] crate::mirror::runs::RunError),
    #[error("store: {0}")]
    Store(String),
    #[error("search queue: {0}")]
    Send(String),
    #[error(
        "backfill state in Redis is not one this release reads (field {field}); delete the backfill hash to plan again"
    )]
    State { field: String },
}

impl From<BackfillError> for JobError {
    fn from(e: BackfillError) -> Self {
        match e {
            BackfillError::Request(l) => JobError::Law(l),
            other => JobError::Run(other.to_string()),
        }
    }
}

/// The backfill as Redis keeps it.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct BackfillStatus {
    pub started_ms: u64,
    /// Windows in the plan (split windows counted as their halves).
    pub windows: u64,
    pub done: u64,
    /// Completed with a page or an id dead-lettered: searched again when the backfill is
    /// run again.
    pub failed: u64,
    /// Released and not done yet: in flight.
    pub in_flight: u64,
    /// Not released yet.
    pub planned: u64,
    /// Ids settled in done windows (fetched, skipped, missing or dead), and in the
    /// windows in flight.
    pub ids_settled: u64,
    /// Hits listed by the windows in flight that are not settled yet.
    pub ids_waiting: u64,
    /// Search pages read by done windows.
    pub pages: u64,
    /// Work waiting as the watermark counts it (see the module docs).
    pub waiting: u64,
    /// Another run is open: no window is released until it is recorded.
    pub paused_for: bool,
    /// Windows in flight, newest first.
    pub flying: Vec<String>,
}

impl BackfillStatus {
    /// Every window done.
    pub fn complete(&self) -> bool {
        self.windows > 0 && self.done == self.windows
    }

    /// Ids settled per second since the start, and the time left at that rate: the windows
    /// not done are taken to be as large as the done ones were on average.
    pub fn rate_and_eta(&self, now_ms: u64) -> (f64, Option<std::time::Duration>) {
        let secs = now_ms.saturating_sub(self.started_ms) as f64 / 1000.0;
        if secs <= 0.0 || self.ids_settled == 0 {
            return (0.0, None);
        }
        let rate = self.ids_settled as f64 / secs;
        if self.complete() || self.done + self.failed == self.windows {
            return (rate, Some(std::time::Duration::ZERO));
        }
        let per_window = if self.done > 0 {
            self.ids_settled as f64 / (self.done as f64 + self.in_flight as f64 / 2.0)
        } else {
            MAX_DISPLAY as f64
        };
        let left = self.ids_waiting as f64 + per_window * self.planned as f64;
        (rate, Some(std::time::Duration::from_secs_f64(left / rate)))
    }

    /// A few lines for `lawsync sync status`.
    pub fn text(&self, now_ms: u64) -> String {
        const WIDTH: usize = 30;
        let share = if self.windows == 0 {
            0.0
        } else {
            self.done as f64 / self.windows as f64
        };
        let filled = (share * WIDTH as f64).round() as usize;
        let (rate, eta) = self.rate_and_eta(now_ms);
        let eta = match eta {
            Some(d) if !d.is_zero() => format!("ETA {}", hms(d)),
            Some(_) if self.failed > 0 => "finished, with failed windows".into(),
            Some(_) => "complete".into(),
            None => "ETA -".into(),
        };
        let failed = if self.failed > 0 {
            format!(
                ", {} failed (a page or id dead-lettered: redrive dead ids, run the backfill again for dead pages)",
                self.failed
            )
        } else {
            String::new()
        };
        let mut out = format!(
            "backfill: [{}{}] {}/{} windows done, {} in flight, {} left{failed}{}\n  {} ids settled, {} waiting; {:.2} ids/s, {eta}",
            "#".repeat(filled),
            "-".repeat(WIDTH - filled.min(WIDTH)),
            self.done,
            self.windows,
            self.in_flight,
            self.planned,
            if self.paused_for {
                " (paused: another run goes first)"
            } else {
                ""
            },
            self.ids_settled,
            self.ids_waiting,
            rate,
        );
        if !self.flying.is_empty() {
            out.push_str(&format!("\n  in flight: {}", self.flying.join(", ")));
        }
        out
    }
}

fn hms(d: std::time::Duration) -> String {
    let s = d.as_secs();
    format!("{}h{:02}m{:02}s", s / 3600, s / 60 % 60, s % 60)
}

/// The backfill's windows and counters, as Redis holds them.
struct State {
    windows: BTreeMap<String, WindowState>,
    /// The last plan asked for done windows to be searched again: a split's halves are
    /// searched even where the store holds their records.
    again: bool,
    started_ms: u64,
    settled: u64,
    pages: u64,
}

async fn read_state(deps: &Deps) -> Result<State, BackfillError> {
    read_state_in(deps.queue.connection(), &deps.ns).await
}

async fn read_state_in(
    conn: &crate::redis_conn::RedisConn,
    ns: &crate::keys::Namespace,
) -> Result<State, BackfillError> {
    let fields: BTreeMap<String, String> = redis::cmd("HGETALL")
        .arg(ns.backfill())
        .query_async(&mut conn.clone())
        .await
        .map_err(RedisFailure::from)?;
    let mut state = State {
        windows: BTreeMap::new(),
        again: false,
        started_ms: 0,
        settled: 0,
        pages: 0,
    };
    for (field, value) in fields {
        let number = || value.parse::<u64>().ok();
        let bad = || BackfillError::State { field: field.clone() };
        match field.as_str() {
            "started" => state.started_ms = number().ok_or_else(bad)?,
            "settled" => state.settled = number().ok_or_else(bad)?,
            "pages" => state.pages = number().ok_or_else(bad)?,
            f if f.starts_with("counted:") => {}
            "again" => state.again = true,
            f => {
                let name = f.strip_prefix("w:").ok_or_else(bad)?;
                Window::parse(name).ok_or_else(bad)?;
                let st = WindowState::parse(&value).ok_or_else(bad)?;
                state.windows.insert(name.to_owned(), st);
            }
        }
    }
    Ok(state)
}

async fn window_state(deps: &Deps, window: &str) -> Result<Option<WindowState>, BackfillError> {
    let text: Option<String> = redis::cmd("HGET")
        .arg(deps.ns.backfill())
        .arg(format!("w:{window}"))
        .query_async(&mut deps.queue.connection().clone())
        .await
        .map_err(RedisFailure::from)?;
    match text {
        None => Ok(None),
        Some(t) => WindowState::parse(&t).map(Some).ok_or(BackfillError::State {
            field: format!("w:{window}"),
        }),
    }
}

async fn set_window(deps: &Deps, window: &str, st: WindowState) -> Result<(), BackfillError> {
    let _: i64 = redis::cmd("HSET")
        .arg(deps.ns.backfill())
        .arg(format!("w:{window}"))
        .arg(st.text())
        .query_async(&mut deps.queue.connection().clone())
        .await
        .map_err(RedisFailure::from)?;
    Ok(())
}

/// Plans `req` (merging its windows into the backfill's), then releases what the
/// watermark allows. Windows in flight are sent again from their first page; done windows
/// stay done unless `again`.
pub async fn start(deps: &Deps, req: &BackfillRequest) -> Result<BackfillStatus, BackfillError> {
    let windows = req.windows()?;
    let conn = deps.queue.connection().clone();
    let now = crate::clock::now_millis();
    let _: i64 = redis::cmd("HSETNX")
        .arg(deps.ns.backfill())
        .arg("started")
        .arg(now)
        .query_async(&mut conn.clone())
        .await
        .map_err(RedisFailure::from)?;
    let mut flag = redis::pipe();
    if req.again {
        flag.hset(deps.ns.backfill(), "again", 1);
    } else {
        flag.hdel(deps.ns.backfill(), "again");
    }
    let () = flag
        .ignore()
        .query_async(&mut conn.clone())
        .await
        .map_err(RedisFailure::from)?;
    let state = read_state(deps).await?;
    if req.again {
        forget_halves(deps, &state, &windows).await?;
    }
    let mut state = read_state(deps).await?;
    // Windows Redis does not know: done already if the store holds their record (a Redis
    // that forgot the backfill), planned otherwise.
    let unknown: Vec<&Window> = windows
        .iter()
        .filter(|w| !state.windows.contains_key(&w.name))
        .collect();
    let recorded = recorded_windows(deps, &unknown).await?;
    let mut resend = Vec::new();
    for w in &windows {
        let st = match state.windows.get(&w.name) {
            None if recorded.contains(&w.name) && !req.again => WindowState::Done { at_ms: now },
            None => WindowState::Planned,
            Some(WindowState::Done { .. } | WindowState::Split) if !req.again => continue,
            Some(WindowState::Failed { .. }) if !req.again && redriven(deps, w).await? => {
                // Its dead letters were redriven and settled: done, counted as any.
                if let Some(s) = deps.runs.status(&w.run()).await? {
                    window_done(deps, &mut state, &w.name, &s, now).await?;
                }
                continue;
            }
            Some(WindowState::Done { .. } | WindowState::Failed { .. } | WindowState::Split) => {
                // Searched again under the same run id: the finished run is forgotten
                // first, or its pages would count as read already.
                if !forget_run(deps, &w.run()).await? {
                    tracing::warn!(window = %w.name, "backfill: the window's run is kept: the store is still owed its record or alert (run the backfill again after the drainer's next pass), or it has dead ids (redrive them with lawsync queue redrive; a window whose ids stay dead is searched again only once Redis drops its run, BACKFILL_WINDOW_KEEP after its record)");
                    continue;
                }
                WindowState::Planned
            }
            Some(WindowState::Released { .. }) => {
                resend.push(w.clone());
                continue;
            }
            Some(WindowState::Planned) => {
                // A claim on a window still planned is a release that never happened (its
                // claimer died before marking it released): withdrawn, so a pump makes it.
                unclaim(deps, &w.name).await;
                continue;
            }
        };
        if st == WindowState::Planned {
            let () = redis::pipe()
                .hdel(deps.ns.backfill_claims(), format!("w:{}", w.name))
                .ignore()
                .hdel(deps.ns.backfill(), format!("counted:{}", w.name))
                .ignore()
                .query_async(&mut conn.clone())
                .await
                .map_err(RedisFailure::from)?;
        }
        set_window(deps, &w.name, st).await?;
    }
    // In flight when the backfill was started again: perhaps lost with a crash. Their
    // first pages go out again; pages count once, held precedents cost no call.
    for w in &resend {
        send_first_page(deps, w).await?;
    }
    pump(deps).await
}

/// Discards a finished window run so that it can be searched afresh, writing its record
/// first when that is all it is owed (a dead letter redriven since settled in it).
async fn forget_run(deps: &Deps, run: &RunId) -> Result<bool, BackfillError> {
    if deps.runs.discard(run).await? {
        return Ok(true);
    }
    let owed = deps.runs.owed().await?.contains(run);
    if owed {
        deps.record_run(run).await?;
        return Ok(deps.runs.discard(run).await?);
    }
    Ok(false)
}

/// Whether a failed window's run has since settled clean: its dead letters redriven and
/// fetched, no page dead. It is done then, without searching it again.
async fn redriven(deps: &Deps, w: &Window) -> Result<bool, BackfillError> {
    Ok(deps.runs.status(&w.run()).await?.is_some_and(|s| {
        s.completed_ms.is_some()
            && s.pages_dead == 0
            && s.counts.get(IdState::Dead.as_str()).copied().unwrap_or(0) == 0
    }))
}

/// With `again`: the windows a split of one of `windows` made are forgotten (their runs
/// too), so that the split, made again, plans them afresh.
async fn forget_halves(deps: &Deps, state: &State, windows: &[Window]) -> Result<(), BackfillError> {
    let asked: Vec<(i64, i64)> = windows.iter().filter_map(Window::span).collect();
    for name in state.windows.keys() {
        let Some(w) = Window::parse(name) else { continue };
        let Some((a, b)) = w.span() else { continue };
        let inside = asked.iter().any(|&(x, y)| x <= a && b <= y && (x, y) != (a, b));
        if !inside || windows.iter().any(|r| r.name == w.name) {
            continue;
        }
        if !forget_run(deps, &w.run()).await? {
            tracing::warn!(window = %w.name, "backfill: a split's half is still owed its record or alert and is kept; run the backfill again after the drainer's next pass");
            continue;
        }
        let () = redis::pipe()
            .hdel(deps.ns.backfill(), format!("w:{}", w.name))
            .ignore()
            .hdel(deps.ns.backfill(), format!("counted:{}", w.name))
            .ignore()
            .hdel(deps.ns.backfill_claims(), format!("w:{}", w.name))
            .ignore()
            .query_async(&mut deps.queue.connection().clone())
            .await
            .map_err(RedisFailure::from)?;
    }
    Ok(())
}

/// The windows among `windows` whose run record the store holds, complete and without a
/// dead letter.
async fn recorded_windows(deps: &Deps, windows: &[&Window]) -> Result<Vec<String>, BackfillError> {
    use futures::StreamExt;
    let lookups: Vec<_> = windows
        .iter()
        .map(|w| {
            let docs = deps.docs.clone();
            let name = w.name.clone();
            let key = format!("{}{}.json", crate::mirror::layout::RUNS.path, w.run());
            async move {
                match docs.get(&key).await {
                    Ok(Some(body)) => {
                        let done = serde_json::from_slice::<crate::mirror::runs::RunRecord>(&body)
                            .is_ok_and(|r| r.complete && r.pages_dead == 0 && r.ids.dead == 0);
                        Ok(done.then_some(name))
                    }
                    Ok(None) => Ok(None),
                    Err(e) => Err(BackfillError::Store(e.to_string())),
                }
            }
        })
        .collect();
    let found: Vec<Result<Option<String>, BackfillError>> = futures::stream::iter(lookups)
        .buffer_unordered(BACKFILL_RECORD_LOOKUPS_IN_FLIGHT)
        .collect()
        .await;
    found.into_iter().filter_map(Result::transpose).collect()
}

/// Opens `w`'s run and sends its first page.
async fn send_first_page(deps: &Deps, w: &Window) -> Result<(), BackfillError> {
    let first = w.first_page();
    let plan = RunPlan {
        kind: "backfill".into(),
        windows: vec![first.window_name()],
        query: None,
        refresh: false,
    };
    deps.runs
        .open(&w.run(), &plan, 0, crate::clock::now_millis())
        .await?;
    super::schedule::send_searches(deps, std::slice::from_ref(&first))
        .await
        .map_err(|e| BackfillError::Send(e.to_string()))?;
    // Marked sent only while in flight. Not atomic: a split or finish landing between the
    // read and the write is undone, and made again by the next pump (the run's state
    // decides), at the cost of a page at most.
    if let Some(WindowState::Released { at_ms, sent: false }) = window_state(deps, &w.name).await? {
        set_window(deps, &w.name, WindowState::Released { at_ms, sent: true }).await?;
    }
    Ok(())
}

/// Settles what the windows in flight have done, then releases windows, newest first, while
/// the work waiting is under the watermark and no other run is open. Safe to run anywhere,
/// any number of times at once: a window is released by the one caller that claims it.
pub async fn pump(deps: &Deps) -> Result<BackfillStatus, BackfillError> {
    let mut state = read_state(deps).await?;
    let mut status = BackfillStatus {
        started_ms: state.started_ms,
        ..Default::default()
    };
    if state.windows.is_empty() {
        return Ok(status);
    }
    let now = crate::clock::now_millis();
    let mut waiting = 0u64;
    let mut settled_in_flight = 0u64;
    let released: Vec<(String, WindowState)> = state
        .windows
        .iter()
        .filter(|(_, s)| matches!(s, WindowState::Released { .. }))
        .map(|(n, s)| (n.clone(), *s))
        .collect();
    for (name, was) in released {
        let WindowState::Released {
            at_ms: released_ms,
            sent,
        } = was
        else {
            continue;
        };
        let stale = now.saturating_sub(released_ms) >= BACKFILL_RELEASE_GRACE.as_millis() as u64;
        let w = Window::parse(&name).expect("parsed when read");
        match deps.runs.status(&w.run()).await? {
            None if !stale => {
                // Being released by another caller (marked, its run not opened yet): that
                // caller sends its first page; sending it here too would read it twice.
                waiting += MAX_DISPLAY as u64;
            }
            Some(s) if s.completed_ms.is_some() => {
                window_done(deps, &mut state, &name, &s, now).await?;
            }
            Some(s)
                if !sent && stale && s.pages_done == 0 && window_state(deps, &name).await? == Some(was) =>
            {
                // Its run opened and its first page never marked sent: the releaser died
                // between the two. Sent here (a page counts once if both were sent).
                send_first_page(deps, &w).await?;
                tracing::warn!(window = %name, "backfill: a window's first page was never sent; sent now");
                waiting += MAX_DISPLAY as u64;
            }
            Some(s) => {
                let (w_waiting, w_settled) = window_work(&s);
                waiting += w_waiting;
                settled_in_flight += w_settled;
                status.ids_waiting += s.ids_seen.saturating_sub(w_settled);
            }
            None if window_state(deps, &name).await? != Some(was) => {
                // Split (its run dropped) or settled by another caller since it was read.
            }
            None => {
                // Redis no longer counts it: done if its record says so (not when asked to
                // search again: the record is the old search's); sent again otherwise (its
                // messages went with the Redis that counted them).
                let recorded = if state.again {
                    Vec::new()
                } else {
                    recorded_windows(deps, &[&w]).await?
                };
                if recorded.is_empty() {
                    send_first_page(deps, &w).await?;
                    waiting += MAX_DISPLAY as u64;
                } else {
                    set_window(deps, &name, WindowState::Done { at_ms: now }).await?;
                    state
                        .windows
                        .insert(name.clone(), WindowState::Done { at_ms: now });
                }
            }
        }
    }
    // A failed window whose dead letters were redriven and settled is done.
    let failed: Vec<String> = state
        .windows
        .iter()
        .filter(|(_, s)| matches!(s, WindowState::Failed { .. }))
        .map(|(n, _)| n.clone())
        .collect();
    for name in failed {
        let w = Window::parse(&name).expect("parsed when read");
        if redriven(deps, &w).await?
            && let Some(s) = deps.runs.status(&w.run()).await?
        {
            window_done(deps, &mut state, &name, &s, now).await?;
        }
    }
    waiting += deps.queue.stats().await?.depth;
    let paused = deps.runs.foreground_open().await?;
    // Release, newest first; the undated window only once every dated one is done (it
    // skips what they stored, so it fetches only the undated hits).
    let mut order: Vec<Window> = state
        .windows
        .iter()
        .filter(|(_, s)| **s == WindowState::Planned)
        .filter_map(|(n, _)| Window::parse(n))
        .collect();
    order.sort_by_key(Window::order_key);
    let per_window = estimate_per_window(&state);
    for w in order {
        if paused || waiting >= BACKFILL_WATERMARK {
            break;
        }
        if w.is_undated()
            && state.windows.iter().any(|(n, s)| {
                n != UNDATED && matches!(s, WindowState::Planned | WindowState::Released { .. })
            })
        {
            break;
        }
        if !claim(deps, &w.name, now).await? {
            continue;
        }
        set_window(
            deps,
            &w.name,
            WindowState::Released {
                at_ms: now,
                sent: false,
            },
        )
        .await?;
        if let Err(e) = send_first_page(deps, &w).await {
            // Not sent: planned again, for the next pump.
            unclaim(deps, &w.name).await;
            set_window(deps, &w.name, WindowState::Planned).await?;
            return Err(e);
        }
        tracing::info!(window = %w.name, waiting, "backfill: window released");
        state.windows.insert(
            w.name.clone(),
            WindowState::Released {
                at_ms: now,
                sent: true,
            },
        );
        waiting += per_window;
    }
    for (name, st) in &state.windows {
        match st {
            WindowState::Done { .. } => status.done += 1,
            WindowState::Failed { .. } => status.failed += 1,
            WindowState::Released { .. } => {
                status.in_flight += 1;
                status.flying.push(name.clone());
            }
            WindowState::Planned => status.planned += 1,
            WindowState::Split => continue,
        }
        status.windows += 1;
    }
    status
        .flying
        .sort_by_key(|n| Window::parse(n).map(|w| w.order_key()));
    status.ids_settled = state.settled + settled_in_flight;
    status.pages = state.pages;
    status.waiting = waiting;
    status.paused_for = paused;
    Ok(status)
}

/// The backfill as Redis holds it now, without releasing anything.
pub async fn status(deps: &Deps) -> Result<Option<BackfillStatus>, BackfillError> {
    status_in(&deps.runs, &deps.queue, &deps.ns).await
}

/// [`status`] from Redis alone (no key, no store): `lawsync sync status`.
pub async fn status_in(
    runs: &crate::mirror::runs::Runs,
    queue: &crate::queue::RetryQueue,
    ns: &crate::keys::Namespace,
) -> Result<Option<BackfillStatus>, BackfillError> {
    let state = read_state_in(queue.connection(), ns).await?;
    if state.windows.is_empty() {
        return Ok(None);
    }
    let mut status = BackfillStatus {
        started_ms: state.started_ms,
        pages: state.pages,
        ..Default::default()
    };
    let mut settled = state.settled;
    for (name, st) in &state.windows {
        match st {
            WindowState::Done { .. } => status.done += 1,
            WindowState::Failed { .. } => status.failed += 1,
            WindowState::Planned => status.planned += 1,
            WindowState::Split => continue,
            WindowState::Released { .. } => {
                status.in_flight += 1;
                status.flying.push(name.clone());
                if let Some(w) = Window::parse(name)
                    && let Some(s) = runs.status(&w.run()).await?
                {
                    let (w_waiting, w_settled) = window_work(&s);
                    status.waiting += w_waiting;
                    settled += w_settled;
                    status.ids_waiting += s.ids_seen.saturating_sub(w_settled);
                }
            }
        }
        status.windows += 1;
    }
    status
        .flying
        .sort_by_key(|n| Window::parse(n).map(|w| w.order_key()));
    status.ids_settled = settled;
    status.waiting += queue.stats().await?.depth;
    status.paused_for = runs.foreground_open().await?;
    Ok(Some(status))
}

/// What a window in flight leaves waiting (its ids sent and not settled, and a page for
/// each page not read yet, a window whose first page is unread counting one), and what it
/// has settled. Parked ids are in the retry queue, counted there.
fn window_work(s: &RunStatus) -> (u64, u64) {
    let sent = s.counts.get(IdState::Sent.as_str()).copied().unwrap_or(0).max(0) as u64;
    let unread = if s.pages_done == 0 {
        MAX_DISPLAY as u64
    } else {
        s.total_cnt
            .saturating_sub(s.ids_seen + s.hits_without_id + s.hits_elsewhere)
    };
    (sent + unread, s.ids_seen.saturating_sub(s.outstanding()))
}

/// Hits a window is expected to list, from the windows done so far; never less than a
/// page, which is what the next pump counts for a window whose first page is unread (see
/// [`window_work`]): a few near-empty windows done (a month not decided yet) must not let
/// one pump release every window left.
fn estimate_per_window(state: &State) -> u64 {
    let done = state
        .windows
        .values()
        .filter(|s| matches!(s, WindowState::Done { .. }))
        .count() as u64;
    let page = MAX_DISPLAY as u64;
    state.settled.checked_div(done).map_or(page, |n| n.max(page))
}

async fn window_done(
    deps: &Deps,
    state: &mut State,
    name: &str,
    s: &RunStatus,
    now: u64,
) -> Result<(), BackfillError> {
    let conn = deps.queue.connection().clone();
    let dead = s.counts.get(IdState::Dead.as_str()).copied().unwrap_or(0) > 0;
    if s.pages_dead > 0 || dead {
        // Dead letters were alerted; the window is not done until searched again.
        let failed = WindowState::Failed { at_ms: now };
        set_window(deps, name, failed).await?;
        state.windows.insert(name.to_owned(), failed);
        tracing::warn!(window = %name, pages_dead = s.pages_dead, "backfill: window finished with dead letters; run the backfill again to search it again");
        return Ok(());
    }
    // Counted once: the caller that claims the count adds the window up.
    let settled = s.ids_seen.saturating_sub(s.outstanding());
    let first: i64 = redis::cmd("HSETNX")
        .arg(deps.ns.backfill())
        .arg(format!("counted:{name}"))
        .arg(now)
        .query_async(&mut conn.clone())
        .await
        .map_err(RedisFailure::from)?;
    let mut pipe = redis::pipe();
    pipe.atomic()
        .hset(
            deps.ns.backfill(),
            format!("w:{name}"),
            WindowState::Done { at_ms: now }.text(),
        )
        .ignore();
    if first == 1 {
        pipe.hincr(deps.ns.backfill(), "settled", settled)
            .ignore()
            .hincr(deps.ns.backfill(), "pages", s.pages_done)
            .ignore();
        state.settled += settled;
        state.pages += s.pages_done;
        tracing::info!(window = %name, ids = s.ids_seen, pages = s.pages_done, "backfill: window done");
    }
    let () = pipe
        .query_async(&mut conn.clone())
        .await
        .map_err(RedisFailure::from)?;
    state
        .windows
        .insert(name.to_owned(), WindowState::Done { at_ms: now });
    Ok(())
}

/// Claims the release of `window`: true for the one caller that gets it.
async fn claim(deps: &Deps, window: &str, now: u64) -> Result<bool, BackfillError> {
    let got: i64 = redis::cmd("HSETNX")
        .arg(deps.ns.backfill_claims())
        .arg(format!("w:{window}"))
        .arg(now)
        .query_async(&mut deps.queue.connection().clone())
        .await
        .map_err(RedisFailure::from)?;
    Ok(got == 1)
}

async fn unclaim(deps: &Deps, window: &str) {
    let r: Result<i64, _> = redis::cmd("HDEL")
        .arg(deps.ns.backfill_claims())
        .arg(format!("w:{window}"))
        .query_async(&mut deps.queue.connection().clone())
        .await;
    if let Err(e) = r {
        tracing::warn!(error = %e, window, "backfill: release claim not withdrawn; plan again to release it");
    }
}

/// Called with the first page of a backfill window: when it lists more than
/// [`BACKFILL_SPLIT_HITS`] and spans more than a day, the window is replaced by its halves
/// (planned, released by the pump; done where the store holds a half's record), the
/// window's run is dropped, and `true` is returned: the page is not fanned out.
pub async fn split_if_large(deps: &Deps, req: &SearchRequest, total: u64) -> Result<bool, BackfillError> {
    if req.all || req.page.unwrap_or(1) != 1 || total <= BACKFILL_SPLIT_HITS {
        return Ok(false);
    }
    let Some(w) = Window::parse(&req.window_name()) else {
        return Ok(false);
    };
    let Some((newer, older)) = w.halves() else {
        return Ok(false);
    };
    // A first page delivered again after the window was read (it may report more now) is
    // not a reason to split what was read.
    if let Some(run) = &req.run
        && deps.runs.page_counted(run, &req.window_name(), 1).await?
    {
        return Ok(false);
    }
    // A half the store holds the record of is done already (a split made again, on a Redis
    // that forgot the backfill), unless the backfill was asked to search again.
    let again = read_state(deps).await?.again;
    let recorded = if again {
        Vec::new()
    } else {
        recorded_windows(deps, &[&newer, &older]).await?
    };
    let now = crate::clock::now_millis();
    for half in [&newer, &older] {
        let st = if recorded.contains(&half.name) {
            WindowState::Done { at_ms: now }
        } else {
            WindowState::Planned
        };
        let _: i64 = redis::cmd("HSETNX")
            .arg(deps.ns.backfill())
            .arg(format!("w:{}", half.name))
            .arg(st.text())
            .query_async(&mut deps.queue.connection().clone())
            .await
            .map_err(RedisFailure::from)?;
    }
    set_window(deps, &w.name, WindowState::Split).await?;
    // The window's run listed nothing and never will: it is dropped, not recorded, so that
    // no record in the store says the window was searched.
    if let Some(run) = &req.run
        && !deps.runs.abandon(run).await?
    {
        // Counted a page in between (a delivery of the same page at once): kept, so it
        // finishes and is recorded; the halves search its dates again, held ones free.
        tracing::warn!(window = %w.name, "backfill: a split window's run counted a page meanwhile; kept");
    }
    tracing::info!(window = %w.name, total, "backfill: window too large; split in two");
    Ok(true)
}

/// Whether backfill work (a message or job of a backfill window's run) should give way now
/// because another run is open. A Redis failure says no: the work then meets the same
/// failure at the gate, and is parked as any would be.
pub async fn yields(deps: &Deps, run: Option<&RunId>) -> bool {
    if !run.is_some_and(RunId::is_backfill) {
        return false;
    }
    match deps.runs.foreground_open().await {
        Ok(open) => open,
        Err(e) => {
            tracing::warn!(error = %e, "backfill: could not tell whether another run goes first");
            false
        }
    }
}

/// How long backfill work that gave way waits.
pub const fn yield_for() -> std::time::Duration {
    BACKFILL_YIELD
}

/// After a backfill window's page or record: goes on with the backfill. Failures are
/// logged; the drainer's next pass pumps again.
pub async fn after_window(deps: &Deps, run: &RunId) {
    if !run.is_backfill() {
        return;
    }
    if let Err(e) = pump(deps).await {
        tracing::warn!(run = %run, error = %e, "backfill: windows not released; the drainer's next pass tries again");
    }
}

/// After a drainer pass, or the record of a run the backfill gave way to: goes on with the
/// backfill, if there is one.
pub async fn after_pass(deps: &Deps) {
    match status_exists(deps).await {
        Ok(true) => {
            if let Err(e) = pump(deps).await {
                tracing::warn!(error = %e, "backfill: windows not released; the next pass tries again");
            }
        }
        Ok(false) => {}
        Err(e) => tracing::warn!(error = %e, "backfill: state unreadable; the next pass tries again"),
    }
}

/// Whether a backfill with windows not done exists (one round trip).
async fn status_exists(deps: &Deps) -> Result<bool, BackfillError> {
    let n: u64 = redis::cmd("HLEN")
        .arg(deps.ns.backfill())
        .query_async(&mut deps.queue.connection().clone())
        .await
        .map_err(RedisFailure::from)?;
    Ok(n > 0)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn req(from: &str, to: &str) -> BackfillRequest {
        BackfillRequest {
            from: from.into(),
            to: to.into(),
            again: false,
        }
    }

    #[test]
    fn a_range_is_months_newest_first_clipped_then_the_undated_hits() {
        let w = req("20240115", "20240310").windows().expect("windows");
        let names: Vec<&str> = w.iter().map(|w| w.name.as_str()).collect();
        assert_eq!(
            names,
            [
                "20240301~20240310",
                "20240201~20240229",
                "20240115~20240131",
                "all"
            ]
        );
        assert_eq!(w[0].run().as_str(), "backfill-20240301-20240310");
        assert_eq!(w[3].run().as_str(), "backfill-undated");
        assert!(w.iter().all(|w| w.run().is_backfill()));
        for x in &w {
            x.first_page().params().expect("a valid first page");
            assert_eq!(x.first_page().window_name(), x.name);
        }
    }

    #[test]
    fn bad_ranges_name_the_field() {
        for (from, to, says) in [
            ("2024-01-01", "20240131", "backfill.from must be a date"),
            ("20240101", "20241301", "backfill.to must be a date"),
            ("20240201", "20240101", "must not be after"),
        ] {
            let e = req(from, to).windows().expect_err("bad");
            assert!(e.to_string().contains(says), "{e}");
        }
    }

    #[test]
    fn a_window_halves_newer_first_down_to_a_day() {
        let w = Window::parse("20240101~20240131").expect("window");
        let (newer, older) = w.halves().expect("halves");
        assert_eq!(newer.name, "20240117~20240131");
        assert_eq!(older.name, "20240101~20240116");
        assert!(
            Window::parse("20240101~20240101")
                .expect("day")
                .halves()
                .is_none()
        );
        assert!(Window::undated().halves().is_none());
    }

    #[test]
    fn states_round_trip_and_garbage_is_refused() {
        for s in [
            WindowState::Planned,
            WindowState::Split,
            WindowState::Released {
                at_ms: 5,
                sent: false,
            },
            WindowState::Released { at_ms: 6, sent: true },
            WindowState::Done { at_ms: 7 },
        ] {
            assert_eq!(WindowState::parse(&s.text()), Some(s));
        }
        assert_eq!(WindowState::parse("released:x"), None);
        assert_eq!(WindowState::parse("gone"), None);
    }

    #[test]
    fn unknown_fields_in_the_message_are_refused() {
        let e = serde_json::from_str::<BackfillMessage>(
            r#"{"backfill":{"from":"20240101","to":"20240131","x":1}}"#,
        )
        .expect_err("unknown");
        assert!(e.to_string().contains("unknown field"), "{e}");
    }
}
