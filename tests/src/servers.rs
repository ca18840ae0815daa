//! Where the test Redis servers are, and a namespace of one's own on them.

use std::sync::atomic::{AtomicU32, Ordering};
use std::time::{SystemTime, UNIX_EPOCH};

use lawsync::config::{RedisConfig, RedisMode};
use lawsync::{Namespace, RedisConn};

/// Which server a test runs against.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Topology {
    Standalone,
    Cluster,
}

impl Topology {
    /// Both, for tests that must hold on either.
    pub const ALL: [Topology; 2] = [Topology::Standalone, Topology::Cluster];

    /// The URL from the environment `make test` sets; panics with the fix when unset.
    pub fn url(self) -> String {
        let var = match self {
            Topology::Standalone => "LAWSYNC_TEST_REDIS_URL",
            Topology::Cluster => "LAWSYNC_TEST_CLUSTER_URL",
        };
        std::env::var(var).unwrap_or_else(|_| {
            panic!("{var} is not set: run the tests with `make test`, or start the servers with `scripts/test-redis.sh up` and export what it prints")
        })
    }

    /// A connection in the mode this topology needs (auto-detected, as in production).
    pub async fn connect(self) -> RedisConn {
        let cfg = RedisConfig::for_url(&self.url()).expect("test Redis URL is valid");
        let conn = RedisConn::connect(&cfg).await.expect("test Redis answers");
        assert_eq!(
            conn.is_cluster(),
            self == Topology::Cluster,
            "mode detection for {self:?}"
        );
        conn
    }

    /// A connection forced into standalone or cluster mode.
    pub async fn connect_as(self, mode: RedisMode) -> Result<RedisConn, lawsync::StoreError> {
        let mut cfg = RedisConfig::for_url(&self.url()).expect("test Redis URL is valid");
        cfg.mode = mode;
        RedisConn::connect(&cfg).await
    }
}

/// An `APP_ENV` no other test (or test run) uses, so tests never share keys and never
/// need to flush anything.
pub fn unique_env(label: &str) -> String {
    static N: AtomicU32 = AtomicU32::new(0);
    let nanos = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_nanos());
    format!(
        "t-{label}-{}-{}-{}",
        std::process::id(),
        nanos % 1_000_000_000,
        N.fetch_add(1, Ordering::Relaxed)
    )
}

/// A namespace of its own for one test.
pub fn unique_ns(label: &str) -> Namespace {
    Namespace::new(&unique_env(label), "law-go-kr").expect("valid namespace")
}

/// A loopback port nothing listens on (bound, then released).
pub fn dead_port() -> u16 {
    let l = std::net::TcpListener::bind("127.0.0.1:0").expect("bind");
    l.local_addr().expect("addr").port()
}

/// A Redis server of one test's own, on a fresh port, for tests that stop, freeze or kill
/// it. Killed when dropped.
#[derive(Debug)]
pub struct OwnRedis {
    pub port: u16,
    child: tokio::process::Child,
}

impl OwnRedis {
    /// Starts `redis-server` without persistence and waits until it answers.
    pub async fn start() -> Self {
        let port = dead_port();
        let child = tokio::process::Command::new("redis-server")
            .args([
                "--port",
                &port.to_string(),
                "--bind",
                "127.0.0.1",
                "--save",
                "",
                "--appendonly",
                "no",
            ])
            .kill_on_drop(true)
            .stdout(std::process::Stdio::null())
            .spawn()
            .expect("start redis-server");
        let me = Self { port, child };
        for _ in 0..100 {
            if RedisConn::connect(&me.config()).await.is_ok() {
                return me;
            }
            tokio::time::sleep(std::time::Duration::from_millis(20)).await;
        }
        panic!("own redis-server on port {port} did not answer");
    }

    pub fn url(&self) -> String {
        format!("redis://127.0.0.1:{}", self.port)
    }

    pub fn config(&self) -> RedisConfig {
        RedisConfig::for_url(&self.url()).expect("url")
    }

    /// Freezes the server (SIGSTOP): connections stay open, nothing answers.
    pub fn freeze(&self) {
        self.signal("-STOP");
    }

    pub fn thaw(&self) {
        self.signal("-CONT");
    }

    /// Kills the server outright.
    pub async fn kill(&mut self) {
        self.child.kill().await.expect("kill redis-server");
    }

    fn signal(&self, sig: &str) {
        let pid = self.child.id().expect("running").to_string();
        let ok = std::process::Command::new("kill")
            .args([sig, &pid])
            .status()
            .expect("kill")
            .success();
        assert!(ok, "kill {sig} {pid}");
    }
}

impl Drop for OwnRedis {
    fn drop(&mut self) {
        // A frozen server ignores SIGKILL's delivery until resumed on some systems: thaw first.
        if let Some(pid) = self.child.id() {
            let _ = std::process::Command::new("kill")
                .args(["-CONT", &pid.to_string()])
                .status();
        }
    }
}

/// The moto server (`scripts/test-moto.sh`), the local stand-in for S3, SQS and Secrets
/// Manager; panics with the fix when it is not configured.
pub fn moto_url() -> String {
    std::env::var("LAWSYNC_TEST_MOTO_URL").unwrap_or_else(|_| {
        panic!("LAWSYNC_TEST_MOTO_URL is not set: run the tests with `make test`, or start moto with `scripts/test-moto.sh up` and export what it prints")
    })
}

/// SDK configuration aimed at the moto server, with fixed test credentials.
pub async fn moto_sdk() -> aws_config::SdkConfig {
    aws_config::defaults(aws_config::BehaviorVersion::latest())
        .endpoint_url(moto_url())
        .region(aws_config::Region::new("ap-northeast-2"))
        .credentials_provider(aws_sdk_s3::config::Credentials::new(
            "test",
            "test",
            None,
            None,
            "lawsync-tests",
        ))
        .load()
        .await
}

/// A binary of the workspace (`lawsync`, `law-lookalike`...), built beside the test
/// executables by `cargo test --workspace`.
pub fn workspace_bin(name: &str) -> std::path::PathBuf {
    // Integration tests run from target/<profile>/deps; the workspace's binaries sit beside.
    let exe = std::env::current_exe().expect("test exe");
    let dir = exe.parent().and_then(|d| d.parent()).expect("target dir");
    let bin = dir.join(name);
    assert!(
        bin.exists(),
        "{} not built: run the tests with `make test` (cargo test --workspace)",
        bin.display()
    );
    bin
}

/// Creates the search and detail queues `{prefix}-search` and `{prefix}-detail`; returns
/// their URLs in that order, or the AWS error code.
pub async fn create_queues(sqs: &aws_sdk_sqs::Client, prefix: &str) -> Result<[String; 2], String> {
    let mut urls = [String::new(), String::new()];
    for (url, q) in urls.iter_mut().zip(["search", "detail"]) {
        let out = sqs
            .create_queue()
            .queue_name(format!("{prefix}-{q}"))
            .send()
            .await
            .map_err(|e| format!("create queue {prefix}-{q}: {}", lawsync::aws::aws_code(&e)))?;
        *url = out.queue_url().unwrap_or_default().to_owned();
    }
    Ok(urls)
}

/// Visible plus in-flight messages of a queue, or the AWS error code.
pub async fn queue_depth(sqs: &aws_sdk_sqs::Client, url: &str) -> Result<u64, String> {
    use aws_sdk_sqs::types::QueueAttributeName as A;
    let out = sqs
        .get_queue_attributes()
        .queue_url(url)
        .attribute_names(A::ApproximateNumberOfMessages)
        .attribute_names(A::ApproximateNumberOfMessagesNotVisible)
        .send()
        .await
        .map_err(|e| format!("queue attributes: {}", lawsync::aws::aws_code(&e)))?;
    out.attributes()
        .ok_or("queue attributes: none returned")?
        .values()
        .map(|v| {
            v.parse::<u64>()
                .map_err(|_| format!("queue attributes: not a count: {v:?}"))
        })
        .sum()
}
