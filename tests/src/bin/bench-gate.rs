//! bench-gate: the project's gate beside a faithful port of the seed's polling gate, on the
//! same Redis, under the same load, in one run. Prints a Markdown table and the ratios.
//!
//! The seed's `SLOT` script is kept as written (PTTL → wait, else SET PX → go), with one
//! addition so that both gates are timed alike: it also returns Redis' TIME, and the
//! grant time of either gate is Redis' clock at the call that granted.
//!
//! Usage: `bench-gate [REDIS_URL]` (default: `LAWSYNC_TEST_REDIS_URL`); `make bench-gate`
//! starts a Redis of its own for it.
#![allow(clippy::print_stdout)] // a report printer: stdout is its product

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use lawsync::config::{GateConfig, RedisConfig};
use lawsync::{Deadline, Gate, Namespace, RedisConn};
use redis::Script;

/// The seed's SLOT script (seed 000), plus TIME in its reply for timing on Redis' clock.
const SEED_SLOT: &str = r"
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000000 + tonumber(t[2])
local ttl = redis.call('PTTL', KEYS[1])
if ttl > 0 then return {ttl, now} end
redis.call('SET', KEYS[1], '1', 'PX', ARGV[1])
return {0, now}
";

const INTERVAL: Duration = Duration::from_millis(20);
const GRANTS: usize = 200;
const CONNECTIONS: usize = 8;
const LATENCY_SAMPLES: usize = 3000;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Design {
    Project,
    Seed,
}

/// Per grant: granted at and slot (µs on Redis' clock), slots moved before the grant, and
/// grant to send (µs).
type GrantRecord = (u64, u64, u32, u64);

#[derive(Debug)]
struct Run {
    calls_per_grant: f64,
    server_calls_per_grant: f64,
    utilisation: f64,
    min_gap_ms: f64,
    /// Slots moved behind a late start, or lost (see `Grant::reslotted`).
    moved_slots: u64,
    /// Grant time minus slot: how late waiters started on their slots (p50, p99, max).
    late_us: [u64; 3],
    /// From the grant's reply to the caller's code running again (p50, p99, max): what a
    /// client checks against `grant_validity` before it sends.
    grant_to_send_us: [u64; 3],
}

#[tokio::main(flavor = "multi_thread", worker_threads = 2)]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let url = std::env::args()
        .nth(1)
        .or_else(|| std::env::var("LAWSYNC_TEST_REDIS_URL").ok())
        .ok_or("give a Redis URL, or run `make bench-gate`")?;
    let cfg = RedisConfig::for_url(&url)?;
    let mut conns = Vec::new();
    for _ in 0..CONNECTIONS {
        conns.push(RedisConn::connect(&cfg).await?);
    }
    println!(
        "bench-gate: interval {} ms, {GRANTS} grants per run, {CONNECTIONS} connections (instances), Redis {}\n",
        INTERVAL.as_millis(),
        if conns[0].is_cluster() {
            "cluster"
        } else {
            "standalone"
        }
    );
    println!(
        "| waiters | design | calls/grant (client) | calls/grant (Redis commandstats) | utilisation of the interval | min gap between grants | start after slot p50 / p99 / max | grant to send p50 / p99 / max | slots moved behind a late start |"
    );
    println!("|---:|---|---:|---:|---:|---:|---:|---:|---:|");
    let mut summary = Vec::new();
    for waiters in [16usize, 64] {
        let mut pair = Vec::new();
        for design in [Design::Seed, Design::Project] {
            let run = contended(&conns, design, waiters).await?;
            println!(
                "| {waiters} | {} | {:.2} | {:.2} | {:.4} | {:.2} ms | {} | {} | {} |",
                if design == Design::Seed {
                    "seed (polling)"
                } else {
                    "lawsync (reserve + confirm)"
                },
                run.calls_per_grant,
                run.server_calls_per_grant,
                run.utilisation,
                run.min_gap_ms,
                if design == Design::Seed {
                    "—".to_owned()
                } else {
                    ms3(run.late_us)
                },
                if design == Design::Seed {
                    "—".to_owned()
                } else {
                    ms3(run.grant_to_send_us)
                },
                if design == Design::Seed {
                    "—".to_owned()
                } else {
                    run.moved_slots.to_string()
                },
            );
            pair.push(run);
        }
        summary.push((waiters, pair));
    }
    let (p50, p99, raw50, raw99) = uncontended(&conns[0]).await?;
    println!("\n| uncontended acquire | p50 | p99 |\n|---|---:|---:|");
    println!("| lawsync `acquire` | {:.1} µs | {:.1} µs |", p50, p99);
    println!("| raw `EVALSHA return 1` | {:.1} µs | {:.1} µs |", raw50, raw99);
    println!("\nratios:");
    for (waiters, pair) in &summary {
        println!(
            "  {waiters} waiters: seed makes {:.1}x the Redis calls per grant of lawsync ({:.2} vs {:.2}); utilisation {:.4} vs {:.4}",
            pair[0].calls_per_grant / pair[1].calls_per_grant,
            pair[0].calls_per_grant,
            pair[1].calls_per_grant,
            pair[0].utilisation,
            pair[1].utilisation
        );
    }
    println!(
        "  uncontended p50: lawsync acquire is {:.2}x a raw EVALSHA round trip",
        p50 / raw50
    );
    let at64 = &summary[1].1[1];
    let interval_ms = INTERVAL.as_secs_f64() * 1e3;
    // Reservations are paced at interval + tolerance: the most this interval allows.
    let tolerance = GateConfig::new(INTERVAL, 1, Duration::from_secs(60)).tolerance;
    let ceiling = INTERVAL.as_secs_f64() / (INTERVAL + tolerance).as_secs_f64();
    println!(
        "  utilisation at 64 waiters {:.4} of the interval (ceiling {ceiling:.4} at tolerance {} ms); \
         start after slot p50 / p99 {}; grant to send p50 / p99 {}",
        at64.utilisation,
        tolerance.as_millis(),
        ms3(at64.late_us),
        ms3(at64.grant_to_send_us)
    );
    let checks = [
        (
            "calls per grant at 64 waiters <= 2.5",
            at64.calls_per_grant <= 2.5,
        ),
        (
            "no gap between grants below the interval, at 16 and 64 waiters",
            summary.iter().all(|(_, pair)| pair[1].min_gap_ms >= interval_ms),
        ),
        ("uncontended p50 <= 4x raw EVALSHA", p50 <= 4.0 * raw50),
    ];
    println!("\nacceptance:");
    let mut missed = 0;
    for (what, ok) in checks {
        println!("  [{}] {what}", if ok { "ok" } else { "MISSED" });
        missed += usize::from(!ok);
    }
    if missed > 0 {
        return Err(format!("{missed} acceptance line(s) missed").into());
    }
    Ok(())
}

/// p50 / p99 / max in µs, printed in ms.
fn ms3(v: [u64; 3]) -> String {
    format!(
        "{:.2} / {:.2} / {:.2} ms",
        v[0] as f64 / 1e3,
        v[1] as f64 / 1e3,
        v[2] as f64 / 1e3
    )
}

/// p50, p99 and max of `v`, sorted here.
fn pcts(mut v: Vec<u64>) -> [u64; 3] {
    v.sort_unstable();
    let at = |q: f64| v[((v.len() - 1) as f64 * q).round() as usize];
    [at(0.5), at(0.99), at(1.0)]
}

async fn commandstats_calls(conn: &RedisConn) -> Result<u64, redis::RedisError> {
    let info: String = redis::cmd("INFO")
        .arg("commandstats")
        .query_async(&mut conn.clone())
        .await?;
    Ok(info
        .lines()
        .filter(|l| l.starts_with("cmdstat_evalsha:") || l.starts_with("cmdstat_eval:"))
        .filter_map(|l| l.split("calls=").nth(1)?.split(',').next()?.parse::<u64>().ok())
        .sum())
}

async fn contended(
    conns: &[RedisConn],
    design: Design,
    waiters: usize,
) -> Result<Run, Box<dyn std::error::Error>> {
    let env = format!(
        "bench-{}-{waiters}-{}",
        std::process::id(),
        // Each design its own key: the seed's is a string, this gate's a hash.
        if design == Design::Seed { "seed" } else { "lawsync" }
    );
    let ns = Namespace::new(&env, "law-go-kr")?;
    let gate_cfg = GateConfig::new(INTERVAL, 1, Duration::from_secs(60));
    let gates: Vec<Arc<Gate>> = conns
        .iter()
        .map(|c| Arc::new(Gate::new(c.clone(), &ns, gate_cfg)))
        .collect();
    let seed_calls = Arc::new(AtomicU64::new(0));
    let grants: Arc<Mutex<Vec<GrantRecord>>> = Arc::new(Mutex::new(Vec::new()));
    let started = Arc::new(AtomicU64::new(0));
    let seed_script = Arc::new(Script::new(SEED_SLOT));
    let before = commandstats_calls(&conns[0]).await?;
    let mut tasks = Vec::new();
    for w in 0..waiters {
        let (gate, conn) = (gates[w % gates.len()].clone(), conns[w % conns.len()].clone());
        let (grants, seed_calls, seed_script, started, key) = (
            grants.clone(),
            seed_calls.clone(),
            seed_script.clone(),
            started.clone(),
            ns.gate(),
        );
        // Every waiter keeps asking until GRANTS acquisitions have been started, then
        // finishes the one it is in: all calls made belong to a grant that completed.
        tasks.push(tokio::spawn(async move {
            while started.fetch_add(1, Ordering::SeqCst) < GRANTS as u64 {
                let grant = match design {
                    Design::Project => {
                        let g = gate.acquire(Deadline::NONE).await.expect("grant");
                        (
                            g.granted_at_us,
                            g.slot_us,
                            g.reslotted,
                            g.age().as_micros() as u64,
                        )
                    }
                    Design::Seed => {
                        let t = seed_acquire(&conn, &seed_script, &key, &seed_calls).await;
                        (t, t, 0, 0)
                    }
                };
                grants.lock().expect("lock").push(grant);
            }
        }));
    }
    for t in tasks {
        t.await?;
    }
    let calls = seed_calls.load(Ordering::SeqCst) + gates.iter().map(|g| g.stats().round_trips).sum::<u64>();
    let after = commandstats_calls(&conns[0]).await?;
    let mut grants = grants.lock().expect("lock").clone();
    assert_eq!(grants.len(), GRANTS);
    grants.sort_unstable();
    let first = grants[0].0;
    let last = grants[GRANTS - 1].0;
    let ideal = INTERVAL.as_micros() as f64 * (GRANTS - 1) as f64;
    let min_gap = grants.windows(2).map(|w| w[1].0 - w[0].0).min().unwrap_or(0);
    let moved: u64 = grants.iter().map(|g| u64::from(g.2)).sum();
    Ok(Run {
        calls_per_grant: calls as f64 / GRANTS as f64,
        server_calls_per_grant: (after - before) as f64 / GRANTS as f64,
        utilisation: ideal / (last - first) as f64,
        min_gap_ms: min_gap as f64 / 1e3,
        moved_slots: moved,
        late_us: pcts(grants.iter().map(|g| g.0 - g.1).collect()),
        grant_to_send_us: pcts(grants.iter().map(|g| g.3).collect()),
    })
}

/// The seed's `await()`: poll SLOT, sleep the returned TTL, repeat (30 s bound kept).
async fn seed_acquire(conn: &RedisConn, script: &Script, key: &str, calls: &AtomicU64) -> u64 {
    let mut conn = conn.clone();
    let mut waited = 0u64;
    loop {
        calls.fetch_add(1, Ordering::SeqCst);
        let (delay, now): (u64, u64) = script
            .key(key)
            .arg(INTERVAL.as_millis() as u64)
            .invoke_async(&mut conn)
            .await
            .expect("SLOT");
        if delay == 0 {
            return now;
        }
        assert!(waited + delay <= 30_000, "seed: wait bound exceeded");
        tokio::time::sleep(Duration::from_millis(delay)).await;
        waited += delay;
    }
}

async fn uncontended(conn: &RedisConn) -> Result<(f64, f64, f64, f64), Box<dyn std::error::Error>> {
    let ns = Namespace::new(&format!("bench-lat-{}", std::process::id()), "law-go-kr")?;
    // A burst far above the sample count: every acquire is granted at once.
    let cfg = GateConfig::new(Duration::from_millis(1), 1_000_000, Duration::from_secs(1));
    // An idle state, as a gate in use has: a missing one would open with its quiet.
    lawsync_tests::servers::settle_gate(&mut conn.clone(), &ns.gate()).await;
    let gate = Gate::new(conn.clone(), &ns, cfg);
    let raw = Script::new("return 1");
    let mut c = conn.clone();
    let _: i64 = raw.prepare_invoke().invoke_async(&mut c).await?;
    gate.acquire(Deadline::NONE).await?;
    let mut ours = Vec::with_capacity(LATENCY_SAMPLES);
    let mut base = Vec::with_capacity(LATENCY_SAMPLES);
    // Interleaved, so that machine noise hits both series alike.
    for _ in 0..LATENCY_SAMPLES {
        let t = Instant::now();
        let g = gate.acquire(Deadline::NONE).await?;
        ours.push(t.elapsed());
        assert_eq!(g.round_trips, 1);
        let t = Instant::now();
        let _: i64 = raw.prepare_invoke().invoke_async(&mut c).await?;
        base.push(t.elapsed());
    }
    let pct = |v: &mut Vec<Duration>, p: f64| {
        v.sort_unstable();
        v[((v.len() as f64 - 1.0) * p) as usize].as_secs_f64() * 1e6
    };
    Ok((
        pct(&mut ours, 0.5),
        pct(&mut ours, 0.99),
        pct(&mut base, 0.5),
        pct(&mut base, 0.99),
    ))
}
