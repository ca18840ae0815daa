//! The `drainer` Lambda function: started every minute by EventBridge Scheduler, it drains
//! the retry queue in passes until its deadline, one drainer cluster-wide.
//! Wiring only; the work is [`lawsync::app::Deps::drain`].

use std::process::ExitCode;
use std::time::SystemTime;

use lambda_runtime::{Error, LambdaEvent, service_fn};
use lawsync::Deadline;

#[tokio::main]
async fn main() -> ExitCode {
    lawsync::telemetry::init_lambda();
    let Some(started) = lawsync::lambda::start("drainer", true).await else {
        return ExitCode::FAILURE;
    };
    let Some(alerts) = started.alerts.as_deref() else {
        return ExitCode::FAILURE;
    };
    let (deps, metrics) = (&started.deps, &started.metrics);
    // The scheduled event's content carries nothing the drainer needs.
    let run = lambda_runtime::run(service_fn(
        move |event: LambdaEvent<serde_json::Value>| async move {
            // A SIGTERM waits (within its grace) for the invocation to write its metrics line.
            let _busy = deps.shutdown.as_ref().map(lawsync::lambda::Shutdown::busy);
            let deadline = Deadline::from_epoch_millis(event.context.deadline, SystemTime::now());
            let report = deps.drain(alerts, deadline, None).await;
            // The queue as the run left it, for the depth and dead-letter alarms.
            let stats = deps.queue.stats().await.ok();
            if let Ok(r) = &report {
                metrics.drain(r, stats.as_ref());
            }
            // And whether law.go.kr refuses the key (the key-health circuit's alarm).
            if let Ok(circuit) = deps.law.health().status().await {
                metrics.key_circuit(circuit.is_some());
            }
            metrics.flush();
            Ok::<_, Error>(serde_json::to_value(report?)?)
        },
    ));
    lawsync::lambda::exit(run.await)
}
