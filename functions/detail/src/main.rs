//! The `detail` Lambda function: SQS batches of detail messages in, a partial batch response out.
//! Wiring only; the work is [`lawsync::lambda::sqs_invocation`].

use std::process::ExitCode;

use aws_lambda_events::event::sqs::SqsEvent;
use lambda_runtime::{Error, LambdaEvent, service_fn};
use lawsync::app::sqs::MessageKind;

#[tokio::main]
async fn main() -> ExitCode {
    lawsync::telemetry::init_lambda();
    let Some(started) = lawsync::lambda::start("detail", false).await else {
        return ExitCode::FAILURE;
    };
    let started = &started;
    let run = lambda_runtime::run(service_fn(move |event: LambdaEvent<SqsEvent>| async move {
        let (batch, deadline) = (event.payload, event.context.deadline);
        let response = lawsync::lambda::sqs_invocation(started, MessageKind::Detail, batch, deadline).await;
        Ok::<_, Error>(response)
    }));
    lawsync::lambda::exit(run.await)
}
