//! Configuration: the one place that reads the environment.
//!
//! Every variable has a default (see [`crate::policy`]) and is validated at start-up, so a
//! typo fails the cold start with a message naming the variable instead of failing the
//! thousandth call. Secret values are never echoed in those messages.

use std::path::PathBuf;
use std::time::Duration;

use url::Url;

use crate::policy;
use crate::secret::Secret;

/// A configuration value that cannot be used. Names the variable; never contains a secret.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{var}: {reason}")]
pub struct ConfigError {
    /// The environment variable at fault.
    pub var: &'static str,
    /// What is wrong and what is expected.
    pub reason: String,
}

fn bad(var: &'static str, reason: impl Into<String>) -> ConfigError {
    ConfigError {
        var,
        reason: reason.into(),
    }
}

/// Where the law.go.kr key comes from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum OcSource {
    /// `LAW_API_OC`, given directly.
    Value(Secret),
    /// `LAW_API_OC_SECRET_ARN`: fetched from Secrets Manager once per cold start.
    SecretArn(String),
}

/// Settings of the law.go.kr client.
#[derive(Debug, Clone)]
pub struct LawApiConfig {
    pub oc: OcSource,
    pub base_url: Url,
    pub max_attempts: u32,
    pub max_response_bytes: u64,
    pub connect_timeout: Duration,
    pub read_timeout: Duration,
    pub user_agent: String,
    pub referer: String,
    /// A PEM file of certificate authorities trusted for law.go.kr beside the system's
    /// (`LAW_API_CA_FILE`): for an egress proxy that inspects TLS, an intermediate
    /// law.go.kr leaves out of its chain, or a local stand-in.
    pub ca_file: Option<std::path::PathBuf>,
    /// `LAW_API_FORMAT`: `auto` (the default), `json` or `xml` (see [`crate::law::format`]).
    pub format: crate::law::FormatSetting,
}

/// Settings of the shared rate gate.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct GateConfig {
    /// Least spacing between two granted call starts across the cluster, on Redis' clock.
    pub interval: Duration,
    /// Calls allowed back to back before spacing applies (>= 1).
    pub burst: u32,
    /// Longest wait for a slot before giving up with a clear error.
    pub max_wait: Duration,
    /// How late a holder may confirm its slot without holding the next one back;
    /// reservations are paced at `interval + tolerance` (see [`crate::gate`]).
    pub tolerance: Duration,
    /// How long a grant may wait to be sent before it is given back and asked for again
    /// ([`crate::policy::grant_validity`] by default).
    pub grant_validity: Duration,
}

impl GateConfig {
    /// A config with the default tolerance for `interval`.
    pub fn new(interval: Duration, burst: u32, max_wait: Duration) -> Self {
        Self {
            interval,
            burst,
            max_wait,
            tolerance: policy::default_gate_tolerance(interval),
            grant_validity: policy::grant_validity(interval),
        }
    }
}

/// How to treat `REDIS_URL`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RedisMode {
    /// Ask the server (`INFO cluster`) at connect time.
    Auto,
    Standalone,
    Cluster,
}

/// How lawsync authenticates to Redis, beyond what `REDIS_URL` itself carries.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum RedisAuth {
    /// Only what the URL carries (`rediss://user:password@host`), or nothing.
    Url,
    /// An ACL user (`REDIS_USERNAME`, else Redis' `default` user) whose password is kept in
    /// Secrets Manager (`REDIS_AUTH_SECRET_ARN`), fetched once per cold start.
    SecretArn { username: Option<String>, arn: String },
    /// An ACL user and a password given directly; for tools and tests (the environment
    /// carries a password in `REDIS_URL` or in Secrets Manager).
    Password {
        username: Option<String>,
        password: Secret,
    },
    /// ElastiCache IAM authentication: a SigV4 token for `user_id` on `cache_name`, signed
    /// with the function's own credentials and renewed before it lapses
    /// (`REDIS_IAM_CACHE_NAME`, `REDIS_USERNAME`, `REDIS_IAM_SERVERLESS`).
    Iam {
        user_id: String,
        cache_name: String,
        serverless: bool,
    },
}

/// Settings of the Redis connection.
#[derive(Clone)]
pub struct RedisConfig {
    /// One URL, or several comma-separated cluster seed nodes. May carry a password,
    /// so it is kept as a [`Secret`].
    pub urls: Vec<Secret>,
    pub mode: RedisMode,
    pub connect_timeout: Duration,
    pub response_timeout: Duration,
    /// `REDIS_CA_FILE`: PEM certificates of the CAs a `rediss://` server's certificate must
    /// chain to, in place of the system's roots. Host names are always verified.
    pub ca_file: Option<PathBuf>,
    pub auth: RedisAuth,
}

impl std::fmt::Debug for RedisConfig {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RedisConfig")
            .field("nodes", &self.urls.len())
            .field("mode", &self.mode)
            .field("connect_timeout", &self.connect_timeout)
            .field("response_timeout", &self.response_timeout)
            .field("ca_file", &self.ca_file)
            .field("auth", &self.auth)
            .finish()
    }
}

impl RedisConfig {
    /// A config for one URL with the default timeouts; for tools and tests.
    pub fn for_url(url: &str) -> Result<Self, ConfigError> {
        Ok(Self {
            urls: parse_redis_urls(url)?,
            mode: RedisMode::Auto,
            connect_timeout: policy::DEFAULT_REDIS_CONNECT_TIMEOUT,
            response_timeout: policy::DEFAULT_REDIS_RESPONSE_TIMEOUT,
            ca_file: None,
            auth: RedisAuth::Url,
        })
    }

    /// True when the URLs ask for TLS (`rediss://`, in any case).
    pub fn tls(&self) -> bool {
        self.urls
            .iter()
            .any(|u| Url::parse(u.expose()).is_ok_and(|u| u.scheme() == "rediss"))
    }

    /// True when a URL carries a password of its own.
    fn url_has_password(&self) -> bool {
        self.urls
            .iter()
            .any(|u| Url::parse(u.expose()).is_ok_and(|u| u.password().is_some()))
    }
}

/// Reads the Redis TLS and authentication variables, checking that they fit together and
/// fit `REDIS_URL`.
fn redis_security(env: &Env<'_>, redis: &mut RedisConfig) -> Result<(), ConfigError> {
    if let Some(path) = env.get("REDIS_CA_FILE") {
        let path = PathBuf::from(path);
        if !path.is_file() {
            return Err(bad(
                "REDIS_CA_FILE",
                format!("no readable file at {}", path.display()),
            ));
        }
        if !redis.tls() {
            return Err(bad(
                "REDIS_CA_FILE",
                "is set but REDIS_URL is plain redis://: use rediss:// for TLS, or unset REDIS_CA_FILE",
            ));
        }
        redis.ca_file = Some(path);
    }
    let username = match env.get("REDIS_USERNAME") {
        None => None,
        Some(u) if u.len() <= 128 && u.chars().all(|c| c.is_ascii_graphic()) => Some(u),
        Some(_) => {
            return Err(bad(
                "REDIS_USERNAME",
                "must be 1-128 printable ASCII characters without spaces",
            ));
        }
    };
    let arn = env.get("REDIS_AUTH_SECRET_ARN");
    let cache = env.get("REDIS_IAM_CACHE_NAME");
    let serverless = match env.get("REDIS_IAM_SERVERLESS").as_deref() {
        None | Some("true" | "1" | "yes") => true,
        Some("false" | "0" | "no") => false,
        Some(other) => {
            return Err(bad(
                "REDIS_IAM_SERVERLESS",
                format!(
                    "must be true (an ElastiCache Serverless cache) or false (a node-based replication group), got {other:?}"
                ),
            ));
        }
    };
    if env.get("REDIS_IAM_SERVERLESS").is_some() && cache.is_none() {
        return Err(bad(
            "REDIS_IAM_SERVERLESS",
            "is set without REDIS_IAM_CACHE_NAME: it says which kind of cache an IAM token is for",
        ));
    }
    let in_url = redis.url_has_password();
    redis.auth = match (arn, cache) {
        (Some(_), Some(_)) => {
            return Err(bad(
                "REDIS_AUTH_SECRET_ARN",
                "and REDIS_IAM_CACHE_NAME are both set: pick one way to authenticate to Redis",
            ));
        }
        (Some(_), None) | (None, Some(_)) if in_url => {
            return Err(bad(
                "REDIS_URL",
                "carries a password while REDIS_AUTH_SECRET_ARN or REDIS_IAM_CACHE_NAME names another: keep one",
            ));
        }
        (Some(arn), None) => RedisAuth::SecretArn {
            username,
            arn: parse_arn("REDIS_AUTH_SECRET_ARN", &arn)?,
        },
        (None, Some(cache)) => {
            let ok = (1..=40).contains(&cache.len())
                && cache
                    .bytes()
                    .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-');
            if !ok {
                return Err(bad(
                    "REDIS_IAM_CACHE_NAME",
                    format!(
                        "must be an ElastiCache cache or replication group name (1-40 of a-z 0-9 -), got {cache:?}"
                    ),
                ));
            }
            let Some(user_id) = username else {
                return Err(bad(
                    "REDIS_IAM_CACHE_NAME",
                    "needs REDIS_USERNAME: an IAM token is signed for one ElastiCache user; set REDIS_USERNAME to its user id",
                ));
            };
            if !redis.tls() {
                return Err(bad(
                    "REDIS_IAM_CACHE_NAME",
                    "needs a rediss:// REDIS_URL: ElastiCache accepts IAM tokens over TLS only",
                ));
            }
            RedisAuth::Iam {
                user_id,
                cache_name: cache,
                serverless,
            }
        }
        (None, None) if username.is_some() && in_url => {
            return Err(bad(
                "REDIS_USERNAME",
                "is set while the password is in REDIS_URL: put the user there too (rediss://USER:PASSWORD@HOST:PORT) and unset REDIS_USERNAME",
            ));
        }
        (None, None) if username.is_some() => {
            return Err(bad(
                "REDIS_USERNAME",
                "is set without a password: set REDIS_AUTH_SECRET_ARN (an ACL password) or REDIS_IAM_CACHE_NAME (IAM), or put the user in REDIS_URL",
            ));
        }
        (None, None) => RedisAuth::Url,
    };
    Ok(())
}

/// Where documents go.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum DocumentStoreConfig {
    Bucket(String),
    Dir(PathBuf),
}

/// Everything lawsync reads from the environment.
#[derive(Debug, Clone)]
pub struct Config {
    /// `APP_ENV`: the Redis key namespace, so that stages never share a gate.
    pub app_env: String,
    pub law: LawApiConfig,
    pub gate: GateConfig,
    pub redis: RedisConfig,
    pub search_queue_url: Option<String>,
    pub detail_queue_url: Option<String>,
    pub documents: DocumentStoreConfig,
    pub slack_webhook: Option<SlackSource>,
    pub retry_max_attempts: u32,
    pub drain_interval: Duration,
    /// `LAW_API_HANDLER_MAX_WAIT_MS`: the SQS handlers' longest wait for a gate slot
    /// (the drainer and the CLI wait up to `gate.max_wait`).
    pub handler_max_wait: Duration,
    /// `HANDLERS_DRAIN`: whether an SQS handler works off due retry-queue entries after
    /// its batch while it gets gate slots within its wait.
    pub handlers_drain: bool,
}

/// Where the Slack webhook comes from. The URL itself is a credential.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum SlackSource {
    Url(Secret),
    SecretArn(String),
}

impl Config {
    /// Reads the process environment.
    pub fn from_env() -> Result<Self, ConfigError> {
        Self::from_lookup(|name| std::env::var(name).ok())
    }

    /// Reads configuration through `lookup` (a variable name to its value), so tests and
    /// tools can pass a map instead of touching the process environment.
    pub fn from_lookup(lookup: impl Fn(&str) -> Option<String>) -> Result<Self, ConfigError> {
        let env = Env(&lookup);
        let oc = match (env.get("LAW_API_OC"), env.get("LAW_API_OC_SECRET_ARN")) {
            (Some(v), _) => OcSource::Value(parse_oc(&v)?),
            (None, Some(arn)) => OcSource::SecretArn(parse_arn("LAW_API_OC_SECRET_ARN", &arn)?),
            (None, None) => {
                return Err(bad(
                    "LAW_API_OC",
                    "missing: set LAW_API_OC to the law.go.kr key, or LAW_API_OC_SECRET_ARN to a Secrets Manager secret holding it",
                ));
            }
        };
        let law = LawApiConfig {
            oc,
            base_url: parse_base_url(
                env.get("LAW_API_BASE_URL")
                    .as_deref()
                    .unwrap_or("https://www.law.go.kr"),
            )?,
            // Saturated, not truncated, so the bound below sees a too-large value.
            max_attempts: u32::try_from(
                env.positive("LAW_API_MAX_ATTEMPTS", policy::DEFAULT_MAX_ATTEMPTS.into())?,
            )
            .unwrap_or(u32::MAX),
            max_response_bytes: env
                .positive("LAW_API_MAX_RESPONSE_BYTES", policy::DEFAULT_MAX_RESPONSE_BYTES)?,
            connect_timeout: env.millis("LAW_API_CONNECT_TIMEOUT_MS", policy::DEFAULT_CONNECT_TIMEOUT)?,
            read_timeout: env.millis("LAW_API_READ_TIMEOUT_MS", policy::DEFAULT_READ_TIMEOUT)?,
            user_agent: env.header("LAW_API_USER_AGENT", policy::DEFAULT_USER_AGENT)?,
            referer: env.header("LAW_API_REFERER", policy::DEFAULT_REFERER)?,
            ca_file: env
                .get("LAW_API_CA_FILE")
                .filter(|v| !v.trim().is_empty())
                .map(std::path::PathBuf::from),
            format: match env.get("LAW_API_FORMAT") {
                None => crate::law::FormatSetting::default(),
                Some(v) => crate::law::FormatSetting::parse(&v).ok_or_else(|| {
                    bad(
                        "LAW_API_FORMAT",
                        "must be auto (whichever format the key is served), json or xml",
                    )
                })?,
            },
        };
        // A call cannot outlast a Lambda; and the key-health circuit's probe window is made of
        // these two (policy::key_probe_window), so they also bound how long a probe holds.
        for (var, value) in [
            ("LAW_API_CONNECT_TIMEOUT_MS", law.connect_timeout),
            ("LAW_API_READ_TIMEOUT_MS", law.read_timeout),
        ] {
            if value.is_zero() || value > policy::MAX_WAIT_CEILING {
                return Err(bad(var, "must be from 1 to 900000 (a Lambda's 15 minutes)"));
            }
        }
        if policy::key_probe_window(law.connect_timeout, law.read_timeout) > policy::MAX_WAIT_CEILING {
            // Named by the larger of the two, the one most likely set by mistake.
            let (var, other) = if law.connect_timeout > law.read_timeout {
                ("LAW_API_CONNECT_TIMEOUT_MS", "LAW_API_READ_TIMEOUT_MS")
            } else {
                ("LAW_API_READ_TIMEOUT_MS", "LAW_API_CONNECT_TIMEOUT_MS")
            };
            return Err(bad(
                var,
                format!(
                    "with {other} and a {margin} s margin it makes the key-health probe's window, \
                     which must come to at most 900000 (a Lambda's 15 minutes)",
                    margin = policy::KEY_PROBE_MARGIN.as_secs()
                ),
            ));
        }
        if law.max_attempts > 10 {
            return Err(bad(
                "LAW_API_MAX_ATTEMPTS",
                "must be at most 10: attempt 10 already backs off 512 s",
            ));
        }
        let burst = env.positive("LAW_API_BURST", policy::DEFAULT_BURST.into())?;
        if burst > policy::MAX_BURST.into() {
            return Err(bad(
                "LAW_API_BURST",
                format!("must be at most {}", policy::MAX_BURST),
            ));
        }
        let interval = env.millis("LAW_API_REQUEST_INTERVAL_MS", policy::DEFAULT_REQUEST_INTERVAL)?;
        if interval > policy::MAX_INTERVAL {
            return Err(bad(
                "LAW_API_REQUEST_INTERVAL_MS",
                "must be at most 3600000 (one hour)",
            ));
        }
        let max_wait = env.millis("LAW_API_MAX_WAIT_MS", policy::DEFAULT_MAX_WAIT)?;
        if max_wait > policy::MAX_WAIT_CEILING {
            return Err(bad(
                "LAW_API_MAX_WAIT_MS",
                "must be at most 900000 (a Lambda's 15 minutes)",
            ));
        }
        let tolerance = match env.get("LAW_API_GATE_TOLERANCE_MS") {
            None => policy::default_gate_tolerance(interval),
            Some(_) => env.millis("LAW_API_GATE_TOLERANCE_MS", Duration::ZERO)?,
        };
        if tolerance > policy::MAX_GATE_TOLERANCE || tolerance > interval / policy::MAX_TOLERANCE_SHARE {
            return Err(bad(
                "LAW_API_GATE_TOLERANCE_MS",
                format!(
                    "must be at most {} ms and at most a quarter of LAW_API_REQUEST_INTERVAL_MS ({} ms here): it is how late a woken caller may be, and reservations are paced at interval + tolerance",
                    policy::MAX_GATE_TOLERANCE.as_millis(),
                    (interval / policy::MAX_TOLERANCE_SHARE).as_millis()
                ),
            ));
        }
        let grant_validity = env.millis("LAW_API_GRANT_VALIDITY_MS", policy::grant_validity(interval))?;
        if grant_validity > interval {
            return Err(bad(
                "LAW_API_GRANT_VALIDITY_MS",
                "must be at most LAW_API_REQUEST_INTERVAL_MS: a grant older than the interval could be sent next to the following one",
            ));
        }
        let gate = GateConfig {
            interval,
            burst: burst as u32,
            max_wait,
            tolerance,
            grant_validity,
        };
        let handler_max_wait = env.millis(
            "LAW_API_HANDLER_MAX_WAIT_MS",
            // Within the ceiling, so a long interval alone never fails on this variable.
            policy::default_handler_max_wait(interval, tolerance).min(policy::MAX_WAIT_CEILING),
        )?;
        if handler_max_wait > policy::MAX_WAIT_CEILING {
            return Err(bad(
                "LAW_API_HANDLER_MAX_WAIT_MS",
                "must be at most 900000 (a Lambda's 15 minutes)",
            ));
        }
        let mut redis = RedisConfig {
            urls: parse_redis_urls(
                env.get("REDIS_URL")
                    .as_deref()
                    .unwrap_or("redis://127.0.0.1:6379"),
            )?,
            mode: match env.get("REDIS_CLUSTER").as_deref().unwrap_or("auto") {
                "auto" => RedisMode::Auto,
                "true" | "1" | "yes" => RedisMode::Cluster,
                "false" | "0" | "no" => RedisMode::Standalone,
                other => {
                    return Err(bad(
                        "REDIS_CLUSTER",
                        format!("must be auto, true or false, got {other:?}"),
                    ));
                }
            },
            connect_timeout: env.millis("REDIS_CONNECT_TIMEOUT_MS", policy::DEFAULT_REDIS_CONNECT_TIMEOUT)?,
            response_timeout: env.millis(
                "REDIS_RESPONSE_TIMEOUT_MS",
                policy::DEFAULT_REDIS_RESPONSE_TIMEOUT,
            )?,
            ca_file: None,
            auth: RedisAuth::Url,
        };
        redis_security(&env, &mut redis)?;
        let documents = match (env.get("DOCUMENT_BUCKET"), env.get("DOCUMENT_DIR")) {
            (Some(b), _) => DocumentStoreConfig::Bucket(parse_bucket(&b)?),
            (None, dir) => DocumentStoreConfig::Dir(PathBuf::from(dir.as_deref().unwrap_or("documents"))),
        };
        let slack_webhook = match (env.get("SLACK_WEBHOOK_URL"), env.get("SLACK_WEBHOOK_SECRET_ARN")) {
            (Some(u), _) => Some(SlackSource::Url(parse_webhook(&u)?)),
            (None, Some(arn)) => Some(SlackSource::SecretArn(parse_arn(
                "SLACK_WEBHOOK_SECRET_ARN",
                &arn,
            )?)),
            (None, None) => None,
        };
        Ok(Self {
            app_env: parse_namespace("APP_ENV", env.get("APP_ENV").as_deref().unwrap_or("local"))?,
            law,
            gate,
            redis,
            search_queue_url: env
                .get("SEARCH_QUEUE_URL")
                .map(|u| parse_plain_url("SEARCH_QUEUE_URL", &u))
                .transpose()?,
            detail_queue_url: env
                .get("DETAIL_QUEUE_URL")
                .map(|u| parse_plain_url("DETAIL_QUEUE_URL", &u))
                .transpose()?,
            documents,
            slack_webhook,
            retry_max_attempts: u32::try_from(
                env.positive("RETRY_MAX_ATTEMPTS", policy::DEFAULT_RETRY_MAX_ATTEMPTS.into())?,
            )
            .map_err(|_| bad("RETRY_MAX_ATTEMPTS", format!("must be at most {}", u32::MAX)))?,
            drain_interval: env.millis("DRAIN_INTERVAL_MS", policy::DEFAULT_DRAIN_INTERVAL)?,
            handler_max_wait,
            handlers_drain: match env.get("HANDLERS_DRAIN").as_deref() {
                None | Some("true") => true,
                Some("false") => false,
                Some(_) => return Err(bad("HANDLERS_DRAIN", "must be true or false")),
            },
        })
    }
}

/// Environment access with typed, named readers. Empty values count as unset.
struct Env<'a>(&'a dyn Fn(&str) -> Option<String>);

impl Env<'_> {
    fn get(&self, name: &str) -> Option<String> {
        (self.0)(name).filter(|v| !v.is_empty())
    }

    fn positive(&self, var: &'static str, default: u64) -> Result<u64, ConfigError> {
        match self.get(var) {
            None => Ok(default),
            Some(v) => match v.trim().parse::<u64>() {
                Ok(0) => Err(bad(var, "must be above 0, got 0")),
                Ok(n) if n > u32::MAX as u64 * 1000 => Err(bad(var, format!("{n} is implausibly large"))),
                Ok(n) => Ok(n),
                Err(_) => Err(bad(var, format!("must be a whole number above 0, got {v:?}"))),
            },
        }
    }

    fn millis(&self, var: &'static str, default: Duration) -> Result<Duration, ConfigError> {
        self.positive(var, default.as_millis() as u64)
            .map(Duration::from_millis)
    }

    fn header(&self, var: &'static str, default: &'static str) -> Result<String, ConfigError> {
        let v = self.get(var).unwrap_or_else(|| default.to_owned());
        if v.bytes().any(|b| b.is_ascii_control()) || !v.is_ascii() {
            return Err(bad(var, "must be printable ASCII (it is sent as an HTTP header)"));
        }
        Ok(v)
    }
}

fn parse_oc(v: &str) -> Result<Secret, ConfigError> {
    // The value is never echoed: it is the secret.
    if v.chars().any(|c| c.is_whitespace() || c.is_control()) {
        return Err(bad(
            "LAW_API_OC",
            "must not contain whitespace or control characters (value not shown)",
        ));
    }
    Ok(Secret::new(v))
}

fn parse_base_url(v: &str) -> Result<Url, ConfigError> {
    // Never echoed: a mistaken value may be a whole request URL with the key in it.
    let url = Url::parse(v).map_err(|e| {
        bad(
            "LAW_API_BASE_URL",
            format!("not a URL ({e}); expected e.g. https://www.law.go.kr"),
        )
    })?;
    if !matches!(url.scheme(), "http" | "https") || url.host_str().is_none() {
        return Err(bad(
            "LAW_API_BASE_URL",
            "must be an http(s) URL with a host, e.g. https://www.law.go.kr",
        ));
    }
    if url.query().is_some() || !url.username().is_empty() || url.password().is_some() {
        return Err(bad(
            "LAW_API_BASE_URL",
            "must not carry a query or credentials; the key goes in LAW_API_OC",
        ));
    }
    Ok(url)
}

fn parse_plain_url(var: &'static str, v: &str) -> Result<String, ConfigError> {
    let url = Url::parse(v).map_err(|e| bad(var, format!("not a URL ({e}): {v:?}")))?;
    if !matches!(url.scheme(), "http" | "https") {
        return Err(bad(var, format!("must be an http(s) URL, got {v:?}")));
    }
    Ok(v.to_owned())
}

fn parse_webhook(v: &str) -> Result<Secret, ConfigError> {
    // A webhook URL is a credential: report the problem, never the value.
    match Url::parse(v) {
        Ok(u) if matches!(u.scheme(), "http" | "https") && u.host_str().is_some() => Ok(Secret::new(v)),
        _ => Err(bad(
            "SLACK_WEBHOOK_URL",
            "must be an http(s) URL (value not shown)",
        )),
    }
}

fn parse_arn(var: &'static str, v: &str) -> Result<String, ConfigError> {
    if v.starts_with("arn:") && v.split(':').count() >= 6 {
        Ok(v.to_owned())
    } else {
        Err(bad(
            var,
            format!(
                "must be a Secrets Manager ARN (arn:aws:secretsmanager:REGION:ACCOUNT:secret:NAME), got {v:?}"
            ),
        ))
    }
}

fn parse_bucket(v: &str) -> Result<String, ConfigError> {
    let ok = (3..=63).contains(&v.len())
        && v.bytes()
            .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-' || b == b'.');
    if ok {
        Ok(v.to_owned())
    } else {
        Err(bad(
            "DOCUMENT_BUCKET",
            format!("not a valid S3 bucket name: {v:?}"),
        ))
    }
}

/// Parses `REDIS_URL`: one `redis://`/`rediss://` URL, or a comma-separated list of
/// cluster seed nodes. Never echoes the value, which may hold a password.
pub fn parse_redis_urls(v: &str) -> Result<Vec<Secret>, ConfigError> {
    let mut out = Vec::new();
    for (i, part) in v.split(',').map(str::trim).enumerate() {
        let url = Url::parse(part).map_err(|e| {
            bad(
                "REDIS_URL",
                format!("entry {} is not a URL ({e}); value not shown", i + 1),
            )
        })?;
        if !matches!(url.scheme(), "redis" | "rediss") || url.host_str().is_none() {
            return Err(bad(
                "REDIS_URL",
                format!("entry {} must be redis://HOST:PORT or rediss://HOST:PORT", i + 1),
            ));
        }
        // (Url lower-cases the scheme: REDISS:// is rediss://.)
        let first_scheme = out
            .first()
            .and_then(|first: &Secret| Url::parse(first.expose()).ok())
            .map(|u| u.scheme().to_owned());
        if first_scheme.is_some_and(|s| s != url.scheme()) {
            return Err(bad(
                "REDIS_URL",
                format!(
                    "entry {} mixes redis:// and rediss://: every seed of one cluster takes the same scheme",
                    i + 1
                ),
            ));
        }
        out.push(Secret::new(part));
    }
    Ok(out)
}

/// Checks a key namespace component (`APP_ENV`, an upstream name): it becomes part of a
/// Redis hash tag, so braces and spaces are refused.
pub fn parse_namespace(var: &'static str, v: &str) -> Result<String, ConfigError> {
    let ok = !v.is_empty()
        && v.len() <= 64
        && v.bytes()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'-' | b'_' | b'.'));
    if ok {
        Ok(v.to_owned())
    } else {
        Err(bad(
            var,
            format!("must be 1-64 characters of A-Z a-z 0-9 - _ . (it names Redis keys), got {v:?}"),
        ))
    }
}
