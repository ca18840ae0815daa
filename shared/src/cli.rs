//! The `lawsync` command line: the functions' handlers, the queue and the gate, from a shell.
//!
//! Configuration comes from the same environment variables as the functions. Output is
//! for people by default and JSON with `--json`; `invoke search|detail` always prints the
//! Lambda's own response (the SQS batch response), as the functions would return it.
#![allow(clippy::print_stdout)] // a command line: stdout is its product

use std::io::Read;
use std::time::Duration;

use clap::{Parser, Subcommand};

use crate::app::Deps;
use crate::app::sqs::{MessageKind, handle_batch};
use crate::config::Config;
use crate::deadline::Deadline;
use crate::keys::Namespace;
use crate::law::{SearchRequest, UPSTREAM};
use crate::queue::RetryQueue;
use crate::store::RedisConn;

#[derive(Debug, Parser)]
#[command(
    name = "lawsync",
    version,
    about = "Mirror law.go.kr precedents: the Lambda handlers, the retry queue and the rate gate from a shell."
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
    /// Send a sync request for a date window to the search queue.
    Sync {
        /// First decision date, YYYYMMDD.
        #[arg(long)]
        from: String,
        /// Last decision date, YYYYMMDD.
        #[arg(long)]
        to: String,
        #[arg(long)]
        query: Option<String>,
    },
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

/// Runs one command. Errors are sanitized texts, safe to print.
pub async fn run(args: Args) -> Result<(), String> {
    match args.command {
        Command::Invoke { function } => invoke(function, args.json).await,
        Command::Sync { from, to, query } => sync(from, to, query, args.json).await,
        Command::Local(local) => run_local(local).await,
        Command::Queue { action } => queue(action, args.json).await,
        Command::Gate { action } => gate(action, args.json).await,
    }
}

async fn deps() -> Result<(Deps, aws_config::SdkConfig), String> {
    Deps::from_env().await.map_err(|e| e.to_string())
}

async fn run_local(a: LocalArgs) -> Result<(), String> {
    use crate::local::{EventLog, GateScope, LocalOptions};
    let cfg = Config::from_env().map_err(|e| e.to_string())?;
    let sdk = crate::aws::sdk_config().await;
    let out: Box<dyn std::io::Write + Send> = match &a.events {
        None => Box::new(std::io::stdout()),
        Some(path) => Box::new(
            std::fs::OpenOptions::new()
                .create(true)
                .append(true)
                .open(path)
                .map_err(|e| format!("--events {path}: {}", e.kind()))?,
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
    crate::local::run(cfg, sdk, opts, EventLog::new(out))
        .await
        .map_err(|e| e.to_string())
}

fn read_event(source: &str) -> Result<String, String> {
    if source == "-" {
        let mut s = String::new();
        std::io::stdin()
            .read_to_string(&mut s)
            .map_err(|e| format!("reading the event from stdin: {e}"))?;
        Ok(s)
    } else {
        std::fs::read_to_string(source).map_err(|e| format!("reading the event file: {}", e.kind()))
    }
}

fn print_json(v: &impl serde::Serialize) -> Result<(), String> {
    println!("{}", serde_json::to_string_pretty(v).map_err(|e| e.to_string())?);
    Ok(())
}

async fn invoke(function: Invoke, json: bool) -> Result<(), String> {
    let (deps, sdk) = deps().await?;
    match function {
        Invoke::Search { event } => batch(&deps, MessageKind::Search, &event).await,
        Invoke::Detail { event } => batch(&deps, MessageKind::Detail, &event).await,
        Invoke::Drainer { event, passes } => {
            if let Some(e) = event {
                serde_json::from_str::<serde_json::Value>(&read_event(&e)?)
                    .map_err(|_| "the drainer event is not JSON".to_owned())?;
            }
            let alerts = deps.alerts(&sdk).await.map_err(|e| e.to_string())?;
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
            };
            let report = deps
                .drain_with(&*alerts, Deadline::NONE, Some(passes.max(1)), hooks)
                .await
                .map_err(|e| e.to_string());
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

async fn batch(deps: &Deps, kind: MessageKind, source: &str) -> Result<(), String> {
    let text = read_event(source)?;
    let event = serde_json::from_str(&text).map_err(|e| {
        format!(
            "the event is not an SQS event ({} at line {} column {})",
            crate::law::model::category(&e),
            e.line(),
            e.column()
        )
    })?;
    let (response, summary) = handle_batch(deps, kind, event, Deadline::NONE).await;
    tracing::info!(?summary, "batch done");
    print_json(&response)
}

async fn sync(from: String, to: String, query: Option<String>, json: bool) -> Result<(), String> {
    let req = SearchRequest {
        from,
        to,
        query,
        page: None,
        display: None,
    };
    req.params().map_err(|e| e.to_string())?;
    let (deps, _) = deps().await?;
    let body = serde_json::to_string(&req).map_err(|e| e.to_string())?;
    let failed = deps
        .outbox
        .send(crate::app::outbox::QueueName::Search, std::slice::from_ref(&body))
        .await
        .map_err(|e| e.to_string())?;
    if !failed.is_empty() {
        return Err("SQS did not accept the sync request".into());
    }
    if json {
        print_json(&serde_json::json!({ "sent": req }))
    } else {
        println!("sent to the search queue: {body}");
        Ok(())
    }
}

/// Redis and the namespace only: `queue` needs no key, so a missing `LAW_API_OC` is not an
/// error for it (`gate` checks for the key itself: the gate is the key's).
async fn redis_only() -> Result<(Config, RedisConn, Namespace), String> {
    let env = |k: &str| std::env::var(k).ok().filter(|v| !v.is_empty());
    let keyless = env("LAW_API_OC").is_none() && env("LAW_API_OC_SECRET_ARN").is_none();
    let cfg = Config::from_lookup(|k| {
        if keyless && k == "LAW_API_OC" {
            Some("unused".into())
        } else {
            env(k)
        }
    })
    .map_err(|e| e.to_string())?;
    let conn = RedisConn::connect(&cfg.redis).await.map_err(|e| e.to_string())?;
    let ns = Namespace::new(&cfg.app_env, UPSTREAM).map_err(|e| e.to_string())?;
    Ok((cfg, conn, ns))
}

fn age(d: Option<Duration>) -> String {
    d.map_or("-".into(), |d| format!("{:.1} s", d.as_secs_f64()))
}

async fn queue(action: QueueAction, json: bool) -> Result<(), String> {
    let (_, conn, ns) = redis_only().await?;
    let q = RetryQueue::new(conn, &ns);
    match action {
        QueueAction::Stats => {
            let s = q.stats().await.map_err(|e| e.to_string())?;
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
        QueueAction::List { limit } => show(q.list(limit).await.map_err(|e| e.to_string())?, json),
        QueueAction::Dead { limit } => show(q.dead(limit).await.map_err(|e| e.to_string())?, json),
        QueueAction::Redrive { id, all, limit } => {
            if id.is_none() && !all {
                return Err("say which: --id ID, or --all".into());
            }
            let n = q.redrive(id.as_deref(), limit).await.map_err(|e| e.to_string())?;
            if json {
                print_json(&serde_json::json!({ "redriven": n }))
            } else {
                println!("redriven: {n}");
                Ok(())
            }
        }
    }
}

fn show(entries: Vec<crate::queue::EntryView>, json: bool) -> Result<(), String> {
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

async fn gate(action: GateAction, json: bool) -> Result<(), String> {
    let has_key = ["LAW_API_OC", "LAW_API_OC_SECRET_ARN"]
        .iter()
        .any(|k| std::env::var(k).is_ok_and(|v| !v.is_empty()));
    if !has_key {
        return Err(
            "lawsync gate: the gate belongs to the API key; set LAW_API_OC or LAW_API_OC_SECRET_ARN".into(),
        );
    }
    let (cfg, conn, ns) = redis_only().await?;
    let sdk = crate::aws::sdk_config().await;
    let oc = crate::secrets::resolve_oc(&cfg.law.oc, &sdk)
        .await
        .map_err(|e| e.to_string())?;
    let gate = crate::app::law_gate(conn, &oc, &ns, cfg.gate).map_err(|e| e.to_string())?;
    match action {
        GateAction::Status => {
            let s = gate.status().await.map_err(|e| e.to_string())?;
            if json {
                return print_json(&serde_json::json!({
                    "nowUs": s.now_us,
                    "nextSlotInMs": s.next_slot_in.as_millis() as u64,
                    "cooldownMs": s.cooldown.map(|c| c.as_millis() as u64),
                    "fresh": s.fresh,
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
            Ok(())
        }
        GateAction::Cooldown { seconds } => {
            let cap = crate::policy::RETRY_AFTER_CAP.as_secs();
            if seconds == 0 || seconds > cap {
                return Err(format!(
                    "lawsync gate cooldown: --seconds must be 1..={cap} (a day at most)"
                ));
            }
            let c = gate
                .defer(Duration::from_secs(seconds))
                .await
                .map_err(|e| e.to_string())?;
            if json {
                return print_json(&serde_json::json!({ "cooldownMs": c.remaining.as_millis() as u64 }));
            }
            println!("cluster cooldown: {:.1} s left", c.remaining.as_secs_f64());
            Ok(())
        }
    }
}
