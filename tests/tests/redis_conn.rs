//! The Redis connection: mode detection, and failing fast when Redis is not there.

use std::time::{Duration, Instant};

use lawsync::config::{RedisConfig, RedisMode};
use lawsync::{RedisConn, RedisFailure};
use lawsync_tests::servers::{OwnRedis, Topology, dead_port};

/// A hang guard for set-up against a dead or silent Redis; the figure itself is printed.
const HANG_GUARD: Duration = Duration::from_secs(5);

async fn connect(url: &str, mode: RedisMode) -> (Result<RedisConn, RedisFailure>, Duration) {
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
        assert!(matches!(err, RedisFailure::Unreachable(_)), "{mode:?}: {err:?}");
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
            matches!(err, RedisFailure::Timeout | RedisFailure::Unreachable(_)),
            "{mode:?}: {err:?}"
        );
        assert!(took < HANG_GUARD, "{mode:?}: took {took:?}");
    }
    hold.abort();
}

#[tokio::test]
async fn tls_urls_start_a_tls_handshake() {
    // rediss:// must be understood (ElastiCache Serverless is TLS-only): the first byte a
    // client sends is a TLS record (0x16, handshake), not a Redis command.
    for mode in [RedisMode::Standalone, RedisMode::Cluster] {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.expect("bind");
        let url = format!(
            "rediss://127.0.0.1:{}",
            listener.local_addr().expect("addr").port()
        );
        let first_byte = tokio::spawn(async move {
            let (mut sock, _) = listener.accept().await.expect("accept");
            let mut b = [0u8; 1];
            tokio::io::AsyncReadExt::read_exact(&mut sock, &mut b)
                .await
                .expect("read");
            b[0]
        });
        let (r, took) = connect(&url, mode).await;
        let err = r.expect_err("no TLS server there");
        eprintln!("{mode:?}: TLS attempt reported after {took:?}: {err}");
        assert_ne!(
            err,
            RedisFailure::Unreachable("invalid REDIS_URL"),
            "{mode:?}: rediss:// not understood"
        );
        assert_eq!(
            first_byte.await.expect("accept task"),
            0x16,
            "{mode:?}: not a TLS ClientHello"
        );
        assert!(took < HANG_GUARD, "{mode:?}: took {took:?}");
    }
}

#[tokio::test]
async fn a_frozen_redis_fails_the_gate_fast_and_recovers() {
    use lawsync::config::GateConfig;
    use lawsync::{Deadline, Gate, GateError};
    let redis = OwnRedis::start().await;
    let conn = RedisConn::connect(&redis.config()).await.expect("connect");
    let cfg = GateConfig::new(Duration::from_millis(10), 1, Duration::from_secs(30));
    let gate = Gate::new(conn, &lawsync_tests::servers::unique_ns("frozen"), cfg);
    gate.acquire(Deadline::NONE)
        .await
        .expect("grant while Redis runs");
    redis.freeze();
    let started = Instant::now();
    let err = gate.acquire(Deadline::NONE).await.expect_err("frozen Redis");
    let took = started.elapsed();
    eprintln!("frozen Redis reported after {took:?}: {err}");
    assert_eq!(err, GateError::Unavailable(RedisFailure::Timeout));
    assert!(
        took < Duration::from_secs(2),
        "the 250 ms response timeout must end the wait: {took:?}"
    );
    redis.thaw();
    let mut again = None;
    for _ in 0..50 {
        if let Ok(g) = gate.acquire(Deadline::NONE).await {
            again = Some(g);
            break;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    assert!(
        again.is_some(),
        "the connection must recover once Redis answers again"
    );
}
