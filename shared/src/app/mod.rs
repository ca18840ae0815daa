//! What the three functions do, as plain async functions over [`Deps`], testable without
//! AWS: the Lambda `main`s and the `lawsync` CLI only build the `Deps` and call in.
//!
//! - [`jobs`]: one search page (fan-out) and one precedent (store), shared by the SQS
//!   handlers and the drainer, with the mapping from failures to what happens next.
//! - [`sqs`]: an SQS batch in, a partial batch response out.
//! - [`outbox`]: follow-up messages (SQS `SendMessageBatch`).

pub mod backfill;
pub mod jobs;
pub mod outbox;
pub mod schedule;
pub mod sqs;

use std::sync::Arc;

use crate::config::Config;
use crate::documents::DocumentStore;
use crate::law::LawClient;
use crate::queue::RetryQueue;
use outbox::Outbox;

/// Everything a handler needs, built once per cold start.
#[derive(Debug, Clone)]
pub struct Deps {
    pub cfg: Config,
    pub law: LawClient,
    pub queue: RetryQueue,
    pub docs: Arc<dyn DocumentStore>,
    pub outbox: Arc<dyn Outbox>,
    /// `APP_ENV` and the upstream: the Redis key space of the gate, queue and lock.
    pub ns: crate::keys::Namespace,
    /// What the store holds, cached in Redis.
    pub held: crate::mirror::held::HeldIndex,
    /// The sync runs' counts and records.
    pub runs: crate::mirror::runs::Runs,
    /// Told of every precedent stored (the functions' metrics).
    pub mirror_observer: Option<Arc<dyn crate::mirror::MirrorObserver>>,
    /// Lambda's shutdown signal, when the functions run under it ([`Deps::with_shutdown`]).
    pub shutdown: Option<crate::lambda::Shutdown>,
}

/// Why a cold start failed. Names what to fix; never a secret.
#[derive(Debug, thiserror::Error)]
pub enum StartupError {
    #[error("configuration: {0}")]
    Config(#[from] crate::config::ConfigError),
    #[error("secret: {0}")]
    Secret(#[from] crate::secrets::SecretError),
    #[error("Redis (REDIS_URL): {0}")]
    Redis(#[from] crate::redis_conn::RedisFailure),
    #[error("Redis credentials: {0}")]
    RedisAuth(#[from] crate::redis_auth::AuthError),
    #[error("law.go.kr client: {0}")]
    Client(#[from] crate::law::LawError),
    #[error("alerts: {0}")]
    Alerts(#[from] crate::alert::AlertError),
}

/// The document store the configuration names: `DOCUMENT_BUCKET` or `DOCUMENT_DIR`.
pub fn document_store(cfg: &Config, sdk: &aws_config::SdkConfig) -> Arc<dyn DocumentStore> {
    use crate::config::DocumentStoreConfig;
    match &cfg.documents {
        DocumentStoreConfig::Bucket(b) => Arc::new(crate::documents::S3Documents::new(sdk, b.clone())),
        DocumentStoreConfig::Dir(d) => Arc::new(crate::documents::LocalDir::new(d.clone())),
    }
}

/// law.go.kr's gate for the key `oc`: one per key on this Redis, whatever the environment
/// (see [`crate::keys::GateKey::for_secret`]), taking over the per-environment state of the
/// release before once.
pub fn law_gate(
    redis: crate::redis_conn::RedisConn,
    oc: &crate::secret::Secret,
    ns: &crate::keys::Namespace,
    cfg: crate::config::GateConfig,
) -> Result<crate::gate::Gate, crate::config::ConfigError> {
    let key = crate::keys::GateKey::for_secret(crate::law::UPSTREAM, oc)?;
    Ok(crate::gate::Gate::new(redis, key, cfg).adopting(ns.gate()))
}

impl From<crate::redis_auth::ConnectError> for StartupError {
    fn from(e: crate::redis_auth::ConnectError) -> Self {
        match e {
            crate::redis_auth::ConnectError::Auth(a) => StartupError::RedisAuth(a),
            crate::redis_auth::ConnectError::Redis(r) => StartupError::Redis(r),
        }
    }
}

impl Deps {
    /// Builds everything from `cfg` once per cold start: the key (from Secrets Manager when
    /// given as an ARN), Redis, the gate, the law.go.kr client with its run history, the
    /// retry queue, the document store and the SQS outbox.
    pub async fn build(cfg: Config, sdk: &aws_config::SdkConfig) -> Result<Self, StartupError> {
        let oc = crate::secrets::resolve_oc(&cfg.law.oc, sdk).await?;
        let redis = crate::redis_auth::connect(&cfg.redis, sdk).await?;
        let ns = crate::keys::Namespace::new(&cfg.app_env, crate::law::UPSTREAM)?;
        let gate = Arc::new(law_gate(redis.clone(), &oc, &ns, cfg.gate)?);
        let history = crate::history::RedisHistory::new(redis.clone(), &ns).with_secret(oc.clone());
        let law = LawClient::new(&cfg.law, oc.clone(), gate)?.with_history(Arc::new(history));
        let queue = RetryQueue::new(redis, &ns).with_secret(oc);
        let docs = document_store(&cfg, sdk);
        let outbox = Arc::new(outbox::SqsOutbox::new(
            sdk,
            cfg.search_queue_url.clone(),
            cfg.detail_queue_url.clone(),
        ));
        Ok(Self::assemble(cfg, law, queue, docs, outbox, ns))
    }

    /// The dependencies from their parts: the held cache and the runs on the queue's
    /// Redis, over `docs`.
    pub fn assemble(
        cfg: Config,
        law: LawClient,
        queue: RetryQueue,
        docs: Arc<dyn DocumentStore>,
        outbox: Arc<dyn Outbox>,
        ns: crate::keys::Namespace,
    ) -> Self {
        let redis = queue.connection().clone();
        Self {
            held: crate::mirror::held::HeldIndex::new(redis.clone(), &ns, docs.clone()),
            runs: crate::mirror::runs::Runs::new(redis, &ns),
            mirror_observer: None,
            shutdown: None,
            cfg,
            law,
            queue,
            docs,
            outbox,
            ns,
        }
    }

    /// The same dependencies, with every drainer run (scheduled or inline) stopped by
    /// `shutdown`'s signal and counted as busy while it runs (see [`crate::lambda`]).
    pub fn with_shutdown(mut self, shutdown: crate::lambda::Shutdown) -> Self {
        self.shutdown = Some(shutdown);
        self
    }

    /// The same dependencies, telling `observer` of every precedent stored and run
    /// recorded.
    pub fn observed_mirror(mut self, observer: Arc<dyn crate::mirror::MirrorObserver>) -> Self {
        self.mirror_observer = Some(observer);
        self
    }

    /// Writes `run`'s record and feed lines to the store (see
    /// [`crate::mirror::runs::Runs::record`]).
    pub async fn record_run(
        &self,
        run: &crate::mirror::runs::RunId,
    ) -> Result<Option<crate::mirror::runs::RunRecord>, crate::mirror::runs::RunError> {
        let record = self.runs.record(run, self.docs.as_ref()).await?;
        if let (Some(r), Some(o)) = (&record, &self.mirror_observer) {
            o.run_recorded(r);
        }
        if record.as_ref().is_some_and(|r| r.complete) {
            if run.is_backfill() {
                Box::pin(backfill::after_window(self, run)).await;
            } else {
                // The backfill gave way to this run: it goes on now, not at the next pass.
                Box::pin(backfill::after_pass(self)).await;
            }
        }
        Ok(record)
    }

    /// A cold start from the process environment: the configuration, the AWS SDK's own
    /// (so `AWS_ENDPOINT_URL` reaches every client), then [`Deps::build`].
    pub async fn from_env() -> Result<(Self, aws_config::SdkConfig), StartupError> {
        let cfg = Config::from_env()?;
        let sdk = crate::aws::sdk_config(&cfg).await;
        let deps = Self::build(cfg, &sdk).await?;
        Ok((deps, sdk))
    }

    /// The same dependencies with the client replaced by `f(client)`: another gate, an
    /// observer.
    pub fn map_law(mut self, f: impl FnOnce(LawClient) -> LawClient) -> Self {
        self.law = f(self.law);
        self
    }

    /// The same dependencies, with every law.go.kr attempt reported to `observer` (the
    /// functions' metrics).
    pub fn observed(self, observer: Arc<dyn crate::law::CallObserver>) -> Self {
        self.map_law(|law| law.with_observer(observer))
    }

    /// The drainer over this queue, dispatching search and detail jobs to the same code
    /// the SQS handlers run, alerting through `alerts`.
    pub async fn drain(
        &self,
        alerts: &dyn crate::alert::AlertSink,
        deadline: crate::deadline::Deadline,
        max_passes: Option<u32>,
    ) -> Result<crate::drainer::DrainReport, crate::redis_conn::RedisFailure> {
        self.drain_with(alerts, deadline, max_passes, Default::default())
            .await
    }

    /// [`Deps::drain`] with the local runtime's hooks: each pass shown as it ends, and a
    /// stop signal.
    pub async fn drain_with(
        &self,
        alerts: &dyn crate::alert::AlertSink,
        deadline: crate::deadline::Deadline,
        max_passes: Option<u32>,
        hooks: crate::drainer::DrainHooks<'_>,
    ) -> Result<crate::drainer::DrainReport, crate::redis_conn::RedisFailure> {
        self.run_drainer(alerts, deadline, max_passes, true, hooks).await
    }

    /// Works off due retry-queue entries while this client gets gate slots within its own
    /// wait bound: what an SQS handler does after its batch, so that work parked by the
    /// environments that found the gate busy goes on at once instead of waiting for the
    /// scheduled drainer. Takes the single-runner lock (another runner means nothing to
    /// do); never sleeps for work; leaves the alerts to the scheduled drainer.
    pub async fn drain_inline(
        &self,
        deadline: crate::deadline::Deadline,
    ) -> Result<crate::drainer::DrainReport, crate::redis_conn::RedisFailure> {
        self.run_drainer(
            &crate::alert::LogAlerts,
            deadline,
            None,
            false,
            Default::default(),
        )
        .await
    }

    /// A drainer over this queue under the single-runner lock. `scheduled`: it sleeps for
    /// entries falling due before its next pass and sends the dead-letter alerts.
    async fn run_drainer(
        &self,
        alerts: &dyn crate::alert::AlertSink,
        deadline: crate::deadline::Deadline,
        max_passes: Option<u32>,
        scheduled: bool,
        hooks: crate::drainer::DrainHooks<'_>,
    ) -> Result<crate::drainer::DrainReport, crate::redis_conn::RedisFailure> {
        // Under Lambda, SIGTERM stops the run (unless the caller brought a stop of its own),
        // and the shutdown waits for it while it runs.
        let _busy = self.shutdown.as_ref().map(|s| s.busy());
        let shutdown = self.shutdown.as_ref().filter(|_| hooks.stop.is_none());
        if shutdown.is_some_and(|s| s.stopping()) {
            // Shutting down: no run starts.
            return Ok(crate::drainer::DrainReport::Ran { passes: Vec::new() });
        }
        let hooks = crate::drainer::DrainHooks {
            on_pass: hooks.on_pass,
            stop: hooks.stop.or(shutdown.map(|s| s.receiver())),
            cut_after: hooks
                .cut_after
                .or(shutdown.map(|_| crate::policy::SHUTDOWN_JOB_GRACE)),
        };
        let lock = crate::lock::RunnerLock::new(self.queue.connection().clone(), self.ns.drainer_lock());
        let handler = JobsHandler(self);
        let drainer = crate::drainer::Drainer {
            queue: &self.queue,
            lock: &lock,
            handler: &handler,
            alerts,
            env: &self.cfg.app_env,
            cfg: crate::drainer::DrainerConfig {
                interval: self.cfg.drain_interval,
                max_attempts: self.cfg.retry_max_attempts,
                // The gate's pace: reservations are that far apart.
                time_per_job: self.cfg.gate.interval + self.cfg.gate.tolerance,
                max_passes,
                linger: scheduled,
                send_alerts: scheduled,
            },
            hooks,
        };
        drainer.run(deadline).await
    }

    /// The alert target the configuration names: Slack, or the log.
    pub async fn alerts(
        &self,
        sdk: &aws_config::SdkConfig,
    ) -> Result<Box<dyn crate::alert::AlertSink>, StartupError> {
        Ok(match &self.cfg.slack_webhook {
            Some(source) => {
                let url = crate::secrets::resolve_slack(source, sdk).await?;
                Box::new(crate::alert::SlackWebhook::new(
                    url,
                    Some(self.law.key().clone()),
                )?)
            }
            None => Box::new(crate::alert::LogAlerts),
        })
    }
}

/// Routes drainer jobs to [`jobs::run_job`].
struct JobsHandler<'a>(&'a Deps);

impl crate::drainer::JobHandler for JobsHandler<'_> {
    fn handle<'b>(
        &'b self,
        job: &'b crate::queue::Job,
        deadline: crate::deadline::Deadline,
    ) -> crate::law::BoxFuture<'b, crate::drainer::Outcome> {
        Box::pin(jobs::run_job(self.0, job, deadline))
    }

    fn buried<'b>(&'b self, job: &'b crate::queue::Job) -> crate::law::BoxFuture<'b, ()> {
        Box::pin(jobs::job_buried(self.0, job))
    }

    fn after_pass<'b>(
        &'b self,
        alerts: Option<&'b dyn crate::alert::AlertSink>,
        deadline: crate::deadline::Deadline,
    ) -> crate::law::BoxFuture<'b, ()> {
        Box::pin(jobs::runs_owed(self.0, alerts, deadline))
    }
}
