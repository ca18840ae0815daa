//! The queue's scripts called directly with hostile arguments (numbers that are not, out of
//! range, unknown actions, stale tokens) in random order against real Redis: a refused call
//! writes nothing, and after an accepted one no id is in two sets and no stored job is in
//! none (an entry lost silently).
//!
//! A second opinion on the Lua, beside `queue_props.rs`, which drives the queue through its
//! Rust API. Prints `props NAME: N cases passed in T`; `PROPTEST_CASES` runs more.

use std::collections::BTreeMap;
use std::sync::LazyLock;
use std::time::Instant;

use lawsync::keys::QueueKeys;
use lawsync::lua;
use lawsync::queue::Job;
use lawsync_tests::servers::{Topology, unique_ns};
use proptest::prelude::*;
use proptest::test_runner::{Config as RunnerConfig, TestCaseError, TestRunner};

const NUMBERS: [&str; 10] = [
    "0",
    "1",
    "5",
    "-1",
    "1.5",
    "abc",
    "",
    "1e400",
    "nan",
    "9007199254740993",
];
static IDS: LazyLock<[String; 3]> = LazyLock::new(|| ["1", "2", "3"].map(|i| Job::detail(i).id()));
static JOB: LazyLock<String> = LazyLock::new(|| serde_json::to_string(&Job::detail("1")).expect("json"));
const NOTES: &str = r#"[{"atMs":1,"kind":"http_status","message":"HTTP 503","status":503}]"#;

/// Every queue key's content, for before-and-after comparison.
async fn snapshot(conn: &mut lawsync::RedisConn, k: &QueueKeys) -> BTreeMap<String, Vec<String>> {
    let mut out = BTreeMap::new();
    for z in [&k.waiting, &k.ready, &k.leased, &k.first, &k.dead, &k.alerts] {
        let v: Vec<String> = redis::cmd("ZRANGE")
            .arg(z)
            .arg(0)
            .arg(-1)
            .arg("WITHSCORES")
            .query_async(conn)
            .await
            .expect("zrange");
        out.insert(z.clone(), v);
    }
    for h in [&k.jobs, &k.count, &k.errors, &k.lease, &k.meta] {
        let v: BTreeMap<String, String> = redis::cmd("HGETALL")
            .arg(h)
            .query_async(conn)
            .await
            .expect("hgetall");
        out.insert(h.clone(), v.into_iter().flat_map(|(a, b)| [a, b]).collect());
    }
    out
}

fn consistent(snap: &BTreeMap<String, Vec<String>>, k: &QueueKeys) -> Result<(), String> {
    let members = |key: &String| -> Vec<String> { snap[key].chunks(2).map(|p| p[0].clone()).collect() };
    let sets = [&k.waiting, &k.ready, &k.leased, &k.dead].map(members);
    let jobs: Vec<String> = snap[&k.jobs].chunks(2).map(|p| p[0].clone()).collect();
    for id in IDS.iter() {
        let n = sets.iter().filter(|s| s.contains(&id.to_owned())).count();
        if n > 1 {
            return Err(format!("{id} in {n} sets"));
        }
        if n == 0 && jobs.contains(&id.to_owned()) {
            return Err(format!("{id} has a stored job but is in no set: lost"));
        }
    }
    Ok(())
}

/// One call: the script and its arguments from the choices.
async fn call(conn: &mut lawsync::RedisConn, k: &QueueKeys, c: [u8; 6]) -> redis::RedisResult<redis::Value> {
    let num = |i: u8| NUMBERS[usize::from(i) % NUMBERS.len()];
    let id = IDS[usize::from(c[1]) % IDS.len()].as_str();
    let inv = match c[0] % 5 {
        0 => {
            let mut i = lua::QUEUE_ENQUEUE.prepare(k);
            let legacy = if c[4].is_multiple_of(3) {
                IDS[usize::from(c[5]) % IDS.len()].as_str()
            } else {
                ""
            };
            i.arg(id)
                .arg(JOB.as_str())
                .arg(num(c[2]))
                .arg(NOTES)
                .arg(NOTES)
                .arg(num(c[3]))
                .arg(legacy);
            i
        }
        1 => {
            let mut i = lua::QUEUE_CLAIM.prepare(k);
            i.arg(num(c[2])).arg(num(c[3])).arg(num(c[4])).arg("nonce");
            i
        }
        2 => {
            let token: Option<String> = redis::cmd("HGET").arg(&k.lease).arg(id).query_async(conn).await?;
            let token = if c[5].is_multiple_of(4) {
                "stale".to_owned()
            } else {
                token.unwrap_or_default()
            };
            let action = ["ack", "retry", "dead", "release", "later", "bogus"][usize::from(c[4]) % 6];
            let mut i = lua::QUEUE_SETTLE.prepare(k);
            i.arg(id)
                .arg(token)
                .arg(action)
                .arg(num(c[2]))
                .arg(NOTES)
                .arg(num(c[3]));
            i
        }
        3 => {
            let mut i = lua::QUEUE_BURY.prepare(k);
            i.arg(id).arg(JOB.as_str()).arg(NOTES).arg(num(c[2])).arg("");
            i
        }
        _ => {
            let mut i = lua::QUEUE_REDRIVE.prepare(k);
            i.arg(if c[3].is_multiple_of(2) { id } else { "" }).arg(num(c[2]));
            i
        }
    };
    inv.invoke_async(conn).await
}

#[test]
fn hostile_script_calls_write_nothing_or_leave_the_queue_consistent() {
    let cases = std::env::var("PROPTEST_CASES")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(32);
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("runtime");
    for topo in Topology::EVERY {
        let mut runner = TestRunner::new(RunnerConfig {
            cases,
            failure_persistence: None,
            ..RunnerConfig::default()
        });
        let started = Instant::now();
        let result = runner.run(&proptest::collection::vec(any::<[u8; 6]>(), 10..80), |calls| {
            rt.block_on(async {
                let mut conn = topo.connect().await;
                let k = unique_ns("hostile").queue();
                for (n, c) in calls.iter().enumerate() {
                    let before = snapshot(&mut conn, &k).await;
                    let reply = call(&mut conn, &k, *c).await;
                    let after = snapshot(&mut conn, &k).await;
                    match reply {
                        Err(e) if before != after => {
                            return Err(TestCaseError::fail(format!(
                                "call {n} {c:?} failed ({e}) after writing"
                            )));
                        }
                        Err(_) => {}
                        Ok(_) => consistent(&after, &k)
                            .map_err(|e| TestCaseError::fail(format!("call {n} {c:?}: {e}")))?,
                    }
                }
                Ok(())
            })
        });
        if let Err(e) = result {
            panic!("{topo:?}: {e}");
        }
        eprintln!(
            "props hostile_script_calls {topo:?}: {cases} cases passed in {:?}",
            started.elapsed()
        );
    }
}
