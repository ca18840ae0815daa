//! The mirror as its consumers see it: the stored envelope, what is held, the runs that
//! keep it complete, and the increment feed. See `docs/mirror.md`.

pub mod envelope;
pub mod held;
pub mod layout;
pub mod runs;

/// One precedent stored, for the metrics: the publication delay (first seen − decided)
/// and the pipeline latency (stored − first seen).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StoredEvent {
    /// `YYYYMMDD`, when known.
    pub decided: Option<String>,
    pub first_seen_ms: Option<u64>,
    pub fetched_ms: u64,
    pub state: runs::IdState,
}

impl StoredEvent {
    /// Days from the decision date (00:00 KST) to the first sighting, for a precedent
    /// stored for the first time.
    pub fn publication_delay_days(&self) -> Option<f64> {
        if self.state != runs::IdState::Added {
            return None;
        }
        let day = crate::law::calendar::day_number(self.decided.as_deref()?).ok()?;
        let decided_ms = day * 86_400_000 - 9 * 3_600_000;
        let seen = i64::try_from(self.first_seen_ms?).ok()?;
        Some(((seen - decided_ms).max(0) as f64) / 86_400_000.0)
    }

    /// Milliseconds from the first sighting to this store.
    pub fn pipeline_latency_ms(&self) -> Option<u64> {
        self.first_seen_ms
            .map(|seen| self.fetched_ms.saturating_sub(seen))
    }
}

/// Told of every precedent stored (the functions' metrics).
pub trait MirrorObserver: Send + Sync + std::fmt::Debug {
    fn stored(&self, e: &StoredEvent);
    /// A run's record was written.
    fn run_recorded(&self, _r: &runs::RunRecord) {}
}
