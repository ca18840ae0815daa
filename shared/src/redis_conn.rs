//! The Redis connection: standalone or cluster behind one type, with bounded timeouts.
//!
//! Every shared state of lawsync (the gate, and later the retry queue) goes through
//! [`RedisConn`]. It is cheap to clone (both variants multiplex one connection per node)
//! and fails fast: a dead Redis is reported in well under a second, because the caller's
//! alternative — calling the upstream without a grant — is never taken.

use redis::aio::{ConnectionLike, ConnectionManager, ConnectionManagerConfig};
use redis::cluster::ClusterClient;
use redis::cluster_async::ClusterConnection;
use redis::{Cmd, IntoConnectionInfo, Pipeline, RedisFuture, TlsCertificates, Value};

use crate::config::{RedisConfig, RedisMode};
use crate::redis_auth::RedisCredentials;

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
    /// A TLS failure: what went wrong and which variable fixes it.
    #[error("TLS: {0}")]
    Tls(String),
    /// The server refused the credentials (WRONGPASS, NOAUTH, NOPERM), with what to check.
    #[error("authentication refused ({0})")]
    Auth(String),
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

/// What to check when the server refuses the credentials; Redis' own text is not kept
/// (WRONGPASS's names the user, which is fine, but NOPERM's can quote a key).
fn auth_failure(e: &redis::RedisError) -> Option<RedisFailure> {
    let fix = "check REDIS_USERNAME and the password (in REDIS_URL or REDIS_AUTH_SECRET_ARN), or the IAM user and policy (REDIS_IAM_CACHE_NAME)";
    let code = e.code();
    let text = e.to_string();
    if code == Some("WRONGPASS") || text.contains("WRONGPASS") || text.contains("invalid username-password") {
        Some(RedisFailure::Auth(format!(
            "WRONGPASS: the user or password is wrong; {fix}"
        )))
    } else if code == Some("NOAUTH") || text.contains("NOAUTH") {
        Some(RedisFailure::Auth(format!(
            "NOAUTH: the server wants a password and none was sent; {fix}"
        )))
    } else if e.kind() == redis::ErrorKind::AuthenticationFailed || text.contains("authentication failed") {
        Some(RedisFailure::Auth(format!(
            "the user or password was refused; {fix}"
        )))
    } else if code == Some("NOPERM") {
        Some(RedisFailure::Auth(
            "NOPERM: the user may not run lawsync's commands or keys; grant it ~* +@all (or at least the scripting, hash, sorted-set and string commands)".into(),
        ))
    } else {
        None
    }
}

/// The rustls error under a connect failure, if the failure was a TLS handshake.
fn rustls_error(e: &redis::RedisError) -> Option<&tokio_rustls::rustls::Error> {
    let mut source: Option<&(dyn std::error::Error + 'static)> = std::error::Error::source(e);
    while let Some(err) = source {
        if let Some(tls) = err.downcast_ref::<tokio_rustls::rustls::Error>() {
            return Some(tls);
        }
        let inner = err
            .downcast_ref::<std::io::Error>()
            .and_then(|io| io.get_ref())
            .and_then(|i| i.downcast_ref::<tokio_rustls::rustls::Error>());
        if let Some(tls) = inner {
            return Some(tls);
        }
        source = err.source();
    }
    None
}

const FIX_CA: &str = "set REDIS_CA_FILE to the PEM file of the CA that signed it";
const FIX_NAME: &str = "connect by a name the certificate holds";

/// A TLS handshake failure, named with the variable that fixes it. A cluster's connect
/// failure carries its cause only as text, so the text is read too.
fn tls_failure(e: &redis::RedisError) -> Option<RedisFailure> {
    use tokio_rustls::rustls::{CertificateError, Error};
    if let Some(tls) = rustls_error(e) {
        return Some(RedisFailure::Tls(match tls {
            Error::InvalidCertificate(CertificateError::UnknownIssuer) => {
                format!("the server's certificate is not signed by a CA this client trusts; {FIX_CA}")
            }
            Error::InvalidCertificate(
                CertificateError::NotValidForName | CertificateError::NotValidForNameContext { .. },
            ) => format!("the server's certificate is not valid for the host name in REDIS_URL; {FIX_NAME}"),
            Error::InvalidCertificate(
                CertificateError::Expired
                | CertificateError::ExpiredContext { .. }
                | CertificateError::NotValidYet
                | CertificateError::NotValidYetContext { .. },
            ) => "the server's certificate has expired or is not valid yet".into(),
            other => format!("the handshake failed ({other})"),
        }));
    }
    let text = format!("{e} {}", e.detail().unwrap_or(""));
    if text.contains("UnknownIssuer") {
        Some(RedisFailure::Tls(format!(
            "the server's certificate is not signed by a CA this client trusts; {FIX_CA}"
        )))
    } else if text.contains("NotValidForName") || text.contains("not valid for name") {
        Some(RedisFailure::Tls(format!(
            "the server's certificate is not valid for the host name in REDIS_URL; {FIX_NAME}"
        )))
    } else if text.contains("invalid peer certificate") || text.contains("InvalidCertificate") {
        Some(RedisFailure::Tls("the server's certificate was refused".into()))
    } else {
        None
    }
}

/// A failure to make an IAM token (no credentials, no region), which reaches us as an I/O
/// failure of the connection (see [`crate::redis_auth`]).
fn token_failure(e: &redis::RedisError) -> Option<RedisFailure> {
    let marker = crate::redis_auth::IAM_TOKEN_FAILURE;
    // The detail when it holds the text (a cluster's error repeats it in its own), else
    // the whole text.
    let text = match e.detail() {
        Some(d) if d.contains(marker) => d.to_owned(),
        _ => e.to_string(),
    };
    let at = text.find(marker)?;
    let reason: String = text[at..].chars().take(240).collect();
    Some(RedisFailure::Auth(format!(
        "{reason}; check the function's role and AWS_REGION (REDIS_IAM_CACHE_NAME)"
    )))
}

impl From<redis::RedisError> for RedisFailure {
    fn from(e: redis::RedisError) -> Self {
        if let Some(tls) = tls_failure(&e) {
            tls
        } else if let Some(token) = token_failure(&e) {
            token
        } else if e.is_timeout() {
            RedisFailure::Timeout
        } else if e.is_connection_refusal() {
            RedisFailure::Unreachable("connection refused")
        } else if e.is_io_error()
            || e.is_connection_dropped()
            || e.kind() == redis::ErrorKind::ClusterConnectionNotFound
        {
            RedisFailure::Unreachable("connection lost")
        } else if e.code() == Some("CORRUPT") {
            // Our scripts' own message: a key name and a field list, nothing else.
            RedisFailure::Corrupt(script_text(&e))
        } else if e.code() == Some("NEWER") {
            // Our scripts' own message: a key name and two version numbers.
            RedisFailure::Newer(script_text(&e))
        } else if let Some(failure) = auth_failure(&e) {
            failure
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
    /// Connects as `cfg` says, with the credentials it holds without AWS (the URL's, or
    /// [`crate::config::RedisAuth::Password`]); a secret ARN or IAM authentication needs
    /// [`crate::redis_auth::connect`]. In [`RedisMode::Auto`] one URL is probed with
    /// `INFO cluster`; several comma-separated URLs always mean a cluster.
    pub async fn connect(cfg: &RedisConfig) -> Result<Self, RedisFailure> {
        let credentials = RedisCredentials::without_aws(cfg).ok_or_else(|| {
            RedisFailure::Invalid("this Redis authentication needs AWS (a secret ARN or IAM): connect through redis_auth::connect".into())
        })?;
        Self::connect_with(cfg, &credentials).await
    }

    /// Connects as `cfg` says, presenting `credentials`.
    pub async fn connect_with(
        cfg: &RedisConfig,
        credentials: &RedisCredentials,
    ) -> Result<Self, RedisFailure> {
        let tls = Tls::load(cfg)?;
        let connected = async {
            let cluster = match cfg.mode {
                RedisMode::Cluster => true,
                RedisMode::Standalone => false,
                RedisMode::Auto if cfg.urls.len() > 1 => true,
                RedisMode::Auto => {
                    let mut probe = Self::standalone(cfg, &tls, credentials).await?;
                    if !server_is_cluster(&mut probe).await? {
                        return Ok(probe);
                    }
                    true
                }
            };
            if cluster {
                Self::cluster(cfg, &tls, credentials).await
            } else {
                Self::standalone(cfg, &tls, credentials).await
            }
        }
        .await;
        match connected {
            Err(e @ (RedisFailure::Timeout | RedisFailure::Unreachable(_))) => {
                Err(tls_mismatch(cfg).await.unwrap_or(e))
            }
            other => other,
        }
    }

    async fn standalone(
        cfg: &RedisConfig,
        tls: &Tls,
        credentials: &RedisCredentials,
    ) -> Result<Self, RedisFailure> {
        let url = cfg
            .urls
            .first()
            .ok_or(RedisFailure::Unreachable("no URL configured"))?;
        let mut info = url
            .expose()
            .into_connection_info()
            .map_err(|_| RedisFailure::Unreachable("invalid REDIS_URL"))?;
        if let RedisCredentials::Password { username, password } = credentials {
            let mut settings = info.redis_settings().clone().set_password(password.expose());
            if let Some(user) = username {
                settings = settings.set_username(user);
            }
            info = info.set_redis_settings(settings);
        }
        let client = match &tls.certs {
            Some(certs) => redis::Client::build_with_tls(info, certs.clone()),
            None => redis::Client::open(info),
        }
        .map_err(|e| tls.build_failure(e))?;
        let mut manager_cfg = ConnectionManagerConfig::new()
            .set_number_of_retries(crate::policy::REDIS_CONNECT_RETRIES)
            .set_min_delay(std::time::Duration::from_millis(20))
            .set_max_delay(std::time::Duration::from_millis(100))
            .set_connection_timeout(Some(cfg.connect_timeout))
            .set_response_timeout(Some(cfg.response_timeout));
        if let RedisCredentials::Iam(tokens) = credentials {
            manager_cfg = manager_cfg.set_credentials_provider(tokens.clone());
        }
        let manager = ConnectionManager::new_with_config(client, manager_cfg).await?;
        Ok(RedisConn::Standalone(manager))
    }

    async fn cluster(
        cfg: &RedisConfig,
        tls: &Tls,
        credentials: &RedisCredentials,
    ) -> Result<Self, RedisFailure> {
        let nodes: Vec<&str> = cfg.urls.iter().map(|u| u.expose()).collect();
        let mut builder = ClusterClient::builder(nodes)
            .connection_timeout(cfg.connect_timeout)
            .response_timeout(cfg.response_timeout)
            .retries(crate::policy::REDIS_CONNECT_RETRIES as u32)
            .min_retry_wait(20)
            .max_retry_wait(100);
        if let Some(certs) = &tls.certs {
            builder = builder.certs(certs.clone());
        }
        match credentials {
            RedisCredentials::Url => {}
            RedisCredentials::Password { username, password } => {
                builder = builder.password(password.expose());
                if let Some(user) = username {
                    builder = builder.username(user);
                }
            }
            RedisCredentials::Iam(tokens) => {
                builder = builder.set_credentials_provider(tokens.clone());
            }
        }
        let client = builder.build().map_err(|e| tls.build_failure(e))?;
        let conn = client.get_async_connection().await?;
        Ok(RedisConn::Cluster(conn))
    }

    /// True for a cluster connection.
    pub fn is_cluster(&self) -> bool {
        matches!(self, RedisConn::Cluster(_))
    }
}

/// After a connect that timed out or lost its connection: whether the first node speaks
/// what the URL's scheme says. For `rediss://`, one `PING` in plain text: a plain server
/// answers it at once (`+PONG`, or an error such as `-NOAUTH`). For `redis://`, a TLS
/// handshake that trusts nothing: a server that answers it with its certificate speaks
/// TLS (the handshake then fails on that certificate, and nothing more is sent). A peer
/// that only closes the connection proves neither. `None` when it cannot tell (nothing
/// listens, nothing answers, the answer is neither).
async fn tls_mismatch(cfg: &RedisConfig) -> Option<RedisFailure> {
    let url = url::Url::parse(cfg.urls.first()?.expose()).ok()?;
    let host = url.host_str()?.trim_matches(['[', ']']).to_owned();
    let port = url.port().unwrap_or(6379);
    let tls = url.scheme() == "rediss";
    let probe = async {
        let stream = tokio::net::TcpStream::connect((host.as_str(), port)).await.ok()?;
        if tls {
            answers_plain_text(stream).await
        } else {
            answers_tls(stream, &host).await
        }
    };
    let mismatch = tokio::time::timeout(crate::policy::REDIS_TLS_PROBE_TIMEOUT, probe)
        .await
        .ok()??;
    mismatch.then(|| {
        RedisFailure::Tls(if tls {
            format!("REDIS_URL asks for TLS (rediss://) but the server at {host}:{port} answers in plain text; use redis:// or the server's TLS port")
        } else {
            format!("REDIS_URL is plain redis:// but the server at {host}:{port} speaks TLS; use rediss:// (and REDIS_CA_FILE for a private CA)")
        })
    })
}

async fn answers_plain_text(mut stream: tokio::net::TcpStream) -> Option<bool> {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    stream.write_all(b"PING\r\n").await.ok()?;
    let mut reply = [0u8; 16];
    let n = stream.read(&mut reply).await.ok()?;
    Some(matches!(reply[..n].first(), Some(b'+' | b'-')))
}

async fn answers_tls(stream: tokio::net::TcpStream, host: &str) -> Option<bool> {
    use tokio_rustls::rustls::{self, pki_types::ServerName};
    let provider = std::sync::Arc::new(rustls::crypto::aws_lc_rs::default_provider());
    let config = rustls::ClientConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .ok()?
        .with_root_certificates(rustls::RootCertStore::empty())
        .with_no_client_auth();
    let name = ServerName::try_from(host.to_owned()).ok()?;
    let connector = tokio_rustls::TlsConnector::from(std::sync::Arc::new(config));
    match connector.connect(name, stream).await {
        // Trusting no root, a handshake can only succeed against nothing; say so anyway.
        Ok(_) => Some(true),
        Err(e) => {
            let tls = e.get_ref().and_then(|i| i.downcast_ref::<rustls::Error>());
            // The server sent a certificate (refused, as nothing is trusted) or a TLS alert.
            Some(matches!(
                tls,
                Some(rustls::Error::InvalidCertificate(_) | rustls::Error::AlertReceived(_))
            ))
        }
    }
}

/// The CA certificates of `REDIS_CA_FILE`, read once per connect.
struct Tls {
    certs: Option<TlsCertificates>,
}

impl Tls {
    fn load(cfg: &RedisConfig) -> Result<Self, RedisFailure> {
        let Some(path) = &cfg.ca_file else {
            return Ok(Self { certs: None });
        };
        let pem = std::fs::read(path).map_err(|e| {
            RedisFailure::Tls(format!(
                "REDIS_CA_FILE: cannot read {} ({})",
                path.display(),
                e.kind()
            ))
        })?;
        if !pem.windows(27).any(|w| w == b"-----BEGIN CERTIFICATE-----") {
            return Err(RedisFailure::Tls(format!(
                "REDIS_CA_FILE: {} holds no PEM certificate (-----BEGIN CERTIFICATE-----)",
                path.display()
            )));
        }
        Ok(Self {
            certs: Some(TlsCertificates {
                client_tls: None,
                root_cert: Some(pem),
            }),
        })
    }

    /// A client that could not be built: with a CA file, its certificates are the likely
    /// cause (the URL was checked when the configuration was read).
    fn build_failure(&self, e: redis::RedisError) -> RedisFailure {
        if self.certs.is_some() && !matches!(e.kind(), redis::ErrorKind::InvalidClientConfig) {
            RedisFailure::Tls(format!(
                "REDIS_CA_FILE: its certificates could not be used ({:?})",
                e.kind()
            ))
        } else if self.certs.is_some() && e.to_string().contains("TLS") {
            RedisFailure::Tls("REDIS_CA_FILE: its certificates could not be used".into())
        } else {
            RedisFailure::Unreachable("invalid REDIS_URL")
        }
    }
}

async fn server_is_cluster(conn: &mut RedisConn) -> Result<bool, RedisFailure> {
    let info: String = match redis::cmd("INFO").arg("cluster").query_async(conn).await {
        Ok(info) => info,
        Err(e) if auth_failure(&e).is_some() => return Err(e.into()),
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
