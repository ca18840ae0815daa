//! bench-cost: what waiting for the rate costs on Lambda's bill, for this package and for
//! the seed's sleep-in-handler design, in one run.
//!
//! For each SQS concurrency (1, 2, 5, 10 environments on the detail queue) and each design,
//! `lawsync local` (a real process, real SQS on moto, real Redis) works off the same
//! detail messages against the law.go.kr look-alike, which answers after a realistic
//! latency and enforces the rate rule. Billed time is each invocation's handler time (SQS
//! batches and drainer runs, from the event lines), summed; it is divided by the calls
//! law.go.kr answered.
//!
//! - `lawsync`: an SQS handler sleeps only for the slot right after the call in flight
//!   (`LAW_API_HANDLER_MAX_WAIT_MS` default); a message whose slot is further away is
//!   parked in the retry queue and the drainer works the queue off at the gate's pace.
//! - `seed`: every handler sleeps until its slot (`LAW_API_HANDLER_MAX_WAIT_MS=30000`), as
//!   the seed's handlers do; N environments mean N − 1 asleep on the gate.
//!
//! Usage: `bench-cost` with `LAWSYNC_TEST_REDIS_URL` and `LAWSYNC_TEST_MOTO_URL` set;
//! `make bench-cost` starts both. `BENCH_COST_MESSAGES` (default 20), `BENCH_COST_INTERVAL_MS`
//! (default 1000), `BENCH_COST_LATENCY_MS` (default 150), `BENCH_COST_CONCURRENCY` (default
//! `1,2,5,10`) and `BENCH_COST_DRAINER_EVERY_S` (default 60, the template's schedule) change
//! the run.
#![allow(clippy::print_stdout, clippy::print_stderr)] // a report printer

use std::path::PathBuf;
use std::process::Stdio;
use std::time::Duration;

use lawsync::local_events::{EventLine, LocalEvent};
use lawsync_tests::lookalike::{Lookalike, LookalikeConfig};
use lawsync_tests::servers::{create_queues, moto_sdk, queue_depth, unique_env};

const OC: &str = "bench-cost-oc-5521";

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Design {
    Lawsync,
    Seed,
}

impl Design {
    fn name(self) -> &'static str {
        match self {
            Design::Lawsync => "lawsync",
            Design::Seed => "seed (sleep in handler)",
        }
    }
}

#[derive(Debug, Clone, Default)]
struct Row {
    calls: usize,
    rule_429: usize,
    billed: Duration,
    invocations: usize,
    drainer_billed: Duration,
    parked: u64,
    makespan: Duration,
    stored: usize,
}

fn env_num(name: &str, default: u64) -> u64 {
    std::env::var(name)
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

fn sibling(name: &str) -> PathBuf {
    let exe = std::env::current_exe().expect("own path");
    let bin = exe.parent().expect("bin dir").join(name);
    assert!(
        bin.exists(),
        "{} not built: `make bench-cost` builds it",
        bin.display()
    );
    bin
}

#[tokio::main]
async fn main() {
    let redis =
        std::env::var("LAWSYNC_TEST_REDIS_URL").expect("LAWSYNC_TEST_REDIS_URL (make bench-cost sets it)");
    let moto =
        std::env::var("LAWSYNC_TEST_MOTO_URL").expect("LAWSYNC_TEST_MOTO_URL (make bench-cost sets it)");
    let messages = env_num("BENCH_COST_MESSAGES", 20) as usize;
    let interval = Duration::from_millis(env_num("BENCH_COST_INTERVAL_MS", 1000));
    let latency = Duration::from_millis(env_num("BENCH_COST_LATENCY_MS", 150));
    let levels: Vec<u32> = std::env::var("BENCH_COST_CONCURRENCY")
        .unwrap_or_else(|_| "1,2,5,10".into())
        .split(',')
        .filter_map(|s| s.trim().parse().ok())
        .collect();
    println!(
        "bench-cost: {messages} detail messages per run, gate interval {} ms, look-alike latency {} ms, batch size 1",
        interval.as_millis(),
        latency.as_millis()
    );
    println!();
    println!(
        "| concurrency | design | calls | 429 (rule) | invocations | billed s | billed / call | × interval | drainer s | parked | makespan s | stored |"
    );
    println!("|---:|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|");
    let mut failed = false;
    let mut ratios = Vec::new();
    for &c in &levels {
        let mut per_design = Vec::new();
        for design in [Design::Lawsync, Design::Seed] {
            let row = run(design, c, messages, interval, latency, &redis, &moto).await;
            let per_call = row.billed.as_secs_f64() / row.calls.max(1) as f64;
            let x = per_call / interval.as_secs_f64();
            println!(
                "| {c} | {} | {} | {} | {} | {:.1} | {:.0} ms | {:.2} | {:.1} | {} | {:.1} | {}/{} |",
                design.name(),
                row.calls,
                row.rule_429,
                row.invocations,
                row.billed.as_secs_f64(),
                per_call * 1000.0,
                x,
                row.drainer_billed.as_secs_f64(),
                row.parked,
                row.makespan.as_secs_f64(),
                row.stored,
                messages
            );
            if row.stored != messages || row.rule_429 > 0 {
                failed = true;
            }
            per_design.push((x, row.makespan));
        }
        ratios.push((c, per_design[0], per_design[1]));
    }
    println!();
    for (c, (ours, our_span), (seed, seed_span)) in ratios {
        println!(
            "concurrency {c:>2}: billed per call {ours:.2} × interval (seed {seed:.2} ×): {:.2}× the seed's bill; makespan {:.1} s vs {:.1} s ({:+.1} s)",
            ours / seed,
            our_span.as_secs_f64(),
            seed_span.as_secs_f64(),
            our_span.as_secs_f64() - seed_span.as_secs_f64()
        );
    }
    if failed {
        eprintln!("bench-cost: a run lost messages or broke the rate rule (see the table)");
        std::process::exit(1);
    }
}

async fn run(
    design: Design,
    concurrency: u32,
    messages: usize,
    interval: Duration,
    latency: Duration,
    redis: &str,
    moto: &str,
) -> Row {
    let mut cfg = LookalikeConfig::new(OC);
    // The rule sits a tenth below the gate's interval: the bench measures cost, and the
    // gate's own spacing is checked by the tests and the demo.
    cfg.interval = Some(interval.mul_f64(0.9));
    cfg.latency = latency;
    let upstream = Lookalike::start(cfg).await.expect("look-alike");
    let app_env = unique_env("cost");
    let sqs = aws_sdk_sqs::Client::new(&moto_sdk().await);
    let [search_url, detail_url] = create_queues(&sqs, &app_env).await.expect("queues");
    let ids: Vec<u64> = upstream
        .corpus()
        .window("20250101", "20251231")
        .into_iter()
        .filter(|p| !p.detail_missing)
        .take(messages)
        .map(|p| p.id)
        .collect();
    assert_eq!(ids.len(), messages, "the corpus has too few precedents");
    for chunk in ids.chunks(10) {
        let entries = chunk
            .iter()
            .map(|id| {
                aws_sdk_sqs::types::SendMessageBatchRequestEntry::builder()
                    .id(id.to_string())
                    .message_body(format!("{{\"id\":\"{id}\"}}"))
                    .build()
                    .expect("entry")
            })
            .collect();
        sqs.send_message_batch()
            .queue_url(&detail_url)
            .set_entries(Some(entries))
            .send()
            .await
            .expect("send");
    }
    let dir = std::env::temp_dir().join(&app_env);
    let events = dir.join("events.jsonl");
    std::fs::create_dir_all(&dir).expect("run dir");
    // As deployed: EventBridge invokes the drainer once a minute.
    let drainer_every = env_num("BENCH_COST_DRAINER_EVERY_S", 60);
    let handler_wait = match design {
        Design::Lawsync => None,
        Design::Seed => Some("30000"),
    };
    let mut cmd = tokio::process::Command::new(sibling("lawsync"));
    cmd.args([
        "local",
        "--name",
        "bench",
        "--concurrency",
        &concurrency.to_string(),
        "--batch-size",
        "1",
        "--poll-wait",
        "1",
        "--timeout",
        "60",
        "--visibility-timeout",
        "360",
        "--drainer-every",
        &drainer_every.to_string(),
        "--until-idle",
        "4",
        "--events",
        &events.display().to_string(),
    ])
    .env_clear()
    .envs([
        ("LAW_API_OC", OC.to_owned()),
        ("LAW_API_BASE_URL", upstream.base_url.clone()),
        ("LAW_API_REQUEST_INTERVAL_MS", interval.as_millis().to_string()),
        ("REDIS_URL", redis.to_owned()),
        ("APP_ENV", app_env.clone()),
        ("SEARCH_QUEUE_URL", search_url),
        ("DETAIL_QUEUE_URL", detail_url.clone()),
        ("DOCUMENT_DIR", dir.join("docs").display().to_string()),
        ("DRAIN_INTERVAL_MS", "1000".into()),
        ("AWS_ENDPOINT_URL", moto.to_owned()),
        ("AWS_REGION", "ap-northeast-2".into()),
        ("AWS_ACCESS_KEY_ID", "test".into()),
        ("AWS_SECRET_ACCESS_KEY", "test".into()),
        ("RUST_LOG", "warn".into()),
    ])
    .stdin(Stdio::null())
    .stdout(Stdio::null())
    .stderr(Stdio::piped())
    .kill_on_drop(true);
    if let Some(w) = handler_wait {
        cmd.env("LAW_API_HANDLER_MAX_WAIT_MS", w);
    }
    let child = cmd.spawn().expect("spawn lawsync local");
    let out = tokio::time::timeout(Duration::from_secs(600), child.wait_with_output())
        .await
        .expect("lawsync local finished within 10 minutes")
        .expect("lawsync local output");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(!stderr.contains(OC), "the key reached lawsync's output");
    if !out.status.success() {
        eprintln!("lawsync local failed: {stderr}");
    }
    let arrivals = upstream.arrivals();
    let mut row = Row {
        calls: arrivals.iter().filter(|a| a.status == 200).count(),
        rule_429: arrivals.iter().filter(|a| a.cause == "rate").count(),
        ..Row::default()
    };
    if let (Some(first), Some(last)) = (arrivals.first(), arrivals.last()) {
        // From the first call to the last, not the idle tail.
        row.makespan = Duration::from_secs_f64(((last.at_ms - first.at_ms) / 1000.0).max(0.0));
    }
    let text = std::fs::read_to_string(&events).unwrap_or_default();
    assert!(!text.contains(OC), "the key reached the event lines");
    let billed = |ms: f64| Duration::from_secs_f64(ms / 1000.0);
    for line in text.lines() {
        let Ok(line) = EventLine::parse(line) else {
            continue;
        };
        match line.event {
            LocalEvent::Batch {
                billed_ms, summary, ..
            } => {
                row.billed += billed(billed_ms);
                row.invocations += 1;
                row.parked += u64::from(summary.parked);
            }
            LocalEvent::Drain { billed_ms, .. } => {
                row.billed += billed(billed_ms);
                row.drainer_billed += billed(billed_ms);
                row.invocations += 1;
            }
            _ => {}
        }
    }
    row.stored = std::fs::read_dir(dir.join("docs").join("prec"))
        .map(|d| d.count())
        .unwrap_or(0);
    let left = queue_depth(&sqs, &detail_url).await.unwrap_or(0);
    if left > 0 {
        eprintln!("{app_env}: {left} messages left on the detail queue");
    }
    let _ = std::fs::remove_dir_all(&dir);
    row
}
