//! AWS SDK plumbing shared by the S3 document store and the secret resolution.

/// The SDK configuration from the standard sources (environment, profile, the Lambda
/// role), when the configuration names anything of AWS (a bucket, a queue, a secret ARN).
/// `AWS_ENDPOINT_URL` points every client at a local emulator.
///
/// When it names nothing of AWS (a local run with a folder store, as `lawsync invoke` is
/// often used), no source is asked: the default chain would look for a region and
/// credentials in the EC2 metadata service, and off EC2 print its failed answers as
/// warnings for a service this run never calls.
pub async fn sdk_config(cfg: &crate::config::Config) -> aws_config::SdkConfig {
    if uses_aws(cfg) {
        aws_config::load_defaults(aws_config::BehaviorVersion::latest()).await
    } else {
        aws_config::SdkConfig::builder()
            .behavior_version(aws_config::BehaviorVersion::latest())
            .build()
    }
}

/// Whether `cfg` names a service of AWS.
pub fn uses_aws(cfg: &crate::config::Config) -> bool {
    use crate::config::{DocumentStoreConfig, OcSource, SlackSource};
    matches!(cfg.documents, DocumentStoreConfig::Bucket(_))
        || cfg.search_queue_url.is_some()
        || cfg.detail_queue_url.is_some()
        || matches!(cfg.law.oc, OcSource::SecretArn(_))
        || matches!(cfg.slack_webhook, Some(SlackSource::SecretArn(_)))
        || matches!(
            cfg.redis.auth,
            crate::config::RedisAuth::SecretArn { .. } | crate::config::RedisAuth::Iam { .. }
        )
}

/// An AWS SDK error reduced to its service error code (or a fixed kind): the full
/// `Display` can carry request details.
pub fn aws_code<E: aws_sdk_s3::error::ProvideErrorMetadata>(e: &aws_sdk_s3::error::SdkError<E>) -> String {
    use aws_sdk_s3::error::SdkError;
    match e {
        SdkError::ServiceError(s) => s
            .err()
            .code()
            .unwrap_or("service error")
            .chars()
            .take(64)
            .collect(),
        SdkError::TimeoutError(_) => "timed out".into(),
        SdkError::DispatchFailure(_) => "could not reach the service".into(),
        SdkError::ResponseError(_) => "unreadable response".into(),
        SdkError::ConstructionFailure(_) => "request could not be built".into(),
        _ => "request failed".into(),
    }
}
