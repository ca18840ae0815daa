//! AWS as a deployed stack has it, on the moto stand-in: the template's roles, resources
//! named as the template names them, and the stand-in's record of every call.
//!
//! `scripts/test-moto.sh` puts moto behind the template's IAM (`infra/iam/gate.py`): a
//! request signed with a role's access key ([`Role::access_key`]) is evaluated against
//! that role as SAM renders it from `infra/template.yaml`, and refused with AccessDenied
//! when the role does not allow it. The grants name resources by the stack's names
//! (`lawsync-<Env>-search`, `lawsync-<Env>-<account>-<region>`, `lawsync/<Env>/law-api-oc`),
//! so a test whose functions act under their roles creates its resources through
//! [`Stack`]. Calls signed with any other key are the test harness's and pass.

use std::hash::{Hash, Hasher};

use lawsync::app::sqs::MessageKind;

/// moto's account: the ARNs the stand-in evaluates are in it.
pub const ACCOUNT: &str = "123456789012";
/// The region the tests' SDK configurations use.
pub const REGION: &str = "ap-northeast-2";

/// A principal of the template whose calls the stand-in checks against its role.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Role {
    Search,
    Detail,
    Drainer,
    /// The schedules' role: EventBridge Scheduler sends the daily and weekly messages.
    SyncSchedule,
}

impl Role {
    pub const FUNCTIONS: [Role; 3] = [Role::Search, Role::Detail, Role::Drainer];

    /// The access key that makes a request this role's: the logical id of the function (or
    /// role) in the template.
    pub fn access_key(self) -> &'static str {
        match self {
            Role::Search => "SearchFunction",
            Role::Detail => "DetailFunction",
            Role::Drainer => "DrainerFunction",
            Role::SyncSchedule => "SyncScheduleRole",
        }
    }

    /// The function that handles a queue's messages.
    pub fn handling(kind: MessageKind) -> Role {
        match kind {
            MessageKind::Search => Role::Search,
            MessageKind::Detail => Role::Detail,
        }
    }

    /// The function a bootstrap (or a `lawsync invoke` subcommand) is: `search`, `detail`
    /// or `drainer`.
    pub fn function(name: &str) -> Role {
        match name {
            "search" => Role::Search,
            "detail" => Role::Detail,
            "drainer" => Role::Drainer,
            other => panic!("no function {other}"),
        }
    }
}

/// SDK configuration aimed at the moto stand-in, signing as `role`.
pub async fn sdk_as(role: Role) -> aws_config::SdkConfig {
    sdk_with_key(role.access_key()).await
}

/// SDK configuration aimed at the moto stand-in, signing with `key` (a role's, a role's
/// with `~probe` for refusals provoked on purpose, or anything else for the harness).
pub async fn sdk_with_key(key: &str) -> aws_config::SdkConfig {
    aws_config::defaults(aws_config::BehaviorVersion::latest())
        .endpoint_url(crate::servers::moto_url())
        .region(aws_config::Region::new(REGION))
        .credentials_provider(aws_sdk_s3::config::Credentials::new(
            key,
            "test",
            None,
            None,
            "lawsync-tests",
        ))
        .load()
        .await
}

/// The three functions' dependencies (search, detail, drainer) over one configuration,
/// client and queue, each function's document store and outbox signing as its role:
/// `store` and `outbox` build them from the role's SDK configuration.
pub async fn functions_deps(
    cfg: &lawsync::Config,
    law: &lawsync::LawClient,
    queue: &lawsync::queue::RetryQueue,
    ns: &lawsync::Namespace,
    store: impl Fn(&aws_config::SdkConfig) -> std::sync::Arc<dyn lawsync::documents::DocumentStore>,
    outbox: impl Fn(&aws_config::SdkConfig) -> std::sync::Arc<dyn lawsync::app::outbox::Outbox>,
) -> [lawsync::app::Deps; 3] {
    let mut out = Vec::new();
    for role in Role::FUNCTIONS {
        let sdk = sdk_as(role).await;
        out.push(lawsync::app::Deps::assemble(
            cfg.clone(),
            law.clone(),
            queue.clone(),
            store(&sdk),
            outbox(&sdk),
            ns.clone(),
        ));
    }
    out.try_into().unwrap_or_else(|_| unreachable!("three functions"))
}

/// One stack's AWS resources, named as `infra/template.yaml` names them for the
/// environment `env`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Stack {
    /// The template's `Env`: lower-case letters, digits and hyphens, short enough for the
    /// bucket's 63 characters.
    pub env: String,
}

/// Longest `Env` the bucket name `lawsync-<Env>-<account>-<region>` leaves room for.
const MAX_ENV: usize = 63 - "lawsync--123456789012-ap-northeast-2".len();

impl Stack {
    /// The stack of a test's `app_env` (`unique_env`'s), shortened to a digest of it when
    /// it is too long for a bucket name.
    pub fn new(app_env: &str) -> Self {
        let clean: String = app_env
            .to_lowercase()
            .chars()
            .map(|c| if c.is_ascii_alphanumeric() { c } else { '-' })
            .collect();
        let env = if clean.len() <= MAX_ENV {
            clean
        } else {
            let mut h = std::collections::hash_map::DefaultHasher::new();
            app_env.hash(&mut h);
            format!("t-{:016x}", h.finish())
        };
        Self { env }
    }

    /// `lawsync-<Env>-search`, `lawsync-<Env>-detail`.
    pub fn queue_name(&self, queue: &str) -> String {
        format!("lawsync-{}-{queue}", self.env)
    }

    /// `lawsync-<Env>-<account>-<region>`.
    pub fn bucket(&self) -> String {
        format!("lawsync-{}-{ACCOUNT}-{REGION}", self.env)
    }

    /// `lawsync/<Env>/<what>`: `law-api-oc` (the stack's key), `slack-webhook` and
    /// `redis-auth` (the secrets its parameters name).
    pub fn secret_name(&self, what: &str) -> String {
        format!("lawsync/{}/{what}", self.env)
    }

    /// Creates the search and detail queues; their URLs in that order, or the AWS error
    /// code.
    pub async fn create_queues(&self, sqs: &aws_sdk_sqs::Client) -> Result<[String; 2], String> {
        let mut urls = [String::new(), String::new()];
        for (url, q) in urls.iter_mut().zip(["search", "detail"]) {
            let name = self.queue_name(q);
            let out = sqs
                .create_queue()
                .queue_name(&name)
                .send()
                .await
                .map_err(|e| format!("create queue {name}: {}", lawsync::aws::aws_code(&e)))?;
            *url = out.queue_url().unwrap_or_default().to_owned();
        }
        Ok(urls)
    }

    /// Creates the document bucket (as the harness); its name, or the AWS error code.
    pub async fn create_bucket(&self, versioned: bool) -> Result<String, String> {
        let sdk = crate::servers::moto_sdk().await;
        let s3 = lawsync::documents::S3Documents::new(&sdk, self.bucket());
        let location = aws_sdk_s3::types::CreateBucketConfiguration::builder()
            .location_constraint(aws_sdk_s3::types::BucketLocationConstraint::ApNortheast2)
            .build();
        s3.client()
            .create_bucket()
            .bucket(self.bucket())
            .create_bucket_configuration(location)
            .send()
            .await
            .map_err(|e| format!("create bucket: {}", lawsync::aws::aws_code(&e)))?;
        if versioned {
            s3.client()
                .put_bucket_versioning()
                .bucket(self.bucket())
                .versioning_configuration(
                    aws_sdk_s3::types::VersioningConfiguration::builder()
                        .status(aws_sdk_s3::types::BucketVersioningStatus::Enabled)
                        .build(),
                )
                .send()
                .await
                .map_err(|e| format!("bucket versioning: {}", lawsync::aws::aws_code(&e)))?;
        }
        Ok(self.bucket())
    }

    /// Creates the secret `lawsync/<Env>/<what>` holding `value` (as the harness); its ARN.
    pub async fn create_secret(&self, what: &str, value: &str) -> Result<String, String> {
        let sm = aws_sdk_secretsmanager::Client::new(&crate::servers::moto_sdk().await);
        let out = sm
            .create_secret()
            .name(self.secret_name(what))
            .secret_string(value)
            .send()
            .await
            .map_err(|e| format!("create secret: {}", lawsync::aws::aws_code(&e)))?;
        out.arn()
            .map(str::to_owned)
            .ok_or_else(|| "create secret: no ARN".to_owned())
    }
}

/// One call the stand-in recorded (see `infra/iam/gate.py`).
#[derive(Debug, Clone, serde::Deserialize)]
pub struct RecordedCall {
    pub principal: String,
    pub service: String,
    pub operation: String,
    pub outcome: String,
    #[serde(default)]
    pub checks: Vec<RecordedCheck>,
}

/// One authorization a call needed.
#[derive(Debug, Clone, serde::Deserialize)]
pub struct RecordedCheck {
    pub action: String,
    pub resource: String,
    pub decision: String,
}

/// Every call the stand-in has recorded so far, or a panic naming the fix when it records
/// none (moto started without its IAM gate).
pub fn recorded_calls() -> Vec<RecordedCall> {
    let path = crate::servers::test_var("LAWSYNC_TEST_IAM_LOG");
    let text = std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{path}: {e}"));
    text.lines()
        .filter(|l| !l.trim().is_empty())
        .map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("{path}: {e}: {l}")))
        .collect()
}

/// The calls `role` made on resources of `stack` (its queues, bucket and secrets).
pub fn calls_of(role: Role, stack: &Stack) -> Vec<RecordedCall> {
    let marks = [
        format!(":{}", stack.queue_name("")),
        format!(":::{}", stack.bucket()),
        format!(":secret:lawsync/{}/", stack.env),
    ];
    recorded_calls()
        .into_iter()
        .filter(|c| c.principal == role.access_key())
        .filter(|c| {
            c.checks
                .iter()
                .any(|k| marks.iter().any(|m| k.resource.contains(m.as_str())))
        })
        .collect()
}
