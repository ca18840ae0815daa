//! What the local runtime (`lawsync local`, module `local`, feature `cli`) reports: one
//! JSON line per law.go.kr attempt, batch, drainer pass and run, and at start and stop. The
//! runtime writes them; the demo, the benchmarks and the tests read them back into
//! [`EventLine`], so this module builds without the `cli` feature.

use serde::{Deserialize, Serialize};

use crate::app::sqs::BatchSummary;
use crate::drainer::{DrainReport, PassReport};
use crate::law::Endpoint;

/// Which gate the environments share (`shared`, `per-instance` in the event lines).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum GateScope {
    /// One gate for all (the product): every environment of every process on one Redis
    /// key space paces together.
    Shared,
    /// Each environment paces only itself, like a per-process rate limiter: the contrast
    /// that shows why the shared gate exists. Never for production.
    PerInstance,
}

/// One event line: what happened, and `at_ms`, when the line was written (epoch ms).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct EventLine {
    #[serde(flatten)]
    pub event: LocalEvent,
    pub at_ms: f64,
}

impl EventLine {
    /// Reads one line of the events output.
    pub fn parse(line: &str) -> Result<Self, serde_json::Error> {
        serde_json::from_str(line)
    }
}

/// What the local runtime reports, one JSON line each, its kind under `type`. Times are
/// epoch ms (`*_ms` instants) or ms (durations).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "type", rename_all = "snake_case")]
pub enum LocalEvent {
    /// One law.go.kr attempt of an environment.
    Call {
        instance: String,
        endpoint: Endpoint,
        /// 1-based attempt of this call.
        attempt: u32,
        /// When the request was sent (after the gate).
        started_ms: f64,
        /// Time spent waiting for the gate's slot.
        waited_ms: f64,
        took_ms: f64,
        /// `None`: no reply (a network failure or timeout).
        status: Option<u16>,
        /// The cluster-wide cooldown this attempt set (after a 429).
        cooldown_ms: Option<u64>,
        /// When the gate granted the start, epoch ms on Redis' clock (absent in older lines).
        #[serde(default, skip_serializing_if = "Option::is_none")]
        granted_ms: Option<f64>,
        /// Sent on a connection opened for it rather than a pooled one.
        #[serde(default)]
        new_connection: bool,
    },
    /// One invocation of a function on an SQS batch, and the mapping's deletes after it.
    Batch {
        instance: String,
        /// `search` or `detail`.
        function: String,
        received: usize,
        batch_item_failures: usize,
        not_deleted: usize,
        /// What Lambda bills: the handler's own time.
        billed_ms: f64,
        summary: BatchSummary,
    },
    /// One drainer pass, as it ends.
    DrainPass { instance: String, pass: PassReport },
    /// One drainer invocation, as it ends.
    Drain {
        instance: String,
        billed_ms: f64,
        report: DrainReport,
    },
    /// Every environment has cold-started.
    Started {
        process: String,
        concurrency: u32,
        gate: GateScope,
    },
    /// The runtime stopped: `SIGINT`, `SIGTERM` or `idle`.
    Stopped { process: String, why: String },
}
