//! The retry queue's and the runner lock's scripts as Rust calls: one function per script,
//! which fills its keys and ARGV in the order the script's contract gives and decodes its
//! reply, once, into a type. No other code reads a queue script's reply.

use crate::keys::QueueKeys;
use crate::lua::{self, OneKey};
use crate::redis_conn::{RedisConn, RedisFailure};

/// What `queue_enqueue` did.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum EnqueueReply {
    Queued,
    AlreadyQueued,
    Revived,
}

/// `queue_enqueue`'s arguments after the id.
pub(crate) struct EnqueueArgs<'a> {
    pub id: &'a str,
    pub job: &'a str,
    pub delay_ms: u64,
    pub history: &'a str,
    pub revival_notes: &'a str,
    pub keep: usize,
    pub legacy_id: &'a str,
}

pub(crate) async fn enqueue(
    conn: &RedisConn,
    q: &QueueKeys,
    a: EnqueueArgs<'_>,
) -> Result<EnqueueReply, RedisFailure> {
    let (status, _due, _id): (i64, i64, String) = lua::QUEUE_ENQUEUE
        .prepare(q)
        .arg(a.id)
        .arg(a.job)
        .arg(a.delay_ms)
        .arg(a.history)
        .arg(a.revival_notes)
        .arg(a.keep)
        .arg(a.legacy_id)
        .invoke_async(&mut conn.clone())
        .await?;
    match status {
        1 => Ok(EnqueueReply::Queued),
        0 => Ok(EnqueueReply::AlreadyQueued),
        3 => Ok(EnqueueReply::Revived),
        _ => Err(RedisFailure::Protocol("queue_enqueue reply")),
    }
}

/// One entry `queue_claim` leased, as stored (the caller parses it).
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct RawLeased {
    pub id: String,
    pub token: String,
    /// The job JSON; empty when the stored job is missing.
    pub job: String,
    pub count: String,
    pub first: String,
    pub errors: String,
}

/// `queue_claim`'s reply.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct ClaimReply {
    pub reclaimed: u32,
    pub promoted: u32,
    pub leased: Vec<RawLeased>,
}

pub(crate) async fn claim(
    conn: &RedisConn,
    q: &QueueKeys,
    k: usize,
    lease_ms: u64,
    move_limit: usize,
    nonce: &str,
) -> Result<ClaimReply, RedisFailure> {
    let reply: Vec<String> = lua::QUEUE_CLAIM
        .prepare(q)
        .arg(k)
        .arg(lease_ms)
        .arg(move_limit)
        .arg(nonce)
        .invoke_async(&mut conn.clone())
        .await?;
    let bad = RedisFailure::Protocol("queue_claim reply");
    let (head, rest) = reply.split_at_checked(3).ok_or(bad.clone())?;
    if rest.len() % 6 != 0 {
        return Err(bad);
    }
    Ok(ClaimReply {
        reclaimed: head[1].parse().unwrap_or(0),
        promoted: head[2].parse().unwrap_or(0),
        leased: rest
            .chunks_exact(6)
            .map(|f| RawLeased {
                id: f[0].clone(),
                token: f[1].clone(),
                job: f[2].clone(),
                count: f[3].clone(),
                first: f[4].clone(),
                errors: f[5].clone(),
            })
            .collect(),
    })
}

/// How `queue_settle` ends a lease.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum SettleAction {
    /// Done: the entry goes.
    Ack,
    /// Failed: back to waiting, due after the delay, with the new count and history.
    Retry,
    /// To the dead letters, with the new count and history, and an alert owed.
    Dead,
    /// Not worked: due again at once, count and history unchanged.
    Release,
    /// Not worked, and not workable before the delay: waiting, count and history unchanged.
    Later,
}

impl SettleAction {
    /// The word the script takes.
    fn as_arg(self) -> &'static str {
        match self {
            SettleAction::Ack => "ack",
            SettleAction::Retry => "retry",
            SettleAction::Dead => "dead",
            SettleAction::Release => "release",
            SettleAction::Later => "later",
        }
    }
}

/// `queue_settle`'s arguments after the action.
pub(crate) struct SettleArgs<'a> {
    pub id: &'a str,
    pub token: &'a str,
    pub action: SettleAction,
    pub count: u32,
    pub history: &'a str,
    pub delay_ms: u64,
}

/// `queue_settle`: true when settled, false when the lease is someone else's now.
pub(crate) async fn settle(conn: &RedisConn, q: &QueueKeys, a: SettleArgs<'_>) -> Result<bool, RedisFailure> {
    let v: i64 = lua::QUEUE_SETTLE
        .prepare(q)
        .arg(a.id)
        .arg(a.token)
        .arg(a.action.as_arg())
        .arg(a.count)
        .arg(a.history)
        .arg(a.delay_ms)
        .invoke_async(&mut conn.clone())
        .await?;
    match v {
        0 | 1 => Ok(v == 1),
        _ => Err(RedisFailure::Protocol("queue_settle reply")),
    }
}

/// `queue_bury`: true for a new dead letter, false when it was one already.
pub(crate) async fn bury(
    conn: &RedisConn,
    q: &QueueKeys,
    id: &str,
    job: &str,
    notes: &str,
    keep: usize,
    legacy_id: &str,
) -> Result<bool, RedisFailure> {
    let (status, _id): (i64, String) = lua::QUEUE_BURY
        .prepare(q)
        .arg(id)
        .arg(job)
        .arg(notes)
        .arg(keep)
        .arg(legacy_id)
        .invoke_async(&mut conn.clone())
        .await?;
    match status {
        0 | 1 => Ok(status == 1),
        _ => Err(RedisFailure::Protocol("queue_bury reply")),
    }
}

/// `queue_redrive`: (redriven, removed).
pub(crate) async fn redrive(
    conn: &RedisConn,
    q: &QueueKeys,
    id: Option<&str>,
    most: usize,
) -> Result<(u64, u64), RedisFailure> {
    Ok(lua::QUEUE_REDRIVE
        .prepare(q)
        .arg(id.unwrap_or(""))
        .arg(most)
        .invoke_async(&mut conn.clone())
        .await?)
}

/// `queue_stats`'s reply, ms on Redis' clock.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct StatsReply {
    pub now: u64,
    pub depth: u64,
    pub due_now: u64,
    pub in_flight: u64,
    pub dead: u64,
    /// 0 when empty.
    pub oldest_first_failure: u64,
    /// 0 when nothing waits.
    pub next_due: u64,
}

pub(crate) async fn stats(conn: &RedisConn, q: &QueueKeys) -> Result<StatsReply, RedisFailure> {
    let v: Vec<i64> = lua::QUEUE_STATS
        .prepare(q)
        .invoke_async(&mut conn.clone())
        .await?;
    let u = |x: i64| x.max(0) as u64;
    match v.as_slice() {
        &[now, depth, due_now, in_flight, dead, oldest, next_due] => Ok(StatsReply {
            now: u(now),
            depth: u(depth),
            due_now: u(due_now),
            in_flight: u(in_flight),
            dead: u(dead),
            oldest_first_failure: u(oldest),
            next_due: u(next_due),
        }),
        _ => Err(RedisFailure::Protocol("queue_stats reply")),
    }
}

/// `queue_alerted`: marks the alerts of `(id, score)` pairs delivered; how many were.
pub(crate) async fn alerted(
    conn: &RedisConn,
    q: &QueueKeys,
    sent: &[(&str, u64)],
) -> Result<u64, RedisFailure> {
    let mut call = lua::QUEUE_ALERTED.prepare(q);
    for (id, score) in sent {
        call.arg(*id).arg(*score);
    }
    Ok(call.invoke_async(&mut conn.clone()).await?)
}

/// `lock_extend` / `lock_release` by `token`: true when it was the holder's.
pub(crate) async fn lock_extend(
    conn: &RedisConn,
    lock: &str,
    token: &str,
    ttl_ms: u64,
) -> Result<bool, RedisFailure> {
    let v: i64 = lua::LOCK_EXTEND
        .prepare(&OneKey {
            name: "lock",
            key: lock,
        })
        .arg(token)
        .arg(ttl_ms)
        .invoke_async(&mut conn.clone())
        .await?;
    Ok(v == 1)
}

pub(crate) async fn lock_release(conn: &RedisConn, lock: &str, token: &str) -> Result<bool, RedisFailure> {
    let v: i64 = lua::LOCK_RELEASE
        .prepare(&OneKey {
            name: "lock",
            key: lock,
        })
        .arg(token)
        .invoke_async(&mut conn.clone())
        .await?;
    Ok(v == 1)
}
