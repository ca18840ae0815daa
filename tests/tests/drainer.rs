//! The drainer loop against real Redis: passes, fixed delay, deadline, lock, alerts.

use std::sync::Arc;
use std::sync::atomic::{AtomicU32, Ordering};
use std::time::{Duration, Instant};

use lawsync::alert::{AlertSink, LogAlerts, SlackWebhook};
use lawsync::drainer::{DrainReport, Drainer, DrainerConfig, JobHandler, Outcome, PassReport};
use lawsync::law::BoxFuture;
use lawsync::lock::RunnerLock;
use lawsync::queue::{Backoff, ErrorNote, Job, JobKind, RetryQueue};
use lawsync::{Deadline, Namespace, Secret};
use lawsync_tests::servers::{Topology, dead_port, unique_ns};
use lawsync_tests::upstream::{Reply, Upstream};
use serde_json::json;

const OC: &str = "oc-SECRET-d5a9";

/// A handler that answers every job with `outcome`, after `delay`, and counts calls.
struct Scripted {
    outcome: Outcome,
    delay: Duration,
    calls: AtomicU32,
}

impl Scripted {
    fn new(outcome: Outcome, delay: Duration) -> Self {
        Self {
            outcome,
            delay,
            calls: AtomicU32::new(0),
        }
    }
}

impl JobHandler for Scripted {
    fn handle<'a>(&'a self, _job: &'a Job, _deadline: Deadline) -> BoxFuture<'a, Outcome> {
        self.calls.fetch_add(1, Ordering::SeqCst);
        Box::pin(async move {
            tokio::time::sleep(self.delay).await;
            self.outcome.clone()
        })
    }
}

struct Rig {
    ns: Namespace,
    queue: RetryQueue,
    lock: RunnerLock,
}

async fn rig(topo: Topology, label: &str) -> Rig {
    let ns = unique_ns(label);
    let conn = topo.connect().await;
    let backoff = Backoff {
        base: Duration::from_millis(1),
        cap: Duration::from_millis(1),
    };
    let queue = RetryQueue::new(conn.clone(), &ns)
        .with_backoff(backoff)
        .with_secret(Secret::new(OC));
    let lock = RunnerLock::new(conn, ns.drainer_lock());
    Rig { ns, queue, lock }
}

fn cfg(interval_ms: u64, max_passes: Option<u32>) -> DrainerConfig {
    DrainerConfig {
        interval: Duration::from_millis(interval_ms),
        max_attempts: 30,
        time_per_job: Duration::from_millis(100),
        max_passes,
        linger: true,
        send_alerts: true,
    }
}

async fn run(
    r: &Rig,
    handler: &dyn JobHandler,
    alerts: &dyn AlertSink,
    cfg: DrainerConfig,
    deadline: Deadline,
) -> Vec<PassReport> {
    let d = Drainer {
        queue: &r.queue,
        lock: &r.lock,
        handler,
        alerts,
        env: "test",
        cfg,
        hooks: Default::default(),
    };
    match d.run(deadline).await.expect("run") {
        DrainReport::Ran { passes } => passes,
        DrainReport::Busy => panic!("lock busy"),
    }
}

async fn park(r: &Rig, n: u32) {
    for i in 0..n {
        let job = Job::detail(&i.to_string());
        r.queue
            .enqueue(
                &job,
                Some(Duration::ZERO),
                ErrorNote::now("http_status", "HTTP 503", Some(503)),
            )
            .await
            .expect("park");
    }
    tokio::time::sleep(Duration::from_millis(5)).await;
}

fn leaky_failure() -> Outcome {
    // Sanitized errors never carry the key; this one does, to prove the last line of defence.
    Outcome::Retry {
        error: ErrorNote::now("http_status", format!("HTTP 503 for OC={OC}"), Some(503)),
        after: None,
    }
}

#[tokio::test]
async fn thirty_failures_dead_letter_with_exactly_one_alert_and_no_key() {
    for topo in Topology::ALL {
        let r = rig(topo, "dead").await;
        park(&r, 1).await;
        let hook = Upstream::start(vec![], Reply::status(200).text("ok")).await;
        let slack = SlackWebhook::new(
            Secret::new(format!("{}/services/T0/B0/x", hook.base_url)),
            Some(Secret::new(OC)),
        )
        .expect("webhook");
        let handler = Scripted::new(leaky_failure(), Duration::ZERO);
        let passes = run(&r, &handler, &slack, cfg(5, Some(40)), Deadline::NONE).await;
        let failed: u32 = passes.iter().map(|p| p.failed).sum();
        let dead: u32 = passes.iter().map(|p| p.dead_lettered).sum();
        assert_eq!(
            (failed, dead, handler.calls.load(Ordering::SeqCst)),
            (29, 1, 30),
            "{topo:?}: {passes:?}"
        );
        let posts = hook.seen();
        assert_eq!(posts.len(), 1, "{topo:?}: exactly one alert");
        assert_eq!(posts[0].method, "POST");
        let alert = &posts[0].body;
        assert!(
            alert.contains(&Job::detail("0").id()) && alert.contains("30 failures"),
            "{alert}"
        );
        let dead_letters = r.queue.dead(10).await.expect("dead");
        assert_eq!(dead_letters.len(), 1);
        assert_eq!(dead_letters[0].retry_count, 30);
        let stored = serde_json::to_string(&dead_letters).expect("json");
        for text in [alert, &stored] {
            assert!(!text.contains(OC), "{topo:?}: key leaked: {text}");
            assert!(
                text.contains("***"),
                "{topo:?}: the key was not scrubbed but dropped? {text}"
            );
        }
        assert_eq!(
            passes
                .iter()
                .filter_map(|p| p.alert_delivered)
                .collect::<Vec<_>>(),
            [true]
        );
    }
}

#[tokio::test]
async fn a_dead_webhook_never_loses_the_dead_letter() {
    for topo in Topology::ALL {
        let r = rig(topo, "hookdown").await;
        park(&r, 2).await;
        let slack = SlackWebhook::new(
            Secret::new(format!("http://127.0.0.1:{}/hook", dead_port())),
            None,
        )
        .expect("webhook");
        let handler = Scripted::new(
            Outcome::Dead {
                error: ErrorNote::now("not_found", "no such precedent", None),
            },
            Duration::ZERO,
        );
        let passes = run(&r, &handler, &slack, cfg(5, Some(1)), Deadline::NONE).await;
        assert_eq!(passes[0].dead_lettered, 2);
        assert_eq!(passes[0].alert_delivered, Some(false), "{topo:?}");
        // The alert is owed, not forgotten: the next pass (with the webhook back) sends it.
        assert_eq!(
            r.queue.pending_alerts(10).await.expect("pending").len(),
            2,
            "{topo:?}"
        );
        let hook = Upstream::start(vec![], Reply::status(200).text("ok")).await;
        let slack = SlackWebhook::new(Secret::new(format!("{}/hook", hook.base_url)), None).expect("webhook");
        let passes = run(&r, &handler, &slack, cfg(5, Some(1)), Deadline::NONE).await;
        assert_eq!(passes[0].alert_delivered, Some(true), "{topo:?}");
        assert_eq!(hook.seen().len(), 1);
        let body = &hook.seen()[0].body;
        assert!(body.contains(&Job::detail("0").id()) && body.contains(&Job::detail("1").id()));
        assert!(r.queue.pending_alerts(10).await.expect("pending").is_empty());
        assert_eq!(
            r.queue.stats().await.expect("stats").dead,
            2,
            "{topo:?}: dead letters kept"
        );
    }
}

/// A scheduled run goes on while entries fall due before its next pass, sleeping only
/// until they do, and ends (billed no longer) once nothing falls due before the next pass.
#[tokio::test]
async fn a_run_waits_only_for_what_falls_due_and_ends_when_nothing_does() {
    let topo = Topology::Standalone;
    let r = rig(topo, "delay").await;
    park(&r, 3).await;
    for (i, due_in) in [(3, 250), (4, 600)] {
        let job = Job::detail(&i.to_string());
        let note = ErrorNote::now("gate_wait_too_long", "the gate's next slot was too far", None);
        r.queue
            .enqueue_due_in(&job, Duration::from_millis(due_in), note)
            .await
            .expect("park");
    }
    let handler = Scripted::new(Outcome::Done, Duration::from_millis(20));
    let started = Instant::now();
    let deadline_in = Duration::from_secs(10);
    let passes = run(
        &r,
        &handler,
        &LogAlerts,
        cfg(1000, None),
        Deadline::after(deadline_in),
    )
    .await;
    let took = started.elapsed();
    let done: Vec<u32> = passes.iter().map(|p| p.succeeded).collect();
    assert_eq!(r.queue.stats().await.expect("stats").depth, 0, "{passes:?}");
    assert_eq!(
        done,
        [3, 1, 1],
        "each later entry in a pass of its own: {passes:?}"
    );
    assert!(
        passes[1].started_ms >= 200 && passes[2].started_ms >= 550,
        "a pass starts when its entry falls due: {passes:?}"
    );
    assert!(
        passes[2].started_ms < passes[1].ended_ms + 1000,
        "not a whole interval later: {passes:?}"
    );
    assert!(
        took < Duration::from_millis(1500),
        "an idle run ends rather than sleep to its deadline: {took:?}"
    );
    assert_eq!(r.queue.stats().await.expect("stats").depth, 0);
    assert_eq!(
        r.lock.holder_ttl().await.expect("ttl"),
        None,
        "the lock is released"
    );
}

#[tokio::test]
async fn work_not_started_before_the_deadline_goes_back_unchanged() {
    let topo = Topology::Standalone;
    let r = rig(topo, "skip").await;
    park(&r, 10).await;
    let handler = Scripted::new(Outcome::Done, Duration::from_millis(400));
    // 3.6 s left: 3.1 s usable; a job is started only with 2 s to spare, so about three fit.
    let passes = run(
        &r,
        &handler,
        &LogAlerts,
        cfg(10, Some(1)),
        Deadline::after(Duration::from_millis(3600)),
    )
    .await;
    let p = &passes[0];
    assert_eq!(p.claimed, 10, "{p:?}");
    assert!(p.succeeded >= 1 && p.succeeded + p.skipped == 10, "{p:?}");
    let stats = r.queue.stats().await.expect("stats");
    assert_eq!(
        (stats.depth, stats.due_now, stats.in_flight),
        (u64::from(p.skipped), u64::from(p.skipped), 0),
        "{stats:?}"
    );
    let back = r
        .queue
        .claim(10, Duration::from_secs(10))
        .await
        .expect("claim")
        .entries;
    assert!(
        back.iter().all(|e| e.retry_count == 0),
        "skipped work must not count as a failure"
    );
}

#[tokio::test]
async fn a_stop_signal_ends_the_run_at_the_next_job_and_frees_the_lock() {
    let r = rig(Topology::Standalone, "stop").await;
    park(&r, 8).await;
    let handler = Scripted::new(Outcome::Done, Duration::from_millis(150));
    let (tx, rx) = tokio::sync::watch::channel(false);
    let d = Drainer {
        queue: &r.queue,
        lock: &r.lock,
        handler: &handler,
        alerts: &LogAlerts,
        env: "test",
        // Passes forever, a minute apart: only the stop can end this run early.
        cfg: cfg(60_000, None),
        hooks: lawsync::drainer::DrainHooks {
            on_pass: None,
            stop: Some(&rx),
            cut_after: None,
        },
    };
    let stopper = async {
        // After the first job has started.
        while handler.calls.load(Ordering::SeqCst) == 0 {
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
        tx.send(true).expect("send");
    };
    let (report, ()) = tokio::join!(d.run(Deadline::after(Duration::from_secs(120))), stopper);
    let DrainReport::Ran { passes } = report.expect("run") else {
        panic!("busy")
    };
    assert_eq!(passes.len(), 1, "a second pass started after the stop");
    let p = &passes[0];
    assert!(p.succeeded >= 1 && p.succeeded < 8, "{p:?}");
    assert_eq!(p.succeeded + p.skipped, 8, "{p:?}");
    let stats = r.queue.stats().await.expect("stats");
    assert_eq!(
        (stats.depth, stats.in_flight),
        (u64::from(p.skipped), 0),
        "{stats:?}"
    );
    let again = r.lock.try_acquire(Duration::from_secs(5)).await.expect("lock");
    assert!(again.is_some(), "the stopped run kept the lock");
}

#[tokio::test]
async fn a_second_drainer_finds_the_lock_busy() {
    for topo in Topology::ALL {
        let r = rig(topo, "busy").await;
        park(&r, 1).await;
        let other = RunnerLock::new(topo.connect().await, r.ns.drainer_lock());
        let _held = other
            .try_acquire(Duration::from_secs(30))
            .await
            .expect("acquire")
            .expect("free");
        let handler = Scripted::new(Outcome::Done, Duration::ZERO);
        let d = Drainer {
            queue: &r.queue,
            lock: &r.lock,
            handler: &handler,
            alerts: &LogAlerts,
            env: "test",
            cfg: cfg(5, Some(1)),
            hooks: Default::default(),
        };
        assert_eq!(
            d.run(Deadline::NONE).await.expect("run"),
            DrainReport::Busy,
            "{topo:?}"
        );
        assert_eq!(handler.calls.load(Ordering::SeqCst), 0);
        assert_eq!(r.queue.stats().await.expect("stats").depth, 1);
    }
}

#[tokio::test]
async fn run_history_stream_keeps_sanitized_records() {
    use lawsync::history::RedisHistory;
    use lawsync::law::{FailureSink, LawError};
    for topo in Topology::ALL {
        let ns = unique_ns("history");
        let history = Arc::new(RedisHistory::new(topo.connect().await, &ns).with_secret(Secret::new(OC)));
        let mut record = LawError::Http {
            status: 503,
            attempts: 3,
        }
        .record(lawsync::law::Endpoint::Detail);
        history.record(record.clone()).await;
        record.message = format!("leaky {OC}");
        history.record(record).await;
        let (newest, unreadable) = history.newest(10).await.expect("read");
        assert_eq!((newest.len(), unreadable), (2, 0), "{topo:?}");
        assert_eq!(newest[0].message, "leaky ***", "{topo:?}: newest first, scrubbed");
        assert_eq!(newest[1].status, Some(503));
    }
}

#[tokio::test]
async fn jobs_are_dispatched_by_type_and_unknown_types_are_dead_lettered() {
    let r = rig(Topology::Standalone, "router").await;
    // A type this release does not know (a newer release's, or damage) reads as stored.
    let mystery: Job = serde_json::from_value(json!({ "type": "MYSTERY", "identity": "1", "payload": {} }))
        .expect("an unknown type reads");
    for job in [
        Job::new(JobKind::Search, "20260101~20260131", json!({})),
        Job::new(JobKind::Detail, "42", json!({})),
        mystery,
    ] {
        r.queue
            .enqueue(&job, Some(Duration::ZERO), ErrorNote::now("network", "x", None))
            .await
            .expect("park");
    }
    tokio::time::sleep(Duration::from_millis(5)).await;
    let search = Arc::new(Scripted::new(Outcome::Done, Duration::ZERO));
    let detail = Arc::new(Scripted::new(Outcome::Done, Duration::ZERO));
    let router = ByKind {
        search: search.clone(),
        detail: detail.clone(),
    };
    let passes = run(&r, &router, &LogAlerts, cfg(5, Some(1)), Deadline::NONE).await;
    assert_eq!(
        (passes[0].succeeded, passes[0].dead_lettered),
        (2, 1),
        "{passes:?}"
    );
    assert_eq!(
        (
            search.calls.load(Ordering::SeqCst),
            detail.calls.load(Ordering::SeqCst)
        ),
        (1, 1)
    );
    let dead = r.queue.dead(10).await.expect("dead");
    assert_eq!(dead[0].id, "MYSTERY:1");
    assert_eq!(
        dead[0].last_error.as_ref().map(|e| e.kind.as_str()),
        Some("unknown_type")
    );
}

/// Routes by kind, as the functions' handler does: search and detail jobs to handlers the
/// test keeps a hold on, any other kind dead-lettered without a call.
struct ByKind {
    search: Arc<Scripted>,
    detail: Arc<Scripted>,
}

impl JobHandler for ByKind {
    fn handle<'a>(&'a self, job: &'a Job, deadline: Deadline) -> BoxFuture<'a, Outcome> {
        match &job.kind {
            JobKind::Search => self.search.handle(job, deadline),
            JobKind::Detail => self.detail.handle(job, deadline),
            other => {
                let error = ErrorNote::now(
                    "unknown_type",
                    format!("no handler for job type {:?}", other.as_str()),
                    None,
                );
                Box::pin(std::future::ready(Outcome::Dead { error }))
            }
        }
    }
}

/// A job the rate gate refused is no attempt: it goes back due when the gate expects room,
/// its count and history as they were; the rest of the batch goes back unchanged; a run
/// whose deadline leaves no room to wait for the gate ends rather than claim more while the
/// gate is closed.
#[tokio::test]
async fn a_gate_refusal_releases_the_batch_unchanged_and_ends_the_run() {
    for topo in Topology::ALL {
        let r = rig(topo, "refused").await;
        park(&r, 3).await;
        let handler = Scripted::new(
            Outcome::NotStarted {
                retry_in: Some(Duration::from_secs(45)),
                room_known: true,
            },
            Duration::ZERO,
        );
        let passes = run(
            &r,
            &handler,
            &LogAlerts,
            cfg(5, None),
            // 45 s of cooldown do not fit in 30 s.
            Deadline::after(Duration::from_secs(30)),
        )
        .await;
        assert_eq!(handler.calls.load(Ordering::SeqCst), 1, "{topo:?}: {passes:?}");
        assert_eq!(passes.len(), 1, "{topo:?}: {passes:?}");
        let p = &passes[0];
        assert_eq!(
            (p.claimed, p.skipped, p.failed, p.dead_lettered),
            (3, 3, 0, 0),
            "{p:?}"
        );
        assert!(p.out_of_room, "{p:?}");
        let stats = r.queue.stats().await.expect("stats");
        assert_eq!(
            (stats.depth, stats.due_now, stats.in_flight),
            (3, 2, 0),
            "{topo:?}: {stats:?}"
        );
        let due = stats.next_due_in.expect("the refused one waits");
        assert!(
            due > Duration::from_secs(44) && due <= Duration::from_secs(45),
            "{due:?}"
        );
        for e in r.queue.list(10).await.expect("list") {
            assert_eq!(e.retry_count, 0, "{topo:?}: {e:?}");
            assert_eq!(e.last_error.map(|n| n.kind), Some("http_status".to_owned()));
        }
    }
}
