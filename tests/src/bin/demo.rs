//! `make demo`: the whole package on one machine, against the law.go.kr look-alike.
//!
//! `scripts/demo.sh` starts Redis and moto and builds; this program does the rest: starts
//! the look-alike (which answers 429 to any call closer than its rule), creates the queues
//! and the bucket, sends one sync request, runs several `lawsync local` processes (each
//! with several environments per function), injects a 429 storm and a long Retry-After
//! midway, and shows the calls live, then a summary and an SVG timeline. Everything it
//! starts, it stops.
//!
//! `--soak` (`make soak-rule`) runs the same processes with nothing injected and no next
//! day, for as long as the window takes, and ends with the promise as deployed: at least
//! `--min-calls` calls, none answered 429 for breaking the rule, and no two starts granted
//! closer than the interval on Redis' clock, each line `[ok]` or `[fail]`.
#![allow(clippy::print_stdout)] // a program whose product is its output

use std::collections::{BTreeMap, BTreeSet};
use std::io::{IsTerminal, Write};
use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::{Duration, Instant};

use lawsync::clock::epoch_millis_f64 as epoch_ms;
use lawsync::local_events::{EventLine, LocalEvent};
use lawsync_tests::idle::{DueSample, idle_while_due, sample_due};
use lawsync_tests::lookalike::{Arrival, Corpus};
use lawsync_tests::timeline::{Call, Park, Timeline};
use serde_json::{Value, json};
use tokio::io::AsyncBufReadExt;

const USAGE: &str = "usage: demo --redis-url URL --moto-url URL [--gate shared|per-instance] [--from YYYYMMDD --to YYYYMMDD] [--processes N] [--concurrency N] [--rule-ms MS] [--gate-ms MS] [--budget-secs S] [--out DIR] [--soak [--min-calls N]]";

#[derive(Debug, Clone)]
struct Opts {
    redis_url: String,
    moto_url: String,
    per_instance: bool,
    from: String,
    to: String,
    processes: u32,
    concurrency: u32,
    rule_ms: u64,
    gate_ms: u64,
    budget: Duration,
    out: PathBuf,
    /// Nothing injected, no next day: the promise as deployed, soaked.
    soak: bool,
    /// The soak's least number of calls.
    min_calls: usize,
}

fn parse() -> Result<Opts, String> {
    let mut o = Opts {
        redis_url: String::new(),
        moto_url: String::new(),
        per_instance: false,
        from: "20260105".into(),
        to: "20260206".into(),
        processes: 2,
        concurrency: 2,
        rule_ms: 1000,
        gate_ms: 1050,
        budget: Duration::from_secs(170),
        out: PathBuf::from(".run/demo"),
        soak: false,
        min_calls: 1000,
    };
    let mut budget_set = false;
    let mut args = std::env::args().skip(1);
    while let Some(flag) = args.next() {
        if flag == "--soak" {
            o.soak = true;
            continue;
        }
        let v = args.next().ok_or(format!("{flag} needs a value\n{USAGE}"))?;
        let n = |v: &str| {
            v.parse::<u64>()
                .map_err(|_| format!("{flag}: not a number: {v:?}"))
        };
        match flag.as_str() {
            "--redis-url" => o.redis_url = v,
            "--moto-url" => o.moto_url = v,
            "--gate" => {
                o.per_instance = match v.as_str() {
                    "shared" => false,
                    "per-instance" => true,
                    _ => return Err(format!("--gate: shared or per-instance, got {v:?}")),
                }
            }
            "--from" => o.from = v,
            "--to" => o.to = v,
            "--processes" => o.processes = n(&v)?.clamp(1, 8) as u32,
            "--concurrency" => o.concurrency = n(&v)?.clamp(1, 8) as u32,
            "--rule-ms" => o.rule_ms = n(&v)?,
            "--gate-ms" => o.gate_ms = n(&v)?,
            "--budget-secs" => {
                o.budget = Duration::from_secs(n(&v)?);
                budget_set = true;
            }
            "--out" => o.out = v.into(),
            "--min-calls" => o.min_calls = n(&v)? as usize,
            _ => return Err(format!("unknown flag {flag}\n{USAGE}")),
        }
    }
    if o.per_instance && !budget_set {
        // The contrast needs a minute of crowding, not a finished sync.
        o.budget = Duration::from_secs(60);
    }
    if o.soak && o.per_instance {
        return Err("--soak soaks the shared gate: leave --gate shared".into());
    }
    if o.soak && !budget_set {
        // The window at the gate's pace, twice over: the soak ends when the window is done.
        o.budget = Duration::from_secs(4 * 3600);
    }
    if o.redis_url.is_empty() || o.moto_url.is_empty() {
        return Err(format!("--redis-url and --moto-url are required\n{USAGE}"));
    }
    Ok(o)
}

/// ANSI colours, only on a terminal.
struct Paint(bool);

impl Paint {
    fn c(&self, code: &str, s: &str) -> String {
        if self.0 {
            format!("\x1b[{code}m{s}\x1b[0m")
        } else {
            s.to_owned()
        }
    }
}

fn bin(name: &str) -> PathBuf {
    let exe = std::env::current_exe().unwrap_or_default();
    exe.parent()
        .map(|d| d.join(name))
        .unwrap_or_else(|| PathBuf::from(name))
}

#[tokio::main]
async fn main() {
    let opts = match parse() {
        Ok(o) => o,
        Err(e) => {
            eprintln!("demo: {e}");
            std::process::exit(2);
        }
    };
    match run(opts).await {
        Ok(true) => {}
        Ok(false) => std::process::exit(1),
        Err(e) => {
            eprintln!("demo: {e}");
            std::process::exit(1);
        }
    }
}

/// Children killed when dropped, whatever happens.
struct Children(Vec<tokio::process::Child>);

impl Children {
    /// SIGTERM, newest first (the functions before the look-alike they call), each given
    /// 10 s to finish its batch before SIGKILL.
    async fn stop(&mut self) {
        for c in self.0.iter_mut().rev() {
            if let Some(pid) = c.id() {
                let _ = std::process::Command::new("kill")
                    .args(["-TERM", &pid.to_string()])
                    .status();
            }
            if tokio::time::timeout(Duration::from_secs(10), c.wait())
                .await
                .is_err()
            {
                let _ = c.kill().await;
            }
        }
    }
}

async fn run(o: Opts) -> Result<bool, String> {
    let paint = Paint(std::io::stdout().is_terminal());
    let run_id = format!(
        "{:x}",
        (epoch_ms(std::time::SystemTime::now()) as u64) & 0xff_ffff
    );
    let app_env = format!("demo-{run_id}");
    let oc = format!("demo-OC-{run_id}-{}", std::process::id());
    let _ = std::fs::remove_dir_all(&o.out);
    std::fs::create_dir_all(&o.out).map_err(|e| format!("{}: {e}", o.out.display()))?;
    // A small world: only the window's decisions exist, so the next day's schedule has the
    // window to look after and nothing else. Act 1 runs a week after the window's end; some
    // of its precedents are not published yet.
    let corpus =
        Corpus::decided_within(1, &o.from, &o.to).ok_or("--from and --to must be dates, --from first")?;
    let today = news_day(&corpus, &o.from, &o.to).ok_or("--to must be a date as YYYYMMDD")?;
    let next_day = add_days(&today, 1).ok_or("--to must be a date as YYYYMMDD")?;
    let expected = corpus.visible(Some((&o.from, &o.to)), Some(&today));
    let mode = if o.per_instance {
        "per-instance pacing (the shared gate OFF, for contrast)"
    } else {
        "the shared Redis gate"
    };
    println!("{}", paint.c("1", "lawsync demo"));
    println!(
        "  {} `lawsync local` processes × {} environments per function, pacing: {mode}",
        o.processes, o.concurrency
    );
    println!(
        "  law.go.kr look-alike: answers 429 to any call closer than {} ms to the previous one; gate interval {} ms",
        o.rule_ms, o.gate_ms
    );
    println!(
        "  sync {}~{} on {today}: {} precedents published in the window ({} of them missing at law.go.kr, as 국세청 ones often are)\n",
        o.from,
        o.to,
        expected.len(),
        expected.iter().filter(|p| p.detail_missing).count()
    );

    // The look-alike.
    let upstream_log = o.out.join("upstream.jsonl");
    let mut children = Children(Vec::new());
    let mut la = tokio::process::Command::new(bin("law-lookalike"))
        .args([
            "--oc",
            &oc,
            "--port",
            "0",
            "--interval-ms",
            &o.rule_ms.to_string(),
            "--today",
            &today,
            "--decided",
            &format!("{}~{}", o.from, o.to),
            "--quiet",
        ])
        .arg("--log")
        .arg(&upstream_log)
        .stdout(Stdio::piped())
        .kill_on_drop(true)
        .spawn()
        .map_err(|e| format!("starting law-lookalike: {e}"))?;
    let mut first = String::new();
    let stdout = la.stdout.take().ok_or("law-lookalike: no stdout")?;
    tokio::io::BufReader::new(stdout)
        .read_line(&mut first)
        .await
        .map_err(|e| format!("law-lookalike: {e}"))?;
    let base = first
        .trim()
        .strip_prefix("listening ")
        .ok_or(format!("law-lookalike did not start: {first:?}"))?
        .to_owned();
    children.0.push(la);

    // Queues and bucket on moto.
    let sdk = aws_config::defaults(aws_config::BehaviorVersion::latest())
        .endpoint_url(&o.moto_url)
        .region(aws_config::Region::new("ap-northeast-2"))
        .credentials_provider(aws_sdk_s3::config::Credentials::new(
            "demo", "demo", None, None, "demo",
        ))
        .load()
        .await;
    let sqs = aws_sdk_sqs::Client::new(&sdk);
    let urls = lawsync_tests::servers::create_queues(&sqs, &app_env)
        .await
        .map_err(|e| format!("on moto ({}): {e}", o.moto_url))?;
    let bucket = format!("lawsync-{app_env}");
    let s3 = aws_sdk_s3::Client::from_conf(
        aws_sdk_s3::config::Builder::from(&sdk)
            .force_path_style(true)
            .build(),
    );
    s3.create_bucket()
        .bucket(&bucket)
        .create_bucket_configuration(
            aws_sdk_s3::types::CreateBucketConfiguration::builder()
                .location_constraint(aws_sdk_s3::types::BucketLocationConstraint::ApNortheast2)
                .build(),
        )
        .send()
        .await
        .map_err(|e| format!("create bucket: {}", lawsync::aws::aws_code(&e)))?;

    let env: Vec<(String, String)> = [
        ("LAW_API_OC", oc.clone()),
        ("LAW_API_BASE_URL", base.clone()),
        ("LAW_API_REQUEST_INTERVAL_MS", o.gate_ms.to_string()),
        ("REDIS_URL", o.redis_url.clone()),
        ("APP_ENV", app_env.clone()),
        ("SEARCH_QUEUE_URL", urls[0].clone()),
        ("DETAIL_QUEUE_URL", urls[1].clone()),
        ("DOCUMENT_BUCKET", bucket.clone()),
        ("DRAIN_INTERVAL_MS", "5000".into()),
        ("AWS_ENDPOINT_URL", o.moto_url.clone()),
        ("AWS_REGION", "ap-northeast-2".into()),
        ("AWS_ACCESS_KEY_ID", "demo".into()),
        ("AWS_SECRET_ACCESS_KEY", "demo".into()),
        ("RUST_LOG", "info".into()),
    ]
    .into_iter()
    .map(|(k, v)| (k.to_owned(), v))
    .collect();
    let lawsync = |args: &[&str]| {
        let mut c = tokio::process::Command::new(bin("lawsync"));
        c.args(args)
            .env_clear()
            .envs(env.iter().map(|(k, v)| (k.as_str(), v.as_str())))
            .env("PATH", std::env::var("PATH").unwrap_or_default())
            .stdin(Stdio::null())
            .kill_on_drop(true);
        c
    };

    let t0 = epoch_ms(std::time::SystemTime::now());
    let started = Instant::now();
    let sync = lawsync(&["sync", "--from", &o.from, "--to", &o.to])
        .stdout(Stdio::null())
        .output()
        .await
        .map_err(|e| format!("lawsync sync: {e}"))?;
    if !sync.status.success() {
        return Err(format!(
            "lawsync sync failed: {}",
            String::from_utf8_lossy(&sync.stderr)
        ));
    }
    println!(
        "  sent {{\"from\":\"{}\",\"to\":\"{}\"}} to the search queue\n",
        o.from, o.to
    );

    let gate = if o.per_instance { "per-instance" } else { "shared" };
    for p in 1..=o.processes {
        let name = format!("p{p}");
        let log = std::fs::File::create(o.out.join(format!("{name}.log"))).map_err(|e| e.to_string())?;
        let events = o.out.join(format!("events-{name}.jsonl"));
        let child = lawsync(&[
            "local",
            "--name",
            &name,
            "--concurrency",
            &o.concurrency.to_string(),
            "--poll-wait",
            "1",
            "--timeout",
            "60",
            "--visibility-timeout",
            "90",
            // EventBridge invokes the drainer every minute; a run sleeps for parked work
            // that falls due before its deadline and ends when none does: 15 s brings the
            // next run soon after, as a minute would with a 60 s timeout.
            "--drainer-every",
            "15",
            "--gate",
            gate,
        ])
        .arg("--events")
        .arg(&events)
        .stdout(Stdio::null())
        .stderr(log)
        .spawn()
        .map_err(|e| format!("starting lawsync local: {e}"))?;
        children.0.push(child);
    }

    // Watch, inject, and wait for the end.
    let redis_cfg =
        lawsync::Config::from_lookup(|k| env.iter().find(|(n, _)| n == k).map(|(_, v)| v.clone()))
            .map_err(|e| e.to_string())?;
    let redis = lawsync::RedisConn::connect(&redis_cfg.redis)
        .await
        .map_err(|e| e.to_string())?;
    let ns = lawsync::Namespace::new(&app_env, lawsync::law::UPSTREAM).map_err(|e| e.to_string())?;
    // Idle-while-due: whether work is due (and the gate open), sampled every turn below.
    let gate = lawsync::Gate::new(redis.clone(), &ns, redis_cfg.gate);
    let allowance = redis_cfg.gate.interval + redis_cfg.gate.tolerance;
    let mut due_samples: Vec<DueSample> = Vec::new();
    let queue = lawsync::queue::RetryQueue::new(redis, &ns);
    let mut tails: BTreeMap<PathBuf, u64> = BTreeMap::new();
    let mut view = View {
        paint: Some(&paint),
        t0,
        tty: std::io::stdout().is_terminal(),
        tl: Timeline {
            shared: !o.per_instance,
            ..Timeline::default()
        },
        ..View::default()
    };
    let mut injected: Vec<(f64, String)> = Vec::new();
    let mut last_bar = Instant::now() - Duration::from_secs(10);
    let mut complete = false;
    while started.elapsed() < o.budget {
        tokio::time::sleep(Duration::from_millis(250)).await;
        for p in 1..=o.processes {
            for line in tail(&o.out.join(format!("events-p{p}.jsonl")), &mut tails) {
                if let Ok(e) = EventLine::parse(&line) {
                    view.event(&e);
                }
            }
        }
        view.stored = count(&s3, &bucket, "prec/").await + count(&s3, &bucket, "missing/").await;
        let stats = queue.stats().await.ok();
        view.retry_depth = stats.as_ref().map_or(0, |s| s.depth);
        due_samples.extend(sample_due(&queue, &gate).await);
        // Midway trouble, in shared mode only: the contrast run shows the rule alone, and the
        // soak the promise with nothing injected.
        let progress = view.stored as f64 / expected.len().max(1) as f64;
        let injecting = !o.per_instance && !o.soak;
        if injecting && injected.is_empty() && progress >= 0.3 {
            inject(
                &base,
                json!({"fault": "too_many", "retry_after": 2, "count": 4, "endpoint": "detail"}),
            )
            .await?;
            injected.push((
                epoch_ms(std::time::SystemTime::now()),
                "429 storm (4 × Retry-After: 2)".into(),
            ));
            view.note("injected: a 429 storm, the next 4 detail calls answered 429 Retry-After: 2");
        }
        if injecting && injected.len() == 1 && progress >= 0.55 {
            inject(
                &base,
                json!({"fault": "too_many", "retry_after": 35, "as_date": true, "count": 1}),
            )
            .await?;
            injected.push((
                epoch_ms(std::time::SystemTime::now()),
                "Retry-After: 35 s (HTTP-date)".into(),
            ));
            view.note("injected: the next call answered 429 with a Retry-After date 35 s ahead (past the 30 s bound: jobs park)");
        }
        if view.tty || last_bar.elapsed() >= Duration::from_secs(5) {
            view.bar(expected.len());
            last_bar = Instant::now();
        }
        let drained = view.stored as usize >= expected.len()
            && view.retry_depth == 0
            && depth(&sqs, &urls[0]).await == 0
            && depth(&sqs, &urls[1]).await == 0;
        if drained {
            complete = true;
            break;
        }
    }
    view.clear_bar();
    let dead = queue.stats().await.map(|s| s.dead).unwrap_or(0);
    let act1_end = epoch_ms(std::time::SystemTime::now());
    // The processes stay up for the next day; what they logged so far is act 1's.
    for p in 1..=o.processes {
        for line in tail(&o.out.join(format!("events-p{p}.jsonl")), &mut tails) {
            if let Ok(e) = EventLine::parse(&line) {
                view.event(&e);
            }
        }
    }
    let elapsed = started.elapsed();
    // The first act's calls; the next day's are counted in its own lines.
    let arrivals: Vec<Arrival> = read_arrivals(&upstream_log)
        .into_iter()
        .filter(|a| a.at_ms < act1_end)
        .collect();
    let sample = sample_document(&s3, &bucket).await;
    let svg = o.out.join("timeline.svg");
    view.tl.arrivals = arrivals;
    view.tl.injected = injected;
    view.tl.mode = mode.to_owned();
    view.tl.t0 = t0;
    (view.tl.rule_ms, view.tl.gate_ms, view.tl.shared) = (o.rule_ms, o.gate_ms, !o.per_instance);
    std::fs::write(&svg, view.tl.svg()).map_err(|e| e.to_string())?;
    let leaked = key_found_in(&o.out, &oc) || sample.as_deref().is_some_and(|s| s.contains(&oc));
    let missing = count(&s3, &bucket, "missing/").await;
    let starts: Vec<f64> = view.tl.arrivals.iter().map(|a| a.at_ms).collect();
    let idle = idle_while_due(&starts, &due_samples, allowance);
    let ok = summary(
        &view,
        &o,
        Summary {
            complete,
            dead,
            elapsed,
            expected: expected.len(),
            missing,
            leaked,
            idle,
            allowance,
        },
    );
    // The run's own account of itself: its record under runs/ (written when its last id
    // settled), and `lawsync sync status`.
    let mut recorded = false;
    for _ in 0..30 {
        if count(&s3, &bucket, "runs/").await > 0 {
            recorded = true;
            break;
        }
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
    if let Ok(status) = lawsync(&["sync", "status", "--limit", "1"]).output().await {
        println!("\n  the sync run, as `lawsync sync status` shows it:");
        for l in String::from_utf8_lossy(&status.stdout).lines() {
            println!("    {l}");
        }
    }
    if !recorded {
        println!("  ✘ no run record under runs/: the run never accounted for every id");
    }
    let ok = ok && (recorded || o.per_instance);
    let act2 = if complete && !o.per_instance && !o.soak {
        Some(
            next_day_act(&NextDay {
                base: &base,
                sqs: &sqs,
                search_url: &urls[0],
                detail_url: &urls[1],
                s3: &s3,
                bucket: &bucket,
                queue: &queue,
                corpus: &corpus,
                o: &o,
                today: &today,
                next_day: &next_day,
                upstream_log: &upstream_log,
            })
            .await?,
        )
    } else {
        None
    };
    children.stop().await;
    let ok = match &act2 {
        Some(a) => a.print(&paint, o.gate_ms) && ok,
        None => ok,
    };
    if let Some(s) = sample {
        println!(
            "\n  a stored document (s3://{bucket}/{}):",
            s.lines().next().unwrap_or_default()
        );
        for l in s.lines().skip(1).take(6) {
            println!("    {l}");
        }
    }
    println!("\n  timeline: {}", paint.c("1", &svg.display().to_string()));
    println!(
        "  logs: {}/p*.log (the functions), {} (every call the look-alike saw)",
        o.out.display(),
        upstream_log.display()
    );
    Ok(ok)
}

/// Days after the window's end that act 1 runs at the earliest: a week, so most of the
/// window is published and the latest decisions are still coming out.
const ACT1_DAYS_AFTER: i64 = 7;
/// Days after the window's end searched for act 1's day (see [`news_day`]).
const NEWS_DAYS_SEARCHED: i64 = 120;

/// The day act 1 runs on: from a week after the window, the first of the days whose next
/// day brings the most newly published precedents of the window, so act 2 has news.
fn news_day(corpus: &Corpus, from: &str, to: &str) -> Option<String> {
    let first = add_days(to, ACT1_DAYS_AFTER)?;
    let published = |day: &str| corpus.visible(Some((from, to)), Some(day)).len();
    let mut best = (0, first.clone());
    for d in 0..NEWS_DAYS_SEARCHED {
        let day = add_days(&first, d)?;
        let news = published(&add_days(&day, 1)?).saturating_sub(published(&day));
        if news > best.0 {
            best = (news, day);
        }
    }
    Some(best.1)
}

/// `date` (YYYYMMDD) moved by `days`.
fn add_days(date: &str, days: i64) -> Option<String> {
    let d = lawsync::law::calendar::day_number(date).ok()?;
    Some(lawsync::law::calendar::yyyymmdd(d + days))
}

fn read_arrivals(log: &Path) -> Vec<Arrival> {
    std::fs::read_to_string(log)
        .unwrap_or_default()
        .lines()
        .filter_map(|l| serde_json::from_str(l).ok())
        .collect()
}

/// What act 2 works with.
struct NextDay<'a> {
    base: &'a str,
    sqs: &'a aws_sdk_sqs::Client,
    search_url: &'a str,
    detail_url: &'a str,
    s3: &'a aws_sdk_s3::Client,
    bucket: &'a str,
    queue: &'a lawsync::queue::RetryQueue,
    corpus: &'a Corpus,
    o: &'a Opts,
    today: &'a str,
    next_day: &'a str,
    upstream_log: &'a Path,
}

/// What act 2 saw.
struct NextDayReport {
    next_day: String,
    run: String,
    recorded: Option<Value>,
    searches: usize,
    details: usize,
    rule_429: usize,
    /// Precedents published, or revised, between the two days.
    new: usize,
    revised: usize,
    held_before: usize,
    seconds: f64,
}

impl NextDayReport {
    fn print(&self, paint: &Paint, gate_ms: u64) -> bool {
        let ids = |k: &str| {
            self.recorded
                .as_ref()
                .and_then(|r| r["ids"][k].as_u64())
                .unwrap_or(0)
        };
        println!(
            "\n{}",
            paint.c("1", &format!("act 2: the next day ({})", self.next_day))
        );
        println!(
            "  the daily schedule fired ({{\"schedule\":\"daily\"}}, run {}); law.go.kr had published {} more precedents of the window and revised {}",
            self.run, self.new, self.revised
        );
        let row = |k: &str, v: String| println!("  {k:<42} {v}");
        row(
            "calls it took",
            format!(
                "{} ({} searches: month probes, the two recent months' pages and the whole-list probe; {} details), {:.0} s at {gate_ms} ms a call",
                self.searches + self.details,
                self.searches,
                self.details,
                self.seconds
            ),
        );
        row(
            "listed / skipped as held / fetched",
            format!(
                "{} / {} / {} ({} added, {} revised, {} missing at law.go.kr)",
                ids("seen"),
                ids("skipped"),
                ids("fetched") + ids("missing"),
                ids("added"),
                ids("revised"),
                ids("missing")
            ),
        );
        let check = |ok: bool, text: String| {
            println!(
                "  {} {text}",
                if ok {
                    paint.c("1;32", "✔")
                } else {
                    paint.c("1;31", "✘")
                }
            );
            ok
        };
        let fetched = ids("fetched") + ids("missing");
        let a = check(
            self.recorded.is_some(),
            "the daily run completed and was recorded under runs/".into(),
        );
        let b = check(
            self.details == self.new + self.revised && fetched as usize == self.details,
            format!(
                "only the new and the revised were fetched ({} detail calls for {} new + {} revised)",
                self.details, self.new, self.revised
            ),
        );
        // Every hit it listed and did not fetch was skipped as held, at no call. A window
        // longer than the two recent months lists only those (and what the probes find
        // short): the held precedents of the months only probed are not listed at all.
        let skipped = ids("skipped");
        let only_probed = (self.held_before as u64).saturating_sub(skipped + self.revised as u64);
        let c = check(
            skipped + fetched == ids("seen") && skipped as usize <= self.held_before,
            format!(
                "the {skipped} precedents it listed held and unchanged cost no call{}",
                if only_probed > 0 {
                    format!(" (the other {only_probed} held are in months it only probed)")
                } else {
                    String::new()
                }
            ),
        );
        let d = check(self.rule_429 == 0, "zero 429s for breaking the rule".into());
        a && b && c && d
    }
}

/// Act 2: the next day. The look-alike's day moves on; EventBridge's daily firing goes to
/// the search queue; the processes still running handle it. Waits for its record.
async fn next_day_act(n: &NextDay<'_>) -> Result<NextDayReport, String> {
    let window = Some((n.o.from.as_str(), n.o.to.as_str()));
    let before = n.corpus.visible(window, Some(n.today));
    let after = n.corpus.visible(window, Some(n.next_day));
    let held: BTreeSet<u64> = before.iter().map(|p| p.id).collect();
    let new = after.iter().filter(|p| !held.contains(&p.id)).count();
    let revised = before
        .iter()
        .filter(|p| p.is_revised_by(Some(n.next_day)) && !p.is_revised_by(Some(n.today)))
        .count();
    let mark = epoch_ms(std::time::SystemTime::now());
    let started = Instant::now();
    let reply = lawsync_tests::lookalike::raw_request(
        n.base,
        "POST",
        "/_control/today",
        &[],
        &json!({ "today": n.next_day }).to_string(),
    )
    .await
    .map_err(|e| format!("look-alike: {e}"))?;
    if !reply.starts_with("HTTP/1.1 200") {
        return Err(format!("the look-alike refused the next day: {reply}"));
    }
    // 04:00 KST on the next day, as EventBridge Scheduler names it.
    let d = &n.today;
    let at = format!("{}-{}-{}T19:00:00Z", &d[..4], &d[4..6], &d[6..8]);
    let firing = json!({ "schedule": "daily", "at": at });
    let run = lawsync::app::schedule::Firing {
        schedule: lawsync::app::schedule::ScheduleKind::Daily,
        at: at.clone(),
    }
    .plan()
    .map_err(|e| e.to_string())?
    .run
    .to_string();
    n.sqs
        .send_message()
        .queue_url(n.search_url)
        .message_body(firing.to_string())
        .send()
        .await
        .map_err(|e| format!("sending the firing: {}", lawsync::aws::aws_code(&e)))?;
    println!(
        "\n  moving the look-alike to {} and firing the daily schedule {firing} ...",
        n.next_day
    );
    let key = format!("runs/{run}.json");
    let mut recorded = None;
    while started.elapsed() < NEXT_DAY_BUDGET {
        tokio::time::sleep(Duration::from_millis(500)).await;
        let idle = depth(n.sqs, n.search_url).await == 0
            && depth(n.sqs, n.detail_url).await == 0
            && n.queue.stats().await.is_ok_and(|s| s.depth == 0);
        if !idle {
            continue;
        }
        if let Ok(out) = n.s3.get_object().bucket(n.bucket).key(&key).send().await
            && let Ok(body) = out.body.collect().await
            && let Ok(v) = serde_json::from_slice::<Value>(&body.into_bytes())
            && v["complete"] == true
        {
            recorded = Some(v);
            break;
        }
    }
    let seconds = started.elapsed().as_secs_f64();
    let calls: Vec<Arrival> = read_arrivals(n.upstream_log)
        .into_iter()
        .filter(|a| a.at_ms >= mark)
        .collect();
    Ok(NextDayReport {
        next_day: n.next_day.to_owned(),
        run,
        recorded,
        searches: calls.iter().filter(|a| a.endpoint == "search").count(),
        details: calls.iter().filter(|a| a.endpoint == "detail").count(),
        rule_429: calls.iter().filter(|a| a.cause == "rate").count(),
        new,
        revised,
        held_before: before.len(),
        seconds,
    })
}

/// How long act 2 waits for the daily run's record: its probes and pages are about 40
/// calls, a minute at the default pace.
const NEXT_DAY_BUDGET: Duration = Duration::from_secs(150);

async fn inject(base: &str, body: Value) -> Result<(), String> {
    let reply =
        lawsync_tests::lookalike::raw_request(base, "POST", "/_control/fault", &[], &body.to_string())
            .await
            .map_err(|e| format!("look-alike: {e}"))?;
    if reply.starts_with("HTTP/1.1 200") {
        Ok(())
    } else {
        Err(format!("injection refused: {reply}"))
    }
}

/// New complete lines of a file since the last call.
fn tail(path: &Path, offsets: &mut BTreeMap<PathBuf, u64>) -> Vec<String> {
    use std::io::{Read, Seek, SeekFrom};
    let Ok(mut f) = std::fs::File::open(path) else {
        return Vec::new();
    };
    let at = offsets.entry(path.to_owned()).or_insert(0);
    if f.seek(SeekFrom::Start(*at)).is_err() {
        return Vec::new();
    }
    let mut text = String::new();
    let _ = f.read_to_string(&mut text);
    let Some(end) = text.rfind('\n') else {
        return Vec::new();
    };
    *at += end as u64 + 1;
    text[..end].lines().map(str::to_owned).collect()
}

async fn count(s3: &aws_sdk_s3::Client, bucket: &str, prefix: &str) -> u64 {
    let mut n = 0;
    let mut token = None;
    loop {
        let Ok(out) = s3
            .list_objects_v2()
            .bucket(bucket)
            .prefix(prefix)
            .set_continuation_token(token)
            .send()
            .await
        else {
            return n;
        };
        n += out.contents().len() as u64;
        token = out.next_continuation_token().map(str::to_owned);
        if token.is_none() {
            return n;
        }
    }
}

async fn depth(sqs: &aws_sdk_sqs::Client, url: &str) -> u64 {
    lawsync_tests::servers::queue_depth(sqs, url)
        .await
        .unwrap_or(u64::MAX)
}

/// The key and the first lines of one stored precedent.
async fn sample_document(s3: &aws_sdk_s3::Client, bucket: &str) -> Option<String> {
    let list = s3
        .list_objects_v2()
        .bucket(bucket)
        .prefix("prec/")
        .max_keys(1)
        .send()
        .await
        .ok()?;
    let key = list.contents().first()?.key()?.to_owned();
    let obj = s3.get_object().bucket(bucket).key(&key).send().await.ok()?;
    let bytes = obj.body.collect().await.ok()?.into_bytes();
    let v: Value = serde_json::from_slice(&bytes).ok()?;
    let pretty = serde_json::to_string_pretty(&v).ok()?;
    let short: Vec<String> = pretty
        .lines()
        .map(|l| {
            if l.chars().count() > 100 {
                format!("{}…", l.chars().take(100).collect::<String>())
            } else {
                l.to_owned()
            }
        })
        .collect();
    Some(format!("{key}\n{}", short.join("\n")))
}

/// Whether any file under `dir` holds the key.
fn key_found_in(dir: &Path, key: &str) -> bool {
    std::fs::read_dir(dir)
        .map(|d| {
            d.filter_map(|e| e.ok())
                .any(|e| std::fs::read_to_string(e.path()).is_ok_and(|t| t.contains(key)))
        })
        .unwrap_or(false)
}

#[derive(Default)]
struct View<'a> {
    paint: Option<&'a Paint>,
    t0: f64,
    tty: bool,
    /// Calls and parked batches so far; completed into the chart at the end.
    tl: Timeline,
    parked: u64,
    drained: u64,
    returned: u64,
    stored: u64,
    retry_depth: u64,
    instances: BTreeSet<String>,
    /// Environments that asked the gate: granted a call, or parked a job it refused.
    asked: BTreeSet<String>,
    bar_shown: bool,
    /// Every call's grant, epoch ms on Redis' clock: the gate's own promise.
    granted_ms: Vec<f64>,
    /// Calls sent on a connection opened for them (before their grant).
    new_connections: usize,
}

impl<'a> View<'a> {
    fn paint(&self, code: &str, s: &str) -> String {
        self.paint.map_or_else(|| s.to_owned(), |p| p.c(code, s))
    }

    fn clear_bar(&mut self) {
        if self.tty && self.bar_shown {
            print!("\r\x1b[2K");
            let _ = std::io::stdout().flush();
            self.bar_shown = false;
        }
    }

    fn line(&mut self, s: &str) {
        self.clear_bar();
        println!("{s}");
    }

    fn note(&mut self, s: &str) {
        let s = self.paint("1;33", &format!("  ⚡ {s}"));
        self.line(&s);
    }

    fn event(&mut self, line: &EventLine) {
        let t = |ms: f64| (ms - self.t0) / 1000.0;
        match &line.event {
            LocalEvent::Call {
                instance,
                endpoint,
                started_ms,
                waited_ms,
                status,
                cooldown_ms,
                granted_ms,
                new_connection,
                ..
            } => {
                self.granted_ms.extend(*granted_ms);
                self.new_connections += usize::from(*new_connection);
                let c = Call {
                    instance: instance.clone(),
                    endpoint: endpoint.name().to_owned(),
                    at_ms: *started_ms,
                    waited_ms: *waited_ms,
                    status: *status,
                    cooldown_ms: cooldown_ms.map(|ms| ms as f64),
                };
                self.instances.insert(c.instance.clone());
                self.asked.insert(c.instance.clone());
                let status = c.status.map_or("net".to_owned(), |s| s.to_string());
                let coloured = match c.status {
                    Some(200) => self.paint("32", &status),
                    Some(429) => self.paint("1;31", &status),
                    _ => self.paint("33", &status),
                };
                let mut s = format!(
                    "  {:>7.2}s  {:<14} {:<6} {}  waited {:>6.0} ms",
                    t(c.at_ms),
                    c.instance,
                    c.endpoint,
                    coloured,
                    c.waited_ms
                );
                if let Some(cd) = c.cooldown_ms {
                    let whose = if self.tl.shared { "cluster" } else { "its own" };
                    s.push_str(&self.paint("31", &format!("  → {whose} cooldown {:.1} s", cd / 1000.0)));
                }
                self.line(&s);
                self.tl.calls.push(c);
            }
            LocalEvent::Batch {
                instance,
                batch_item_failures,
                summary,
                ..
            } => {
                let parked = u64::from(summary.parked);
                if parked > 0 {
                    self.asked.insert(instance.clone());
                }
                self.parked += parked;
                self.returned += *batch_item_failures as u64;
                if parked > 0 {
                    self.tl.parks.push(Park {
                        instance: instance.clone(),
                        at_ms: line.at_ms,
                        jobs: parked,
                    });
                    let s = self.paint(
                        "35",
                        &format!(
                            "  {:>7.2}s  {:<14} {parked} job(s) parked in the retry queue",
                            t(line.at_ms),
                            instance
                        ),
                    );
                    self.line(&s);
                }
            }
            LocalEvent::DrainPass { instance, pass } => {
                let ok = u64::from(pass.succeeded);
                self.drained += ok;
                if pass.claimed > 0 {
                    let s = self.paint(
                        "36",
                        &format!(
                            "  {:>7.2}s  {:<14} drainer pass: claimed {}, succeeded {ok}, failed {}",
                            t(line.at_ms),
                            instance,
                            pass.claimed,
                            pass.failed
                        ),
                    );
                    self.line(&s);
                }
            }
            LocalEvent::Drain { .. } | LocalEvent::Started { .. } | LocalEvent::Stopped { .. } => {}
        }
    }

    fn bar(&mut self, expected: usize) {
        let width = 30;
        let done = (self.stored as usize).min(expected);
        let filled = (done * width).checked_div(expected).unwrap_or(width);
        let bar = format!("{}{}", "█".repeat(filled), "░".repeat(width - filled));
        let s = format!(
            "  [{bar}] {done}/{expected} documents · {} calls · retry queue {} · parked {} · drained {}",
            self.tl.calls.len(),
            self.retry_depth,
            self.parked,
            self.drained
        );
        if self.tty {
            self.clear_bar();
            print!("{}", self.paint("1", &s));
            let _ = std::io::stdout().flush();
            self.bar_shown = true;
        } else {
            println!("{s}");
        }
    }
}

struct Summary {
    complete: bool,
    dead: u64,
    elapsed: Duration,
    expected: usize,
    /// Of those handled, recorded as missing at law.go.kr.
    missing: u64,
    leaked: bool,
    /// Idle-while-due, seconds (see `lawsync_tests::idle`).
    idle: f64,
    allowance: Duration,
}

/// Prints the summary; whether the run met its claims.
fn summary(view: &View, o: &Opts, s: Summary) -> bool {
    let p = |code: &str, t: &str| view.paint(code, t);
    let arrivals = &view.tl.arrivals;
    let spacing = view.tl.spacing();
    let (min, median) = spacing.map_or((f64::NAN, f64::NAN), |s| (s.min, s.median));
    let rule_429 = view.tl.rule_breaks();
    let injected_429 = arrivals.iter().filter(|a| a.cause == "injected:too_many").count();
    let mut by_status: BTreeMap<u16, usize> = BTreeMap::new();
    for a in arrivals {
        *by_status.entry(a.status).or_default() += 1;
    }
    let cooldowns = view.tl.calls.iter().filter(|c| c.cooldown_ms.is_some()).count();
    let cooling: f64 = view.tl.cooldowns().iter().map(|(a, b)| b - a).sum::<f64>() / 1000.0;
    println!("\n{}", p("1", "summary"));
    let row = |k: &str, v: String| println!("  {k:<42} {v}");
    row(
        "pacing",
        if o.per_instance {
            "per-instance (shared gate off)".into()
        } else {
            "shared Redis gate".into()
        },
    );
    row(
        "precedents handled",
        format!(
            "{} of {}: {} documents stored, {} recorded as missing at law.go.kr",
            view.stored,
            s.expected,
            view.stored.saturating_sub(s.missing),
            s.missing
        ),
    );
    row(
        "calls law.go.kr received",
        format!(
            "{} ({})",
            arrivals.len(),
            by_status
                .iter()
                .map(|(k, v)| format!("{v}×{k}"))
                .collect::<Vec<_>>()
                .join(", ")
        ),
    );
    row(
        "429s injected (storm + long Retry-After)",
        injected_429.to_string(),
    );
    row(
        "429s for breaking the rule",
        if rule_429 == 0 {
            p("1;32", "0")
        } else {
            p("1;31", &rule_429.to_string())
        },
    );
    row(
        "spacing at law.go.kr: min / median",
        format!(
            "{min:.1} ms / {median:.1} ms (rule {} ms, gate {} ms)",
            o.rule_ms, o.gate_ms
        ),
    );
    // The gate's promise is on Redis' clock; arrivals add each call's own path (and the
    // look-alike's scheduling) to it. Beside it, how many calls opened a connection.
    let mut granted = view.granted_ms.clone();
    granted.sort_by(f64::total_cmp);
    let granted_min = granted
        .windows(2)
        .map(|w| w[1] - w[0])
        .fold(f64::INFINITY, f64::min);
    row(
        "starts granted on Redis' clock: min gap",
        format!(
            "{granted_min:.1} ms; {} of {} calls on a new connection",
            view.new_connections,
            granted.len()
        ),
    );
    row(
        if o.per_instance {
            "cooldowns set (each its own)"
        } else {
            "cluster cooldowns set"
        },
        format!("{cooldowns}, {cooling:.1} s cooled in all"),
    );
    row(
        "jobs parked / drained",
        format!("{} / {}", view.parked, view.drained),
    );
    row("messages handed back to SQS", view.returned.to_string());
    row("dead letters", s.dead.to_string());
    row("environments that called", view.instances.len().to_string());
    row(
        "key idle while work was due",
        format!(
            "{:.1} s (no call for over {} ms while a parked job was due and the gate open; sampled every 250 ms)",
            s.idle,
            s.allowance.as_millis()
        ),
    );
    row("elapsed", format!("{:.1} s", s.elapsed.as_secs_f64()));
    let check =
        |ok: bool, text: String| println!("  {} {text}", if ok { p("1;32", "✔") } else { p("1;31", "✘") });
    println!();
    check(
        !s.leaked,
        "the key (OC) appears in no event line, log or stored document".into(),
    );
    if o.per_instance {
        check(
            rule_429 > 0,
            format!("{rule_429} calls broke the rule: environments pacing only themselves crowd law.go.kr"),
        );
        println!("  (run `make demo` without GATE= to see the shared gate keep every call apart)");
        return !s.leaked;
    }
    check(
        s.complete,
        format!(
            "every precedent of the window handled ({} of {})",
            view.stored, s.expected
        ),
    );
    check(rule_429 == 0, "zero 429s outside the injected storm".into());
    check(
        min >= o.rule_ms as f64,
        format!(
            "every call at least {} ms after the previous (min {min:.1} ms)",
            o.rule_ms
        ),
    );
    check(s.dead == 0, "no dead letters".into());
    let demo_ok = !s.leaked && s.complete && rule_429 == 0 && min >= o.rule_ms as f64 && s.dead == 0;
    if !o.soak {
        return demo_ok;
    }
    // The soak's verdict, one line per promise, for scripts as for people.
    println!("\n{}", p("1", "soak: the shipped settings against the rule"));
    let verdict = |ok: bool, text: String| {
        println!("  [{}] {text}", if ok { "ok" } else { "fail" });
        ok
    };
    let calls = verdict(
        arrivals.len() >= o.min_calls,
        format!("{} calls (at least {})", arrivals.len(), o.min_calls),
    );
    let rule = verdict(
        rule_429 == 0,
        format!(
            "{rule_429} calls answered 429 for breaking the {} ms rule",
            o.rule_ms
        ),
    );
    let floor = verdict(
        granted_min >= o.gate_ms as f64,
        format!(
            "smallest gap between two granted starts on Redis' clock {granted_min:.1} ms (the interval {} ms is a floor)",
            o.gate_ms
        ),
    );
    let processes: BTreeSet<&str> = view.asked.iter().filter_map(|e| e.split('/').next()).collect();
    let contended = verdict(
        view.asked.len() >= (o.processes * o.concurrency) as usize && processes.len() == o.processes as usize,
        format!(
            "{} environments in {} processes asked the gate, {} of them granted calls (of {} processes x {} per function and a drainer each)",
            view.asked.len(),
            processes.len(),
            view.instances.len(),
            o.processes,
            o.concurrency
        ),
    );
    demo_ok && calls && rule && floor && contended
}
