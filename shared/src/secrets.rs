//! Resolving secrets given as Secrets Manager ARNs (`LAW_API_OC_SECRET_ARN`,
//! `SLACK_WEBHOOK_SECRET_ARN`), once per cold start.
//!
//! A secret may be stored as the plain value, or as a JSON object holding it under the
//! variable's own name (`{"LAW_API_OC": "..."}`), as the Secrets Manager console's
//! key/value editor writes it. Errors name the ARN's variable and the AWS error code,
//! never the secret.

use crate::aws::aws_code;
use crate::config::{OcSource, SlackSource};
use crate::secret::Secret;

/// A secret that could not be resolved.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{var}: {reason}")]
pub struct SecretError {
    /// The variable that named the secret.
    pub var: &'static str,
    pub reason: String,
}

/// The law.go.kr key, from the environment or from Secrets Manager.
pub async fn resolve_oc(source: &OcSource, sdk: &aws_config::SdkConfig) -> Result<Secret, SecretError> {
    match source {
        OcSource::Value(v) => Ok(v.clone()),
        OcSource::SecretArn(arn) => fetch(sdk, arn, "LAW_API_OC_SECRET_ARN", "LAW_API_OC").await,
    }
}

/// The Slack webhook URL, from the environment or from Secrets Manager.
pub async fn resolve_slack(source: &SlackSource, sdk: &aws_config::SdkConfig) -> Result<Secret, SecretError> {
    match source {
        SlackSource::Url(v) => Ok(v.clone()),
        SlackSource::SecretArn(arn) => fetch(sdk, arn, "SLACK_WEBHOOK_SECRET_ARN", "SLACK_WEBHOOK_URL").await,
    }
}

pub(crate) async fn fetch(
    sdk: &aws_config::SdkConfig,
    arn: &str,
    var: &'static str,
    json_key: &str,
) -> Result<Secret, SecretError> {
    let fail = |reason: String| SecretError { var, reason };
    let client = aws_sdk_secretsmanager::Client::new(sdk);
    let out = client
        .get_secret_value()
        .secret_id(arn)
        .send()
        .await
        .map_err(|e| fail(format!("Secrets Manager refused ({})", aws_code(&e))))?;
    let raw = out
        .secret_string()
        .ok_or_else(|| fail("the secret has no string value".into()))?;
    let value = match serde_json::from_str::<serde_json::Value>(raw) {
        Ok(serde_json::Value::Object(map)) => match map.get(json_key) {
            Some(serde_json::Value::String(s)) => s.clone(),
            _ => {
                return Err(fail(format!(
                    "the secret is a JSON object without a string \"{json_key}\" field"
                )));
            }
        },
        _ => raw.to_owned(),
    };
    let value = value.trim();
    if value.is_empty() || value.chars().any(char::is_control) {
        return Err(fail(
            "the secret's value is empty or has control characters (value not shown)".into(),
        ));
    }
    Ok(Secret::new(value))
}
