//! [`RunnerLock`]: at most one holder cluster-wide (the seed's ShedLock), for the drainer.
//!
//! `SET key token NX PX ttl` takes it; release and extend check the token in Lua first, so
//! a holder whose lock expired can never free or prolong a successor's. The TTL is the
//! lock-at-most bound: a holder that crashes frees it when the TTL runs out.

use std::time::Duration;

use rand::Rng;

use crate::queue::scripts;
use crate::redis_conn::{RedisConn, RedisFailure};

/// A held lock. Dropping it does not release it (that needs Redis): call
/// [`RunnerLock::release`]; a forgotten one frees itself at the TTL.
#[derive(Debug)]
pub struct Held {
    token: String,
}

/// A named single-runner lock.
#[derive(Debug, Clone)]
pub struct RunnerLock {
    conn: RedisConn,
    key: String,
}

impl RunnerLock {
    pub fn new(conn: RedisConn, key: String) -> Self {
        Self { conn, key }
    }

    /// Takes the lock for at most `ttl`, or `None` when someone else holds it.
    pub async fn try_acquire(&self, ttl: Duration) -> Result<Option<Held>, RedisFailure> {
        let token = format!("{:032x}", rand::rng().random::<u128>());
        let ok: Option<String> = redis::cmd("SET")
            .arg(&self.key)
            .arg(&token)
            .arg("NX")
            .arg("PX")
            .arg(ttl.as_millis().max(1) as u64)
            .query_async(&mut self.conn.clone())
            .await?;
        Ok(ok.map(|_| Held { token }))
    }

    /// Extends the lock to `ttl` from now; `false` when it is no longer ours.
    pub async fn extend(&self, held: &Held, ttl: Duration) -> Result<bool, RedisFailure> {
        scripts::lock_extend(&self.conn, &self.key, &held.token, ttl.as_millis().max(1) as u64).await
    }

    /// Releases the lock; `false` when it was no longer ours.
    pub async fn release(&self, held: Held) -> Result<bool, RedisFailure> {
        scripts::lock_release(&self.conn, &self.key, &held.token).await
    }

    /// Time left on the lock, whoever holds it; `None` when free.
    pub async fn holder_ttl(&self) -> Result<Option<Duration>, RedisFailure> {
        let ms: i64 = redis::cmd("PTTL")
            .arg(&self.key)
            .query_async(&mut self.conn.clone())
            .await?;
        Ok((ms > 0).then(|| Duration::from_millis(ms as u64)))
    }
}
