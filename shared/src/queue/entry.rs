//! What a retry entry holds: the seed's `{"type","payload","retryCount"}` plus the first
//! failure time, the due time and the sanitized error history.

use std::collections::HashMap;
use std::sync::LazyLock;
use std::time::Duration;

use serde::{Deserialize, Serialize};
use serde_json::Value;
use sha2::{Digest, Sha256};

use crate::law::{FailureRecord, SearchRequest};
use crate::policy::{
    IDENTITY_PREFIX_BYTES, LEGACY_MAX_IDENTITY_BYTES, MAX_DISPLAY, MAX_JOB_IDENTITY_BYTES,
    READABLE_IDENTITY_BYTES,
};

/// What a job is: routes it to its handler and names it (`KIND:identity`). Stored as the
/// job's `type`, under the names in the serde attributes, which are the only place those
/// names are written.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize)]
pub enum JobKind {
    /// One search page.
    #[serde(rename = "SEARCH")]
    Search,
    /// One precedent.
    #[serde(rename = "DETAIL")]
    Detail,
    /// An SQS message that could not be read, kept as a dead letter; never run.
    #[serde(rename = "INVALID")]
    Invalid,
    /// A stored type this release does not know (damage, or a newer release's): read and
    /// shown as stored, and dead-lettered when claimed, never run. Only reading a stored
    /// job makes one.
    #[serde(untagged)]
    Unknown(UnknownKind),
}

/// The text of a stored job type this release does not know.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize)]
#[serde(transparent)]
pub struct UnknownKind(String);

impl UnknownKind {
    pub fn as_str(&self) -> &str {
        &self.0
    }
}

impl JobKind {
    /// The kinds this release knows.
    pub const KNOWN: [JobKind; 3] = [JobKind::Search, JobKind::Detail, JobKind::Invalid];

    /// The stored name (`KIND` in the member name `KIND:identity`).
    pub fn as_str(&self) -> &str {
        // Each known kind's name is its serde rename, read once.
        static NAMES: LazyLock<HashMap<JobKind, String>> = LazyLock::new(|| {
            JobKind::KNOWN
                .into_iter()
                .map(|k| {
                    let name = match serde_json::to_value(&k) {
                        Ok(Value::String(name)) => name,
                        _ => unreachable!("a known job kind serializes as its name"),
                    };
                    (k, name)
                })
                .collect()
        });
        match self {
            JobKind::Unknown(text) => text.as_str(),
            known => NAMES.get(known).map_or("", String::as_str),
        }
    }
}

impl std::fmt::Display for JobKind {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// Reads the stored text as a string, exactly as the previous release's `String` did: a
/// known name is its kind, any other text is [`JobKind::Unknown`] (never an error, so the
/// job is still shown and dead-lettered with its type named).
impl<'de> Deserialize<'de> for JobKind {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let text = String::deserialize(d)?;
        Ok(JobKind::KNOWN
            .into_iter()
            .find(|k| k.as_str() == text)
            .unwrap_or(JobKind::Unknown(UnknownKind(text))))
    }
}

/// Why a job cannot be enqueued.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum JobCheckError {
    #[error("job type must be 1-32 of A-Z 0-9 _, got {0:?}")]
    Kind(String),
    #[error("job identity must be 1-{MAX_JOB_IDENTITY_BYTES} bytes of printable characters")]
    Identity,
}

/// A unit of work to retry. `kind` routes it to a handler; `identity` makes enqueueing
/// idempotent: one entry per kind and identity.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Job {
    #[serde(rename = "type")]
    pub kind: JobKind,
    /// What makes two jobs the same job (a precedent id, a canonical search window).
    pub identity: String,
    pub payload: Value,
}

impl Job {
    /// A job; `identity` is checked when it is enqueued.
    pub fn new(kind: JobKind, identity: impl Into<String>, payload: Value) -> Self {
        Self {
            kind,
            identity: identity.into(),
            payload,
        }
    }

    /// The job for one search page: its identity is the canonical window
    /// (`from~to~query~page~display`, defaults filled in, `all` for the whole list), and
    /// `@run` for a page of a sync run (each run counts its own pages), and `?probe=kind`
    /// for a daily run's probe (its window read is another job) and `refresh` for a
    /// refresh; its payload the request.
    pub fn search(req: &SearchRequest) -> Self {
        let window = if req.all {
            "all".to_owned()
        } else {
            format!("{}~{}", req.from, req.to)
        };
        let mut identity = format!(
            "{window}~{}~{}~{}",
            req.query.as_deref().unwrap_or(""),
            req.page.unwrap_or(1),
            req.display.unwrap_or(MAX_DISPLAY)
        );
        if let Some(run) = &req.run {
            identity.push('@');
            identity.push_str(run.as_str());
        }
        // A probe and the window read it sends, a refresh and a plain read, are two jobs:
        // one parked while the other is must not be taken for it (it would be dropped as
        // queued already).
        let mut marks = Vec::new();
        if let Some(probe) = req.probe {
            marks.push(match probe {
                crate::law::Probe::Recent => "probe=recent",
                crate::law::Probe::Month => "probe=month",
                crate::law::Probe::All => "probe=all",
            });
        }
        if req.refresh {
            marks.push("refresh");
        }
        if !marks.is_empty() {
            identity.push('?');
            identity.push_str(&marks.join("&"));
        }
        Self::new(
            JobKind::Search,
            identity,
            serde_json::to_value(req).unwrap_or_default(),
        )
    }

    /// The job for one precedent: payload `{"id"}`.
    pub fn detail(id: &str) -> Self {
        Self::new(JobKind::Detail, id, serde_json::json!({ "id": id }))
    }

    /// The job for a detail message: identity the id, `@run` for one of a sync run (each
    /// run settles its own ids) and `?refresh` for a refresh; payload the message as sent.
    pub fn detail_message(msg: &crate::app::sqs::DetailMessage) -> Self {
        let mut identity = match &msg.run {
            Some(run) => format!("{}@{run}", msg.id),
            None => msg.id.clone(),
        };
        if msg.refresh {
            identity.push_str("?refresh");
        }
        Self::new(
            JobKind::Detail,
            identity,
            serde_json::to_value(msg).unwrap_or_default(),
        )
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

    /// Whether it may be enqueued: a printable identity of bounded length, and a type that
    /// keeps member names readable (a known kind always does; an unknown one read from
    /// storage must be 1-32 of A-Z 0-9 _, as every type had to be).
    pub(crate) fn check(&self) -> Result<(), JobCheckError> {
        if let JobKind::Unknown(text) = &self.kind {
            let text = text.as_str();
            let ok = !text.is_empty()
                && text.len() <= 32
                && text
                    .bytes()
                    .all(|b| b.is_ascii_uppercase() || b.is_ascii_digit() || b == b'_');
            if !ok {
                return Err(JobCheckError::Kind(text.to_owned()));
            }
        }
        if self.identity.is_empty()
            || self.identity.len() > MAX_JOB_IDENTITY_BYTES
            || self.identity.chars().any(char::is_control)
        {
            return Err(JobCheckError::Identity);
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

#[cfg(test)]
mod tests {
    use super::*;

    fn read(kind: Value) -> Result<Job, serde_json::Error> {
        serde_json::from_value(serde_json::json!({ "type": kind, "identity": "1", "payload": {} }))
    }

    #[test]
    fn a_probe_and_the_window_read_it_sends_are_two_jobs() {
        let run = crate::mirror::runs::RunId::parse("daily-20260925T190000Z").expect("run");
        let read = SearchRequest {
            from: "20260801".into(),
            to: "20260831".into(),
            run: Some(run),
            ..Default::default()
        };
        let probes = [
            crate::law::Probe::Recent,
            crate::law::Probe::Month,
            crate::law::Probe::All,
        ];
        let mut ids: Vec<String> = probes
            .iter()
            .map(|p| {
                Job::search(&SearchRequest {
                    probe: Some(*p),
                    page: Some(1),
                    ..read.clone()
                })
                .identity
            })
            .collect();
        ids.push(Job::search(&read).identity);
        let distinct: std::collections::BTreeSet<&String> = ids.iter().collect();
        assert_eq!(distinct.len(), ids.len(), "{ids:?}");
    }

    #[test]
    fn kinds_are_stored_by_name_and_unknown_types_are_kept_as_stored() {
        for kind in JobKind::KNOWN {
            let job = Job::new(kind.clone(), "1", serde_json::json!({}));
            let stored = serde_json::to_value(&job).expect("json");
            assert_eq!(stored["type"], kind.as_str());
            assert_eq!(read(stored["type"].clone()).expect("reads").kind, kind);
            assert_eq!(job.id(), format!("{}:1", kind.as_str()));
        }
        let names: std::collections::HashSet<&str> = JobKind::KNOWN.iter().map(JobKind::as_str).collect();
        assert_eq!(names.len(), JobKind::KNOWN.len(), "{names:?}");
        assert!(!names.contains(""), "{names:?}");
        // A type this release does not know reads (and writes back) as it was stored.
        let unknown = read("NOPE".into()).expect("reads");
        assert_eq!(unknown.kind.as_str(), "NOPE");
        assert!(matches!(unknown.kind, JobKind::Unknown(_)));
        assert_eq!(serde_json::to_value(&unknown).expect("json")["type"], "NOPE");
        assert_eq!(unknown.id(), "NOPE:1");
        assert_eq!(unknown.check(), Ok(()));
        // A type that is not even text does not read, as before (the claim's corrupt entry).
        let known = serde_json::to_value(JobKind::Detail).expect("json");
        assert!(read(serde_json::json!({ known.as_str().unwrap_or_default(): null })).is_err());
        assert!(read(serde_json::json!(5)).is_err());
    }

    #[test]
    fn checks_are_typed() {
        let lower = read(JobKind::Detail.as_str().to_lowercase().into()).expect("reads");
        assert_eq!(
            lower.check(),
            Err(JobCheckError::Kind(JobKind::Detail.as_str().to_lowercase()))
        );
        assert_eq!(Job::detail("").check(), Err(JobCheckError::Identity));
        assert_eq!(Job::detail("a\nb").check(), Err(JobCheckError::Identity));
        assert_eq!(Job::detail("1").check(), Ok(()));
    }
}
