//! AWS SDK plumbing shared by the S3 document store and the secret resolution.

/// The SDK configuration from the standard sources (environment, profile, the Lambda
/// role). `AWS_ENDPOINT_URL` points every client at a local emulator.
pub async fn sdk_config() -> aws_config::SdkConfig {
    aws_config::load_defaults(aws_config::BehaviorVersion::latest()).await
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
