//! bench-queue: a drainer pass of the seed's design beside this queue's claim, at backlogs
//! of 1e4, 1e5 and 1e6 entries, on the same Redis, in one run.
//!
//! The seed keeps one sorted set of JSON members scored by first failure and reads all of
//! it every pass (`ZRANGE key 0 -1`). This queue leases a batch with one script. Printed:
//! Redis time per pass (from `INFO commandstats`), wall time per pass at the client, and
//! bytes moved to the client.
//!
//! Usage: `bench-queue [REDIS_URL]` (default: `LAWSYNC_TEST_REDIS_URL`); `make bench-queue`
//! starts a Redis of its own for it.
#![allow(clippy::print_stdout)] // a report printer: stdout is its product

use std::time::{Duration, Instant};

use lawsync::config::RedisConfig;
use lawsync::queue::{Job, JobKind, RetryQueue};
use lawsync::{Namespace, RedisConn};

const BATCH: usize = 10;
const CLAIMS: usize = 50;
const SEED_PASSES: usize = 3;
const CHUNK: usize = 2_000;

#[derive(Debug, Default, Clone, Copy)]
struct Cost {
    redis_us: f64,
    wall_us: f64,
    bytes: f64,
}

#[tokio::main(flavor = "current_thread")]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let url = std::env::args()
        .nth(1)
        .or_else(|| std::env::var("LAWSYNC_TEST_REDIS_URL").ok())
        .ok_or("give a Redis URL, or run `make bench-queue`")?;
    let mut cfg = RedisConfig::for_url(&url)?;
    // The seed's full read of a million entries takes far longer than one reply may in
    // production; the benchmark waits for it.
    cfg.response_timeout = Duration::from_secs(60);
    let mut conn = RedisConn::connect(&cfg).await?;
    println!("bench-queue: a batch of {BATCH} per claim; seed = ZRANGE of the whole set per pass\n");
    println!(
        "| backlog | seed pass: Redis time | seed pass: wall | seed pass: bytes | claim: Redis time | claim: wall | claim: bytes | claim incl. promoting due entries: Redis time | ratio (seed / claim, Redis time) |"
    );
    println!("|---:|---:|---:|---:|---:|---:|---:|---:|---:|");
    let mut at_million = None;
    for n in [10_000usize, 100_000, 1_000_000] {
        let tag = format!("bench-{}-{n}", std::process::id());
        let seed = seed_pass(&mut conn, &tag, n).await?;
        let (claim, promoting) = claims(&mut conn, &tag, n).await?;
        println!(
            "| {n} | {} | {} | {} | {} | {} | {} | {} | {:.0}x |",
            us(seed.redis_us),
            us(seed.wall_us),
            bytes(seed.bytes),
            us(claim.redis_us),
            us(claim.wall_us),
            bytes(claim.bytes),
            us(promoting.redis_us),
            seed.redis_us / claim.redis_us
        );
        at_million = Some(claim);
    }
    let claim = at_million.ok_or("no run")?;
    println!("\nacceptance:");
    let ok = claim.redis_us <= 1000.0;
    println!(
        "  [{}] claim <= 1 ms of Redis time at 1e6 ({})",
        if ok { "ok" } else { "MISSED" },
        us(claim.redis_us)
    );
    Ok(())
}

fn us(v: f64) -> String {
    if v >= 1e6 {
        format!("{:.2} s", v / 1e6)
    } else if v >= 1e3 {
        format!("{:.2} ms", v / 1e3)
    } else {
        format!("{v:.0} µs")
    }
}

fn bytes(v: f64) -> String {
    if v >= 1e6 {
        format!("{:.1} MB", v / 1e6)
    } else if v >= 1e3 {
        format!("{:.1} kB", v / 1e3)
    } else {
        format!("{v:.0} B")
    }
}

/// (calls, usec) of the given commandstats lines, summed.
async fn stats(conn: &mut RedisConn, names: &[&str]) -> Result<(u64, u64), redis::RedisError> {
    let info: String = redis::cmd("INFO").arg("commandstats").query_async(conn).await?;
    let mut calls = 0;
    let mut usec = 0;
    for line in info.lines() {
        let Some((name, rest)) = line.split_once(':') else {
            continue;
        };
        if !names.iter().any(|n| name == format!("cmdstat_{n}")) {
            continue;
        }
        for field in rest.split(',') {
            match field.split_once('=') {
                Some(("calls", v)) => calls += v.parse::<u64>().unwrap_or(0),
                Some(("usec", v)) => usec += v.parse::<u64>().unwrap_or(0),
                _ => {}
            }
        }
    }
    Ok((calls, usec))
}

fn job(i: usize) -> Job {
    Job::detail(&i.to_string())
}

fn job_json(i: usize) -> String {
    serde_json::to_string(&job(i)).unwrap_or_default()
}

async fn seed_pass(conn: &mut RedisConn, tag: &str, n: usize) -> Result<Cost, Box<dyn std::error::Error>> {
    let key = format!("{{{tag}}}:seed:retry");
    let base = 1_764_000_000_000u64;
    for start in (0..n).step_by(CHUNK) {
        let mut cmd = redis::cmd("ZADD");
        cmd.arg(&key);
        for i in start..(start + CHUNK).min(n) {
            cmd.arg(base + i as u64).arg(format!(
                r#"{{"type":"{}","payload":{{"id":"{i}"}},"retryCount":0}}"#,
                JobKind::Detail
            ));
        }
        let _: () = cmd.query_async(conn).await?;
    }
    let before = stats(conn, &["zrange"]).await?;
    let started = Instant::now();
    let mut moved = 0usize;
    for _ in 0..SEED_PASSES {
        let all: Vec<String> = redis::cmd("ZRANGE")
            .arg(&key)
            .arg(0)
            .arg(-1)
            .query_async(conn)
            .await?;
        moved += all.iter().map(String::len).sum::<usize>();
    }
    let wall = started.elapsed();
    let after = stats(conn, &["zrange"]).await?;
    let _: () = redis::cmd("UNLINK").arg(&key).query_async(conn).await?;
    Ok(Cost {
        redis_us: (after.1 - before.1) as f64 / SEED_PASSES as f64,
        wall_us: wall.as_micros() as f64 / SEED_PASSES as f64,
        bytes: moved as f64 / SEED_PASSES as f64,
    })
}

/// Times claims over `n` entries, every one due: first with the entries already promoted
/// to `ready` (the steady state), then straight from `waiting` (each claim also promotes).
async fn claims(
    conn: &mut RedisConn,
    tag: &str,
    n: usize,
) -> Result<(Cost, Cost), Box<dyn std::error::Error>> {
    let ns = Namespace::new(tag, "law-go-kr")?;
    let keys = ns.queue();
    fill(conn, &ns, n, &keys.ready).await?;
    let steady = time_claims(conn, &ns).await?;
    fill(conn, &ns, n, &keys.waiting).await?;
    let promoting = time_claims(conn, &ns).await?;
    Ok((steady, promoting))
}

/// Writes `n` entries as the queue stores them, due long ago, indexed in `due_set`.
async fn fill(
    conn: &mut RedisConn,
    ns: &Namespace,
    n: usize,
    due_set: &str,
) -> Result<(), redis::RedisError> {
    let k = ns.queue();
    let base = 1_764_000_000_000u64;
    let error = r#"[{"atMs":1764000000000,"kind":"http_status","message":"law.go.kr call failed: HTTP 503 (attempt 3)","status":503}]"#;
    for start in (0..n).step_by(CHUNK) {
        let (mut jobs, mut count, mut errors, mut first, mut due) = (
            redis::cmd("HSET"),
            redis::cmd("HSET"),
            redis::cmd("HSET"),
            redis::cmd("ZADD"),
            redis::cmd("ZADD"),
        );
        jobs.arg(&k.jobs);
        count.arg(&k.count);
        errors.arg(&k.errors);
        first.arg(&k.first);
        due.arg(due_set);
        for i in start..(start + CHUNK).min(n) {
            let (id, score) = (job(i).id(), base + i as u64);
            jobs.arg(&id).arg(job_json(i));
            count.arg(&id).arg(0);
            errors.arg(&id).arg(error);
            first.arg(score).arg(&id);
            due.arg(score).arg(&id);
        }
        let mut p = redis::pipe();
        p.add_command(jobs)
            .add_command(count)
            .add_command(errors)
            .add_command(first)
            .add_command(due);
        let _: () = p.query_async(conn).await?;
    }
    Ok(())
}

/// Runs [`CLAIMS`] claims of [`BATCH`], then removes every key of the namespace.
async fn time_claims(conn: &mut RedisConn, ns: &Namespace) -> Result<Cost, Box<dyn std::error::Error>> {
    let queue = RetryQueue::new(conn.clone(), ns);
    let before = stats(conn, &["evalsha", "eval"]).await?;
    let started = Instant::now();
    let mut moved = 0usize;
    for _ in 0..CLAIMS {
        let c = queue.claim(BATCH, Duration::from_secs(600)).await?;
        // What the reply carries per entry: id, token, job JSON, count, first failure, errors.
        moved += c
            .entries
            .iter()
            .map(|e| {
                e.id.len() * 2
                    + serde_json::to_string(&e.job).map_or(0, |s| s.len())
                    + serde_json::to_string(&e.errors).map_or(0, |s| s.len())
                    + 24
            })
            .sum::<usize>();
    }
    let wall = started.elapsed();
    let after = stats(conn, &["evalsha", "eval"]).await?;
    let k = ns.queue();
    let _: () = redis::cmd("UNLINK")
        .arg(
            &[
                &k.jobs, &k.first, &k.count, &k.errors, &k.waiting, &k.ready, &k.leased, &k.lease, &k.dead,
                &k.seq,
            ][..],
        )
        .query_async(conn)
        .await?;
    Ok(Cost {
        redis_us: (after.1 - before.1) as f64 / CLAIMS as f64,
        wall_us: wall.as_micros() as f64 / CLAIMS as f64,
        bytes: moved as f64 / CLAIMS as f64,
    })
}
