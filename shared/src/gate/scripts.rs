//! The gate's scripts as Rust calls: one function per script, which fills its keys and
//! ARGV in the order the script's contract gives and decodes its reply, once, into a type.
//! No other code reads a gate script's reply.

use redis::ScriptInvocation;

use crate::lua::{self, OneKey};
use crate::redis_conn::{RedisConn, RedisFailure};

/// The gate's shape, as every script takes it: µs, except `idle_ms`.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Shape {
    pub interval_us: u64,
    pub burst: u32,
    pub tolerance_us: u64,
    /// How long an idle state is kept past its last time, ms.
    pub idle_ms: u64,
}

/// What `gate_acquire` decided, µs on Redis' clock.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum AcquireReply {
    /// Start now. The two `next_start` values let the caller give the start back.
    Go {
        slot: u64,
        now: u64,
        epoch: u64,
        next_start_before: u64,
        next_start_after: u64,
        /// The end of the last cooldown the state holds (0: none).
        cooldown_end: u64,
        /// The start is the key-health circuit's probe.
        probe: bool,
    },
    /// Sleep until `slot`, then confirm it with `epoch`.
    Wait { slot: u64, now: u64, epoch: u64 },
    /// The wait to `slot` is beyond the bound, or the key-health circuit holds the call
    /// (`by_circuit`); nothing new was reserved.
    Refused {
        slot: u64,
        now: u64,
        cooldown_end: u64,
        by_circuit: bool,
    },
}

impl Shape {
    /// ARGV interval, burst, tolerance and idle ms, in the order `gate_defer`,
    /// `gate_release` and `gate_adopt` take them after their own first arguments.
    fn push(self, call: &mut ScriptInvocation<'_>) {
        call.arg(self.interval_us)
            .arg(self.burst)
            .arg(self.tolerance_us)
            .arg(self.idle_ms);
    }
}

fn key(key: &str) -> OneKey<'_> {
    OneKey { name: "gate", key }
}

/// The gate's state and the key-health circuit beside it (`gate_acquire`, `gate_release`).
struct WithHealth<'a> {
    gate: &'a str,
    health: String,
}

fn with_health(gate: &str) -> WithHealth<'_> {
    WithHealth {
        gate,
        health: crate::keys::beside_gate(gate, "health"),
    }
}

impl lua::ScriptKeys for WithHealth<'_> {
    fn key(&self, name: &str) -> Option<&str> {
        match name {
            "gate" => Some(self.gate),
            "health" => Some(&self.health),
            _ => None,
        }
    }
}

fn u(x: i64) -> u64 {
    x.max(0) as u64
}

/// `gate_acquire`: a fresh request (`held` 0) or the confirmation of a held slot.
pub(crate) async fn acquire(
    conn: &RedisConn,
    state: &str,
    shape: Shape,
    max_wait_us: u64,
    held: u64,
    held_epoch: u64,
    probe: Option<super::Probe>,
) -> Result<AcquireReply, RedisFailure> {
    let (endpoint, window_us) = probe.map_or(("", 0), |p| (p.endpoint, (p.window.as_micros() as u64).max(1)));
    let v: Vec<i64> = lua::GATE_ACQUIRE
        .prepare(&with_health(state))
        .arg(shape.interval_us)
        .arg(shape.burst)
        .arg(max_wait_us)
        .arg(held)
        .arg(shape.tolerance_us)
        .arg(held_epoch)
        .arg(shape.idle_ms)
        .arg(endpoint)
        .arg(window_us)
        .invoke_async(&mut conn.clone())
        .await?;
    let &[code, slot, now, cooldown_end, epoch, before, after, probe] = v.as_slice() else {
        return Err(RedisFailure::Protocol("gate_acquire reply"));
    };
    let (slot, now, cooldown_end, epoch) = (u(slot), u(now), u(cooldown_end), u(epoch));
    match code {
        0 => Ok(AcquireReply::Go {
            slot,
            now,
            epoch,
            next_start_before: u(before),
            next_start_after: u(after),
            cooldown_end,
            probe: probe == 1,
        }),
        1 => Ok(AcquireReply::Wait { slot, now, epoch }),
        2 => Ok(AcquireReply::Refused {
            slot,
            now,
            cooldown_end,
            by_circuit: probe == 2,
        }),
        _ => Err(RedisFailure::Protocol("gate_acquire reply")),
    }
}

/// `gate_defer`: the cooldown's end and Redis' now, µs.
pub(crate) async fn defer(
    conn: &RedisConn,
    state: &str,
    shape: Shape,
    length_us: u64,
) -> Result<(u64, u64), RedisFailure> {
    let mut call = lua::GATE_DEFER.prepare(&key(state));
    call.arg(length_us);
    shape.push(&mut call);
    let v: Vec<i64> = call.invoke_async(&mut conn.clone()).await?;
    match v.as_slice() {
        &[cooldown_end, now] => Ok((u(cooldown_end), u(now))),
        _ => Err(RedisFailure::Protocol("gate_defer reply")),
    }
}

/// `gate_status`'s reply, µs on the holder's clock.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct StatusReply {
    pub now: u64,
    /// The earliest a fresh caller could start, as the script computes it.
    pub next_slot: u64,
    pub cooldown_end: u64,
    pub fresh: bool,
    pub next_reservation: u64,
    pub next_start: u64,
}

/// `gate_status`: the state at `state`, read, never written.
pub(crate) async fn status(conn: &RedisConn, state: &str, shape: Shape) -> Result<StatusReply, RedisFailure> {
    let v: Vec<i64> = lua::GATE_STATUS
        .prepare(&key(state))
        .arg(shape.interval_us)
        .arg(shape.burst)
        .arg(shape.tolerance_us)
        .invoke_async(&mut conn.clone())
        .await?;
    match v.as_slice() {
        &[
            now,
            next_slot,
            cooldown_end,
            fresh @ (0 | 1),
            next_reservation,
            next_start,
        ] => Ok(StatusReply {
            now: u(now),
            next_slot: u(next_slot),
            cooldown_end: u(cooldown_end),
            fresh: fresh == 1,
            next_reservation: u(next_reservation),
            next_start: u(next_start),
        }),
        _ => Err(RedisFailure::Protocol("gate_status reply")),
    }
}

/// What `gate_release` did with a grant given back.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Release {
    /// The start no longer counts.
    GivenBack,
    /// Another start was granted since (or the state changed): the unsent one still counts.
    StillCounts,
}

/// The grant `gate_release` is asked to give back, as `gate_acquire` granted it.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Granted {
    pub next_start_before: u64,
    pub next_start_after: u64,
    pub epoch: u64,
    pub slot: u64,
    pub granted_at: u64,
}

/// `gate_release`: give back a start that was never sent.
pub(crate) async fn release(
    conn: &RedisConn,
    state: &str,
    shape: Shape,
    grant: Granted,
) -> Result<Release, RedisFailure> {
    let mut call = lua::GATE_RELEASE.prepare(&with_health(state));
    call.arg(grant.next_start_before)
        .arg(grant.next_start_after)
        .arg(grant.epoch)
        .arg(grant.slot);
    shape.push(&mut call);
    let v: i64 = call.arg(grant.granted_at).invoke_async(&mut conn.clone()).await?;
    match v {
        1 => Ok(Release::GivenBack),
        0 => Ok(Release::StillCounts),
        _ => Err(RedisFailure::Protocol("gate_release reply")),
    }
}

/// `gate_adopt`: takes over `old`'s schedules and cooldown; true when anything was taken.
pub(crate) async fn adopt(
    conn: &RedisConn,
    state: &str,
    shape: Shape,
    old: &StatusReply,
) -> Result<bool, RedisFailure> {
    let mut call = lua::GATE_ADOPT.prepare(&key(state));
    call.arg(old.next_reservation)
        .arg(old.next_start)
        .arg(old.cooldown_end);
    shape.push(&mut call);
    let v: i64 = call.invoke_async(&mut conn.clone()).await?;
    match v {
        0 | 1 => Ok(v == 1),
        _ => Err(RedisFailure::Protocol("gate_adopt reply")),
    }
}
