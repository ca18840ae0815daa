//! The Redis connection: mode detection, and failing fast when Redis is not there.

use std::time::{Duration, Instant};

use lawsync::config::{RedisConfig, RedisMode};
use lawsync::{RedisConn, StoreError};
use lawsync_tests::servers::{Topology, dead_port};

/// A hang guard for set-up against a dead or silent Redis; the figure itself is printed.
const HANG_GUARD: Duration = Duration::from_secs(5);

async fn connect(url: &str, mode: RedisMode) -> (Result<RedisConn, StoreError>, Duration) {
    let mut cfg = RedisConfig::for_url(url).expect("url");
    cfg.mode = mode;
    let started = Instant::now();
    let r = RedisConn::connect(&cfg).await;
    (r, started.elapsed())
}

#[tokio::test]
async fn modes_are_detected_and_forced() {
    assert!(!Topology::Standalone.connect().await.is_cluster());
    assert!(Topology::Cluster.connect().await.is_cluster());
    let forced = Topology::Cluster
        .connect_as(RedisMode::Cluster)
        .await
        .expect("cluster");
    assert!(forced.is_cluster());
    // A cluster client pointed at a standalone server cannot map slots: a clear error.
    let err = Topology::Standalone
        .connect_as(RedisMode::Cluster)
        .await
        .expect_err("not a cluster");
    assert!(!err.to_string().is_empty());
}

#[tokio::test]
async fn a_refused_connection_fails_fast_in_every_mode() {
    let url = format!("redis://127.0.0.1:{}", dead_port());
    for mode in [RedisMode::Auto, RedisMode::Standalone, RedisMode::Cluster] {
        let (r, took) = connect(&url, mode).await;
        let err = r.expect_err("nothing listens");
        eprintln!("{mode:?}: refused after {took:?}: {err}");
        assert!(matches!(err, StoreError::Unreachable(_)), "{mode:?}: {err:?}");
        assert!(took < HANG_GUARD, "{mode:?}: took {took:?}");
        assert!(
            !err.to_string().contains("127.0.0.1"),
            "the URL may carry a password: {err}"
        );
    }
}

#[tokio::test]
async fn a_silent_server_times_out() {
    // Accepts TCP connections and never answers: a Redis that hangs.
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.expect("bind");
    let url = format!(
        "redis://127.0.0.1:{}",
        listener.local_addr().expect("addr").port()
    );
    let hold = tokio::spawn(async move {
        let mut socks = Vec::new();
        while let Ok((s, _)) = listener.accept().await {
            socks.push(s);
        }
    });
    for mode in [RedisMode::Standalone, RedisMode::Cluster] {
        let (r, took) = connect(&url, mode).await;
        let err = r.expect_err("silent server");
        eprintln!("{mode:?}: silent server reported after {took:?}: {err}");
        assert!(
            matches!(err, StoreError::Timeout | StoreError::Unreachable(_)),
            "{mode:?}: {err:?}"
        );
        assert!(took < HANG_GUARD, "{mode:?}: took {took:?}");
    }
    hold.abort();
}

#[tokio::test]
async fn tls_urls_are_accepted_and_fail_cleanly_against_a_plain_server() {
    // rediss:// must be understood (ElastiCache Serverless is TLS-only); against a plain
    // server the handshake fails with an error, not a panic or a hang.
    let plain = Topology::Standalone.url().replacen("redis://", "rediss://", 1);
    for mode in [RedisMode::Standalone, RedisMode::Cluster] {
        let (r, took) = connect(&plain, mode).await;
        let err = r.expect_err("TLS against a plain server");
        eprintln!("{mode:?}: TLS mismatch reported after {took:?}: {err}");
        assert!(took < HANG_GUARD, "{mode:?}: took {took:?}");
    }
}
