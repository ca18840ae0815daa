//! gate-probe: acquires slots from its own process, for the multi-process gate test.
//!
//! Usage: `gate-probe TOPOLOGY APP_ENV INTERVAL_MS COUNT`, where TOPOLOGY names one of the
//! test servers (`Standalone`, `Cluster`, `SecureCluster`; see `Topology`). Waits for a line on stdin
//! (so that several probes start together), then prints the moment of each grant, µs on
//! Redis' clock, one per line.

use std::io::{BufRead, Write};
use std::sync::Arc;
use std::time::Duration;

use lawsync::config::GateConfig;
use lawsync::{Deadline, Gate, Namespace, RedisConn};
use lawsync_tests::servers::Topology;

#[tokio::main(flavor = "current_thread")]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let args: Vec<String> = std::env::args().collect();
    let [_, topology, env, interval_ms, count] = args.as_slice() else {
        return Err("usage: gate-probe TOPOLOGY APP_ENV INTERVAL_MS COUNT".into());
    };
    let topology = Topology::EVERY
        .into_iter()
        .find(|t| format!("{t:?}") == *topology)
        .ok_or("TOPOLOGY must be Standalone, Cluster or SecureCluster")?;
    let conn = RedisConn::connect(&topology.config()).await?;
    let cfg = GateConfig::new(
        Duration::from_millis(interval_ms.parse()?),
        1,
        Duration::from_secs(30),
    );
    let gate = Arc::new(Gate::new(conn, &Namespace::new(env, "law-go-kr")?, cfg));
    let mut go = String::new();
    std::io::stdin().lock().read_line(&mut go)?;
    let tasks: Vec<_> = (0..count.parse::<usize>()?)
        .map(|_| {
            let gate = gate.clone();
            tokio::spawn(async move { gate.acquire(Deadline::NONE).await })
        })
        .collect();
    let mut out = std::io::stdout().lock();
    for t in tasks {
        let grant = t.await??;
        writeln!(out, "{}", grant.granted_at_us)?;
    }
    Ok(())
}
