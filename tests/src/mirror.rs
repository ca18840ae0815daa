//! A whole mirror on real parts, driven by hand: the look-alike (its rate rule off, its
//! "today" settable), Redis, SQS and S3 on moto (or a folder), and the functions' handlers
//! fed the queues' messages as Lambda's event source mapping would, with duplicates on
//! demand. Tests of what the mirror stores, skips and records build on it.
//!
//! On moto each function acts under its own role: its AWS calls are signed as
//! `SearchFunction`, `DetailFunction` or `DrainerFunction` and refused unless the
//! template grants them (see [`crate::stack`]); the schedules' messages are sent as their
//! role, and the rig's own set-up and reading back as the harness.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use aws_lambda_events::event::sqs::SqsEvent;
use lawsync::alert::{AlertError, AlertSink, DeadLetterAlert};
use lawsync::app::Deps;
use lawsync::app::outbox::SqsOutbox;
use lawsync::app::schedule::{Firing, ScheduleKind};
use lawsync::app::sqs::{MessageKind, handle_batch};
use lawsync::config::Config;
use lawsync::documents::{DocumentStore, LocalDir, S3Documents};
use lawsync::law::{BoxFuture, SearchRequest};
use lawsync::mirror::runs::{RunAlert, RunId, RunPlan, RunStatus};
use lawsync::queue::RetryQueue;
use lawsync::{Deadline, Gate, LawClient, Namespace, Secret};
use serde_json::json;

use crate::lookalike::{Arrival, Lookalike, LookalikeConfig};
use crate::servers::{Topology, moto_sdk, unique_env};
use crate::stack::{Role, Stack, sdk_as};

/// Where the rig keeps documents.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Store {
    /// S3 on moto.
    Bucket,
    /// A temporary folder.
    Folder,
}

/// Alerts kept in memory.
#[derive(Debug, Default)]
pub struct KeptAlerts {
    pub dead: Mutex<Vec<DeadLetterAlert>>,
    pub runs: Mutex<Vec<RunAlert>>,
    /// The key-health circuit's openings.
    pub keys: Mutex<Vec<lawsync::key_health::OpenCircuit>>,
}

impl AlertSink for KeptAlerts {
    fn dead_lettered<'a>(
        &'a self,
        _env: &'a str,
        alerts: &'a [DeadLetterAlert],
    ) -> BoxFuture<'a, Result<(), AlertError>> {
        self.dead.lock().expect("alerts").extend_from_slice(alerts);
        Box::pin(std::future::ready(Ok(())))
    }

    fn runs_incomplete<'a>(
        &'a self,
        _env: &'a str,
        runs: &'a [RunAlert],
    ) -> BoxFuture<'a, Result<(), AlertError>> {
        self.runs.lock().expect("alerts").extend_from_slice(runs);
        Box::pin(std::future::ready(Ok(())))
    }

    fn key_refused<'a>(
        &'a self,
        _env: &'a str,
        circuit: &'a lawsync::key_health::OpenCircuit,
    ) -> BoxFuture<'a, Result<(), AlertError>> {
        self.keys.lock().expect("alerts").push(circuit.clone());
        Box::pin(std::future::ready(Ok(())))
    }
}

/// Where the rig's queues are.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Queues {
    /// SQS on moto.
    Sqs,
    /// In memory: the same bodies, handed over in order, without moto's latency (tens of
    /// ms a request on a shared server), for tests that move thousands of messages.
    Memory,
}

/// Both queues in memory, as the functions' outbox.
#[derive(Debug, Default)]
pub struct MemoryQueues {
    search: Mutex<std::collections::VecDeque<String>>,
    detail: Mutex<std::collections::VecDeque<String>>,
}

impl MemoryQueues {
    fn queue(&self, name: lawsync::app::outbox::QueueName) -> &Mutex<std::collections::VecDeque<String>> {
        match name {
            lawsync::app::outbox::QueueName::Search => &self.search,
            lawsync::app::outbox::QueueName::Detail => &self.detail,
        }
    }
}

impl lawsync::app::outbox::Outbox for MemoryQueues {
    fn send<'a>(
        &'a self,
        queue: lawsync::app::outbox::QueueName,
        bodies: &'a [String],
    ) -> BoxFuture<'a, Result<Vec<usize>, lawsync::app::outbox::OutboxError>> {
        self.queue(queue)
            .lock()
            .expect("queue")
            .extend(bodies.iter().cloned());
        Box::pin(std::future::ready(Ok(Vec::new())))
    }
}

/// The rig.
#[allow(missing_debug_implementations)] // holds the look-alike and the handlers' Deps
pub struct MirrorRig {
    pub lookalike: Lookalike,
    /// The search function's dependencies (Redis state is the same for all three).
    pub deps: Deps,
    /// The detail function's.
    pub detail_deps: Deps,
    /// The drainer's.
    pub drainer_deps: Deps,
    /// Where the rig's queues and bucket are, named as the template names them.
    pub stack: Stack,
    pub ns: Namespace,
    pub env: String,
    pub sqs: aws_sdk_sqs::Client,
    pub search_url: String,
    pub detail_url: String,
    pub docs: Arc<dyn DocumentStore>,
    pub s3: Option<(aws_sdk_s3::Client, String)>,
    pub folder: Option<std::path::PathBuf>,
    pub alerts: Arc<KeptAlerts>,
    pub oc: String,
    /// Every message body handled twice (at-least-once delivery).
    pub duplicate: bool,
    /// The queues, when they are in memory.
    pub memory: Option<Arc<MemoryQueues>>,
}

impl std::fmt::Debug for MirrorRig {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("MirrorRig")
            .field("env", &self.env)
            .field("search_url", &self.search_url)
            .field("detail_url", &self.detail_url)
            .field("folder", &self.folder)
            .field("duplicate", &self.duplicate)
            .finish_non_exhaustive()
    }
}

/// How a rig is set up: [`RigSetup::new`] is what [`MirrorRig::start_with`] uses; a
/// benchmark changes the rule, the world, the latency and the configuration.
#[derive(Debug, Clone)]
pub struct RigSetup {
    pub store: Store,
    pub queues: Queues,
    pub seed: u64,
    pub today: Option<String>,
    /// The look-alike's rate rule (`None`: off, as in the tests).
    pub rule: Option<Duration>,
    /// The look-alike's world (see [`crate::lookalike::World`]); `None`: the seed's corpus.
    pub world: Option<Arc<crate::lookalike::World>>,
    /// The look-alike's latency drawn per reply, `lo..=hi`.
    pub latency_spread: Option<(Duration, Duration)>,
    /// Configuration variables set over the rig's own (`LAW_API_REQUEST_INTERVAL_MS`,
    /// `HANDLERS_DRAIN`, ...).
    pub env: Vec<(&'static str, String)>,
    /// The retry queue's backoff.
    pub backoff: lawsync::queue::Backoff,
    /// The gate, to the microsecond (the variables take milliseconds); the handlers then
    /// wait for a slot as long as the policy's default for it.
    pub gate: Option<lawsync::config::GateConfig>,
    /// How long the cluster holds off after law.go.kr refuses the key (the policy's five
    /// minutes when `None`).
    pub key_probe: Option<Duration>,
    /// The look-alike's registered caller addresses (see
    /// [`LookalikeConfig::registered`]).
    pub registered: Option<Vec<std::net::IpAddr>>,
}

impl RigSetup {
    /// The tests' rig: no rule, the seed's corpus, retries due in tenths of a second
    /// rather than the production 10 s.
    pub fn new(store: Store, queues: Queues, seed: u64, today: Option<&str>) -> Self {
        Self {
            store,
            queues,
            seed,
            today: today.map(str::to_owned),
            rule: None,
            world: None,
            latency_spread: None,
            env: Vec::new(),
            backoff: lawsync::queue::Backoff {
                base: Duration::from_millis(100),
                cap: Duration::from_millis(400),
            },
            gate: None,
            key_probe: None,
            registered: None,
        }
    }
}

/// What a pump did.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct Pumped {
    pub search_messages: u32,
    pub detail_messages: u32,
}

impl MirrorRig {
    /// A rig over a look-alike of `seed`, whose today is `today`.
    pub async fn start(store: Store, seed: u64, today: Option<&str>) -> Self {
        Self::start_with(store, Queues::Sqs, seed, today).await
    }

    /// [`MirrorRig::start`] with the queues where `queues` says.
    pub async fn start_with(store: Store, queues: Queues, seed: u64, today: Option<&str>) -> Self {
        Self::start_setup(RigSetup::new(store, queues, seed, today)).await
    }

    /// A rig as `setup` says.
    pub async fn start_setup(setup: RigSetup) -> Self {
        let RigSetup {
            store,
            queues,
            seed,
            today,
            rule,
            world,
            latency_spread,
            env: overrides,
            backoff,
            gate,
            key_probe,
            registered,
        } = setup;
        let oc = crate::servers::unique_oc("oc-MIRROR");
        let mut cfg = LookalikeConfig::new(&oc);
        cfg.interval = rule;
        cfg.seed = seed;
        cfg.today = today;
        cfg.world = world;
        cfg.latency_spread = latency_spread;
        cfg.registered = registered;
        let lookalike = Lookalike::start(cfg).await.expect("look-alike");
        let env = unique_env("mir");
        let mut vars = vec![
            ("LAW_API_OC", oc.clone()),
            ("LAW_API_BASE_URL", lookalike.base_url.clone()),
            ("LAW_API_REQUEST_INTERVAL_MS", "2".to_owned()),
            // A failure is parked at once, not retried in the call after seconds of sleep.
            ("LAW_API_MAX_ATTEMPTS", "1".to_owned()),
            ("DRAIN_INTERVAL_MS", "100".to_owned()),
            // Handlers wait for their slot rather than park on a 2 ms interval's noise, so
            // what is parked is what the look-alike failed.
            ("LAW_API_HANDLER_MAX_WAIT_MS", "2000".to_owned()),
            // Parked work waits for the drainer, so a test sees it parked.
            ("HANDLERS_DRAIN", "false".to_owned()),
            ("APP_ENV", env.clone()),
        ];
        for (name, value) in overrides {
            vars.retain(|(n, _)| *n != name);
            vars.push((name, value));
        }
        let mut cfg = Config::from_lookup(|k| vars.iter().find(|(n, _)| *n == k).map(|(_, v)| v.clone()))
            .expect("config");
        if let Some(g) = gate {
            cfg.gate = g;
            cfg.handler_max_wait = lawsync::policy::default_handler_max_wait(g.interval, g.tolerance);
        }
        let sdk = moto_sdk().await;
        let sqs = aws_sdk_sqs::Client::new(&sdk);
        let stack = Stack::new(&env);
        let memory = (queues == Queues::Memory).then(|| Arc::new(MemoryQueues::default()));
        let [search_url, detail_url] = match memory {
            Some(_) => ["memory:search".to_owned(), "memory:detail".to_owned()],
            None => stack.create_queues(&sqs).await.expect("queues"),
        };
        let ns = Namespace::new(&env, "law-go-kr").expect("ns");
        let conn = Topology::Standalone.connect().await;
        let gate = Arc::new(Gate::new(conn.clone(), &ns, cfg.gate));
        let mut law = LawClient::new(&cfg.law, Secret::new(&oc), gate).expect("client");
        if let Some(d) = key_probe {
            law = law.with_key_probe_interval(d);
        }
        let (docs, s3, folder): (Arc<dyn DocumentStore>, _, _) = match store {
            Store::Folder => {
                let dir = std::env::temp_dir().join(&env);
                (Arc::new(LocalDir::new(dir.clone())), None, Some(dir))
            }
            Store::Bucket => {
                let bucket = stack.create_bucket(false).await.expect("create bucket");
                let s3 = S3Documents::new(&sdk, bucket.clone());
                let client = s3.client().clone();
                (Arc::new(s3), Some((client, bucket)), None)
            }
        };
        let queue = RetryQueue::new(conn, &ns)
            .with_secret(Secret::new(&oc))
            .with_backoff(backoff);
        // Each function's store and outbox sign as its role; in a folder and in memory
        // there is nothing to sign.
        let [deps, detail_deps, drainer_deps] = crate::stack::functions_deps(
            &cfg,
            &law,
            &queue,
            &ns,
            |role_sdk| match &s3 {
                Some((_, bucket)) => Arc::new(S3Documents::new(role_sdk, bucket.clone())),
                None => docs.clone(),
            },
            |role_sdk| match &memory {
                Some(m) => m.clone(),
                None => Arc::new(SqsOutbox::new(
                    role_sdk,
                    Some(search_url.clone()),
                    Some(detail_url.clone()),
                )),
            },
        )
        .await;
        Self {
            lookalike,
            deps,
            detail_deps,
            drainer_deps,
            stack,
            ns,
            env,
            sqs,
            search_url,
            detail_url,
            docs,
            s3,
            folder,
            alerts: Arc::new(KeptAlerts::default()),
            oc,
            duplicate: false,
            memory,
        }
    }

    /// Starts a sync run of `req` as `lawsync sync` does: a fresh run id, opened, and its
    /// first page sent.
    pub async fn sync(&self, mut req: SearchRequest) -> RunId {
        let run = RunId::fresh("sync", lawsync::clock::now_millis());
        req.run = Some(run.clone());
        let plan = RunPlan {
            kind: "sync".into(),
            windows: vec![req.window_name()],
            query: req.query.clone(),
            refresh: req.refresh,
        };
        self.deps
            .runs
            .open(&run, &plan, 0, lawsync::clock::now_millis())
            .await
            .expect("open run");
        self.send(&self.search_url, &serde_json::to_string(&req).expect("json"))
            .await;
        run
    }

    /// Sends a schedule's firing at `at` (RFC 3339) to the search queue, as EventBridge
    /// Scheduler would.
    pub async fn fire(&self, schedule: ScheduleKind, at: &str) -> RunId {
        let firing = Firing {
            schedule,
            at: at.to_owned(),
        };
        let body = serde_json::to_string(&firing).expect("json");
        match &self.memory {
            Some(_) => self.send(&self.search_url, &body).await,
            None => {
                aws_sdk_sqs::Client::new(&sdk_as(Role::SyncSchedule).await)
                    .send_message()
                    .queue_url(&self.search_url)
                    .message_body(body)
                    .send()
                    .await
                    .expect("the schedules' role sends to the search queue");
            }
        }
        firing.plan().expect("plan").run
    }

    pub async fn send(&self, url: &str, body: &str) {
        if let Some(m) = &self.memory {
            let name = self.queue_name(url);
            m.queue(name).lock().expect("queue").push_back(body.to_owned());
            return;
        }
        self.sqs
            .send_message()
            .queue_url(url)
            .message_body(body)
            .send()
            .await
            .expect("send");
    }

    fn queue_name(&self, url: &str) -> lawsync::app::outbox::QueueName {
        if url == self.search_url {
            lawsync::app::outbox::QueueName::Search
        } else {
            lawsync::app::outbox::QueueName::Detail
        }
    }

    /// Up to 10 messages of a queue, taken off it (received and deleted), as
    /// `(message id, body)`: what one consumer of the event source mapping gets.
    pub async fn take(&self, kind: MessageKind) -> Vec<(String, String)> {
        let url = match kind {
            MessageKind::Search => &self.search_url,
            MessageKind::Detail => &self.detail_url,
        };
        self.receive(url).await
    }

    /// Messages waiting in the in-memory queues, (search, detail); `None` on SQS.
    pub fn memory_depths(&self) -> Option<(usize, usize)> {
        let m = self.memory.as_ref()?;
        let len = |q: &Mutex<std::collections::VecDeque<String>>| q.lock().expect("queue").len();
        Some((len(&m.search), len(&m.detail)))
    }

    async fn receive(&self, url: &str) -> Vec<(String, String)> {
        if let Some(m) = &self.memory {
            let mut q = m.queue(self.queue_name(url)).lock().expect("queue");
            let n = q.len().min(10);
            return q
                .drain(..n)
                .map(|body| (format!("m-{}", rand_id()), body))
                .collect();
        }
        let out = self
            .sqs
            .receive_message()
            .queue_url(url)
            .max_number_of_messages(10)
            .send()
            .await
            .expect("receive");
        let mut got = Vec::new();
        let mut delete = self.sqs.delete_message_batch().queue_url(url);
        for (i, m) in out.messages().iter().enumerate() {
            got.push((
                m.message_id().expect("id").to_owned(),
                m.body().expect("body").to_owned(),
            ));
            delete = delete.entries(
                aws_sdk_sqs::types::DeleteMessageBatchRequestEntry::builder()
                    .id(i.to_string())
                    .receipt_handle(m.receipt_handle().expect("handle"))
                    .build()
                    .expect("entry"),
            );
        }
        // One call for the batch: moto is the rig's bottleneck, and serves one at a time.
        if !got.is_empty() {
            let deleted = delete.send().await.expect("delete");
            assert!(deleted.failed().is_empty(), "not deleted: {:?}", deleted.failed());
        }
        got
    }

    /// Hands both queues' messages to the functions until both are empty (each batch
    /// twice with `duplicate`), then runs the drainer while the retry queue has due work.
    pub async fn pump(&self) -> Pumped {
        let mut pumped = Pumped::default();
        for _ in 0..10_000 {
            let mut any = false;
            for (url, kind) in [
                (&self.search_url, MessageKind::Search),
                (&self.detail_url, MessageKind::Detail),
            ] {
                let got = self.receive(url).await;
                if got.is_empty() {
                    continue;
                }
                any = true;
                match kind {
                    MessageKind::Search => pumped.search_messages += got.len() as u32,
                    MessageKind::Detail => pumped.detail_messages += got.len() as u32,
                }
                let rounds = if self.duplicate { 2 } else { 1 };
                for _ in 0..rounds {
                    self.handle(kind, &got).await;
                }
            }
            if !any {
                return pumped;
            }
        }
        panic!("the queues never emptied");
    }

    /// One batch of `kind`'s queue handed to its function; false when the queue was empty.
    pub async fn pump_queue(&self, kind: MessageKind) -> bool {
        let got = self.take(kind).await;
        if got.is_empty() {
            return false;
        }
        self.handle(kind, &got).await;
        true
    }

    /// One batch from each queue (search first), as the functions would take them; false
    /// when both were empty.
    pub async fn pump_once(&self) -> bool {
        let mut any = false;
        for (url, kind) in [
            (&self.search_url, MessageKind::Search),
            (&self.detail_url, MessageKind::Detail),
        ] {
            let got = self.receive(url).await;
            if got.is_empty() {
                continue;
            }
            any = true;
            self.handle(kind, &got).await;
        }
        any
    }

    /// The dependencies of the function `role` names.
    pub fn deps_of(&self, role: Role) -> &Deps {
        match role {
            Role::Search | Role::SyncSchedule => &self.deps,
            Role::Detail => &self.detail_deps,
            Role::Drainer => &self.drainer_deps,
        }
    }

    /// Hands one batch to its function, as Lambda would; no message may go back to SQS.
    async fn handle(&self, kind: MessageKind, got: &[(String, String)]) {
        let (response, _) = handle_batch(
            self.deps_of(Role::handling(kind)),
            kind,
            event(got),
            Deadline::after(Duration::from_secs(60)),
        )
        .await;
        assert!(
            response.batch_item_failures.is_empty(),
            "a message went back to SQS: {:?}",
            response.batch_item_failures.len()
        );
    }

    /// Loses every message waiting in the in-memory queues (a crash of everything that
    /// held them); how many were lost.
    pub fn lose_queued(&self) -> usize {
        let m = self.memory.as_ref().expect("only in-memory queues can be lost");
        let mut n = 0;
        for q in [&m.search, &m.detail] {
            let mut q = q.lock().expect("queue");
            n += q.len();
            q.clear();
        }
        n
    }

    /// One scheduled drainer run of at most `passes` passes, alerts kept.
    pub async fn drain(&self, passes: u32) {
        self.drainer_deps
            .drain(
                self.alerts.as_ref(),
                Deadline::after(Duration::from_secs(60)),
                Some(passes),
            )
            .await
            .expect("drain");
    }

    pub async fn status(&self, run: &RunId) -> RunStatus {
        self.deps
            .runs
            .status(run)
            .await
            .expect("status")
            .expect("run in Redis")
    }

    /// The look-alike's arrivals from index `since` on, as (search, detail) counts.
    pub fn calls_since(&self, since: usize) -> (usize, usize) {
        let a: Vec<Arrival> = self.lookalike.arrivals();
        let later = &a[since.min(a.len())..];
        (
            later.iter().filter(|x| x.endpoint == "search").count(),
            later.iter().filter(|x| x.endpoint == "detail").count(),
        )
    }

    pub fn arrivals_len(&self) -> usize {
        self.lookalike.arrivals().len()
    }

    /// Every key under `prefix` in the store, sorted.
    pub async fn keys(&self, prefix: &str) -> Vec<String> {
        let mut out = Vec::new();
        if let Some((s3, bucket)) = &self.s3 {
            let mut token = None;
            loop {
                let page = s3
                    .list_objects_v2()
                    .bucket(bucket)
                    .prefix(prefix)
                    .set_continuation_token(token)
                    .send()
                    .await
                    .expect("list");
                out.extend(page.contents().iter().filter_map(|o| o.key().map(str::to_owned)));
                token = page.next_continuation_token().map(str::to_owned);
                if token.is_none() {
                    break;
                }
            }
        } else if let Some(root) = &self.folder {
            fn walk(dir: &std::path::Path, root: &std::path::Path, out: &mut Vec<String>) {
                let Ok(entries) = std::fs::read_dir(dir) else {
                    return;
                };
                for e in entries.flatten() {
                    let p = e.path();
                    if p.is_dir() {
                        walk(&p, root, out);
                    } else if let Ok(rel) = p.strip_prefix(root) {
                        out.push(rel.to_string_lossy().replace('\\', "/"));
                    }
                }
            }
            walk(root, root, &mut out);
            out.retain(|k| k.starts_with(prefix) && !k.contains(".tmp-"));
        }
        out.sort();
        out
    }

    /// The object at `key`, as JSON.
    pub async fn json(&self, key: &str) -> serde_json::Value {
        let body = self.docs.get(key).await.expect("get").expect("object exists");
        serde_json::from_slice(&body).expect("json object")
    }

    /// The object at `key`, as text.
    pub async fn text(&self, key: &str) -> String {
        let body = self.docs.get(key).await.expect("get").expect("object exists");
        String::from_utf8(body).expect("utf-8")
    }

    /// Deletes every Redis key of this rig's namespace: Redis lost, the store kept.
    pub async fn flush_redis(&self) {
        let mut conn = Topology::Standalone.connect().await;
        let pattern = format!("{}*", self.ns.tag().replace('{', "\\{").replace('}', "\\}"));
        let keys: Vec<String> = redis::cmd("KEYS")
            .arg(&pattern)
            .query_async(&mut conn)
            .await
            .expect("keys");
        if !keys.is_empty() {
            let _: () = redis::cmd("DEL")
                .arg(&keys)
                .query_async(&mut conn)
                .await
                .expect("del");
        }
    }
}

/// A message id for a body handed over from memory.
fn rand_id() -> u64 {
    use std::sync::atomic::{AtomicU64, Ordering};
    static NEXT: AtomicU64 = AtomicU64::new(0);
    NEXT.fetch_add(1, Ordering::Relaxed)
}

/// An SQS event of `(message id, body)` records.
pub fn event(records: &[(String, String)]) -> SqsEvent {
    let records: Vec<_> = records
        .iter()
        .map(|(id, body)| json!({ "messageId": id, "body": body, "eventSource": "aws:sqs" }))
        .collect();
    serde_json::from_value(json!({ "Records": records })).expect("event")
}

/// The JSON Schemas of `docs/schema/`, compiled: the consumer contract, checked against
/// what the mirror really stored.
#[allow(missing_debug_implementations)] // boon's compiled schemas print nothing useful
pub struct Schemas {
    schemas: boon::Schemas,
    by_name: Vec<(&'static str, boon::SchemaIndex)>,
}

impl std::fmt::Debug for Schemas {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let names: Vec<&str> = self.by_name.iter().map(|(n, _)| *n).collect();
        f.debug_struct("Schemas")
            .field("names", &names)
            .finish_non_exhaustive()
    }
}

/// Where the schemas are published (their `$id`s).
const SCHEMA_BASE: &str = "https://lawsync.invalid/schema/1/";
/// The schema files, by name.
pub const SCHEMA_NAMES: [&str; 5] = ["precedent", "missing", "change", "index", "run"];

impl Schemas {
    /// Compiles every schema file; panics with the reason on a broken one.
    pub fn load() -> Self {
        let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../docs/schema");
        let mut compiler = boon::Compiler::new();
        compiler.set_default_draft(boon::Draft::V2020_12);
        compiler.enable_format_assertions();
        for name in SCHEMA_NAMES {
            let path = dir.join(format!("{name}.schema.json"));
            let text = std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
            let value: serde_json::Value =
                serde_json::from_str(&text).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
            assert_eq!(
                value["$id"].as_str(),
                Some(format!("{SCHEMA_BASE}{name}.schema.json").as_str()),
                "{name}: $id"
            );
            compiler
                .add_resource(&format!("{SCHEMA_BASE}{name}.schema.json"), value)
                .unwrap_or_else(|e| panic!("{name}: {e}"));
        }
        let mut schemas = boon::Schemas::new();
        let by_name = SCHEMA_NAMES
            .iter()
            .map(|name| {
                let idx = compiler
                    .compile(&format!("{SCHEMA_BASE}{name}.schema.json"), &mut schemas)
                    .unwrap_or_else(|e| panic!("{name}: {e}"));
                (*name, idx)
            })
            .collect();
        Self { schemas, by_name }
    }

    /// Validates `value` against the schema `name`; the error lists what is wrong.
    pub fn validate(&self, name: &str, value: &serde_json::Value) -> Result<(), String> {
        let idx = self
            .by_name
            .iter()
            .find(|(n, _)| *n == name)
            .map(|(_, i)| *i)
            .unwrap_or_else(|| panic!("no schema {name}"));
        self.schemas.validate(value, idx).map_err(|e| format!("{e:#}"))
    }

    /// The schema an object of the store is under, by its key.
    pub fn for_key(key: &str) -> Option<&'static str> {
        Some(match key.split('/').next()? {
            "prec" => "precedent",
            "missing" => "missing",
            "changes" => "change",
            "index" => "index",
            "runs" => "run",
            _ => return None,
        })
    }
}
