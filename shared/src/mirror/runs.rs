//! Sync runs as records: every sync (the CLI's, each schedule firing) has a [`RunId`]
//! carried by its messages and retry-queue jobs, and is counted in Redis as it goes: the
//! pages read, and for every id listed, what became of it. Counting is by id state, never
//! by event, so a message delivered twice counts once.
//!
//! A run is complete when every window it reads was read to its last page and every id is
//! settled (skipped as held, stored, recorded missing, or dead-lettered). The call that
//! completes it writes `runs/{run}.json` and the run's increment feed
//! (`changes/{day}/{time}-{run}.jsonl`); one that fails leaves the run owed, and every drainer
//! pass writes what is owed. A record that shows a discrepancy (law.go.kr's `totalCnt`
//! against the ids seen, ids dead-lettered, pages never read) owes one alert, sent by the
//! scheduled drainer.

use std::collections::BTreeMap;
use std::time::Duration;

use serde::{Deserialize, Serialize};

use super::envelope::SCHEMA_VERSION;
use super::layout;
use crate::documents::{DocError, DocumentStore};
use crate::keys::{Namespace, RunKeys};
use crate::lua;
use crate::policy::{BACKFILL_WINDOW_KEEP, FOREGROUND_HOLD, RUN_FINALIZE_LOCK, RUN_KEYS_TTL};
use crate::redis_conn::{RedisConn, RedisFailure};

/// A run's name: 1-64 of `A-Z a-z 0-9 . _ -`, starting with a letter or digit. It names
/// Redis keys and store objects, so nothing else is accepted.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(try_from = "String", into = "String")]
pub struct RunId(String);

/// Why a run id is not one.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error(
    "run id must be 1-64 of A-Z a-z 0-9 . _ -, starting with a letter or digit (got {0} characters that are not)"
)]
pub struct BadRunId(usize);

impl RunId {
    pub fn parse(text: &str) -> Result<Self, BadRunId> {
        let b = text.as_bytes();
        let ok = !b.is_empty()
            && b.len() <= 64
            && b[0].is_ascii_alphanumeric()
            && b.iter()
                .all(|c| c.is_ascii_alphanumeric() || matches!(c, b'.' | b'_' | b'-'));
        if ok {
            Ok(Self(text.to_owned()))
        } else {
            Err(BadRunId(text.chars().count()))
        }
    }

    /// A new run started by hand at `now_ms`: `sync-20261202T073012Z-3fa9`.
    pub fn fresh(kind: &str, now_ms: u64) -> Self {
        let t = crate::clock::rfc3339_millis(now_ms);
        let stamp: String = t[..19].chars().filter(|c| c.is_ascii_alphanumeric()).collect();
        Self(format!("{kind}-{stamp}Z-{:04x}", rand::random::<u16>()))
    }

    /// The run of one schedule firing, named by the firing's own time, so a repeated
    /// delivery of it is the same run: `daily-20261202T040000Z`.
    pub fn for_firing(kind: &str, at_ms: u64) -> Self {
        let t = crate::clock::rfc3339_millis(at_ms);
        let stamp: String = t[..19].chars().filter(|c| c.is_ascii_alphanumeric()).collect();
        Self(format!("{kind}-{stamp}Z"))
    }

    pub fn as_str(&self) -> &str {
        &self.0
    }

    /// A backfill window's run (`backfill-…`, see `app::backfill`): work that gives way to
    /// every other run.
    pub fn is_backfill(&self) -> bool {
        self.0.starts_with(BACKFILL_RUN_PREFIX)
    }
}

/// How backfill windows' runs are named.
pub const BACKFILL_RUN_PREFIX: &str = "backfill-";

impl TryFrom<String> for RunId {
    type Error = BadRunId;
    fn try_from(s: String) -> Result<Self, BadRunId> {
        Self::parse(&s)
    }
}

impl From<RunId> for String {
    fn from(r: RunId) -> String {
        r.0
    }
}

impl std::fmt::Display for RunId {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

/// What a run set out to do, stored with it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct RunPlan {
    /// `sync`, `daily`, `sweep`, ...
    pub kind: String,
    /// The windows read, each `from~to` (`all` for the whole list).
    pub windows: Vec<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub query: Option<String>,
    #[serde(default)]
    pub refresh: bool,
}

/// What became of one id.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum IdState {
    /// A detail message was sent.
    Sent,
    /// Its detail failed and waits in the retry queue.
    Parked,
    /// Held and unchanged: not fetched.
    Skipped,
    /// Stored for the first time.
    Added,
    /// Stored again with other content or list metadata.
    Revised,
    /// Fetched again, same content.
    Unchanged,
    /// law.go.kr has no detail for it.
    Missing,
    /// Dead-lettered.
    Dead,
}

impl IdState {
    pub fn as_str(self) -> &'static str {
        match self {
            IdState::Sent => "sent",
            IdState::Parked => "parked",
            IdState::Skipped => "skipped",
            IdState::Added => "added",
            IdState::Revised => "revised",
            IdState::Unchanged => "unchanged",
            IdState::Missing => "missing",
            IdState::Dead => "dead",
        }
    }
}

/// One line of the increment feed: a change to the mirror.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ChangeLine {
    pub id: String,
    /// `added`, `revised` or `missing`.
    pub change: String,
    /// The object that changed: `prec/{id}.json` or `missing/{id}.json`.
    pub key: String,
    /// 선고일자 as listed (or as the detail gave it); absent for an undated precedent.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub decided_on: Option<String>,
    /// The stored envelope's content hash (none for `missing`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub content_hash: Option<String>,
    /// When it was written, RFC 3339 UTC.
    pub at: String,
}

/// A run as Redis counts it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct RunStatus {
    pub run_id: RunId,
    pub plan: Option<RunPlan>,
    pub started_ms: u64,
    pub completed_ms: Option<u64>,
    pub recorded_ms: Option<u64>,
    /// Parts (windows, probes) the run waits for, and how many are finished.
    pub parts: u64,
    pub parts_done: u64,
    pub pages_done: u64,
    pub pages_dead: u64,
    /// The sum of `totalCnt` as the first page of each window reported it.
    pub total_cnt: u64,
    /// Month probes not answered yet, the hits they found not held, and the sum of their
    /// months' `totalCnt`.
    pub probes_left: u64,
    pub unheld_probed: u64,
    pub probed_total: u64,
    pub hits_without_id: u64,
    /// Hits listed that belong to other windows (the backfill's undated window reads the
    /// whole list): counted, not kept.
    pub hits_elsewhere: u64,
    pub ids_seen: u64,
    pub counts: BTreeMap<String, i64>,
    /// Per part (window): `totalCnt` as its first page reported it, and the ids (and hits
    /// without id) its pages listed.
    pub part_totals: BTreeMap<String, (u64, u64)>,
    /// Bumped by every change a record would show; a record written from an older one
    /// leaves the run owed.
    pub version: u64,
    /// The feed files written for the run, oldest first.
    pub feed: Vec<String>,
}

impl RunStatus {
    fn count(&self, state: IdState) -> u64 {
        self.counts.get(state.as_str()).copied().unwrap_or(0).max(0) as u64
    }

    /// Ids not settled yet: sent, or parked.
    pub fn outstanding(&self) -> u64 {
        self.count(IdState::Sent) + self.count(IdState::Parked)
    }

    /// Ids stored this run (added, revised or unchanged).
    pub fn fetched(&self) -> u64 {
        self.count(IdState::Added) + self.count(IdState::Revised) + self.count(IdState::Unchanged)
    }

    /// Hits listed and settled: ids settled, and hits without an id or of other windows
    /// (counted, nothing to fetch).
    fn hits_settled(&self) -> u64 {
        self.ids_seen.saturating_sub(self.outstanding()) + self.hits_without_id + self.hits_elsewhere
    }

    /// Hits to settle: the larger of `totalCnt` and the hits listed so far.
    fn hits_expected(&self) -> u64 {
        self.total_cnt
            .max(self.ids_seen + self.hits_without_id + self.hits_elsewhere)
    }

    /// Settled hits over the hits expected: 0.0 to 1.0.
    pub fn progress(&self) -> f64 {
        if self.completed_ms.is_some() {
            return 1.0;
        }
        let of = self.hits_expected();
        if of == 0 {
            return 0.0;
        }
        (self.hits_settled() as f64 / of as f64).min(1.0)
    }

    /// Hits settled per second since the start, and the time left at that rate.
    pub fn rate_and_eta(&self, now_ms: u64) -> (f64, Option<Duration>) {
        let settled = self.hits_settled() as f64;
        let end = self.completed_ms.unwrap_or(now_ms);
        let secs = end.saturating_sub(self.started_ms) as f64 / 1000.0;
        if secs <= 0.0 || settled <= 0.0 {
            return (0.0, None);
        }
        let rate = settled / secs;
        let left = self.hits_expected() as f64 - settled;
        let eta = (self.completed_ms.is_none() && left > 0.0).then(|| Duration::from_secs_f64(left / rate));
        (rate, eta.or(self.completed_ms.map(|_| Duration::ZERO)))
    }

    /// The run in a few lines: what it reads, a progress bar, rate and ETA, the counts.
    pub fn text(&self, now_ms: u64) -> String {
        let s = self;
        let plan = s.plan.as_ref();
        let what = plan.map_or("?".to_owned(), |p| {
            let windows = if p.windows.len() > 3 {
                format!("{} windows", p.windows.len())
            } else {
                p.windows.join(", ")
            };
            format!(
                "{} {windows}{}",
                p.kind,
                if p.refresh { " (refresh)" } else { "" }
            )
        });
        let state = match (s.completed_ms, s.recorded_ms) {
            (Some(_), Some(_)) => "complete, recorded",
            (Some(_), None) => "complete, record owed",
            _ => "running",
        };
        let progress = s.progress();
        let width = 30;
        let filled = ((progress * width as f64).round() as usize).min(width);
        let (rate, eta) = s.rate_and_eta(now_ms);
        let eta = match (s.completed_ms, eta) {
            (Some(_), _) => "done".to_owned(),
            (None, Some(d)) => format!("ETA {}", human_secs(d.as_secs())),
            (None, None) => "ETA -".to_owned(),
        };
        let settled = s.hits_settled();
        let n = |k: &str| s.counts.get(k).copied().unwrap_or(0).max(0);
        let mut out = format!(
            "{}  {what}  {state}\n  [{}{}] {:>3.0}%  {settled}/{} hits  {rate:.1} hits/s  {eta}\n  windows {}/{}  pages {} ({} dead)  totalCnt {}  seen {}  skipped {}  fetched {} (added {}, revised {}, unchanged {})  missing {}  parked {}  dead {}",
            s.run_id,
            "#".repeat(filled),
            "-".repeat(width - filled),
            progress * 100.0,
            s.hits_expected(),
            s.parts_done,
            s.parts,
            s.pages_done,
            s.pages_dead,
            s.total_cnt,
            s.ids_seen,
            n("skipped"),
            s.fetched(),
            n("added"),
            n("revised"),
            n("unchanged"),
            n("missing"),
            n("parked"),
            n("dead"),
        );
        if s.completed_ms.is_some() {
            for d in s.discrepancies() {
                out.push_str(&format!("\n  discrepancy: {d}"));
            }
        }
        out
    }

    /// What the counts say is wrong, in words; empty for a clean run. `totalCnt` is
    /// compared per window (windows may overlap: the daily run's whole-list read lists
    /// again what its months listed).
    pub fn discrepancies(&self) -> Vec<String> {
        let mut out = Vec::new();
        for (part, (total, listed)) in &self.part_totals {
            if part.starts_with("probe:") || total == listed {
                continue;
            }
            out.push(format!(
                "window {part}: law.go.kr reported totalCnt {total} and its pages listed {listed}{}",
                if self.pages_dead > 0 {
                    " (a page was dead-lettered)"
                } else {
                    ""
                }
            ));
        }
        if self.hits_without_id > 0 {
            out.push(format!(
                "{} hits had no 판례일련번호 and could not be fetched",
                self.hits_without_id
            ));
        }
        let dead = self.count(IdState::Dead);
        if dead > 0 {
            out.push(format!(
                "{dead} ids were dead-lettered (lawsync queue dead; lawsync queue redrive)"
            ));
        }
        if self.pages_dead > 0 {
            out.push(format!(
                "{} search pages were dead-lettered: the pages after them were never read",
                self.pages_dead
            ));
        }
        out
    }
}

/// Seconds as a person reads them.
fn human_secs(secs: u64) -> String {
    match secs {
        0..=99 => format!("{secs} s"),
        100..=5999 => format!("{} min", secs / 60),
        _ => format!("{:.1} h", secs as f64 / 3600.0),
    }
}

/// `runs/{run}.json`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct RunRecord {
    pub schema_version: u32,
    pub run_id: RunId,
    pub plan: Option<RunPlan>,
    pub started_at: String,
    pub completed_at: Option<String>,
    pub recorded_at: String,
    pub complete: bool,
    pub total_cnt: u64,
    pub pages_done: u64,
    pub pages_dead: u64,
    pub ids: RunIdCounts,
    pub discrepancies: Vec<String>,
    /// The feed files this run wrote, oldest first.
    pub feed: Vec<String>,
}

fn is_zero(n: &u64) -> bool {
    *n == 0
}

/// The ids of a run by what became of them.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct RunIdCounts {
    pub seen: u64,
    pub without_id: u64,
    /// Hits listed that belong to other windows (the backfill's undated window's dated
    /// hits): counted, not kept.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub elsewhere: u64,
    pub skipped: u64,
    pub fetched: u64,
    pub added: u64,
    pub revised: u64,
    pub unchanged: u64,
    pub missing: u64,
    pub parked: u64,
    pub dead: u64,
    pub outstanding: u64,
}

/// A run whose record shows a discrepancy, for the alert.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RunAlert {
    pub run_id: RunId,
    pub discrepancies: Vec<String>,
}

/// Why a run could not be counted or recorded.
#[derive(Debug, thiserror::Error)]
pub enum RunError {
    #[error(transparent)]
    Redis(#[from] RedisFailure),
    #[error("run record: {0}")]
    Store(#[from] DocError),
    #[error("run {0}: Redis holds a field that is not what a run stores ({1})")]
    Corrupt(RunId, &'static str),
    #[error("run {0}: a run reads at least one window")]
    NoParts(RunId),
}

/// Whether a page or mark was counted.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Counted {
    /// Counted; `record`: the run's record is owed now.
    Yes { record: bool },
    /// Counted before (a repeated delivery).
    Already,
    /// No such run in Redis (its keys expired, or Redis lost them): not counted.
    NoRun,
}

/// One search page of a run, as [`Runs::page`] counts it.
#[derive(Debug, Clone, Default)]
pub struct PageCount<'a> {
    /// The window it reads ([`crate::law::SearchRequest::window_name`]); a probe's is
    /// `probe:` and its window.
    pub part: &'a str,
    pub page: u32,
    /// The window's last page (or a dead page, after which none is read).
    pub last: bool,
    /// `totalCnt` as reported (counted from a window's first page; 0 for a probe).
    pub total: u64,
    pub without_id: u32,
    /// Hits listed that belong to other windows: counted, not kept.
    pub elsewhere: u32,
    pub dead: bool,
    /// Windows this page adds to those the run waits for (a probe that found one to read).
    pub spawn: &'a [String],
    /// For a month probe, the hits it found not held.
    pub probe_unheld: Option<u64>,
    pub ids: &'a [(&'a str, IdState)],
}

/// The sync runs of one namespace.
#[derive(Debug, Clone)]
pub struct Runs {
    redis: RedisConn,
    ns: Namespace,
}

impl Runs {
    pub fn new(redis: RedisConn, ns: &Namespace) -> Self {
        Self {
            redis,
            ns: ns.clone(),
        }
    }

    fn keys(&self, run: &RunId) -> RunKeys {
        self.ns.run(run.as_str())
    }

    /// Starts counting `run` (idempotent): `true` when this call opened it. It waits for
    /// the parts `plan.windows` names; `probes`: the month probes among them (the daily
    /// run's), after which the whole-list probe is sent.
    pub async fn open(
        &self,
        run: &RunId,
        plan: &RunPlan,
        probes: u32,
        now_ms: u64,
    ) -> Result<bool, RunError> {
        if plan.windows.is_empty() {
            return Err(RunError::NoParts(run.clone()));
        }
        let meta = serde_json::to_string(plan).unwrap_or_default();
        let mut call = lua::RUN_OPEN.prepare(&self.keys(run));
        call.arg(run.as_str())
            .arg(now_ms)
            .arg(RUN_KEYS_TTL.as_millis() as u64)
            .arg(meta)
            .arg(probes);
        for part in &plan.windows {
            call.arg(part);
        }
        let opened: i64 = call
            .invoke_async(&mut self.redis.clone())
            .await
            .map_err(RedisFailure::from)?;
        // Every run but a backfill window's holds the backfill back until it is recorded
        // complete (or for FOREGROUND_HOLD at most): daily work goes first.
        if opened == 1 && !run.is_backfill() {
            let _: i64 = redis::cmd("HSET")
                .arg(self.ns.foreground_runs())
                .arg(run.as_str())
                .arg(now_ms + FOREGROUND_HOLD.as_millis() as u64)
                .query_async(&mut self.redis.clone())
                .await
                .map_err(RedisFailure::from)?;
        }
        Ok(opened == 1)
    }

    /// Counts one page (see [`PageCount`]).
    pub async fn page(&self, run: &RunId, c: &PageCount<'_>) -> Result<(Counted, Option<u64>), RunError> {
        let mut call = lua::RUN_PAGE.prepare(&self.keys(run));
        call.arg(run.as_str())
            .arg(c.part)
            .arg(c.page)
            .arg(if c.last { "1" } else { "0" })
            .arg(c.total)
            .arg(c.without_id)
            .arg(if c.dead { "1" } else { "0" })
            .arg(crate::clock::now_millis())
            .arg(c.probe_unheld.map_or(0, |n| n.saturating_add(1)))
            .arg(c.elsewhere)
            .arg(c.spawn.len());
        for part in c.spawn {
            call.arg(part.as_str());
        }
        for (id, state) in c.ids {
            call.arg(*id).arg(state.as_str());
        }
        let (counted, completed, probes_left): (i64, i64, i64) = call
            .invoke_async(&mut self.redis.clone())
            .await
            .map_err(RedisFailure::from)?;
        Ok((counted_from(counted, completed), u64::try_from(probes_left).ok()))
    }

    /// Records what became of `id`, with its feed line when it changed the mirror.
    pub async fn mark(
        &self,
        run: &RunId,
        id: &str,
        state: IdState,
        change: Option<&ChangeLine>,
    ) -> Result<Counted, RunError> {
        let line = change
            .map(|c| serde_json::to_string(c).unwrap_or_default())
            .unwrap_or_default();
        let (moved, record): (i64, i64) = lua::RUN_MARK
            .prepare(&self.keys(run))
            .arg(run.as_str())
            .arg(id)
            .arg(state.as_str())
            .arg(crate::clock::now_millis())
            .arg(line)
            .invoke_async(&mut self.redis.clone())
            .await
            .map_err(RedisFailure::from)?;
        Ok(counted_from(moved, record))
    }

    /// The run as Redis counts it; `None` when it is not there.
    pub async fn status(&self, run: &RunId) -> Result<Option<RunStatus>, RunError> {
        let keys = self.keys(run);
        let (fields, parts): (BTreeMap<String, String>, u64) = redis::pipe()
            .cmd("HGETALL")
            .arg(&keys.run)
            .cmd("SCARD")
            .arg(&keys.parts)
            .query_async(&mut self.redis.clone())
            .await
            .map_err(RedisFailure::from)?;
        if fields.is_empty() {
            return Ok(None);
        }
        let num = |name: &'static str| -> Result<u64, RunError> {
            match fields.get(name) {
                None => Ok(0),
                Some(v) => v
                    .parse::<i64>()
                    .map(|n| n.max(0) as u64)
                    .map_err(|_| RunError::Corrupt(run.clone(), name)),
            }
        };
        let opt = |name: &'static str| -> Result<Option<u64>, RunError> {
            fields.get(name).map(|_| num(name)).transpose()
        };
        let mut counts = BTreeMap::new();
        let mut part_totals: BTreeMap<String, (u64, u64)> = BTreeMap::new();
        for (k, v) in &fields {
            let whole = || {
                v.parse::<i64>()
                    .map(|n| n.max(0) as u64)
                    .map_err(|_| RunError::Corrupt(run.clone(), "a part's count"))
            };
            if let Some(part) = k.strip_prefix("total:") {
                part_totals.entry(part.to_owned()).or_default().0 = whole()?;
            } else if let Some(part) = k.strip_prefix("listed:") {
                part_totals.entry(part.to_owned()).or_default().1 = whole()?;
            }
            if let Some(state) = k.strip_prefix("n:") {
                let n = v
                    .parse::<i64>()
                    .map_err(|_| RunError::Corrupt(run.clone(), "a state counter"))?;
                counts.insert(state.to_owned(), n);
            }
        }
        Ok(Some(RunStatus {
            run_id: run.clone(),
            plan: fields.get("meta").and_then(|m| serde_json::from_str(m).ok()),
            started_ms: num("opened")?,
            completed_ms: opt("completed")?,
            recorded_ms: opt("recorded")?,
            parts,
            parts_done: num("partsDone")?,
            pages_done: num("pagesDone")?,
            pages_dead: num("pagesDead")?,
            total_cnt: num("totalCnt")?,
            probes_left: num("probesLeft")?,
            unheld_probed: num("unheldProbed")?,
            probed_total: num("probedTotal")?,
            hits_without_id: num("withoutId")?,
            hits_elsewhere: num("elsewhere")?,
            ids_seen: num("seen")?,
            counts,
            part_totals,
            version: num("version")?,
            feed: match fields.get("feed") {
                Some(f) => serde_json::from_str(f).map_err(|_| RunError::Corrupt(run.clone(), "feed"))?,
                None => Vec::new(),
            },
        }))
    }

    /// The newest `limit` runs Redis still holds, newest first.
    pub async fn list(&self, limit: usize) -> Result<Vec<RunStatus>, RunError> {
        let ids: Vec<String> = redis::cmd("ZREVRANGE")
            .arg(self.shared_keys().runs)
            .arg(0)
            .arg(limit.saturating_sub(1))
            .query_async(&mut self.redis.clone())
            .await
            .map_err(RedisFailure::from)?;
        self.statuses(&ids).await
    }

    /// The status of each id Redis still counts, skipping what is not a run id.
    async fn statuses(&self, ids: &[String]) -> Result<Vec<RunStatus>, RunError> {
        let mut out = Vec::new();
        for id in ids {
            let Ok(run) = RunId::parse(id) else { continue };
            if let Some(s) = self.status(&run).await? {
                out.push(s);
            }
        }
        Ok(out)
    }

    /// The keys every run shares (the run list, the owed records and alerts); a run's
    /// own keys name them too.
    fn shared_keys(&self) -> RunKeys {
        self.ns.run("")
    }

    /// Adds `part` to the parts `run` waits for, before its first page is sent: a probe
    /// whose count is retried after its window was read may decide otherwise, and the run
    /// must wait for the window all the same.
    pub async fn expect(&self, run: &RunId, part: &str) -> Result<(), RunError> {
        let keys = self.keys(run);
        let _: () = redis::pipe()
            .cmd("SADD")
            .arg(&keys.parts)
            .arg(part)
            .ignore()
            .cmd("PEXPIRE")
            .arg(&keys.parts)
            .arg(RUN_KEYS_TTL.as_millis() as u64)
            .ignore()
            .query_async(&mut self.redis.clone())
            .await
            .map_err(RedisFailure::from)?;
        Ok(())
    }

    /// Whether page `page` of `part` was counted (a repeated probe is not asked again).
    pub async fn page_counted(&self, run: &RunId, part: &str, page: u32) -> Result<bool, RunError> {
        let n: i64 = redis::cmd("SISMEMBER")
            .arg(self.keys(run).pages)
            .arg(format!("{part}|{page}"))
            .query_async(&mut self.redis.clone())
            .await
            .map_err(RedisFailure::from)?;
        Ok(n == 1)
    }

    /// Forgets `run` so that a run of the same id counts from nothing (a backfill window
    /// searched again): `true` when it is gone, `false` when it is kept because it is not
    /// complete, the store is still owed its record, a feed line or its alert, or it has
    /// dead ids (a dead letter redriven later settles in it).
    pub async fn discard(&self, run: &RunId) -> Result<bool, RunError> {
        self.forget(run, "finished").await
    }

    /// Drops `run` without a record: a backfill window split in two before it counted a
    /// page (its halves are runs of their own). `false` when it is kept: it counted a page
    /// (a first page delivered again, after the window was read) or holds a feed line.
    pub async fn abandon(&self, run: &RunId) -> Result<bool, RunError> {
        self.forget(run, "unread").await
    }

    async fn forget(&self, run: &RunId, mode: &str) -> Result<bool, RunError> {
        let gone: i64 = lua::RUN_DISCARD
            .prepare(&self.keys(run))
            .arg(run.as_str())
            .arg(mode)
            .invoke_async(&mut self.redis.clone())
            .await
            .map_err(RedisFailure::from)?;
        Ok(gone == 1)
    }

    /// Runs whose record or feed lines are owed to the store.
    pub async fn owed(&self) -> Result<Vec<RunId>, RunError> {
        let ids: Vec<String> = redis::cmd("SMEMBERS")
            .arg(self.shared_keys().unrecorded)
            .query_async(&mut self.redis.clone())
            .await
            .map_err(RedisFailure::from)?;
        Ok(ids.iter().filter_map(|i| RunId::parse(i).ok()).collect())
    }

    /// Writes `run`'s feed lines and record to `docs`, under a per-run lock (another
    /// writer at work means nothing to do: `Ok(None)`).
    pub async fn record(&self, run: &RunId, docs: &dyn DocumentStore) -> Result<Option<RunRecord>, RunError> {
        let lock = crate::lock::RunnerLock::new(self.redis.clone(), format!("{}:lock", self.keys(run).run));
        let Some(held) = lock.try_acquire(RUN_FINALIZE_LOCK).await? else {
            return Ok(None);
        };
        let result = self.record_locked(run, docs).await;
        let _ = lock.release(held).await;
        result
    }

    async fn record_locked(
        &self,
        run: &RunId,
        docs: &dyn DocumentStore,
    ) -> Result<Option<RunRecord>, RunError> {
        let keys = self.keys(run);
        let Some(status) = self.status(run).await? else {
            // Its keys expired: it leaves the owed set.
            let _: i64 = lua::RUN_RECORDED
                .prepare(&keys)
                .arg(run.as_str())
                .arg(crate::clock::now_millis())
                .arg("0")
                .arg(RUN_KEYS_TTL.as_millis() as u64)
                .arg(0)
                .arg("")
                .invoke_async(&mut self.redis.clone())
                .await
                .map_err(RedisFailure::from)?;
            return Ok(None);
        };
        let lines: BTreeMap<String, String> = redis::cmd("HGETALL")
            .arg(&keys.changes)
            .query_async(&mut self.redis.clone())
            .await
            .map_err(RedisFailure::from)?;
        let now = crate::clock::now_millis();
        let mut feed = status.feed.clone();
        let mut written = String::new();
        if !lines.is_empty() {
            let key = feed_key(now, run);
            let mut body = String::new();
            for line in lines.values() {
                body.push_str(line);
                body.push('\n');
            }
            docs.put(&key, body.as_bytes()).await?;
            feed.push(key.clone());
            written = key;
        }
        let discrepancies = status.discrepancies();
        let record = RunRecord {
            schema_version: SCHEMA_VERSION,
            run_id: run.clone(),
            plan: status.plan.clone(),
            started_at: crate::clock::rfc3339_millis(status.started_ms),
            completed_at: status.completed_ms.map(crate::clock::rfc3339_millis),
            recorded_at: crate::clock::rfc3339_millis(now),
            complete: status.completed_ms.is_some(),
            total_cnt: status.total_cnt,
            pages_done: status.pages_done,
            pages_dead: status.pages_dead,
            ids: RunIdCounts {
                seen: status.ids_seen,
                without_id: status.hits_without_id,
                elsewhere: status.hits_elsewhere,
                skipped: status.count(IdState::Skipped),
                fetched: status.fetched(),
                added: status.count(IdState::Added),
                revised: status.count(IdState::Revised),
                unchanged: status.count(IdState::Unchanged),
                missing: status.count(IdState::Missing),
                parked: status.count(IdState::Parked),
                dead: status.count(IdState::Dead),
                outstanding: status.outstanding(),
            },
            discrepancies,
            feed,
        };
        let body = serde_json::to_vec_pretty(&record).unwrap_or_default();
        docs.put(&format!("{}{run}.json", layout::RUNS.path), &body)
            .await?;
        // A backfill window's counts go soon after its record: the record says it all, and
        // the corpus's ids counted for months would make Redis a second copy of it.
        let keep = if record.complete && run.is_backfill() {
            BACKFILL_WINDOW_KEEP
        } else {
            RUN_KEYS_TTL
        };
        let mut call = lua::RUN_RECORDED.prepare(&keys);
        call.arg(run.as_str())
            .arg(now)
            .arg(if record.discrepancies.is_empty() { "0" } else { "1" })
            .arg(keep.as_millis() as u64)
            .arg(status.version)
            .arg(written);
        for (id, line) in &lines {
            call.arg(id).arg(line);
        }
        let _files: i64 = call
            .invoke_async(&mut self.redis.clone())
            .await
            .map_err(RedisFailure::from)?;
        if record.complete {
            let _: i64 = redis::cmd("HDEL")
                .arg(self.ns.foreground_runs())
                .arg(run.as_str())
                .query_async(&mut self.redis.clone())
                .await
                .map_err(RedisFailure::from)?;
        }
        tracing::info!(
            run = %run,
            complete = record.complete,
            seen = record.ids.seen,
            fetched = record.ids.fetched,
            skipped = record.ids.skipped,
            discrepancies = record.discrepancies.len(),
            "sync run recorded"
        );
        Ok(Some(record))
    }

    /// Whether a run other than a backfill window's is open: the backfill gives way to it.
    /// Entries past their hold, or whose run Redis no longer has (it can never be recorded),
    /// are dropped as they are found.
    pub async fn foreground_open(&self) -> Result<bool, RunError> {
        let key = self.ns.foreground_runs();
        let held: BTreeMap<String, u64> = redis::cmd("HGETALL")
            .arg(&key)
            .query_async(&mut self.redis.clone())
            .await
            .map_err(RedisFailure::from)?;
        let now = crate::clock::now_millis();
        let mut open = false;
        for (run, until) in held {
            // A run whose keys Redis no longer has can never complete: it holds nothing.
            let counted: i64 = match RunId::parse(&run) {
                Ok(id) => redis::cmd("EXISTS")
                    .arg(self.keys(&id).run)
                    .query_async(&mut self.redis.clone())
                    .await
                    .map_err(RedisFailure::from)?,
                Err(_) => 0,
            };
            if until > now && counted == 1 {
                open = true;
            } else {
                tracing::warn!(run = %run, "a run held the backfill back past its hold, or Redis lost it; the backfill goes on");
                let _: i64 = redis::cmd("HDEL")
                    .arg(&key)
                    .arg(&run)
                    .query_async(&mut self.redis.clone())
                    .await
                    .map_err(RedisFailure::from)?;
            }
        }
        Ok(open)
    }

    /// Writes every owed record; returns those written.
    pub async fn record_owed(&self, docs: &dyn DocumentStore) -> Result<Vec<RunRecord>, RunError> {
        let mut out = Vec::new();
        for run in self.owed().await? {
            if let Some(r) = self.record(&run, docs).await? {
                out.push(r);
            }
        }
        Ok(out)
    }

    /// Takes the owed discrepancy alerts (each once).
    pub async fn take_alerts(&self, limit: usize) -> Result<Vec<RunAlert>, RunError> {
        let ids: Vec<String> = redis::cmd("SPOP")
            .arg(self.shared_keys().alerts)
            .arg(limit.max(1))
            .query_async(&mut self.redis.clone())
            .await
            .map_err(RedisFailure::from)?;
        Ok(self
            .statuses(&ids)
            .await?
            .into_iter()
            .map(|s| RunAlert {
                discrepancies: s.discrepancies(),
                run_id: s.run_id,
            })
            .collect())
    }

    /// Puts alerts that could not be delivered back, for the next pass.
    pub async fn alerts_undelivered(&self, alerts: &[RunAlert]) -> Result<(), RunError> {
        if alerts.is_empty() {
            return Ok(());
        }
        let ids: Vec<&str> = alerts.iter().map(|a| a.run_id.as_str()).collect();
        let _: i64 = redis::cmd("SADD")
            .arg(self.shared_keys().alerts)
            .arg(&ids)
            .query_async(&mut self.redis.clone())
            .await
            .map_err(RedisFailure::from)?;
        Ok(())
    }
}

fn counted_from(counted: i64, flag: i64) -> Counted {
    match counted {
        -1 => Counted::NoRun,
        0 if flag == 0 => Counted::Already,
        _ => Counted::Yes { record: flag == 1 },
    }
}

/// `changes/{YYYY-MM-DD}/{HHMMSSmmm}-{run}.jsonl`, by the time it is written (UTC): keys
/// sort in the order files were written, so a consumer that remembers the last key it read
/// finds every later file after it, a late file of an old run included.
fn feed_key(now_ms: u64, run: &RunId) -> String {
    let t = crate::clock::rfc3339_millis(now_ms);
    let clock: String = t[11..23].chars().filter(char::is_ascii_digit).collect();
    format!("{}{}/{clock}-{run}.jsonl", layout::CHANGES.path, &t[..10])
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn run_ids_are_checked() {
        for ok in [
            "sync-20261202T073012Z-3fa9",
            "a",
            "daily-20261202T040000Z",
            "x.y_z-1",
        ] {
            assert!(RunId::parse(ok).is_ok(), "{ok}");
        }
        for bad in ["", "-a", "a/b", "a b", "런", &"a".repeat(65), "a:b", "{a}"] {
            let e = RunId::parse(bad).expect_err(bad);
            assert!(e.to_string().contains("run id must be"), "{e}");
        }
        assert_eq!(
            RunId::for_firing("daily", 1_764_615_600_000).as_str(),
            "daily-20251201T190000Z"
        );
        assert!(RunId::parse(RunId::fresh("sync", 0).as_str()).is_ok());
    }

    #[test]
    fn discrepancies_name_what_is_off() {
        let mut s = RunStatus {
            run_id: RunId::parse("r").expect("id"),
            plan: None,
            started_ms: 0,
            completed_ms: Some(1),
            recorded_ms: None,
            parts: 1,
            parts_done: 1,
            pages_done: 5,
            pages_dead: 0,
            total_cnt: 412,
            probes_left: 0,
            unheld_probed: 0,
            probed_total: 0,
            version: 0,
            feed: Vec::new(),
            hits_without_id: 0,
            hits_elsewhere: 0,
            ids_seen: 412,
            counts: BTreeMap::new(),
            part_totals: [
                ("20260101~20260131".to_owned(), (412, 412)),
                ("probe:all".to_owned(), (0, 0)),
            ]
            .into(),
        };
        assert!(s.discrepancies().is_empty());
        s.part_totals.insert("20260101~20260131".into(), (412, 410));
        s.counts.insert("dead".into(), 2);
        let d = s.discrepancies();
        assert!(
            d[0].contains(
                "window 20260101~20260131: law.go.kr reported totalCnt 412 and its pages listed 410"
            ),
            "{d:?}"
        );
        assert!(d[1].contains("2 ids were dead-lettered"), "{d:?}");
    }

    #[test]
    fn feed_files_sort_in_the_order_they_were_written() {
        let run = RunId::parse("r").expect("id");
        assert_eq!(
            feed_key(1_764_615_600_123, &run),
            "changes/2025-12-01/190000123-r.jsonl"
        );
        assert!(
            feed_key(1_764_615_600_123, &run) < feed_key(1_764_615_600_124, &RunId::parse("a").expect("id"))
        );
    }
}
