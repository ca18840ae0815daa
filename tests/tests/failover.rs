//! A primary of the secure cluster (TLS, ACL, a replica per primary) fails in the middle of
//! a run and its replica takes over, as ElastiCache does when a primary's node dies.
//!
//! Replication is asynchronous: a write the old primary acknowledged but had not yet sent
//! to its replica is gone after the takeover. The test measures what was lost (and when it
//! had been acknowledged), how long writes stopped, and that the interval held across the
//! failover on Redis' clock. It runs alone in its binary: the other suites would see the
//! failover as an outage.

use std::collections::BTreeSet;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use lawsync::config::{GateConfig, RedisMode};
use lawsync::queue::{ErrorNote, Job, RetryQueue};
use lawsync::{Deadline, Gate, RedisConn};
use lawsync_tests::servers::{Topology, unique_ns};

/// The gate's interval in this run.
const INTERVAL: Duration = Duration::from_millis(100);
/// How long the old primary is silent before its replica takes over: longer than the
/// interval, as any real failover is (ElastiCache needs seconds to call a primary dead).
const DETECTION: Duration = Duration::from_millis(600);

/// The primary that serves `slot`, and its replica, as ports.
async fn primary_and_replica(conn: &mut RedisConn, slot: i64) -> (u16, u16) {
    let nodes: String = redis::cmd("CLUSTER")
        .arg("NODES")
        .query_async(conn)
        .await
        .expect("nodes");
    let port = |addr: &str| -> u16 {
        addr.split('@')
            .next()
            .and_then(|a| a.rsplit(':').next())
            .expect("addr")
            .parse()
            .expect("port")
    };
    let mut primary = None;
    for line in nodes.lines() {
        let f: Vec<&str> = line.split_whitespace().collect();
        if !f[2].contains("master") {
            continue;
        }
        let serves = f[8..].iter().any(|range| {
            let mut ends = range.split('-').map(|x| x.parse::<i64>().unwrap_or(-1));
            let lo = ends.next().unwrap_or(-1);
            let hi = ends.next().unwrap_or(lo);
            (lo..=hi).contains(&slot)
        });
        if serves {
            primary = Some((f[0].to_owned(), port(f[1])));
        }
    }
    let (id, primary_port) = primary.expect("a primary serves the slot");
    let replica = nodes
        .lines()
        .map(|l| l.split_whitespace().collect::<Vec<_>>())
        .find(|f| f[2].contains("slave") && f[3] == id)
        .map(|f| port(f[1]))
        .expect("the primary has a replica");
    (primary_port, replica)
}

/// A connection to one node of the secure cluster, not following the slot map.
async fn node(port: u16) -> RedisConn {
    let mut cfg = Topology::SecureCluster.config();
    cfg.urls = lawsync::config::parse_redis_urls(&format!("rediss://127.0.0.1:{port}")).expect("url");
    cfg.mode = RedisMode::Standalone;
    RedisConn::connect(&cfg).await.expect("node answers")
}

fn pid(port: u16) -> String {
    let path = format!("{}/../.run/redis/{port}/redis.pid", env!("CARGO_MANIFEST_DIR"));
    std::fs::read_to_string(&path)
        .unwrap_or_else(|e| panic!("{path}: {e}"))
        .trim()
        .to_owned()
}

fn signal(sig: &str, port: u16) {
    let status = std::process::Command::new("kill")
        .args([sig, &pid(port)])
        .status()
        .expect("kill");
    assert!(status.success(), "kill {sig} the node on {port}");
}

async fn role(port: u16) -> String {
    let mut conn = node(port).await;
    let role: Vec<redis::Value> = redis::cmd("ROLE").query_async(&mut conn).await.expect("role");
    match role.first() {
        Some(redis::Value::BulkString(b)) => String::from_utf8_lossy(b).into_owned(),
        other => panic!("ROLE answered {other:?}"),
    }
}

/// Waits until every node says the cluster is whole and the old primary follows the new.
async fn settled(old_primary: u16) {
    let ports: Vec<u16> = lawsync_tests::servers::test_var("LAWSYNC_TEST_SECURE_PORTS")
        .split(',')
        .map(|p| p.parse().expect("port"))
        .collect();
    let started = Instant::now();
    loop {
        let mut ok = role(old_primary).await == "slave";
        for &p in &ports {
            let mut conn = node(p).await;
            let info: String = redis::cmd("CLUSTER")
                .arg("INFO")
                .query_async(&mut conn)
                .await
                .expect("info");
            ok &= info.contains("cluster_state:ok");
        }
        if ok {
            return;
        }
        assert!(
            started.elapsed() < Duration::from_secs(30),
            "the cluster did not settle after the failover"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

#[derive(Default)]
struct Run {
    /// Grants, µs on Redis' clock.
    grants: Vec<u64>,
    /// Job ids Redis acknowledged, with when (since the run's start).
    acked: Vec<(String, Duration)>,
    failures: usize,
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_primary_failing_over_mid_run_loses_at_most_its_last_writes_and_keeps_the_interval() {
    let topo = Topology::SecureCluster;
    let ns = unique_ns("failover");
    let mut admin = topo.connect().await;
    let slot: i64 = redis::cmd("CLUSTER")
        .arg("KEYSLOT")
        .arg(ns.gate())
        .query_async(&mut admin)
        .await
        .expect("slot");
    let (primary, replica) = primary_and_replica(&mut admin, slot).await;

    let gate = Arc::new(Gate::new(
        topo.connect().await,
        &ns,
        GateConfig::new(INTERVAL, 1, Duration::from_secs(5)),
    ));
    let queue = Arc::new(RetryQueue::new(topo.connect().await, &ns));
    let run = Arc::new(Mutex::new(Run::default()));
    let stop = Arc::new(AtomicBool::new(false));
    let started = Instant::now();
    let writers: Vec<_> = (0..2)
        .map(|w| {
            let (gate, queue, run, stop) = (gate.clone(), queue.clone(), run.clone(), stop.clone());
            tokio::spawn(async move {
                let mut n = 0;
                while !stop.load(Ordering::Relaxed) {
                    match gate.acquire(Deadline::NONE).await {
                        Ok(g) => run.lock().expect("run").grants.push(g.granted_at_us),
                        Err(_) => {
                            run.lock().expect("run").failures += 1;
                            tokio::time::sleep(Duration::from_millis(20)).await;
                            continue;
                        }
                    }
                    // Each grant is followed by writes to the queue, as a fetch that parks
                    // work does; several per grant, so the loss is measured in fine steps.
                    for _ in 0..5 {
                        n += 1;
                        let job = Job::detail(&format!("{w}-{n}"));
                        let note = ErrorNote::now("failover", "parked in the failover test", None);
                        match queue.enqueue(&job, None, note).await {
                            Ok(_) => run.lock().expect("run").acked.push((job.id(), started.elapsed())),
                            Err(_) => run.lock().expect("run").failures += 1,
                        }
                    }
                }
            })
        })
        .collect();

    tokio::time::sleep(Duration::from_millis(1500)).await;
    // The primary stops answering (a dead node); its replica takes over without it.
    let frozen_at = started.elapsed();
    signal("-STOP", primary);
    tokio::time::sleep(DETECTION).await;
    let mut promoted = node(replica).await;
    let _: () = redis::cmd("CLUSTER")
        .arg("FAILOVER")
        .arg("TAKEOVER")
        .query_async(&mut promoted)
        .await
        .expect("takeover");
    let took_over_at = started.elapsed();
    while role(replica).await != "master" {
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    // The old primary comes back, learns it was replaced and follows the new one (its
    // unreplicated writes are dropped then).
    tokio::time::sleep(Duration::from_millis(500)).await;
    signal("-CONT", primary);
    tokio::time::sleep(Duration::from_millis(2000)).await;
    stop.store(true, Ordering::Relaxed);
    for w in writers {
        tokio::time::timeout(Duration::from_secs(20), w)
            .await
            .expect("writers stop")
            .expect("writer");
    }
    settled(primary).await;

    let run = run.lock().expect("run");
    let stored: BTreeSet<String> = queue
        .list(100_000)
        .await
        .expect("list")
        .into_iter()
        .map(|e| e.id)
        .collect();
    let lost: Vec<&(String, Duration)> = run.acked.iter().filter(|(id, _)| !stored.contains(id)).collect();
    let before = run.acked.iter().filter(|(_, at)| *at < frozen_at).count();
    let after = run.acked.iter().filter(|(_, at)| *at > took_over_at).count();
    let last_before = run
        .acked
        .iter()
        .filter(|(_, at)| *at < frozen_at)
        .map(|(_, at)| *at)
        .max()
        .expect("writes before");
    let first_after = run
        .acked
        .iter()
        .filter(|(_, at)| *at > frozen_at)
        .map(|(_, at)| *at)
        .min()
        .expect("writes after");
    let mut grants = run.grants.clone();
    grants.sort_unstable();
    let min_gap = grants.windows(2).map(|w| w[1] - w[0]).min().expect("grants");
    let lost_ages: Vec<u128> = lost
        .iter()
        .map(|(_, at)| frozen_at.saturating_sub(*at).as_millis())
        .collect();
    eprintln!(
        "failover: {} writes acknowledged ({before} before the primary froze, {after} after the takeover), \
         {} lost (acknowledged {lost_ages:?} ms before it froze); writes stopped for {} ms \
         (frozen {} ms, takeover at +{} ms); {} failed calls during it; {} grants, closest two {} µs apart (interval {} µs)",
        run.acked.len(),
        lost.len(),
        (first_after - last_before).as_millis(),
        DETECTION.as_millis(),
        (took_over_at - frozen_at).as_millis(),
        run.failures,
        grants.len(),
        min_gap,
        INTERVAL.as_micros(),
    );
    assert!(before > 0 && after > 0, "writes on both sides of the failover");
    assert!(
        min_gap >= INTERVAL.as_micros() as u64,
        "two grants {min_gap} µs apart across the failover"
    );
    // Only the last moments before the primary froze can be lost: what it had not yet
    // sent to its replica. On loopback that is a few milliseconds' worth.
    for (id, at) in &lost {
        assert!(
            frozen_at.saturating_sub(*at) < Duration::from_millis(250),
            "{id}, acknowledged {} ms before the primary froze, was lost",
            frozen_at.saturating_sub(*at).as_millis()
        );
    }
}
