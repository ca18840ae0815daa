//! The two units of work, [`JobKind::Search`] (one page) and [`JobKind::Detail`] (one
//! precedent), as both the SQS handlers and the drainer run them, and what a failure turns
//! into.

use std::time::Duration;

use serde_json::json;

use super::Deps;
use super::outbox::QueueName;
use crate::deadline::Deadline;
use crate::documents::precedent_key;
use crate::drainer::Outcome;
use crate::gate::{GateError, Refusal};
use crate::law::{Disposition, LawError, SearchRequest};
use crate::policy::GATE_REFUSED_RETRY;
use crate::queue::{Buried, Enqueued, ErrorNote, Job, JobKind};

/// A failed unit of work, sanitized.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum JobError {
    #[error(transparent)]
    Law(#[from] LawError),
    #[error("could not store the document: {0}")]
    Store(String),
    #[error("could not send follow-up messages: {0}")]
    Fanout(String),
}

impl JobError {
    fn note(&self) -> ErrorNote {
        let (kind, status) = match self {
            JobError::Law(e) => (e.kind().to_owned(), e.status()),
            JobError::Store(_) => ("store".to_owned(), None),
            JobError::Fanout(_) => ("fanout".to_owned(), None),
        };
        ErrorNote::now(kind, self.to_string(), status)
    }

    fn disposition(&self) -> Disposition {
        match self {
            JobError::Law(e) => e.disposition(),
            JobError::Store(_) | JobError::Fanout(_) => Disposition::RetryLater(None),
        }
    }
}

/// One search page: every hit becomes a `{"id"}` message on the detail queue, and the next
/// page, if any, a message on the search queue. Sending twice is harmless (detail is
/// idempotent), so a partial send fails the whole page, to be retried whole.
pub async fn run_search(deps: &Deps, req: &SearchRequest, deadline: Deadline) -> Result<u32, JobError> {
    let page = deps.law.search(req, deadline).await?;
    let bodies: Vec<String> = page
        .items
        .iter()
        .map(|p| json!({ "id": p.id }).to_string())
        .collect();
    if page.skipped_items > 0 {
        tracing::warn!(
            skipped = page.skipped_items,
            "search: hits without an id were skipped"
        );
    }
    let failed = deps
        .outbox
        .send(QueueName::Detail, &bodies)
        .await
        .map_err(|e| JobError::Fanout(e.to_string()))?;
    if !failed.is_empty() {
        return Err(JobError::Fanout(format!(
            "{} of {} detail messages not sent",
            failed.len(),
            bodies.len()
        )));
    }
    if page.has_more(req.display.unwrap_or(crate::policy::MAX_DISPLAY)) {
        let next = serde_json::to_string(&req.next_page()).map_err(|e| JobError::Fanout(e.to_string()))?;
        let failed = deps
            .outbox
            .send(QueueName::Search, &[next])
            .await
            .map_err(|e| JobError::Fanout(e.to_string()))?;
        if !failed.is_empty() {
            return Err(JobError::Fanout("the next-page message was not sent".into()));
        }
    }
    tracing::info!(
        hits = bodies.len(),
        total = page.total,
        page = page.page,
        "search: page fanned out"
    );
    Ok(bodies.len() as u32)
}

/// One precedent: fetched and stored under `prec/{id}.json`. One that law.go.kr says does
/// not exist is recorded under `missing/{id}.json` and counts as done.
pub async fn run_detail(deps: &Deps, id: &str, deadline: Deadline) -> Result<(), JobError> {
    crate::law::check_precedent_id(id)?;
    let key = precedent_key(id).map_err(|e| JobError::Store(e.to_string()))?;
    match deps.law.detail(id, deadline).await {
        Ok(doc) => {
            let body = serde_json::to_vec(&doc).map_err(|e| JobError::Store(e.to_string()))?;
            deps.docs
                .put(&key, &body)
                .await
                .map_err(|e| JobError::Store(e.to_string()))?;
            tracing::info!(bytes = body.len(), "detail: stored");
            Ok(())
        }
        Err(LawError::NotFound) => {
            let at = crate::clock::now_millis();
            let marker = json!({ "id": id, "status": "not_found", "checkedAtMs": at }).to_string();
            deps.docs
                .put(&format!("missing/{id}.json"), marker.as_bytes())
                .await
                .map_err(|e| JobError::Store(e.to_string()))?;
            tracing::warn!("detail: law.go.kr has no such precedent; recorded under missing/");
            Ok(())
        }
        Err(e) => Err(e.into()),
    }
}

/// Runs `job` for the drainer and says how it went.
pub async fn run_job(deps: &Deps, job: &Job, deadline: Deadline) -> Outcome {
    let result = match &job.kind {
        JobKind::Search => match serde_json::from_value::<SearchRequest>(job.payload.clone()) {
            Ok(req) => run_search(deps, &req, deadline).await.map(|_| ()),
            Err(_) => Err(JobError::Law(LawError::InvalidRequest(format!(
                "stored {} payload is not a search request",
                job.kind
            )))),
        },
        JobKind::Detail => match job.payload.get("id").and_then(|v| v.as_str()) {
            Some(id) => run_detail(deps, id, deadline).await,
            None => Err(JobError::Law(LawError::InvalidRequest(format!(
                "stored {} payload has no id",
                job.kind
            )))),
        },
        // An invalid message is kept as a dead letter, never run; one redriven, and a type
        // this release does not know, goes back to the dead letters saying so.
        JobKind::Invalid | JobKind::Unknown(_) => Err(JobError::Law(LawError::InvalidRequest(format!(
            "no handler for job type {:?}",
            job.kind.as_str()
        )))),
    };
    match result {
        Ok(()) => Outcome::Done,
        // The deadline, not the upstream, stopped it: not a failure.
        Err(JobError::Law(LawError::OutOfTime { .. })) => Outcome::NotStarted { retry_in: None },
        // The gate refused before any call: not an attempt, whatever the reason. Due when the
        // gate expects room (the slot it would have granted: a cooldown's end, or behind the
        // callers ahead), or shortly when it could not say.
        Err(JobError::Law(LawError::Gate(GateError::WaitTooLong { wait, .. }))) => {
            Outcome::NotStarted { retry_in: Some(wait) }
        }
        Err(JobError::Law(LawError::Gate(GateError::Unsettled { .. } | GateError::Unavailable(_)))) => {
            Outcome::NotStarted {
                retry_in: Some(GATE_REFUSED_RETRY),
            }
        }
        Err(e) => match e.disposition() {
            Disposition::Permanent => Outcome::Dead { error: e.note() },
            Disposition::RetryLater(after) => Outcome::Retry {
                error: e.note(),
                after,
            },
        },
    }
}

/// What becomes of an SQS message once its unit of work has run: deleted (done, parked or
/// buried as a dead letter) or handed back to SQS for redelivery.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum MessageFate {
    /// Done (or recorded as not existing): the message is deleted.
    Done,
    /// Parked in the retry queue for the drainer: the message is deleted.
    Parked,
    /// Failed in a way no retry fixes: logged once, recorded as a dead letter; deleted.
    Permanent,
    /// Not finished and not parked (no time left, or Redis down): back to SQS.
    ReturnToSqs,
}

/// Decides what a failed SQS-borne job becomes: a try-later is parked in the retry queue
/// (the SQS message succeeds); a permanent failure is buried as a dead letter; if
/// neither can be written, or the invocation ran out of time, the message goes back to SQS.
pub async fn park_or_bury(deps: &Deps, job: &Job, err: JobError) -> MessageFate {
    if matches!(err, JobError::Law(LawError::OutOfTime { .. })) {
        return MessageFate::ReturnToSqs;
    }
    let note = err.note();
    let parked = match (&err, err.disposition()) {
        // Not a failure: the gate's next slot was beyond the handler's wait. Behind a
        // cluster cooldown it is due when the cooldown ends; behind other callers it is due
        // at once, for the environment that holds the slots to work off after its batch
        // (or the scheduled drainer). Never after the retry backoff.
        (JobError::Law(LawError::Gate(GateError::WaitTooLong { wait, cause, .. })), _) => {
            let due_in = match cause {
                Refusal::Cooldown { .. } => *wait,
                Refusal::Deadline | Refusal::QueueAhead => Duration::ZERO,
            };
            deps.queue.enqueue_due_in(job, due_in, note).await
        }
        (_, Disposition::RetryLater(after)) => deps.queue.enqueue(job, after, note).await,
        (_, Disposition::Permanent) => {
            tracing::error!(kind = %err_kind(&err), error = %err, "permanent failure; not retried");
            return match deps.queue.record_dead(job, note).await {
                Ok(Buried::Recorded) => MessageFate::Permanent,
                Ok(Buried::AlreadyDead) => {
                    tracing::warn!(
                        "already a dead letter: this failure was added to its history and alerted again"
                    );
                    MessageFate::Permanent
                }
                Err(e) => {
                    tracing::error!(error = %e, "could not record the dead letter; returning the message to SQS");
                    MessageFate::ReturnToSqs
                }
            };
        }
    };
    match parked {
        Ok(Enqueued::Queued { due_in }) => {
            tracing::info!(kind = %err_kind(&err), due_in_ms = due_in.as_millis() as u64, "parked in the retry queue");
            MessageFate::Parked
        }
        Ok(Enqueued::AlreadyQueued) => MessageFate::Parked,
        Ok(Enqueued::Revived { due_in }) => {
            tracing::warn!(kind = %err_kind(&err), due_in_ms = due_in.as_millis() as u64, "was a dead letter: revived with fresh attempts by this new work");
            MessageFate::Parked
        }
        Err(e) => {
            tracing::error!(error = %e, "could not park the job; returning the message to SQS");
            MessageFate::ReturnToSqs
        }
    }
}

fn err_kind(e: &JobError) -> String {
    e.note().kind
}
