//! The `lawsync` command line: the functions' handlers, the queue and the gate, from a shell.
//!
//! Configuration comes from the same environment variables as the functions. Output is
//! for people by default and JSON with `--json`; `invoke search|detail` always prints the
//! Lambda's own response (the SQS batch response), as the functions would return it.
//!
//! A failure is a [`CliError`]: its text is safe to print (never the key), and its
//! [`ExitStatus`] says what kind of failure it is, for scripts.
#![allow(clippy::print_stdout)] // a command line: stdout is its product

use std::io::Read;
use std::time::Duration;

use clap::{Parser, Subcommand};

use crate::app::outbox::OutboxError;
use crate::app::sqs::{MessageKind, handle_batch};
use crate::app::{Deps, StartupError};
use crate::config::{Config, ConfigError};
use crate::deadline::Deadline;
use crate::gate::GateError;
use crate::keys::Namespace;
use crate::law::{LawError, SearchRequest, UPSTREAM};
use crate::local::LocalError;
use crate::queue::RetryQueue;
use crate::redis_conn::{RedisConn, RedisFailure};
use crate::secrets::SecretError;

/// How `lawsync` ends when a command fails; 0 is success. Clap's own usage errors exit 2
/// as well, and `--help` and `--version` exit 0.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[repr(u8)]
pub enum ExitStatus {
    /// The command ran and failed: SQS refused, Redis answered with an error or holds
    /// corrupt or newer state, printing failed, ...
    Failure = 1,
    /// The command line: a flag value clap cannot check (dates, ranges, a missing
    /// `--id`/`--all`), or `local` options that cannot run.
    Usage = 2,
    /// The configuration: an environment variable missing or invalid, or a secret it
    /// names that cannot be fetched or used.
    Config = 3,
    /// A dependency could not be reached: Redis refused the connection or timed out.
    Unavailable = 4,
    /// The event given to `invoke` cannot be read, or is not what the function takes.
    Input = 5,
    /// `probe` ran and found law.go.kr behaving otherwise than the mirror assumes.
    Differs = 6,
}

impl ExitStatus {
    /// The process exit code.
    pub fn code(self) -> u8 {
        self as u8
    }
}

impl From<ExitStatus> for std::process::ExitCode {
    fn from(s: ExitStatus) -> Self {
        std::process::ExitCode::from(s.code())
    }
}

/// The exit statuses, for `lawsync --help`.
const EXIT_STATUS_HELP: &str = "\
Exit status:
  0  success
  1  the command failed (SQS refused, Redis answered with an error or holds corrupt state)
  2  usage: a bad flag or flag value
  3  configuration: an environment variable (or the secret it names) missing or invalid
  4  unavailable: Redis could not be reached
  5  input: the event cannot be read or is not what the function takes
  6  probe: an assumption of the mirror differs (see the report)";

/// Why a command failed. The texts are sanitized, safe to print: none carries the key.
#[derive(Debug, thiserror::Error)]
pub enum CliError {
    /// `queue redrive` without `--id` or `--all`.
    #[error("say which: --id ID, or --all")]
    RedriveWhich,
    /// `gate cooldown --seconds` out of range.
    #[error("lawsync gate cooldown: --seconds must be 1..={cap} (a day at most)")]
    CooldownRange { cap: u64 },
    /// `sync`'s window cannot be requested (a bad date, `--from` after `--to`).
    #[error(transparent)]
    Window(LawError),
    /// `sync` without a window.
    #[error("lawsync sync: say which: --from YYYYMMDD --to YYYYMMDD, or --all (or `sync status`)")]
    SyncWhich,
    /// `sync status RUN` with something that is not a run id.
    #[error("lawsync sync status: {0}")]
    RunId(crate::mirror::runs::BadRunId),
    /// `sync status RUN` for a run neither Redis nor the store knows.
    #[error("lawsync sync status: no run {0} in Redis or under runs/ in the store")]
    NoSuchRun(crate::mirror::runs::RunId),
    /// The run's record could not be read.
    #[error("lawsync sync status: the run record could not be read: {0}")]
    RunRecord(String),
    /// A run could not be counted or read.
    #[error(transparent)]
    Run(#[from] crate::mirror::runs::RunError),
    /// The backfill could not be planned or read.
    #[error("lawsync backfill: {0}")]
    Backfill(crate::app::backfill::BackfillError),
    /// `lawsync local` could not run.
    #[error(transparent)]
    Local(#[from] LocalError),
    /// `local --events FILE` cannot be opened.
    #[error("--events {path}: {kind}")]
    EventsFile { path: String, kind: std::io::ErrorKind },
    /// `gate` without a key: the gate belongs to the key.
    #[error("lawsync gate: the gate belongs to the API key; set LAW_API_OC or LAW_API_OC_SECRET_ARN")]
    NoKey,
    #[error(transparent)]
    Config(#[from] ConfigError),
    #[error(transparent)]
    Secret(#[from] SecretError),
    /// The functions' dependencies could not be built.
    #[error(transparent)]
    Startup(#[from] StartupError),
    #[error(transparent)]
    Store(#[from] RedisFailure),
    #[error(transparent)]
    Gate(#[from] GateError),
    #[error(transparent)]
    Outbox(#[from] OutboxError),
    /// SQS answered, without taking the sync request.
    #[error("SQS did not accept the sync request")]
    NotSent,
    #[error(transparent)]
    Event(#[from] EventError),
    /// The output could not be written as JSON.
    #[error("{0}")]
    Output(serde_json::Error),
    /// `probe` could not run, or found assumptions that differ.
    #[error(transparent)]
    Probe(#[from] crate::probe::cli::ProbeCliError),
}

/// An event for `invoke` that cannot be used. Never quotes the event.
#[derive(Debug, thiserror::Error)]
pub enum EventError {
    #[error("reading the event from stdin: {0}")]
    Stdin(std::io::Error),
    #[error("reading the event file: {0}")]
    File(std::io::ErrorKind),
    #[error("the drainer event is not JSON")]
    NotJson,
    #[error("the event is not an SQS event ({category} at line {line} column {column})")]
    NotSqs {
        category: &'static str,
        line: usize,
        column: usize,
    },
}

impl CliError {
    /// What kind of failure this is, as the process's exit status.
    pub fn exit_status(&self) -> ExitStatus {
        match self {
            CliError::RedriveWhich
            | CliError::CooldownRange { .. }
            | CliError::Window(_)
            | CliError::SyncWhich
            | CliError::RunId(_) => ExitStatus::Usage,
            CliError::Run(crate::mirror::runs::RunError::Redis(e)) => store_status(e),
            CliError::Run(_) | CliError::NoSuchRun(_) | CliError::RunRecord(_) => ExitStatus::Failure,
            CliError::Backfill(crate::app::backfill::BackfillError::Request(_)) => ExitStatus::Usage,
            CliError::Backfill(
                crate::app::backfill::BackfillError::Redis(e)
                | crate::app::backfill::BackfillError::Run(crate::mirror::runs::RunError::Redis(e)),
            ) => store_status(e),
            CliError::Backfill(_) => ExitStatus::Failure,
            // Options that cannot run (and, rarely, an environment's thread that would not
            // start: `LocalError` does not tell them apart).
            CliError::Local(LocalError::Options(_)) => ExitStatus::Usage,
            CliError::Local(LocalError::Startup(e)) | CliError::Startup(e) => startup_status(e),
            CliError::NoKey | CliError::Config(_) | CliError::Secret(_) => ExitStatus::Config,
            CliError::Store(e) | CliError::Gate(GateError::Unavailable(e)) => store_status(e),
            CliError::Outbox(OutboxError::NotConfigured(_)) => ExitStatus::Config,
            CliError::Event(_) => ExitStatus::Input,
            CliError::Probe(e) => e.exit_status(),
            CliError::EventsFile { .. }
            | CliError::Gate(_)
            | CliError::Outbox(OutboxError::Sqs(_))
            | CliError::NotSent
            | CliError::Output(_) => ExitStatus::Failure,
        }
    }
}

fn startup_status(e: &StartupError) -> ExitStatus {
    match e {
        StartupError::Redis(e) => store_status(e),
        // The client and the alert sink refuse only what their configuration says.
        StartupError::Config(_)
        | StartupError::Secret(_)
        | StartupError::RedisAuth(_)
        | StartupError::Client(_)
        | StartupError::Alerts(_) => ExitStatus::Config,
    }
}

pub(crate) fn store_status(e: &RedisFailure) -> ExitStatus {
    match e {
        RedisFailure::Unreachable(_) | RedisFailure::Timeout => ExitStatus::Unavailable,
        // It says which setting decides: REDIS_CLUSTER.
        // They name the variable to fix: REDIS_CLUSTER, REDIS_CA_FILE, REDIS_URL's scheme,
        // the credentials.
        RedisFailure::ModeUnknown(_) | RedisFailure::Tls(_) | RedisFailure::Auth(_) => ExitStatus::Config,
        RedisFailure::Server(_)
        | RedisFailure::Protocol(_)
        | RedisFailure::Corrupt(_)
        | RedisFailure::Newer(_)
        | RedisFailure::Invalid(_) => ExitStatus::Failure,
    }
}

#[derive(Debug, Parser)]
#[command(
    name = "lawsync",
    version,
    about = "Mirror law.go.kr precedents: the Lambda handlers, the retry queue and the rate gate from a shell.",
    after_help = EXIT_STATUS_HELP
)]
pub struct Args {
    /// Print JSON instead of text.
    #[arg(long, global = true)]
    pub json: bool,
    #[command(subcommand)]
    pub command: Command,
}

#[derive(Debug, Subcommand)]
pub enum Command {
    /// Run a function's handler on an event, as Lambda would.
    Invoke {
        #[command(subcommand)]
        function: Invoke,
    },
    /// Start a sync run: a date window (or the whole list) to the search queue, under a
    /// new run id; `sync status` shows the runs.
    #[command(args_conflicts_with_subcommands = true)]
    Sync {
        #[command(subcommand)]
        action: Option<SyncAction>,
        #[command(flatten)]
        window: SyncWindow,
    },
    /// Mirror a range of decision dates in month windows (and the undated hits): resumable,
    /// released under a watermark, giving way to daily runs. `sync status` shows it.
    Backfill(BackfillArgs),
    /// Run the functions on this machine as AWS runs them: an SQS event source mapping per
    /// queue with N concurrent environments, and the drainer on its schedule.
    Local(LocalArgs),
    /// Inspect and operate the retry queue.
    Queue {
        #[command(subcommand)]
        action: QueueAction,
    },
    /// Inspect the rate gate, or cool it down by hand.
    Gate {
        #[command(subcommand)]
        action: GateAction,
    },
    /// Check, in a few dozen calls through the gate, what the mirror assumes of law.go.kr
    /// (paging depth, totalCnt, undated hits, spellings, 국세 details): run it before a backfill.
    Probe(crate::probe::cli::ProbeArgs),
}

/// `lawsync sync`'s window.
#[derive(Debug, Clone, Default, clap::Args)]
pub struct SyncWindow {
    /// First decision date, YYYYMMDD.
    #[arg(long)]
    pub from: Option<String>,
    /// Last decision date, YYYYMMDD.
    #[arg(long)]
    pub to: Option<String>,
    /// The whole list instead of a window: the only way to reach precedents without a
    /// decision date (about 1,000 search calls for 100,000 precedents).
    #[arg(long, conflicts_with_all = ["from", "to"])]
    pub all: bool,
    #[arg(long)]
    pub query: Option<String>,
    /// Fetch every precedent listed again, held or not.
    #[arg(long)]
    pub refresh: bool,
}

/// `lawsync backfill`.
#[derive(Debug, Clone, clap::Args)]
pub struct BackfillArgs {
    /// First decision date, YYYYMMDD.
    #[arg(long)]
    pub from: String,
    /// Last decision date, YYYYMMDD.
    #[arg(long)]
    pub to: String,
    /// Search windows already done again (held precedents still cost no call).
    #[arg(long)]
    pub again: bool,
}

#[derive(Debug, Subcommand)]
pub enum SyncAction {
    /// Each run with a progress bar, rate and ETA: the newest runs, or RUN.
    Status {
        /// A run id (as `sync` printed it).
        run: Option<String>,
        /// Runs shown without RUN.
        #[arg(long, default_value_t = 10)]
        limit: usize,
    },
}

/// `lawsync local`.
#[derive(Debug, clap::Args)]
pub struct LocalArgs {
    /// This process's name in the event lines.
    #[arg(long, default_value = "local")]
    pub name: String,
    /// Concurrent environments per function (the mapping's maximum concurrency).
    #[arg(long, default_value_t = 2)]
    pub concurrency: u32,
    /// Messages per batch, 1-10.
    #[arg(long, default_value_t = 10)]
    pub batch_size: i32,
    /// Long-poll wait in seconds, 0-20.
    #[arg(long, default_value_t = 2)]
    pub poll_wait: u64,
    /// Seconds a received message stays invisible; at least --timeout.
    #[arg(long, default_value_t = 90)]
    pub visibility_timeout: u64,
    /// The functions' timeout in seconds: each invocation's deadline.
    #[arg(long, default_value_t = 60)]
    pub timeout: u64,
    /// Seconds between drainer invocations (EventBridge's schedule); 0 runs no drainer.
    #[arg(long, default_value_t = 60)]
    pub drainer_every: u64,
    /// `shared` (the product) or `per-instance`: each environment paces only itself, the
    /// contrast that shows the upstream's 429s. Never for production.
    #[arg(long, value_enum, default_value = "shared")]
    pub gate: GateScopeArg,
    /// Stop once no message has arrived for this many seconds and the retry queue is empty.
    #[arg(long)]
    pub until_idle: Option<u64>,
    /// Append the event lines (JSON) to FILE instead of stdout.
    #[arg(long)]
    pub events: Option<String>,
}

#[derive(Debug, Clone, Copy, clap::ValueEnum)]
pub enum GateScopeArg {
    Shared,
    PerInstance,
}

#[derive(Debug, Subcommand)]
pub enum Invoke {
    /// An SQS event of search messages (FILE, or - for stdin).
    Search {
        #[arg(long)]
        event: String,
    },
    /// An SQS event of detail messages (FILE, or - for stdin).
    Detail {
        #[arg(long)]
        event: String,
    },
    /// One drainer run; the scheduled event is optional and unused.
    Drainer {
        #[arg(long)]
        event: Option<String>,
        /// Passes to run (default 1; the Lambda runs until its deadline).
        #[arg(long, default_value_t = 1)]
        passes: u32,
    },
}

#[derive(Debug, Subcommand)]
pub enum QueueAction {
    /// Depth, due now, in flight, dead, oldest age.
    Stats,
    /// Live entries, oldest first failure first.
    List {
        #[arg(long, default_value_t = 20)]
        limit: usize,
    },
    /// Dead letters, oldest first.
    Dead {
        #[arg(long, default_value_t = 20)]
        limit: usize,
    },
    /// Put dead letters back as fresh entries: one (--id) or the oldest (--all, up to --limit).
    Redrive {
        #[arg(long, conflicts_with = "all")]
        id: Option<String>,
        #[arg(long)]
        all: bool,
        #[arg(long, default_value_t = 1000)]
        limit: usize,
    },
}

#[derive(Debug, Subcommand)]
pub enum GateAction {
    /// Next free slot and any cooldown, on Redis' clock.
    Status,
    /// Cool the whole cluster down for SECONDS (never shortens a longer cooldown).
    Cooldown {
        #[arg(long)]
        seconds: u64,
    },
}

/// Runs one command. Errors are sanitized, safe to print.
pub async fn run(args: Args) -> Result<(), CliError> {
    match args.command {
        Command::Invoke { function } => invoke(function, args.json).await,
        Command::Sync {
            action: Some(SyncAction::Status { run, limit }),
            ..
        } => sync_status(run, limit, args.json).await,
        Command::Sync { action: None, window } => sync(window, args.json).await,
        Command::Backfill(b) => backfill(b, args.json).await,
        Command::Local(local) => run_local(local).await,
        Command::Queue { action } => queue(action, args.json).await,
        Command::Gate { action } => gate(action, args.json).await,
        Command::Probe(probe) => Ok(crate::probe::cli::run(probe, args.json).await?),
    }
}

async fn deps() -> Result<(Deps, aws_config::SdkConfig), CliError> {
    Ok(Deps::from_env().await?)
}

async fn run_local(a: LocalArgs) -> Result<(), CliError> {
    use crate::local::{EventLog, GateScope, LocalOptions};
    let cfg = Config::from_env()?;
    let sdk = crate::aws::sdk_config(&cfg).await;
    let out: Box<dyn std::io::Write + Send> = match &a.events {
        None => Box::new(std::io::stdout()),
        Some(path) => Box::new(
            std::fs::OpenOptions::new()
                .create(true)
                .append(true)
                .open(path)
                .map_err(|e| CliError::EventsFile {
                    path: path.clone(),
                    kind: e.kind(),
                })?,
        ),
    };
    let opts = LocalOptions {
        name: a.name,
        concurrency: a.concurrency,
        batch_size: a.batch_size,
        poll_wait: Duration::from_secs(a.poll_wait),
        visibility_timeout: Duration::from_secs(a.visibility_timeout),
        function_timeout: Duration::from_secs(a.timeout),
        drainer_schedule: (a.drainer_every > 0).then(|| Duration::from_secs(a.drainer_every)),
        gate: match a.gate {
            GateScopeArg::Shared => GateScope::Shared,
            GateScopeArg::PerInstance => GateScope::PerInstance,
        },
        until_idle: a.until_idle.map(Duration::from_secs),
    };
    Ok(crate::local::run(cfg, sdk, opts, EventLog::new(out)).await?)
}

fn read_event(source: &str) -> Result<String, EventError> {
    if source == "-" {
        let mut s = String::new();
        std::io::stdin()
            .read_to_string(&mut s)
            .map_err(EventError::Stdin)?;
        Ok(s)
    } else {
        std::fs::read_to_string(source).map_err(|e| EventError::File(e.kind()))
    }
}

fn print_json(v: &impl serde::Serialize) -> Result<(), CliError> {
    println!("{}", serde_json::to_string_pretty(v).map_err(CliError::Output)?);
    Ok(())
}

async fn invoke(function: Invoke, json: bool) -> Result<(), CliError> {
    let (deps, sdk) = deps().await?;
    match function {
        Invoke::Search { event } => batch(&deps, MessageKind::Search, &event).await,
        Invoke::Detail { event } => batch(&deps, MessageKind::Detail, &event).await,
        Invoke::Drainer { event, passes } => {
            if let Some(e) = event {
                serde_json::from_str::<serde_json::Value>(&read_event(&e)?)
                    .map_err(|_| EventError::NotJson)?;
            }
            let alerts = deps.alerts(&sdk).await?;
            // SIGTERM or Ctrl-C ends the run at the next job: what is not worked goes back
            // unchanged and the lock is released, so no drainer waits out its lease.
            let (stop_tx, stop) = tokio::sync::watch::channel(false);
            let watcher = tokio::spawn(async move {
                let why = crate::local::stop_signal().await;
                tracing::warn!(signal = why, "drainer: stopping at the next job");
                let _ = stop_tx.send(true);
            });
            let hooks = crate::drainer::DrainHooks {
                on_pass: None,
                stop: Some(&stop),
                cut_after: None,
            };
            let report = deps
                .drain_with(&*alerts, Deadline::NONE, Some(passes.max(1)), hooks)
                .await;
            watcher.abort();
            let report = report?;
            if json {
                print_json(&report)
            } else {
                match report {
                    crate::drainer::DrainReport::Busy => {
                        println!("another drainer holds the lock; nothing done")
                    }
                    crate::drainer::DrainReport::Ran { passes } => {
                        for (i, p) in passes.iter().enumerate() {
                            println!(
                                "pass {}: claimed {}, succeeded {}, failed {}, dead-lettered {}, skipped {}",
                                i + 1,
                                p.claimed,
                                p.succeeded,
                                p.failed,
                                p.dead_lettered,
                                p.skipped
                            );
                        }
                    }
                }
                Ok(())
            }
        }
    }
}

async fn batch(deps: &Deps, kind: MessageKind, source: &str) -> Result<(), CliError> {
    let text = read_event(source)?;
    let event = serde_json::from_str(&text).map_err(|e| EventError::NotSqs {
        category: crate::law::model::category(&e),
        line: e.line(),
        column: e.column(),
    })?;
    let (response, summary) = handle_batch(deps, kind, event, Deadline::NONE).await;
    tracing::info!(?summary, "batch done");
    print_json(&response)
}

async fn sync(w: SyncWindow, json: bool) -> Result<(), CliError> {
    if !w.all && (w.from.is_none() || w.to.is_none()) {
        return Err(CliError::SyncWhich);
    }
    let now = crate::clock::now_millis();
    let run = crate::mirror::runs::RunId::fresh("sync", now);
    let req = SearchRequest {
        from: w.from.unwrap_or_default(),
        to: w.to.unwrap_or_default(),
        all: w.all,
        query: w.query,
        run: Some(run.clone()),
        refresh: w.refresh,
        ..Default::default()
    };
    req.params().map_err(CliError::Window)?;
    let (deps, _) = deps().await?;
    let plan = crate::mirror::runs::RunPlan {
        kind: "sync".into(),
        windows: vec![req.window_name()],
        query: req.query.clone(),
        refresh: req.refresh,
    };
    deps.runs.open(&run, &plan, 0, now).await?;
    let body = serde_json::to_string(&req).map_err(CliError::Output)?;
    let failed = deps
        .outbox
        .send(crate::app::outbox::QueueName::Search, std::slice::from_ref(&body))
        .await?;
    if !failed.is_empty() {
        return Err(CliError::NotSent);
    }
    if json {
        print_json(&serde_json::json!({ "run": run, "sent": req }))
    } else {
        println!("run {run}: sent to the search queue: {body}");
        println!("follow it with: lawsync sync status {run}");
        Ok(())
    }
}

async fn backfill(a: BackfillArgs, json: bool) -> Result<(), CliError> {
    use crate::app::backfill::{BackfillError, BackfillRequest};
    let req = BackfillRequest {
        from: a.from,
        to: a.to,
        again: a.again,
    };
    // A bad range is a usage error, said before anything is set up.
    req.windows_as("--from", "--to")
        .map_err(|e| CliError::Backfill(BackfillError::Request(e)))?;
    let (deps, _) = deps().await?;
    let status = crate::app::backfill::start(&deps, &req)
        .await
        .map_err(CliError::Backfill)?;
    if json {
        return print_json(&serde_json::json!({ "backfill": req, "status": status }));
    }
    println!("{}", status.text(crate::clock::now_millis()));
    println!("follow it with: lawsync sync status");
    Ok(())
}

async fn sync_status(run: Option<String>, limit: usize, json: bool) -> Result<(), CliError> {
    use crate::mirror::runs::{RunId, Runs};
    let run = run
        .map(|r| RunId::parse(&r).map_err(CliError::RunId))
        .transpose()?;
    let (cfg, conn, ns) = redis_only().await?;
    let runs_conn = conn.clone();
    let runs = Runs::new(conn, &ns);
    let now = crate::clock::now_millis();
    let statuses = match &run {
        Some(id) => match runs.status(id).await? {
            Some(s) => vec![s],
            None => {
                // Redis no longer counts it: its record, if the store has one.
                let sdk = crate::aws::sdk_config(&cfg).await;
                let docs = crate::app::document_store(&cfg, &sdk);
                let key = format!("{}{id}.json", crate::mirror::layout::RUNS.path);
                let body = docs
                    .get(&key)
                    .await
                    .map_err(|e| CliError::RunRecord(e.to_string()))?
                    .ok_or_else(|| CliError::NoSuchRun(id.clone()))?;
                let record: crate::mirror::runs::RunRecord =
                    serde_json::from_slice(&body).map_err(|e| CliError::RunRecord(e.to_string()))?;
                if json {
                    return print_json(&record);
                }
                println!("{id}: no longer counted in Redis; its record ({key}):");
                println!("{}", String::from_utf8_lossy(&body));
                return Ok(());
            }
        },
        None => runs.list(limit).await?,
    };
    let backfill = if run.is_none() {
        let queue = crate::queue::RetryQueue::new(runs_conn.clone(), &ns);
        crate::app::backfill::status_in(&runs, &queue, &ns)
            .await
            .map_err(CliError::Backfill)?
    } else {
        None
    };
    if json && run.is_none() {
        let list: Vec<serde_json::Value> = statuses.iter().map(|s| status_json(s, now)).collect();
        return print_json(&serde_json::json!({ "backfill": backfill, "runs": list }));
    }
    if let Some(b) = &backfill {
        println!("{}\n", b.text(now));
    }
    if json {
        let out: Vec<serde_json::Value> = statuses.iter().map(|s| status_json(s, now)).collect();
        return print_json(&out);
    }
    if statuses.is_empty() {
        println!("(no runs)");
    }
    for s in &statuses {
        println!("{}", s.text(now));
    }
    Ok(())
}

fn status_json(s: &crate::mirror::runs::RunStatus, now: u64) -> serde_json::Value {
    let (rate, eta) = s.rate_and_eta(now);
    serde_json::json!({
        "status": s,
        "complete": s.completed_ms.is_some(),
        "progress": s.progress(),
        "idsPerSecond": rate,
        "etaSeconds": eta.map(|d| d.as_secs()),
        "outstanding": s.outstanding(),
        "fetched": s.fetched(),
        "discrepancies": s.discrepancies(),
    })
}

/// Redis and the namespace only: `queue` needs no key, so a missing `LAW_API_OC` is not an
/// error for it (`gate` checks for the key itself: the gate is the key's).
async fn redis_only() -> Result<(Config, RedisConn, Namespace), CliError> {
    let env = |k: &str| std::env::var(k).ok().filter(|v| !v.is_empty());
    let keyless = env("LAW_API_OC").is_none() && env("LAW_API_OC_SECRET_ARN").is_none();
    let cfg = Config::from_lookup(|k| {
        if keyless && k == "LAW_API_OC" {
            Some("unused".into())
        } else {
            env(k)
        }
    })?;
    let sdk = crate::aws::sdk_config(&cfg).await;
    let conn = crate::redis_auth::connect(&cfg.redis, &sdk)
        .await
        .map_err(StartupError::from)?;
    let ns = Namespace::new(&cfg.app_env, UPSTREAM)?;
    Ok((cfg, conn, ns))
}

fn age(d: Option<Duration>) -> String {
    d.map_or("-".into(), |d| format!("{:.1} s", d.as_secs_f64()))
}

async fn queue(action: QueueAction, json: bool) -> Result<(), CliError> {
    // A usage error is one whatever the environment: said before Redis is asked.
    if let QueueAction::Redrive {
        id: None, all: false, ..
    } = action
    {
        return Err(CliError::RedriveWhich);
    }
    let (_, conn, ns) = redis_only().await?;
    let q = RetryQueue::new(conn, &ns);
    match action {
        QueueAction::Stats => {
            let s = q.stats().await?;
            if json {
                return print_json(&s);
            }
            println!(
                "depth {}  due now {}  in flight {}  dead {}",
                s.depth, s.due_now, s.in_flight, s.dead
            );
            println!(
                "oldest first failure {} ago; next due in {}",
                age(s.oldest_age),
                age(s.next_due_in)
            );
            Ok(())
        }
        QueueAction::List { limit } => show(q.list(limit).await?, json),
        QueueAction::Dead { limit } => show(q.dead(limit).await?, json),
        QueueAction::Redrive { id, limit, .. } => {
            let n = q.redrive(id.as_deref(), limit).await?;
            if json {
                print_json(&serde_json::json!({ "redriven": n }))
            } else {
                println!("redriven: {n}");
                Ok(())
            }
        }
    }
}

fn show(entries: Vec<crate::queue::EntryView>, json: bool) -> Result<(), CliError> {
    if json {
        return print_json(&entries);
    }
    if entries.is_empty() {
        println!("(none)");
    }
    for e in entries {
        let last = e.last_error.map_or("-".into(), |n| n.message);
        println!(
            "{}  retries {}  since {} ms  last: {}",
            e.id, e.retry_count, e.since_ms, last
        );
    }
    Ok(())
}

async fn gate(action: GateAction, json: bool) -> Result<(), CliError> {
    let cap = crate::policy::RETRY_AFTER_CAP.as_secs();
    if let GateAction::Cooldown { seconds } = action
        && (seconds == 0 || seconds > cap)
    {
        return Err(CliError::CooldownRange { cap });
    }
    let has_key = ["LAW_API_OC", "LAW_API_OC_SECRET_ARN"]
        .iter()
        .any(|k| std::env::var(k).is_ok_and(|v| !v.is_empty()));
    if !has_key {
        return Err(CliError::NoKey);
    }
    let (cfg, conn, ns) = redis_only().await?;
    let sdk = crate::aws::sdk_config(&cfg).await;
    let oc = crate::secrets::resolve_oc(&cfg.law.oc, &sdk).await?;
    let gate = crate::app::law_gate(conn, &oc, &ns, cfg.gate)?;
    match action {
        GateAction::Status => {
            let s = gate.status().await?;
            let health = crate::key_health::KeyHealth::beside(gate.connection().clone(), gate.key());
            let circuit = health.status().await?;
            let format = (
                health.learned_format(crate::law::Endpoint::Search).await?,
                health.learned_format(crate::law::Endpoint::Detail).await?,
            );
            if json {
                return print_json(&serde_json::json!({
                    "nowUs": s.now_us,
                    "nextSlotInMs": s.next_slot_in.as_millis() as u64,
                    "cooldownMs": s.cooldown.map(|c| c.as_millis() as u64),
                    "fresh": s.fresh,
                    "keyCircuit": circuit,
                    "servedFormat": { "search": format.0, "detail": format.1 },
                }));
            }
            println!(
                "next slot in {} ms; cooldown {}{}",
                s.next_slot_in.as_millis(),
                age(s.cooldown),
                if s.fresh {
                    " (no state yet: the first call waits one interval of quiet)"
                } else {
                    ""
                }
            );
            match &circuit {
                None => println!("key-health circuit: closed (law.go.kr accepts the key)"),
                Some(c) => {
                    let (cause, fix) = crate::law::KeyProblem::from_kind(&c.reason).map_or(
                        ("a refusal this release does not name", "see lawsync probe"),
                        |p| (p.cause(), p.fix()),
                    );
                    let held = if c.scope == "any" {
                        "no call is made until a probe finds the key accepted".to_owned()
                    } else {
                        format!(
                            "no call to the {} API is made until a probe finds it granted (the other goes on)",
                            c.scope
                        )
                    };
                    println!(
                        "key-health circuit: OPEN since {} ({}, {} refusal{}): {held}\n  likely cause: {cause}\n  fix: {fix}",
                        httpdate::fmt_http_date(std::time::UNIX_EPOCH + Duration::from_millis(c.opened_ms)),
                        c.reason,
                        c.refusals,
                        if c.refusals == 1 { "" } else { "s" },
                    );
                    let now_us = s.now_us;
                    match c.held_until_us.filter(|&u| u > now_us) {
                        Some(u) if c.probing => println!(
                            "  a probe is in flight; the next may go in {} ms at most",
                            (u - now_us) / 1000
                        ),
                        Some(u) => println!("  held for another {} ms, then probed", (u - now_us) / 1000),
                        None => {}
                    }
                }
            }
            for (endpoint, f) in [("search", format.0), ("detail", format.1)] {
                if let Some(f) = f {
                    println!("{endpoint} served in {f} (learned; LAW_API_FORMAT=auto asks in it)");
                }
            }
            Ok(())
        }
        GateAction::Cooldown { seconds } => {
            let c = gate.defer(Duration::from_secs(seconds)).await?;
            if json {
                return print_json(&serde_json::json!({ "cooldownMs": c.remaining.as_millis() as u64 }));
            }
            println!("cluster cooldown: {:.1} s left", c.remaining.as_secs_f64());
            Ok(())
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_failure_ends_with_its_documented_exit_status() {
        let config = || ConfigError {
            var: "LAW_API_OC",
            reason: "not set".into(),
        };
        let cases: Vec<(CliError, ExitStatus)> = vec![
            (CliError::RedriveWhich, ExitStatus::Usage),
            (CliError::CooldownRange { cap: 86_400 }, ExitStatus::Usage),
            (
                CliError::Window(LawError::InvalidRequest("from must be YYYYMMDD".into())),
                ExitStatus::Usage,
            ),
            (
                CliError::Local(LocalError::Options("--batch-size must be 1..=10".into())),
                ExitStatus::Usage,
            ),
            (CliError::NoKey, ExitStatus::Config),
            (CliError::Config(config()), ExitStatus::Config),
            (
                CliError::Startup(StartupError::Config(config())),
                ExitStatus::Config,
            ),
            (
                CliError::Outbox(OutboxError::NotConfigured("SEARCH_QUEUE_URL")),
                ExitStatus::Config,
            ),
            (
                CliError::Store(RedisFailure::ModeUnknown("no INFO".into())),
                ExitStatus::Config,
            ),
            (
                CliError::Startup(StartupError::Redis(RedisFailure::Unreachable(
                    "connection refused",
                ))),
                ExitStatus::Unavailable,
            ),
            (
                CliError::Local(LocalError::Startup(StartupError::Redis(RedisFailure::Timeout))),
                ExitStatus::Unavailable,
            ),
            (
                CliError::Gate(GateError::Unavailable(RedisFailure::Timeout)),
                ExitStatus::Unavailable,
            ),
            (
                CliError::Store(RedisFailure::Corrupt("k".into())),
                ExitStatus::Failure,
            ),
            (
                CliError::Outbox(OutboxError::Sqs("throttled".into())),
                ExitStatus::Failure,
            ),
            (CliError::NotSent, ExitStatus::Failure),
            (CliError::Event(EventError::NotJson), ExitStatus::Input),
            (
                CliError::Event(EventError::File(std::io::ErrorKind::NotFound)),
                ExitStatus::Input,
            ),
        ];
        for (e, status) in cases {
            assert_eq!(e.exit_status(), status, "{e}");
        }
    }

    #[test]
    fn help_lists_every_exit_status() {
        for s in [
            ExitStatus::Failure,
            ExitStatus::Usage,
            ExitStatus::Config,
            ExitStatus::Unavailable,
            ExitStatus::Input,
            ExitStatus::Differs,
        ] {
            assert!(
                EXIT_STATUS_HELP.contains(&format!("\n  {}  ", s.code())),
                "{s:?} missing from --help"
            );
        }
    }

    #[test]
    fn wrapped_errors_read_as_before() {
        let startup = CliError::Startup(StartupError::Config(ConfigError {
            var: "LAW_API_OC",
            reason: "not set".into(),
        }));
        assert_eq!(startup.to_string(), "configuration: LAW_API_OC: not set");
        let event = CliError::Event(EventError::NotSqs {
            category: "truncated",
            line: 1,
            column: 8,
        });
        assert_eq!(
            event.to_string(),
            "the event is not an SQS event (truncated at line 1 column 8)"
        );
    }
}
