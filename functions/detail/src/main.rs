//! The `detail` Lambda function: SQS batches of detail messages in, a partial batch response out.
//! Wiring only; the work is [`lawsync::app::sqs::handle_batch`].

use std::sync::Arc;
use std::time::SystemTime;

use aws_lambda_events::event::sqs::{SqsBatchResponse, SqsEvent};
use lambda_runtime::{Error, LambdaEvent, service_fn};
use lawsync::Deadline;
use lawsync::app::Deps;
use lawsync::app::sqs::{MessageKind, handle_batch};
use lawsync::metrics::Metrics;

#[tokio::main]
async fn main() -> Result<(), Error> {
    lawsync::telemetry::init();
    let (deps, _sdk) = Deps::from_env().await?;
    let metrics = Arc::new(Metrics::new(&deps.cfg.app_env, "detail"));
    let deps = deps.observed(metrics.clone()).observed_mirror(metrics.clone());
    let (deps, metrics) = (&deps, &metrics);
    lambda_runtime::run(service_fn(move |event: LambdaEvent<SqsEvent>| async move {
        let deadline = Deadline::from_epoch_millis(event.context.deadline, SystemTime::now());
        let (response, summary): (SqsBatchResponse, _) =
            handle_batch(deps, MessageKind::Detail, event.payload, deadline).await;
        tracing::info!(?summary, "batch done");
        metrics.batch(&summary);
        metrics.flush();
        Ok::<_, Error>(response)
    }))
    .await
}
