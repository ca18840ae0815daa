//! The drainer: retries parked jobs in passes, one drainer at a time cluster-wide.
//!
//! A run takes the single-runner lock, then repeats: a pass (claim a batch sized to what
//! the gate can serve before the deadline, work its jobs several at once, each dispatched
//! by type and settled as it ends), then a fixed delay of `DRAIN_INTERVAL_MS` counted from
//! the pass's end (the seed's `fixedDelay`), until the deadline leaves no room for another
//! pass. A scheduled run goes straight on while entries are due and sleeps until the next
//! one falls due while its deadline leaves room for a call after it.
//!
//! Jobs are launched one gate pace apart (at once when none is in flight), up to
//! [`drain_jobs_in_flight`]: while one call waits for a slow reply or its document is
//! stored, the next waits at the gate for its slot, so the key is not idled by one slow
//! call. The gate spaces every start, as it does for any caller.
//!
//! Entries not worked when time runs out go back unchanged; a drainer killed mid-pass
//! loses nothing, because its leases expire and the entries come back. A job the rate gate
//! refuses (a cooldown, a full gate, an unsettled or unreachable gate) was not attempted:
//! it goes back unchanged, due when the gate expects room; no new job starts, the jobs in
//! flight finish, and a scheduled run whose deadline leaves room waits until then and goes
//! on (any other run ends), so the key is called again within about an interval of the
//! cooldown's end.

use std::time::{Duration, Instant};

use futures::stream::{FuturesUnordered, StreamExt};
use tracing::Instrument;

use crate::alert::{AlertError, AlertSink, DeadLetterAlert};
use crate::deadline::Deadline;
use crate::law::BoxFuture;
use crate::lock::RunnerLock;
use crate::policy::{
    ALERT_TIMEOUT, ALERTS_PER_PASS, DEFAULT_LEASE, LEASE_MARGIN, MAX_CLAIM_BATCH, MIN_CALL_WINDOW,
    drain_jobs_in_flight,
};
use crate::queue::{ErrorNote, Job, Leased, RetryQueue, Settled};
use crate::redis_conn::RedisFailure;

/// What handling one job came to.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Outcome {
    Done,
    /// Failed; retry later (after at least `after`, when the upstream said so).
    Retry {
        error: ErrorNote,
        after: Option<Duration>,
    },
    /// Failed in a way no retry can fix: dead-letter it now.
    Dead {
        error: ErrorNote,
    },
    /// Not worked, and not a failure: no time left before the run's deadline, or the rate
    /// gate refused a slot (a cooldown, callers ahead beyond the wait bound, an unsettled
    /// or unreachable gate), or law.go.kr refused the key itself (the key-health circuit:
    /// no fault of the job). The upstream was not called, or refused the key. Released with its retry count and
    /// history unchanged: due again at once (`retry_in: None`), or after `retry_in`, when
    /// the gate expects room. No new job starts and the rest of the batch goes back
    /// unchanged; a scheduled run waits `retry_in` when its deadline allows, else it ends.
    NotStarted {
        retry_in: Option<Duration>,
        /// Whether `retry_in` is when the gate expects room (a cooldown's end, the slot
        /// behind the callers ahead), not a guess for a gate that could not say (unsettled,
        /// unreachable): only then does a scheduled run wait for it rather than end.
        room_known: bool,
    },
    /// Not worked for a reason that holds this job alone: other work goes first (a backfill
    /// job while a daily run is open), or the key-health circuit holds its API (a probe in
    /// flight, or law.go.kr refused that API). The upstream was not called (or refused the
    /// API). Released unchanged, due after `retry_in`; the pass goes on with the next job.
    Deferred {
        retry_in: Duration,
    },
}

/// Runs one job by its kind. The functions route [`JobKind::Search`] and
/// [`JobKind::Detail`] to the same code their SQS handlers use (`app::jobs::run_job`).
///
/// [`JobKind::Search`]: crate::queue::JobKind::Search
/// [`JobKind::Detail`]: crate::queue::JobKind::Detail
pub trait JobHandler: Send + Sync {
    fn handle<'a>(&'a self, job: &'a Job, deadline: Deadline) -> BoxFuture<'a, Outcome>;

    /// Told when `job` became a dead letter (its run counts it as such).
    fn buried<'a>(&'a self, _job: &'a Job) -> BoxFuture<'a, ()> {
        Box::pin(std::future::ready(()))
    }

    /// Work owed after each pass: the functions write owed run records, and, when the
    /// drainer sends alerts, the runs' discrepancy alerts through `alerts`.
    fn after_pass<'a>(
        &'a self,
        _alerts: Option<&'a dyn AlertSink>,
        _deadline: Deadline,
    ) -> BoxFuture<'a, ()> {
        Box::pin(std::future::ready(()))
    }
}

/// Drainer settings.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct DrainerConfig {
    /// Fixed delay between the end of a pass and the start of the next.
    pub interval: Duration,
    /// Failures before an entry is dead-lettered (`RETRY_MAX_ATTEMPTS`).
    pub max_attempts: u32,
    /// Time one job takes at the gate's pace (the gate interval): sizes each batch.
    pub time_per_job: Duration,
    /// Passes at most, for a CLI run; `None` runs until the deadline.
    pub max_passes: Option<u32>,
    /// Whether a run without a pass count sleeps for entries that fall due before its next
    /// pass (the scheduled drainer), or ends as soon as nothing is due (an SQS handler
    /// working the queue off after its batch).
    pub linger: bool,
    /// Whether passes send the pending dead-letter alerts. Only the scheduled drainer,
    /// which has the alert target, does.
    pub send_alerts: bool,
}

/// What one pass did.
#[derive(Debug, Clone, Default, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct PassReport {
    pub claimed: u32,
    pub succeeded: u32,
    pub failed: u32,
    pub dead_lettered: u32,
    /// Claimed but not worked (time ran out) or no longer ours (lease lost).
    pub skipped: u32,
    /// Entries that came back from an expired lease during this pass's claim.
    pub reclaimed: u32,
    /// Whether the pending dead-letter alert was delivered (`None`: nothing to alert).
    pub alert_delivered: Option<bool>,
    /// Milliseconds from the run's start to this pass's start and end.
    pub started_ms: u64,
    pub ended_ms: u64,
    /// A job was not started (no time before the deadline, or the rate gate refused): it
    /// and the rest were released unchanged; the run waits for the gate's room or ends.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub out_of_room: bool,
}

/// What a run did.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(tag = "status", rename_all = "camelCase")]
pub enum DrainReport {
    /// Another drainer holds the lock; nothing was done.
    Busy,
    Ran {
        passes: Vec<PassReport>,
    },
}

/// How a pass ended: its report, and when the gate expects room again if it refused a job.
struct PassEnd {
    report: PassReport,
    room_at: Option<tokio::time::Instant>,
}

/// One job's part of a pass.
struct Worked {
    /// Its counts (succeeded, failed, dead-lettered or skipped).
    tally: PassReport,
    /// `Some(room_in)` when it was not started ([`Outcome::NotStarted`]); `room_in` is
    /// when the gate expects room, if it said.
    not_started: Option<Option<Duration>>,
    /// When its handler returned.
    ended: tokio::time::Instant,
    settled: Result<(), RedisFailure>,
}

/// A drainer over one queue.
pub struct Drainer<'a> {
    pub queue: &'a RetryQueue,
    pub lock: &'a RunnerLock,
    pub handler: &'a dyn JobHandler,
    pub alerts: &'a dyn AlertSink,
    /// `APP_ENV`, named in alerts.
    pub env: &'a str,
    pub cfg: DrainerConfig,
    pub hooks: DrainHooks<'a>,
}

/// What a caller outside Lambda may want from a run (the local runtime); Lambda uses none.
#[derive(Default, Clone, Copy)]
pub struct DrainHooks<'a> {
    /// Sees each pass as it ends; the run's report comes only at its end.
    pub on_pass: Option<&'a (dyn Fn(&PassReport) + Send + Sync)>,
    /// Ends the run early once it reads true: no new job starts, the jobs in flight finish
    /// and settle, the jobs not yet started go back unchanged, the sleep between passes is
    /// cut short, and the lock is released.
    pub stop: Option<&'a tokio::sync::watch::Receiver<bool>>,
    /// Once stopping, how long a job's handler may take to return; past it the handler is
    /// dropped where it is and its entry released unchanged (a call cut off after its
    /// grant has spent that slot, and a reservation cut off at the gate leaves its slot
    /// unused). A handler that has returned is always settled, and a dead letter always
    /// buried: only the handler is cut. `None`: handlers always finish. Lambda's shutdown
    /// leaves a runtime half a second, so the functions set it; the local runtime does not.
    pub cut_after: Option<Duration>,
}

impl std::fmt::Debug for DrainHooks<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("DrainHooks")
            .field("on_pass", &self.on_pass.is_some())
            .field("stop", &self.stop.map(|s| *s.borrow()))
            .field("cut_after", &self.cut_after)
            .finish()
    }
}

impl DrainHooks<'_> {
    fn stopping(&self) -> bool {
        self.stop.is_some_and(|s| *s.borrow())
    }

    /// Resolves `cut_after` after stopping; never without both.
    async fn cut_off(&self) {
        match self.cut_after {
            Some(grace) => {
                self.stopped().await;
                tokio::time::sleep(grace).await;
            }
            None => std::future::pending().await,
        }
    }

    /// Resolves once stopping; never without a stop signal.
    async fn stopped(&self) {
        match self.stop {
            Some(s) => {
                let mut s = s.clone();
                if s.wait_for(|v| *v).await.is_err() {
                    std::future::pending::<()>().await;
                }
            }
            None => std::future::pending().await,
        }
    }
}

impl std::fmt::Debug for Drainer<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Drainer")
            .field("env", &self.env)
            .field("cfg", &self.cfg)
            .finish_non_exhaustive()
    }
}

impl Drainer<'_> {
    /// Runs passes until the deadline (or `max_passes`), holding the lock throughout.
    pub async fn run(&self, deadline: Deadline) -> Result<DrainReport, RedisFailure> {
        let start = Instant::now();
        let hold = |d: Deadline| d.usable().map_or(DEFAULT_LEASE, |left| left + LEASE_MARGIN);
        if self.hooks.stopping() {
            return Ok(DrainReport::Ran { passes: Vec::new() });
        }
        let Some(held) = self.lock.try_acquire(hold(deadline)).await? else {
            tracing::info!("drainer: another drainer holds the lock; nothing to do");
            return Ok(DrainReport::Busy);
        };
        let mut passes = Vec::new();
        let result = async {
            loop {
                let span = tracing::info_span!("drainer.pass", n = passes.len() + 1);
                let PassEnd {
                    report: pass,
                    room_at,
                } = self.pass(deadline, start).instrument(span).await?;
                tracing::info!(
                    claimed = pass.claimed,
                    succeeded = pass.succeeded,
                    failed = pass.failed,
                    dead_lettered = pass.dead_lettered,
                    skipped = pass.skipped,
                    "drainer: pass done"
                );
                if let Some(f) = self.hooks.on_pass {
                    f(&pass);
                }
                let worked = pass.claimed > 0;
                let out_of_room = pass.out_of_room;
                passes.push(pass);
                let more = self.cfg.max_passes.is_none_or(|m| (passes.len() as u32) < m);
                if !more || self.hooks.stopping() {
                    return Ok(());
                }
                // A scheduled run (no pass count, with a deadline) is billed for every second
                // it sleeps, but a key idle while parked work waits is the dearer waste: it
                // sleeps until the next entry falls due (or the gate has room again after a
                // refusal) whenever its deadline leaves room for a call after that, and ends
                // only when nothing falls due in time; what is parked later waits for the
                // next scheduled run at most.
                let sleeps_for = |d: Duration| {
                    self.cfg.linger
                        && self.cfg.max_passes.is_none()
                        && deadline.usable().is_some()
                        && deadline.allows(d + MIN_CALL_WINDOW)
                };
                let pause = if out_of_room {
                    // The gate refused (a cooldown, callers ahead) or time ran out. A
                    // scheduled run waits for the room the gate expects and goes on, so the
                    // first call after a cooldown starts within about an interval of its end.
                    let now = tokio::time::Instant::now();
                    match room_at.map(|at| at.saturating_duration_since(now)) {
                        Some(d) if sleeps_for(d) => {
                            tracing::info!(
                                wait_ms = d.as_millis() as u64,
                                "drainer: the gate has no room; waiting until it expects some"
                            );
                            d
                        }
                        _ => return Ok(()),
                    }
                } else if !deadline.allows(self.cfg.interval + MIN_CALL_WINDOW) {
                    return Ok(());
                } else if self.cfg.max_passes.is_none() {
                    let stats = self.queue.stats().await?;
                    match stats.next_due_in {
                        // (A pass that could claim nothing due does not spin.)
                        _ if stats.due_now > 0 && worked => Duration::ZERO,
                        // An SQS handler does not wait for work: it ends when nothing is due.
                        _ if !self.cfg.linger => return Ok(()),
                        _ if stats.due_now > 0 => self.cfg.interval,
                        Some(d) if d <= self.cfg.interval || sleeps_for(d) => d,
                        _ => {
                            tracing::info!(
                                next_due_in_ms = stats.next_due_in.map(|d| d.as_millis() as u64),
                                "drainer: nothing falls due before the run's deadline; run ends"
                            );
                            return Ok(());
                        }
                    }
                } else {
                    self.cfg.interval
                };
                tokio::select! {
                    () = tokio::time::sleep(pause) => {}
                    () = self.hooks.stopped() => return Ok(()),
                }
                if !self.lock.extend(&held, hold(deadline)).await? {
                    tracing::warn!("drainer: lost the lock (expired); stopping");
                    return Ok(());
                }
            }
        }
        .await;
        if let Err(e) = self.lock.release(held).await {
            tracing::warn!(error = %e, "drainer: lock not released; it frees itself at its TTL");
        }
        result.map(|()| DrainReport::Ran { passes })
    }

    async fn pass(&self, deadline: Deadline, start: Instant) -> Result<PassEnd, RedisFailure> {
        let mut report = PassReport {
            started_ms: start.elapsed().as_millis() as u64,
            ..PassReport::default()
        };
        let mut room_at = None;
        // Leases outlive the invocation by a margin; without a deadline (the CLI), work stops
        // a margin before the lease ends, so no job runs after another drainer could own it.
        let (lease, work_until) = match deadline.usable() {
            Some(left) => (left + LEASE_MARGIN, deadline),
            None => (DEFAULT_LEASE, Deadline::after(DEFAULT_LEASE - LEASE_MARGIN)),
        };
        let budget = work_until
            .usable()
            .unwrap_or(lease)
            .saturating_sub(MIN_CALL_WINDOW);
        let batch = (budget.as_millis() / self.cfg.time_per_job.as_millis().max(1)) as usize;
        // A stop seen before the claim claims nothing (rather than claim a batch and hand
        // every entry back one by one).
        if batch > 0 && !self.hooks.stopping() {
            let claim = self.queue.claim(batch.min(MAX_CLAIM_BATCH), lease).await?;
            report.claimed = claim.entries.len() as u32;
            report.reclaimed = claim.reclaimed;
            report.dead_lettered += claim.corrupt.len() as u32;
            room_at = self.work_batch(claim.entries, work_until, &mut report).await?;
        }
        // Stopping (a shutdown), what is owed after a pass waits for the next run: the alerts
        // stay pending and the runs' records are written by the next pass anywhere.
        if self.hooks.stopping() {
            report.ended_ms = start.elapsed().as_millis() as u64;
            return Ok(PassEnd { report, room_at });
        }
        if self.cfg.send_alerts {
            // A delivery cut off by a stop leaves its alerts pending: they are marked
            // delivered only after the send succeeds.
            let flush = self.flush_alerts(deadline);
            report.alert_delivered = if self.hooks.cut_after.is_some() {
                tokio::select! {
                    r = flush => r?,
                    () = self.hooks.stopped() => None,
                }
            } else {
                flush.await?
            };
        }
        let alerts = self.cfg.send_alerts.then_some(self.alerts);
        self.handler.after_pass(alerts, deadline).await;
        report.ended_ms = start.elapsed().as_millis() as u64;
        Ok(PassEnd { report, room_at })
    }

    /// Works a claimed batch, several jobs at once ([`drain_jobs_in_flight`]), launched one
    /// gate pace apart (or at once when none is in flight), so that while one call is in
    /// flight the next is already waiting at the gate for its slot; the gate spaces every
    /// start. Each job settles its own entry as soon as it ends. A job not started (the
    /// deadline, a gate refusal) stops the launches: the jobs in flight finish and settle,
    /// the rest go back unchanged. Returns when the gate expects room again, if a refusal
    /// said so. A Redis failure settling one job stops the launches too; the others in
    /// flight still settle, what is left is released if Redis allows (else its leases
    /// expire), and the first failure is returned: no entry is lost or settled twice.
    async fn work_batch(
        &self,
        entries: Vec<Leased>,
        work_until: Deadline,
        report: &mut PassReport,
    ) -> Result<Option<tokio::time::Instant>, RedisFailure> {
        let depth = drain_jobs_in_flight(self.cfg.time_per_job);
        let mut waiting = entries.into_iter();
        let mut running = FuturesUnordered::new();
        let mut next_launch = tokio::time::Instant::now();
        let mut launching = true;
        let mut room_at: Option<tokio::time::Instant> = None;
        let mut failure = None;
        loop {
            let room = launching && running.len() < depth && waiting.len() > 0;
            if room && (!work_until.allows(MIN_CALL_WINDOW) || self.hooks.stopping()) {
                launching = false;
                continue;
            }
            let now = tokio::time::Instant::now();
            if room && (running.is_empty() || now >= next_launch) {
                if let Some(leased) = waiting.next() {
                    running.push(self.work(leased, work_until));
                    next_launch = now + self.cfg.time_per_job;
                }
                continue;
            }
            if running.is_empty() {
                break;
            }
            tokio::select! {
                Some(job) = running.next() => {
                    report.succeeded += job.tally.succeeded;
                    report.failed += job.tally.failed;
                    report.dead_lettered += job.tally.dead_lettered;
                    report.skipped += job.tally.skipped;
                    if let Some(retry_in) = job.not_started {
                        report.out_of_room = true;
                        launching = false;
                        if let Some(at) = retry_in.map(|d| job.ended + d) {
                            room_at = Some(room_at.map_or(at, |r| r.min(at)));
                        }
                    }
                    if let Err(e) = job.settled {
                        launching = false;
                        failure.get_or_insert(e);
                    }
                }
                () = tokio::time::sleep_until(next_launch), if room => {}
                // A stop seen while waiting: the loop stops launching at once, not at
                // the next launch or job end.
                () = self.hooks.stopped(), if launching => {}
            }
        }
        for leased in waiting {
            match self.skip(&leased, report).await {
                Ok(()) => {}
                Err(e) if failure.is_some() => {
                    tracing::warn!(error = %e, "drainer: entry not released; it comes back when its lease ends");
                }
                Err(e) => return Err(e),
            }
        }
        match failure {
            Some(e) => Err(e),
            None => Ok(room_at),
        }
    }

    /// One job: handled, then its entry settled.
    async fn work(&self, leased: Leased, work_until: Deadline) -> Worked {
        let span = tracing::info_span!("drainer.job", id = %leased.id, retry_count = leased.retry_count);
        let handled = self
            .handler
            .handle(&leased.job, work_until)
            .instrument(span.clone());
        let outcome = tokio::select! {
            outcome = handled => outcome,
            () = self.hooks.cut_off() => {
                let _e = span.enter();
                tracing::warn!("drainer: stopping; the job in flight is cut off and its entry handed back");
                let mut tally = PassReport::default();
                // Counted only when the entry was still ours to hand back.
                let settled = self.queue.release(&leased).await.map(|ours| tally.skipped += u32::from(ours));
                return Worked {
                    tally,
                    not_started: None,
                    ended: tokio::time::Instant::now(),
                    settled,
                };
            }
        };
        let ended = tokio::time::Instant::now();
        let not_started = match outcome {
            Outcome::NotStarted { retry_in, room_known } => Some(retry_in.filter(|_| room_known)),
            _ => None,
        };
        let mut tally = PassReport::default();
        let settled = self.settle(&leased, outcome, &mut tally).instrument(span).await;
        Worked {
            tally,
            not_started,
            ended,
            settled,
        }
    }

    /// Sends one grouped alert for the dead letters not yet alerted (this pass's and any an
    /// earlier pass could not deliver), and marks them delivered only on success.
    async fn flush_alerts(&self, deadline: Deadline) -> Result<Option<bool>, RedisFailure> {
        let pending = self.queue.pending_alerts(ALERTS_PER_PASS).await?;
        if pending.is_empty() {
            return Ok(None);
        }
        let alerts: Vec<DeadLetterAlert> = pending
            .iter()
            .map(|v| DeadLetterAlert {
                id: v.id.clone(),
                retry_count: v.retry_count,
                first_failed_at_ms: v.first_error_at_ms.unwrap_or(v.since_ms),
                last_error: v.last_error.clone(),
            })
            .collect();
        let bound = deadline.cap(ALERT_TIMEOUT);
        let sent = match tokio::time::timeout(bound, self.alerts.dead_lettered(self.env, &alerts)).await {
            Ok(r) => r,
            Err(_) => Err(AlertError::Network("timed out")),
        };
        match sent {
            Ok(()) => {
                self.queue.alerts_delivered(&pending).await?;
                Ok(Some(true))
            }
            Err(e) => {
                tracing::error!(error = %e, dead = alerts.len(), "drainer: dead-letter alert not delivered; kept for the next pass");
                Ok(Some(false))
            }
        }
    }

    async fn skip(&self, leased: &Leased, report: &mut PassReport) -> Result<(), RedisFailure> {
        self.queue.release(leased).await?;
        report.skipped += 1;
        Ok(())
    }

    async fn settle(
        &self,
        leased: &Leased,
        outcome: Outcome,
        report: &mut PassReport,
    ) -> Result<(), RedisFailure> {
        match outcome {
            Outcome::Done => {
                if self.queue.ack(leased).await? {
                    report.succeeded += 1;
                } else {
                    tracing::warn!("drainer: lease lost before ack; the entry is someone else's now");
                    report.skipped += 1;
                }
            }
            Outcome::Retry { error, after } => {
                let kind = error.kind.clone();
                match self
                    .queue
                    .fail(leased, error, after, self.cfg.max_attempts)
                    .await?
                {
                    Settled::Rescheduled { due_in } => {
                        tracing::info!(due_in_ms = due_in.as_millis() as u64, kind = %kind, "drainer: job failed again; rescheduled");
                        report.failed += 1;
                    }
                    Settled::Dead => {
                        tracing::error!(kind = %kind, "drainer: job dead-lettered after its last retry");
                        report.dead_lettered += 1;
                        self.handler.buried(&leased.job).await;
                    }
                    Settled::LeaseLost => report.skipped += 1,
                }
            }
            Outcome::Dead { error } => {
                let kind = error.kind.clone();
                if self.queue.dead_letter(leased, error).await? {
                    tracing::error!(kind = %kind, "drainer: job failed permanently; dead-lettered");
                    report.dead_lettered += 1;
                    self.handler.buried(&leased.job).await;
                } else {
                    report.skipped += 1;
                }
            }
            Outcome::NotStarted { retry_in: None, .. } => {
                tracing::info!("drainer: no room before the run's deadline; released unchanged");
                self.skip(leased, report).await?;
            }
            Outcome::Deferred { retry_in } => {
                tracing::info!(
                    due_in_ms = retry_in.as_millis() as u64,
                    "drainer: held back (other work goes first, or its API is held); released unchanged"
                );
                self.queue.release_until(leased, retry_in).await?;
                report.skipped += 1;
            }
            Outcome::NotStarted {
                retry_in: Some(delay),
                ..
            } => {
                tracing::info!(
                    due_in_ms = delay.as_millis() as u64,
                    "drainer: the rate gate has no room; released unchanged until it expects some"
                );
                self.queue.release_until(leased, delay).await?;
                report.skipped += 1;
            }
        }
        Ok(())
    }
}
