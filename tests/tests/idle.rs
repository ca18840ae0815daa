//! No idle key while work waits: the drainer against the look-alike, real Redis, a folder
//! store. When a cooldown ends or a parked entry falls due, the first call starts within
//! an interval (+ the gate's tolerance), on Redis' clock; and an upstream slower than the
//! interval does not idle the key, because the next granted call starts while one is in
//! flight, never closer than the interval to it.

use std::sync::Arc;
use std::time::Duration;

use lawsync::alert::LogAlerts;
use lawsync::app::Deps;
use lawsync::app::outbox::SqsOutbox;
use lawsync::config::Config;
use lawsync::documents::LocalDir;
use lawsync::drainer::DrainReport;
use lawsync::queue::{ErrorNote, Job, RetryQueue};
use lawsync::{Deadline, Gate, LawClient, Namespace, Secret};
use lawsync_tests::lookalike::{Arrival, Lookalike, LookalikeConfig};
use lawsync_tests::servers::{Topology, moto_sdk, unique_env};

const OC: &str = "oc-SECRET-idle4411";
/// The gate's interval in these tests: short, so a test takes seconds, and long enough that
/// a busy 2-core machine's scheduling delays stay well inside it.
const INTERVAL: Duration = Duration::from_millis(200);
/// The look-alike's rule: 50 ms below the interval, as law.go.kr's 1 s is below the default
/// 1,050 ms, for the same reason: an arrival may trail its grant by a connection set-up.
const RULE: Duration = Duration::from_millis(150);

/// One test at a time: what is measured is one drainer's timing, not three drainers
/// sharing a 2-core machine's CPU.
static SERIAL: tokio::sync::Mutex<()> = tokio::sync::Mutex::const_new(());

struct Rig {
    deps: Deps,
    up: Lookalike,
    conn: lawsync::RedisConn,
}

/// A drainer's world: the look-alike answering after `latency`, a gate of [`INTERVAL`]
/// whose wait bound (500 ms) a longer cooldown exceeds, as a 35 s Retry-After exceeds
/// the 30 s bound in production, and a drain interval of `drain_ms`.
async fn rig(label: &str, latency: Duration, drain_ms: u64) -> Rig {
    let up = Lookalike::start(LookalikeConfig {
        interval: Some(RULE),
        latency,
        ..LookalikeConfig::new(OC)
    })
    .await
    .expect("look-alike");
    let env = unique_env(label);
    let vars = [
        ("LAW_API_OC", OC.to_owned()),
        ("LAW_API_BASE_URL", up.base_url.clone()),
        ("LAW_API_REQUEST_INTERVAL_MS", INTERVAL.as_millis().to_string()),
        ("LAW_API_MAX_WAIT_MS", "500".to_owned()),
        ("DRAIN_INTERVAL_MS", drain_ms.to_string()),
        ("APP_ENV", env.clone()),
    ];
    let cfg =
        Config::from_lookup(|k| vars.iter().find(|(n, _)| *n == k).map(|(_, v)| v.clone())).expect("config");
    let ns = Namespace::new(&env, "law-go-kr").expect("ns");
    let conn = Topology::Standalone.connect().await;
    let gate = Arc::new(Gate::new(conn.clone(), &ns, cfg.gate));
    let law = LawClient::new(&cfg.law, Secret::new(OC), gate).expect("client");
    let docs = Arc::new(LocalDir::new(std::env::temp_dir().join(&env)));
    let outbox = Arc::new(SqsOutbox::new(&moto_sdk().await, None, None));
    let queue = RetryQueue::new(conn.clone(), &ns).with_secret(Secret::new(OC));
    Rig {
        deps: Deps::assemble(cfg, law, queue, docs, outbox, ns),
        up,
        conn,
    }
}

impl Rig {
    /// Parks `n` detail jobs of precedents the look-alike has, due `due_in` from now.
    async fn park(&self, n: usize, due_in: Duration) {
        let ids = self.up.corpus().window("20260105", "20260206");
        for p in ids.iter().take(n) {
            let note = ErrorNote::now("http_status", "HTTP 503", Some(503));
            self.deps
                .queue
                .enqueue_due_in(&Job::detail(&p.id.to_string()), due_in, note)
                .await
                .expect("park");
        }
    }

    /// Redis' clock, epoch ms, and this process's at the same moment.
    async fn redis_now_ms(&self) -> f64 {
        let mut conn = self.conn.clone();
        let (s, us): (u64, u64) = redis::cmd("TIME").query_async(&mut conn).await.expect("TIME");
        s as f64 * 1000.0 + us as f64 / 1000.0
    }

    /// Milliseconds to add to an arrival (this machine's clock) to read it on Redis' clock.
    async fn offset_ms(&self) -> f64 {
        let before = lawsync::clock::epoch_millis_f64(std::time::SystemTime::now());
        let redis = self.redis_now_ms().await;
        let after = lawsync::clock::epoch_millis_f64(std::time::SystemTime::now());
        redis - (before + after) / 2.0
    }

    async fn drain(&self, deadline: Duration) -> Vec<lawsync::drainer::PassReport> {
        match self
            .deps
            .drain(&LogAlerts, Deadline::after(deadline), None)
            .await
            .expect("drain")
        {
            DrainReport::Ran { passes } => passes,
            DrainReport::Busy => panic!("lock busy"),
        }
    }

    /// The look-alike's API calls, oldest first, none of them a broken rule.
    fn calls(&self) -> Vec<Arrival> {
        let mut calls = self.up.arrivals();
        calls.sort_by(|a, b| a.at_ms.total_cmp(&b.at_ms));
        assert!(
            calls.iter().all(|a| a.cause != "rate"),
            "a call broke the look-alike's rule: {calls:?}"
        );
        calls
    }

    /// Interval + the gate's tolerance: how late a first call may be and still be on time.
    fn allowance_ms(&self) -> f64 {
        let g = self.deps.cfg.gate;
        (g.interval + g.tolerance).as_secs_f64() * 1000.0
    }
}

/// A cooldown longer than the drainer's wait bound is refused by the gate; the drainer
/// waits for its end rather than end its run, and calls within an interval of it.
#[tokio::test]
async fn the_first_call_after_a_cooldown_starts_within_an_interval_of_its_end() {
    let _one = SERIAL.lock().await;
    let r = rig("idle-cool", Duration::ZERO, 10_000).await;
    r.park(3, Duration::ZERO).await;
    let cooldown = r
        .deps
        .law
        .gate()
        .defer(Duration::from_millis(1500))
        .await
        .expect("cooldown");
    let end_ms = cooldown.until_us as f64 / 1000.0;
    let passes = r.drain(Duration::from_secs(15)).await;
    let offset = r.offset_ms().await;
    let calls = r.calls();
    let first = calls.first().expect("a call after the cooldown").at_ms + offset;
    let late = first - end_ms;
    eprintln!(
        "first call {late:.1} ms after the cooldown's end (allowance {:.0} ms)",
        r.allowance_ms()
    );
    assert!(
        late >= -1.0,
        "a call inside the cooldown ({late:.1} ms): {passes:?}"
    );
    assert!(
        late <= r.allowance_ms(),
        "the key sat idle {late:.1} ms after the cooldown ended: {passes:?}"
    );
    assert!(
        passes[0].out_of_room,
        "the first pass met the cooldown: {passes:?}"
    );
    assert_eq!(calls.len(), 3, "{calls:?}");
    assert_eq!(r.deps.queue.stats().await.expect("stats").depth, 0, "{passes:?}");
}

/// An entry that falls due later than the next pass would start is waited for while the
/// run's deadline leaves room, and called within an interval of falling due.
#[tokio::test]
async fn the_first_call_for_a_parked_entry_starts_within_an_interval_of_it_falling_due() {
    let _one = SERIAL.lock().await;
    let r = rig("idle-due", Duration::ZERO, 300).await;
    // A gate in use (a fresh one opens with an interval of quiet, not what is measured here).
    r.deps
        .law
        .gate()
        .defer(Duration::from_millis(1))
        .await
        .expect("gate state");
    let due_in = Duration::from_millis(1200);
    let before = r.redis_now_ms().await;
    r.park(1, due_in).await;
    let after = r.redis_now_ms().await;
    let passes = r.drain(Duration::from_secs(10)).await;
    let offset = r.offset_ms().await;
    let calls = r.calls();
    let first = calls.first().expect("a call once the entry is due").at_ms + offset;
    let due_ms = before + due_in.as_secs_f64() * 1000.0;
    let late = first - due_ms;
    eprintln!(
        "first call {late:.1} ms after the entry fell due (±{:.1} ms)",
        after - before
    );
    assert!(late >= 0.0, "called before it was due ({late:.1} ms): {passes:?}");
    assert!(
        late <= r.allowance_ms() + (after - before),
        "the key sat idle {late:.1} ms after the entry fell due: {passes:?}"
    );
}

/// With law.go.kr slower than the interval (a reply takes 2.5 intervals), one job at a
/// time would call once per reply; the drainer starts the next granted call while one is
/// in flight, and no two starts come closer than the look-alike's rule.
#[tokio::test]
async fn a_slow_upstream_does_not_idle_the_key_and_calls_stay_spaced() {
    let latency = INTERVAL * 5 / 2;
    let _one = SERIAL.lock().await;
    let r = rig("idle-slow", latency, 10_000).await;
    let jobs = 12;
    r.park(jobs, Duration::ZERO).await;
    let passes = r.drain(Duration::from_secs(20)).await;
    let calls = r.calls();
    assert_eq!(calls.len(), jobs, "{passes:?}");
    assert_eq!(r.deps.queue.stats().await.expect("stats").depth, 0, "{passes:?}");
    let gaps: Vec<f64> = calls.windows(2).map(|w| w[1].at_ms - w[0].at_ms).collect();
    let min = gaps.iter().copied().fold(f64::INFINITY, f64::min);
    let rule_ms = RULE.as_secs_f64() * 1000.0;
    assert!(min >= rule_ms, "two calls {min:.1} ms apart: {gaps:?}");
    // Structural: a call started while the one before it was still in flight (its reply
    // takes `latency`), which one job at a time can never do.
    let latency_ms = latency.as_secs_f64() * 1000.0;
    let overlapped = gaps.iter().filter(|&&g| g < latency_ms).count();
    eprintln!(
        "gaps between call starts (ms): {gaps:.0?}; {overlapped} of {} overlapped",
        gaps.len()
    );
    assert!(overlapped >= gaps.len() / 2, "calls did not overlap: {gaps:?}");
}
