//! An SQS batch in, a partial batch response out (the event source mapping must enable
//! `ReportBatchItemFailures`).
//!
//! Messages are handled one at a time (the gate serializes calls anyway), each in its own
//! span. A message is reported as a batch item failure, and so redelivered by SQS, only
//! when no time was left to start it, or when its failure could be neither parked nor
//! recorded. Everything else succeeds: done, parked in the retry queue, or recorded as a
//! dead letter (a permanent failure, or a body that is not a valid message: retrying
//! either cannot help, and the dead letter keeps it visible and redrivable).

use aws_lambda_events::event::sqs::{BatchItemFailure, SqsBatchResponse, SqsEvent};
use serde::{Deserialize, Serialize};
use tracing::Instrument;

use super::Deps;
use super::jobs::{self, MessageFate};
use crate::deadline::Deadline;
use crate::law::SearchRequest;
use crate::mirror::runs::IdState;
use crate::policy::MIN_CALL_WINDOW;

/// Which function's messages a batch holds.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum MessageKind {
    Search,
    Detail,
}

/// `{"id":"<판례일련번호>"}`, and from a sync run's search page, what the page saw:
/// `{"id","run","listing","firstSeenAt","reason","refresh"?}`.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct DetailMessage {
    pub id: String,
    /// The sync run that listed it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub run: Option<crate::mirror::runs::RunId>,
    /// The search hit's metadata, kept in the envelope.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub listing: Option<crate::law::PrecedentSummary>,
    /// The first time a search returned it, RFC 3339 UTC.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub first_seen_at: Option<String>,
    /// Why the page sent it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reason: Option<crate::mirror::held::FetchReason>,
    /// Fetch it even when held unchanged.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub refresh: bool,
}

impl DetailMessage {
    /// A bare `{"id"}`.
    pub fn id(id: &str) -> Self {
        Self {
            id: id.to_owned(),
            ..Self::default()
        }
    }

    /// Checks every field: the id, the listing's id (it must be the same precedent) and
    /// the instant. Errors name the field, never echo its value.
    pub fn check(&self) -> Result<(), crate::law::LawError> {
        crate::law::check_precedent_id(&self.id)?;
        let invalid = |m: &str| Err(crate::law::LawError::InvalidRequest(m.to_owned()));
        if let Some(l) = &self.listing
            && l.id != self.id
        {
            return invalid("listing.판례일련번호 must be the message's id");
        }
        if let Some(t) = &self.first_seen_at
            && crate::mirror::envelope::parse_rfc3339_millis(t).is_none()
        {
            return invalid("firstSeenAt must be an instant as YYYY-MM-DDTHH:MM:SS.mmmZ");
        }
        Ok(())
    }
}

/// A message body, parsed as its function reads it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Message {
    Search(SearchRequest),
    Detail(DetailMessage),
    /// A schedule fired: its run starts.
    Schedule(super::schedule::Firing),
    /// A backfill to plan (or go on with).
    Backfill(super::backfill::BackfillRequest),
}

const DETAIL_SHAPE: &str = r#"{"id":"<판례일련번호>","run"?,"listing"?,"firstSeenAt"?,"reason"?,"refresh"?}"#;
const SEARCH_SHAPE: &str = r#"{"from":"YYYYMMDD","to":"YYYYMMDD" | "all":true,"query"?,"page"?,"display"?,"run"?,"refresh"?} or {"schedule":"daily"|"sweep","at":"<RFC 3339 instant>"} or {"dayBefore":"<RFC 3339 instant>"} or {"backfill":{"from":"YYYYMMDD","to":"YYYYMMDD","again"?}}"#;

/// Why a message body is not a valid message: the expected shape and serde's position, or
/// what is wrong with a value, never the body nor the value itself.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum InvalidMessage {
    /// Not JSON of the expected shape.
    #[error("invalid message body ({category} at line {line} column {column}); expected {expected}")]
    Shape {
        /// serde's category: syntax error, unexpected data, truncated, ...
        category: &'static str,
        line: usize,
        column: usize,
        /// The shape the function reads.
        expected: &'static str,
    },
    /// Well-formed, with a value that cannot be used (an id, a date).
    #[error("invalid message body: {0}")]
    Value(crate::law::LawError),
}

/// Parses a message body as the `kind` function does before handling it. The error is a
/// clear reason (the expected shape and serde's position), never the body itself.
///
/// Values are checked here too, so a message with a bad id or date is kept as a scrubbed
/// dead letter and never becomes a job, a span field or a request.
pub fn parse_message(kind: MessageKind, body: &str) -> Result<Message, InvalidMessage> {
    match kind {
        MessageKind::Detail => {
            let msg: DetailMessage = parse(body, DETAIL_SHAPE)?;
            msg.check().map_err(invalid_value)?;
            Ok(Message::Detail(msg))
        }
        MessageKind::Search => {
            let backfill =
                serde_json::from_str::<serde_json::Value>(body).is_ok_and(|v| v.get("backfill").is_some());
            if backfill {
                let msg: super::backfill::BackfillMessage = parse(body, SEARCH_SHAPE)?;
                msg.backfill.windows().map_err(invalid_value)?;
                return Ok(Message::Backfill(msg.backfill));
            }
            let scheduled =
                serde_json::from_str::<serde_json::Value>(body).is_ok_and(|v| v.get("schedule").is_some());
            if scheduled {
                let firing: super::schedule::Firing = parse(body, SEARCH_SHAPE)?;
                firing.at_ms().map_err(invalid_value)?;
                return Ok(Message::Schedule(firing));
            }
            let req = parse_search(body, SEARCH_SHAPE)?;
            req.params().map_err(invalid_value)?;
            Ok(Message::Search(req))
        }
    }
}

/// A well-formed message whose value cannot be used: logged (the error never holds the
/// value) and returned as the dead letter's reason.
fn invalid_value(e: crate::law::LawError) -> InvalidMessage {
    let reason = InvalidMessage::Value(e);
    tracing::error!(reason = %reason, "invalid message body; kept as a dead letter, not retried");
    reason
}

/// What happened to each message of a batch, for the CLI and the tests.
#[derive(Debug, Clone, Default, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct BatchSummary {
    pub done: u32,
    pub parked: u32,
    pub permanent: u32,
    pub invalid: u32,
    pub returned: u32,
    /// Retry-queue entries this invocation worked off after its batch.
    pub drained: u32,
}

/// Handles one SQS batch.
pub async fn handle_batch(
    deps: &Deps,
    kind: MessageKind,
    event: SqsEvent,
    deadline: Deadline,
) -> (SqsBatchResponse, BatchSummary) {
    // A handler sleeps for the slot right after the call in flight at most; a message whose
    // slot is further away is parked for the drainer rather than billed for the wait.
    let deps = &Deps {
        law: deps.law.clone().with_gate_wait(deps.cfg.handler_max_wait),
        ..deps.clone()
    };
    let mut response = SqsBatchResponse::default();
    let mut summary = BatchSummary::default();
    for record in event.records {
        let Some(message_id) = record.message_id.clone() else {
            tracing::error!("SQS record without a messageId: it cannot be reported, only logged");
            continue;
        };
        let span = tracing::info_span!("sqs.message", message_id = %message_id, precedent_id = tracing::field::Empty);
        let fail = |response: &mut SqsBatchResponse| {
            let mut item = BatchItemFailure::default();
            item.item_identifier = message_id.clone();
            response.batch_item_failures.push(item);
        };
        if !deadline.allows(MIN_CALL_WINDOW) {
            let _e = span.enter();
            tracing::warn!("not started: the invocation's deadline is too close; back to SQS");
            summary.returned += 1;
            fail(&mut response);
            continue;
        }
        let body = record.body.as_deref().unwrap_or("");
        let handled = handle_one(deps, kind, &message_id, body, deadline)
            .instrument(span)
            .await;
        match handled {
            Handled::Valid(MessageFate::Done) => summary.done += 1,
            Handled::Valid(MessageFate::Parked) => summary.parked += 1,
            Handled::Valid(MessageFate::Permanent) => summary.permanent += 1,
            Handled::Invalid(MessageFate::ReturnToSqs) | Handled::Valid(MessageFate::ReturnToSqs) => {
                summary.returned += 1;
                fail(&mut response);
            }
            Handled::Invalid(_) => summary.invalid += 1,
        }
    }
    // The environment that got its slots goes on with the work the others parked, rather
    // than leave it to the scheduled drainer a minute later. One that had to park or hand
    // back a message of its own would find the gate busy or Redis down: it stops here.
    if deps.cfg.handlers_drain
        && summary.parked == 0
        && summary.returned == 0
        && deadline.allows(MIN_CALL_WINDOW)
    {
        summary.drained = drain_after_batch(deps, deadline).await;
    }
    (response, summary)
}

/// Runs [`Deps::drain_inline`] when entries are due; returns how many it finished.
///
/// The queue's stats come first, before the runner lock: one round trip answers "nothing
/// due" for most batches, where taking the lock, claiming nothing and releasing it would
/// cost three. When entries are due, the stats are one round trip more than needed.
async fn drain_after_batch(deps: &Deps, deadline: Deadline) -> u32 {
    match deps.queue.stats().await {
        Ok(s) if s.due_now > 0 => {}
        Ok(_) => return 0,
        Err(e) => {
            tracing::warn!(error = %e, "retry queue unreadable after the batch; not draining");
            return 0;
        }
    }
    match deps.drain_inline(deadline).await {
        Ok(crate::drainer::DrainReport::Ran { passes }) => {
            let done = passes.iter().map(|p| p.succeeded).sum();
            tracing::info!(drained = done, "worked off parked jobs after the batch");
            done
        }
        Ok(crate::drainer::DrainReport::Busy) => 0,
        Err(e) => {
            tracing::warn!(error = %e, "draining after the batch stopped");
            0
        }
    }
}

enum Handled {
    /// A valid message; what its unit of work made of it.
    Valid(MessageFate),
    /// Not a valid message; how recording it went.
    Invalid(MessageFate),
}

/// Most characters of an invalid body kept with its dead letter.
const INVALID_BODY_KEPT: usize = 1000;

/// Keeps an invalid body as a dead letter named by its message id (the key scrubbed, cut
/// to a bounded length), so it is neither retried nor lost.
async fn record_invalid(deps: &Deps, message_id: &str, body: &str, reason: InvalidMessage) -> MessageFate {
    let kept: String = deps
        .law
        .key()
        .scrub(body)
        .chars()
        .take(INVALID_BODY_KEPT)
        .collect();
    let job = crate::queue::Job::new(
        crate::queue::JobKind::Invalid,
        message_id,
        serde_json::json!({ "body": kept }),
    );
    let note = crate::queue::ErrorNote::now("invalid_message", reason.to_string(), None);
    match deps.queue.record_dead(&job, note).await {
        Ok(_) => MessageFate::Permanent,
        Err(e) => {
            tracing::error!(error = %e, "could not record the invalid message; returning it to SQS");
            MessageFate::ReturnToSqs
        }
    }
}

async fn handle_one(
    deps: &Deps,
    kind: MessageKind,
    message_id: &str,
    body: &str,
    deadline: Deadline,
) -> Handled {
    let msg = match parse_message(kind, body) {
        Ok(m) => m,
        Err(reason) => return Handled::Invalid(record_invalid(deps, message_id, body, reason).await),
    };
    // A backfill window's work met beside another run's goes back to wait its turn.
    let backfill_run = match &msg {
        Message::Detail(m) => m.run.as_ref(),
        Message::Search(r) => r.run.as_ref(),
        Message::Schedule(_) | Message::Backfill(_) => None,
    };
    if super::backfill::yields(deps, backfill_run).await {
        let queue = match kind {
            MessageKind::Search => super::outbox::QueueName::Search,
            MessageKind::Detail => super::outbox::QueueName::Detail,
        };
        let bodies = [body.to_owned()];
        return match deps
            .outbox
            .send_later(queue, &bodies, super::backfill::yield_for())
            .await
        {
            Ok(failed) if failed.is_empty() => {
                tracing::info!("backfill work gives way to another run; sent back to wait");
                Handled::Valid(MessageFate::Done)
            }
            _ => Handled::Valid(MessageFate::ReturnToSqs),
        };
    }
    match msg {
        Message::Backfill(req) => {
            let job = crate::queue::Job::new(
                crate::queue::JobKind::Search,
                format!("backfill:{}-{}", req.from, req.to),
                serde_json::to_value(super::backfill::BackfillMessage {
                    backfill: req.clone(),
                })
                .unwrap_or_default(),
            );
            match super::backfill::start(deps, &req).await {
                Ok(status) => {
                    tracing::info!(
                        windows = status.windows,
                        done = status.done,
                        in_flight = status.in_flight,
                        "backfill: planned"
                    );
                    Handled::Valid(MessageFate::Done)
                }
                Err(e) => Handled::Valid(jobs::park_or_bury(deps, &job, e.into()).await),
            }
        }
        Message::Detail(msg) => {
            tracing::Span::current().record("precedent_id", msg.id.as_str());
            let job = crate::queue::Job::detail_message(&msg);
            match jobs::run_detail(deps, &msg, deadline).await {
                Ok(_) => Handled::Valid(MessageFate::Done),
                Err(e) => {
                    let fate = jobs::park_or_bury(deps, &job, e).await;
                    let state = match fate {
                        MessageFate::Parked => Some(IdState::Parked),
                        MessageFate::Permanent => Some(IdState::Dead),
                        MessageFate::Done | MessageFate::ReturnToSqs => None,
                    };
                    if let Some(state) = state {
                        jobs::mark_run_logged(deps, msg.run.as_ref(), &msg.id, state).await;
                    }
                    Handled::Valid(fate)
                }
            }
        }
        Message::Search(req) => {
            let job = crate::queue::Job::search(&req);
            match jobs::run_search(deps, &req, deadline).await {
                Ok(_) => Handled::Valid(MessageFate::Done),
                Err(e) => {
                    let fate = jobs::park_or_bury(deps, &job, e).await;
                    if fate == MessageFate::Permanent {
                        jobs::page_buried(deps, &req).await;
                    }
                    Handled::Valid(fate)
                }
            }
        }
        Message::Schedule(firing) => {
            let job = super::schedule::firing_job(&firing);
            match super::schedule::start(deps, &firing).await {
                Ok(_) => Handled::Valid(MessageFate::Done),
                Err(e) => Handled::Valid(jobs::park_or_bury(deps, &job, e).await),
            }
        }
    }
}

/// A search message: a window, or the daily schedule's `{"dayBefore"}` resolved to one.
fn parse_search(body: &str, expected: &'static str) -> Result<SearchRequest, InvalidMessage> {
    let daily = serde_json::from_str::<serde_json::Value>(body).is_ok_and(|v| v.get("dayBefore").is_some());
    if !daily {
        return parse(body, expected);
    }
    let msg: crate::law::schedule::DayBefore = parse(body, expected)?;
    msg.window().map_err(invalid_value)
}

/// Parses a message body; on failure, logs and returns a clear reason (the expected shape
/// and serde's position, never the body itself).
fn parse<T: serde::de::DeserializeOwned>(body: &str, expected: &'static str) -> Result<T, InvalidMessage> {
    serde_json::from_str(body).map_err(|e| {
        let reason = InvalidMessage::Shape {
            category: crate::law::model::category(&e),
            line: e.line(),
            column: e.column(),
            expected,
        };
        tracing::error!(reason = %reason, "invalid message body; kept as a dead letter, not retried");
        reason
    })
}
