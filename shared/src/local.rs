//! `lawsync local`: what AWS does around the functions, done on one machine.
//!
//! For each function's queue it runs `concurrency` execution environments, each with a
//! cold start of its own ([`Deps::build`]: its own Redis connection, HTTP client and
//! gate handle), each doing what an SQS event source mapping does for one concurrent
//! Lambda: long-poll up to `batch_size` messages, hand them to the handler as a real SQS
//! event under the function's timeout, delete the ones that succeeded and leave the
//! reported batch item failures to reappear after the visibility timeout. A drainer
//! environment is invoked on its schedule, as EventBridge would. The handlers are the
//! Lambdas' own ([`crate::app`]), so what runs here is what runs there.
//!
//! Each environment runs on a thread of its own with a runtime of its own, as a Lambda
//! execution environment is a process of its own: a neighbour busy parsing a reply cannot
//! hold up this one's timers, or its HTTP connection between a gate grant and the send.
//!
//! Every law.go.kr attempt, batch and drainer run is written as a JSON line to the
//! events output (the demo draws its timeline from it). Stops on SIGINT/SIGTERM (an
//! in-flight batch finishes first) or, with `until_idle`, once no message has arrived
//! for that long and the retry queue holds nothing live.

use std::io::Write;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant, SystemTime};

use aws_lambda_events::event::sqs::SqsEvent;
use aws_sdk_sqs::types::{DeleteMessageBatchRequestEntry, MessageSystemAttributeName};
use serde_json::{Value, json};
use tokio::sync::watch;

use crate::app::Deps;
use crate::app::sqs::{MessageKind, handle_batch};
use crate::config::Config;
use crate::deadline::Deadline;
use crate::drainer::PassReport;
use crate::law::{CallEvent, CallObserver};
pub use crate::local_events::{EventLine, GateScope, LocalEvent};

use crate::policy::LOCAL_STOP_GRACE as STOP_GRACE;

/// How the local runtime runs the functions. No defaults here: `lawsync local`'s flags
/// hold them, so there is one set.
#[derive(Debug, Clone)]
pub struct LocalOptions {
    /// This process's name in the events (`p1`, `p2`...).
    pub name: String,
    /// Execution environments per function (an event source mapping's maximum concurrency).
    pub concurrency: u32,
    /// Messages per batch, 1..=10.
    pub batch_size: i32,
    /// Long-poll wait, 0..=20 s.
    pub poll_wait: Duration,
    /// How long a received message stays invisible; a reported failure reappears after it.
    pub visibility_timeout: Duration,
    /// The functions' timeout: each invocation's deadline.
    pub function_timeout: Duration,
    /// How often the drainer is invoked; `None` runs no drainer here.
    pub drainer_schedule: Option<Duration>,
    pub gate: GateScope,
    /// Stop once idle this long.
    pub until_idle: Option<Duration>,
}

/// Where the event lines go.
#[derive(Clone)]
pub struct EventLog(Arc<Mutex<Box<dyn Write + Send>>>);

impl std::fmt::Debug for EventLog {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("EventLog")
    }
}

impl EventLog {
    pub fn new(out: Box<dyn Write + Send>) -> Self {
        Self(Arc::new(Mutex::new(out)))
    }

    /// Writes one line, stamped now; an output that fails is reported once per line to the
    /// log, never fatal to the work.
    pub fn emit(&self, event: LocalEvent) {
        let line = EventLine {
            event,
            at_ms: crate::clock::epoch_millis_f64(SystemTime::now()),
        };
        // Through a `Value`, whose keys are sorted: the lines read as they always have.
        let line = match serde_json::to_value(&line) {
            Ok(v) => v,
            Err(e) => {
                tracing::warn!(error = %e, "local: could not write an event line");
                return;
            }
        };
        let mut out = self.0.lock().unwrap_or_else(|p| p.into_inner());
        if writeln!(out, "{line}").and_then(|()| out.flush()).is_err() {
            tracing::warn!("local: could not write an event line");
        }
    }
}

/// Writes every law.go.kr attempt of one environment as a `call` event.
#[derive(Debug)]
struct CallLines {
    instance: String,
    log: EventLog,
}

impl CallObserver for CallLines {
    fn observe(&self, e: &CallEvent) {
        self.log.emit(LocalEvent::Call {
            instance: self.instance.clone(),
            endpoint: e.endpoint,
            attempt: e.attempt,
            started_ms: crate::clock::epoch_millis_f64(e.started_at),
            waited_ms: e.waited.as_secs_f64() * 1000.0,
            took_ms: e.took.as_secs_f64() * 1000.0,
            status: e.status,
            cooldown_ms: e.cooldown.map(|d| d.as_millis() as u64),
            granted_ms: Some(e.granted_at_us as f64 / 1000.0),
            new_connection: e.new_connection,
        });
    }
}

/// Why the runtime could not start.
#[derive(Debug, thiserror::Error)]
pub enum LocalError {
    #[error("{0}")]
    Options(String),
    #[error(transparent)]
    Startup(#[from] crate::app::StartupError),
}

/// Shared between the environments: when a message last arrived.
#[derive(Debug)]
struct Activity {
    start: Instant,
    last_ms: AtomicU64,
}

impl Activity {
    fn touch(&self) {
        self.last_ms
            .store(self.start.elapsed().as_millis() as u64, Ordering::Relaxed);
    }
    fn quiet_for(&self) -> Duration {
        let last = Duration::from_millis(self.last_ms.load(Ordering::Relaxed));
        self.start.elapsed().saturating_sub(last)
    }
}

/// Runs until stopped (or idle, with `until_idle`).
pub async fn run(
    cfg: Config,
    sdk: aws_config::SdkConfig,
    opts: LocalOptions,
    log: EventLog,
) -> Result<(), LocalError> {
    check(&opts, &cfg)?;
    let (stop_tx, stop) = watch::channel(false);
    let activity = Arc::new(Activity {
        start: Instant::now(),
        last_ms: AtomicU64::new(0),
    });
    let sqs = aws_sdk_sqs::Client::new(&sdk);
    let mut tasks = tokio::task::JoinSet::new();
    let mut solo = 0u32;
    let mut environment = |label: String| {
        solo += 1;
        let (cfg, sdk, log, opts) = (cfg.clone(), sdk.clone(), log.clone(), opts.clone());
        async move { cold_start(cfg, &sdk, &opts, &log, label, solo).await }
    };
    for (kind, url, function) in [
        (MessageKind::Search, &cfg.search_queue_url, "search"),
        (MessageKind::Detail, &cfg.detail_queue_url, "detail"),
    ] {
        let Some(url) = url.clone() else {
            tracing::warn!(
                function,
                "local: no queue URL configured; its function does not run here"
            );
            continue;
        };
        for i in 1..=opts.concurrency {
            let instance = format!("{}/{function}-{i}", opts.name);
            let start = environment(instance.clone());
            let (queue_arn, url, sqs) = (queue_arn(&url, &sdk), url.clone(), sqs.clone());
            let (opts, log, activity, stop) = (opts.clone(), log.clone(), activity.clone(), stop.clone());
            own_environment(&mut tasks, start, move |deps| {
                Poller {
                    deps,
                    kind,
                    function,
                    instance,
                    queue_arn,
                    url,
                    sqs,
                    opts,
                    log,
                    activity,
                }
                .run(stop)
            })
            .await?;
        }
    }
    if let Some(every) = opts.drainer_schedule {
        let start = environment(format!("{}/drainer", opts.name));
        let (log, stop, timeout) = (log.clone(), stop.clone(), opts.function_timeout);
        let instance = format!("{}/drainer", opts.name);
        let sdk = sdk.clone();
        own_environment(&mut tasks, start, move |deps| async move {
            let alerts = match deps.alerts(&sdk).await {
                Ok(a) => a,
                Err(e) => {
                    tracing::error!(error = %e, "local: the drainer's alerts could not be set up; it does not run");
                    return;
                }
            };
            let mut stop = stop;
            let run_stop = stop.clone();
            let mut tick = tokio::time::interval(every);
            tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
            while !*stop.borrow() {
                tokio::select! {
                    _ = tick.tick() => {}
                    _ = stop.changed() => break,
                }
                let on_pass = |pass: &PassReport| {
                    log.emit(LocalEvent::DrainPass {
                        instance: instance.clone(),
                        pass: pass.clone(),
                    });
                };
                let hooks = crate::drainer::DrainHooks {
                    on_pass: Some(&on_pass),
                    stop: Some(&run_stop),
                    cut_after: None,
                };
                let started = std::time::Instant::now();
                let run = deps.drain_with(&*alerts, Deadline::after(timeout), None, hooks);
                tokio::pin!(run);
                let report = tokio::select! {
                    r = &mut run => r,
                    _ = stop.changed() => {
                        // The run sees the stop too: it ends at the next job, hands back what
                        // it has not worked and releases the lock. A job waiting on the gate
                        // gets a grace period; past it, leases and the lock expire on their own.
                        match tokio::time::timeout(STOP_GRACE, &mut run).await {
                            Ok(r) => r,
                            Err(_) => break,
                        }
                    }
                };
                match report {
                    Ok(report) => log.emit(LocalEvent::Drain {
                        instance: instance.clone(),
                        billed_ms: started.elapsed().as_secs_f64() * 1000.0,
                        report,
                    }),
                    Err(e) => tracing::error!(error = %e, "local: drainer run failed"),
                }
            }
        })
        .await?;
    }
    let probe_queue = environment(format!("{}/probe", opts.name)).await?.queue;
    log.emit(LocalEvent::Started {
        process: opts.name.clone(),
        concurrency: opts.concurrency,
        gate: opts.gate,
    });
    let why = wait_for_stop(&opts, &activity, &probe_queue).await;
    tracing::info!(why, "local: stopping; in-flight batches finish first");
    let _ = stop_tx.send(true);
    while tasks.join_next().await.is_some() {}
    log.emit(LocalEvent::Stopped {
        process: opts.name.clone(),
        why: why.to_owned(),
    });
    Ok(())
}

/// Starts one execution environment on a thread and runtime of its own: its cold start
/// (`start`), then `work` on what it built, until `work` ends. Returns once the cold start
/// is done, with its error if it failed; the environment's end is a task of `tasks`.
async fn own_environment<S, W, F>(
    tasks: &mut tokio::task::JoinSet<()>,
    start: S,
    work: W,
) -> Result<(), LocalError>
where
    S: std::future::Future<Output = Result<Deps, LocalError>> + Send + 'static,
    W: FnOnce(Deps) -> F + Send + 'static,
    F: std::future::Future<Output = ()>,
{
    let (ready, started) = tokio::sync::oneshot::channel::<Result<(), LocalError>>();
    tasks.spawn_blocking(move || {
        let runtime = match tokio::runtime::Builder::new_current_thread().enable_all().build() {
            Ok(rt) => rt,
            Err(e) => {
                let _ = ready.send(Err(LocalError::Options(format!(
                    "could not start an environment's runtime: {e}"
                ))));
                return;
            }
        };
        runtime.block_on(async move {
            match start.await {
                Ok(deps) => {
                    let _ = ready.send(Ok(()));
                    work(deps).await;
                }
                Err(e) => {
                    let _ = ready.send(Err(e));
                }
            }
        });
    });
    started.await.unwrap_or_else(|_| {
        Err(LocalError::Options(
            "an environment's thread ended during its cold start".into(),
        ))
    })
}

fn check(opts: &LocalOptions, cfg: &Config) -> Result<(), LocalError> {
    let bad = |m: String| Err(LocalError::Options(m));
    if !(1..=10).contains(&opts.batch_size) {
        return bad(format!(
            "--batch-size must be 1..=10 (SQS's limit), got {}",
            opts.batch_size
        ));
    }
    if opts.poll_wait > Duration::from_secs(20) {
        return bad("--poll-wait must be at most 20 s (SQS's limit)".into());
    }
    if opts.concurrency == 0 || opts.concurrency > 64 {
        return bad(format!("--concurrency must be 1..=64, got {}", opts.concurrency));
    }
    if opts.visibility_timeout < opts.function_timeout {
        return bad(format!(
            "--visibility-timeout ({} s) must be at least the function timeout ({} s), or a message would reappear while still being worked on",
            opts.visibility_timeout.as_secs(),
            opts.function_timeout.as_secs()
        ));
    }
    if cfg.search_queue_url.is_none() && cfg.detail_queue_url.is_none() && opts.drainer_schedule.is_none() {
        return bad(
            "nothing to run: set SEARCH_QUEUE_URL and/or DETAIL_QUEUE_URL, or keep the drainer".into(),
        );
    }
    Ok(())
}

/// One execution environment's cold start; with a per-instance gate, its gate lives in a
/// key space of its own.
async fn cold_start(
    cfg: Config,
    sdk: &aws_config::SdkConfig,
    opts: &LocalOptions,
    log: &EventLog,
    instance: String,
    n: u32,
) -> Result<Deps, LocalError> {
    let deps = Deps::build(cfg, sdk).await?;
    let solo_gate = match opts.gate {
        GateScope::Shared => None,
        GateScope::PerInstance => {
            let solo = crate::keys::Namespace::new(
                &format!("{}-solo-{}-{n}", deps.cfg.app_env, opts.name),
                crate::law::UPSTREAM,
            )
            .map_err(|e| LocalError::Options(format!("per-instance gate: {e}")))?;
            let conn = deps.queue.connection().clone();
            Some(Arc::new(crate::gate::Gate::new(conn, &solo, deps.cfg.gate)))
        }
    };
    let lines = Arc::new(CallLines {
        instance,
        log: log.clone(),
    });
    Ok(deps
        .map_law(|law| match solo_gate {
            Some(gate) => law.with_gate(gate),
            None => law,
        })
        .observed(lines))
}

/// Resolves on SIGTERM or SIGINT (Ctrl-C) and names it.
pub(crate) async fn stop_signal() -> &'static str {
    #[cfg(unix)]
    {
        use tokio::signal::unix::{SignalKind, signal};
        match signal(SignalKind::terminate()) {
            Ok(mut term) => tokio::select! {
                _ = term.recv() => "SIGTERM",
                _ = tokio::signal::ctrl_c() => "SIGINT",
            },
            Err(_) => {
                let _ = tokio::signal::ctrl_c().await;
                "SIGINT"
            }
        }
    }
    #[cfg(not(unix))]
    {
        let _ = tokio::signal::ctrl_c().await;
        "SIGINT"
    }
}

async fn wait_for_stop(
    opts: &LocalOptions,
    activity: &Activity,
    queue: &crate::queue::RetryQueue,
) -> &'static str {
    let signals = stop_signal();
    let idle = async {
        let Some(quiet) = opts.until_idle else {
            return std::future::pending().await;
        };
        loop {
            tokio::time::sleep(Duration::from_millis(500)).await;
            if activity.quiet_for() < quiet {
                continue;
            }
            match queue.stats().await {
                Ok(s) if s.depth == 0 => return "idle",
                Ok(_) => {}
                Err(e) => tracing::warn!(error = %e, "local: cannot read the retry queue's depth"),
            }
        }
    };
    tokio::select! {
        why = signals => why,
        why = idle => why,
    }
}

/// `arn:aws:sqs:<region>:<account>:<name>` from a queue URL `…/<account>/<name>`.
fn queue_arn(url: &str, sdk: &aws_config::SdkConfig) -> String {
    let mut parts = url.trim_end_matches('/').rsplit('/');
    let name = parts.next().unwrap_or("queue");
    let account = parts.next().unwrap_or("000000000000");
    let region = sdk
        .region()
        .map(|r| r.to_string())
        .unwrap_or_else(|| "us-east-1".into());
    format!("arn:aws:sqs:{region}:{account}:{name}")
}

/// One execution environment behind an event source mapping.
struct Poller {
    deps: Deps,
    kind: MessageKind,
    function: &'static str,
    instance: String,
    url: String,
    queue_arn: String,
    sqs: aws_sdk_sqs::Client,
    opts: LocalOptions,
    log: EventLog,
    activity: Arc<Activity>,
}

impl Poller {
    async fn run(self, mut stop: watch::Receiver<bool>) {
        while !*stop.borrow() {
            let receive = self
                .sqs
                .receive_message()
                .queue_url(&self.url)
                .max_number_of_messages(self.opts.batch_size)
                .wait_time_seconds(self.opts.poll_wait.as_secs() as i32)
                .visibility_timeout(self.opts.visibility_timeout.as_secs() as i32)
                .message_system_attribute_names(MessageSystemAttributeName::All)
                .send();
            let received = tokio::select! {
                r = receive => r,
                _ = stop.changed() => return,
            };
            let messages = match received {
                Ok(out) => out.messages.unwrap_or_default(),
                Err(e) => {
                    tracing::warn!(function = self.function, error = %crate::aws::aws_code(&e), "local: receive failed; retrying in 1 s");
                    tokio::time::sleep(Duration::from_secs(1)).await;
                    continue;
                }
            };
            if messages.is_empty() {
                continue;
            }
            self.activity.touch();
            self.invoke(messages).await;
            self.activity.touch();
        }
    }

    /// One invocation: the batch as Lambda would deliver it, then the mapping's deletes.
    async fn invoke(&self, messages: Vec<aws_sdk_sqs::types::Message>) {
        let region = self.queue_arn.split(':').nth(3).unwrap_or_default().to_owned();
        let records: Vec<Value> = messages
            .iter()
            .map(|m| {
                let attributes: serde_json::Map<String, Value> = m
                    .attributes()
                    .map(|a| a.iter().map(|(k, v)| (k.as_str().to_owned(), json!(v))).collect())
                    .unwrap_or_default();
                json!({
                    "messageId": m.message_id(),
                    "receiptHandle": m.receipt_handle(),
                    "body": m.body(),
                    "attributes": attributes,
                    "messageAttributes": {},
                    "md5OfBody": m.md5_of_body(),
                    "eventSource": "aws:sqs",
                    "eventSourceARN": self.queue_arn,
                    "awsRegion": region,
                })
            })
            .collect();
        let event: SqsEvent = match serde_json::from_value(json!({ "Records": records })) {
            Ok(e) => e,
            Err(e) => {
                // Not reachable with SQS's own replies; the messages reappear and are seen again.
                tracing::error!(error = %e, "local: could not build the SQS event");
                return;
            }
        };
        let deadline = Deadline::after(self.opts.function_timeout);
        let started = std::time::Instant::now();
        let (response, summary) = handle_batch(&self.deps, self.kind, event, deadline).await;
        // What Lambda bills: the handler's own time (the mapping's deletes are not).
        let billed_ms = started.elapsed().as_secs_f64() * 1000.0;
        let failed: std::collections::HashSet<&str> = response
            .batch_item_failures
            .iter()
            .map(|f| f.item_identifier.as_str())
            .collect();
        let done: Vec<DeleteMessageBatchRequestEntry> = messages
            .iter()
            .enumerate()
            .filter(|(_, m)| !failed.contains(m.message_id().unwrap_or_default()))
            .filter_map(|(i, m)| {
                DeleteMessageBatchRequestEntry::builder()
                    .id(i.to_string())
                    .set_receipt_handle(m.receipt_handle().map(str::to_owned))
                    .build()
                    .ok()
            })
            .collect();
        let mut not_deleted = 0usize;
        if !done.is_empty() {
            match self
                .sqs
                .delete_message_batch()
                .queue_url(&self.url)
                .set_entries(Some(done))
                .send()
                .await
            {
                Ok(out) => not_deleted = out.failed().len(),
                Err(e) => {
                    // They reappear after the visibility timeout and are handled again:
                    // every handler is idempotent.
                    tracing::warn!(error = %crate::aws::aws_code(&e), "local: delete failed; the batch will be redelivered");
                    not_deleted = messages.len() - failed.len();
                }
            }
        }
        self.log.emit(LocalEvent::Batch {
            instance: self.instance.clone(),
            function: self.function.to_owned(),
            received: messages.len(),
            batch_item_failures: failed.len(),
            not_deleted,
            billed_ms,
            summary,
        });
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::app::sqs::BatchSummary;
    use crate::drainer::DrainReport;
    use crate::law::Endpoint;

    /// A writer the test can read back.
    #[derive(Clone, Default)]
    struct Lines(Arc<Mutex<Vec<u8>>>);

    impl Write for Lines {
        fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
            self.0.lock().expect("lines").extend_from_slice(buf);
            Ok(buf.len())
        }
        fn flush(&mut self) -> std::io::Result<()> {
            Ok(())
        }
    }

    #[test]
    fn event_lines_read_back_as_they_were_emitted() {
        let pass = PassReport {
            claimed: 3,
            succeeded: 2,
            failed: 1,
            alert_delivered: Some(true),
            ..PassReport::default()
        };
        let events = [
            LocalEvent::Call {
                instance: "p1/detail-1".into(),
                endpoint: Endpoint::Detail,
                attempt: 1,
                started_ms: 1_764_000_000_000.5,
                waited_ms: 12.25,
                took_ms: 30.0,
                status: Some(429),
                cooldown_ms: Some(60_000),
                granted_ms: Some(1_764_000_000_000.25),
                new_connection: true,
            },
            LocalEvent::Call {
                instance: "p1/search-1".into(),
                endpoint: Endpoint::Search,
                attempt: 2,
                started_ms: 1_764_000_000_001.0,
                waited_ms: 0.0,
                took_ms: 1.5,
                status: None,
                cooldown_ms: None,
                granted_ms: None,
                new_connection: false,
            },
            LocalEvent::Batch {
                instance: "p1/detail-1".into(),
                function: "detail".into(),
                received: 10,
                batch_item_failures: 1,
                not_deleted: 0,
                billed_ms: 812.5,
                summary: BatchSummary {
                    done: 8,
                    parked: 1,
                    returned: 1,
                    ..BatchSummary::default()
                },
            },
            LocalEvent::DrainPass {
                instance: "p1/drainer".into(),
                pass: pass.clone(),
            },
            LocalEvent::Drain {
                instance: "p1/drainer".into(),
                billed_ms: 40.0,
                report: DrainReport::Ran { passes: vec![pass] },
            },
            LocalEvent::Drain {
                instance: "p1/drainer".into(),
                billed_ms: 1.0,
                report: DrainReport::Busy,
            },
            LocalEvent::Started {
                process: "p1".into(),
                concurrency: 2,
                gate: GateScope::PerInstance,
            },
            LocalEvent::Stopped {
                process: "p1".into(),
                why: "idle".into(),
            },
        ];
        let out = Lines::default();
        let log = EventLog::new(Box::new(out.clone()));
        for e in &events {
            log.emit(e.clone());
        }
        let text = String::from_utf8(out.0.lock().expect("lines").clone()).expect("UTF-8");
        let read: Vec<EventLine> = text
            .lines()
            .map(|l| EventLine::parse(l).expect("an event line reads"))
            .collect();
        assert_eq!(
            read.iter().map(|l| &l.event).collect::<Vec<_>>(),
            events.iter().collect::<Vec<_>>()
        );
        assert!(read.iter().all(|l| l.at_ms > 1_700_000_000_000.0), "{text}");
        // Each line is one flat object: its kind under `type`, its fields and `at_ms` beside it.
        for (line, e) in text.lines().zip(&events) {
            let v: Value = serde_json::from_str(line).expect("JSON");
            let mut expected = serde_json::to_value(e).expect("json");
            expected["at_ms"] = v["at_ms"].clone();
            assert_eq!(v, expected, "{line}");
            assert!(v["type"].is_string(), "{line}");
        }
    }

    #[test]
    fn queue_arns_come_from_the_url_and_region() {
        let sdk = aws_config::SdkConfig::builder()
            .region(aws_config::Region::new("ap-northeast-2"))
            .build();
        assert_eq!(
            queue_arn("http://127.0.0.1:5391/123456789012/lawsync-search", &sdk),
            "arn:aws:sqs:ap-northeast-2:123456789012:lawsync-search"
        );
    }
}
