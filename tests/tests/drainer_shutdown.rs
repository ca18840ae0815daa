//! A drainer told to stop as Lambda's shutdown stops it (`DrainHooks::cut_after`, what
//! `Deps::run_drainer` sets under Lambda): only a job's handler is cut off; a handler that
//! has returned is settled and a dead letter buried; a delivery of alerts is cut without
//! losing them; a release refused after the cut is not counted as handed back; and the
//! lock is free within the shutdown's grace. A stop during what a pass owes afterwards
//! (`after_pass`: run records, the backfill's next windows) waits for it: pinned below.
#![allow(clippy::print_stderr)]

use std::sync::atomic::{AtomicU32, Ordering};
use std::time::{Duration, Instant};

use lawsync::alert::{AlertError, AlertSink, DeadLetterAlert, LogAlerts};
use lawsync::drainer::{DrainHooks, DrainReport, Drainer, DrainerConfig, JobHandler, Outcome, PassReport};
use lawsync::law::BoxFuture;
use lawsync::lock::RunnerLock;
use lawsync::policy::{SHUTDOWN_GRACE, SHUTDOWN_JOB_GRACE};
use lawsync::queue::{Backoff, ErrorNote, Job, RetryQueue};
use lawsync::{Deadline, Namespace};
use lawsync_tests::servers::{Topology, unique_ns};
use tokio::sync::{Notify, watch};

struct Rig {
    _ns: Namespace,
    queue: RetryQueue,
    lock: RunnerLock,
}

async fn rig(label: &str) -> Rig {
    let ns = unique_ns(label);
    let conn = Topology::Standalone.connect().await;
    let queue = RetryQueue::new(conn.clone(), &ns).with_backoff(Backoff {
        base: Duration::from_millis(1),
        cap: Duration::from_millis(1),
    });
    let lock = RunnerLock::new(conn, ns.drainer_lock());
    Rig { _ns: ns, queue, lock }
}

async fn park(r: &Rig, n: u32) {
    for i in 0..n {
        r.queue
            .enqueue(
                &Job::detail(&format!("7{i}")),
                Some(Duration::ZERO),
                ErrorNote::now("http_status", "HTTP 503", Some(503)),
            )
            .await
            .expect("park");
    }
    tokio::time::sleep(Duration::from_millis(5)).await;
}

/// The scheduled drainer's settings, as the functions run it (linger, alerts).
fn cfg(send_alerts: bool) -> DrainerConfig {
    DrainerConfig {
        interval: Duration::from_secs(60),
        max_attempts: 30,
        time_per_job: Duration::from_millis(100),
        max_passes: None,
        linger: true,
        send_alerts,
    }
}

/// The hooks `Deps::run_drainer` builds under Lambda.
fn lambda_hooks(rx: &watch::Receiver<bool>) -> DrainHooks<'_> {
    DrainHooks {
        on_pass: None,
        stop: Some(rx),
        cut_after: Some(SHUTDOWN_JOB_GRACE),
    }
}

fn passes(report: Result<DrainReport, lawsync::RedisFailure>) -> Vec<PassReport> {
    match report.expect("run") {
        DrainReport::Ran { passes } => passes,
        DrainReport::Busy => panic!("lock busy"),
    }
}

// ------------------------------------------------------------------------------------------
// 1. The stop lands as a job's handler returns a dead letter.

/// A job that fails for good as SIGTERM arrives; its burial (in the functions
/// `jobs::job_buried`: the run's `mark` script, and when that completes the run, the run
/// record written to S3) takes `burial`.
struct DiesAtTheSignal {
    stop: watch::Sender<bool>,
    burial: Duration,
    buried_started: AtomicU32,
    buried_done: AtomicU32,
}

impl JobHandler for DiesAtTheSignal {
    fn handle<'a>(&'a self, _job: &'a Job, _deadline: Deadline) -> BoxFuture<'a, Outcome> {
        self.stop.send_replace(true);
        Box::pin(std::future::ready(Outcome::Dead {
            error: ErrorNote::now("http_status", "HTTP 400", Some(400)),
        }))
    }

    fn buried<'a>(&'a self, _job: &'a Job) -> BoxFuture<'a, ()> {
        Box::pin(async move {
            self.buried_started.fetch_add(1, Ordering::SeqCst);
            tokio::time::sleep(self.burial).await;
            self.buried_done.fetch_add(1, Ordering::SeqCst);
        })
    }
}

#[tokio::test]
async fn a_cut_never_separates_a_dead_letter_from_its_burial() {
    let r = rig("rv-buried").await;
    park(&r, 1).await;
    let (tx, rx) = watch::channel(false);
    let handler = DiesAtTheSignal {
        stop: tx,
        burial: SHUTDOWN_JOB_GRACE * 2,
        buried_started: AtomicU32::new(0),
        buried_done: AtomicU32::new(0),
    };
    let d = Drainer {
        queue: &r.queue,
        lock: &r.lock,
        handler: &handler,
        alerts: &LogAlerts,
        env: "test",
        cfg: cfg(false),
        hooks: lambda_hooks(&rx),
    };
    let passes = passes(d.run(Deadline::after(Duration::from_secs(120))).await);
    let stats = r.queue.stats().await.expect("stats");
    eprintln!("passes {passes:?}\nstats {stats:?}");
    assert_eq!(stats.dead, 1, "the entry is a dead letter: {stats:?}");
    assert_eq!(handler.buried_started.load(Ordering::SeqCst), 1);
    // Cut between its dead-letter settle and its burial, the entry would be dead while its
    // run still counted it parked: the run could never complete.
    assert_eq!(
        handler.buried_done.load(Ordering::SeqCst),
        1,
        "the cut dropped the job between its dead-letter settle and its run's count"
    );
    assert_eq!((passes[0].dead_lettered, passes[0].skipped), (1, 0), "{passes:?}");
}

// ------------------------------------------------------------------------------------------
// 2. The stop lands after the jobs, while the pass delivers alerts or does what it owes.

/// Every job done at once; what a pass owes afterwards (run records, backfill pump) takes
/// `owed`, and says when it starts.
struct SlowAfterPass {
    entered: Notify,
    owed: Duration,
}

impl JobHandler for SlowAfterPass {
    fn handle<'a>(&'a self, _job: &'a Job, _deadline: Deadline) -> BoxFuture<'a, Outcome> {
        Box::pin(std::future::ready(Outcome::Done))
    }

    fn after_pass<'a>(
        &'a self,
        _alerts: Option<&'a dyn AlertSink>,
        _deadline: Deadline,
    ) -> BoxFuture<'a, ()> {
        Box::pin(async move {
            self.entered.notify_one();
            tokio::time::sleep(self.owed).await;
        })
    }
}

/// A known limit: `after_pass` is not cut (it takes a run's alerts before it sends them,
/// so a cut could lose them); a stop during it waits for it, and a process exiting at
/// the grace leaves the lock to its TTL (the invocation's deadline plus 30 s).
#[tokio::test]
#[ignore = "known limit: a stop during after_pass waits for it"]
async fn a_stop_during_after_pass_frees_the_lock_within_the_grace() {
    let r = rig("rv-afterpass").await;
    park(&r, 2).await;
    let (tx, rx) = watch::channel(false);
    let handler = SlowAfterPass {
        entered: Notify::new(),
        owed: Duration::from_secs(2),
    };
    let d = Drainer {
        queue: &r.queue,
        lock: &r.lock,
        handler: &handler,
        alerts: &LogAlerts,
        env: "test",
        cfg: cfg(false),
        hooks: lambda_hooks(&rx),
    };
    stop_when_entered(&handler.entered, &tx, &r, d).await;
}

/// Runs `d`, stops it once `entered` is notified, and checks what Lambda's exit at the grace
/// (lambda.rs: `idle_within(SHUTDOWN_GRACE)`, then `exit(0)`) would leave: the run over
/// within the grace and the lock free.
async fn stop_when_entered(entered: &Notify, tx: &watch::Sender<bool>, r: &Rig, d: Drainer<'_>) {
    let run = async {
        let report = d.run(Deadline::after(Duration::from_secs(120))).await;
        (report, Instant::now())
    };
    let signal = async {
        entered.notified().await;
        let at = Instant::now();
        tx.send_replace(true);
        tokio::time::sleep(SHUTDOWN_GRACE).await;
        let ttl = r.lock.holder_ttl().await.expect("ttl");
        (at, ttl)
    };
    let ((report, ended), (signalled, ttl_at_exit)) = tokio::join!(run, signal);
    passes(report);
    let took = ended.duration_since(signalled);
    eprintln!("run ended {took:?} after the stop; lock TTL at the exit: {ttl_at_exit:?}");
    assert_eq!(ttl_at_exit, None, "the lock outlived the process");
    assert!(took < SHUTDOWN_GRACE, "the run took {took:?} to stop");
}

/// A dead-letter alert target whose delivery takes `took` (Slack, up to ALERT_TIMEOUT).
#[derive(Debug)]
struct SlowSink {
    entered: Notify,
    took: Duration,
}

impl AlertSink for SlowSink {
    fn dead_lettered<'a>(
        &'a self,
        _env: &'a str,
        _alerts: &'a [DeadLetterAlert],
    ) -> BoxFuture<'a, Result<(), AlertError>> {
        Box::pin(async move {
            self.entered.notify_one();
            tokio::time::sleep(self.took).await;
            Ok(())
        })
    }
}

/// Every job dead at once (no burial work).
struct AllDead;

impl JobHandler for AllDead {
    fn handle<'a>(&'a self, _job: &'a Job, _deadline: Deadline) -> BoxFuture<'a, Outcome> {
        Box::pin(std::future::ready(Outcome::Dead {
            error: ErrorNote::now("http_status", "HTTP 400", Some(400)),
        }))
    }
}

#[tokio::test]
async fn a_stop_during_the_alert_delivery_frees_the_lock_within_the_grace() {
    let r = rig("rv-alerts").await;
    park(&r, 1).await;
    let (tx, rx) = watch::channel(false);
    let sink = SlowSink {
        entered: Notify::new(),
        took: Duration::from_secs(2),
    };
    let d = Drainer {
        queue: &r.queue,
        lock: &r.lock,
        handler: &AllDead,
        alerts: &sink,
        env: "test",
        cfg: cfg(true),
        hooks: lambda_hooks(&rx),
    };
    stop_when_entered(&sink.entered, &tx, &r, d).await;
}

// ------------------------------------------------------------------------------------------
// 3. A release refused after the cut is not counted as handed back.

/// Its job is buried meanwhile by someone else (an SQS handler that saw the same job fail
/// for good: queue_bury drops the lease), as SIGTERM arrives; the call then hangs.
struct BuriedElsewhere {
    queue: RetryQueue,
    stop: watch::Sender<bool>,
}

impl JobHandler for BuriedElsewhere {
    fn handle<'a>(&'a self, job: &'a Job, _deadline: Deadline) -> BoxFuture<'a, Outcome> {
        Box::pin(async move {
            self.queue
                .record_dead(job, ErrorNote::now("http_status", "HTTP 400 (SQS)", Some(400)))
                .await
                .expect("bury");
            self.stop.send_replace(true);
            std::future::pending::<Outcome>().await
        })
    }
}

#[tokio::test]
async fn a_refused_release_after_the_cut_is_not_counted_as_skipped() {
    let r = rig("rv-refused").await;
    park(&r, 1).await;
    let (tx, rx) = watch::channel(false);
    let handler = BuriedElsewhere {
        queue: r.queue.clone(),
        stop: tx,
    };
    let d = Drainer {
        queue: &r.queue,
        lock: &r.lock,
        handler: &handler,
        alerts: &LogAlerts,
        env: "test",
        cfg: cfg(false),
        hooks: lambda_hooks(&rx),
    };
    let passes = passes(d.run(Deadline::after(Duration::from_secs(120))).await);
    let stats = r.queue.stats().await.expect("stats");
    eprintln!("passes {passes:?}\nstats {stats:?}");
    assert_eq!((stats.depth, stats.dead), (0, 1), "{stats:?}");
    assert_eq!(passes[0].skipped, 0, "nothing was handed back: {passes:?}");
}
