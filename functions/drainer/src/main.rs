//! The `drainer` Lambda function: started every minute by EventBridge, it drains the retry
//! queue in passes with a fixed delay until its deadline, one drainer cluster-wide.
//! Wiring only; the work is [`lawsync::app::Deps::drain`].

use std::sync::Arc;
use std::time::SystemTime;

use lambda_runtime::{Error, LambdaEvent, service_fn};
use lawsync::Deadline;
use lawsync::app::Deps;
use lawsync::metrics::Metrics;

#[tokio::main]
async fn main() -> Result<(), Error> {
    lawsync::telemetry::init();
    let (deps, sdk) = Deps::from_env().await?;
    let alerts = deps.alerts(&sdk).await?;
    let metrics = Arc::new(Metrics::new(&deps.cfg.app_env, "drainer"));
    let deps = deps.observed(metrics.clone()).observed_mirror(metrics.clone());
    let (deps, alerts, metrics) = (&deps, &*alerts, &metrics);
    // The scheduled event's content carries nothing the drainer needs.
    lambda_runtime::run(service_fn(
        move |event: LambdaEvent<serde_json::Value>| async move {
            let deadline = Deadline::from_epoch_millis(event.context.deadline, SystemTime::now());
            let report = deps.drain(alerts, deadline, None).await;
            // The queue as the run left it, for the depth and dead-letter alarms.
            let stats = deps.queue.stats().await.ok();
            if let Ok(r) = &report {
                metrics.drain(r, stats.as_ref());
            }
            metrics.flush();
            Ok::<_, Error>(serde_json::to_value(report?)?)
        },
    ))
    .await
}
