//! gate-load: one process of the load test. K callers (tokio tasks) share one
//! `LawClient` and its gate, as the handlers of one instance would, and call law.go.kr's
//! detail endpoint once per precedent id they are given.
//!
//! ```text
//! gate-load --callers K --ids ID,ID,... [--base-url URL] [--label NAME] [--go-on-stdin]
//! ```
//! Everything else comes from the functions' environment variables (`LAW_API_OC`,
//! `REDIS_URL`, `APP_ENV`, `LAW_API_REQUEST_INTERVAL_MS`, `LAW_API_GATE_TOLERANCE_MS`,
//! `LAW_API_MAX_WAIT_MS`...); `--base-url` overrides `LAW_API_BASE_URL`. The key is read
//! from the environment only, never from the command line, where `ps` would show it.
//!
//! Caller k takes ids k, k+K, k+2K... and calls them one after the other. With
//! `--go-on-stdin` the process connects, prints `ready` and waits for a line on stdin
//! before the first call, so that several processes start together. At the end it prints
//! one JSON line: calls made, replies by status, errors by kind, calls finished per
//! caller, the gate's counters, and every attempt (id, when it was sent after its gate
//! slot, epoch ms, and its status), so that a test can set each arrival at the upstream
//! beside its sending. Logs (warn and above) go to stderr as JSON.
#![allow(clippy::print_stdout)] // stdout is the summary line

use std::collections::BTreeMap;
use std::io::{BufRead, Write};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant, UNIX_EPOCH};

use lawsync::law::{CallEvent, CallObserver};
use lawsync::{Config, Deadline, Gate, LawClient, Namespace, RedisConn};
use serde_json::json;

const USAGE: &str =
    "usage: gate-load --callers K --ids ID,ID,... [--base-url URL] [--label NAME] [--go-on-stdin]";

#[derive(Debug)]
struct Args {
    callers: usize,
    ids: Vec<String>,
    base_url: Option<String>,
    label: String,
    go_on_stdin: bool,
}

fn parse() -> Result<Args, String> {
    let mut args = std::env::args().skip(1);
    let mut out = Args {
        callers: 0,
        ids: Vec::new(),
        base_url: None,
        label: format!("pid{}", std::process::id()),
        go_on_stdin: false,
    };
    while let Some(flag) = args.next() {
        if flag == "--go-on-stdin" {
            out.go_on_stdin = true;
            continue;
        }
        let value = args.next().ok_or(format!("{flag} needs a value\n{USAGE}"))?;
        match flag.as_str() {
            "--callers" => {
                out.callers = value
                    .parse()
                    .map_err(|_| format!("--callers: not a number: {value:?}"))?
            }
            "--ids" => {
                out.ids = value
                    .split(',')
                    .filter(|s| !s.is_empty())
                    .map(str::to_owned)
                    .collect()
            }
            "--base-url" => out.base_url = Some(value),
            "--label" => out.label = value,
            _ => return Err(format!("unknown flag {flag}\n{USAGE}")),
        }
    }
    if out.callers == 0 || out.ids.is_empty() {
        return Err(USAGE.to_owned());
    }
    Ok(out)
}

tokio::task_local! {
    /// The precedent id a caller is calling, for the observer to file its attempts under.
    static CALLING: String;
}

/// Counts every attempt the client makes, by status (`network` when no reply came), keeps
/// the longest gate wait, and records each attempt.
#[derive(Debug, Default)]
struct Tally {
    inner: Mutex<TallyInner>,
}

#[derive(Debug, Default)]
struct TallyInner {
    attempts: u64,
    statuses: BTreeMap<String, u64>,
    max_wait: Duration,
    cooldowns: u64,
    sent: Vec<serde_json::Value>,
}

impl CallObserver for Tally {
    fn observe(&self, event: &CallEvent) {
        let id = CALLING.try_with(String::clone).ok();
        let sent_ms = event
            .started_at
            .duration_since(UNIX_EPOCH)
            .map_or(0.0, |d| d.as_secs_f64() * 1e3);
        let mut t = self.inner.lock().unwrap_or_else(|p| p.into_inner());
        t.attempts += 1;
        let status = event.status.map_or("network".to_owned(), |s| s.to_string());
        *t.statuses.entry(status).or_default() += 1;
        t.max_wait = t.max_wait.max(event.waited);
        t.cooldowns += u64::from(event.cooldown.is_some());
        t.sent.push(json!({
            "id": id,
            "attempt": event.attempt,
            "sent_ms": sent_ms,
            "waited_ms": event.waited.as_secs_f64() * 1e3,
            "granted_at_us": event.granted_at_us,
            "grant_to_send_us": event.grant_to_send.as_micros() as u64,
            "given_back": event.given_back,
            "status": event.status,
        }));
    }
}

#[tokio::main(flavor = "current_thread")]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    lawsync::telemetry::init_cli();
    let args = parse()?;
    let cfg = Config::from_lookup(|name| match (name, &args.base_url) {
        ("LAW_API_BASE_URL", Some(url)) => Some(url.clone()),
        _ => std::env::var(name).ok(),
    })?;
    let lawsync::config::OcSource::Value(oc) = cfg.law.oc.clone() else {
        return Err("gate-load takes the key from LAW_API_OC, not from Secrets Manager".into());
    };
    let conn = RedisConn::connect(&cfg.redis).await?;
    let gate = Arc::new(Gate::new(
        conn,
        &Namespace::new(&cfg.app_env, lawsync::law::UPSTREAM)?,
        cfg.gate,
    ));
    let tally = Arc::new(Tally::default());
    let client = Arc::new(LawClient::new(&cfg.law, oc, gate)?.with_observer(tally.clone()));
    if args.go_on_stdin {
        println!("ready");
        std::io::stdout().flush()?;
        let mut go = String::new();
        std::io::stdin().lock().read_line(&mut go)?;
    }
    let started = Instant::now();
    let callers: Vec<_> = (0..args.callers)
        .map(|k| {
            let client = client.clone();
            let ids: Vec<String> = args.ids.iter().skip(k).step_by(args.callers).cloned().collect();
            tokio::spawn(async move {
                let mut done = 0u64;
                let mut errors: Vec<&'static str> = Vec::new();
                for id in &ids {
                    match CALLING.scope(id.clone(), client.detail(id, Deadline::NONE)).await {
                        Ok(_) => done += 1,
                        Err(e) => errors.push(e.kind()),
                    }
                }
                (done, errors)
            })
        })
        .collect();
    let mut per_caller = Vec::new();
    let mut errors: BTreeMap<&'static str, u64> = BTreeMap::new();
    for c in callers {
        let (done, errs) = c.await?;
        per_caller.push(done);
        for e in errs {
            *errors.entry(e).or_default() += 1;
        }
    }
    let elapsed = started.elapsed();
    let gate = client.gate().stats();
    let tally = tally.inner.lock().unwrap_or_else(|p| p.into_inner());
    let summary = json!({
        "label": args.label,
        "callers": args.callers,
        "calls": args.ids.len(),
        "ok": per_caller.iter().sum::<u64>(),
        "per_caller": per_caller,
        "errors": errors,
        "attempts": tally.attempts,
        "statuses": tally.statuses,
        "cooldowns": tally.cooldowns,
        "max_gate_wait_ms": tally.max_wait.as_millis() as u64,
        "gate": {
            "grants": gate.grants,
            "round_trips": gate.round_trips,
            "refusals": gate.refusals,
            "reslotted": gate.reslotted,
            "given_back": gate.given_back,
            "waited_ms": gate.waited.as_millis() as u64,
        },
        "interval_ms": cfg.gate.interval.as_millis() as u64,
        "tolerance_ms": cfg.gate.tolerance.as_millis() as u64,
        "elapsed_ms": elapsed.as_millis() as u64,
        "sent": tally.sent,
    });
    println!("{summary}");
    Ok(())
}
