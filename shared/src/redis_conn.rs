//! The Redis connection: standalone or cluster behind one type, with bounded timeouts.
//!
//! Every shared state of lawsync (the gate, and later the retry queue) goes through
//! [`RedisConn`]. It is cheap to clone (both variants multiplex one connection per node)
//! and fails fast: a dead Redis is reported in well under a second, because the caller's
//! alternative — calling the upstream without a grant — is never taken.

use redis::aio::{ConnectionLike, ConnectionManager, ConnectionManagerConfig};
use redis::cluster::ClusterClient;
use redis::cluster_async::ClusterConnection;
use redis::{Cmd, Pipeline, RedisFuture, Value};

use crate::config::{RedisConfig, RedisMode};

/// A Redis failure, described without the URL (which may carry a password) or any value.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum RedisFailure {
    #[error("Redis unreachable ({0})")]
    Unreachable(&'static str),
    #[error("Redis did not answer in time")]
    Timeout,
    #[error("Redis replied with an error ({0})")]
    Server(String),
    #[error("Redis replied with an unexpected shape ({0})")]
    Protocol(&'static str),
    /// A lawsync key holds something its scripts cannot read. The text is the script's own
    /// (it names the key); deleting the key resets that state.
    #[error("Redis state is corrupt: {0}; delete the key to reset it")]
    Corrupt(String),
    /// A lawsync key was written by a newer release than this one (the script's own text,
    /// which names the key and both versions): a roll is half done.
    #[error("Redis state is newer than this release: {0}")]
    Newer(String),
    /// A value refused before it reached Redis.
    #[error("refused: {0}")]
    Invalid(String),
    /// `REDIS_CLUSTER=auto` could not tell the server's mode.
    #[error("could not tell whether Redis runs in cluster mode ({0}); set REDIS_CLUSTER=true or false")]
    ModeUnknown(String),
}

/// The text of one of our scripts' named errors, without Redis' "script: SHA, on
/// @user_script:N." suffix.
fn script_text(e: &redis::RedisError) -> String {
    let detail = e.detail().unwrap_or("unreadable state");
    let detail = detail.split(" script: ").next().unwrap_or(detail);
    detail.chars().take(300).collect()
}

impl From<redis::RedisError> for RedisFailure {
    fn from(e: redis::RedisError) -> Self {
        if e.is_timeout() {
            RedisFailure::Timeout
        } else if e.is_connection_refusal() {
            RedisFailure::Unreachable("connection refused")
        } else if e.is_io_error() || e.is_connection_dropped() {
            RedisFailure::Unreachable("connection lost")
        } else if e.code() == Some("CORRUPT") {
            // Our scripts' own message: a key name and a field list, nothing else.
            RedisFailure::Corrupt(script_text(&e))
        } else if e.code() == Some("NEWER") {
            // Our scripts' own message: a key name and two version numbers.
            RedisFailure::Newer(script_text(&e))
        } else if let Some(code) = e.code() {
            // Only the error code (ERR, NOSCRIPT, MOVED, CLUSTERDOWN, ...): the detail text of
            // a script error can quote arguments.
            RedisFailure::Server(code.chars().take(32).collect())
        } else {
            RedisFailure::Protocol("unrecognised failure")
        }
    }
}

/// A connection to standalone Redis or to a Redis Cluster (ElastiCache Serverless runs
/// only in cluster mode). Clone it freely; clones share the underlying connections.
#[derive(Clone)]
pub enum RedisConn {
    Standalone(ConnectionManager),
    Cluster(ClusterConnection),
}

impl std::fmt::Debug for RedisConn {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            RedisConn::Standalone(_) => "RedisConn::Standalone",
            RedisConn::Cluster(_) => "RedisConn::Cluster",
        })
    }
}

impl RedisConn {
    /// Connects as `cfg` says. In [`RedisMode::Auto`] one URL is probed with
    /// `INFO cluster`; several comma-separated URLs always mean a cluster.
    pub async fn connect(cfg: &RedisConfig) -> Result<Self, RedisFailure> {
        let cluster = match cfg.mode {
            RedisMode::Cluster => true,
            RedisMode::Standalone => false,
            RedisMode::Auto if cfg.urls.len() > 1 => true,
            RedisMode::Auto => {
                let mut probe = Self::standalone(cfg).await?;
                if !server_is_cluster(&mut probe).await? {
                    return Ok(probe);
                }
                true
            }
        };
        if cluster {
            Self::cluster(cfg).await
        } else {
            Self::standalone(cfg).await
        }
    }

    async fn standalone(cfg: &RedisConfig) -> Result<Self, RedisFailure> {
        let url = cfg
            .urls
            .first()
            .ok_or(RedisFailure::Unreachable("no URL configured"))?;
        let client =
            redis::Client::open(url.expose()).map_err(|_| RedisFailure::Unreachable("invalid REDIS_URL"))?;
        let manager_cfg = ConnectionManagerConfig::new()
            .set_number_of_retries(crate::policy::REDIS_CONNECT_RETRIES)
            .set_min_delay(std::time::Duration::from_millis(20))
            .set_max_delay(std::time::Duration::from_millis(100))
            .set_connection_timeout(Some(cfg.connect_timeout))
            .set_response_timeout(Some(cfg.response_timeout));
        let manager = ConnectionManager::new_with_config(client, manager_cfg).await?;
        Ok(RedisConn::Standalone(manager))
    }

    async fn cluster(cfg: &RedisConfig) -> Result<Self, RedisFailure> {
        let nodes: Vec<&str> = cfg.urls.iter().map(|u| u.expose()).collect();
        let client = ClusterClient::builder(nodes)
            .connection_timeout(cfg.connect_timeout)
            .response_timeout(cfg.response_timeout)
            .retries(crate::policy::REDIS_CONNECT_RETRIES as u32)
            .min_retry_wait(20)
            .max_retry_wait(100)
            .build()
            .map_err(|_| RedisFailure::Unreachable("invalid REDIS_URL"))?;
        let conn = client.get_async_connection().await?;
        Ok(RedisConn::Cluster(conn))
    }

    /// True for a cluster connection.
    pub fn is_cluster(&self) -> bool {
        matches!(self, RedisConn::Cluster(_))
    }
}

async fn server_is_cluster(conn: &mut RedisConn) -> Result<bool, RedisFailure> {
    let info: String = match redis::cmd("INFO").arg("cluster").query_async(conn).await {
        Ok(info) => info,
        Err(e) if e.code().is_some() => {
            return Err(RedisFailure::ModeUnknown(format!(
                "INFO refused: {}",
                e.code().unwrap_or("?")
            )));
        }
        Err(e) => return Err(e.into()),
    };
    Ok(info.lines().any(|l| l.trim() == "cluster_enabled:1"))
}

impl ConnectionLike for RedisConn {
    fn req_packed_command<'a>(&'a mut self, cmd: &'a Cmd) -> RedisFuture<'a, Value> {
        match self {
            RedisConn::Standalone(c) => c.req_packed_command(cmd),
            RedisConn::Cluster(c) => c.req_packed_command(cmd),
        }
    }

    fn req_packed_commands<'a>(
        &'a mut self,
        pipeline: &'a Pipeline,
        offset: usize,
        count: usize,
    ) -> RedisFuture<'a, Vec<Value>> {
        match self {
            RedisConn::Standalone(c) => c.req_packed_commands(pipeline, offset, count),
            RedisConn::Cluster(c) => c.req_packed_commands(pipeline, offset, count),
        }
    }

    fn get_db(&self) -> i64 {
        match self {
            RedisConn::Standalone(c) => c.get_db(),
            RedisConn::Cluster(c) => c.get_db(),
        }
    }
}
