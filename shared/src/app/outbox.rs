//! [`Outbox`]: where the functions send follow-up messages (SQS in AWS).

use crate::law::BoxFuture;

/// Which of the two queues a message goes to.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum QueueName {
    /// `SEARCH_QUEUE_URL`: `{"from","to",...}` pages.
    Search,
    /// `DETAIL_QUEUE_URL`: `{"id"}` messages.
    Detail,
}

/// Why messages could not be sent. No queue URL or message body in it.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum OutboxError {
    #[error("{0} is not set; this function cannot send follow-up messages")]
    NotConfigured(&'static str),
    #[error("SQS refused the batch ({0})")]
    Sqs(String),
}

/// Sends message bodies to a queue. Returns the indexes of the bodies that were not sent,
/// so the caller can tell an all-or-nothing failure from a partial one.
pub trait Outbox: Send + Sync + std::fmt::Debug {
    fn send<'a>(
        &'a self,
        queue: QueueName,
        bodies: &'a [String],
    ) -> BoxFuture<'a, Result<Vec<usize>, OutboxError>>;

    /// Sends bodies that become visible only after `delay` (SQS `DelaySeconds`, at most 15
    /// minutes): work handed back to wait its turn. An outbox without delays sends them at
    /// once, to the back of the queue.
    fn send_later<'a>(
        &'a self,
        queue: QueueName,
        bodies: &'a [String],
        delay: std::time::Duration,
    ) -> BoxFuture<'a, Result<Vec<usize>, OutboxError>> {
        let _ = delay;
        self.send(queue, bodies)
    }
}

/// SQS' longest `DelaySeconds`.
const SQS_MAX_DELAY_SECONDS: u64 = 900;

/// SQS `SendMessageBatch`, ten messages a call (SQS' limit), checking per-entry failures.
#[derive(Debug, Clone)]
pub struct SqsOutbox {
    client: aws_sdk_sqs::Client,
    search_url: Option<String>,
    detail_url: Option<String>,
}

/// SQS' most messages per `SendMessageBatch`.
const SQS_BATCH: usize = 10;

impl SqsOutbox {
    pub fn new(sdk: &aws_config::SdkConfig, search_url: Option<String>, detail_url: Option<String>) -> Self {
        Self {
            client: aws_sdk_sqs::Client::new(sdk),
            search_url,
            detail_url,
        }
    }
}

impl Outbox for SqsOutbox {
    fn send<'a>(
        &'a self,
        queue: QueueName,
        bodies: &'a [String],
    ) -> BoxFuture<'a, Result<Vec<usize>, OutboxError>> {
        Box::pin(self.send_batches(queue, bodies, None))
    }

    fn send_later<'a>(
        &'a self,
        queue: QueueName,
        bodies: &'a [String],
        delay: std::time::Duration,
    ) -> BoxFuture<'a, Result<Vec<usize>, OutboxError>> {
        let seconds = delay.as_secs().clamp(1, SQS_MAX_DELAY_SECONDS) as i32;
        Box::pin(self.send_batches(queue, bodies, Some(seconds)))
    }
}

impl SqsOutbox {
    async fn send_batches(
        &self,
        queue: QueueName,
        bodies: &[String],
        delay_seconds: Option<i32>,
    ) -> Result<Vec<usize>, OutboxError> {
        {
            let url = match queue {
                QueueName::Search => self
                    .search_url
                    .as_deref()
                    .ok_or(OutboxError::NotConfigured("SEARCH_QUEUE_URL"))?,
                QueueName::Detail => self
                    .detail_url
                    .as_deref()
                    .ok_or(OutboxError::NotConfigured("DETAIL_QUEUE_URL"))?,
            };
            let mut failed = Vec::new();
            for (chunk_no, chunk) in bodies.chunks(SQS_BATCH).enumerate() {
                let mut entries = Vec::with_capacity(chunk.len());
                for (i, body) in chunk.iter().enumerate() {
                    let entry = aws_sdk_sqs::types::SendMessageBatchRequestEntry::builder()
                        .id(i.to_string())
                        .message_body(body)
                        .set_delay_seconds(delay_seconds)
                        .build()
                        .map_err(|_| OutboxError::Sqs("entry could not be built".into()))?;
                    entries.push(entry);
                }
                let out = self
                    .client
                    .send_message_batch()
                    .queue_url(url)
                    .set_entries(Some(entries))
                    .send()
                    .await
                    .map_err(|e| OutboxError::Sqs(crate::aws::aws_code(&e)))?;
                for f in out.failed() {
                    if let Ok(i) = f.id().parse::<usize>() {
                        failed.push(chunk_no * SQS_BATCH + i);
                    }
                }
            }
            Ok(failed)
        }
    }
}
