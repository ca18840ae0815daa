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
//! also holds that caller back, and so that no two calls start closer than the interval on
//! Redis' clock whoever wakes late. The gate keeps two schedules for that: reservations
//! paced at interval + tolerance, and the starts that really happened, paced at the
//! interval. A holder up to the tolerance late therefore holds nobody back.
//!
//! ```text
//!   interval 1000, tolerance 10; B wakes 40 ms late (a busy CPU)
//!   caller B   :  slot 1010, confirms at 1050 → go (nobody started since 0)
//!   caller C   :  slot 2020, confirms at 2020 → wait until 1050 + 1000 = 2050, then go
//!   caller D   :  slot 3030, confirms at 3030 → wait until 2050 + 1000 = 3050, then go
//!   ...            the overrun shrinks by the tolerance per slot; no slot is left idle
//! ```
//!
//! A late waiter therefore never costs a slot: it starts in the gap it left, and the calls
//! after it move back by what it overran beyond the tolerance, one more round trip each. A
//! holder only moved back may wait up to one pace past its own bound (never past its
//! deadline), so a move does not turn into a refusal; a holder refused anyway hands its slot
//! back when nobody reserved after it. Only a caller that slept past its slot while another
//! call started in it queues again at the back. An uncontended caller costs one round trip.
//!
//! A grant is good for [`crate::policy::grant_validity`]: a caller that could not send in
//! that time (its CPU was taken away) gives the start back ([`Gate::give_back`]) and asks
//! again, so that it never arrives at the upstream late, next to the following on-time call.
//!
//! The state carries a format version; a script refuses a state newer than it knows
//! (`NEWER`) and a field that is not a finite time (`CORRUPT`). A missing state (deleted,
//! evicted, lost in a failover) opens with one interval of quiet.

mod scripts;

use scripts::{AcquireReply, Granted, Release, Shape};

use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use tokio::sync::OnceCell;

use crate::config::GateConfig;
use crate::deadline::Deadline;
use crate::keys::GateKey;
use crate::policy::{GATE_STATE_IDLE_TTL, RETRY_AFTER_CAP};
use crate::redis_conn::{RedisConn, RedisFailure};

/// Why a slot was not granted. The upstream must not be called.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum GateError {
    /// Redis could not be asked (or its gate state is corrupt or newer than this release);
    /// without a grant there is no call.
    #[error("rate gate unavailable: {0}; the upstream was not called")]
    Unavailable(#[from] RedisFailure),
    /// The next slot is further away than the caller may wait. Nothing was reserved.
    #[error("rate gate: next slot in {} ms exceeds the {} ms wait bound{}", .wait.as_millis(), .bound.as_millis(), .cause)]
    WaitTooLong {
        /// Time from now until the slot that would have been granted.
        wait: Duration,
        /// The bound that was exceeded (max wait, or what the deadline left).
        bound: Duration,
        /// What holds the slot back.
        cause: Refusal,
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

/// Why the gate had no slot within a caller's bound ([`GateError::WaitTooLong`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Refusal {
    /// A cluster-wide cooldown (a 429's Retry-After, or a fresh state's quiet) is in force
    /// for `remaining`: the slot is behind its end.
    Cooldown { remaining: Duration },
    /// The invocation's deadline, not the wait bound, left too little time: with the
    /// whole bound the slot would have been granted.
    Deadline,
    /// Callers ahead hold the slots up to the bound.
    QueueAhead,
    /// The key-health circuit holds calls like this one for `remaining`: a probe of it is
    /// in flight, or law.go.kr refused this API (see [`crate::key_health`]). Calls it is
    /// not about may go on.
    Circuit { remaining: Duration },
}

impl std::fmt::Display for Refusal {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Refusal::Cooldown { remaining } => {
                write!(f, " (cluster cooldown for another {} ms)", remaining.as_millis())
            }
            Refusal::Deadline => f.write_str(" (the invocation's deadline)"),
            Refusal::QueueAhead => f.write_str(" (callers ahead hold the slots)"),
            Refusal::Circuit { remaining } => write!(
                f,
                " (the key-health circuit holds these calls for another {} ms)",
                remaining.as_millis()
            ),
        }
    }
}

/// A granted slot, in µs on Redis' clock.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Grant {
    /// The slot's start: its reservation, or where a late call before it moved it.
    pub slot_us: u64,
    /// Redis' time when the grant was confirmed (>= slot). Grants are at least the
    /// interval apart (beyond the burst).
    pub granted_at_us: u64,
    /// Time this caller spent waiting.
    pub waited: Duration,
    /// Script calls this grant took: 1 when granted at once, 2 after one wait, plus one
    /// per slot moved or lost ([`Grant::reslotted`]).
    pub round_trips: u32,
    /// Times this caller's slot changed before the grant: moved back behind a call that
    /// started late, or lost to a cooldown set while it slept, to a reset gate state, or
    /// by sleeping past it while another call started in it.
    pub reslotted: u32,
    /// When this process sent the call that was granted, on its own clock. Redis granted
    /// after it, so [`Grant::age`] never understates the time since the grant, whatever
    /// the reply's delay (a starved CPU can take milliseconds to read it), and needs no
    /// comparison of this clock with Redis'.
    pub asked_at: tokio::time::Instant,
    /// The end of the last cluster cooldown (or a fresh state's quiet) on Redis' clock, µs;
    /// 0 when the state holds none. A grant soon after one may be the first call after the
    /// key-health circuit's hold ([`crate::key_health`]).
    pub cooldown_end_us: u64,
    /// The grant is the key-health circuit's probe ([`Gate::acquire_probing`]): its answer
    /// closes the circuit or refuses the key again.
    pub probe: bool,
    epoch: u64,
    next_start_before: u64,
    next_start_after: u64,
}

/// A call that may probe the key-health circuit beside the gate: the endpoint it calls
/// (`search` or `detail`) and how long, at most, it takes to be answered
/// ([`crate::policy::key_probe_window`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Probe {
    pub endpoint: &'static str,
    pub window: Duration,
}

impl Grant {
    /// Time since the grant, at most (see [`Grant::asked_at`]). A start sent later than
    /// [`crate::policy::grant_validity`] after it may arrive next to the following one:
    /// give it back ([`Gate::give_back`]) and ask again.
    pub fn age(&self) -> Duration {
        self.asked_at.elapsed()
    }
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
    /// Remaining cooldown, if any (a fresh state's quiet shows as one).
    pub cooldown: Option<Duration>,
    /// No state yet: the first caller waits one interval of quiet.
    pub fresh: bool,
}

/// Counters since this gate was built, for metrics and benchmarks.
#[derive(Debug, Default)]
struct Counters {
    round_trips: AtomicU64,
    grants: AtomicU64,
    refusals: AtomicU64,
    waited_us: AtomicU64,
    reslotted: AtomicU64,
    given_back: AtomicU64,
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
    /// Grants given back unsent ([`Gate::give_back`]).
    pub given_back: u64,
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
    /// A state kept by the release before under another key, taken over once.
    legacy: Option<String>,
    adopted: OnceCell<()>,
    cfg: GateConfig,
    counters: Counters,
}

impl Gate {
    /// A gate whose state lives at `key` ([`GateKey::for_secret`] for an API key's gate,
    /// or a namespace's), over `conn`.
    pub fn new(conn: RedisConn, key: impl Into<GateKey>, cfg: GateConfig) -> Self {
        Self {
            conn,
            key: key.into().as_str().to_owned(),
            legacy: None,
            adopted: OnceCell::new(),
            cfg,
            counters: Counters::default(),
        }
    }

    /// Before its first operation, this gate takes over the schedule and cooldown of the
    /// state at `legacy` (the key the release before kept per environment), so that a
    /// roll keeps the spacing and the cooldown the old state promised. Once per process;
    /// a missing or past legacy state costs one round trip.
    pub fn adopting(mut self, legacy: String) -> Self {
        self.legacy = Some(legacy);
        self
    }

    /// The configuration in force.
    pub fn config(&self) -> &GateConfig {
        &self.cfg
    }

    /// The Redis key of the state.
    pub fn key(&self) -> &str {
        &self.key
    }

    /// The Redis connection the state is on.
    pub fn connection(&self) -> &RedisConn {
        &self.conn
    }

    /// Waits for a slot, at most `max_wait` and never past `deadline`. On error nothing
    /// is reserved and the upstream must not be called.
    pub async fn acquire(&self, deadline: Deadline) -> Result<Grant, GateError> {
        self.acquire_within(deadline, self.cfg.max_wait).await
    }

    /// [`Gate::acquire`] with another wait bound than the configured `max_wait`. A caller
    /// confirming a held slot may be handed up to one pace (interval + tolerance) more than
    /// the bound (a move behind a late start, or a new slot after losing its own), never a
    /// wait past the deadline.
    pub async fn acquire_within(&self, deadline: Deadline, max_wait: Duration) -> Result<Grant, GateError> {
        self.acquire_from(deadline, max_wait, (0, 0), None).await
    }

    /// [`Gate::acquire_within`] for a call to `probe.endpoint` of the key this gate paces:
    /// while the key-health circuit beside the gate is open and this call could close it,
    /// the grant is its probe ([`Grant::probe`]) and no other such call is granted until
    /// its answer is in or `probe.window` passes (see [`crate::key_health`]).
    pub async fn acquire_probing(
        &self,
        deadline: Deadline,
        max_wait: Duration,
        probe: Probe,
    ) -> Result<Grant, GateError> {
        self.acquire_from(deadline, max_wait, (0, 0), Some(probe)).await
    }

    /// After [`Gate::give_back`]: asks for the same slot again, as its holder, so that the
    /// start given back is taken at once when nobody has started since, instead of queueing
    /// at the back and leaving that slot idle. Bounds as [`Gate::acquire_within`]; `probe`
    /// as [`Gate::acquire_probing`].
    pub async fn acquire_again(
        &self,
        given_back: &Grant,
        deadline: Deadline,
        max_wait: Duration,
        probe: Option<Probe>,
    ) -> Result<Grant, GateError> {
        self.acquire_from(deadline, max_wait, (given_back.slot_us, given_back.epoch), probe)
            .await
    }

    #[tracing::instrument(name = "gate.acquire", skip_all, fields(waited_ms, round_trips))]
    async fn acquire_from(
        &self,
        deadline: Deadline,
        max_wait: Duration,
        holding: (u64, u64),
        probe: Option<Probe>,
    ) -> Result<Grant, GateError> {
        self.adopt_once().await?;
        let started = tokio::time::Instant::now();
        let bound = deadline.cap(max_wait);
        let pace = self.cfg.interval + self.cfg.tolerance;
        let (mut held, mut epoch): (u64, u64) = holding;
        let mut reslotted = 0;
        for call in 1..=MAX_CALLS_PER_ACQUIRE {
            let spent = started.elapsed();
            let allowed = if held == 0 {
                bound.saturating_sub(spent)
            } else {
                // A moved holder: one pace more, but the deadline is the deadline.
                deadline
                    .cap(Duration::MAX)
                    .min(bound.saturating_sub(spent) + pace)
            };
            let asked_at = tokio::time::Instant::now();
            self.counters.round_trips.fetch_add(1, Ordering::Relaxed);
            let reply = scripts::acquire(
                &self.conn,
                &self.key,
                self.shape(),
                micros(allowed),
                held,
                epoch,
                probe,
            )
            .await?;
            // Redis read its clock before it replied, so counting the wait from the reply
            // never wakes before the slot (which would cost a round trip); it wakes at most
            // one round trip late, well inside the tolerance.
            let anchor = tokio::time::Instant::now();
            match reply {
                AcquireReply::Go {
                    slot,
                    now,
                    epoch,
                    next_start_before,
                    next_start_after,
                    cooldown_end,
                    probe,
                } => {
                    if held != 0 && slot != held {
                        reslotted += 1;
                    }
                    let grant = Grant {
                        slot_us: slot,
                        granted_at_us: now,
                        waited: started.elapsed(),
                        round_trips: call,
                        reslotted,
                        asked_at,
                        cooldown_end_us: cooldown_end,
                        probe,
                        epoch,
                        next_start_before,
                        next_start_after,
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
                AcquireReply::Wait {
                    slot,
                    now,
                    epoch: slot_epoch,
                } => {
                    if held != 0 && slot != held {
                        reslotted += 1;
                    }
                    (held, epoch) = (slot, slot_epoch);
                    let wait = Duration::from_micros(slot.saturating_sub(now));
                    if wait > allowed {
                        // The script bounds this too; a second check costs nothing.
                        self.counters.refusals.fetch_add(1, Ordering::Relaxed);
                        return Err(GateError::WaitTooLong {
                            wait,
                            bound,
                            cause: Refusal::QueueAhead,
                        });
                    }
                    sleep_precisely_until(anchor + wait).await;
                }
                AcquireReply::Refused {
                    slot,
                    now,
                    cooldown_end,
                    by_circuit,
                } => {
                    self.counters.refusals.fetch_add(1, Ordering::Relaxed);
                    let wait = Duration::from_micros(slot.saturating_sub(now));
                    let cause = if by_circuit {
                        Refusal::Circuit {
                            remaining: Duration::from_micros(cooldown_end.saturating_sub(now)),
                        }
                    } else if cooldown_end > now {
                        Refusal::Cooldown {
                            remaining: Duration::from_micros(cooldown_end - now),
                        }
                    } else if bound < max_wait && wait <= max_wait {
                        Refusal::Deadline
                    } else {
                        Refusal::QueueAhead
                    };
                    return Err(GateError::WaitTooLong { wait, bound, cause });
                }
            }
        }
        Err(GateError::Unsettled {
            calls: MAX_CALLS_PER_ACQUIRE,
            reslotted,
        })
    }

    /// Gives back a grant that was not sent, so its start does not count and the next
    /// holder may start an interval after the one before it. True when given back; false
    /// when another start was granted since, and this one keeps counting (only ever safe).
    pub async fn give_back(&self, grant: &Grant) -> Result<bool, GateError> {
        let granted = Granted {
            next_start_before: grant.next_start_before,
            next_start_after: grant.next_start_after,
            epoch: grant.epoch,
            slot: grant.slot_us,
            granted_at: grant.granted_at_us,
        };
        let given =
            scripts::release(&self.conn, &self.key, self.shape(), granted).await? == Release::GivenBack;
        if given {
            self.counters.given_back.fetch_add(1, Ordering::Relaxed);
        }
        Ok(given)
    }

    /// Starts or extends the cluster-wide cooldown to at least `d` from now, at most a
    /// day ([`RETRY_AFTER_CAP`], as for a Retry-After). Never shortens one in force;
    /// callers already holding a slot inside it are held back.
    pub async fn defer(&self, d: Duration) -> Result<Cooldown, GateError> {
        self.adopt_once().await?;
        let length = micros(d.min(RETRY_AFTER_CAP)).max(1);
        let (cooldown_end, now) = scripts::defer(&self.conn, &self.key, self.shape(), length).await?;
        let remaining = Duration::from_micros(cooldown_end.saturating_sub(now));
        tracing::warn!(
            cooldown_ms = remaining.as_millis() as u64,
            "rate gate: cluster cooldown set"
        );
        Ok(Cooldown {
            remaining,
            until_us: cooldown_end,
        })
    }

    /// The state as seen now on the holder's clock.
    pub async fn status(&self) -> Result<GateStatus, GateError> {
        self.adopt_once().await?;
        let raw = scripts::status(&self.conn, &self.key, self.shape()).await?;
        Ok(GateStatus {
            now_us: raw.now,
            next_slot_in: Duration::from_micros(raw.next_slot.saturating_sub(raw.now)),
            cooldown: (raw.cooldown_end > raw.now).then(|| Duration::from_micros(raw.cooldown_end - raw.now)),
            fresh: raw.fresh,
        })
    }

    /// Takes over the legacy state once (see [`Gate::adopting`]). Redis being unreachable
    /// fails the operation (and is tried again next time); a legacy state that cannot be
    /// read is reported once and left alone: it is the old release's, not this gate's.
    async fn adopt_once(&self) -> Result<(), RedisFailure> {
        let Some(legacy) = &self.legacy else {
            return Ok(());
        };
        self.adopted
            .get_or_try_init(|| async {
                let old = match scripts::status(&self.conn, legacy, self.shape()).await {
                    Ok(old) => old,
                    Err(e @ (RedisFailure::Corrupt(_) | RedisFailure::Newer(_))) => {
                        tracing::warn!(error = %e, "rate gate: the previous release's gate state is unreadable; not taken over");
                        return Ok(());
                    }
                    Err(e) => return Err(e),
                };
                if old.fresh {
                    return Ok(());
                }
                if scripts::adopt(&self.conn, &self.key, self.shape(), &old).await? {
                    tracing::info!("rate gate: took over the previous release's schedule and cooldown");
                }
                Ok(())
            })
            .await
            .map(|_| ())
    }

    /// The gate's shape as its scripts take it.
    /// The gate's shape as the key-health circuit's script holds the gate with it: interval
    /// µs, burst, tolerance µs, idle ms; after the legacy state, if any, was taken over.
    pub(crate) async fn hold_shape(&self) -> Result<(u64, u32, u64, u64), RedisFailure> {
        self.adopt_once().await?;
        let s = self.shape();
        Ok((s.interval_us, s.burst, s.tolerance_us, s.idle_ms))
    }

    fn shape(&self) -> Shape {
        Shape {
            interval_us: micros(self.cfg.interval),
            burst: self.cfg.burst,
            tolerance_us: micros(self.cfg.tolerance),
            idle_ms: GATE_STATE_IDLE_TTL.as_millis() as u64,
        }
    }

    /// Counters since this gate was built.
    pub fn stats(&self) -> GateStats {
        let c = &self.counters;
        GateStats {
            round_trips: c.round_trips.load(Ordering::Relaxed),
            grants: c.grants.load(Ordering::Relaxed),
            refusals: c.refusals.load(Ordering::Relaxed),
            waited: Duration::from_micros(c.waited_us.load(Ordering::Relaxed)),
            reslotted: c.reslotted.load(Ordering::Relaxed),
            given_back: c.given_back.load(Ordering::Relaxed),
        }
    }
}

/// tokio's timer fires on millisecond ticks, typically 1-2 ms after the deadline: enough
/// to overrun a 2 ms tolerance and hold back the next caller. So sleep on the timer to
/// just short of the slot, then yield until it: at most [`SPIN_LEAD`] of polling per grant.
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

fn micros(d: Duration) -> u64 {
    u64::try_from(d.as_micros()).unwrap_or(u64::MAX / 2)
}
