//! Configuration from the environment: defaults, and a clear error naming the variable
//! for every bad value, without ever echoing a secret.

use std::collections::HashMap;
use std::time::Duration;

use lawsync::config::{Config, DocumentStoreConfig, OcSource, RedisMode, SlackSource};

const KEY: &str = "oc-value-never-shown";

fn load(pairs: &[(&str, &str)]) -> Result<Config, lawsync::ConfigError> {
    let map: HashMap<String, String> = pairs
        .iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect();
    Config::from_lookup(|k| map.get(k).cloned())
}

#[test]
fn defaults_follow_the_brief() {
    let c = load(&[("LAW_API_OC", KEY)]).expect("valid");
    assert_eq!(c.law.base_url.as_str(), "https://www.law.go.kr/");
    // 50 ms over law.go.kr's 1 s rule, for the network and a grant's validity.
    assert_eq!(c.gate.interval, Duration::from_millis(1050));
    assert_eq!(c.gate.burst, 1);
    assert_eq!(c.gate.max_wait, Duration::from_secs(30));
    assert_eq!(c.law.max_attempts, 3);
    assert_eq!(c.law.max_response_bytes, 16 * 1024 * 1024);
    assert_eq!(c.law.connect_timeout, Duration::from_secs(3));
    assert_eq!(c.law.read_timeout, Duration::from_secs(10));
    assert_eq!(c.law.referer, "https://www.law.go.kr/");
    assert!(c.law.user_agent.starts_with("Mozilla/5.0"));
    assert_eq!(c.app_env, "local");
    assert_eq!(c.redis.mode, RedisMode::Auto);
    assert_eq!(c.retry_max_attempts, 30);
    assert_eq!(c.drain_interval, Duration::from_secs(10));
    assert_eq!(c.documents, DocumentStoreConfig::Dir("documents".into()));
    assert_eq!(c.slack_webhook, None);
    assert!(matches!(c.law.oc, OcSource::Value(ref s) if s.expose() == KEY));
}

#[test]
fn every_bad_value_names_its_variable() {
    let cases: &[(&str, &str)] = &[
        ("LAW_API_REQUEST_INTERVAL_MS", "0"),
        ("LAW_API_REQUEST_INTERVAL_MS", "1s"),
        ("LAW_API_MAX_ATTEMPTS", "0"),
        ("LAW_API_MAX_ATTEMPTS", "11"),
        ("LAW_API_BURST", "-1"),
        ("LAW_API_MAX_WAIT_MS", "abc"),
        ("LAW_API_MAX_RESPONSE_BYTES", "0"),
        ("LAW_API_CONNECT_TIMEOUT_MS", "0"),
        ("LAW_API_READ_TIMEOUT_MS", "1.5"),
        ("LAW_API_BASE_URL", "www.law.go.kr"),
        ("LAW_API_BASE_URL", "ftp://www.law.go.kr"),
        ("LAW_API_BASE_URL", "https://www.law.go.kr/?OC=x"),
        ("LAW_API_USER_AGENT", "bad\nheader"),
        ("REDIS_URL", "http://127.0.0.1:6379"),
        ("REDIS_URL", "redis://a:6379,nonsense"),
        ("REDIS_CLUSTER", "maybe"),
        ("APP_ENV", "prod{1}"),
        ("APP_ENV", "has space"),
        ("DOCUMENT_BUCKET", "Not_A_Bucket"),
        ("SEARCH_QUEUE_URL", "queue"),
        ("RETRY_MAX_ATTEMPTS", "0"),
        ("DRAIN_INTERVAL_MS", "0"),
        ("LAW_API_OC_SECRET_ARN", "not-an-arn"),
        ("LAW_API_BURST", "10001"),
        ("LAW_API_REQUEST_INTERVAL_MS", "3600001"),
        ("LAW_API_MAX_WAIT_MS", "900001"),
        // No call outlasts a Lambda; the probe window is made of these two.
        ("LAW_API_READ_TIMEOUT_MS", "900001"),
        ("LAW_API_CONNECT_TIMEOUT_MS", "172800000"),
        ("LAW_API_GATE_TOLERANCE_MS", "1000"),
        // Past 100 ms, or a quarter of the interval, it is no longer wake-up noise.
        ("LAW_API_GATE_TOLERANCE_MS", "101"),
        ("LAW_API_GATE_TOLERANCE_MS", "999"),
        ("LAW_API_GATE_TOLERANCE_MS", "0"),
        // Longer than the default interval: a grant that old could be sent beside the next.
        ("LAW_API_GRANT_VALIDITY_MS", "2000"),
    ];
    for (var, value) in cases {
        let mut pairs = vec![(*var, *value)];
        if *var != "LAW_API_OC_SECRET_ARN" {
            pairs.push(("LAW_API_OC", KEY));
        }
        let err = load(&pairs).expect_err(&format!("{var}={value} must be refused"));
        assert_eq!(err.var, *var, "{var}={value}: {err}");
        assert!(err.to_string().starts_with(var), "{err}");
    }
}

#[test]
fn the_gate_tolerance_follows_the_interval_unless_set() {
    let tol = |pairs: &[(&str, &str)]| {
        let mut all = vec![("LAW_API_OC", KEY)];
        all.extend_from_slice(pairs);
        load(&all).expect("valid").gate.tolerance
    };
    assert_eq!(
        tol(&[]),
        Duration::from_millis(10),
        "a hundredth of 1050 ms, capped at 10 ms"
    );
    assert_eq!(
        tol(&[("LAW_API_REQUEST_INTERVAL_MS", "20")]),
        Duration::from_millis(2)
    );
    assert_eq!(
        tol(&[("LAW_API_REQUEST_INTERVAL_MS", "10")]),
        Duration::from_millis(2),
        "2 ms floor"
    );
    assert_eq!(
        tol(&[("LAW_API_REQUEST_INTERVAL_MS", "4")]),
        Duration::from_millis(1),
        "at most a quarter of the interval"
    );
    let err = load(&[
        ("LAW_API_OC", KEY),
        ("LAW_API_REQUEST_INTERVAL_MS", "1000"),
        ("LAW_API_GATE_TOLERANCE_MS", "999"),
    ])
    .expect_err("999 of 1000 is not wake-up noise");
    assert!(
        err.to_string().contains("at most 100 ms and at most a quarter"),
        "{err}"
    );

    assert_eq!(
        tol(&[("LAW_API_GATE_TOLERANCE_MS", "7")]),
        Duration::from_millis(7)
    );
}

#[test]
fn a_mistaken_base_url_is_not_echoed() {
    // A whole request URL pasted without its scheme carries the key.
    let err = load(&[
        ("LAW_API_OC", KEY),
        ("LAW_API_BASE_URL", "www.law.go.kr/DRF/lawSearch.do?OC=secretpart"),
    ])
    .expect_err("no scheme");
    assert_eq!(err.var, "LAW_API_BASE_URL");
    assert!(!err.to_string().contains("secretpart"), "{err}");
}

#[test]
fn a_missing_key_says_how_to_provide_one() {
    let err = load(&[]).expect_err("no key");
    assert_eq!(err.var, "LAW_API_OC");
    assert!(err.reason.contains("LAW_API_OC_SECRET_ARN"), "{err}");
    let err = load(&[("LAW_API_OC", "")]).expect_err("empty key counts as missing");
    assert_eq!(err.var, "LAW_API_OC");
}

#[test]
fn secrets_are_never_echoed() {
    let err = load(&[("LAW_API_OC", "has space-secretpart")]).expect_err("whitespace");
    assert!(!err.to_string().contains("secretpart"), "{err}");
    let err = load(&[
        ("LAW_API_OC", KEY),
        ("SLACK_WEBHOOK_URL", "hooks.slack.com/services/T0/B0/secretpart"),
    ])
    .expect_err("no scheme");
    assert!(!err.to_string().contains("secretpart"), "{err}");
    let err = load(&[
        ("LAW_API_OC", KEY),
        ("REDIS_URL", "http://user:secretpart@host:6379"),
    ])
    .expect_err("scheme");
    assert!(!err.to_string().contains("secretpart"), "{err}");
    let c = load(&[
        ("LAW_API_OC", KEY),
        ("REDIS_URL", "rediss://user:secretpart@cache.example:6379"),
        ("SLACK_WEBHOOK_URL", "https://hooks.slack.com/services/secretpart"),
    ])
    .expect("valid");
    let debug = format!("{c:?}");
    assert!(!debug.contains(KEY) && !debug.contains("secretpart"), "{debug}");
}

#[test]
fn sources_and_modes() {
    let c = load(&[
        (
            "LAW_API_OC_SECRET_ARN",
            "arn:aws:secretsmanager:ap-northeast-2:123456789012:secret:lawsync/oc-AbCdEf",
        ),
        (
            "SLACK_WEBHOOK_SECRET_ARN",
            "arn:aws:secretsmanager:ap-northeast-2:123456789012:secret:lawsync/slack-AbCdEf",
        ),
        ("REDIS_URL", "rediss://a.cache.amazonaws.com:6379"),
        ("REDIS_CLUSTER", "true"),
        ("DOCUMENT_BUCKET", "lawsync-docs.prod"),
        ("APP_ENV", "prod"),
    ])
    .expect("valid");
    assert!(matches!(c.law.oc, OcSource::SecretArn(_)));
    assert!(matches!(c.slack_webhook, Some(SlackSource::SecretArn(_))));
    assert_eq!(c.redis.mode, RedisMode::Cluster);
    assert_eq!(
        c.documents,
        DocumentStoreConfig::Bucket("lawsync-docs.prod".into())
    );
    let c = load(&[
        ("LAW_API_OC", KEY),
        ("REDIS_URL", "redis://a:1, redis://b:2 ,redis://c:3"),
    ])
    .expect("list");
    assert_eq!(c.redis.urls.len(), 3);
    // The key given directly wins over an ARN.
    let c = load(&[
        ("LAW_API_OC", KEY),
        ("LAW_API_OC_SECRET_ARN", "arn:aws:secretsmanager:r:1:secret:x"),
    ])
    .expect("valid");
    assert!(matches!(c.law.oc, OcSource::Value(_)));
}
