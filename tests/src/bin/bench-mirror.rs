//! bench-mirror: three mirror designs, each a backfill followed by days of schedules, against
//! the look-alike serving a world at law.go.kr's volume, in one run. See
//! `docs/bench-mirror.md` for what is simulated and how each figure is defined.
//!
//! - (a) `day-before`: each day a sync of yesterday's decision date, every hit fetched
//!   (`refresh`, as the seed fetched without a held check); its backfill a sync of the
//!   whole range, every hit fetched.
//! - (b) `lookback`: each day every month window of the range is paged, held documents
//!   skipped; its backfill is the same run on day 0.
//! - (c) `daily`: the daily schedule (`{"schedule":"daily"}` firings) after a backfill of
//!   month windows plus the undated hits, by the backfill message ([`backfill_daily`]).
//!
//! Each design has its own look-alike (the same world), namespace and folder. The real
//! handlers run as `--consumers` concurrent consumers per queue plus the drainer, on real
//! Redis; the queues are in memory. The look-alike's today moves one day at a time; each
//! day runs until the queues and the retry queue are empty and the day's runs complete.
//!
//! Usage: `bench-mirror [flags]` with `LAWSYNC_TEST_REDIS_URL` set (`make bench-mirror`
//! starts Redis). Flags: see [`USAGE`].
#![allow(clippy::print_stdout, clippy::print_stderr)] // a report printer

use std::collections::{BTreeMap, HashMap};
use std::path::Path;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::time::{Duration, Instant, SystemTime};

use lawsync::Deadline;
use lawsync::app::schedule::{Firing, ScheduleKind};
use lawsync::app::sqs::{MessageKind, handle_batch};
use lawsync::config::GateConfig;
use lawsync::law::SearchRequest;
use lawsync::law::calendar::{day_number, yyyymmdd};
use lawsync::mirror::runs::{RunId, RunPlan};
use lawsync_tests::lookalike::{Arrival, Lookalike, LookalikeConfig, Precedent, World, WorldShape};
use lawsync_tests::mirror::{MirrorRig, Queues, RigSetup, Store, event};

const USAGE: &str = "usage: bench-mirror [--rule-ms MS] [--gate-ms MS] [--tolerance-ms MS] [--days N] [--scale F] [--seed N] [--designs a,b,c] [--consumers K]";

/// The first simulated day is the day after this one; the backfill runs on it.
const DAY0: &str = "20260901";
/// The real key's pace: one call every 1,050 ms (policy's default interval). A call slot of
/// the bench stands for one of these, so bench time × (1050 ms ÷ gate interval) is
/// simulated time.
const REAL_INTERVAL_MS: f64 = 1050.0;
/// The key's daily budget at law.go.kr's 1 call/s.
const DAILY_BUDGET: f64 = 86_400.0;
/// Days at the end of the run counted as steady state.
const STEADY_DAYS: i64 = 30;
/// The schedules fire at 04:00 KST, 19:00 UTC the day before.
const FIRE_HOUR_KST: f64 = 4.0;
/// law.go.kr's page size, the most the handlers ask for.
const PAGE: usize = 100;
/// A day that has not settled after this long is a failure of the bench.
const DAY_TIMEOUT: Duration = Duration::from_secs(3600);

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Design {
    DayBefore,
    Lookback,
    Daily,
}

impl Design {
    fn letter(self) -> &'static str {
        match self {
            Design::DayBefore => "a",
            Design::Lookback => "b",
            Design::Daily => "c",
        }
    }

    fn name(self) -> &'static str {
        match self {
            Design::DayBefore => "(a) day before",
            Design::Lookback => "(b) lookback",
            Design::Daily => "(c) daily",
        }
    }
}

/// The gate's tolerance: `--tolerance-ms`, or by default the share of the interval it has
/// at law.go.kr's (10 ms of 1,050, under 1 %), so that the pace over the interval, which
/// the makespan goal counts against, is the real key's. The policy's own default at a fast
/// interval has a 2 ms floor for scheduling noise, 9 % of a 23 ms interval.
fn tolerance_ms(o: &Opts) -> f64 {
    o.tolerance_ms.unwrap_or_else(|| {
        let real = Duration::from_secs_f64(REAL_INTERVAL_MS / 1000.0);
        o.gate_ms * lawsync::policy::default_gate_tolerance(real).as_secs_f64() * 1000.0 / REAL_INTERVAL_MS
    })
}

#[derive(Debug, Clone)]
struct Opts {
    rule_ms: f64,
    gate_ms: f64,
    tolerance_ms: Option<f64>,
    days: i64,
    scale: f64,
    seed: u64,
    designs: Vec<Design>,
    consumers: usize,
}

fn parse_args(args: &[String]) -> Result<Opts, String> {
    let mut o = Opts {
        // A 20 ms rule: fast enough for a day of calls in minutes, slow enough that this
        // 2-core machine keeps up (at 2 ms it serves about 100 calls a second, whatever
        // the gate) and that the policy's floors for scheduling noise (a 2 ms grant
        // validity) are a tenth of the interval, not all of it. The gate is 3 ms over the
        // rule: the validity and 1 ms of jitter, as law.go.kr's 50 ms margin covers 5 ms.
        rule_ms: 20.0,
        gate_ms: 23.0,
        tolerance_ms: None,
        days: 60,
        scale: 1.0,
        seed: 20_261_202,
        designs: vec![Design::DayBefore, Design::Lookback, Design::Daily],
        consumers: 4,
    };
    let mut it = args.iter();
    while let Some(flag) = it.next() {
        let v = it.next().ok_or_else(|| format!("{flag}: missing value"))?;
        let float = |v: &str| -> Result<f64, String> {
            v.parse::<f64>()
                .ok()
                .filter(|x| x.is_finite() && *x > 0.0)
                .ok_or_else(|| format!("{flag}: not a positive number: {v:?}"))
        };
        let int = |v: &str| -> Result<u64, String> {
            v.parse::<u64>()
                .map_err(|_| format!("{flag}: not a whole number: {v:?}"))
        };
        match flag.as_str() {
            "--rule-ms" => o.rule_ms = float(v)?,
            "--gate-ms" => o.gate_ms = float(v)?,
            "--tolerance-ms" => o.tolerance_ms = Some(float(v)?),
            "--days" => o.days = int(v)? as i64,
            "--scale" => o.scale = float(v)?,
            "--seed" => o.seed = int(v)?,
            "--consumers" => o.consumers = int(v)? as usize,
            "--designs" => {
                o.designs = v
                    .split(',')
                    .map(|d| match d.trim() {
                        "a" => Ok(Design::DayBefore),
                        "b" => Ok(Design::Lookback),
                        "c" => Ok(Design::Daily),
                        other => Err(format!("--designs: unknown design {other:?}; a, b or c")),
                    })
                    .collect::<Result<_, _>>()?;
            }
            other => return Err(format!("unknown flag {other}")),
        }
    }
    if o.scale > 1.0 {
        return Err(format!("--scale: at most 1 (the whole corpus), got {}", o.scale));
    }
    if !(1..=365).contains(&o.days) {
        return Err(format!("--days: 1..=365, got {}", o.days));
    }
    if o.days <= STEADY_DAYS {
        eprintln!(
            "bench-mirror: --days {} leaves no steady state of {STEADY_DAYS} days after a warm-up; every day counts",
            o.days
        );
    }
    if !(1..=64).contains(&o.consumers) {
        return Err(format!("--consumers: 1..=64, got {}", o.consumers));
    }
    if o.gate_ms < o.rule_ms {
        return Err(format!(
            "--gate-ms ({}) below --rule-ms ({}): every call would break the rule",
            o.gate_ms, o.rule_ms
        ));
    }
    if o.designs.is_empty() {
        return Err("--designs: none given".to_owned());
    }
    Ok(o)
}

fn ms(x: f64) -> Duration {
    Duration::from_secs_f64(x / 1000.0)
}

fn shift(day: &str, by: i64) -> String {
    yyyymmdd(day_number(day).expect("a day") + by)
}

/// 19:00 UTC on the day before `day`: 04:00 KST on `day`.
fn fire_at(day: &str) -> String {
    let d = shift(day, -1);
    format!("{}-{}-{}T19:00:00Z", &d[..4], &d[4..6], &d[6..])
}

/// Simulated hours since DAY0 00:00 KST of the start of `day` (YYYYMMDD).
fn day_hours(day: &str) -> f64 {
    (day_number(day).expect("a day") - day_number(DAY0).expect("DAY0")) as f64 * 24.0
}

fn now_ms() -> f64 {
    lawsync::clock::epoch_millis_f64(SystemTime::now())
}

/// The month windows (first day to last, the last one cut at `to`) from `from`'s month to
/// `to`'s, oldest first.
fn months(from: &str, to: &str) -> Vec<(String, String)> {
    let (mut y, mut m): (i64, i64) = (
        from[..4].parse().expect("year"),
        from[4..6].parse().expect("month"),
    );
    let mut out = Vec::new();
    loop {
        let first = lawsync::law::calendar::days_from_civil(y, m, 1);
        let last = first + lawsync::law::calendar::days_in_month(y, m) - 1;
        let (a, b) = (yyyymmdd(first), yyyymmdd(last));
        if a.as_str() > to {
            break;
        }
        out.push((a, b.min(to.to_owned())));
        if m == 12 {
            (y, m) = (y + 1, 1);
        } else {
            m += 1;
        }
    }
    out
}

/// Counters the consumers keep, for the settle check and the idle measure.
#[derive(Debug, Default)]
struct Ctl {
    stop: AtomicBool,
    /// The same, for the drainer's run (its sleeps end at once).
    stop_drain: tokio::sync::watch::Sender<bool>,
    /// Consumers taking or handling a batch.
    busy: AtomicUsize,
    /// Messages taken and not yet handled.
    held: AtomicUsize,
    /// Messages a handler gave back (a batch item failure), sent again.
    returned: AtomicU64,
}

/// One design's rig and its workers.
struct Sim {
    design: Design,
    rig: Arc<MirrorRig>,
    ctl: Arc<Ctl>,
    /// (bench ms, work waiting) every sampling period.
    waiting: Arc<std::sync::Mutex<Vec<(f64, bool)>>>,
    tasks: Vec<tokio::task::JoinHandle<()>>,
}

async fn consumer(rig: Arc<MirrorRig>, kind: MessageKind, ctl: Arc<Ctl>) {
    while !ctl.stop.load(Ordering::Relaxed) {
        ctl.busy.fetch_add(1, Ordering::SeqCst);
        let got = rig.take(kind).await;
        if got.is_empty() {
            ctl.busy.fetch_sub(1, Ordering::SeqCst);
            tokio::time::sleep(Duration::from_micros(300)).await;
            continue;
        }
        ctl.held.fetch_add(got.len(), Ordering::SeqCst);
        let (response, _) = handle_batch(
            &rig.deps,
            kind,
            event(&got),
            Deadline::after(Duration::from_secs(60)),
        )
        .await;
        for failure in &response.batch_item_failures {
            if let Some((_, body)) = got.iter().find(|(id, _)| *id == failure.item_identifier) {
                let url = match kind {
                    MessageKind::Search => &rig.search_url,
                    MessageKind::Detail => &rig.detail_url,
                };
                rig.send(url, body).await;
                ctl.returned.fetch_add(1, Ordering::Relaxed);
            }
        }
        ctl.held.fetch_sub(got.len(), Ordering::SeqCst);
        ctl.busy.fetch_sub(1, Ordering::SeqCst);
    }
}

/// The scheduled drainer as it runs in AWS: back-to-back runs of a minute, each going
/// straight on while entries are due and sleeping until the next one falls due (or the
/// drain interval). Not counted as busy: its leased entries keep the retry queue's depth
/// above zero, which holds the settle check, and a run asleep holds nothing.
async fn drainer(rig: Arc<MirrorRig>, ctl: Arc<Ctl>, every: Duration) {
    let stop = ctl.stop_drain.subscribe();
    while !ctl.stop.load(Ordering::Relaxed) {
        let ran = rig
            .deps
            .drain_with(
                rig.alerts.as_ref(),
                Deadline::after(Duration::from_secs(60)),
                None,
                lawsync::drainer::DrainHooks {
                    on_pass: None,
                    stop: Some(&stop),
                    cut_after: None,
                },
            )
            .await;
        if !matches!(ran, Ok(lawsync::drainer::DrainReport::Ran { .. })) {
            // A handler's inline drain holds the lock, or Redis was slow on a loaded
            // machine: try again after the drain interval (in AWS, the next firing).
            tokio::time::sleep(every).await;
        }
    }
}

/// Samples whether work waits: messages in a queue, messages taken beyond those being
/// handled, or retry-queue entries due.
async fn monitor(
    rig: Arc<MirrorRig>,
    ctl: Arc<Ctl>,
    out: Arc<std::sync::Mutex<Vec<(f64, bool)>>>,
    every: Duration,
) {
    while !ctl.stop.load(Ordering::Relaxed) {
        let (s, d) = rig.memory_depths().unwrap_or((0, 0));
        let taken_waiting = ctl.held.load(Ordering::SeqCst) > ctl.busy.load(Ordering::SeqCst);
        let due = rig
            .deps
            .queue
            .stats()
            .await
            .map(|st| st.due_now > 0)
            .unwrap_or(false);
        out.lock()
            .expect("samples")
            .push((now_ms(), s + d > 0 || taken_waiting || due));
        tokio::time::sleep(every).await;
    }
}

impl Sim {
    async fn start(design: Design, o: &Opts, world: Arc<World>) -> Self {
        let gate = ms(o.gate_ms);
        let tolerance = ms(tolerance_ms(o));
        let factor = o.gate_ms / REAL_INTERVAL_MS;
        let scaled = |d: Duration| d.mul_f64(factor);
        let mut setup = RigSetup::new(Store::Folder, Queues::Memory, o.seed, Some(DAY0));
        setup.rule = Some(ms(o.rule_ms));
        setup.world = Some(world);
        setup.latency_spread = Some((gate.mul_f64(0.2), gate.mul_f64(1.5)));
        setup.gate = Some(GateConfig {
            interval: gate,
            burst: 1,
            max_wait: scaled(lawsync::policy::DEFAULT_MAX_WAIT).max(gate * 4),
            tolerance,
            grant_validity: lawsync::policy::grant_validity(gate),
        });
        // The production schedule, in bench time.
        setup.backoff = lawsync::queue::Backoff {
            base: scaled(lawsync::policy::RETRY_BACKOFF_BASE),
            cap: scaled(lawsync::policy::RETRY_BACKOFF_CAP),
        };
        let drain_every = scaled(lawsync::policy::DEFAULT_DRAIN_INTERVAL);
        setup.env = vec![
            ("HANDLERS_DRAIN", "true".to_owned()),
            ("DRAIN_INTERVAL_MS", drain_every.as_millis().max(1).to_string()),
        ];
        let rig = Arc::new(MirrorRig::start_setup(setup).await);
        let ctl = Arc::new(Ctl::default());
        let waiting = Arc::new(std::sync::Mutex::new(Vec::new()));
        let mut tasks = Vec::new();
        for kind in [MessageKind::Search, MessageKind::Detail] {
            for _ in 0..o.consumers {
                tasks.push(tokio::spawn(consumer(rig.clone(), kind, ctl.clone())));
            }
        }
        tasks.push(tokio::spawn(drainer(rig.clone(), ctl.clone(), drain_every)));
        tasks.push(tokio::spawn(monitor(
            rig.clone(),
            ctl.clone(),
            waiting.clone(),
            gate,
        )));
        Self {
            design,
            rig,
            ctl,
            waiting,
            tasks,
        }
    }

    /// Opens a run of `requests` (one part each) and sends their first pages.
    async fn run(&self, kind: &str, requests: Vec<SearchRequest>, refresh: bool) -> RunId {
        let run = RunId::fresh(kind, lawsync::clock::now_millis());
        let plan = RunPlan {
            kind: kind.into(),
            windows: requests.iter().map(SearchRequest::window_name).collect(),
            query: None,
            refresh,
        };
        self.rig
            .deps
            .runs
            .open(&run, &plan, 0, lawsync::clock::now_millis())
            .await
            .expect("open run");
        for mut req in requests {
            req.run = Some(run.clone());
            req.refresh = refresh;
            self.rig
                .send(&self.rig.search_url, &serde_json::to_string(&req).expect("json"))
                .await;
        }
        run
    }

    /// Waits until the queues and the retry queue are empty, no consumer holds a message
    /// and every run in `runs` is complete.
    async fn settle(&self, runs: &[RunId]) {
        let started = Instant::now();
        let mut quiet = 0;
        let mut traced = Instant::now();
        loop {
            let (s, d) = self.rig.memory_depths().unwrap_or((0, 0));
            let busy = self.ctl.busy.load(Ordering::SeqCst);
            // A Redis reply late on a busy machine is asked again on the next round.
            let stats = self.rig.deps.queue.stats().await.ok();
            let depth = stats.as_ref().map_or(u64::MAX, |st| st.depth);
            let mut done = s + d == 0 && self.ctl.held.load(Ordering::SeqCst) == 0 && depth == 0;
            if done {
                for run in runs {
                    let st = self.rig.deps.runs.status(run).await;
                    done &= st.is_ok_and(|st| st.is_some_and(|st| st.completed_ms.is_some()));
                }
            }
            quiet = if done && busy == 0 { quiet + 1 } else { 0 };
            if quiet >= 3 {
                return;
            }
            if std::env::var_os("BENCH_MIRROR_TRACE").is_some() && traced.elapsed() > Duration::from_secs(5) {
                traced = Instant::now();
                let mut report = String::new();
                for run in runs {
                    report.push_str(&format!("{:?}\n", self.rig.deps.runs.status(run).await));
                }
                eprintln!(
                    "settle: queues {s}/{d}, busy {busy}, held {}, retry {stats:?}\n{report}",
                    self.ctl.held.load(Ordering::SeqCst)
                );
            }
            if started.elapsed() > DAY_TIMEOUT {
                let mut report = String::new();
                for run in runs {
                    report.push_str(&format!("{:?}\n", self.rig.deps.runs.status(run).await));
                }
                panic!(
                    "{}: not settled after {DAY_TIMEOUT:?}: queues {s}/{d}, busy {busy}, retry {stats:?}\n{report}",
                    self.design.name()
                );
            }
            tokio::time::sleep(Duration::from_millis(2)).await;
        }
    }

    /// Settles until the backfill's status says every window is done.
    async fn settle_backfill(&self) {
        for _ in 0..1_000 {
            self.settle(&[]).await;
            let status = lawsync::app::backfill::status(&self.rig.deps).await;
            if status.is_ok_and(|s| s.is_some_and(|s| s.complete())) {
                return;
            }
            // Between a window's record and the next release, or a pump that lost a race:
            // the drainer's pass pumps again.
            let _ = lawsync::app::backfill::pump(&self.rig.deps).await;
        }
        panic!("{}: the backfill never completed", self.design.name());
    }

    async fn stop(self) -> (Arc<MirrorRig>, Vec<(f64, bool)>, u64) {
        self.ctl.stop.store(true, Ordering::SeqCst);
        self.ctl.stop_drain.send_replace(true);
        for t in self.tasks {
            let _ = t.await;
        }
        let samples = std::mem::take(&mut *self.waiting.lock().expect("samples"));
        (self.rig, samples, self.ctl.returned.load(Ordering::Relaxed))
    }
}

/// (c)'s backfill: the `{"backfill":{"from","to"}}` message, as `lawsync backfill` sends
/// it. Its windows are runs of their own, released as the backfill goes; it is done when
/// its status says every window is (see [`Sim::settle_backfill`]).
async fn backfill_daily(sim: &Sim, from: &str, to: &str) {
    let msg = serde_json::json!({ "backfill": { "from": from, "to": to } });
    sim.rig.send(&sim.rig.search_url, &msg.to_string()).await;
    sim.settle_backfill().await;
}

/// The ids stored under `prec/` or recorded under `missing/`, with the instant (epoch ms)
/// their file was last written.
fn held_files(root: &Path) -> HashMap<u64, f64> {
    let mut out = HashMap::new();
    for dir in ["prec", "missing"] {
        let Ok(entries) = std::fs::read_dir(root.join(dir)) else {
            continue;
        };
        for e in entries.flatten() {
            let name = e.file_name();
            let Some(id) = name
                .to_str()
                .and_then(|n| n.strip_suffix(".json"))
                .and_then(|n| n.parse::<u64>().ok())
            else {
                continue;
            };
            let at = e
                .metadata()
                .and_then(|m| m.modified())
                .map(lawsync::clock::epoch_millis_f64)
                .unwrap_or(0.0);
            out.insert(id, at);
        }
    }
    out
}

/// Idle-while-due, in bench ms: the time in which work was waiting and no call had started
/// for more than `interval + tolerance` (measured from each call's start at the look-alike).
/// `starts` sorted; `waiting` samples (instant, waiting), sorted.
fn idle_while_due(starts: &[f64], waiting: &[(f64, bool)], interval_ms: f64, tolerance_ms: f64) -> f64 {
    // Waiting spans from the samples: each waiting sample covers until the next sample.
    let spans: Vec<(f64, f64)> = waiting
        .windows(2)
        .filter(|w| w[0].1)
        .map(|w| (w[0].0, w[1].0))
        .collect();
    let mut idle = 0.0;
    let mut k = 0;
    for pair in starts.windows(2) {
        let (a, b) = (pair[0] + interval_ms + tolerance_ms, pair[1]);
        if b <= a {
            continue;
        }
        while k < spans.len() && spans[k].1 <= a {
            k += 1;
        }
        let mut j = k;
        while j < spans.len() && spans[j].0 < b {
            idle += (spans[j].1.min(b) - spans[j].0.max(a)).max(0.0);
            j += 1;
        }
    }
    idle
}

/// What one design did.
#[derive(Debug, Default)]
struct Outcome {
    coverage: (usize, usize),
    /// Simulated hours from publication to stored, of those published during the days
    /// (`None`: never stored).
    freshness: Vec<Option<f64>>,
    steady_search_per_day: f64,
    backfill_ms: f64,
    ideal_ms: f64,
    pace_ideal_ms: f64,
    backfill_docs: usize,
    backfill_pages: usize,
    idle_sim_s: f64,
    rule_429: usize,
    backfill_calls: (usize, usize),
    day_calls: (usize, usize),
    held_end: usize,
    returned: u64,
    dead: u64,
    seconds: f64,
}

fn count_calls(a: &[Arrival]) -> (usize, usize) {
    (
        a.iter().filter(|x| x.endpoint == "search").count(),
        a.iter().filter(|x| x.endpoint == "detail").count(),
    )
}

/// Pages a plan of windows must read at least: each window's listing in pages of 100, a
/// window listing nothing still one page.
fn pages_of(counts: impl Iterator<Item = usize>) -> usize {
    counts.map(|n| n.div_ceil(PAGE).max(1)).sum()
}

async fn simulate(design: Design, o: &Opts, world: Arc<World>) -> Outcome {
    let clock = Instant::now();
    let sim = Sim::start(design, o, world.clone()).await;
    let folder = sim.rig.folder.clone().expect("a folder");
    let first = world.first_day().to_owned();
    let factor = o.gate_ms / REAL_INTERVAL_MS;

    // The backfill, on DAY0.
    let t0 = now_ms();
    let runs = match design {
        // Runs named `sync-…`, as `lawsync sync` names them: a `backfill-…` run is a window
        // of the backfill plan, which the search handler splits when it is large.
        Design::DayBefore => vec![
            sim.run(
                "sync",
                vec![SearchRequest {
                    from: first.clone(),
                    to: DAY0.to_owned(),
                    ..Default::default()
                }],
                true,
            )
            .await,
        ],
        Design::Lookback => vec![sim.run("sync", month_requests(&first, DAY0), false).await],
        Design::Daily => {
            backfill_daily(&sim, &first, DAY0).await;
            Vec::new()
        }
    };
    sim.settle(&runs).await;
    let backfill_ms = now_ms() - t0;
    let backfill_arrivals = sim.rig.lookalike.arrivals().len();
    let mut held = held_files(&folder);
    let listed_on = |day: &str, window: Option<(&str, &str)>| {
        world
            .all()
            .filter(|p| p.is_published_by(Some(day)))
            .filter(|p| match window {
                Some((a, b)) => !p.is_undated() && (a..=b).contains(&p.decided.as_str()),
                None => true,
            })
            .count()
    };
    let backfill_pages = match design {
        Design::DayBefore => pages_of(std::iter::once(listed_on(DAY0, Some((&first, DAY0))))),
        Design::Lookback | Design::Daily => {
            let month_pages = pages_of(
                months(&first, DAY0)
                    .iter()
                    .map(|(a, b)| listed_on(DAY0, Some((a, b)))),
            );
            let undated = world
                .all()
                .filter(|p| p.is_undated() && p.is_published_by(Some(DAY0)))
                .count();
            month_pages
                + if design == Design::Daily {
                    undated.div_ceil(PAGE)
                } else {
                    0
                }
        }
    };
    let gate = o.gate_ms;
    let tolerance = tolerance_ms(o);
    let backfill_docs = held.len();
    eprintln!(
        "bench-mirror: {} backfill: {} documents in {:.1} s ({} calls)",
        design.name(),
        backfill_docs,
        backfill_ms / 1000.0,
        backfill_arrivals
    );

    // The days.
    let mut first_seen: HashMap<u64, f64> = HashMap::new(); // id -> simulated hours since DAY0
    let mut day_start_arrivals = Vec::new();
    for i in 1..=o.days {
        let today = shift(DAY0, i);
        sim.rig.lookalike.set_today(Some(&today)).expect("today");
        day_start_arrivals.push(sim.rig.lookalike.arrivals().len());
        let fired = now_ms();
        let runs = match design {
            Design::DayBefore => {
                let y = shift(&today, -1);
                vec![
                    sim.run(
                        "sync",
                        vec![SearchRequest {
                            from: y.clone(),
                            to: y,
                            ..Default::default()
                        }],
                        true,
                    )
                    .await,
                ]
            }
            Design::Lookback => vec![sim.run("sync", month_requests(&first, &today), false).await],
            Design::Daily => {
                let firing = Firing {
                    schedule: ScheduleKind::Daily,
                    at: fire_at(&today),
                };
                sim.rig
                    .send(
                        &sim.rig.search_url,
                        &serde_json::to_string(&firing).expect("json"),
                    )
                    .await;
                vec![firing.plan().expect("plan").run]
            }
        };
        sim.settle(&runs).await;
        let now_held = held_files(&folder);
        let fire_h = day_hours(&today) + FIRE_HOUR_KST;
        for (id, at) in &now_held {
            if !held.contains_key(id) {
                let after_fire_h = ((at - fired).max(0.0) / factor) / 3_600_000.0;
                first_seen.insert(*id, fire_h + after_fire_h);
            }
        }
        held = now_held;
        if i % 10 == 0 || i == o.days {
            eprintln!(
                "bench-mirror: {} day {i}/{}: {} held, {:.0} s so far",
                design.name(),
                o.days,
                held.len(),
                clock.elapsed().as_secs_f64()
            );
        }
    }
    let (rig, samples, returned) = sim.stop().await;
    let arrivals = rig.lookalike.arrivals();
    let end = shift(DAY0, o.days);
    let day_before_end = shift(&end, -1);

    // Coverage: held ÷ published at least a day before the end.
    let published: Vec<&Precedent> = world
        .all()
        .filter(|p| p.is_published_by(Some(&day_before_end)))
        .collect();
    let covered = published.iter().filter(|p| held.contains_key(&p.id)).count();
    // Freshness: of those published on the simulated days (at least a day before the end).
    let freshness = published
        .iter()
        .filter(|p| p.published.as_str() > DAY0)
        .map(|p| first_seen.get(&p.id).map(|h| h - day_hours(&p.published)))
        .collect();
    let steady_from = (o.days - STEADY_DAYS).max(0) as usize;
    let steady_days = (o.days as usize - steady_from).max(1);
    let steady_search = count_calls(&arrivals[day_start_arrivals[steady_from]..]).0;
    let mut starts: Vec<f64> = arrivals.iter().map(|a| a.at_ms).collect();
    starts.sort_by(f64::total_cmp);
    let idle_ms = idle_while_due(&starts, &samples, gate, tolerance);
    let dead = rig.deps.queue.stats().await.map(|s| s.dead).unwrap_or(0);
    let out = Outcome {
        coverage: (covered, published.len()),
        freshness,
        steady_search_per_day: steady_search as f64 / steady_days as f64,
        backfill_ms,
        ideal_ms: (backfill_docs + backfill_pages) as f64 * gate,
        pace_ideal_ms: (backfill_docs + backfill_pages) as f64 * (gate + tolerance),
        backfill_docs,
        backfill_pages,
        idle_sim_s: idle_ms / factor / 1000.0,
        rule_429: arrivals.iter().filter(|a| a.cause == "rate").count(),
        backfill_calls: count_calls(&arrivals[..backfill_arrivals]),
        day_calls: count_calls(&arrivals[backfill_arrivals..]),
        held_end: held.len(),
        returned,
        dead,
        seconds: clock.elapsed().as_secs_f64(),
    };
    drop(rig);
    let _ = std::fs::remove_dir_all(&folder);
    out
}

fn month_requests(from: &str, to: &str) -> Vec<SearchRequest> {
    months(from, to)
        .into_iter()
        .map(|(from, to)| SearchRequest {
            from,
            to,
            ..Default::default()
        })
        .collect()
}

/// The p-th percentile (0..=100) of `xs`, a never-stored one counting as beyond every
/// stored one; `None` when that percentile is a never-stored one.
fn percentile(xs: &[Option<f64>], p: f64) -> Option<f64> {
    let mut v: Vec<f64> = xs.iter().map(|x| x.unwrap_or(f64::INFINITY)).collect();
    if v.is_empty() {
        return Some(0.0);
    }
    v.sort_by(f64::total_cmp);
    let i = ((p / 100.0) * v.len() as f64).ceil() as usize;
    let x = v[i.clamp(1, v.len()) - 1];
    x.is_finite().then_some(x)
}

/// Times the look-alike itself at this world: search pages and details answered with no
/// rule and no latency, each on a connection of its own. Returns (search, detail) p50 and
/// p99 in ms.
async fn lookalike_speed(world: Arc<World>) -> ((f64, f64), (f64, f64)) {
    let mut cfg = LookalikeConfig::new("bench-mirror-oc");
    cfg.interval = None;
    cfg.world = Some(world.clone());
    cfg.today = Some(DAY0.to_owned());
    let la = Lookalike::start(cfg).await.expect("look-alike");
    let headers = [("Referer", "https://www.law.go.kr/")];
    let mut search = Vec::new();
    let mut detail = Vec::new();
    let ids: Vec<u64> = world
        .all()
        .step_by((world.len() / 200).max(1))
        .map(|p| p.id)
        .collect();
    for (i, id) in ids.iter().enumerate() {
        let page = i % 900 + 1;
        let (path, out) = if i % 2 == 0 {
            (
                format!(
                    "/DRF/lawSearch.do?OC=bench-mirror-oc&target=prec&type=JSON&display=100&page={page}&sort=ddes"
                ),
                &mut search,
            )
        } else {
            (
                format!("/DRF/lawService.do?OC=bench-mirror-oc&target=prec&type=JSON&ID={id}"),
                &mut detail,
            )
        };
        let t = Instant::now();
        let reply = lawsync_tests::lookalike::raw_request(&la.base_url, "GET", &path, &headers, "")
            .await
            .expect("look-alike reply");
        assert!(
            reply.starts_with("HTTP/1.1 200"),
            "look-alike: {}",
            &reply[..reply.len().min(80)]
        );
        out.push(t.elapsed().as_secs_f64() * 1000.0);
    }
    let q = |v: &mut Vec<f64>| {
        v.sort_by(f64::total_cmp);
        let at = |p: f64| v[((p * v.len() as f64) as usize).min(v.len() - 1)];
        (at(0.5), at(0.99))
    };
    (q(&mut search), q(&mut detail))
}

fn mark(ok: bool) -> &'static str {
    if ok { "[ok]" } else { "[fail]" }
}

#[tokio::main(flavor = "multi_thread", worker_threads = 2)]
async fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    if args.iter().any(|a| a == "-h" || a == "--help") {
        println!("{USAGE}");
        return;
    }
    let o = match parse_args(&args) {
        Ok(o) => o,
        Err(e) => {
            eprintln!("bench-mirror: {e}\n{USAGE}");
            std::process::exit(2);
        }
    };
    let started = Instant::now();
    let world = Arc::new(
        World::generate(o.seed, WorldShape::realistic(o.scale, DAY0, o.days)).unwrap_or_else(|e| {
            eprintln!("bench-mirror: {e}");
            std::process::exit(2);
        }),
    );
    println!(
        "bench-mirror: seed {}, scale {} ({} precedents, {} undated, {} revised; decisions from {} on), {} days from {}, rule {} ms, gate {} ms, {} consumers per queue + the drainer",
        o.seed,
        o.scale,
        world.len(),
        world.all().filter(|p| p.is_undated()).count(),
        world.all().filter(|p| p.revision.is_some()).count(),
        world.first_day(),
        o.days,
        shift(DAY0, 1),
        o.rule_ms,
        o.gate_ms,
        o.consumers
    );
    let ((s50, s99), (d50, d99)) = lookalike_speed(world.clone()).await;
    println!(
        "look-alike at {} precedents, no rule, no latency: search page p50 {s50:.2} ms p99 {s99:.2} ms, detail p50 {d50:.2} ms p99 {d99:.2} ms (a new connection each)",
        world.len()
    );
    let mut results: BTreeMap<&str, (Design, Outcome)> = BTreeMap::new();
    for &design in &o.designs {
        let out = simulate(design, &o, world.clone()).await;
        eprintln!(
            "bench-mirror: {} done in {:.0} s: {}/{} held, backfill {:.1} s, {} rule 429s",
            design.name(),
            out.seconds,
            out.coverage.0,
            out.coverage.1,
            out.backfill_ms / 1000.0,
            out.rule_429
        );
        results.insert(design.letter(), (design, out));
    }
    print_table(&o, &results);
    println!("total {:.0} s", started.elapsed().as_secs_f64());
}

fn print_table(o: &Opts, results: &BTreeMap<&str, (Design, Outcome)>) {
    let rows: Vec<&(Design, Outcome)> = results.values().collect();
    let head: Vec<String> = rows.iter().map(|(d, _)| d.name().to_owned()).collect();
    let line = |label: &str, cells: Vec<String>| {
        let mut s = format!("{label:<44}");
        for c in cells {
            s.push_str(&format!(" {c:>18}"));
        }
        println!("{s}");
    };
    println!();
    line("", head);
    let pct = |n: usize, of: usize| {
        if of == 0 {
            "-".to_owned()
        } else {
            format!("{:.2} %", 100.0 * n as f64 / of as f64)
        }
    };
    line(
        "coverage (held / published by end - 1 day)",
        rows.iter()
            .map(|(_, r)| pct(r.coverage.0, r.coverage.1))
            .collect(),
    );
    line(
        "  held / published",
        rows.iter()
            .map(|(_, r)| format!("{}/{}", r.coverage.0, r.coverage.1))
            .collect(),
    );
    let fresh = |r: &Outcome, p: f64| match percentile(&r.freshness, p) {
        Some(h) => format!("{h:.1} h"),
        None => "never".to_owned(),
    };
    line(
        "freshness p50 (publication -> stored)",
        rows.iter().map(|(_, r)| fresh(r, 50.0)).collect(),
    );
    line(
        "freshness p95",
        rows.iter().map(|(_, r)| fresh(r, 95.0)).collect(),
    );
    line(
        "  published on the days, never stored",
        rows.iter()
            .map(|(_, r)| {
                format!(
                    "{}/{}",
                    r.freshness.iter().filter(|x| x.is_none()).count(),
                    r.freshness.len()
                )
            })
            .collect(),
    );
    line(
        "steady search calls / day (share of 86,400)",
        rows.iter()
            .map(|(_, r)| {
                format!(
                    "{:.0} ({:.3} %)",
                    r.steady_search_per_day,
                    100.0 * r.steady_search_per_day / DAILY_BUDGET
                )
            })
            .collect(),
    );
    line(
        "backfill makespan / ideal (x interval)",
        rows.iter()
            .map(|(_, r)| format!("{:.3}", r.backfill_ms / r.ideal_ms))
            .collect(),
    );
    line(
        "backfill makespan / ideal at the pace",
        rows.iter()
            .map(|(_, r)| format!("{:.3}", r.backfill_ms / r.pace_ideal_ms))
            .collect(),
    );
    line(
        "  backfill makespan (bench s)",
        rows.iter()
            .map(|(_, r)| format!("{:.1}", r.backfill_ms / 1000.0))
            .collect(),
    );
    line(
        "  ideal: documents + pages",
        rows.iter()
            .map(|(_, r)| format!("{}+{}", r.backfill_docs, r.backfill_pages))
            .collect(),
    );
    line(
        "idle-while-due (simulated s)",
        rows.iter().map(|(_, r)| format!("{:.0}", r.idle_sim_s)).collect(),
    );
    line(
        "rule 429s",
        rows.iter().map(|(_, r)| r.rule_429.to_string()).collect(),
    );
    line(
        "backfill calls search/detail",
        rows.iter()
            .map(|(_, r)| format!("{}/{}", r.backfill_calls.0, r.backfill_calls.1))
            .collect(),
    );
    line(
        &format!("{}-day calls search/detail", o.days),
        rows.iter()
            .map(|(_, r)| format!("{}/{}", r.day_calls.0, r.day_calls.1))
            .collect(),
    );
    line(
        "documents held at the end",
        rows.iter().map(|(_, r)| r.held_end.to_string()).collect(),
    );
    line(
        "messages given back / dead letters",
        rows.iter()
            .map(|(_, r)| format!("{}/{}", r.returned, r.dead))
            .collect(),
    );
    line(
        "bench time (s)",
        rows.iter().map(|(_, r)| format!("{:.0}", r.seconds)).collect(),
    );
    if let Some((_, c)) = results.get("c") {
        println!();
        println!("goals of (c):");
        let (n, of) = c.coverage;
        println!("  {} coverage 100 %: {}", mark(n == of), pct(n, of));
        let p95 = percentile(&c.freshness, 95.0);
        println!(
            "  {} freshness p95 <= 26 h: {}",
            mark(p95.is_some_and(|h| h <= 26.0)),
            p95.map(|h| format!("{h:.1} h")).unwrap_or_else(|| "never".into())
        );
        let share = 100.0 * c.steady_search_per_day / DAILY_BUDGET;
        println!(
            "  {} steady-state search calls <= 3 % of the daily budget: {share:.3} %",
            mark(share <= 3.0)
        );
        let ratio = c.backfill_ms / c.ideal_ms;
        println!(
            "  {} backfill makespan <= 1.03 x ideal: {ratio:.3}",
            mark(ratio <= 1.03)
        );
        println!("  {} 0 rule 429s: {}", mark(c.rule_429 == 0), c.rule_429);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn idle_counts_only_gaps_with_work_waiting() {
        let starts = [0.0, 1.0, 10.0, 11.0];
        // Waiting all along: the gap 1..10 is idle from 1 + 1 + 0.5 on.
        let all = [(0.0, true), (20.0, false)];
        assert!((idle_while_due(&starts, &all, 1.0, 0.5) - 7.5).abs() < 1e-9);
        // Nothing waiting: no idle.
        let none = [(0.0, false), (20.0, false)];
        assert_eq!(idle_while_due(&starts, &none, 1.0, 0.5), 0.0);
        // Waiting from 5 to 8 only.
        let some = [(0.0, false), (5.0, true), (8.0, false), (20.0, false)];
        assert!((idle_while_due(&starts, &some, 1.0, 0.5) - 3.0).abs() < 1e-9);
    }

    #[test]
    fn percentile_counts_never_stored_as_beyond() {
        let xs = [Some(1.0), Some(2.0), None, Some(3.0)];
        assert_eq!(percentile(&xs, 50.0), Some(2.0));
        assert_eq!(percentile(&xs, 95.0), None);
    }

    #[test]
    fn months_cover_the_range() {
        let m = months("20250115", "20250310");
        assert_eq!(
            m,
            vec![
                ("20250101".to_owned(), "20250131".to_owned()),
                ("20250201".to_owned(), "20250228".to_owned()),
                ("20250301".to_owned(), "20250310".to_owned())
            ]
        );
    }

    #[test]
    fn bad_flags_are_named() {
        let a = |s: &[&str]| parse_args(&s.iter().map(|x| x.to_string()).collect::<Vec<_>>());
        assert!(a(&["--scale", "2"]).expect_err("scale").contains("--scale"));
        assert!(
            a(&["--designs", "x"])
                .expect_err("design")
                .contains("unknown design")
        );
        assert!(
            a(&["--gate-ms", "1", "--rule-ms", "2"])
                .expect_err("gate")
                .contains("below")
        );
        assert!(a(&["--days"]).expect_err("days").contains("missing value"));
        assert!(a(&["--seed", "-1"]).expect_err("seed").contains("whole number"));
    }
}
