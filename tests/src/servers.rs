//! Where the test Redis servers are, and a namespace of one's own on them.

use std::sync::atomic::{AtomicU32, Ordering};
use std::time::{SystemTime, UNIX_EPOCH};

use lawsync::config::{RedisAuth, RedisConfig, RedisMode};
use lawsync::{Namespace, RedisConn};

/// Which server a test runs against.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Topology {
    Standalone,
    Cluster,
    /// The cluster as ElastiCache Serverless presents itself: TLS only (a CA of the test
    /// setup's own, host names verified), an ACL user with a password, a replica per
    /// primary.
    SecureCluster,
}

/// The secure cluster's connect and reply bounds in the tests (see [`Topology::config`]).
pub const SECURE_TIMEOUT: std::time::Duration = std::time::Duration::from_millis(1000);

/// The environment variable `make test` sets, or a panic naming the fix.
pub fn test_var(var: &str) -> String {
    std::env::var(var).unwrap_or_else(|_| {
        panic!("{var} is not set: run the tests with `make test`, or start the servers with `scripts/test-redis.sh up` and export what it prints")
    })
}

impl Topology {
    /// The two plain servers, for tests that must hold on either.
    pub const ALL: [Topology; 2] = [Topology::Standalone, Topology::Cluster];
    /// The plain servers and the secure cluster: for the suites that hold the gate's and
    /// the queue's promises (the Lua contracts, the gate, the queue), which must hold on
    /// what AWS runs too.
    pub const EVERY: [Topology; 3] = [Topology::Standalone, Topology::Cluster, Topology::SecureCluster];

    /// The URL from the environment `make test` sets; panics with the fix when unset.
    pub fn url(self) -> String {
        test_var(match self {
            Topology::Standalone => "LAWSYNC_TEST_REDIS_URL",
            Topology::Cluster => "LAWSYNC_TEST_CLUSTER_URL",
            Topology::SecureCluster => "LAWSYNC_TEST_SECURE_URL",
        })
    }

    /// The configuration lawsync would be given for this server: for the secure cluster,
    /// its CA file and ACL user and password.
    pub fn config(self) -> RedisConfig {
        let mut cfg = RedisConfig::for_url(&self.url()).expect("test Redis URL is valid");
        if self == Topology::SecureCluster {
            // TLS costs CPU on both ends; on a shared 2-core machine running the suites in
            // parallel, a handshake or reply past the production default (250 ms, for a
            // Redis in the same VPC) is the machine, not the code. Seen once in a full run.
            cfg.connect_timeout = SECURE_TIMEOUT;
            cfg.response_timeout = SECURE_TIMEOUT;
            cfg.ca_file = Some(test_var("LAWSYNC_TEST_SECURE_CA").into());
            cfg.auth = RedisAuth::Password {
                username: Some(test_var("LAWSYNC_TEST_SECURE_USER")),
                password: lawsync::Secret::new(test_var("LAWSYNC_TEST_SECURE_PASSWORD")),
            };
        }
        cfg
    }

    /// A connection in the mode this topology needs (auto-detected, as in production).
    pub async fn connect(self) -> RedisConn {
        let conn = RedisConn::connect(&self.config())
            .await
            .expect("test Redis answers");
        assert_eq!(
            conn.is_cluster(),
            self != Topology::Standalone,
            "mode detection for {self:?}"
        );
        conn
    }

    /// A connection forced into standalone or cluster mode.
    pub async fn connect_as(self, mode: RedisMode) -> Result<RedisConn, lawsync::RedisFailure> {
        let mut cfg = self.config();
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
/// An API key of its own for one test: `prefix` and a unique suffix. The gate belongs to
/// the key, so tests that ran with one constant key in separate environments would share a
/// gate (and each other's cooldowns); a search for `prefix` still finds any leak of it.
pub fn unique_oc(prefix: &str) -> String {
    format!("{prefix}-{}", unique_env("key"))
}

pub fn unique_ns(label: &str) -> Namespace {
    Namespace::new(&unique_env(label), "law-go-kr").expect("valid namespace")
}

/// A loopback port nothing listens on (bound, then released).
pub fn dead_port() -> u16 {
    let l = std::net::TcpListener::bind("127.0.0.1:0").expect("bind");
    l.local_addr().expect("addr").port()
}

/// A Redis server of one test's own, on a fresh port, for tests that stop, freeze, kill or
/// restart it. Killed when dropped (and its data directory, if any, removed).
///
/// [`OwnRedis::start`] runs without persistence. [`OwnRedis::start_persistent`] keeps an
/// append-only file in a directory of its own with `appendfsync always`: Redis writes and
/// fsyncs each write to the AOF before it replies, so a write a client saw acknowledged
/// survives [`OwnRedis::kill`] (SIGKILL) as well as [`OwnRedis::stop`] (SIGTERM), and
/// [`OwnRedis::restart`] brings it back on the same port from that file.
#[derive(Debug)]
pub struct OwnRedis {
    pub port: u16,
    child: tokio::process::Child,
    /// The data directory of a persistent server.
    dir: Option<std::path::PathBuf>,
}

impl OwnRedis {
    /// Starts `redis-server` without persistence and waits until it answers.
    pub async fn start() -> Self {
        Self::launch(dead_port(), None).await
    }

    /// Starts `redis-server` with an append-only file (`appendonly yes`, `appendfsync
    /// always`, no RDB snapshots) in a fresh directory of its own, and waits until it answers.
    pub async fn start_persistent() -> Self {
        let port = dead_port();
        let nanos = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map_or(0, |d| d.as_nanos());
        let dir = std::env::temp_dir().join(format!(
            "lawsync-redis-{port}-{}-{}",
            std::process::id(),
            nanos % 1_000_000_000
        ));
        std::fs::create_dir_all(&dir).expect("create the Redis data directory");
        Self::launch(port, Some(dir)).await
    }

    async fn launch(port: u16, dir: Option<std::path::PathBuf>) -> Self {
        let child = Self::spawn(port, dir.as_deref());
        let me = Self { port, child, dir };
        me.wait_until_ready().await;
        me
    }

    fn spawn(port: u16, dir: Option<&std::path::Path>) -> tokio::process::Child {
        let mut args: Vec<String> = ["--port", &port.to_string(), "--bind", "127.0.0.1", "--save", ""]
            .iter()
            .map(|s| s.to_string())
            .collect();
        match dir {
            None => args.extend(["--appendonly", "no"].map(String::from)),
            Some(dir) => {
                let dir = dir.display().to_string();
                args.extend(
                    [
                        "--appendonly",
                        "yes",
                        "--appendfsync",
                        "always",
                        "--dir",
                        &dir,
                        "--logfile",
                        &format!("{dir}/redis.log"),
                    ]
                    .map(String::from),
                );
            }
        }
        tokio::process::Command::new("redis-server")
            .args(&args)
            .kill_on_drop(true)
            .stdout(std::process::Stdio::null())
            .spawn()
            .expect("start redis-server")
    }

    /// Waits until the server answers and has finished loading its data (a restarted
    /// server replays its AOF first, answering `LOADING` meanwhile).
    async fn wait_until_ready(&self) {
        for _ in 0..250 {
            if self.loaded().await {
                return;
            }
            tokio::time::sleep(std::time::Duration::from_millis(20)).await;
        }
        panic!("own redis-server on port {} did not answer", self.port);
    }

    async fn loaded(&self) -> bool {
        let Ok(client) = redis::Client::open(self.url()) else {
            return false;
        };
        let attempt = async {
            let mut conn = client.get_multiplexed_async_connection().await.ok()?;
            let info: String = redis::cmd("INFO")
                .arg("persistence")
                .query_async(&mut conn)
                .await
                .ok()?;
            Some(info.lines().any(|l| l.trim() == "loading:0"))
        };
        tokio::time::timeout(std::time::Duration::from_millis(500), attempt)
            .await
            .ok()
            .flatten()
            .unwrap_or(false)
    }

    pub fn url(&self) -> String {
        format!("redis://127.0.0.1:{}", self.port)
    }

    pub fn config(&self) -> RedisConfig {
        RedisConfig::for_url(&self.url()).expect("url")
    }

    /// The data directory of a persistent server (`None` without persistence).
    pub fn data_dir(&self) -> Option<&std::path::Path> {
        self.dir.as_deref()
    }

    /// The running server's process id (`None` once it has exited).
    pub fn pid(&self) -> Option<u32> {
        self.child.id()
    }

    /// Freezes the server (SIGSTOP): connections stay open, nothing answers.
    pub fn freeze(&self) {
        self.signal("-STOP");
    }

    pub fn thaw(&self) {
        self.signal("-CONT");
    }

    /// Kills the server outright (SIGKILL) and reaps it: a crash, with no chance to flush.
    pub async fn kill(&mut self) {
        self.child.kill().await.expect("kill redis-server");
    }

    /// Stops the server as an operator would (SIGTERM: Redis closes its clients, flushes
    /// and fsyncs the AOF, and exits) and waits until it has exited. A server that has not
    /// exited within 10 s is killed, and the test fails.
    pub async fn stop(&mut self) {
        self.signal("-TERM");
        match tokio::time::timeout(std::time::Duration::from_secs(10), self.child.wait()).await {
            Ok(status) => {
                status.expect("wait for redis-server");
            }
            Err(_) => {
                let _ = self.child.kill().await;
                panic!("redis-server on port {} ignored SIGTERM for 10 s", self.port);
            }
        }
    }

    /// Starts the server again on the same port, with the same settings and data directory
    /// (a persistent server replays its AOF), and waits until it has loaded. The server must
    /// have been stopped or killed first.
    pub async fn restart(&mut self) {
        let exited = self.child.try_wait().expect("redis-server status");
        assert!(
            exited.is_some(),
            "redis-server on port {} still runs: stop() or kill() it before restart()",
            self.port
        );
        self.child = Self::spawn(self.port, self.dir.as_deref());
        self.wait_until_ready().await;
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
        let _ = self.child.start_kill();
        if let Some(dir) = &self.dir {
            let _ = std::fs::remove_dir_all(dir);
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

/// SDK configuration aimed at the moto server, with the test harness's credentials (no
/// role of the template: see [`crate::stack`]).
pub async fn moto_sdk() -> aws_config::SdkConfig {
    crate::stack::sdk_with_key("test").await
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

/// The environment a deployment gives the functions, for spawning `lawsync` as a real
/// process: the key, the upstream, the gate's interval with a 10 ms tolerance (less for an
/// interval under 40 ms) and a grant validity of a quarter of it (2-10 ms), Redis, the
/// namespace, moto with test credentials, `PATH` and `RUST_LOG=info`. Nothing else of the
/// test's own environment reaches the child. Tests add or replace entries with
/// [`LawsyncEnv::set`] (queues, where documents go, drain pacing, wait bounds).
#[derive(Debug, Clone)]
pub struct LawsyncEnv {
    vars: Vec<(String, String)>,
}

impl LawsyncEnv {
    pub fn new(oc: &str, base_url: &str, redis_url: &str, app_env: &str, interval_ms: u64) -> Self {
        let vars = [
            ("LAW_API_OC", oc.to_owned()),
            ("LAW_API_BASE_URL", base_url.to_owned()),
            ("LAW_API_REQUEST_INTERVAL_MS", interval_ms.to_string()),
            // 10 ms, or the most a short test interval allows (a quarter of it).
            ("LAW_API_GATE_TOLERANCE_MS", (interval_ms / 4).min(10).to_string()),
            // A quarter of the interval within 2-10 ms: the tests' rules leave at least that
            // margin, and a debug process beside other tests is often a few ms late to send.
            (
                "LAW_API_GRANT_VALIDITY_MS",
                (interval_ms / 4).clamp(2, 10).min(interval_ms).to_string(),
            ),
            ("REDIS_URL", redis_url.to_owned()),
            ("APP_ENV", app_env.to_owned()),
            ("AWS_ENDPOINT_URL", moto_url()),
            ("AWS_REGION", "ap-northeast-2".to_owned()),
            ("AWS_ACCESS_KEY_ID", "test".to_owned()),
            ("AWS_SECRET_ACCESS_KEY", "test".to_owned()),
            ("PATH", std::env::var("PATH").unwrap_or_default()),
            ("RUST_LOG", "info".to_owned()),
        ];
        Self {
            vars: vars.into_iter().map(|(k, v)| (k.to_owned(), v)).collect(),
        }
    }

    /// Signs the process's AWS calls as `role`: the moto stand-in allows only what the
    /// template grants it.
    pub fn role(self, role: crate::stack::Role) -> Self {
        self.set("AWS_ACCESS_KEY_ID", role.access_key())
    }

    /// Sets `name`, replacing an earlier value.
    pub fn set(mut self, name: &str, value: impl Into<String>) -> Self {
        self.put(name, value);
        self
    }

    /// [`LawsyncEnv::set`] on a borrowed environment.
    pub fn put(&mut self, name: &str, value: impl Into<String>) {
        let value = value.into();
        match self.vars.iter_mut().find(|(k, _)| k == name) {
            Some(slot) => slot.1 = value,
            None => self.vars.push((name.to_owned(), value)),
        }
    }

    /// Removes `name`.
    pub fn unset(&mut self, name: &str) {
        self.vars.retain(|(k, _)| k != name);
    }

    /// Every variable, in the order set.
    pub fn vars(&self) -> &[(String, String)] {
        &self.vars
    }

    pub fn get(&self, name: &str) -> Option<&str> {
        self.vars.iter().find(|(k, _)| k == name).map(|(_, v)| v.as_str())
    }

    /// `lawsync ARGS` with exactly this environment, killed when dropped; stdio is the
    /// caller's to set.
    pub fn command(&self, args: &[&str]) -> tokio::process::Command {
        let mut c = tokio::process::Command::new(workspace_bin("lawsync"));
        c.args(args)
            .env_clear()
            .envs(self.vars.iter().map(|(k, v)| (k.as_str(), v.as_str())))
            .kill_on_drop(true);
        c
    }
}

/// Creates the search and detail queues of `app_env`'s stack (`lawsync-<Env>-search`,
/// `lawsync-<Env>-detail`, see [`crate::stack::Stack`]); returns their URLs in that order,
/// or the AWS error code.
pub async fn create_queues(sqs: &aws_sdk_sqs::Client, app_env: &str) -> Result<[String; 2], String> {
    crate::stack::Stack::new(app_env).create_queues(sqs).await
}

/// Visible plus in-flight messages of a queue, or the AWS error code.
pub async fn queue_depth(sqs: &aws_sdk_sqs::Client, url: &str) -> Result<u64, String> {
    queue_counts(sqs, url)
        .await
        .map(|(visible, in_flight)| visible + in_flight)
}

/// (visible, in flight) messages of a queue, or the AWS error code.
pub async fn queue_counts(sqs: &aws_sdk_sqs::Client, url: &str) -> Result<(u64, u64), String> {
    use aws_sdk_sqs::types::QueueAttributeName as A;
    let out = sqs
        .get_queue_attributes()
        .queue_url(url)
        .attribute_names(A::ApproximateNumberOfMessages)
        .attribute_names(A::ApproximateNumberOfMessagesNotVisible)
        .send()
        .await
        .map_err(|e| format!("queue attributes: {}", lawsync::aws::aws_code(&e)))?;
    let attrs = out.attributes().ok_or("queue attributes: none returned")?;
    let count = |a: A| -> Result<u64, String> {
        let v = attrs.get(&a).ok_or(format!("queue attributes: no {a:?}"))?;
        v.parse()
            .map_err(|_| format!("queue attributes: not a count: {v:?}"))
    };
    Ok((
        count(A::ApproximateNumberOfMessages)?,
        count(A::ApproximateNumberOfMessagesNotVisible)?,
    ))
}

/// Writes an idle gate state at `key` (format 2, nothing reserved, no cooldown), as a gate
/// that has been in use looks once it is quiet: its first caller goes at once, where a
/// missing state would open with one interval of quiet. For tests about what follows the
/// first grant.
pub async fn settle_gate(conn: &mut RedisConn, key: &str) {
    let _: () = redis::cmd("HSET")
        .arg(key)
        .arg(&[("v", 2), ("tat", 0), ("sat", 0), ("cool", 0), ("epoch", 1)])
        .query_async(conn)
        .await
        .expect("HSET gate state");
}

/// Parks one detail job per id in `queue`, as a test's starting state (error "seeded").
pub async fn park_details<I, S>(queue: &lawsync::queue::RetryQueue, ids: I)
where
    I: IntoIterator<Item = S>,
    S: AsRef<str>,
{
    use lawsync::queue::{ErrorNote, Job};
    for id in ids {
        queue
            .enqueue(
                &Job::detail(id.as_ref()),
                None,
                ErrorNote::now("seeded", "seeded", None),
            )
            .await
            .expect("park a detail job");
    }
}
