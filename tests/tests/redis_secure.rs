//! Redis as ElastiCache Serverless presents itself: TLS with a private CA and host names
//! verified, an ACL user whose password comes from Secrets Manager, IAM tokens. Each TLS or
//! authentication failure is named, with the variable that fixes it.

use std::time::{Duration, Instant};

use lawsync::config::{Config, RedisAuth, RedisConfig};
use lawsync::redis_auth::{self, RedisCredentials};
use lawsync::{RedisConn, RedisFailure};
use lawsync_tests::servers::{Topology, moto_sdk, test_var, unique_env};

/// A hang guard: every failure here is reported within a connect timeout or two.
const HANG_GUARD: Duration = Duration::from_secs(5);

fn secure(url: &str) -> RedisConfig {
    let mut cfg = Topology::SecureCluster.config();
    cfg.urls = lawsync::config::parse_redis_urls(url).expect("url");
    cfg
}

async fn failure(cfg: &RedisConfig) -> RedisFailure {
    let started = Instant::now();
    let err = tokio::time::timeout(HANG_GUARD, RedisConn::connect(cfg))
        .await
        .expect("a failure is reported, not hung on")
        .expect_err("must fail");
    eprintln!("{:>5} ms  {err}", started.elapsed().as_millis());
    err
}

fn port(var_index: usize) -> u16 {
    test_var("LAWSYNC_TEST_SECURE_PORTS")
        .split(',')
        .nth(var_index)
        .expect("port")
        .parse()
        .expect("port")
}

#[tokio::test]
async fn the_secure_cluster_is_reached_with_its_ca_and_user() {
    let mut conn = Topology::SecureCluster.connect().await;
    let pong: String = redis::cmd("PING").query_async(&mut conn).await.expect("ping");
    assert_eq!(pong, "PONG");
    // Every seed works, a replica's too (the client follows the slot map to primaries).
    for i in 0..6 {
        let cfg = secure(&format!("rediss://127.0.0.1:{}", port(i)));
        let mut conn = RedisConn::connect(&cfg).await.expect("seed {i}");
        let _: String = redis::cmd("PING").query_async(&mut conn).await.expect("ping");
    }
}

#[tokio::test]
async fn an_untrusted_certificate_names_redis_ca_file() {
    let mut cfg = Topology::SecureCluster.config();
    cfg.ca_file = None;
    let err = failure(&cfg).await;
    assert!(matches!(err, RedisFailure::Tls(_)), "{err:?}");
    let text = err.to_string();
    assert!(text.contains("not signed by a CA this client trusts"), "{text}");
    assert!(text.contains("REDIS_CA_FILE"), "{text}");
    // Standalone mode (one node asked directly) says the same.
    cfg.mode = lawsync::config::RedisMode::Standalone;
    let text = failure(&cfg).await.to_string();
    assert!(text.contains("REDIS_CA_FILE"), "{text}");
}

#[tokio::test]
async fn a_certificate_for_another_name_says_so() {
    // The certificate names 127.0.0.1 only; "localhost" reaches the same server.
    let cfg = secure(&format!("rediss://localhost:{}", port(0)));
    let err = failure(&cfg).await;
    let text = err.to_string();
    assert!(matches!(err, RedisFailure::Tls(_)), "{err:?}");
    assert!(
        text.contains("not valid for the host name in REDIS_URL"),
        "{text}"
    );
}

#[tokio::test]
async fn tls_to_a_plain_port_and_plain_text_to_a_tls_port_are_named() {
    let plain_port = Topology::Cluster
        .url()
        .rsplit(':')
        .next()
        .expect("port")
        .to_owned();
    let cfg = secure(&format!("rediss://127.0.0.1:{plain_port}"));
    let err = failure(&cfg).await;
    let text = err.to_string();
    assert!(text.contains("answers in plain text"), "{text}");
    assert!(text.contains("redis://"), "{text}");

    let mut cfg = secure(&format!("redis://127.0.0.1:{}", port(0)));
    cfg.ca_file = None;
    let err = failure(&cfg).await;
    let text = err.to_string();
    assert!(text.contains("speaks TLS"), "{text}");
    assert!(text.contains("rediss://"), "{text}");

    // A peer that accepts and closes at once (a proxy whose Redis is down) proves neither:
    // the failure stays what it was, not a TLS mismatch.
    let closer = tokio::net::TcpListener::bind("127.0.0.1:0").await.expect("bind");
    let port = closer.local_addr().expect("addr").port();
    tokio::spawn(async move {
        while let Ok((conn, _)) = closer.accept().await {
            drop(conn);
        }
    });
    for scheme in ["redis", "rediss"] {
        let mut cfg = secure(&format!("{scheme}://127.0.0.1:{port}"));
        cfg.auth = RedisAuth::Url;
        if scheme == "redis" {
            cfg.ca_file = None;
        }
        let err = failure(&cfg).await;
        assert!(!matches!(err, RedisFailure::Tls(_)), "{scheme}: {err}");
    }
}

#[tokio::test]
async fn refused_credentials_are_named() {
    let mut cfg = Topology::SecureCluster.config();
    cfg.auth = RedisAuth::Password {
        username: Some(test_var("LAWSYNC_TEST_SECURE_USER")),
        password: lawsync::Secret::new("not-the-password"),
    };
    let text = failure(&cfg).await.to_string();
    assert!(text.contains("the user or password was refused"), "{text}");
    assert!(text.contains("REDIS_AUTH_SECRET_ARN"), "{text}");
    assert!(!text.contains("not-the-password"), "{text}");

    cfg.auth = RedisAuth::Url;
    let text = failure(&cfg).await.to_string();
    assert!(text.contains("authentication refused"), "{text}");
}

#[tokio::test]
async fn a_ca_file_without_certificates_is_named() {
    let dir = std::env::temp_dir().join(unique_env("ca"));
    std::fs::create_dir_all(&dir).expect("dir");
    let path = dir.join("ca.pem");
    std::fs::write(&path, "not a certificate\n").expect("write");
    let mut cfg = Topology::SecureCluster.config();
    cfg.ca_file = Some(path);
    let text = failure(&cfg).await.to_string();
    assert!(
        text.contains("REDIS_CA_FILE") && text.contains("holds no PEM certificate"),
        "{text}"
    );
    std::fs::remove_dir_all(dir).ok();
}

/// The configuration lawsync reads, with the given variables over a valid base.
fn config(vars: &[(&str, &str)]) -> Result<Config, lawsync::ConfigError> {
    let mut all: Vec<(String, String)> = vec![("LAW_API_OC".into(), "oc-redis-secure".into())];
    all.extend(vars.iter().map(|(k, v)| (k.to_string(), v.to_string())));
    Config::from_lookup(|k| all.iter().rev().find(|(n, _)| n == k).map(|(_, v)| v.clone()))
}

#[tokio::test]
async fn the_acl_password_comes_from_secrets_manager() {
    let sdk = moto_sdk().await;
    let client = aws_sdk_secretsmanager::Client::new(&sdk);
    let password = test_var("LAWSYNC_TEST_SECURE_PASSWORD");
    let name = unique_env("redis-auth");
    let mut arns = Vec::new();
    for (suffix, value) in [
        ("plain", password.clone()),
        (
            "json",
            format!(r#"{{"username":"ignored","password":"{password}"}}"#),
        ),
    ] {
        let out = client
            .create_secret()
            .name(format!("{name}-{suffix}"))
            .secret_string(value)
            .send()
            .await
            .expect("create secret");
        arns.push(out.arn().expect("arn").to_owned());
    }
    let ca = test_var("LAWSYNC_TEST_SECURE_CA");
    let user = test_var("LAWSYNC_TEST_SECURE_USER");
    for arn in &arns {
        let cfg = config(&[
            ("REDIS_URL", &Topology::SecureCluster.url()),
            ("REDIS_CA_FILE", &ca),
            ("REDIS_USERNAME", &user),
            ("REDIS_AUTH_SECRET_ARN", arn),
        ])
        .expect("config");
        assert!(matches!(cfg.redis.auth, RedisAuth::SecretArn { .. }));
        assert!(lawsync::aws::uses_aws(&cfg), "a secret ARN asks AWS");
        let mut conn = redis_auth::connect(&cfg.redis, &sdk)
            .await
            .expect("connect with the secret's password");
        let _: String = redis::cmd("PING").query_async(&mut conn).await.expect("ping");
        let shown = format!(
            "{:?} {:?}",
            cfg.redis,
            RedisCredentials::resolve(&cfg.redis, &sdk).await
        );
        assert!(!shown.contains(&password), "a password in Debug output: {shown}");
    }
    // A secret that does not hold the password is named by its variable, the value never.
    let wrong = client
        .create_secret()
        .name(format!("{name}-wrong"))
        .secret_string("not-the-password")
        .send()
        .await
        .expect("create");
    let cfg = config(&[
        ("REDIS_URL", &Topology::SecureCluster.url()),
        ("REDIS_CA_FILE", &ca),
        ("REDIS_USERNAME", &user),
        ("REDIS_AUTH_SECRET_ARN", wrong.arn().expect("arn")),
    ])
    .expect("config");
    let err = redis_auth::connect(&cfg.redis, &sdk).await.expect_err("refused");
    let text = err.to_string();
    assert!(text.contains("the user or password was refused"), "{text}");
    assert!(!text.contains("not-the-password"), "{text}");
    let missing = config(&[
        ("REDIS_URL", &Topology::SecureCluster.url()),
        (
            "REDIS_AUTH_SECRET_ARN",
            "arn:aws:secretsmanager:us-east-1:123456789012:secret:absent",
        ),
    ])
    .expect("config");
    let text = redis_auth::connect(&missing.redis, &sdk)
        .await
        .expect_err("no secret")
        .to_string();
    assert!(
        text.starts_with("REDIS_AUTH_SECRET_ARN: Secrets Manager refused"),
        "{text}"
    );
}

#[test]
fn redis_security_variables_are_checked_together() {
    let ca = test_var("LAWSYNC_TEST_SECURE_CA");
    let arn = "arn:aws:secretsmanager:us-east-1:123456789012:secret:redis";
    let secure = Topology::SecureCluster.url();
    // The variables, the one the error must name, and what it must say.
    type Case<'a> = (Vec<(&'a str, &'a str)>, &'a str, &'a str);
    let cases: Vec<Case> = vec![
        (
            vec![("REDIS_URL", "redis://127.0.0.1:6391"), ("REDIS_CA_FILE", &ca)],
            "REDIS_CA_FILE",
            "use rediss://",
        ),
        (
            vec![("REDIS_URL", &secure), ("REDIS_CA_FILE", "/nonexistent/ca.pem")],
            "REDIS_CA_FILE",
            "no readable file",
        ),
        (
            vec![("REDIS_URL", &secure), ("REDIS_USERNAME", "lawsync")],
            "REDIS_USERNAME",
            "without a password",
        ),
        (
            vec![
                ("REDIS_URL", &secure),
                ("REDIS_USERNAME", "two words"),
                ("REDIS_AUTH_SECRET_ARN", arn),
            ],
            "REDIS_USERNAME",
            "printable",
        ),
        (
            vec![
                ("REDIS_URL", &secure),
                ("REDIS_AUTH_SECRET_ARN", "redis-password"),
            ],
            "REDIS_AUTH_SECRET_ARN",
            "Secrets Manager ARN",
        ),
        (
            vec![
                ("REDIS_URL", &secure),
                ("REDIS_AUTH_SECRET_ARN", arn),
                ("REDIS_IAM_CACHE_NAME", "c"),
            ],
            "REDIS_AUTH_SECRET_ARN",
            "pick one",
        ),
        (
            vec![
                ("REDIS_URL", "rediss://u:pw@127.0.0.1:7394"),
                ("REDIS_AUTH_SECRET_ARN", arn),
            ],
            "REDIS_URL",
            "keep one",
        ),
        (
            vec![("REDIS_URL", &secure), ("REDIS_IAM_CACHE_NAME", "my-cache")],
            "REDIS_IAM_CACHE_NAME",
            "needs REDIS_USERNAME",
        ),
        (
            vec![
                ("REDIS_URL", &secure),
                ("REDIS_IAM_CACHE_NAME", "My_Cache"),
                ("REDIS_USERNAME", "u"),
            ],
            "REDIS_IAM_CACHE_NAME",
            "1-40",
        ),
        (
            vec![
                ("REDIS_URL", "redis://127.0.0.1:6391"),
                ("REDIS_IAM_CACHE_NAME", "c"),
                ("REDIS_USERNAME", "u"),
            ],
            "REDIS_IAM_CACHE_NAME",
            "needs a rediss:// REDIS_URL",
        ),
        (
            vec![
                ("REDIS_URL", &secure),
                ("REDIS_IAM_CACHE_NAME", "c"),
                ("REDIS_USERNAME", "u"),
                ("REDIS_IAM_SERVERLESS", "maybe"),
            ],
            "REDIS_IAM_SERVERLESS",
            "true",
        ),
    ];
    for (vars, var, says) in cases {
        let err = config(&vars).expect_err(&format!("{vars:?} must be refused"));
        assert_eq!(err.var, var, "{vars:?}: {err}");
        assert!(err.to_string().contains(says), "{vars:?}: {err}");
        assert!(
            !err.to_string().contains(":pw@"),
            "a URL's password echoed: {err}"
        );
    }
    let iam = config(&[
        ("REDIS_URL", &secure),
        ("REDIS_IAM_CACHE_NAME", "my-cache"),
        ("REDIS_USERNAME", "lawsync-iam"),
    ])
    .expect("IAM config");
    // A scheme in capitals is the same scheme.
    let upper = config(&[
        ("REDIS_URL", "REDISS://127.0.0.1:7394,REDISS://127.0.0.1:7395"),
        ("REDIS_CA_FILE", &ca),
    ])
    .expect("REDISS:// is rediss://");
    assert!(upper.redis.tls());
    assert_eq!(
        iam.redis.auth,
        RedisAuth::Iam {
            user_id: "lawsync-iam".into(),
            cache_name: "my-cache".into(),
            serverless: true
        }
    );
}

const FIXED_TIME: u64 = 1_796_259_723; // 2026-12-03T01:02:03Z

/// The token botocore's `SigV4QueryAuth` presigns for the same request, with its clock
/// fixed at [`FIXED_TIME`]: the signer ElastiCache's own documentation uses.
fn botocore_token(
    creds: &aws_credential_types::Credentials,
    user: &str,
    cache: &str,
    region: &str,
    serverless: bool,
) -> String {
    let python = concat!(env!("CARGO_MANIFEST_DIR"), "/../.venv/bin/python");
    assert!(
        std::path::Path::new(python).exists(),
        "{python} is missing: `make test` installs the project's venv (botocore comes with moto)"
    );
    let script = r#"
import sys, datetime, botocore.auth
from botocore.credentials import Credentials
from botocore.awsrequest import AWSRequest
botocore.auth.get_current_datetime = lambda: datetime.datetime(2026, 12, 3, 1, 2, 3)
key, secret, token, user, cache, region, serverless = sys.argv[1:8]
params = {"Action": "connect", "User": user}
if serverless == "true":
    params["ResourceType"] = "ServerlessCache"
req = AWSRequest(method="GET", url=f"http://{cache}/", params=params)
botocore.auth.SigV4QueryAuth(Credentials(key, secret, token or None), "elasticache", region, expires=900).add_auth(req)
print(req.url.removeprefix("http://"))
"#;
    let out = std::process::Command::new(python)
        .args(["-c", script])
        .args([
            creds.access_key_id(),
            creds.secret_access_key(),
            creds.session_token().unwrap_or(""),
            user,
            cache,
            region,
            if serverless { "true" } else { "false" },
        ])
        .output()
        .expect("run botocore");
    assert!(
        out.status.success(),
        "botocore: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout).expect("utf-8").trim().to_owned()
}

/// A token as host, path and its query's pairs in order of name (the two signers write
/// the session token's parameter at different places; the signature covers the set).
fn parts(token: &str) -> (String, String, Vec<(String, String)>) {
    let url = url::Url::parse(&format!("http://{token}")).expect("token is a URL without its scheme");
    let mut pairs: Vec<(String, String)> = url
        .query_pairs()
        .map(|(k, v)| (k.into_owned(), v.into_owned()))
        .collect();
    pairs.sort();
    (
        url.host_str().expect("host").to_owned(),
        url.path().to_owned(),
        pairs,
    )
}

#[test]
fn iam_tokens_match_botocore_with_a_fixed_clock() {
    let at = std::time::UNIX_EPOCH + Duration::from_secs(FIXED_TIME);
    let with_session = aws_credential_types::Credentials::new(
        "AKIDLAWSYNCEXAMPLE",
        "wJalrXUtnFEMI/K7MDENG+bPxRfiCYEXAMPLEKEY",
        Some("IQoJb3JpZ2luX2VjEJr//////////wEaDmFwLW5vcnRoZWFzdC0y+session=token".into()),
        None,
        "fixed",
    );
    let without = aws_credential_types::Credentials::new(
        "AKIDLAWSYNCEXAMPLE",
        "secret/with+chars=",
        None,
        None,
        "fixed",
    );
    for (creds, user, cache, region, serverless) in [
        (
            &with_session,
            "lawsync-iam",
            "lawsync-cache",
            "ap-northeast-2",
            true,
        ),
        (
            &without,
            "user with space+plus~tilde*star",
            "rg-01",
            "us-east-1",
            false,
        ),
    ] {
        let ours = redis_auth::iam_token(user, cache, serverless, region, creds, at).expect("sign");
        let theirs = botocore_token(creds, user, cache, region, serverless);
        eprintln!("ours:     {}\nbotocore: {theirs}", ours.expose());
        assert_eq!(parts(ours.expose()), parts(&theirs));
        assert_eq!(
            ours.expose().len(),
            theirs.len(),
            "the same encoding, byte for byte"
        );
        let (host, _, pairs) = parts(ours.expose());
        assert_eq!(host, cache);
        assert!(pairs.contains(&("X-Amz-Expires".into(), "900".into())));
        assert!(pairs.contains(&("X-Amz-Date".into(), "20261203T010203Z".into())));
        assert_eq!(
            pairs
                .iter()
                .any(|(k, v)| k == "ResourceType" && v == "ServerlessCache"),
            serverless
        );
        assert!(
            !format!("{ours:?}").contains("X-Amz-Signature"),
            "a token in Debug output"
        );
    }
}

#[test]
fn signing_a_token_traces_no_session_token_at_any_level() {
    use tracing_subscriber::Layer;
    use tracing_subscriber::layer::SubscriberExt;
    let captured = lawsync_tests::capture::Captured::default();
    let writer = captured.clone();
    let subscriber = tracing_subscriber::registry().with(
        tracing_subscriber::fmt::layer()
            .with_writer(move || writer.clone())
            .with_filter(tracing_subscriber::filter::LevelFilter::TRACE),
    );
    let session = "IQoJSESSIONTOKENlawsyncTRACEcheck";
    let creds = aws_credential_types::Credentials::new(
        "AKIDLAWSYNCEXAMPLE",
        "secretKEYlawsync",
        Some(session.into()),
        None,
        "fixed",
    );
    tracing::subscriber::with_default(subscriber, || {
        tracing::trace!("the capture works");
        redis_auth::iam_token("u", "c", true, "us-east-1", &creds, std::time::SystemTime::now())
            .expect("sign");
    });
    let text = captured.text();
    assert!(text.contains("the capture works"), "nothing captured: {text}");
    assert!(
        !text.contains(session) && !text.contains("secretKEYlawsync"),
        "a credential traced: {text}"
    );
}

#[tokio::test]
async fn iam_tokens_are_renewed_for_every_connection() {
    use futures::StreamExt;
    use redis::auth::StreamingCredentialsProvider;
    let creds = aws_credential_types::Credentials::new("AKIDLAWSYNCEXAMPLE", "secret", None, None, "fixed");
    let provider = aws_credential_types::provider::SharedCredentialsProvider::new(creds);
    let tokens = redis_auth::IamTokens::new("lawsync-iam", "lawsync-cache", true, "ap-northeast-2", provider)
        .renewed_every(Duration::from_millis(1100));
    let started = Instant::now();
    let mut stream = tokens.subscribe();
    let first = stream.next().await.expect("a token at once").expect("signed");
    assert!(
        started.elapsed() < Duration::from_millis(500),
        "the first token waits for no renewal"
    );
    let second = stream.next().await.expect("a renewal").expect("signed");
    assert!(started.elapsed() >= Duration::from_millis(1100));
    assert_eq!(first.username(), "lawsync-iam");
    let date = |t: &str| {
        parts(t)
            .2
            .into_iter()
            .find(|(k, _)| k == "X-Amz-Date")
            .expect("date")
            .1
    };
    assert!(
        date(second.password()) > date(first.password()),
        "a renewal is signed anew"
    );
    // A new subscriber (a new connection) gets a fresh token at once, not the old one.
    let again = tokens.subscribe().next().await.expect("token").expect("signed");
    assert!(date(again.password()) >= date(second.password()));
}

/// AWS credentials that can be switched off, and that always look close to expiry (so
/// every token asks for them again).
#[derive(Debug, Default, Clone)]
struct Switchable {
    failing: std::sync::Arc<std::sync::atomic::AtomicBool>,
    /// Never answers while set.
    hanging: std::sync::Arc<std::sync::atomic::AtomicBool>,
    /// Seconds the credentials it hands out are good for (0: 60).
    life_s: std::sync::Arc<std::sync::atomic::AtomicU64>,
    asked: std::sync::Arc<std::sync::atomic::AtomicU32>,
}

impl aws_credential_types::provider::ProvideCredentials for Switchable {
    fn provide_credentials<'a>(&'a self) -> aws_credential_types::provider::future::ProvideCredentials<'a>
    where
        Self: 'a,
    {
        use std::sync::atomic::Ordering;
        self.asked.fetch_add(1, Ordering::Relaxed);
        if self.hanging.load(Ordering::Relaxed) {
            return aws_credential_types::provider::future::ProvideCredentials::new(std::future::pending());
        }
        let life = match self.life_s.load(Ordering::Relaxed) {
            0 => 60,
            s => s,
        };
        aws_credential_types::provider::future::ProvideCredentials::ready(
            if self.failing.load(Ordering::Relaxed) {
                Err(
                    aws_credential_types::provider::error::CredentialsError::not_loaded(
                        "the test switched them off",
                    ),
                )
            } else {
                Ok(aws_credential_types::Credentials::new(
                    "AKIDLAWSYNCEXAMPLE",
                    "secret",
                    None,
                    Some(std::time::SystemTime::now() + Duration::from_secs(life)),
                    "switchable",
                ))
            },
        )
    }
}

/// Runs `cmd` on every node of the secure cluster, as its ACL user.
async fn on_every_node(cmd: &redis::Cmd) {
    for i in 0..6 {
        let mut cfg = secure(&format!("rediss://127.0.0.1:{}", port(i)));
        cfg.mode = lawsync::config::RedisMode::Standalone;
        let mut conn = RedisConn::connect(&cfg).await.expect("node");
        let _: redis::Value = cmd.query_async(&mut conn).await.expect("admin command");
    }
}

// ElastiCache checks a token's signature; the local Redis cannot, so its IAM user takes any
// password (`nopass`): what is checked here is that tokens are what lawsync sends as that
// user, on every connection, and that a credentials outage heals.
#[tokio::test]
async fn iam_connections_authenticate_as_the_user_and_heal_after_a_credentials_outage() {
    use std::sync::atomic::Ordering;
    let user = "lawsync-iam-test";
    on_every_node(
        redis::cmd("ACL")
            .arg("SETUSER")
            .arg(user)
            .arg("on")
            .arg("nopass")
            .arg("~*")
            .arg("&*")
            .arg("+@all"),
    )
    .await;
    for mode in [
        lawsync::config::RedisMode::Standalone,
        lawsync::config::RedisMode::Cluster,
    ] {
        let switch = Switchable::default();
        // Good for 20 s only: too short to fall back on once the provider fails.
        switch.life_s.store(20, Ordering::Relaxed);
        let provider = aws_credential_types::provider::SharedCredentialsProvider::new(switch.clone());
        let tokens = redis_auth::IamTokens::new(user, "lawsync-cache", true, "ap-northeast-2", provider);
        let mut cfg = Topology::SecureCluster.config();
        cfg.mode = mode;
        let mut conn = RedisConn::connect_with(&cfg, &RedisCredentials::Iam(tokens))
            .await
            .expect("IAM connect");
        let me: String = redis::cmd("ACL")
            .arg("WHOAMI")
            .query_async(&mut conn)
            .await
            .expect("whoami");
        assert_eq!(me, user, "{mode:?}");

        // The credentials go away, and the connections with them.
        switch.failing.store(true, Ordering::Relaxed);
        on_every_node(redis::cmd("CLIENT").arg("KILL").arg("USER").arg(user)).await;
        // The first command meets the killed connection; the ones after meet the reconnect,
        // which has no token to send, and say so.
        let mut failures = Vec::new();
        for _ in 0..20 {
            let r: Result<String, _> = redis::cmd("PING").query_async(&mut conn).await;
            let failure = RedisFailure::from(r.expect_err("no credentials, no connection"));
            let named = failure.to_string().contains("IAM token could not be made");
            failures.push(failure);
            if named {
                break;
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        eprintln!("{mode:?} while the credentials are away: {failures:?}");
        let last = failures.last().expect("a failure").to_string();
        if mode == lawsync::config::RedisMode::Standalone {
            assert!(
                last.contains("IAM token could not be made") && last.contains("the test switched them off"),
                "{mode:?}: a credentials outage must be named: {last}"
            );
        } else {
            // A cluster's reconnect keeps only "connection lost" for its commands; the cause
            // is in the warning the token provider logs.
            assert!(
                failures
                    .iter()
                    .all(|f| matches!(f, RedisFailure::Unreachable(_) | RedisFailure::Timeout)),
                "{mode:?}: an outage, not a misnamed failure: {failures:?}"
            );
        }

        // They come back: the same connection heals within a few commands.
        switch.failing.store(false, Ordering::Relaxed);
        let started = Instant::now();
        loop {
            let r: Result<String, _> = redis::cmd("ACL").arg("WHOAMI").query_async(&mut conn).await;
            match r {
                Ok(me) => {
                    assert_eq!(me, user);
                    break;
                }
                Err(e) => assert!(
                    started.elapsed() < Duration::from_secs(5),
                    "{mode:?}: still failing 5 s after the credentials came back: {}",
                    RedisFailure::from(e)
                ),
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
        eprintln!(
            "{mode:?}: healed {} ms after the credentials came back; credentials asked {} times",
            started.elapsed().as_millis(),
            switch.asked.load(Ordering::Relaxed)
        );
    }
}

#[tokio::test]
async fn a_failed_or_hung_credentials_refresh_keeps_good_credentials_and_never_hangs() {
    use std::sync::atomic::Ordering;
    let asked = |s: &Switchable| s.asked.load(Ordering::Relaxed);
    let switch = Switchable::default();
    // Good for 200 s: inside the 5-minute refresh window, so every token asks again.
    switch.life_s.store(200, Ordering::Relaxed);
    let provider = aws_credential_types::provider::SharedCredentialsProvider::new(switch.clone());
    let tokens = redis_auth::IamTokens::new("u", "c", true, "us-east-1", provider);
    tokens.token().await.expect("first token");
    assert_eq!(asked(&switch), 1);

    // The endpoint blinks: the cached credentials, good for 200 s more, still sign.
    switch.failing.store(true, Ordering::Relaxed);
    tokens
        .token()
        .await
        .expect("a failed refresh falls back to credentials still good");
    assert_eq!(asked(&switch), 2);
    // Within a second of a failure nobody asks again.
    tokens.token().await.expect("still the cached ones");
    assert_eq!(asked(&switch), 2, "asked again right after a failure");

    // The endpoint hangs: bounded, then the cached credentials again.
    switch.failing.store(false, Ordering::Relaxed);
    switch.hanging.store(true, Ordering::Relaxed);
    tokio::time::sleep(Duration::from_millis(1100)).await;
    let started = Instant::now();
    let token = tokio::time::timeout(Duration::from_secs(10), tokens.token())
        .await
        .expect("a hung provider must not hang a token");
    token.expect("cached credentials sign while the endpoint hangs");
    let waited = started.elapsed();
    eprintln!(
        "a hung credentials endpoint held a token for {} ms",
        waited.as_millis()
    );
    assert!(waited < Duration::from_secs(5));

    // Credentials about to expire are never used past their life: with 10 s left and no
    // fresh ones, there is no token, and the error says why.
    let short = Switchable::default();
    short.life_s.store(10, Ordering::Relaxed);
    let provider = aws_credential_types::provider::SharedCredentialsProvider::new(short.clone());
    let tokens = redis_auth::IamTokens::new("u", "c", true, "us-east-1", provider);
    tokens.token().await.expect("first token");
    short.failing.store(true, Ordering::Relaxed);
    let err = tokens
        .token()
        .await
        .expect_err("no credentials good for long enough");
    assert!(err.contains("the test switched them off"), "{err}");
}
