//! CloudWatch metrics as Embedded Metric Format lines: one JSON line on stdout per
//! invocation, which Lambda's log pipeline turns into metrics in the namespace
//! `lawsync/<APP_ENV>` with the dimension `Function`. No API call, no extra latency, and
//! nothing but numbers: no key, no URL, no body.
//!
//! | metric | unit | from |
//! |---|---|---|
//! | `GateWaitMs` | Milliseconds | every law.go.kr attempt's wait for its slot |
//! | `Calls`, `Throttled429`, `Cooldowns` | Count | attempts, 429s received, cluster cooldowns set |
//! | `MessagesDone`, `MessagesParked`, `MessagesInvalid`, `MessagesReturned` | Count | SQS batches |
//! | `DrainSucceeded`, `DrainFailed`, `DrainDeadLettered` | Count | drainer passes |
//! | `RetryQueueDepth`, `RetryQueueDue`, `RetryQueueDead` | Count | the retry queue after a drainer run |
//! | `PublicationDelayDays` | None | per precedent stored for the first time: first seen by a search − decision date (00:00 KST) |
//! | `PipelineLatencyMs` | Milliseconds | per precedent stored: stored − first seen by a search |
//! | `PrecedentsAdded`, `PrecedentsRevised`, `PrecedentsUnchanged` | Count | precedents stored, by what changed |
//! | `ColdStart` | Count | 1 on the first line of an execution environment (the invocation that paid for its cold start) |
//! | `RunsRecorded`, `RunIdsSkipped`, `RunIdsFetched`, `RunDiscrepancies` | Count | sync runs recorded |
//! | `KeyRefused`, `KeyCircuitOpened` | Count | law.go.kr refusing the key itself; the refusals that opened the key-health circuit |
//! | `KeyCircuitOpen` | Count | 1 while the key-health circuit is open, 0 otherwise, after a drainer run |
//! | `UnknownReplies` | Count | replies of no known shape, kept for `lawsync probe` |
#![allow(clippy::print_stdout)] // EMF is read from the function's stdout

use std::sync::Mutex;

use serde_json::{Map, Value, json};

use crate::app::sqs::BatchSummary;
use crate::drainer::DrainReport;
use crate::law::{CallEvent, CallObserver};
use crate::queue::QueueStats;

/// EMF takes at most 100 values per metric per line.
const MAX_VALUES: usize = 100;

/// One function's metrics for the invocation in progress.
#[derive(Debug)]
pub struct Metrics {
    namespace: String,
    function: &'static str,
    /// `AWS_LAMBDA_FUNCTION_VERSION`, a property of every line (not a dimension: a new
    /// version would start new metrics).
    version: Option<String>,
    /// True until the first line is taken: that line carries `ColdStart` 1, the invocation
    /// that paid for the cold start.
    cold: std::sync::atomic::AtomicBool,
    acc: Mutex<Acc>,
}

#[derive(Debug, Default)]
struct Acc {
    gate_wait_ms: Vec<f64>,
    /// Distributions other than the gate's wait: name, unit, values.
    values: Vec<(&'static str, &'static str, Vec<f64>)>,
    counts: Vec<(&'static str, u64)>,
    gauges: Vec<(&'static str, u64)>,
}

impl Acc {
    fn value(&mut self, name: &'static str, unit: &'static str, v: f64) {
        let i = match self.values.iter().position(|(k, _, _)| *k == name) {
            Some(i) => i,
            None => {
                self.values.push((name, unit, Vec::new()));
                self.values.len() - 1
            }
        };
        if self.values[i].2.len() < MAX_VALUES {
            self.values[i].2.push((v * 10.0).round() / 10.0);
        }
    }

    fn add(&mut self, name: &'static str, n: u64) {
        match self.counts.iter_mut().find(|(k, _)| *k == name) {
            Some((_, v)) => *v += n,
            None => self.counts.push((name, n)),
        }
    }
}

impl Metrics {
    /// Metrics of `function` in `lawsync/<app_env>`.
    pub fn new(app_env: &str, function: &'static str) -> Self {
        Self {
            namespace: format!("lawsync/{app_env}"),
            function,
            version: None,
            cold: std::sync::atomic::AtomicBool::new(true),
            acc: Mutex::new(Acc::default()),
        }
    }

    /// The same metrics with the function's version on every line.
    pub fn with_version(mut self, version: impl Into<String>) -> Self {
        self.version = Some(version.into());
        self
    }

    fn acc(&self) -> std::sync::MutexGuard<'_, Acc> {
        self.acc.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// What one SQS batch did.
    pub fn batch(&self, s: &BatchSummary) {
        let mut acc = self.acc();
        acc.add("MessagesDone", u64::from(s.done));
        acc.add("MessagesParked", u64::from(s.parked));
        acc.add("MessagesInvalid", u64::from(s.invalid + s.permanent));
        acc.add("MessagesReturned", u64::from(s.returned));
        acc.add("HandlerDrained", u64::from(s.drained));
    }

    /// What one drainer run did, and the queue it left.
    pub fn drain(&self, report: &DrainReport, stats: Option<&QueueStats>) {
        let mut acc = self.acc();
        if let DrainReport::Ran { passes } = report {
            for p in passes {
                acc.add("DrainSucceeded", u64::from(p.succeeded));
                acc.add("DrainFailed", u64::from(p.failed));
                acc.add("DrainDeadLettered", u64::from(p.dead_lettered));
            }
        }
        if let Some(s) = stats {
            acc.gauges = vec![
                ("RetryQueueDepth", s.depth),
                ("RetryQueueDue", s.due_now),
                ("RetryQueueDead", s.dead),
            ];
        }
    }

    /// Whether the key-health circuit is open, after a drainer run.
    pub fn key_circuit(&self, open: bool) {
        self.acc().gauges.push(("KeyCircuitOpen", u64::from(open)));
    }

    /// The invocation's EMF line, and a fresh start for the next; `None` when nothing
    /// happened.
    pub fn take_line(&self) -> Option<Value> {
        let mut acc = std::mem::take(&mut *self.acc());
        if self.cold.swap(false, std::sync::atomic::Ordering::Relaxed) {
            acc.add("ColdStart", 1);
        }
        if acc.gate_wait_ms.is_empty()
            && acc.counts.is_empty()
            && acc.gauges.is_empty()
            && acc.values.is_empty()
        {
            return None;
        }
        let mut defs = Vec::new();
        let mut line = Map::new();
        line.insert("Function".into(), json!(self.function));
        if let Some(v) = &self.version {
            line.insert("FunctionVersion".into(), json!(v));
        }
        if !acc.gate_wait_ms.is_empty() {
            defs.push(json!({"Name": "GateWaitMs", "Unit": "Milliseconds"}));
            line.insert("GateWaitMs".into(), json!(acc.gate_wait_ms));
        }
        for (name, unit, v) in &acc.values {
            defs.push(json!({"Name": name, "Unit": unit}));
            line.insert((*name).into(), json!(v));
        }
        for (name, v) in acc.counts.iter().chain(acc.gauges.iter()) {
            defs.push(json!({"Name": name, "Unit": "Count"}));
            line.insert((*name).into(), json!(v));
        }
        let now_ms = crate::clock::now_millis();
        line.insert(
            "_aws".into(),
            json!({
                "Timestamp": now_ms,
                "CloudWatchMetrics": [{
                    "Namespace": self.namespace,
                    "Dimensions": [["Function"]],
                    "Metrics": defs,
                }],
            }),
        );
        Some(Value::Object(line))
    }

    /// Prints the invocation's line on stdout, where Lambda picks it up.
    pub fn flush(&self) {
        if let Some(line) = self.take_line() {
            println!("{line}");
        }
    }
}

impl CallObserver for Metrics {
    fn observe(&self, e: &CallEvent) {
        let mut acc = self.acc();
        if acc.gate_wait_ms.len() < MAX_VALUES {
            acc.gate_wait_ms
                .push((e.waited.as_secs_f64() * 1000.0 * 10.0).round() / 10.0);
        }
        acc.add("Calls", 1);
        if e.status == Some(429) {
            acc.add("Throttled429", 1);
        }
        if e.cooldown.is_some() {
            acc.add("Cooldowns", 1);
        }
    }

    fn key_refused(&self, _problem: &crate::law::KeyProblem, opened: bool) {
        let mut acc = self.acc();
        acc.add("KeyRefused", 1);
        if opened {
            acc.add("KeyCircuitOpened", 1);
        }
    }

    fn unknown_reply(&self) {
        self.acc().add("UnknownReplies", 1);
    }
}

impl crate::mirror::MirrorObserver for Metrics {
    fn stored(&self, e: &crate::mirror::StoredEvent) {
        use crate::mirror::runs::IdState;
        let mut acc = self.acc();
        if let Some(days) = e.publication_delay_days() {
            acc.value("PublicationDelayDays", "None", days);
        }
        if let Some(ms) = e.pipeline_latency_ms() {
            acc.value("PipelineLatencyMs", "Milliseconds", ms as f64);
        }
        let name = match e.state {
            IdState::Added => "PrecedentsAdded",
            IdState::Revised => "PrecedentsRevised",
            _ => "PrecedentsUnchanged",
        };
        acc.add(name, 1);
    }

    fn run_recorded(&self, r: &crate::mirror::runs::RunRecord) {
        let mut acc = self.acc();
        acc.add("RunsRecorded", 1);
        acc.add("RunIdsSkipped", r.ids.skipped);
        acc.add("RunIdsFetched", r.ids.fetched);
        acc.add("RunDiscrepancies", r.discrepancies.len() as u64);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::law::Endpoint;
    use std::time::{Duration, SystemTime};

    fn call(status: u16, waited_ms: u64, cooldown: bool) -> CallEvent {
        CallEvent {
            endpoint: Endpoint::Detail,
            attempt: 1,
            started_at: SystemTime::now(),
            waited: Duration::from_millis(waited_ms),
            status: Some(status),
            took: Duration::from_millis(5),
            cooldown: cooldown.then_some(Duration::from_secs(2)),
            grant_to_send: Duration::ZERO,
            new_connection: false,
            given_back: 0,
            granted_at_us: 0,
        }
    }

    #[test]
    fn a_line_is_valid_emf_and_resets() {
        let m = Metrics::new("prod", "detail").with_version("7");
        let cold = m
            .take_line()
            .expect("the first line of an environment says it started cold");
        assert_eq!(
            (cold["ColdStart"].clone(), cold["FunctionVersion"].clone()),
            (json!(1), json!("7"))
        );
        assert_eq!(m.take_line(), None, "nothing happened since, nothing to say");
        m.observe(&call(200, 812, false));
        m.observe(&call(429, 3, true));
        m.batch(&BatchSummary {
            done: 4,
            parked: 1,
            ..BatchSummary::default()
        });
        let line = m.take_line().expect("line");
        let aws = &line["_aws"]["CloudWatchMetrics"][0];
        assert_eq!(aws["Namespace"], "lawsync/prod");
        assert_eq!(aws["Dimensions"], json!([["Function"]]));
        assert_eq!(line["Function"], "detail");
        assert_eq!(line["GateWaitMs"], json!([812.0, 3.0]));
        assert_eq!(
            (line["Calls"].clone(), line["Throttled429"].clone()),
            (json!(2), json!(1))
        );
        assert_eq!(
            (line["Cooldowns"].clone(), line["MessagesDone"].clone()),
            (json!(1), json!(4))
        );
        // Every declared metric has a value at the top level, and every value is declared.
        for def in aws["Metrics"].as_array().expect("metrics") {
            let name = def["Name"].as_str().expect("name");
            assert!(line.get(name).is_some(), "{name} declared without a value");
        }
        assert!(line["_aws"]["Timestamp"].as_u64().is_some());
        assert!(
            line.get("ColdStart").is_none(),
            "a warm invocation is not a cold start"
        );
        assert_eq!(line["FunctionVersion"], "7");
        assert_eq!(m.take_line(), None, "a line is taken once");
    }

    #[test]
    fn stores_report_the_publication_delay_and_pipeline_latency() {
        use crate::mirror::MirrorObserver;
        let m = Metrics::new("prod", "detail");
        // Decided 2026-01-29 (00:00 KST = 2026-01-28T15:00Z), first seen 10.5 days later,
        // stored 2 s after that.
        let decided_ms = 1_769_612_400_000u64;
        let seen = decided_ms + 10 * 86_400_000 + 43_200_000;
        m.stored(&crate::mirror::StoredEvent {
            decided: Some("20260129".into()),
            first_seen_ms: Some(seen),
            fetched_ms: seen + 2000,
            state: crate::mirror::runs::IdState::Added,
        });
        let line = m.take_line().expect("line");
        assert_eq!(line["PublicationDelayDays"], json!([10.5]));
        assert_eq!(line["PipelineLatencyMs"], json!([2000.0]));
        assert_eq!(line["PrecedentsAdded"], json!(1));
        let defs = line["_aws"]["CloudWatchMetrics"][0]["Metrics"]
            .as_array()
            .expect("defs")
            .clone();
        assert!(defs.contains(&json!({"Name": "PipelineLatencyMs", "Unit": "Milliseconds"})));
    }

    #[test]
    fn gate_waits_stop_at_emfs_hundred_values() {
        let m = Metrics::new("dev", "drainer");
        for _ in 0..150 {
            m.observe(&call(200, 1, false));
        }
        let line = m.take_line().expect("line");
        assert_eq!(line["GateWaitMs"].as_array().map(Vec::len), Some(100));
        assert_eq!(line["Calls"], 150);
    }
}
