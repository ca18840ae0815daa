//! Random operation sequences on the retry queue, with damage mixed in, against real Redis
//! (standalone and the 3-node cluster).
//!
//! Operations: enqueue, bury, claim (short and long leases), ack, fail, release, release
//! until, dead-letter, redrive, sleep. Damage: a deleted job, count or first-failure
//! field, a garbage count, an id added to a second set. After every step:
//! - every id is in at most one of waiting, ready, leased and dead, except an id this test
//!   put into two sets, until an operation has repaired it;
//! - no claim hands out an id whose earlier lease is unexpired and unsettled.
//!
//! Each run prints `props NAME: N cases passed in T`; set `PROPTEST_RNG_SEED` to replay one
//! and `PROPTEST_CASES` to run more.

use std::collections::{HashMap, HashSet};
use std::time::{Duration, Instant};

use lawsync::Namespace;
use lawsync::keys::QueueKeys;
use lawsync::queue::{Backoff, Enqueued, ErrorNote, Job, Leased, RetryQueue};
use lawsync_tests::servers::{Topology, unique_ns};
use proptest::prelude::*;
use proptest::test_runner::{Config as RunnerConfig, TestCaseError, TestRunner};

const IDS: u32 = 5;
const SHORT: Duration = Duration::from_millis(40);
const LONG: Duration = Duration::from_secs(60);

#[derive(Debug, Clone)]
enum Op {
    Enqueue(u32),
    Bury(u32),
    Claim {
        k: usize,
        short: bool,
    },
    Ack(usize),
    Fail(usize),
    Release(usize),
    Later(usize),
    DeadLetter(usize),
    Redrive(Option<u32>),
    Sleep(u64),
    DelJob(u32),
    DelCount(u32),
    DelFirst(u32),
    GarbageCount(u32),
    /// Adds the id to set 0 waiting, 1 ready, 2 leased (a lease without a token, live for
    /// a minute), 3 dead, unless it is there already.
    Double(u32, usize),
}

fn op() -> impl Strategy<Value = Op> {
    let id = 0..IDS;
    let held = 0usize..4;
    prop_oneof![
        4 => id.clone().prop_map(Op::Enqueue),
        1 => id.clone().prop_map(Op::Bury),
        4 => (1usize..4, any::<bool>()).prop_map(|(k, short)| Op::Claim { k, short }),
        2 => held.clone().prop_map(Op::Ack),
        2 => held.clone().prop_map(Op::Fail),
        1 => held.clone().prop_map(Op::Release),
        1 => held.clone().prop_map(Op::Later),
        1 => held.prop_map(Op::DeadLetter),
        1 => proptest::option::of(id.clone()).prop_map(Op::Redrive),
        2 => (0u64..60).prop_map(Op::Sleep),
        1 => id.clone().prop_map(Op::DelJob),
        1 => id.clone().prop_map(Op::DelCount),
        1 => id.clone().prop_map(Op::DelFirst),
        1 => id.clone().prop_map(Op::GarbageCount),
        2 => (id, 0usize..4).prop_map(|(i, s)| Op::Double(i, s)),
    ]
}

fn job(i: u32) -> Job {
    Job::detail(&i.to_string())
}

fn name(i: u32) -> String {
    job(i).id()
}

fn note() -> ErrorNote {
    ErrorNote::now("http_status", "HTTP 503", Some(503))
}

/// A lease this test holds: live (by Redis' clock) at least until `live_until`.
struct Held {
    leased: Leased,
    live_until: Instant,
}

struct World {
    q: RetryQueue,
    keys: QueueKeys,
    conn: lawsync::RedisConn,
    held: Vec<Held>,
    /// Ids this test put into two sets, not yet repaired.
    doubled: HashSet<String>,
}

fn fail(msg: String) -> TestCaseError {
    TestCaseError::fail(msg)
}

impl World {
    async fn new(topo: Topology, ns: &Namespace) -> Self {
        let conn = topo.connect().await;
        let backoff = Backoff {
            base: Duration::from_millis(5),
            cap: Duration::from_millis(20),
        };
        Self {
            q: RetryQueue::new(conn.clone(), ns).with_backoff(backoff),
            keys: ns.queue(),
            conn,
            held: Vec::new(),
            doubled: HashSet::new(),
        }
    }

    fn sets(&self) -> [&str; 4] {
        [
            &self.keys.waiting,
            &self.keys.ready,
            &self.keys.leased,
            &self.keys.dead,
        ]
    }

    async fn cmd(&self, args: &[&str]) {
        let mut c = redis::cmd(args[0]);
        for a in &args[1..] {
            c.arg(*a);
        }
        let _: redis::Value = c.query_async(&mut self.conn.clone()).await.expect("damage");
    }

    /// In which of waiting, ready, leased, dead each id is.
    async fn membership(&self) -> HashMap<String, Vec<usize>> {
        let mut out = HashMap::new();
        for i in 0..IDS {
            let id = name(i);
            let mut sets = Vec::new();
            for (n, set) in self.sets().iter().enumerate() {
                let score: Option<f64> = redis::cmd("ZSCORE")
                    .arg(*set)
                    .arg(&id)
                    .query_async(&mut self.conn.clone())
                    .await
                    .expect("zscore");
                if score.is_some() {
                    sets.push(n);
                }
            }
            out.insert(id, sets);
        }
        out
    }

    /// The lease at `h`, taken out of the held ones (settling ends it either way).
    fn take(&mut self, h: usize) -> Option<Held> {
        (!self.held.is_empty()).then(|| self.held.remove(h % self.held.len()))
    }

    /// Every lease this test holds on `id` ends (the entry was buried or revived).
    fn drop_leases(&mut self, id: &str) {
        self.held.retain(|h| h.leased.id != id);
    }

    async fn step(&mut self, op: &Op) -> Result<(), TestCaseError> {
        let ms = |d: u64| Duration::from_millis(d);
        match op {
            Op::Enqueue(i) => {
                if let Enqueued::Revived { .. } = self
                    .q
                    .enqueue(&job(*i), Some(ms(0)), note())
                    .await
                    .expect("enqueue")
                {
                    self.drop_leases(&name(*i));
                }
            }
            Op::Bury(i) => {
                self.q.record_dead(&job(*i), note()).await.expect("bury");
                self.drop_leases(&name(*i));
            }
            Op::Claim { k, short } => {
                let lease = if *short { SHORT } else { LONG };
                let start = Instant::now();
                let claim = self.q.claim(*k, lease).await.expect("claim");
                let now = Instant::now();
                for e in claim.entries {
                    for h in &self.held {
                        if h.leased.id == e.id && now + ms(5) < h.live_until {
                            return Err(fail(format!("{} leased again while its lease lives", e.id)));
                        }
                    }
                    self.held.retain(|h| h.leased.id != e.id);
                    self.held.push(Held {
                        leased: e,
                        live_until: start + lease,
                    });
                }
                for id in claim.corrupt {
                    self.drop_leases(&id);
                }
            }
            Op::Ack(h) => {
                if let Some(h) = self.take(*h) {
                    self.q.ack(&h.leased).await.expect("ack");
                }
            }
            Op::Fail(h) => {
                if let Some(h) = self.take(*h) {
                    self.q.fail(&h.leased, note(), None, 3).await.expect("fail");
                }
            }
            Op::Release(h) => {
                if let Some(h) = self.take(*h) {
                    self.q.release(&h.leased).await.expect("release");
                }
            }
            Op::Later(h) => {
                if let Some(h) = self.take(*h) {
                    self.q.release_until(&h.leased, ms(30)).await.expect("later");
                }
            }
            Op::DeadLetter(h) => {
                if let Some(h) = self.take(*h) {
                    self.q.dead_letter(&h.leased, note()).await.expect("dead");
                }
            }
            Op::Redrive(i) => {
                let id = i.map(name);
                self.q.redrive(id.as_deref(), 10).await.expect("redrive");
            }
            Op::Sleep(d) => tokio::time::sleep(ms(*d)).await,
            Op::DelJob(i) => self.cmd(&["HDEL", &self.keys.jobs, &name(*i)]).await,
            Op::DelCount(i) => self.cmd(&["HDEL", &self.keys.count, &name(*i)]).await,
            Op::DelFirst(i) => self.cmd(&["ZREM", &self.keys.first, &name(*i)]).await,
            Op::GarbageCount(i) => self.cmd(&["HSET", &self.keys.count, &name(*i), "x!"]).await,
            Op::Double(i, set) => {
                let id = name(*i);
                let score = if *set == 2 { "99999999999999" } else { "0" };
                self.cmd(&["ZADD", self.sets()[*set], "NX", score, &id]).await;
                if self.membership().await[&id].len() > 1 {
                    self.doubled.insert(id);
                }
            }
        }
        self.check().await
    }

    async fn check(&mut self) -> Result<(), TestCaseError> {
        for (id, sets) in self.membership().await {
            if sets.len() <= 1 {
                self.doubled.remove(&id);
            } else if !self.doubled.contains(&id) {
                return Err(fail(format!(
                    "{id} is in sets {sets:?} (0 waiting, 1 ready, 2 leased, 3 dead)"
                )));
            }
        }
        Ok(())
    }
}

fn run(topo: Topology, label: &str) {
    let cases = std::env::var("PROPTEST_CASES")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(24);
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("runtime");
    let mut runner = TestRunner::new(RunnerConfig {
        cases,
        failure_persistence: None,
        ..RunnerConfig::default()
    });
    let started = Instant::now();
    let result = runner.run(&proptest::collection::vec(op(), 10..60), |ops| {
        rt.block_on(async {
            let mut w = World::new(topo, &unique_ns(label)).await;
            for (n, op) in ops.iter().enumerate() {
                w.step(op)
                    .await
                    .map_err(|e| fail(format!("step {n} {op:?}: {e}")))?;
            }
            Ok(())
        })
    });
    if let Err(e) = result {
        panic!("{topo:?}: {e}");
    }
    eprintln!(
        "props {label} {topo:?}: {cases} cases passed in {:?}",
        started.elapsed()
    );
}

#[test]
fn random_operations_with_damage_never_double_lease_or_double_file() {
    for topo in Topology::EVERY {
        run(topo, "qprops");
    }
}
