//! Load: 64 concurrent callers across 8 processes through one gate, against the
//! look-alike enforcing its interval rule. Each process is the `gate-load` binary: 8 tokio
//! tasks sharing one `LawClient` and one Redis connection, calling the detail endpoint.
//! Every figure comes from the look-alike's own arrival log:
//!
//! - calls: every API call it received;
//! - 429s: calls it answered 429 for breaking the rule (cause `rate`);
//! - gaps: between consecutive arrivals (min / median / max);
//! - utilisation: (calls − 1) × rule / (last arrival − first arrival), 1.0 being a call
//!   exactly every rule interval from the first to the last;
//! - idle slots: gaps longer than 1.5 gate intervals, i.e. slots nobody used (the first
//!   gate voided the slot of a caller that woke later than the tolerance; see the soak);
//! - sent to arrival, and sent after the slot: each process reports when it sent each
//!   call, which places the delays on the client's side or the look-alike's (see
//!   [`send_lateness`]).
//!
//! Each id is called by exactly one caller, so the arrival log also proves that every
//! caller finished every call, each in one attempt.

use std::collections::{BTreeMap, HashMap};
use std::process::Stdio;
use std::time::{Duration, Instant};

use lawsync_tests::lookalike::{Arrival, Lookalike, LookalikeConfig, corpus};
use lawsync_tests::servers::{Topology, unique_env, workspace_bin};
use serde_json::Value;
use tokio::io::{AsyncBufReadExt, AsyncReadExt, AsyncWriteExt, BufReader};

const OC: &str = "oc-SECRET-load7730";

/// One load run: `processes` × `callers` callers, each making `calls_per_caller` calls.
#[derive(Debug, Clone, Copy)]
struct Load {
    /// The look-alike's rule: two calls closer than this get a 429.
    rule: Duration,
    /// `LAW_API_REQUEST_INTERVAL_MS`.
    gate: Duration,
    /// `LAW_API_GATE_TOLERANCE_MS`.
    tolerance: Duration,
    processes: usize,
    callers: usize,
    calls_per_caller: usize,
}

impl Load {
    fn total_callers(&self) -> usize {
        self.processes * self.callers
    }

    fn total_calls(&self) -> usize {
        self.total_callers() * self.calls_per_caller
    }

    /// The longest a caller may wait for its slot (`LAW_API_MAX_WAIT_MS`). Every other
    /// caller may hold a slot ahead of it, and a caller that wakes after the next holder
    /// has started queues again behind all of them, so one acquire can span two queue
    /// lengths; four, so that the bound never decides the run. At most Lambda's 15 min.
    fn max_wait(&self) -> Duration {
        (self.gate * self.total_callers() as u32 * 4).min(Duration::from_secs(900))
    }

    /// The same load with `LOAD_RULE_MS`, `LOAD_GATE_MS`, `LOAD_TOLERANCE_MS` and
    /// `LOAD_CALLS_PER_CALLER` taken from the environment where set: to find the margins
    /// another machine needs.
    fn overridden_from_env(mut self) -> Self {
        let var = |name: &str| {
            std::env::var(name).ok().map(|v| {
                v.parse::<u64>()
                    .unwrap_or_else(|_| panic!("{name}: not a number: {v:?}"))
            })
        };
        let ms = Duration::from_millis;
        self.rule = var("LOAD_RULE_MS").map_or(self.rule, ms);
        self.gate = var("LOAD_GATE_MS").map_or(self.gate, ms);
        self.tolerance = var("LOAD_TOLERANCE_MS").map_or(self.tolerance, ms);
        self.calls_per_caller = var("LOAD_CALLS_PER_CALLER").map_or(self.calls_per_caller, |n| n as usize);
        self
    }

    /// The run should take calls × gate; fail instead of hanging well past that.
    fn timeout(&self) -> Duration {
        self.gate * self.total_calls() as u32 * 2 + Duration::from_secs(60)
    }
}

/// What the look-alike saw.
#[derive(Debug)]
struct Figures {
    calls: usize,
    rule_429s: usize,
    min_gap_ms: f64,
    median_gap_ms: f64,
    max_gap_ms: f64,
    utilisation: f64,
    idle_slots: usize,
    /// Where the idle slots were: the number of calls the look-alike had seen before each.
    idle_after: Vec<usize>,
    span_s: f64,
    /// From sending (the client, after its gate slot) to arrival at the look-alike:
    /// median and largest, ms.
    transit_p50_ms: f64,
    transit_max_ms: f64,
    /// The smallest gap's two calls, as far apart as they were sent, ms.
    min_gap_sent_ms: f64,
    /// How late calls were sent after their slots, ms, sorted; see [`send_lateness`].
    lateness_ms: Vec<f64>,
    /// Calls per configured gate interval over the run: (calls − 1) × gate / span.
    gate_utilisation: f64,
    /// Smallest gap between two grants on Redis' clock, across every process, ms.
    min_grant_gap_ms: f64,
    /// From each grant to its request being handed to the transport, ms, sorted.
    grant_to_send_ms: Vec<f64>,
}

/// Every first attempt's grant moment (µs, Redis' clock) and grant-to-send delay (ms).
fn grant_times(summaries: &[Value]) -> (Vec<u64>, Vec<f64>) {
    let calls = summaries.iter().filter_map(|s| s["sent"].as_array()).flatten();
    let mut granted: Vec<u64> = calls
        .clone()
        .filter_map(|c| c["granted_at_us"].as_u64())
        .collect();
    granted.sort_unstable();
    let mut delay: Vec<f64> = calls
        .filter_map(|c| c["grant_to_send_us"].as_u64())
        .map(|us| us as f64 / 1e3)
        .collect();
    delay.sort_by(f64::total_cmp);
    (granted, delay)
}

/// How late each call was sent after its gate slot, ms, measured against the most
/// punctual call; empty when a 429 set a cooldown.
///
/// While callers queue without a break and no cooldown is set, the gate hands out slots
/// exactly one interval apart on Redis' clock, which on one machine is the same clock as
/// the processes' (`TIME` and `SystemTime` both read the real-time clock). So a call's
/// send time, modulo the interval, is its slot's phase plus its lateness; the smallest
/// phase stands for a call sent on its slot. This is the figure the gate interval's margin
/// over the rule has to cover.
fn send_lateness(gate_ms: f64, arrivals: &[Arrival], sent_at: impl Fn(&Arrival) -> f64) -> Vec<f64> {
    if arrivals.iter().any(|a| a.cause == "rate") || arrivals.is_empty() {
        return Vec::new();
    }
    let origin = sent_at(&arrivals[0]);
    let phases: Vec<f64> = arrivals
        .iter()
        .map(|a| {
            let p = (sent_at(a) - origin).rem_euclid(gate_ms);
            if p > gate_ms / 2.0 { p - gate_ms } else { p }
        })
        .collect();
    let punctual = phases.iter().copied().fold(f64::INFINITY, f64::min);
    let mut late: Vec<f64> = phases.iter().map(|p| p - punctual).collect();
    late.sort_by(f64::total_cmp);
    late
}

/// The value at quantile `q` of sorted `v`.
fn quantile(v: &[f64], q: f64) -> f64 {
    if v.is_empty() {
        return f64::NAN;
    }
    v[((v.len() - 1) as f64 * q).round() as usize]
}

/// When each id's first attempt was sent, epoch ms, from the processes' summaries.
fn sent_times(summaries: &[Value]) -> HashMap<String, f64> {
    summaries
        .iter()
        .filter_map(|s| s["sent"].as_array())
        .flatten()
        .filter(|c| c["attempt"] == 1)
        .filter_map(|c| Some((c["id"].as_str()?.to_owned(), c["sent_ms"].as_f64()?)))
        .collect()
}

fn figures(load: &Load, arrivals: &[Arrival], summaries: &[Value]) -> Figures {
    let sent = sent_times(summaries);
    let (granted, grant_to_send_ms) = grant_times(summaries);
    let sent_at = |a: &Arrival| {
        a.item
            .as_ref()
            .and_then(|i| sent.get(i))
            .copied()
            .unwrap_or(f64::NAN)
    };
    let mut transit: Vec<f64> = arrivals.iter().map(|a| a.at_ms - sent_at(a)).collect();
    transit.sort_by(f64::total_cmp);
    let min_pair = arrivals
        .windows(2)
        .min_by(|x, y| (x[1].at_ms - x[0].at_ms).total_cmp(&(y[1].at_ms - y[0].at_ms)));
    let rule_ms = load.rule.as_secs_f64() * 1e3;
    let gate_ms = load.gate.as_secs_f64() * 1e3;
    let mut gaps: Vec<f64> = arrivals.windows(2).map(|w| w[1].at_ms - w[0].at_ms).collect();
    gaps.sort_by(f64::total_cmp);
    let span_ms = match (arrivals.first(), arrivals.last()) {
        (Some(a), Some(b)) => b.at_ms - a.at_ms,
        _ => 0.0,
    };
    Figures {
        calls: arrivals.len(),
        rule_429s: arrivals.iter().filter(|a| a.cause == "rate").count(),
        min_gap_ms: gaps.first().copied().unwrap_or(f64::NAN),
        median_gap_ms: gaps.get(gaps.len() / 2).copied().unwrap_or(f64::NAN),
        max_gap_ms: gaps.last().copied().unwrap_or(f64::NAN),
        utilisation: (arrivals.len().saturating_sub(1)) as f64 * rule_ms / span_ms,
        idle_slots: gaps.iter().filter(|g| **g > 1.5 * gate_ms).count(),
        idle_after: arrivals
            .windows(2)
            .enumerate()
            .filter(|(_, w)| w[1].at_ms - w[0].at_ms > 1.5 * gate_ms)
            .map(|(i, _)| i + 1)
            .collect(),
        span_s: span_ms / 1e3,
        transit_p50_ms: transit.get(transit.len() / 2).copied().unwrap_or(f64::NAN),
        transit_max_ms: transit.last().copied().unwrap_or(f64::NAN),
        min_gap_sent_ms: min_pair.map_or(f64::NAN, |w| sent_at(&w[1]) - sent_at(&w[0])),
        lateness_ms: send_lateness(gate_ms + load.tolerance.as_secs_f64() * 1e3, arrivals, sent_at),
        gate_utilisation: (arrivals.len().saturating_sub(1)) as f64 * gate_ms / span_ms,
        min_grant_gap_ms: granted
            .windows(2)
            .map(|w| (w[1] - w[0]) as f64 / 1e3)
            .min_by(f64::total_cmp)
            .unwrap_or(f64::NAN),
        grant_to_send_ms,
    }
}

/// A `gate-load` process that has connected and waits for the go.
struct Proc {
    label: String,
    child: tokio::process::Child,
    stdout: BufReader<tokio::process::ChildStdout>,
    stderr: tokio::task::JoinHandle<String>,
}

/// Runs the load against a fresh look-alike and gate; returns what each process reported
/// and what the look-alike saw. Checks that the key reached no output.
async fn run(load: Load) -> (Vec<Value>, Vec<Arrival>, Vec<String>) {
    let mut cfg = LookalikeConfig::new(OC);
    cfg.interval = Some(load.rule);
    let server = Lookalike::start(cfg).await.expect("start the look-alike");
    // Precedents whose detail exists, one per call: every call should be a 200.
    let ids: Vec<String> = server
        .corpus()
        .window(corpus::FIRST_DAY, corpus::LAST_DAY)
        .into_iter()
        .filter(|p| !p.detail_missing)
        .map(|p| p.id.to_string())
        .take(load.total_calls())
        .collect();
    assert_eq!(ids.len(), load.total_calls(), "corpus too small for the run");
    let app_env = unique_env("load");
    let bin = workspace_bin("gate-load");
    let per_process = load.callers * load.calls_per_caller;
    let mut procs = Vec::new();
    for (p, chunk) in ids.chunks(per_process).enumerate() {
        let label = format!("p{}", p + 1);
        let mut child = tokio::process::Command::new(&bin)
            .args(["--callers", &load.callers.to_string()])
            .args(["--ids", &chunk.join(",")])
            .args(["--base-url", &server.base_url])
            .args(["--label", &label, "--go-on-stdin"])
            .env_clear()
            .env("PATH", std::env::var("PATH").unwrap_or_default())
            .env("LAW_API_OC", OC)
            .env("REDIS_URL", Topology::Standalone.url())
            .env("APP_ENV", &app_env)
            .env("LAW_API_REQUEST_INTERVAL_MS", load.gate.as_millis().to_string())
            .env(
                "LAW_API_GATE_TOLERANCE_MS",
                load.tolerance.as_millis().to_string(),
            )
            .env("LAW_API_MAX_WAIT_MS", load.max_wait().as_millis().to_string())
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .kill_on_drop(true)
            .spawn()
            .expect("spawn gate-load");
        let stdout = BufReader::new(child.stdout.take().expect("stdout"));
        let mut err = child.stderr.take().expect("stderr");
        let stderr = tokio::spawn(async move {
            let mut s = String::new();
            let _ = err.read_to_string(&mut s).await;
            s
        });
        procs.push(Proc {
            label,
            child,
            stdout,
            stderr,
        });
    }
    // Every process connected (Redis, HTTP client) before any starts calling.
    for p in &mut procs {
        let mut line = String::new();
        let read = tokio::time::timeout(Duration::from_secs(30), p.stdout.read_line(&mut line)).await;
        if !(matches!(read, Ok(Ok(_))) && line.trim() == "ready") {
            let _ = p.child.start_kill();
            let stderr = tokio::time::timeout(Duration::from_secs(5), &mut p.stderr).await;
            panic!("{} did not get ready: {line:?}\n{stderr:?}", p.label);
        }
    }
    let load_at_go = load_average();
    let started = Instant::now();
    for p in &mut procs {
        let mut stdin = p.child.stdin.take().expect("stdin");
        stdin.write_all(b"go\n").await.expect("go");
    }
    let finish = async {
        let mut summaries = Vec::new();
        let mut outputs = Vec::new();
        for mut p in procs {
            let mut rest = String::new();
            p.stdout.read_to_string(&mut rest).await.expect("stdout");
            let status = p.child.wait().await.expect("wait");
            let stderr = p.stderr.await.expect("stderr");
            assert!(status.success(), "{} failed: {status}\n{stderr}", p.label);
            let summary: Value = serde_json::from_str(rest.trim())
                .unwrap_or_else(|e| panic!("{}: no JSON summary ({e}): {rest:?}", p.label));
            summaries.push(summary);
            outputs.push(rest);
            outputs.push(stderr);
        }
        (summaries, outputs)
    };
    let (summaries, outputs) = tokio::time::timeout(load.timeout(), finish)
        .await
        .unwrap_or_else(|_| panic!("the load did not finish within {:?}", load.timeout()));
    eprintln!(
        "{} processes finished {:.1} s after the go (load average at the go {load_at_go})",
        load.processes,
        started.elapsed().as_secs_f64()
    );
    for out in &outputs {
        assert!(!out.contains(OC), "the key reached a process' output: {out}");
    }
    let arrivals = server.arrivals();
    let log = serde_json::to_string(&arrivals).expect("arrivals as JSON");
    assert!(!log.contains(OC), "the key reached the arrival log");
    (summaries, arrivals, ids)
}

/// The machine's load averages (1, 5, 15 min), for reading the figures: the other
/// processes on a shared machine delay wake-ups.
fn load_average() -> String {
    std::fs::read_to_string("/proc/loadavg")
        .map(|l| l.split_whitespace().take(3).collect::<Vec<_>>().join(" "))
        .unwrap_or_else(|_| "unknown".into())
}

/// Prints the figures, then asserts: no 429 for breaking the rule, every call made once
/// and answered 200, every caller finished, nothing refused by the gate.
fn check(name: &str, load: &Load, summaries: &[Value], arrivals: &[Arrival], ids: &[String]) -> Figures {
    let f = figures(load, arrivals, summaries);
    let round_trips: u64 = summaries
        .iter()
        .filter_map(|s| s["gate"]["round_trips"].as_u64())
        .sum();
    let grants: u64 = summaries
        .iter()
        .filter_map(|s| s["gate"]["grants"].as_u64())
        .sum();
    let max_wait = summaries
        .iter()
        .filter_map(|s| s["max_gate_wait_ms"].as_u64())
        .max();
    let moved: u64 = summaries
        .iter()
        .filter_map(|s| s["gate"]["reslotted"].as_u64())
        .sum();
    let given_back: u64 = summaries
        .iter()
        .filter_map(|s| s["gate"]["given_back"].as_u64())
        .sum();
    eprintln!(
        "{name}: {} processes x {} callers, rule {} ms, gate {} ms, tolerance {} ms\n  \
         calls {}, 429s for the rule {}, gaps min / median / max {:.1} / {:.1} / {:.1} ms, \
         utilisation {:.4} (at most {:.4} at this gate), idle slots {} (after calls {:?}), span {:.1} s\n  \
         sent to arrival p50 / max {:.2} / {:.2} ms; the smallest gap's calls were sent {:.1} ms apart\n  \
         sent after the slot p50 / p99 / max {}\n  \
         grants: smallest gap {:.3} ms on Redis' clock; grant to send p50 / p99 / max {:.3} / {:.3} / {:.3} ms; \
         {} given back stale; utilisation of the gate interval {:.4}\n  \
         gate round trips per grant {:.3}, slots moved behind a late start {}, longest gate wait {} ms, load average {}",
        load.processes,
        load.callers,
        load.rule.as_millis(),
        load.gate.as_millis(),
        load.tolerance.as_millis(),
        f.calls,
        f.rule_429s,
        f.min_gap_ms,
        f.median_gap_ms,
        f.max_gap_ms,
        f.utilisation,
        load.rule.as_secs_f64() / load.gate.as_secs_f64(),
        f.idle_slots,
        f.idle_after,
        f.span_s,
        f.transit_p50_ms,
        f.transit_max_ms,
        f.min_gap_sent_ms,
        if f.lateness_ms.is_empty() {
            "n/a (a 429's cooldown moved the slots)".to_owned()
        } else {
            format!(
                "{:.2} / {:.2} / {:.2} ms",
                quantile(&f.lateness_ms, 0.5),
                quantile(&f.lateness_ms, 0.99),
                quantile(&f.lateness_ms, 1.0)
            )
        },
        f.min_grant_gap_ms,
        quantile(&f.grant_to_send_ms, 0.5),
        quantile(&f.grant_to_send_ms, 0.99),
        quantile(&f.grant_to_send_ms, 1.0),
        given_back,
        f.gate_utilisation,
        round_trips as f64 / grants.max(1) as f64,
        moved,
        max_wait.unwrap_or(0),
        load_average(),
    );
    let causes: BTreeMap<&str, usize> = arrivals.iter().fold(BTreeMap::new(), |mut m, a| {
        *m.entry(a.cause.as_str()).or_default() += 1;
        m
    });
    assert_eq!(f.rule_429s, 0, "{name}: 429s for breaking the rule: {causes:?}");
    assert!(
        f.min_grant_gap_ms >= load.gate.as_secs_f64() * 1e3,
        "{name}: two grants {:.3} ms apart on Redis' clock, below the {} ms interval",
        f.min_grant_gap_ms,
        load.gate.as_millis()
    );
    let validity = lawsync::policy::grant_validity(load.gate).as_secs_f64() * 1e3;
    // Checked against the validity just before the send: only a process descheduled in
    // the microseconds between the check and the send can pass it, never one in a hundred.
    assert!(
        quantile(&f.grant_to_send_ms, 0.99) <= validity,
        "{name}: grant to send p99 {:.3} ms, past the {validity} ms validity",
        quantile(&f.grant_to_send_ms, 0.99)
    );
    assert_eq!(
        causes,
        BTreeMap::from([("ok", load.total_calls())]),
        "{name}: every call answered 200 once"
    );
    for s in summaries {
        assert_eq!(
            s["ok"].as_u64(),
            Some(s["calls"].as_u64().unwrap_or(0)),
            "{name}: {s}"
        );
        assert_eq!(s["errors"], serde_json::json!({}), "{name}: {s}");
        assert_eq!(s["gate"]["refusals"], 0, "{name}: {s}");
        let per_caller: Vec<u64> = s["per_caller"]
            .as_array()
            .map(|a| a.iter().filter_map(Value::as_u64).collect())
            .unwrap_or_default();
        assert_eq!(
            per_caller,
            vec![load.calls_per_caller as u64; load.callers],
            "{name}: every caller finished its calls: {s}"
        );
    }
    let mut called: Vec<&str> = arrivals.iter().filter_map(|a| a.item.as_deref()).collect();
    called.sort_unstable();
    let mut want: Vec<&str> = ids.iter().map(String::as_str).collect();
    want.sort_unstable();
    assert_eq!(called, want, "{name}: each id called exactly once");
    f
}

/// The default run, in debug builds on a shared 2-core machine: 8 × 8 callers, 4 calls
/// each (256 calls, about 40 s).
///
/// Margins: the gate runs at 150 ms against a 100 ms rule with a 10 ms tolerance. A caller
/// may confirm its slot up to the tolerance late (debug builds here wake 1.5-10 ms after
/// their slot, see `cli.rs`), and between the confirmation and the request reaching the
/// look-alike a debug process on a busy 2-core machine can stall for tens of ms: with a
/// 25 ms margin (gate 125 ms) and other builds running (load average 6-7), two of four
/// runs failed, one with a 429 for two calls sent 92 ms apart. The remaining 40 ms cover
/// that. So utilisation can be at most 100 / 150 = 0.667.
///
/// The floor, 0.55, leaves room for about 50 idle slots in 256 (0-12 per run were
/// measured here under load with the first gate, which voided late slots; none since): a
/// correctness check that the gate keeps the upstream busy, not a timing claim. A gate that
/// let the queue run dry between grants, or polled with sleeps, falls far below it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sixty_four_callers_in_eight_processes_share_one_gate_without_a_429() {
    let load = Load {
        rule: Duration::from_millis(100),
        gate: Duration::from_millis(150),
        tolerance: Duration::from_millis(10),
        processes: 8,
        callers: 8,
        calls_per_caller: 4,
    };
    let (summaries, arrivals, ids) = run(load).await;
    let f = check("load (debug)", &load, &summaries, &arrivals, &ids);
    assert!(
        f.utilisation >= 0.55,
        "utilisation {:.4} below the floor 0.55 ({} idle slots)",
        f.utilisation,
        f.idle_slots
    );
}

/// The soak: a 1000 ms gate, 8 × 8 callers, 5 calls each (320 calls, about 5.5 min),
/// release build (`make soak`): no two grants closer than 1000 ms on Redis' clock, zero
/// 429s from a look-alike whose rule is 990 ms (10 ms for the send and the loopback), and
/// utilisation of at least 0.99 of the gate's interval.
///
/// With the interval a floor and reservations paced at interval + tolerance, the 5 ms
/// tolerance puts the ceiling at 1000 / 1005 = 0.9950; each idle slot would cost a whole
/// interval, 0.31 % of this run.
///
/// Runs of the gate before the interval became a floor (its configured interval was a
/// target, with starts allowed the tolerance closer; same machine, same 320 calls), for
/// the record: at 1009 / 5 ms against the 1000 ms rule it held 0 429s and 0.9911 of the
/// rule five times in five, smallest arrival gap 1000.5-1008.3 ms; before that, a gate
/// that voided a late caller's slot met 0.99 once in nine. Other builds on the same two
/// cores delay sends by tens of ms: run it on a quiet machine. To try other margins:
/// `LOAD_GATE_MS`, `LOAD_TOLERANCE_MS`, `LOAD_RULE_MS`, `LOAD_CALLS_PER_CALLER` and
/// `LOAD_MIN_UTILISATION`.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "soak: 320 calls at a 1 s gate take about 5.5 minutes; run in release"]
async fn soak_sixty_four_callers_at_a_one_second_gate() {
    let load = Load {
        rule: Duration::from_millis(990),
        gate: Duration::from_millis(1000),
        tolerance: Duration::from_millis(5),
        processes: 8,
        callers: 8,
        calls_per_caller: 5,
    }
    .overridden_from_env();
    let floor = std::env::var("LOAD_MIN_UTILISATION").map_or(0.99, |v| {
        v.parse::<f64>()
            .unwrap_or_else(|_| panic!("LOAD_MIN_UTILISATION: not a number: {v:?}"))
    });
    let (summaries, arrivals, ids) = run(load).await;
    let f = check("soak (1 s gate)", &load, &summaries, &arrivals, &ids);
    assert!(
        f.gate_utilisation >= floor,
        "utilisation {:.4} of the gate interval, below {floor} ({} idle slots)",
        f.gate_utilisation,
        f.idle_slots
    );
}
