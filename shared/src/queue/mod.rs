//! The retry queue: failed work parked in Redis, retried on its own schedule by the drainer.
//!
//! ```text
//!  enqueue ──► waiting ──(due)──► ready ──claim──► leased ──ack──► (gone)
//!   (idempotent)  ▲   by due time   by first failure   │ by lease end
//!                 └──────── fail: retryCount+1, backoff ┤
//!                                   lease ends (drainer died) ──► ready
//!                       fail #RETRY_MAX_ATTEMPTS, or permanent ──► dead ──redrive──► waiting
//!                                      new work for a dead job (enqueue) ──► revived ──► waiting
//! ```
//!
//! Membership in the sets, not a stored field, says whether a job is queued: an id is in at
//! most one of waiting, ready, leased and dead, and a claim never leases an id that is still
//! leased or dead, whatever damage a stray copy in another set did.
//!
//! Every transition is one Lua script over keys sharing one hash tag (see [`crate::keys`]),
//! so it runs on a Redis Cluster. A claim costs O(log N) per entry it moves, never a read of
//! the whole set. Only the holder of an entry's current lease token can settle it, so a
//! drainer whose lease ran out cannot ack work another drainer now owns. A dead letter also
//! enters the pending-alert set, which the drainer empties only once an alert is delivered.

mod entry;
pub(crate) mod scripts;

pub use entry::{EntryView, ErrorNote, Job, JobCheckError, JobKind, Leased, QueueStats, UnknownKind};

use std::time::Duration;

use rand::Rng;

use crate::keys::{Namespace, QueueKeys};
use crate::policy::{
    BACKOFF_JITTER_FRACTION, CLAIM_MOVE_LIMIT, ERROR_HISTORY_LEN, MAX_CLAIM_BATCH, MAX_ERROR_TEXT,
    REDRIVE_BATCH, RETRY_AFTER_CAP, RETRY_BACKOFF_BASE, RETRY_BACKOFF_CAP,
};
use crate::redis_conn::{RedisConn, RedisFailure};
use crate::secret::Secret;
use scripts::{EnqueueArgs, EnqueueReply, SettleAction, SettleArgs};

/// What [`RetryQueue::enqueue`] did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Enqueued {
    /// A new entry, first retried after `due_in`.
    Queued { due_in: Duration },
    /// The same job is already queued (waiting, due or leased); nothing changed.
    AlreadyQueued,
    /// The same job was a dead letter: new work revived it, with fresh attempts
    /// (retryCount 0), due after `due_in`, its history kept with a `revived` note.
    Revived { due_in: Duration },
}

/// What [`RetryQueue::record_dead`] did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Buried {
    /// A new dead letter (a live entry of the job, if any, left the live sets).
    Recorded,
    /// The job was a dead letter already: the note was added to its history and its alert
    /// is owed again.
    AlreadyDead,
}

/// What settling a failed lease did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Settled {
    /// Back in the queue, due after the given delay.
    Rescheduled { due_in: Duration },
    /// Moved to the dead letters.
    Dead,
    /// The lease had ended and the entry belongs to someone else now: nothing changed.
    LeaseLost,
}

/// One claim's result.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Claim {
    /// Entries whose lease had expired and came back.
    pub reclaimed: u32,
    /// Entries that fell due since the last claim.
    pub promoted: u32,
    pub entries: Vec<Leased>,
    /// Entries whose stored data could not be read: dead-lettered, with the reason.
    pub corrupt: Vec<String>,
}

/// The retry schedule: `base` doubled per failure, capped at `cap`, jittered upward.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Backoff {
    pub base: Duration,
    pub cap: Duration,
}

impl Default for Backoff {
    fn default() -> Self {
        Self {
            base: RETRY_BACKOFF_BASE,
            cap: RETRY_BACKOFF_CAP,
        }
    }
}

impl Backoff {
    /// Delay before retry number `count + 1`: the backoff, or `retry_after` when that is
    /// longer, plus up to 20 % upward jitter (so entries told to wait alike do not fall due
    /// together), never beyond [`RETRY_AFTER_CAP`].
    pub fn delay(&self, count: u32, retry_after: Option<Duration>) -> Duration {
        let base = self.base.saturating_mul(1u32 << count.min(20)).min(self.cap);
        let wait = base
            .max(retry_after.unwrap_or(Duration::ZERO))
            .min(RETRY_AFTER_CAP);
        (wait + wait.mul_f64(rand::rng().random_range(0.0..=BACKOFF_JITTER_FRACTION))).min(RETRY_AFTER_CAP)
    }
}

/// Values of one hash field per id, `None` where absent.
type Fields = Vec<Option<String>>;

/// The retry queue of one namespace.
#[derive(Debug, Clone)]
pub struct RetryQueue {
    conn: RedisConn,
    keys: QueueKeys,
    /// Scrubbed from every stored error text: defence in depth behind sanitized errors.
    secret: Option<Secret>,
    backoff: Backoff,
}

impl RetryQueue {
    pub fn new(conn: RedisConn, ns: &Namespace) -> Self {
        Self {
            conn,
            keys: ns.queue(),
            secret: None,
            backoff: Backoff::default(),
        }
    }

    /// The Redis connection this queue uses.
    pub fn connection(&self) -> &RedisConn {
        &self.conn
    }

    /// Replaces every occurrence of `secret` in stored error texts with `***`.
    pub fn with_secret(mut self, secret: Secret) -> Self {
        self.secret = Some(secret);
        self
    }

    /// Uses another retry schedule (tests and the demo use short ones).
    pub fn with_backoff(mut self, backoff: Backoff) -> Self {
        self.backoff = backoff;
        self
    }

    /// Parks `job`. Its first retry falls due after the retry backoff, or after
    /// `retry_after` when the upstream asked for longer. Idempotent per job id.
    pub async fn enqueue(
        &self,
        job: &Job,
        retry_after: Option<Duration>,
        error: ErrorNote,
    ) -> Result<Enqueued, RedisFailure> {
        self.enqueue_due_in(job, self.backoff.delay(0, retry_after), error)
            .await
    }

    /// Parks `job` due after exactly `delay`, without the retry backoff: work that did not
    /// fail but could not be done now (the rate gate's next free slot was too far away).
    pub async fn enqueue_due_in(
        &self,
        job: &Job,
        delay: Duration,
        error: ErrorNote,
    ) -> Result<Enqueued, RedisFailure> {
        let job_json = job_json(job)?;
        let delay = delay.min(RETRY_AFTER_CAP);
        let revived = ErrorNote::now(
            "revived",
            "new work for this dead letter: retried afresh (retryCount 0)",
            None,
        );
        let revival = self.notes_json(&[revived, error.clone()]);
        let history = self.history_json(&[], error);
        let legacy = job.legacy_id().unwrap_or_default();
        let args = EnqueueArgs {
            id: &job.id(),
            job: &job_json,
            delay_ms: ms(delay),
            history: &history,
            revival_notes: &revival,
            keep: ERROR_HISTORY_LEN,
            legacy_id: &legacy,
        };
        Ok(match scripts::enqueue(&self.conn, &self.keys, args).await? {
            EnqueueReply::Queued => Enqueued::Queued { due_in: delay },
            EnqueueReply::AlreadyQueued => Enqueued::AlreadyQueued,
            EnqueueReply::Revived => Enqueued::Revived { due_in: delay },
        })
    }

    /// Leases up to `k` due entries for `lease`, oldest first failure first.
    pub async fn claim(&self, k: usize, lease: Duration) -> Result<Claim, RedisFailure> {
        let k = k.clamp(1, MAX_CLAIM_BATCH);
        let nonce = format!("{:016x}", rand::rng().random::<u64>());
        let reply = scripts::claim(
            &self.conn,
            &self.keys,
            k,
            ms(lease).max(1),
            CLAIM_MOVE_LIMIT,
            &nonce,
        )
        .await?;
        let mut claim = Claim {
            reclaimed: reply.reclaimed,
            promoted: reply.promoted,
            ..Claim::default()
        };
        for f in reply.leased {
            let retry_count = f.count.parse().ok();
            let first_failed_at_ms = f.first.parse::<f64>().ok().map(|v| v as u64);
            let errors: Option<Vec<ErrorNote>> = serde_json::from_str(&f.errors).ok();
            let job: Option<Job> = serde_json::from_str(&f.job).ok();
            match (job, retry_count, first_failed_at_ms, errors) {
                (Some(job), Some(retry_count), Some(first_failed_at_ms), Some(errors)) => {
                    claim.entries.push(Leased {
                        id: f.id,
                        token: f.token,
                        job,
                        retry_count,
                        first_failed_at_ms,
                        errors,
                    });
                }
                (_, count, _, errors) => {
                    // Never dropped, never retried blind: a dead letter with the reason,
                    // keeping what could be read of its count and history.
                    let reason = if f.job.is_empty() {
                        "stored job is missing"
                    } else {
                        "stored entry could not be read"
                    };
                    let note = ErrorNote::now(
                        "corrupt_entry",
                        format!("{reason}; inspect it with `lawsync queue dead`"),
                        None,
                    );
                    let history = self.history_json(&errors.unwrap_or_default(), note);
                    let count = count.unwrap_or(0u32).saturating_add(1);
                    if self
                        .settle(
                            &f.id,
                            &f.token,
                            SettleAction::Dead,
                            count,
                            &history,
                            Duration::ZERO,
                        )
                        .await?
                    {
                        claim.corrupt.push(f.id);
                    }
                }
            }
        }
        Ok(claim)
    }

    /// Done: removes the entry. `false` when the lease was lost (someone else owns it).
    pub async fn ack(&self, leased: &Leased) -> Result<bool, RedisFailure> {
        self.settle(
            &leased.id,
            &leased.token,
            SettleAction::Ack,
            0,
            "",
            Duration::ZERO,
        )
        .await
    }

    /// Failed again: reschedules with retryCount + 1 and a growing, jittered backoff (at
    /// least `retry_after`), or dead-letters once `max_attempts` failures are reached.
    pub async fn fail(
        &self,
        leased: &Leased,
        error: ErrorNote,
        retry_after: Option<Duration>,
        max_attempts: u32,
    ) -> Result<Settled, RedisFailure> {
        let count = leased.retry_count.saturating_add(1);
        let history = self.history_json(&leased.errors, error);
        let (action, delay) = if count >= max_attempts {
            (SettleAction::Dead, Duration::ZERO)
        } else {
            (SettleAction::Retry, self.backoff.delay(count, retry_after))
        };
        Ok(
            match self
                .settle(&leased.id, &leased.token, action, count, &history, delay)
                .await?
            {
                false => Settled::LeaseLost,
                true if action == SettleAction::Dead => Settled::Dead,
                true => Settled::Rescheduled { due_in: delay },
            },
        )
    }

    /// A failure no retry can fix: straight to the dead letters.
    pub async fn dead_letter(&self, leased: &Leased, error: ErrorNote) -> Result<bool, RedisFailure> {
        let history = self.history_json(&leased.errors, error);
        let count = leased.retry_count.saturating_add(1);
        self.settle(
            &leased.id,
            &leased.token,
            SettleAction::Dead,
            count,
            &history,
            Duration::ZERO,
        )
        .await
    }

    /// Records `job` as a dead letter at once (a permanent failure seen outside the queue),
    /// with `error` added to any history it has, and owes an alert for it. A job already
    /// dead gets the note and a new alert ([`Buried::AlreadyDead`]).
    pub async fn record_dead(&self, job: &Job, error: ErrorNote) -> Result<Buried, RedisFailure> {
        let job_json = job_json(job)?;
        let legacy = job.legacy_id().unwrap_or_default();
        let notes = self.notes_json(&[error]);
        let buried = scripts::bury(
            &self.conn,
            &self.keys,
            &job.id(),
            &job_json,
            &notes,
            ERROR_HISTORY_LEN,
            &legacy,
        )
        .await?;
        Ok(if buried {
            Buried::Recorded
        } else {
            Buried::AlreadyDead
        })
    }

    /// Not worked (the pass ran out of time): back to the front of the due entries,
    /// retryCount unchanged.
    pub async fn release(&self, leased: &Leased) -> Result<bool, RedisFailure> {
        self.settle(
            &leased.id,
            &leased.token,
            SettleAction::Release,
            0,
            "",
            Duration::ZERO,
        )
        .await
    }

    /// Not worked, and not workable before `delay` (the rate gate has no room until then):
    /// back to the waiting entries, due after `delay`, retryCount and history unchanged.
    /// `false` when the lease was lost.
    pub async fn release_until(&self, leased: &Leased, delay: Duration) -> Result<bool, RedisFailure> {
        let delay = delay.min(RETRY_AFTER_CAP);
        self.settle(&leased.id, &leased.token, SettleAction::Later, 0, "", delay)
            .await
    }

    async fn settle(
        &self,
        id: &str,
        token: &str,
        action: SettleAction,
        count: u32,
        history: &str,
        delay: Duration,
    ) -> Result<bool, RedisFailure> {
        let args = SettleArgs {
            id,
            token,
            action,
            count,
            history,
            delay_ms: ms(delay),
        };
        scripts::settle(&self.conn, &self.keys, args).await
    }

    /// Puts one dead letter (`Some(id)`) or up to `limit` of the oldest back as fresh
    /// entries, due now with retryCount 0, in bounded steps. Returns how many were
    /// redriven; dead ids whose job is gone are cleaned away, not counted.
    pub async fn redrive(&self, id: Option<&str>, limit: usize) -> Result<u64, RedisFailure> {
        let mut total = 0u64;
        let mut left = limit.max(1);
        while left > 0 {
            let step = left.min(REDRIVE_BATCH);
            let (n, removed) = scripts::redrive(&self.conn, &self.keys, id, step).await?;
            if removed > 0 {
                tracing::warn!(
                    removed,
                    "redrive: dead letters without a stored job were cleaned away"
                );
            }
            total += n;
            let taken = (n + removed) as usize;
            if id.is_some() || taken < step {
                break;
            }
            left -= taken;
        }
        Ok(total)
    }

    /// Depth, due now, in flight, dead, oldest age, in one atomic read.
    pub async fn stats(&self) -> Result<QueueStats, RedisFailure> {
        let r = scripts::stats(&self.conn, &self.keys).await?;
        let ms = |x: u64| Duration::from_millis(x);
        Ok(QueueStats {
            depth: r.depth,
            due_now: r.due_now,
            in_flight: r.in_flight,
            dead: r.dead,
            oldest_age: (r.oldest_first_failure > 0)
                .then(|| ms(r.now.saturating_sub(r.oldest_first_failure))),
            next_due_in: (r.next_due > 0).then(|| ms(r.next_due.saturating_sub(r.now))),
        })
    }

    /// Up to `limit` live entries, oldest first failure first.
    pub async fn list(&self, limit: usize) -> Result<Vec<EntryView>, RedisFailure> {
        self.view(&self.keys.first, limit).await
    }

    /// Up to `limit` dead letters, oldest death first.
    pub async fn dead(&self, limit: usize) -> Result<Vec<EntryView>, RedisFailure> {
        self.view(&self.keys.dead, limit).await
    }

    /// Up to `limit` dead letters whose alert has not been delivered, oldest first.
    pub async fn pending_alerts(&self, limit: usize) -> Result<Vec<EntryView>, RedisFailure> {
        self.view(&self.keys.alerts, limit).await
    }

    /// Marks the alerts of `sent` (as [`RetryQueue::pending_alerts`] read them) as
    /// delivered. An entry that died again since it was read keeps its alert owed.
    pub async fn alerts_delivered(&self, sent: &[EntryView]) -> Result<(), RedisFailure> {
        if sent.is_empty() {
            return Ok(());
        }
        let sent: Vec<(&str, u64)> = sent.iter().map(|v| (v.id.as_str(), v.since_ms)).collect();
        scripts::alerted(&self.conn, &self.keys, &sent).await?;
        Ok(())
    }

    async fn view(&self, set: &str, limit: usize) -> Result<Vec<EntryView>, RedisFailure> {
        let mut conn = self.conn.clone();
        let ids: Vec<(String, f64)> = redis::cmd("ZRANGE")
            .arg(set)
            .arg(0)
            .arg(limit.max(1) as i64 - 1)
            .arg("WITHSCORES")
            .query_async(&mut conn)
            .await?;
        if ids.is_empty() {
            return Ok(Vec::new());
        }
        let names: Vec<&str> = ids.iter().map(|(id, _)| id.as_str()).collect();
        let q = &self.keys;
        let (jobs, counts, errors): (Fields, Fields, Fields) = redis::pipe()
            .cmd("HMGET")
            .arg(&q.jobs)
            .arg(&names)
            .cmd("HMGET")
            .arg(&q.count)
            .arg(&names)
            .cmd("HMGET")
            .arg(&q.errors)
            .arg(&names)
            .query_async(&mut conn)
            .await?;
        Ok(ids
            .iter()
            .zip(jobs.into_iter().zip(counts).zip(errors))
            .map(|((id, score), ((job, count), errors))| {
                let history: Vec<ErrorNote> = errors
                    .and_then(|e| serde_json::from_str(&e).ok())
                    .unwrap_or_default();
                EntryView {
                    id: id.clone(),
                    job: job.and_then(|j| serde_json::from_str(&j).ok()),
                    retry_count: count.and_then(|c| c.parse().ok()).unwrap_or(0),
                    since_ms: *score as u64,
                    first_error_at_ms: history.first().map(|n| n.at_ms),
                    last_error: history.last().cloned(),
                }
            })
            .collect())
    }

    /// The history kept with an entry: the previous notes plus this one, the newest
    /// [`ERROR_HISTORY_LEN`], each text cut to [`MAX_ERROR_TEXT`] characters, stripped of
    /// control characters and scrubbed of the secret.
    fn history_json(&self, previous: &[ErrorNote], mut note: ErrorNote) -> String {
        note.message = self.clean(&note.message);
        note.kind = self.clean(&note.kind);
        let skip = (previous.len() + 1).saturating_sub(ERROR_HISTORY_LEN);
        let notes: Vec<&ErrorNote> = previous.iter().chain(std::iter::once(&note)).skip(skip).collect();
        serde_json::to_string(&notes).unwrap_or_else(|_| "[]".into())
    }

    /// `notes` as a JSON array, each cleaned as [`RetryQueue::history_json`] does.
    fn notes_json(&self, notes: &[ErrorNote]) -> String {
        let notes: Vec<ErrorNote> = notes
            .iter()
            .map(|n| ErrorNote {
                kind: self.clean(&n.kind),
                message: self.clean(&n.message),
                ..n.clone()
            })
            .collect();
        serde_json::to_string(&notes).unwrap_or_else(|_| "[]".into())
    }

    fn clean(&self, text: &str) -> String {
        let scrubbed = self
            .secret
            .as_ref()
            .map_or_else(|| text.to_owned(), |s| s.scrub(text));
        scrubbed
            .chars()
            .filter(|c| !c.is_control())
            .take(MAX_ERROR_TEXT)
            .collect()
    }
}

/// A job checked and serialized for storage, as every write of one needs it.
fn job_json(job: &Job) -> Result<String, RedisFailure> {
    job.check().map_err(|e| RedisFailure::Invalid(e.to_string()))?;
    serde_json::to_string(job).map_err(|_| RedisFailure::Invalid("job payload is not serializable".into()))
}

/// Whole milliseconds, saturating (a `Duration` can exceed what Redis takes).
fn ms(d: Duration) -> u64 {
    u64::try_from(d.as_millis())
        .unwrap_or(u64::MAX)
        .min(i64::MAX as u64 / 2)
}
