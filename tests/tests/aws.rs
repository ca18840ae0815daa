//! The document stores and secret resolution, against a local folder and a moto server.

use lawsync::Secret;
use lawsync::config::{OcSource, SlackSource};
use lawsync::documents::{DocError, DocumentStore, LocalDir, S3Documents, precedent_key};
use lawsync::secrets::{resolve_oc, resolve_slack};
use lawsync_tests::servers::{moto_sdk, unique_env};

const DOC: &[u8] = "{\"판례정보일련번호\":\"240001\",\"판례내용\":\"상고를 기각한다.\"}".as_bytes();

async fn roundtrip(store: &dyn DocumentStore) {
    let key = precedent_key("240001").expect("key");
    assert_eq!(
        store.get(&key).await.expect("get"),
        None,
        "absent before the first put"
    );
    store.put(&key, DOC).await.expect("put");
    // A redelivery writes the same document again: idempotent.
    store.put(&key, DOC).await.expect("put again");
    assert_eq!(store.get(&key).await.expect("get").as_deref(), Some(DOC));
    let err = store
        .put("../escape.json", DOC)
        .await
        .expect_err("key outside the store");
    assert!(matches!(err, DocError::InvalidKey(_)), "{err:?}");
}

#[tokio::test]
async fn local_folder_store() {
    let root = std::env::temp_dir().join(unique_env("docs"));
    let store = LocalDir::new(&root);
    roundtrip(&store).await;
    let files: Vec<_> = std::fs::read_dir(root.join("prec"))
        .expect("dir")
        .map(|e| e.expect("entry").file_name())
        .collect();
    assert_eq!(files, ["240001.json"], "no temporary files left behind");
    std::fs::remove_dir_all(&root).expect("clean up");
}

#[tokio::test]
async fn s3_store_on_moto() {
    let sdk = moto_sdk().await;
    let bucket = unique_env("docs").to_lowercase().replace('_', "-");
    let store = S3Documents::new(&sdk, &bucket);
    let location = aws_sdk_s3::types::CreateBucketConfiguration::builder()
        .location_constraint(aws_sdk_s3::types::BucketLocationConstraint::ApNortheast2)
        .build();
    let create = store
        .client()
        .create_bucket()
        .bucket(&bucket)
        .create_bucket_configuration(location);
    create.send().await.expect("create bucket");
    roundtrip(&store).await;
    let missing = S3Documents::new(&sdk, "no-such-bucket-lawsync");
    let err = missing.put("prec/1.json", DOC).await.expect_err("no bucket");
    assert_eq!(err, DocError::S3("NoSuchBucket".into()));
}

#[tokio::test]
async fn secrets_come_from_secrets_manager_in_either_form() {
    let sdk = moto_sdk().await;
    let client = aws_sdk_secretsmanager::Client::new(&sdk);
    let name = unique_env("oc");
    let plain = client
        .create_secret()
        .name(format!("{name}-plain"))
        .secret_string("oc-from-sm")
        .send()
        .await
        .expect("create");
    let json = client
        .create_secret()
        .name(format!("{name}-json"))
        .secret_string(r#"{"LAW_API_OC":"oc-in-json","SLACK_WEBHOOK_URL":"https://hooks.example/x"}"#)
        .send()
        .await
        .expect("create");
    let wrong = client
        .create_secret()
        .name(format!("{name}-wrong"))
        .secret_string(r#"{"other":"secretpart"}"#)
        .send()
        .await
        .expect("create");
    let arn = |o: Option<&str>| o.expect("arn").to_owned();

    let oc = resolve_oc(&OcSource::SecretArn(arn(plain.arn())), &sdk)
        .await
        .expect("plain");
    assert_eq!(oc.expose(), "oc-from-sm");
    let oc = resolve_oc(&OcSource::SecretArn(arn(json.arn())), &sdk)
        .await
        .expect("json");
    assert_eq!(oc.expose(), "oc-in-json");
    let hook = resolve_slack(&SlackSource::SecretArn(arn(json.arn())), &sdk)
        .await
        .expect("json");
    assert_eq!(hook.expose(), "https://hooks.example/x");
    let direct = resolve_oc(&OcSource::Value(Secret::new("direct")), &sdk)
        .await
        .expect("direct");
    assert_eq!(direct.expose(), "direct");

    let err = resolve_oc(&OcSource::SecretArn(arn(wrong.arn())), &sdk)
        .await
        .expect_err("no LAW_API_OC field");
    assert_eq!(err.var, "LAW_API_OC_SECRET_ARN");
    assert!(!err.to_string().contains("secretpart"), "{err}");
    let missing = "arn:aws:secretsmanager:ap-northeast-2:123456789012:secret:lawsync-none-AbCdEf".to_owned();
    let err = resolve_oc(&OcSource::SecretArn(missing), &sdk)
        .await
        .expect_err("missing");
    assert!(err.reason.contains("ResourceNotFoundException"), "{err}");
}
