//! [`RedisHistory`]: the run history (the seed's `job_run_errors`) as a capped Redis stream.
//!
//! Every failed upstream call appends one sanitized [`FailureRecord`]; `lawsync` reads the
//! newest back. `XADD … MAXLEN ~` keeps it to about [`HISTORY_STREAM_MAXLEN`] entries.

use crate::keys::Namespace;
use crate::law::{BoxFuture, FailureRecord, FailureSink};
use crate::policy::HISTORY_STREAM_MAXLEN;
use crate::redis_conn::{RedisConn, RedisFailure};
use crate::secret::Secret;

/// The run-history stream of one namespace.
#[derive(Debug, Clone)]
pub struct RedisHistory {
    conn: RedisConn,
    key: String,
    secret: Option<Secret>,
}

impl RedisHistory {
    pub fn new(conn: RedisConn, ns: &Namespace) -> Self {
        Self {
            conn,
            key: ns.history(),
            secret: None,
        }
    }

    /// Scrubs `secret` from every record's text before it is stored (defence in depth).
    pub fn with_secret(mut self, secret: Secret) -> Self {
        self.secret = Some(secret);
        self
    }

    /// Appends one record.
    pub async fn append(&self, mut record: FailureRecord) -> Result<(), RedisFailure> {
        if let Some(s) = &self.secret {
            record.message = s.scrub(&record.message);
        }
        let json = serde_json::to_string(&record).map_err(|_| RedisFailure::Invalid("record".into()))?;
        let _: String = redis::cmd("XADD")
            .arg(&self.key)
            .arg("MAXLEN")
            .arg("~")
            .arg(HISTORY_STREAM_MAXLEN)
            .arg("*")
            .arg("record")
            .arg(json)
            .query_async(&mut self.conn.clone())
            .await?;
        Ok(())
    }

    /// The newest `limit` records, newest first. Entries that cannot be read are skipped
    /// and counted in the second value.
    pub async fn newest(&self, limit: usize) -> Result<(Vec<FailureRecord>, usize), RedisFailure> {
        let rows: Vec<(String, Vec<(String, String)>)> = redis::cmd("XREVRANGE")
            .arg(&self.key)
            .arg("+")
            .arg("-")
            .arg("COUNT")
            .arg(limit.max(1))
            .query_async(&mut self.conn.clone())
            .await?;
        let mut unreadable = 0;
        let mut out = Vec::with_capacity(rows.len());
        for (_, fields) in rows {
            match fields
                .iter()
                .find(|(k, _)| k == "record")
                .and_then(|(_, v)| serde_json::from_str(v).ok())
            {
                Some(r) => out.push(r),
                None => unreadable += 1,
            }
        }
        Ok((out, unreadable))
    }
}

impl FailureSink for RedisHistory {
    fn record(&self, record: FailureRecord) -> BoxFuture<'_, ()> {
        Box::pin(async move {
            if let Err(e) = self.append(record).await {
                tracing::warn!(error = %e, "run history: record not stored");
            }
        })
    }
}
