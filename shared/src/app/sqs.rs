//! An SQS batch in, a partial batch response out (the event source mapping must enable
//! `ReportBatchItemFailures`).
//!
//! Messages are handled one at a time (the gate serializes calls anyway), each in its own
//! span. A message is reported as a batch item failure, and so redelivered by SQS (and
//! moved to the queue's dead-letter queue after its receive limit), when its body is not
//! a valid message, when no time was left to start it, or when its failure could be
//! neither parked nor recorded. Everything else succeeds: done, parked in the retry queue,
//! or recorded as a permanent failure.

use aws_lambda_events::event::sqs::{BatchItemFailure, SqsBatchResponse, SqsEvent};
use serde::Deserialize;
use tracing::Instrument;

use super::Deps;
use super::jobs::{self, Settlement};
use crate::deadline::Deadline;
use crate::law::SearchRequest;
use crate::policy::MIN_CALL_WINDOW;

/// Which function's messages a batch holds.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum MessageKind {
    Search,
    Detail,
}

/// `{"id":"<판례일련번호>"}`.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct DetailMessage {
    pub id: String,
}

/// What happened to each message of a batch, for the CLI and the tests.
#[derive(Debug, Clone, Default, PartialEq, Eq, serde::Serialize)]
pub struct BatchSummary {
    pub done: u32,
    pub parked: u32,
    pub permanent: u32,
    pub invalid: u32,
    pub returned: u32,
}

/// Handles one SQS batch.
pub async fn handle_batch(
    deps: &Deps,
    kind: MessageKind,
    event: SqsEvent,
    deadline: Deadline,
) -> (SqsBatchResponse, BatchSummary) {
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
        let settled = handle_one(deps, kind, record.body.as_deref().unwrap_or(""), deadline)
            .instrument(span)
            .await;
        match settled {
            Handled::Settled(Settlement::Done) => summary.done += 1,
            Handled::Settled(Settlement::Parked) => summary.parked += 1,
            Handled::Settled(Settlement::Permanent) => summary.permanent += 1,
            Handled::Settled(Settlement::ReturnToSqs) => {
                summary.returned += 1;
                fail(&mut response);
            }
            Handled::Invalid => {
                summary.invalid += 1;
                fail(&mut response);
            }
        }
    }
    (response, summary)
}

enum Handled {
    Settled(Settlement),
    Invalid,
}

async fn handle_one(deps: &Deps, kind: MessageKind, body: &str, deadline: Deadline) -> Handled {
    match kind {
        MessageKind::Detail => {
            let msg: DetailMessage = match parse(body, r#"{"id":"<판례일련번호>"}"#) {
                Some(m) => m,
                None => return Handled::Invalid,
            };
            tracing::Span::current().record("precedent_id", msg.id.as_str());
            let job = jobs::detail_job(&msg.id);
            match jobs::run_detail(deps, &msg.id, deadline).await {
                Ok(()) => Handled::Settled(Settlement::Done),
                Err(e) => Handled::Settled(jobs::settle_failure(deps, &job, e).await),
            }
        }
        MessageKind::Search => {
            let req: SearchRequest = match parse(
                body,
                r#"{"from":"YYYYMMDD","to":"YYYYMMDD","query"?,"page"?,"display"?}"#,
            ) {
                Some(r) => r,
                None => return Handled::Invalid,
            };
            let job = jobs::search_job(&req);
            match jobs::run_search(deps, &req, deadline).await {
                Ok(_) => Handled::Settled(Settlement::Done),
                Err(e) => Handled::Settled(jobs::settle_failure(deps, &job, e).await),
            }
        }
    }
}

/// Parses a message body, logging a clear reason (the expected shape and serde's position,
/// never the body itself) when it is not one.
fn parse<T: serde::de::DeserializeOwned>(body: &str, expected: &str) -> Option<T> {
    match serde_json::from_str(body) {
        Ok(v) => Some(v),
        Err(e) => {
            tracing::error!(expected, line = e.line(), column = e.column(), problem = %crate::law::model::category(&e), "invalid message body; back to SQS (it reaches the dead-letter queue after its receive limit)");
            None
        }
    }
}
