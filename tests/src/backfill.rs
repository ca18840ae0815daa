//! What the backfill suites share: the rig on a fixed day, requests, the backfill's status
//! and window states, what the store holds and what it must, and the foreground runs the
//! backfill gives way to.

use std::collections::{BTreeMap, BTreeSet};

use lawsync::app::backfill::{self, BackfillRequest, BackfillStatus};
use lawsync::mirror::runs::{RunId, RunPlan};

use crate::mirror::{MirrorRig, Queues, Store};

/// The look-alike's day in the backfill suites.
pub const TODAY: &str = "20261130";

/// A backfill of `from..=to`, done windows not searched again.
pub fn request(from: &str, to: &str) -> BackfillRequest {
    BackfillRequest {
        from: from.into(),
        to: to.into(),
        again: false,
    }
}

/// A rig on [`TODAY`], a folder store and in-memory queues.
pub async fn rig(seed: u64) -> MirrorRig {
    MirrorRig::start_with(Store::Folder, Queues::Memory, seed, Some(TODAY)).await
}

/// The backfill as Redis holds it; panics when there is none.
pub async fn status(rig: &MirrorRig) -> BackfillStatus {
    backfill::status(&rig.deps)
        .await
        .expect("backfill status")
        .expect("a backfill in Redis")
}

/// Window name → state text, as Redis holds them.
pub async fn window_states(rig: &MirrorRig) -> Vec<(String, String)> {
    let fields: BTreeMap<String, String> = redis::cmd("HGETALL")
        .arg(rig.ns.backfill())
        .query_async(&mut rig.deps.queue.connection().clone())
        .await
        .expect("hgetall");
    fields
        .into_iter()
        .filter_map(|(k, v)| k.strip_prefix("w:").map(|w| (w.to_owned(), v)))
        .collect()
}

/// Sets one hash field, as a function that died half-way would have left it.
pub async fn hset(rig: &MirrorRig, key: &str, field: &str, value: &str) {
    let _: i64 = redis::cmd("HSET")
        .arg(key)
        .arg(field)
        .arg(value)
        .query_async(&mut rig.deps.queue.connection().clone())
        .await
        .expect("hset");
}

/// Every id the store holds, stored or recorded missing.
pub async fn held(rig: &MirrorRig) -> BTreeSet<String> {
    let mut out = BTreeSet::new();
    for prefix in ["prec/", "missing/"] {
        for k in rig.keys(prefix).await {
            if let Some(id) = k.strip_prefix(prefix).and_then(|k| k.strip_suffix(".json")) {
                out.insert(id.to_owned());
            }
        }
    }
    out
}

/// The dated precedents of `from..=to` published by [`TODAY`].
pub fn wanted_dated(rig: &MirrorRig, from: &str, to: &str) -> BTreeSet<String> {
    rig.lookalike
        .corpus()
        .visible(Some((from, to)), Some(TODAY))
        .iter()
        .map(|p| p.id.to_string())
        .collect()
}

/// What a backfill of `from..=to` must hold: [`wanted_dated`] and every undated precedent
/// published by [`TODAY`].
pub fn wanted(rig: &MirrorRig, from: &str, to: &str) -> BTreeSet<String> {
    let mut out = wanted_dated(rig, from, to);
    out.extend(
        rig.lookalike
            .corpus()
            .undated(Some(TODAY))
            .iter()
            .map(|p| p.id.to_string()),
    );
    out
}

/// Pumps and drains until the backfill says complete or `rounds` pass; whether it did.
pub async fn run_out(rig: &MirrorRig, rounds: usize) -> bool {
    for _ in 0..rounds {
        rig.pump().await;
        rig.drain(3).await;
        if status(rig).await.complete() {
            return true;
        }
    }
    false
}

/// Opens a run that is not a backfill window's (a sync, as a daily run would be): the
/// backfill gives way to it until it is recorded complete.
pub async fn open_foreground(rig: &MirrorRig, name: &str) -> RunId {
    let run = RunId::parse(name).expect("run id");
    let plan = RunPlan {
        kind: "sync".into(),
        windows: vec!["20261101~20261130".into()],
        query: None,
        refresh: false,
    };
    let opened = rig
        .deps
        .runs
        .open(&run, &plan, 0, lawsync::clock::now_millis())
        .await
        .expect("open");
    assert!(opened, "{name} was open already");
    run
}

/// Ends `run`'s hold on the backfill, as its record would.
pub async fn end_foreground(rig: &MirrorRig, run: &RunId) {
    let _: i64 = redis::cmd("HDEL")
        .arg(rig.ns.foreground_runs())
        .arg(run.as_str())
        .query_async(&mut rig.deps.queue.connection().clone())
        .await
        .expect("hdel");
}
