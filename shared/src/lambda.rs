//! What the three functions share about being run by Lambda, beside `lambda_runtime`'s
//! invocation loop: a failed cold start reported to the Runtime API's `init/error` (so
//! Lambda shows the reason, not "Runtime exited"), and a graceful shutdown.
//!
//! # Shutdown
//! Lambda sends a runtime SIGTERM before it shuts its environment down only when an
//! extension is registered; [`Shutdown::install`] registers an internal one that subscribes
//! to no events (as `lambda_runtime`'s own helper does), and on SIGTERM (or SIGINT) sets the
//! stop signal the drainer reads ([`crate::drainer::DrainHooks::stop`]): no new job starts,
//! the jobs not started go back to the queue unchanged, a job whose handler has not returned
//! [`crate::policy::SHUTDOWN_JOB_GRACE`] later is cut off and its entry handed back too, and
//! the single-runner lock is released. The process waits up to [`SHUTDOWN_GRACE`] for the
//! runs and invocations in progress to end, then exits. What is still held then (a Redis
//! slower than the grace) expires on its own: a lease [`crate::policy::LEASE_MARGIN`] after
//! the invocation's deadline, as after a crash.
//!
//! Nothing here prints a secret: errors are the [`crate::app::StartupError`] texts, which
//! name variables, never values.

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use http_body_util::{BodyExt, Full};
use hyper::body::Bytes;
use hyper_util::rt::TokioIo;
use tokio::sync::{Notify, watch};

pub use crate::policy::SHUTDOWN_GRACE;

/// The Runtime API's address, `AWS_LAMBDA_RUNTIME_API` (`host:port`), or `None` outside
/// Lambda.
pub fn runtime_api() -> Option<String> {
    std::env::var("AWS_LAMBDA_RUNTIME_API")
        .ok()
        .filter(|v| !v.trim().is_empty())
}

/// A failure talking to the Runtime API (its own address is not a secret).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("Lambda Runtime API {what}: {reason}")]
pub struct RuntimeApiError {
    pub what: &'static str,
    pub reason: String,
}

/// One request to the Runtime API on a connection of its own: the status, the headers
/// asked for (by lowercase name) and the body.
async fn call(
    api: &str,
    method: &str,
    path: &str,
    headers: &[(&str, &str)],
    body: Vec<u8>,
    want: &[&str],
) -> Result<(u16, Vec<Option<String>>, Bytes), String> {
    let stream = tokio::net::TcpStream::connect(api)
        .await
        .map_err(|e| format!("cannot connect to {api} ({})", e.kind()))?;
    let (mut send, conn) = hyper::client::conn::http1::handshake(TokioIo::new(stream))
        .await
        .map_err(|e| format!("handshake with {api} failed ({e})"))?;
    tokio::spawn(conn);
    let mut req = hyper::Request::builder()
        .method(method)
        .uri(path)
        .header("host", api)
        .header("content-type", "application/json");
    for (k, v) in headers {
        req = req.header(*k, *v);
    }
    let req = req
        .body(Full::new(Bytes::from(body)))
        .map_err(|e| format!("request not built ({e})"))?;
    let resp = send
        .send_request(req)
        .await
        .map_err(|e| format!("{method} {path} failed ({e})"))?;
    let status = resp.status().as_u16();
    let got = want
        .iter()
        .map(|name| {
            resp.headers()
                .get(*name)
                .and_then(|v| v.to_str().ok())
                .map(str::to_owned)
        })
        .collect();
    let body = resp
        .into_body()
        .collect()
        .await
        .map_err(|e| format!("{method} {path}: body unreadable ({e})"))?
        .to_bytes();
    Ok((status, got, body))
}

/// Reports a failed cold start to `init/error` with the error type
/// `Runtime.InitError` (Lambda's own for a failed init) and `message` (the cold start's
/// error text, which names what to fix and no secret). Bounded by two seconds: a Runtime
/// API that does not answer must not hold the process up, since the error is logged too.
pub async fn report_init_error(message: &str) -> Result<(), RuntimeApiError> {
    let fail = |reason: String| RuntimeApiError {
        what: "init/error",
        reason,
    };
    let api = runtime_api().ok_or_else(|| fail("AWS_LAMBDA_RUNTIME_API is not set".into()))?;
    let body = serde_json::json!({
        "errorType": "Runtime.InitError",
        "errorMessage": message,
        "stackTrace": [],
    });
    let sent = tokio::time::timeout(
        Duration::from_secs(2),
        call(
            &api,
            "POST",
            "/2018-06-01/runtime/init/error",
            &[("lambda-runtime-function-error-type", "Runtime.InitError")],
            body.to_string().into_bytes(),
            &[],
        ),
    )
    .await
    .map_err(|_| fail("no answer within 2 s".into()))?
    .map_err(fail)?;
    match sent.0 {
        200..=299 => Ok(()),
        s => Err(fail(format!("answered {s}"))),
    }
}

/// Runs a cold start: its value, or, on failure, the error logged (as `error`), reported to
/// `init/error` when a Runtime API is there, and `None`: the caller exits non-zero, and
/// Lambda shows the message with the init failure.
pub async fn cold_start<T, E: std::fmt::Display>(start: impl Future<Output = Result<T, E>>) -> Option<T> {
    match start.await {
        Ok(v) => Some(v),
        Err(e) => {
            let message = format!("cold start failed: {e}");
            tracing::error!(error = %e, "cold start failed");
            if runtime_api().is_some()
                && let Err(r) = report_init_error(&message).await
            {
                tracing::warn!(error = %r, "the cold start's failure was not reported to Lambda");
            }
            None
        }
    }
}

/// The process's exit status after `lambda_runtime::run`, which returns only on a
/// failure of the Runtime API itself (logged here).
pub fn exit<E: std::fmt::Display>(run: Result<(), E>) -> std::process::ExitCode {
    match run {
        Ok(()) => std::process::ExitCode::SUCCESS,
        Err(e) => {
            tracing::error!(error = %e, "the Lambda runtime loop failed");
            std::process::ExitCode::FAILURE
        }
    }
}

/// What a function's cold start built.
pub struct Started {
    /// With the metrics observing it and the shutdown signal installed.
    pub deps: crate::app::Deps,
    pub metrics: Arc<crate::metrics::Metrics>,
    pub sdk: aws_config::SdkConfig,
    /// The dead-letter alert target, when asked for (the drainer).
    pub alerts: Option<Box<dyn crate::alert::AlertSink>>,
}

impl std::fmt::Debug for Started {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Started")
            .field("deps", &self.deps)
            .field("alerts", &self.alerts.is_some())
            .finish_non_exhaustive()
    }
}

/// The cold start of `function` (`search`, `detail`, `drainer`): the dependencies from the
/// environment, its metrics (with `AWS_LAMBDA_FUNCTION_VERSION`), the alert target when
/// `alerts`, then the graceful shutdown. `None` when it failed: the reason is logged and
/// reported to `init/error`, and the caller exits non-zero.
pub async fn start(function: &'static str, alerts: bool) -> Option<Started> {
    let started = cold_start(async {
        let (deps, sdk) = crate::app::Deps::from_env().await?;
        let mut metrics = crate::metrics::Metrics::new(&deps.cfg.app_env, function);
        if let Ok(v) = std::env::var("AWS_LAMBDA_FUNCTION_VERSION") {
            metrics = metrics.with_version(v);
        }
        let metrics = Arc::new(metrics);
        let deps = deps.observed(metrics.clone()).observed_mirror(metrics.clone());
        let alerts = if alerts {
            Some(deps.alerts(&sdk).await?)
        } else {
            None
        };
        Ok::<_, crate::app::StartupError>(Started {
            deps,
            metrics,
            sdk,
            alerts,
        })
    })
    .await?;
    let shutdown = Shutdown::new();
    if let Err(e) = shutdown.install().await {
        // The functions work without it; a shutdown then waits out leases and the lock.
        tracing::warn!(error = %e, "graceful shutdown not installed");
    }
    Some(Started {
        deps: started.deps.with_shutdown(shutdown),
        ..started
    })
}

/// One SQS invocation of the `search` or `detail` function: the batch handled within the
/// invocation's deadline (`deadline_ms`, epoch ms, as the Runtime API gives it), its
/// summary logged and its metrics line written, the partial batch response returned. A
/// SIGTERM arriving meanwhile waits, within its grace, for the metrics line.
pub async fn sqs_invocation(
    started: &Started,
    kind: crate::app::sqs::MessageKind,
    batch: aws_lambda_events::event::sqs::SqsEvent,
    deadline_ms: u64,
) -> aws_lambda_events::event::sqs::SqsBatchResponse {
    let _busy = started.deps.shutdown.as_ref().map(Shutdown::busy);
    let deadline = crate::Deadline::from_epoch_millis(deadline_ms, std::time::SystemTime::now());
    let (response, summary) = crate::app::sqs::handle_batch(&started.deps, kind, batch, deadline).await;
    tracing::info!(?summary, "batch done");
    started.metrics.batch(&summary);
    started.metrics.flush();
    response
}

/// The stop signal a SIGTERM sets, and the count of runs that must end before the process
/// exits. Clone it freely.
#[derive(Debug, Clone)]
pub struct Shutdown {
    stop: watch::Receiver<bool>,
    tx: Arc<watch::Sender<bool>>,
    busy: Arc<(AtomicUsize, Notify)>,
}

impl Default for Shutdown {
    fn default() -> Self {
        Self::new()
    }
}

impl Shutdown {
    /// A signal nothing has set; [`Shutdown::install`] wires it to SIGTERM.
    pub fn new() -> Self {
        let (tx, stop) = watch::channel(false);
        Self {
            stop,
            tx: Arc::new(tx),
            busy: Arc::new((AtomicUsize::new(0), Notify::new())),
        }
    }

    /// The stop signal, for [`crate::drainer::DrainHooks::stop`].
    pub fn receiver(&self) -> &watch::Receiver<bool> {
        &self.stop
    }

    /// True once shutting down.
    pub fn stopping(&self) -> bool {
        *self.stop.borrow()
    }

    /// Sets the stop signal.
    pub fn trigger(&self) {
        self.tx.send_replace(true);
    }

    /// Marks a run in progress until the guard drops; the shutdown waits for it.
    pub fn busy(&self) -> Busy {
        self.busy.0.fetch_add(1, Ordering::SeqCst);
        Busy(self.busy.clone())
    }

    /// Waits until no run is in progress, or `within`; true when none is.
    pub async fn idle_within(&self, within: Duration) -> bool {
        let wait = async {
            loop {
                let notified = self.busy.1.notified();
                tokio::pin!(notified);
                notified.as_mut().enable();
                if self.busy.0.load(Ordering::SeqCst) == 0 {
                    return;
                }
                notified.await;
            }
        };
        tokio::time::timeout(within, wait).await.is_ok()
    }

    /// Registers the internal extension that makes Lambda send SIGTERM, and spawns the task
    /// that, on SIGTERM or SIGINT, sets the stop signal, waits up to [`SHUTDOWN_GRACE`] for
    /// the runs in progress, and exits the process (status 0). Call before
    /// `lambda_runtime::run`: extensions register during init. Outside Lambda (no
    /// `AWS_LAMBDA_RUNTIME_API`) only the signal task is spawned.
    pub async fn install(&self) -> Result<(), RuntimeApiError> {
        use tokio::signal::unix::{SignalKind, signal};
        // Registered first: once tokio has taken a signal over, dropping its handler does not
        // give it back, so a failed registration must leave SIGTERM's default alone.
        if let Some(api) = runtime_api() {
            let id = register_extension(&api).await?;
            // The extension subscribes to nothing; its event/next answers only at shutdown.
            tokio::spawn(async move {
                let next = call(
                    &api,
                    "GET",
                    "/2020-01-01/extension/event/next",
                    &[("lambda-extension-identifier", &id)],
                    Vec::new(),
                    &[],
                )
                .await;
                match next {
                    Ok((200, _, _)) => tracing::debug!("extension: shutdown event received"),
                    Ok((s, _, _)) => {
                        tracing::debug!(status = s, "extension: event/next answered; stopped polling")
                    }
                    Err(e) => tracing::debug!(error = %e, "extension: event/next failed; stopped polling"),
                }
            });
        }
        let signal_err = |e: std::io::Error| RuntimeApiError {
            what: "signal handler",
            reason: e.kind().to_string(),
        };
        let mut term = signal(SignalKind::terminate()).map_err(signal_err)?;
        let mut int = signal(SignalKind::interrupt()).map_err(signal_err)?;
        let this = self.clone();
        tokio::spawn(async move {
            let which = tokio::select! {
                _ = term.recv() => "SIGTERM",
                _ = int.recv() => "SIGINT",
            };
            this.trigger();
            let idle = this.idle_within(SHUTDOWN_GRACE).await;
            tracing::info!(
                signal = which,
                runs_ended = idle,
                "shutting down: runs stopped, lock and unstarted work handed back"
            );
            std::process::exit(0);
        });
        Ok(())
    }
}

/// A run in progress ([`Shutdown::busy`]).
#[derive(Debug)]
pub struct Busy(Arc<(AtomicUsize, Notify)>);

impl Drop for Busy {
    fn drop(&mut self) {
        self.0.0.fetch_sub(1, Ordering::SeqCst);
        self.0.1.notify_waiters();
    }
}

/// The internal extension's name: unique within the function, as Lambda requires.
const EXTENSION_NAME: &str = "lawsync-graceful-shutdown";

async fn register_extension(api: &str) -> Result<String, RuntimeApiError> {
    let fail = |reason: String| RuntimeApiError {
        what: "extension/register",
        reason,
    };
    let (status, headers, _) = tokio::time::timeout(
        Duration::from_secs(2),
        call(
            api,
            "POST",
            "/2020-01-01/extension/register",
            &[("lambda-extension-name", EXTENSION_NAME)],
            br#"{"events":[]}"#.to_vec(),
            &["lambda-extension-identifier"],
        ),
    )
    .await
    .map_err(|_| fail("no answer within 2 s".into()))?
    .map_err(fail)?;
    if status != 200 {
        return Err(fail(format!("answered {status}")));
    }
    headers
        .into_iter()
        .next()
        .flatten()
        .ok_or_else(|| fail("no Lambda-Extension-Identifier in the answer".into()))
}
