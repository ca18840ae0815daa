//! The retry queue: failed work parked in Redis, retried on its own schedule by the drainer.
//!
//! ```text
//!  enqueue ──► waiting ──(due)──► ready ──claim──► leased ──ack──► (gone)
//!   (idempotent)  ▲   by due time   by first failure   │ by lease end
//!                 └──────── fail: retryCount+1, backoff ┤
//!                                   lease ends (drainer died) ──► ready
//!                       fail #RETRY_MAX_ATTEMPTS, or permanent ──► dead ──redrive──► waiting
//! ```
//!
//! Every transition is one Lua script over keys sharing one hash tag (see [`crate::keys`]),
//! so it runs on a Redis Cluster. A claim costs O(log N) per entry it moves, never a read of
//! the whole set. Only the holder of an entry's current lease token can settle it, so a
//! drainer whose lease ran out cannot ack work another drainer now owns.

mod entry;
pub(crate) mod scripts;

pub use entry::{EntryView, ErrorNote, Job, Leased, QueueStats};

use std::time::Duration;

use rand::Rng;

use crate::keys::{Namespace, QueueKeys};
use crate::policy::{
    CLAIM_MOVE_LIMIT, ERROR_HISTORY_LEN, MAX_CLAIM_BATCH, RETRY_BACKOFF_BASE, RETRY_BACKOFF_CAP,
};
use crate::secret::Secret;
use crate::store::{RedisConn, StoreError};

/// What [`RetryQueue::enqueue`] did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Enqueued {
    /// A new entry, first retried after `due_in`.
    Queued { due_in: Duration },
    /// The same job is already queued; nothing changed.
    AlreadyQueued,
    /// The same job is a dead letter; nothing changed (redrive it).
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
    /// Delay before retry number `count + 1`, plus up to 20 % upward jitter; never less
    /// than `retry_after`.
    pub fn delay(&self, count: u32, retry_after: Option<Duration>) -> Duration {
        let base = self.base.saturating_mul(1u32 << count.min(20)).min(self.cap);
        let jitter = base.mul_f64(rand::rng().random_range(0.0..=crate::policy::BACKOFF_JITTER_FRACTION));
        (base + jitter).max(retry_after.unwrap_or(Duration::ZERO))
    }
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

    /// Uses another retry schedule (tests and the demo use short ones).
    pub fn with_backoff(mut self, backoff: Backoff) -> Self {
        self.backoff = backoff;
        self
    }

    /// Replaces every occurrence of `secret` in stored error texts with `***`.
    pub fn with_secret(mut self, secret: Secret) -> Self {
        self.secret = Some(secret);
        self
    }

    /// Parks `job`. Its first retry falls due after the retry backoff, or after
    /// `retry_after` when the upstream asked for longer. Idempotent per job id.
    pub async fn enqueue(
        &self,
        job: &Job,
        retry_after: Option<Duration>,
        error: ErrorNote,
    ) -> Result<Enqueued, StoreError> {
        job.check().map_err(StoreError::Invalid)?;
        let delay = self.backoff.delay(0, retry_after);
        let history = self.history_json(&[], error);
        let job_json = serde_json::to_string(job)
            .map_err(|_| StoreError::Invalid("job payload is not serializable".into()))?;
        let k = &self.keys;
        let (status, _due): (i64, i64) = scripts::ENQUEUE
            .key(&k.jobs)
            .key(&k.first)
            .key(&k.count)
            .key(&k.errors)
            .key(&k.waiting)
            .key(&k.dead)
            .arg(job.id())
            .arg(job_json)
            .arg(delay.as_millis() as u64)
            .arg(history)
            .invoke_async(&mut self.conn.clone())
            .await?;
        Ok(match status {
            1 => Enqueued::Queued { due_in: delay },
            0 => Enqueued::AlreadyQueued,
            _ => Enqueued::AlreadyDead,
        })
    }

    /// Leases up to `k` due entries for `lease`, oldest first failure first.
    pub async fn claim(&self, k: usize, lease: Duration) -> Result<Claim, StoreError> {
        let k = k.clamp(1, MAX_CLAIM_BATCH);
        let q = &self.keys;
        let reply: Vec<String> = scripts::CLAIM
            .key(&q.waiting)
            .key(&q.ready)
            .key(&q.leased)
            .key(&q.first)
            .key(&q.lease)
            .key(&q.jobs)
            .key(&q.count)
            .key(&q.errors)
            .key(&q.seq)
            .arg(k)
            .arg(lease.as_millis().max(1) as u64)
            .arg(CLAIM_MOVE_LIMIT)
            .invoke_async(&mut self.conn.clone())
            .await?;
        let (head, rest) = reply
            .split_at_checked(3)
            .ok_or(StoreError::Protocol("queue_claim reply"))?;
        if rest.len() % 6 != 0 {
            return Err(StoreError::Protocol("queue_claim reply"));
        }
        let mut claim = Claim {
            reclaimed: head[1].parse().unwrap_or(0),
            promoted: head[2].parse().unwrap_or(0),
            ..Claim::default()
        };
        for f in rest.chunks_exact(6) {
            let parsed = (|| {
                Some(Leased {
                    id: f[0].clone(),
                    token: f[1].clone(),
                    job: serde_json::from_str(&f[2]).ok()?,
                    retry_count: f[3].parse().ok()?,
                    first_failed_at_ms: f[4].parse::<f64>().ok()? as u64,
                    errors: serde_json::from_str(&f[5]).ok()?,
                })
            })();
            match parsed {
                Some(leased) => claim.entries.push(leased),
                None => {
                    // Never dropped, never retried blind: kept as a dead letter with the reason.
                    let note = ErrorNote::now(
                        "corrupt_entry",
                        "stored entry could not be read; inspect it with `lawsync queue dead`",
                        None,
                    );
                    let history = serde_json::to_string(&[note]).unwrap_or_default();
                    self.settle(&f[0], &f[1], "dead", 0, &history, Duration::ZERO)
                        .await?;
                    claim.corrupt.push(f[0].clone());
                }
            }
        }
        Ok(claim)
    }

    /// Done: removes the entry. `false` when the lease was lost (someone else owns it).
    pub async fn ack(&self, leased: &Leased) -> Result<bool, StoreError> {
        self.settle(&leased.id, &leased.token, "ack", 0, "", Duration::ZERO)
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
    ) -> Result<Settled, StoreError> {
        let count = leased.retry_count.saturating_add(1);
        let history = self.history_json(&leased.errors, error);
        if count >= max_attempts {
            return Ok(
                if self
                    .settle(&leased.id, &leased.token, "dead", count, &history, Duration::ZERO)
                    .await?
                {
                    Settled::Dead
                } else {
                    Settled::LeaseLost
                },
            );
        }
        let delay = self.backoff.delay(count, retry_after);
        Ok(
            if self
                .settle(&leased.id, &leased.token, "retry", count, &history, delay)
                .await?
            {
                Settled::Rescheduled { due_in: delay }
            } else {
                Settled::LeaseLost
            },
        )
    }

    /// A failure no retry can fix: straight to the dead letters.
    pub async fn dead_letter(&self, leased: &Leased, error: ErrorNote) -> Result<bool, StoreError> {
        let history = self.history_json(&leased.errors, error);
        self.settle(
            &leased.id,
            &leased.token,
            "dead",
            leased.retry_count.saturating_add(1),
            &history,
            Duration::ZERO,
        )
        .await
    }

    /// Not worked (the pass ran out of time): back to the front of the due entries,
    /// retryCount unchanged.
    pub async fn release(&self, leased: &Leased) -> Result<bool, StoreError> {
        self.settle(&leased.id, &leased.token, "release", 0, "", Duration::ZERO)
            .await
    }

    async fn settle(
        &self,
        id: &str,
        token: &str,
        action: &str,
        count: u32,
        history: &str,
        delay: Duration,
    ) -> Result<bool, StoreError> {
        let q = &self.keys;
        let done: i64 = scripts::SETTLE
            .key(&q.leased)
            .key(&q.lease)
            .key(&q.jobs)
            .key(&q.count)
            .key(&q.errors)
            .key(&q.first)
            .key(&q.waiting)
            .key(&q.ready)
            .key(&q.dead)
            .arg(id)
            .arg(token)
            .arg(action)
            .arg(count)
            .arg(history)
            .arg(delay.as_millis() as u64)
            .invoke_async(&mut self.conn.clone())
            .await?;
        Ok(done == 1)
    }

    /// Puts one dead letter (`Some(id)`) or up to `limit` of the oldest back as fresh
    /// entries, due now with retryCount 0. Returns how many were redriven.
    pub async fn redrive(&self, id: Option<&str>, limit: usize) -> Result<u64, StoreError> {
        let q = &self.keys;
        let n: u64 = scripts::REDRIVE
            .key(&q.dead)
            .key(&q.first)
            .key(&q.waiting)
            .key(&q.count)
            .key(&q.jobs)
            .arg(id.unwrap_or(""))
            .arg(limit.max(1))
            .invoke_async(&mut self.conn.clone())
            .await?;
        Ok(n)
    }

    /// Depth, due now, in flight, dead, oldest age, in one atomic read.
    pub async fn stats(&self) -> Result<QueueStats, StoreError> {
        let q = &self.keys;
        let v: Vec<i64> = scripts::STATS
            .key(&q.first)
            .key(&q.waiting)
            .key(&q.ready)
            .key(&q.leased)
            .key(&q.dead)
            .invoke_async(&mut self.conn.clone())
            .await?;
        let &[now, depth, due_now, in_flight, dead, oldest, next_due] = v.as_slice() else {
            return Err(StoreError::Protocol("queue_stats reply"));
        };
        let ms = |x: i64| Duration::from_millis(x.max(0) as u64);
        Ok(QueueStats {
            depth: depth.max(0) as u64,
            due_now: due_now.max(0) as u64,
            in_flight: in_flight.max(0) as u64,
            dead: dead.max(0) as u64,
            oldest_age: (oldest > 0).then(|| ms(now - oldest)),
            next_due_in: (next_due > 0).then(|| ms(next_due - now)),
        })
    }

    /// Up to `limit` live entries, oldest first failure first.
    pub async fn list(&self, limit: usize) -> Result<Vec<EntryView>, StoreError> {
        self.view(&self.keys.first.clone(), limit).await
    }

    /// Up to `limit` dead letters, oldest death first.
    pub async fn dead(&self, limit: usize) -> Result<Vec<EntryView>, StoreError> {
        self.view(&self.keys.dead.clone(), limit).await
    }

    async fn view(&self, set: &str, limit: usize) -> Result<Vec<EntryView>, StoreError> {
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
            .map(|((id, score), ((job, count), errors))| EntryView {
                id: id.clone(),
                job: job.and_then(|j| serde_json::from_str(&j).ok()),
                retry_count: count.and_then(|c| c.parse().ok()).unwrap_or(0),
                since_ms: *score as u64,
                last_error: errors
                    .and_then(|e| serde_json::from_str::<Vec<ErrorNote>>(&e).ok())
                    .and_then(|mut v| v.pop()),
            })
            .collect())
    }

    /// The history kept with an entry: the previous notes plus this one, the newest
    /// [`ERROR_HISTORY_LEN`], with the secret scrubbed from every text.
    fn history_json(&self, previous: &[ErrorNote], mut note: ErrorNote) -> String {
        if let Some(s) = &self.secret {
            note.message = s.scrub(&note.message);
            note.kind = s.scrub(&note.kind);
        }
        let skip = (previous.len() + 1).saturating_sub(ERROR_HISTORY_LEN);
        let notes: Vec<&ErrorNote> = previous.iter().chain(std::iter::once(&note)).skip(skip).collect();
        serde_json::to_string(&notes).unwrap_or_else(|_| "[]".into())
    }
}
