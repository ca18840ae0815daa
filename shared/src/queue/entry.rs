//! What a retry entry holds: the seed's `{"type","payload","retryCount"}` plus the first
//! failure time, the due time and the sanitized error history.

use std::time::Duration;

use serde::{Deserialize, Serialize};
use serde_json::Value;
use sha2::{Digest, Sha256};

use crate::law::FailureRecord;
use crate::policy::{
    IDENTITY_PREFIX_BYTES, LEGACY_MAX_IDENTITY_BYTES, MAX_JOB_IDENTITY_BYTES, READABLE_IDENTITY_BYTES,
};

/// A unit of work to retry. `kind` routes it to a handler (`SEARCH`, `DETAIL`, ...);
/// `identity` makes enqueueing idempotent: one entry per kind and identity.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Job {
    #[serde(rename = "type")]
    pub kind: String,
    /// What makes two jobs the same job (a precedent id, a canonical search window).
    pub identity: String,
    pub payload: Value,
}

impl Job {
    /// A job; `kind` and `identity` are checked when it is enqueued.
    pub fn new(kind: impl Into<String>, identity: impl Into<String>, payload: Value) -> Self {
        Self {
            kind: kind.into(),
            identity: identity.into(),
            payload,
        }
    }

    /// The queue's member name: `KIND:identity`, or for an identity longer than
    /// [`READABLE_IDENTITY_BYTES`], `KIND:<its first bytes>~sha256:<hex digest>`: bounded,
    /// and still one name per job.
    pub fn id(&self) -> String {
        if self.identity.len() <= READABLE_IDENTITY_BYTES {
            return format!("{}:{}", self.kind, self.identity);
        }
        let mut cut = IDENTITY_PREFIX_BYTES;
        while !self.identity.is_char_boundary(cut) {
            cut -= 1;
        }
        let digest = Sha256::digest(self.identity.as_bytes());
        let hex: String = digest.iter().map(|b| format!("{b:02x}")).collect();
        format!("{}:{}~sha256:{hex}", self.kind, &self.identity[..cut])
    }

    /// The name the previous release gave this job when it differs from [`Job::id`]: the
    /// whole identity, for identities it accepted (up to [`LEGACY_MAX_IDENTITY_BYTES`]).
    pub(crate) fn legacy_id(&self) -> Option<String> {
        (self.identity.len() > READABLE_IDENTITY_BYTES && self.identity.len() <= LEGACY_MAX_IDENTITY_BYTES)
            .then(|| format!("{}:{}", self.kind, self.identity))
    }

    pub(crate) fn check(&self) -> Result<(), String> {
        let kind_ok = !self.kind.is_empty()
            && self.kind.len() <= 32
            && self
                .kind
                .bytes()
                .all(|b| b.is_ascii_uppercase() || b.is_ascii_digit() || b == b'_');
        if !kind_ok {
            return Err(format!("job type must be 1-32 of A-Z 0-9 _, got {:?}", self.kind));
        }
        if self.identity.is_empty()
            || self.identity.len() > MAX_JOB_IDENTITY_BYTES
            || self.identity.chars().any(char::is_control)
        {
            return Err(format!(
                "job identity must be 1-{MAX_JOB_IDENTITY_BYTES} bytes of printable characters"
            ));
        }
        Ok(())
    }
}

/// One sanitized failure, as stored with an entry and sent in alerts.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ErrorNote {
    /// Epoch ms when it happened.
    pub at_ms: u64,
    /// A short, stable failure kind (`http_status`, `network`, `try_later`, ...).
    pub kind: String,
    /// Human-readable text built from sanitized parts.
    pub message: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub status: Option<u16>,
}

impl ErrorNote {
    /// A note stamped now.
    pub fn now(kind: impl Into<String>, message: impl Into<String>, status: Option<u16>) -> Self {
        Self {
            at_ms: crate::clock::now_millis(),
            kind: kind.into(),
            message: message.into(),
            status,
        }
    }
}

impl From<&FailureRecord> for ErrorNote {
    fn from(r: &FailureRecord) -> Self {
        Self {
            at_ms: r.at_ms,
            kind: r.kind.to_owned(),
            message: r.message.clone(),
            status: r.status,
        }
    }
}

/// A leased entry: work in the hands of one drainer until it is settled or the lease ends.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Leased {
    pub id: String,
    pub(crate) token: String,
    pub job: Job,
    /// Failures so far (0 on the first retry).
    pub retry_count: u32,
    /// Epoch ms (Redis' clock) of the first failure.
    pub first_failed_at_ms: u64,
    /// Sanitized errors, oldest first.
    pub errors: Vec<ErrorNote>,
}

/// An entry as `lawsync queue list` and `dead` show it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct EntryView {
    pub id: String,
    /// The stored job, or `None` if it could not be read (shown, never dropped).
    pub job: Option<Job>,
    pub retry_count: u32,
    /// Epoch ms: first failure for live entries, death for dead letters.
    pub since_ms: u64,
    /// Epoch ms of the oldest error kept in its history.
    pub first_error_at_ms: Option<u64>,
    pub last_error: Option<ErrorNote>,
}

/// The queue's shape.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct QueueStats {
    /// Live entries (waiting, due or leased).
    pub depth: u64,
    pub due_now: u64,
    pub in_flight: u64,
    pub dead: u64,
    /// Age of the oldest live entry's first failure.
    #[serde(with = "millis")]
    pub oldest_age: Option<Duration>,
    /// Time until the next waiting entry falls due.
    #[serde(with = "millis")]
    pub next_due_in: Option<Duration>,
}

mod millis {
    use std::time::Duration;

    pub fn serialize<S: serde::Serializer>(d: &Option<Duration>, s: S) -> Result<S::Ok, S::Error> {
        match d {
            Some(d) => s.serialize_u64(d.as_millis() as u64),
            None => s.serialize_none(),
        }
    }
}
