//! The shared rate gate: one interval (and burst) for every instance of every function.
//!
//! State lives in one Redis hash per upstream (see [`crate::keys`]); each operation is one
//! atomic Lua script deciding on Redis' clock, so instances never compare their own clocks.
//!
//! ```text
//!   Redis t(ms):  0        1000      2000      3000
//!   caller A   :  acquire → go (slot 0)
//!   caller B   :  acquire → wait, slot 1000 ── sleeps once ── confirm → go
//!   caller C   :  acquire → wait, slot 2000 ─────────── sleeps once ─────── confirm → go
//!   defer(5 s) at 1500 → C's slot 2000 lies inside the cooldown: C's confirm returns a
//!                         new slot 6500 (behind the cooldown) and C sleeps again.
//! ```
//!
//! A waiting caller costs two round trips per grant (reserve, confirm), independent of how
//! many others wait; the confirmation exists so that a cooldown set while a caller sleeps
//! also holds that caller back, and so that no two calls start closer than
//! interval − tolerance on Redis' clock whoever wakes late. The gate keeps two schedules
//! for that: reservations paced at the interval, and the starts that really happened.
//!
//! ```text
//!   interval 1000, tolerance 5; B wakes 30 ms late (a busy CPU)
//!   caller B   :  slot 1000, confirms at 1030 → go (nobody started since 0)
//!   caller C   :  slot 2000, confirms at 2000 → wait until 1030 + 995 = 2025, then go
//!   caller D   :  slot 3000, confirms at 3000 → wait until 2025 + 995 = 3020, then go
//!   ...            the overrun shrinks by the tolerance per slot; no slot is left idle
//! ```
//!
//! A late waiter therefore never costs a slot: it starts in the gap it left, and the calls
//! after it move back by what it overran, one more round trip each (at most about
//! (interval − tolerance) / tolerance of them per late start). Only a caller that slept
//! past its slot while another call started in it queues again at the back. An
//! uncontended caller costs one round trip.

mod scripts;

use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use crate::config::GateConfig;
use crate::deadline::Deadline;
use crate::keys::Namespace;
use crate::store::{RedisConn, StoreError};

/// Why a slot was not granted. The upstream must not be called.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum GateError {
    /// Redis could not be asked; without a grant there is no call.
    #[error("rate gate unavailable: {0}; the upstream was not called")]
    Unavailable(#[from] StoreError),
    /// The next slot is further away than the caller may wait. Nothing was reserved.
    #[error("rate gate: next slot in {} ms exceeds the {} ms wait bound{}", .wait.as_millis(), .bound.as_millis(),
        .cooldown.map(|c| format!(" (cluster cooldown for another {} ms)", c.as_millis())).unwrap_or_default())]
    WaitTooLong {
        /// Time from now until the slot that would have been granted.
        wait: Duration,
        /// The bound that was exceeded (max wait, or what the deadline left).
        bound: Duration,
        /// Remaining cooldown, when one is the cause.
        cooldown: Option<Duration>,
    },
    /// Slot after slot was moved or lost (behind late starts, to cooldowns, or to a reset
    /// gate state).
    #[error(
        "rate gate: no grant after {calls} calls ({reslotted} slots moved behind late starts or lost to cooldowns or a reset gate); the upstream was not called"
    )]
    Unsettled { calls: u32, reslotted: u32 },
}

impl GateError {
    /// How long to wait before trying again, when known.
    pub fn retry_after(&self) -> Option<Duration> {
        match self {
            GateError::WaitTooLong { wait, .. } => Some(*wait),
            GateError::Unavailable(_) | GateError::Unsettled { .. } => None,
        }
    }
}

/// A granted slot, in µs on Redis' clock.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Grant {
    /// The slot's start: its reservation, or where a late call before it moved it.
    pub slot_us: u64,
    /// Redis' time when the grant was confirmed (>= slot). Grants are at least
    /// interval − tolerance apart (beyond the burst).
    pub granted_at_us: u64,
    /// Time this caller spent waiting.
    pub waited: Duration,
    /// Script calls this grant took: 1 when granted at once, 2 after one wait, plus one
    /// per slot moved or lost ([`Grant::reslotted`]).
    pub round_trips: u32,
    /// Times this caller's slot changed before the grant: moved back behind a call that
    /// started late, or lost to a cooldown set while it slept, to a reset gate state, or
    /// by waking after the next holder had already started.
    pub reslotted: u32,
}

/// The cooldown in force after [`Gate::defer`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Cooldown {
    /// Time left, from Redis' now.
    pub remaining: Duration,
    /// The cooldown's end, µs on Redis' clock; no slot starts before it.
    pub until_us: u64,
}

/// The gate's state as `lawsync gate status` shows it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct GateStatus {
    /// Redis' clock, µs.
    pub now_us: u64,
    /// Time until a fresh caller would be granted a slot.
    pub next_slot_in: Duration,
    /// Remaining cooldown, if any.
    pub cooldown: Option<Duration>,
}

/// Counters since this gate was built, for metrics and benchmarks.
#[derive(Debug, Default)]
struct Counters {
    round_trips: AtomicU64,
    grants: AtomicU64,
    refusals: AtomicU64,
    waited_us: AtomicU64,
    reslotted: AtomicU64,
}

/// A snapshot of the counters.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct GateStats {
    pub round_trips: u64,
    pub grants: u64,
    pub refusals: u64,
    pub waited: Duration,
    /// Slots moved behind a late start or lost before a grant ([`Grant::reslotted`]).
    pub reslotted: u64,
}

/// Guards against a state that would keep a caller looping (clock jumps, a buggy script):
/// a normal grant takes 2 calls, one more per moved or lost slot, so 16 means something is
/// wrong.
const MAX_CALLS_PER_ACQUIRE: u32 = 16;

/// The rate gate for one upstream. Cheap to share behind an `Arc`.
#[derive(Debug)]
pub struct Gate {
    conn: RedisConn,
    key: String,
    cfg: GateConfig,
    counters: Counters,
}

impl Gate {
    /// A gate for the upstream that `ns` names, over `conn`.
    pub fn new(conn: RedisConn, ns: &Namespace, cfg: GateConfig) -> Self {
        Self {
            conn,
            key: ns.gate(),
            cfg,
            counters: Counters::default(),
        }
    }

    /// The configuration in force.
    pub fn config(&self) -> &GateConfig {
        &self.cfg
    }

    /// Waits for a slot, at most `max_wait` and never past `deadline`. On error nothing
    /// is reserved and the upstream must not be called.
    pub async fn acquire(&self, deadline: Deadline) -> Result<Grant, GateError> {
        self.acquire_within(deadline, self.cfg.max_wait).await
    }

    /// [`Gate::acquire`] with another wait bound than the configured `max_wait`.
    #[tracing::instrument(name = "gate.acquire", skip_all, fields(waited_ms, round_trips))]
    pub async fn acquire_within(&self, deadline: Deadline, max_wait: Duration) -> Result<Grant, GateError> {
        let started = tokio::time::Instant::now();
        let bound = deadline.cap(max_wait);
        let (mut held, mut epoch): (u64, u64) = (0, 0);
        let mut reslotted = 0;
        for call in 1..=MAX_CALLS_PER_ACQUIRE {
            let spent = started.elapsed();
            let allowed = bound.saturating_sub(spent);
            let reply = self.call_acquire(allowed, held, epoch).await?;
            if held != 0 && reply.slot != held {
                reslotted += 1;
            }
            // Redis read its clock before it replied, so counting the wait from the reply
            // never wakes before the slot (which would cost a round trip); it wakes at most
            // one round trip late, well inside the tolerance.
            let anchor = tokio::time::Instant::now();
            match reply.code {
                0 => {
                    let grant = Grant {
                        slot_us: reply.slot,
                        granted_at_us: reply.now,
                        waited: started.elapsed(),
                        round_trips: call,
                        reslotted,
                    };
                    self.counters.grants.fetch_add(1, Ordering::Relaxed);
                    self.counters
                        .reslotted
                        .fetch_add(u64::from(reslotted), Ordering::Relaxed);
                    self.counters
                        .waited_us
                        .fetch_add(grant.waited.as_micros() as u64, Ordering::Relaxed);
                    let span = tracing::Span::current();
                    span.record("waited_ms", grant.waited.as_millis() as u64);
                    span.record("round_trips", call);
                    return Ok(grant);
                }
                1 => {
                    (held, epoch) = (reply.slot, reply.epoch);
                    let wait = Duration::from_micros(reply.slot.saturating_sub(reply.now));
                    if wait > allowed {
                        // The script bounds this too; a second check costs nothing.
                        self.counters.refusals.fetch_add(1, Ordering::Relaxed);
                        return Err(GateError::WaitTooLong {
                            wait,
                            bound,
                            cooldown: None,
                        });
                    }
                    sleep_precisely_until(anchor + wait).await;
                }
                _ => {
                    self.counters.refusals.fetch_add(1, Ordering::Relaxed);
                    let cooldown =
                        (reply.cool > reply.now).then(|| Duration::from_micros(reply.cool - reply.now));
                    return Err(GateError::WaitTooLong {
                        wait: Duration::from_micros(reply.slot.saturating_sub(reply.now)),
                        bound,
                        cooldown,
                    });
                }
            }
        }
        Err(GateError::Unsettled {
            calls: MAX_CALLS_PER_ACQUIRE,
            reslotted,
        })
    }

    async fn call_acquire(
        &self,
        allowed: Duration,
        held: u64,
        epoch: u64,
    ) -> Result<AcquireReply, StoreError> {
        self.counters.round_trips.fetch_add(1, Ordering::Relaxed);
        let mut conn = self.conn.clone();
        let v: Vec<i64> = scripts::ACQUIRE
            .key(&self.key)
            .arg(micros(self.cfg.interval))
            .arg(self.cfg.burst)
            .arg(micros(allowed))
            .arg(held)
            .arg(micros(self.cfg.tolerance))
            .arg(epoch)
            .invoke_async(&mut conn)
            .await?;
        match v.as_slice() {
            &[code, slot, now, cool, epoch] if (0..=2).contains(&code) => Ok(AcquireReply {
                code,
                slot: slot.max(0) as u64,
                now: now.max(0) as u64,
                cool: cool.max(0) as u64,
                epoch: epoch.max(0) as u64,
            }),
            _ => Err(StoreError::Protocol("gate_acquire reply")),
        }
    }

    /// Starts or extends the cluster-wide cooldown to at least `d` from now. Never
    /// shortens one in force; callers already holding a slot inside it are held back.
    pub async fn defer(&self, d: Duration) -> Result<Cooldown, GateError> {
        let mut conn = self.conn.clone();
        let v: Vec<i64> = scripts::DEFER
            .key(&self.key)
            .arg(micros(d).max(1))
            .arg(micros(self.cfg.interval))
            .arg(self.cfg.burst)
            .arg(micros(self.cfg.tolerance))
            .invoke_async(&mut conn)
            .await
            .map_err(StoreError::from)?;
        match v.as_slice() {
            &[cool, now] => {
                let remaining = Duration::from_micros(cool.saturating_sub(now).max(0) as u64);
                tracing::warn!(
                    cooldown_ms = remaining.as_millis() as u64,
                    "rate gate: cluster cooldown set"
                );
                Ok(Cooldown {
                    remaining,
                    until_us: cool.max(0) as u64,
                })
            }
            _ => Err(StoreError::Protocol("gate_defer reply").into()),
        }
    }

    /// The state as seen now on the holder's clock.
    pub async fn status(&self) -> Result<GateStatus, GateError> {
        let mut conn = self.conn.clone();
        let v: Vec<i64> = scripts::STATUS
            .key(&self.key)
            .invoke_async(&mut conn)
            .await
            .map_err(StoreError::from)?;
        let &[now, tat, cool, sat] = v.as_slice() else {
            return Err(StoreError::Protocol("gate_status reply").into());
        };
        let extra = i64::from(self.cfg.burst) - 1;
        let tau = micros(self.cfg.interval) as i64 * extra;
        let start_tau = micros(self.cfg.interval.saturating_sub(self.cfg.tolerance)) as i64 * extra;
        let next = (tat - tau)
            .max(sat - start_tau)
            .max(cool)
            .saturating_sub(now)
            .max(0);
        Ok(GateStatus {
            now_us: now.max(0) as u64,
            next_slot_in: Duration::from_micros(next as u64),
            cooldown: (cool > now).then(|| Duration::from_micros((cool - now) as u64)),
        })
    }

    /// Counters since this gate was built.
    pub fn stats(&self) -> GateStats {
        GateStats {
            round_trips: self.counters.round_trips.load(Ordering::Relaxed),
            grants: self.counters.grants.load(Ordering::Relaxed),
            refusals: self.counters.refusals.load(Ordering::Relaxed),
            waited: Duration::from_micros(self.counters.waited_us.load(Ordering::Relaxed)),
            reslotted: self.counters.reslotted.load(Ordering::Relaxed),
        }
    }
}

/// tokio's timer fires on millisecond ticks, typically 1-2 ms after the deadline: enough
/// to overrun a 2 ms tolerance and hold back the next caller. So sleep on the timer to just short of the
/// slot, then yield until it: at most [`SPIN_LEAD`] of polling per grant.
async fn sleep_precisely_until(target: tokio::time::Instant) {
    if let Some(coarse) = target.checked_sub(SPIN_LEAD) {
        tokio::time::sleep_until(coarse).await;
    }
    while tokio::time::Instant::now() < target {
        tokio::task::yield_now().await;
    }
}

/// How long before its slot a waiter stops trusting the timer and yields instead.
const SPIN_LEAD: Duration = Duration::from_micros(2500);

struct AcquireReply {
    code: i64,
    slot: u64,
    now: u64,
    cool: u64,
    epoch: u64,
}

fn micros(d: Duration) -> u64 {
    u64::try_from(d.as_micros()).unwrap_or(u64::MAX / 2)
}
