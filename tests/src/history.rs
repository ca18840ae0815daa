//! A failure history in memory, for tests of the law.go.kr client: what the functions keep
//! in a capped Redis stream ([`lawsync::history::RedisHistory`]), held here to be read back.

use std::collections::VecDeque;
use std::sync::Mutex;

use lawsync::law::{BoxFuture, FailureRecord, FailureSink};

/// A capped in-memory history, newest last.
#[derive(Debug, Default)]
pub struct MemoryHistory {
    records: Mutex<VecDeque<FailureRecord>>,
}

impl MemoryHistory {
    /// Records kept before the oldest is dropped.
    pub const CAPACITY: usize = 1000;

    /// A copy of what is held, oldest first.
    pub fn snapshot(&self) -> Vec<FailureRecord> {
        self.records
            .lock()
            .map(|r| r.iter().cloned().collect())
            .unwrap_or_default()
    }
}

impl FailureSink for MemoryHistory {
    fn record(&self, record: FailureRecord) -> BoxFuture<'_, ()> {
        if let Ok(mut r) = self.records.lock() {
            if r.len() == Self::CAPACITY {
                r.pop_front();
            }
            r.push_back(record);
        }
        Box::pin(std::future::ready(()))
    }
}
