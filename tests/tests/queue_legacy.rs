//! The queue state the previous release wrote (format 1, no version kept), read by this
//! one; and a state from a newer release, refused with a clear error.
//!
//! Format-1 state is written by that release's own scripts, kept verbatim in
//! `tests/fixtures/queue-v1/`, so the layout and value formats are exactly its own.

use std::time::Duration;

use lawsync::alert::LogAlerts;
use lawsync::deadline::Deadline;
use lawsync::drainer::{DrainReport, Drainer, DrainerConfig, JobHandler, Outcome};
use lawsync::keys::QueueKeys;
use lawsync::law::BoxFuture;
use lawsync::lock::RunnerLock;
use lawsync::queue::{Backoff, Enqueued, ErrorNote, Job, JobKind, RetryQueue, Settled};
use lawsync::{RedisConn, RedisFailure};
use lawsync_tests::servers::{Topology, unique_ns};
use redis::Script;

/// One stored job of each kind, as this release and the previous one write them.
const STORED_JOBS: &str = include_str!("../fixtures/jobs.jsonl");

const V1_ENQUEUE: &str = include_str!("../fixtures/queue-v1/queue_enqueue.lua");
const V1_CLAIM: &str = include_str!("../fixtures/queue-v1/queue_claim.lua");
const V1_SETTLE: &str = include_str!("../fixtures/queue-v1/queue_settle.lua");

/// The previous release's hands on one namespace.
struct V1<'a> {
    conn: RedisConn,
    k: &'a QueueKeys,
}

impl V1<'_> {
    /// Its `enqueue`: member `KIND:identity`, history `[note]`.
    async fn enqueue(&self, job: &Job, delay_ms: u64) {
        let history = serde_json::to_string(&[note("v1 failure")]).expect("json");
        let (status, _): (i64, i64) = Script::new(V1_ENQUEUE)
            .key(&self.k.jobs)
            .key(&self.k.first)
            .key(&self.k.count)
            .key(&self.k.errors)
            .key(&self.k.waiting)
            .key(&self.k.dead)
            .arg(format!("{}:{}", job.kind, job.identity))
            .arg(serde_json::to_string(job).expect("json"))
            .arg(delay_ms)
            .arg(history)
            .invoke_async(&mut self.conn.clone())
            .await
            .expect("v1 enqueue");
        assert_eq!(status, 1);
    }

    /// Its `claim`: `(id, token)` of each entry leased.
    async fn claim(&self, k: usize, lease_ms: u64) -> Vec<(String, String)> {
        let reply: Vec<String> = Script::new(V1_CLAIM)
            .key(&self.k.waiting)
            .key(&self.k.ready)
            .key(&self.k.leased)
            .key(&self.k.first)
            .key(&self.k.lease)
            .key(&self.k.jobs)
            .key(&self.k.count)
            .key(&self.k.errors)
            .key(&self.k.seq)
            .arg(k)
            .arg(lease_ms)
            .arg(200)
            .arg("0123456789abcdef")
            .invoke_async(&mut self.conn.clone())
            .await
            .expect("v1 claim");
        reply[3..]
            .chunks(6)
            .map(|f| (f[0].clone(), f[1].clone()))
            .collect()
    }

    /// Its dead-lettering of a leased entry: count 30, history of two notes, an alert owed.
    async fn kill(&self, id: &str, token: &str) {
        let history = serde_json::to_string(&[note("v1 failure"), note("v1 last")]).expect("json");
        let done: i64 = Script::new(V1_SETTLE)
            .key(&self.k.leased)
            .key(&self.k.lease)
            .key(&self.k.jobs)
            .key(&self.k.count)
            .key(&self.k.errors)
            .key(&self.k.first)
            .key(&self.k.waiting)
            .key(&self.k.ready)
            .key(&self.k.dead)
            .key(&self.k.alerts)
            .arg(id)
            .arg(token)
            .arg("dead")
            .arg(30)
            .arg(history)
            .arg(0)
            .invoke_async(&mut self.conn.clone())
            .await
            .expect("v1 settle");
        assert_eq!(done, 1);
    }
}

fn note(text: &str) -> ErrorNote {
    ErrorNote::now("http_status", text, Some(503))
}

fn detail(id: u32) -> Job {
    Job::detail(&id.to_string())
}

/// A search whose identity (144 bytes) the previous release named in full and this one
/// names by a digest.
fn long_search() -> Job {
    let req = lawsync::law::SearchRequest {
        from: "20260101".into(),
        to: "20260131".into(),
        query: Some("손해배상".repeat(10)),
        page: None,
        display: None,
        ..Default::default()
    };
    Job::search(&req)
}

/// The kinds' stored names are what stored state holds: each stored job reads as its kind
/// (none as an unknown type) and is written back byte for byte.
#[test]
fn stored_jobs_read_as_their_kinds_and_write_back_unchanged() {
    let jobs: Vec<Job> = STORED_JOBS
        .lines()
        .map(|l| serde_json::from_str(l).expect("a stored job reads"))
        .collect();
    let kinds: Vec<JobKind> = jobs.iter().map(|j| j.kind.clone()).collect();
    assert_eq!(kinds, JobKind::KNOWN);
    for (line, job) in STORED_JOBS.lines().zip(&jobs) {
        assert_eq!(serde_json::to_string(job).expect("json"), line);
    }
    let window = lawsync::law::SearchRequest {
        from: "20260101".into(),
        to: "20260131".into(),
        query: None,
        page: None,
        display: None,
        ..Default::default()
    };
    assert_eq!(jobs[0], Job::search(&window));
    assert_eq!(jobs[1], Job::detail("123"));
    assert_eq!(jobs[1].id(), format!("{}:123", JobKind::Detail));
}

struct Done;

impl JobHandler for Done {
    fn handle<'a>(&'a self, _job: &'a Job, _deadline: Deadline) -> BoxFuture<'a, Outcome> {
        Box::pin(std::future::ready(Outcome::Done))
    }
}

#[tokio::test]
async fn state_written_by_the_previous_release_is_read_whole() {
    for topo in Topology::EVERY {
        let ns = unique_ns("v1");
        let k = ns.queue();
        let conn = topo.connect().await;
        let v1 = V1 {
            conn: conn.clone(),
            k: &k,
        };
        // Written by the previous release: one leased (live token) and one dead, then one
        // due, one waiting, and one long search, due.
        v1.enqueue(&detail(4), 0).await;
        v1.enqueue(&detail(5), 0).await;
        tokio::time::sleep(Duration::from_millis(5)).await;
        let leased = v1.claim(2, 700).await;
        assert_eq!(leased.len(), 2);
        let (dead_id, dead_token) = leased.iter().find(|(id, _)| *id == detail(5).id()).expect("5");
        v1.kill(dead_id, dead_token).await;
        v1.enqueue(&detail(1), 0).await;
        v1.enqueue(&detail(2), 60_000).await;
        v1.enqueue(&long_search(), 0).await;
        let legacy = format!("{}:{}", JobKind::Search, long_search().identity);
        assert_ne!(long_search().id(), legacy, "the name differs in this release");

        let q = RetryQueue::new(conn.clone(), &ns).with_backoff(Backoff {
            base: Duration::from_millis(1),
            cap: Duration::from_millis(1),
        });
        let stats = q.stats().await.expect("stats");
        assert_eq!(
            (stats.depth, stats.due_now, stats.in_flight, stats.dead),
            (4, 2, 1, 1),
            "{topo:?}: {stats:?}"
        );
        let alerts = q.pending_alerts(10).await.expect("alerts");
        assert_eq!(alerts.len(), 1, "{topo:?}: the owed alert is kept");
        // The same jobs again: already queued, under the names they have.
        for job in [detail(4), detail(1), long_search()] {
            let again = q.enqueue(&job, None, note("again")).await.expect("enqueue");
            assert_eq!(again, Enqueued::AlreadyQueued, "{topo:?}: {job:?}");
        }
        assert_eq!(
            q.stats().await.expect("stats").depth,
            4,
            "{topo:?}: nothing filed twice"
        );
        // Claim: the due ones, not the one whose lease lives.
        let claim = q.claim(10, Duration::from_secs(30)).await.expect("claim");
        let mut ids: Vec<&str> = claim.entries.iter().map(|e| e.id.as_str()).collect();
        ids.sort_unstable();
        assert_eq!(ids, [detail(1).id().as_str(), legacy.as_str()], "{topo:?}");
        for e in &claim.entries {
            assert_eq!((e.retry_count, e.errors.len()), (0, 1), "{topo:?}: {e:?}");
        }
        let search = claim.entries.iter().find(|e| e.id == legacy).expect("search");
        assert_eq!(search.job, long_search(), "{topo:?}");
        assert!(q.ack(&claim.entries[0]).await.expect("ack"));
        let failed = q
            .fail(&claim.entries[1], note("v2"), None, 30)
            .await
            .expect("fail");
        assert!(
            matches!(failed, Settled::Rescheduled { .. }),
            "{topo:?}: {failed:?}"
        );
        // The previous release's lease ends: the entry comes back, once.
        tokio::time::sleep(Duration::from_millis(800)).await;
        // Redrive the dead letter; then a drainer pass works off everything due.
        assert_eq!(q.redrive(Some(&detail(5).id()), 10).await.expect("redrive"), 1);
        let lock = RunnerLock::new(conn.clone(), ns.drainer_lock());
        let drainer = Drainer {
            queue: &q,
            lock: &lock,
            handler: &Done,
            alerts: &LogAlerts,
            env: "test",
            cfg: DrainerConfig {
                interval: Duration::from_millis(5),
                max_attempts: 30,
                time_per_job: Duration::from_millis(10),
                max_passes: Some(1),
                linger: false,
                send_alerts: true,
            },
            hooks: Default::default(),
        };
        let DrainReport::Ran { passes } = drainer.run(Deadline::NONE).await.expect("drain") else {
            panic!("busy")
        };
        let p = &passes[0];
        assert_eq!(
            (p.claimed, p.succeeded, p.reclaimed),
            (3, 3, 1),
            "{topo:?}: {p:?}"
        );
        let stats = q.stats().await.expect("stats");
        assert_eq!(
            (stats.depth, stats.dead),
            (1, 0),
            "{topo:?}: only {} waits: {stats:?}",
            detail(2).id()
        );
        let mut c = conn.clone();
        let v: Option<String> = redis::cmd("HGET")
            .arg(&k.meta)
            .arg("v")
            .query_async(&mut c)
            .await
            .expect("v");
        assert_eq!(v.as_deref(), Some("2"), "{topo:?}: the state now says its format");
    }
}

#[tokio::test]
async fn state_from_a_newer_release_is_refused_clearly() {
    for topo in Topology::EVERY {
        let ns = unique_ns("v99");
        let k = ns.queue();
        let conn = topo.connect().await;
        let q = RetryQueue::new(conn.clone(), &ns);
        q.enqueue(&detail(1), None, note("x")).await.expect("enqueue");
        let _: () = redis::cmd("HSET")
            .arg(&k.meta)
            .arg("v")
            .arg(99)
            .query_async(&mut conn.clone())
            .await
            .expect("a newer release");
        let expected = format!(
            "Redis state is newer than this release: queue state {}: version 99, this release understands up to 2; upgrade every instance",
            k.meta
        );
        let errors: Vec<RedisFailure> = vec![
            q.enqueue(&detail(2), None, note("x")).await.expect_err("enqueue"),
            q.claim(5, Duration::from_secs(5)).await.expect_err("claim"),
            q.stats().await.expect_err("stats"),
            q.redrive(None, 5).await.expect_err("redrive"),
            q.record_dead(&detail(3), note("x")).await.expect_err("bury"),
        ];
        for e in errors {
            assert_eq!(e.to_string(), expected, "{topo:?}");
        }
        let _: () = redis::cmd("HSET")
            .arg(&k.meta)
            .arg("v")
            .arg("two")
            .query_async(&mut conn.clone())
            .await
            .expect("garbage");
        let e = q.stats().await.expect_err("stats");
        assert!(matches!(e, RedisFailure::Corrupt(_)), "{topo:?}: {e}");
    }
}
