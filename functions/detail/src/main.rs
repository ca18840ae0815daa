//! The `detail` Lambda function: SQS batches of detail messages in, a partial batch response out.
//! Wiring only; the work is [`lawsync::app::sqs::handle_batch`].

use std::process::ExitCode;
use std::time::SystemTime;

use aws_lambda_events::event::sqs::{SqsBatchResponse, SqsEvent};
use lambda_runtime::{Error, LambdaEvent, service_fn};
use lawsync::Deadline;
use lawsync::app::sqs::{MessageKind, handle_batch};

#[tokio::main]
async fn main() -> ExitCode {
    lawsync::telemetry::init_lambda();
    let Some(started) = lawsync::lambda::start("detail", false).await else {
        return ExitCode::FAILURE;
    };
    let (deps, metrics) = (&started.deps, &started.metrics);
    let run = lambda_runtime::run(service_fn(move |event: LambdaEvent<SqsEvent>| async move {
        // A SIGTERM waits (within its grace) for the invocation to write its metrics line.
        let _busy = deps.shutdown.as_ref().map(lawsync::lambda::Shutdown::busy);
        let deadline = Deadline::from_epoch_millis(event.context.deadline, SystemTime::now());
        let (response, summary): (SqsBatchResponse, _) =
            handle_batch(deps, MessageKind::Detail, event.payload, deadline).await;
        tracing::info!(?summary, "batch done");
        metrics.batch(&summary);
        metrics.flush();
        Ok::<_, Error>(response)
    }));
    lawsync::lambda::exit(run.await)
}
