//! [`LawError`]: every way a law.go.kr call can fail, built from sanitized parts only.
//!
//! No variant holds a URL, the key, an upstream body or a lower-level error: their
//! `Display` would carry them into logs. What is kept is the status, the attempt count
//! and a fixed description, which is all an operator needs to act.

use std::time::Duration;

use serde::{Deserialize, Serialize};

use crate::gate::GateError;

/// Which endpoint a call went to.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Endpoint {
    /// `lawSearch.do`
    Search,
    /// `lawService.do`
    Detail,
}

impl Endpoint {
    /// The DRF path below the base URL.
    pub fn path(self) -> &'static str {
        match self {
            Endpoint::Search => "DRF/lawSearch.do",
            Endpoint::Detail => "DRF/lawService.do",
        }
    }

    /// A short name for logs and records.
    pub fn name(self) -> &'static str {
        match self {
            Endpoint::Search => "search",
            Endpoint::Detail => "detail",
        }
    }
}

/// A network failure, by kind only.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum NetKind {
    Connect,
    Timeout,
    Other,
    /// The TLS handshake refused law.go.kr's certificate.
    Tls(super::refusals::TlsProblem),
}

impl NetKind {
    pub(crate) fn describe(self) -> &'static str {
        match self {
            NetKind::Connect => "could not connect",
            NetKind::Timeout => "timed out",
            NetKind::Other => "connection failed",
            NetKind::Tls(_) => "certificate not verified",
        }
    }
}

/// How the caller should treat a failure.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Disposition {
    /// Retrying cannot help (bad request, no such precedent): record it, do not retry.
    Permanent,
    /// Retry later, from the retry queue; `Some` when the upstream or the gate said when.
    RetryLater(Option<Duration>),
}

/// A failed law.go.kr call.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum LawError {
    #[error("law.go.kr request invalid: {0}")]
    InvalidRequest(String),
    #[error("law.go.kr call failed: HTTP {status} (attempt {attempts})")]
    Http { status: u16, attempts: u32 },
    #[error("law.go.kr call failed: {} (attempt {attempts})", .kind.describe())]
    Network { kind: NetKind, attempts: u32 },
    #[error("law.go.kr asked to wait {} s{}, longer than this call may wait; try later (attempt {attempts})",
        .wait.as_secs(), .status.map(|s| format!(" after HTTP {s}")).unwrap_or_default())]
    TryLater {
        wait: Duration,
        status: Option<u16>,
        attempts: u32,
    },
    #[error("law.go.kr call not started: the invocation's deadline is too close (after {attempts} attempts)")]
    OutOfTime { attempts: u32 },
    #[error("law.go.kr reply exceeds the {limit}-byte limit")]
    BodyTooLarge { limit: u64 },
    #[error("law.go.kr reply is empty")]
    EmptyBody,
    #[error(
        "law.go.kr replied with an HTML page of no known shape (a maintenance, throttle or block page?); kept for `lawsync probe`"
    )]
    HtmlPage,
    /// law.go.kr refused the key itself (see [`super::refusals`]): the key-health circuit
    /// opens.
    #[error("{}: {}. Fix: {}", .0.headline(), .0.cause(), .0.fix())]
    KeyRefused(super::refusals::KeyProblem),
    #[error("law.go.kr has no such precedent")]
    NotFound,
    #[error("law.go.kr reply is not the expected JSON or XML: {what}")]
    Malformed { what: String },
    #[error(transparent)]
    Gate(#[from] GateError),
}

impl LawError {
    /// What the caller should do about it.
    pub fn disposition(&self) -> Disposition {
        match self {
            LawError::InvalidRequest(_) | LawError::NotFound | LawError::BodyTooLarge { .. } => {
                Disposition::Permanent
            }
            LawError::Http { status, .. } if is_permanent_status(*status) => Disposition::Permanent,
            LawError::TryLater { wait, .. } => Disposition::RetryLater(Some(*wait)),
            LawError::KeyRefused(_) => Disposition::RetryLater(Some(crate::policy::KEY_PROBE_INTERVAL)),
            LawError::Gate(g) => Disposition::RetryLater(g.retry_after()),
            _ => Disposition::RetryLater(None),
        }
    }

    /// A stable, short name of the failure kind, for records and metrics.
    pub fn kind(&self) -> &'static str {
        match self {
            LawError::InvalidRequest(_) => "invalid_request",
            LawError::Http { .. } => "http_status",
            LawError::Network { .. } => "network",
            LawError::TryLater { .. } => "try_later",
            LawError::OutOfTime { .. } => "out_of_time",
            LawError::BodyTooLarge { .. } => "body_too_large",
            LawError::EmptyBody => "empty_body",
            LawError::HtmlPage => "html_page",
            LawError::KeyRefused(p) => p.kind(),
            LawError::NotFound => "not_found",
            LawError::Malformed { .. } => "malformed",
            LawError::Gate(GateError::Unavailable(_)) => "gate_unavailable",
            LawError::Gate(GateError::WaitTooLong { .. }) => "gate_wait_too_long",
            LawError::Gate(GateError::Unsettled { .. }) => "gate_unsettled",
        }
    }

    /// The HTTP status involved, if any.
    pub fn status(&self) -> Option<u16> {
        match self {
            LawError::Http { status, .. } => Some(*status),
            LawError::TryLater { status, .. } => *status,
            _ => None,
        }
    }

    /// Attempts made, where counted.
    pub fn attempts(&self) -> u32 {
        match self {
            LawError::Http { attempts, .. }
            | LawError::Network { attempts, .. }
            | LawError::TryLater { attempts, .. }
            | LawError::OutOfTime { attempts } => *attempts,
            _ => 1,
        }
    }

    /// The sanitized run-history record of this failure (the seed's `job_run_errors`).
    pub fn record(&self, endpoint: Endpoint) -> FailureRecord {
        FailureRecord {
            at_ms: crate::clock::now_millis(),
            endpoint,
            kind: self.kind().to_owned(),
            status: self.status(),
            attempts: self.attempts(),
            retry_after_ms: match self.disposition() {
                Disposition::RetryLater(Some(d)) => Some(d.as_millis() as u64),
                _ => None,
            },
            permanent: self.disposition() == Disposition::Permanent,
            message: self.to_string(),
        }
    }
}

/// 4xx statuses where the same request will fail the same way. 404 is not among them:
/// law.go.kr answers the odd 404 during deployments; 408 and 429 are about timing.
fn is_permanent_status(status: u16) -> bool {
    matches!(status, 400 | 401 | 403 | 405 | 410 | 411 | 413 | 414 | 415 | 422)
}

/// One failed call, sanitized: safe to log, store and send in an alert.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct FailureRecord {
    /// Epoch milliseconds when the call gave up.
    pub at_ms: u64,
    pub endpoint: Endpoint,
    /// [`LawError::kind`].
    pub kind: String,
    pub status: Option<u16>,
    pub attempts: u32,
    pub retry_after_ms: Option<u64>,
    pub permanent: bool,
    /// The error's `Display`: built from sanitized parts only.
    pub message: String,
}

/// A boxed future, so that sinks can be trait objects.
pub type BoxFuture<'a, T> = std::pin::Pin<Box<dyn std::future::Future<Output = T> + Send + 'a>>;

/// Where failure records go: [`crate::history::RedisHistory`] (a capped Redis stream) in
/// the functions; the test kit keeps them in memory.
pub trait FailureSink: Send + Sync + std::fmt::Debug {
    /// Takes one record. Must not fail the call it describes: a sink logs its own errors.
    fn record(&self, record: FailureRecord) -> BoxFuture<'_, ()>;
}
