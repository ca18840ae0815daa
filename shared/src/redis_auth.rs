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
//! fix and the cause.

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
        match &cfg.auth {
            RedisAuth::Url => Ok(RedisCredentials::Url),
            RedisAuth::Password { username, password } => Ok(RedisCredentials::Password {
                username: username.clone(),
                password: password.clone(),
            }),
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
                let tokens = IamTokens {
                    user_id: user_id.clone(),
                    cache_name: cache_name.clone(),
                    serverless: *serverless,
                    region,
                    credentials,
                    renew: crate::policy::IAM_TOKEN_RENEW,
                };
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

/// ElastiCache IAM tokens for one user on one cache, signed with `credentials`.
#[derive(Clone)]
pub struct IamTokens {
    user_id: String,
    cache_name: String,
    serverless: bool,
    region: String,
    credentials: SharedCredentialsProvider,
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

    /// A token signed now with the current credentials.
    pub async fn token(&self) -> Result<Secret, String> {
        let credentials = self
            .credentials
            .provide_credentials()
            .await
            .map_err(|e| format!("no AWS credentials to sign an IAM token with ({e})"))?;
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
                let item = match tokens.token().await {
                    Ok(t) => Ok(BasicAuth::new(tokens.user_id.clone(), t.expose().to_owned())),
                    Err(reason) => Err(redis::RedisError::from((
                        redis::ErrorKind::AuthenticationFailed,
                        "ElastiCache IAM token",
                        reason,
                    ))),
                };
                Some((item, false))
            }
        }))
    }
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

    let mut url = url::Url::parse(&format!("http://{cache_name}/"))
        .map_err(|e| format!("the cache name does not make a URL ({e})"))?;
    url.query_pairs_mut()
        .append_pair("Action", "connect")
        .append_pair("User", user_id);
    if serverless {
        url.query_pairs_mut()
            .append_pair("ResourceType", "ServerlessCache");
    }
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
    let (instructions, _signature) = sign(request, &params)
        .map_err(|e| format!("IAM token signing ({e})"))?
        .into_parts();
    {
        let mut query = url.query_pairs_mut();
        for (name, value) in instructions.params() {
            query.append_pair(name, value);
        }
    }
    // Form encoding writes a space as '+' (a '+' itself is %2B): written %20, as SigV4's own
    // encoding and every AWS signer do, so no server need guess which was meant.
    let signed = url.as_str().replace('+', "%20");
    Ok(Secret::new(signed.strip_prefix("http://").unwrap_or(&signed)))
}
