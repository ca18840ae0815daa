//! How lawsync proves who it is to Redis: a password from the URL or from Secrets Manager,
//! or an ElastiCache IAM token.
//!
//! An IAM token is a SigV4-presigned `connect` request for one ElastiCache user on one
//! cache, valid for [`crate::policy::IAM_TOKEN_LIFETIME`]. ElastiCache checks it when a
//! connection authenticates and keeps the connection open after the token lapses, so
//! every new connection (a reconnect, or a node found after a failover) needs a fresh one.
//! [`IamTokens`] makes one for each connection as it opens and sends every live connection
//! a new one each [`crate::policy::IAM_TOKEN_RENEW`] (ElastiCache closes a connection
//! that went twelve hours without a new token).
//!
//! Nothing here prints a password, a token or a credential: errors name the variable to
//! fix and the cause, and the signer runs with tracing off (aws-sigv4 traces the canonical
//! request, and with it a presigned URL's session token, at TRACE).
//!
//! Credentials are cached until five minutes before they expire
//! ([`crate::policy::IAM_CREDENTIALS_REFRESH_BEFORE`]): the SDK's provider chain fetches anew
//! on every call, and a token is made for every connection. A refresh that fails or hangs
//! (bounded) keeps the cached credentials in use while they last. A failed fetch is retried
//! ([`crate::policy::IAM_TOKEN_ATTEMPTS`]) and then reported as an I/O failure, so the
//! connection's next command reconnects and asks again instead of keeping the failure.
//! redis-rs stops re-sending tokens to a live connection after one refused renewal; such a
//! connection stays authenticated until ElastiCache closes it (at 12 hours), and its
//! reconnect gets a fresh token.

use std::pin::Pin;
use std::time::{Duration, SystemTime};

use aws_credential_types::Credentials;
use aws_credential_types::provider::{ProvideCredentials, SharedCredentialsProvider};
use futures::Stream;
use redis::auth::{BasicAuth, StreamingCredentialsProvider};

use crate::config::{RedisAuth, RedisConfig};
use crate::redis_conn::{RedisConn, RedisFailure};
use crate::secret::Secret;

/// The credentials a connection presents, resolved from [`RedisAuth`].
#[derive(Clone)]
pub enum RedisCredentials {
    /// What the URL carries, or nothing.
    Url,
    /// An ACL user (or `default`) and its password.
    Password {
        username: Option<String>,
        password: Secret,
    },
    /// An IAM token per connection, renewed.
    Iam(IamTokens),
}

impl std::fmt::Debug for RedisCredentials {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            RedisCredentials::Url => f.write_str("Url"),
            RedisCredentials::Password { username, .. } => f
                .debug_struct("Password")
                .field("username", username)
                .finish_non_exhaustive(),
            RedisCredentials::Iam(t) => f
                .debug_struct("Iam")
                .field("user_id", &t.user_id)
                .field("cache_name", &t.cache_name)
                .finish_non_exhaustive(),
        }
    }
}

/// Why the credentials for Redis could not be had.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum AuthError {
    #[error("{0}")]
    Secret(#[from] crate::secrets::SecretError),
    /// IAM authentication without AWS credentials or a region to sign with.
    #[error("REDIS_IAM_CACHE_NAME: {0}")]
    Iam(String),
}

impl RedisCredentials {
    /// Resolves `cfg.auth`: fetches a password from Secrets Manager, or checks that `sdk`
    /// can sign IAM tokens (credentials and a region) by making one.
    pub async fn resolve(cfg: &RedisConfig, sdk: &aws_config::SdkConfig) -> Result<Self, AuthError> {
        if let Some(held) = Self::without_aws(cfg) {
            return Ok(held);
        }
        match &cfg.auth {
            RedisAuth::Url | RedisAuth::Password { .. } => unreachable!("held without AWS"),
            RedisAuth::SecretArn { username, arn } => {
                let password = crate::secrets::fetch(sdk, arn, "REDIS_AUTH_SECRET_ARN", "password").await?;
                Ok(RedisCredentials::Password {
                    username: username.clone(),
                    password,
                })
            }
            RedisAuth::Iam {
                user_id,
                cache_name,
                serverless,
            } => {
                let region = sdk.region().map(|r| r.to_string()).ok_or_else(|| {
                    AuthError::Iam("IAM tokens are signed for a region: set AWS_REGION".into())
                })?;
                let credentials = sdk.credentials_provider().ok_or_else(|| {
                    AuthError::Iam("IAM tokens need AWS credentials and none are configured".into())
                })?;
                let tokens = IamTokens::new(user_id, cache_name, *serverless, &region, credentials);
                // One token now, so missing credentials fail the cold start by name.
                tokens.token().await.map_err(AuthError::Iam)?;
                Ok(RedisCredentials::Iam(tokens))
            }
        }
    }

    /// The credentials `cfg` holds without asking AWS: [`RedisAuth::Url`] and
    /// [`RedisAuth::Password`]. `None` for a secret ARN or IAM (see [`Self::resolve`]).
    pub fn without_aws(cfg: &RedisConfig) -> Option<Self> {
        match &cfg.auth {
            RedisAuth::Url => Some(RedisCredentials::Url),
            RedisAuth::Password { username, password } => Some(RedisCredentials::Password {
                username: username.clone(),
                password: password.clone(),
            }),
            RedisAuth::SecretArn { .. } | RedisAuth::Iam { .. } => None,
        }
    }
}

/// Why Redis could not be reached with the configured credentials.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ConnectError {
    #[error("{0}")]
    Auth(#[from] AuthError),
    #[error("{0}")]
    Redis(#[from] RedisFailure),
}

/// Resolves the credentials `cfg` names and connects.
pub async fn connect(cfg: &RedisConfig, sdk: &aws_config::SdkConfig) -> Result<RedisConn, ConnectError> {
    let credentials = RedisCredentials::resolve(cfg, sdk).await?;
    Ok(RedisConn::connect_with(cfg, &credentials).await?)
}

/// What [`IamTokens`] remembers of its credentials provider.
#[derive(Default)]
struct Cached {
    credentials: Option<Credentials>,
    /// The last failed fetch: when, and why. Asked again only after
    /// [`crate::policy::IAM_CREDENTIALS_RETRY_AFTER`], so the reconnects of every node in
    /// an outage do not each ask the credentials endpoint.
    failed: Option<(std::time::Instant, String)>,
}

/// True while `c` is good for at least `margin` more (or never expires).
fn good_for(c: &Credentials, margin: Duration) -> bool {
    c.expiry().is_none_or(|at| {
        at.duration_since(SystemTime::now())
            .is_ok_and(|left| left > margin)
    })
}

/// ElastiCache IAM tokens for one user on one cache, signed with `credentials`.
#[derive(Clone)]
pub struct IamTokens {
    user_id: String,
    cache_name: String,
    serverless: bool,
    region: String,
    credentials: SharedCredentialsProvider,
    /// The last credentials fetched, shared by every clone (every connection).
    cached: std::sync::Arc<tokio::sync::Mutex<Cached>>,
    renew: Duration,
}

impl std::fmt::Debug for IamTokens {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("IamTokens")
            .field("user_id", &self.user_id)
            .field("cache_name", &self.cache_name)
            .field("serverless", &self.serverless)
            .field("region", &self.region)
            .field("renew", &self.renew)
            .finish_non_exhaustive()
    }
}

impl IamTokens {
    /// Tokens for `user_id` on `cache_name` in `region`; `serverless` for an ElastiCache
    /// Serverless cache, else a replication group.
    pub fn new(
        user_id: &str,
        cache_name: &str,
        serverless: bool,
        region: &str,
        credentials: SharedCredentialsProvider,
    ) -> Self {
        Self {
            user_id: user_id.to_owned(),
            cache_name: cache_name.to_owned(),
            serverless,
            region: region.to_owned(),
            credentials,
            cached: Default::default(),
            renew: crate::policy::IAM_TOKEN_RENEW,
        }
    }

    /// The same tokens, renewed every `every` instead of [`crate::policy::IAM_TOKEN_RENEW`].
    pub fn renewed_every(mut self, every: Duration) -> Self {
        self.renew = every;
        self
    }

    /// The user the tokens are for.
    pub fn user_id(&self) -> &str {
        &self.user_id
    }

    /// The credentials to sign with: the cached ones while they are good for another
    /// [`crate::policy::IAM_CREDENTIALS_REFRESH_BEFORE`], else fetched anew (bounded by
    /// [`crate::policy::IAM_CREDENTIALS_TIMEOUT`]). A fetch that fails or hangs leaves the
    /// cached credentials in use while they are good for
    /// [`crate::policy::IAM_CREDENTIALS_MIN_LEFT`] more; no fetch is tried again within
    /// [`crate::policy::IAM_CREDENTIALS_RETRY_AFTER`] of a failed one.
    async fn credentials(&self) -> Result<Credentials, String> {
        use crate::policy::{
            IAM_CREDENTIALS_MIN_LEFT, IAM_CREDENTIALS_REFRESH_BEFORE, IAM_CREDENTIALS_RETRY_AFTER,
            IAM_CREDENTIALS_TIMEOUT,
        };
        let mut cached = self.cached.lock().await;
        let usable = |c: &Cached| {
            c.credentials
                .clone()
                .filter(|c| good_for(c, IAM_CREDENTIALS_MIN_LEFT))
        };
        if let Some(c) = cached
            .credentials
            .as_ref()
            .filter(|c| good_for(c, IAM_CREDENTIALS_REFRESH_BEFORE))
        {
            return Ok(c.clone());
        }
        if let Some((at, reason)) = &cached.failed
            && at.elapsed() < IAM_CREDENTIALS_RETRY_AFTER
        {
            return usable(&cached).ok_or_else(|| reason.clone());
        }
        let fetched =
            tokio::time::timeout(IAM_CREDENTIALS_TIMEOUT, self.credentials.provide_credentials()).await;
        let reason = match fetched {
            Ok(Ok(c)) => {
                *cached = Cached {
                    credentials: Some(c.clone()),
                    failed: None,
                };
                return Ok(c);
            }
            Ok(Err(e)) => format!(
                "no AWS credentials to sign an IAM token with ({})",
                with_sources(&e)
            ),
            Err(_) => format!(
                "no AWS credentials to sign an IAM token with (the provider did not answer in {} ms)",
                IAM_CREDENTIALS_TIMEOUT.as_millis()
            ),
        };
        cached.failed = Some((std::time::Instant::now(), reason.clone()));
        usable(&cached).ok_or(reason)
    }

    /// A token signed now with the current credentials.
    pub async fn token(&self) -> Result<Secret, String> {
        let credentials = self.credentials().await?;
        iam_token(
            &self.user_id,
            &self.cache_name,
            self.serverless,
            &self.region,
            &credentials,
            SystemTime::now(),
        )
    }
}

impl StreamingCredentialsProvider for IamTokens {
    /// A token at once (for the connection being opened), then a new one every renewal.
    fn subscribe(&self) -> Pin<Box<dyn Stream<Item = redis::RedisResult<BasicAuth>> + Send + 'static>> {
        let tokens = self.clone();
        Box::pin(futures::stream::unfold(true, move |first| {
            let tokens = tokens.clone();
            async move {
                if !first {
                    tokio::time::sleep(tokens.renew).await;
                }
                let mut attempt = 1;
                let item = loop {
                    match tokens.token().await {
                        Ok(t) => break Ok(BasicAuth::new(tokens.user_id.clone(), t.expose().to_owned())),
                        Err(_) if attempt < crate::policy::IAM_TOKEN_ATTEMPTS => {
                            attempt += 1;
                            tokio::time::sleep(crate::policy::IAM_TOKEN_RETRY_PAUSE).await;
                        }
                        // An I/O failure, not an authentication one: redis-rs keeps a
                        // connection whose reconnect failed otherwise, and only an I/O
                        // failure makes its next command reconnect (and ask again).
                        Err(reason) => {
                            // A cluster's reconnect drops this text from the error its
                            // commands see ("connection lost"): the log line keeps it.
                            tracing::warn!(user = %tokens.user_id, %reason, "{IAM_TOKEN_FAILURE}");
                            break Err(redis::RedisError::from(std::io::Error::other(format!(
                                "{IAM_TOKEN_FAILURE}: {reason}"
                            ))));
                        }
                    }
                };
                Some((item, false))
            }
        }))
    }
}

/// An error and its sources, as one line: a credentials error's own text is only its kind
/// ("the credential provider was not enabled"), the reason is in its source.
fn with_sources(e: &dyn std::error::Error) -> String {
    let mut text = e.to_string();
    let mut source = e.source();
    while let Some(s) = source {
        text.push_str(": ");
        text.push_str(&s.to_string());
        source = s.source();
    }
    text
}

/// The start of every failure to make a token, as [`crate::redis_conn`] recognises it.
pub(crate) const IAM_TOKEN_FAILURE: &str = "ElastiCache IAM token could not be made";

/// RFC 3986 percent-encoding (everything but `A-Z a-z 0-9 - _ . ~`), as SigV4 encodes.
fn uri_encode(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for b in s.bytes() {
        if b.is_ascii_alphanumeric() || matches!(b, b'-' | b'_' | b'.' | b'~') {
            out.push(b as char);
        } else {
            out.push_str(&format!("%{b:02X}"));
        }
    }
    out
}

/// An ElastiCache IAM authentication token: the presigned URL of
/// `GET http://CACHE/?Action=connect&User=USER[&ResourceType=ServerlessCache]` for the
/// service `elasticache`, valid for [`crate::policy::IAM_TOKEN_LIFETIME`] from `now`,
/// without its `http://`.
pub fn iam_token(
    user_id: &str,
    cache_name: &str,
    serverless: bool,
    region: &str,
    credentials: &Credentials,
    now: SystemTime,
) -> Result<Secret, String> {
    use aws_sigv4::http_request::{SignableBody, SignableRequest, SignatureLocation, SigningSettings, sign};

    if url::Host::parse(cache_name).is_err() || cache_name.contains(['/', '?', '#', '@', ':']) {
        return Err("the cache name is not a host name".into());
    }
    let mut query = format!("Action=connect&User={}", uri_encode(user_id));
    if serverless {
        query.push_str("&ResourceType=ServerlessCache");
    }
    let url = format!("http://{cache_name}/?{query}");
    let mut settings = SigningSettings::default();
    settings.signature_location = SignatureLocation::QueryParams;
    settings.expires_in = Some(crate::policy::IAM_TOKEN_LIFETIME);
    let identity = credentials.clone().into();
    let params = aws_sigv4::sign::v4::SigningParams::builder()
        .identity(&identity)
        .region(region)
        .name("elasticache")
        .time(now)
        .settings(settings)
        .build()
        .map_err(|e| format!("IAM token signing parameters ({e})"))?
        .into();
    let request = SignableRequest::new("GET", url.as_str(), std::iter::empty(), SignableBody::Bytes(&[]))
        .map_err(|e| format!("IAM token request ({e})"))?;
    // aws-sigv4 traces the canonical request, which holds a presigned URL's session token.
    let signed = tracing::subscriber::with_default(tracing::subscriber::NoSubscriber::default(), || {
        sign(request, &params)
    });
    let (instructions, _signature) = signed
        .map_err(|e| format!("IAM token signing ({e})"))?
        .into_parts();
    for (name, value) in instructions.params() {
        query.push('&');
        query.push_str(name);
        query.push('=');
        query.push_str(&uri_encode(value));
    }
    Ok(Secret::new(format!("{cache_name}/?{query}")))
}
