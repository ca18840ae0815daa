//! The retry queue's and the runner lock's scripts, each called directly with the ARGV its
//! contract documents and its keys filled by name as the library fills them, on real Redis
//! (standalone and cluster): every reply of every header, and every refusal writing nothing.
//! The job JSON is opaque to the scripts, so it is any text here. The history include's
//! contract (keep the newest, replace what cannot be read, drop what cannot be encoded) is
//! driven through `queue_bury`, which appends to a history as the drainer's failures do.

use std::collections::BTreeMap;

use lawsync::RedisConn;
use lawsync::keys::QueueKeys;
use lawsync::lua::{self, OneKey};
use lawsync_tests::servers::{Topology, unique_ns};
use redis::Value;

const JOB: &str = r#"{"job":"opaque to the scripts"}"#;
const NOTE: &str = r#"[{"atMs":1,"kind":"http_status","message":"HTTP 503","status":503}]"#;

/// One queue on one server.
struct Q {
    conn: RedisConn,
    k: QueueKeys,
}

impl Q {
    async fn new(topo: Topology) -> Self {
        Self {
            conn: topo.connect().await,
            k: unique_ns("luaq").queue(),
        }
    }

    async fn run<T: redis::FromRedisValue>(
        &mut self,
        s: &lua::LuaScript,
        args: &[&str],
    ) -> redis::RedisResult<T> {
        let mut call = s.prepare(&self.k);
        for a in args {
            call.arg(*a);
        }
        call.invoke_async(&mut self.conn).await
    }

    /// queue_enqueue → (status, due, id).
    async fn enqueue(&mut self, id: &str, delay: &str, legacy: &str) -> (i64, i64, String) {
        let revival = r#"[{"atMs":2,"kind":"revived","message":"revived"}]"#;
        self.run(&lua::QUEUE_ENQUEUE, &[id, JOB, delay, NOTE, revival, "5", legacy])
            .await
            .expect("enqueue")
    }

    /// queue_claim of up to `k` → (now, reclaimed, promoted, [(id, token, job, count, first, errors)]).
    async fn claim(&mut self, k: &str, lease_ms: &str) -> (i64, i64, i64, Vec<[String; 6]>) {
        let v: Vec<String> = self
            .run(&lua::QUEUE_CLAIM, &[k, lease_ms, "100", "nonce"])
            .await
            .expect("claim");
        let n = |i: usize| v[i].parse::<i64>().expect("a number");
        let entries = v[3..]
            .chunks(6)
            .map(|c| std::array::from_fn(|i| c[i].clone()))
            .collect();
        (n(0), n(1), n(2), entries)
    }

    async fn settle(
        &mut self,
        id: &str,
        token: &str,
        action: &str,
        count: &str,
        delay: &str,
    ) -> redis::RedisResult<i64> {
        self.run(&lua::QUEUE_SETTLE, &[id, token, action, count, NOTE, delay])
            .await
    }

    async fn bury(&mut self, id: &str, notes: &str, keep: &str) -> (i64, String) {
        self.run(&lua::QUEUE_BURY, &[id, JOB, notes, keep, ""])
            .await
            .expect("bury")
    }

    async fn score(&mut self, set: &str, id: &str) -> Option<f64> {
        redis::cmd("ZSCORE")
            .arg(set)
            .arg(id)
            .query_async(&mut self.conn)
            .await
            .expect("zscore")
    }

    async fn field(&mut self, hash: &str, id: &str) -> Option<String> {
        redis::cmd("HGET")
            .arg(hash)
            .arg(id)
            .query_async(&mut self.conn)
            .await
            .expect("hget")
    }

    /// The sets `id` is a member of, by name.
    async fn sets_of(&mut self, id: &str) -> Vec<&'static str> {
        let mut out = Vec::new();
        for name in ["waiting", "ready", "leased", "dead"] {
            let key = self.k.named(name).expect("a queue key").to_owned();
            if self.score(&key, id).await.is_some() {
                out.push(name);
            }
        }
        out
    }

    /// Every key's type and content, for "nothing written".
    async fn snapshot(&mut self) -> BTreeMap<String, Value> {
        let mut out = BTreeMap::new();
        for name in [
            "jobs", "first", "count", "errors", "waiting", "ready", "leased", "lease", "dead", "alerts",
            "seq", "meta",
        ] {
            let key = self.k.named(name).expect("a queue key").to_owned();
            let dump: Value = redis::cmd("DUMP")
                .arg(&key)
                .query_async(&mut self.conn)
                .await
                .expect("dump");
            out.insert(key, dump);
        }
        out
    }

    async fn set(&mut self, cmd: &[&str]) {
        let mut c = redis::cmd(cmd[0]);
        for a in &cmd[1..] {
            c.arg(*a);
        }
        let _: Value = c.query_async(&mut self.conn).await.expect("write");
    }
}

/// The error code of a script's refusal (`CORRUPT`, `NEWER`, `BADARG`, `BADACTION`).
fn code<T: std::fmt::Debug>(r: redis::RedisResult<T>) -> String {
    r.expect_err("refused").code().unwrap_or("none").to_owned()
}

#[tokio::test]
async fn enqueue_queues_keeps_restores_and_finds_the_legacy_name() {
    for topo in Topology::EVERY {
        let mut q = Q::new(topo).await;
        let (status, due, id) = q.enqueue("J:1", "60000", "").await;
        assert_eq!((status, id.as_str()), (1, "J:1"), "{topo:?}: QUEUED");
        assert_eq!(
            q.score(&q.k.waiting.clone(), "J:1").await,
            Some(due as f64),
            "{topo:?}"
        );
        assert_eq!(q.field(&q.k.count.clone(), "J:1").await.as_deref(), Some("0"));
        assert_eq!(q.field(&q.k.errors.clone(), "J:1").await.as_deref(), Some(NOTE));
        // ALREADY_QUEUED restores a lost job field and changes nothing else.
        let jobs = q.k.jobs.clone();
        q.set(&["HDEL", &jobs, "J:1"]).await;
        let before = q.score(&q.k.waiting.clone(), "J:1").await;
        assert_eq!(q.enqueue("J:1", "0", "").await, (0, 0, "J:1".into()), "{topo:?}");
        assert_eq!(
            q.field(&jobs, "J:1").await.as_deref(),
            Some(JOB),
            "{topo:?}: restored"
        );
        assert_eq!(
            q.score(&q.k.waiting.clone(), "J:1").await,
            before,
            "{topo:?}: due unchanged"
        );
        // An entry kept under the previous release's name is this job's entry.
        let (status, _, id) = q.enqueue("J:long~sha", "0", "J:1").await;
        assert_eq!(
            (status, id.as_str()),
            (0, "J:1"),
            "{topo:?}: found under the old name"
        );
        assert_eq!(q.sets_of("J:long~sha").await, Vec::<&str>::new(), "{topo:?}");
    }
}

#[tokio::test]
async fn enqueue_refusals_write_nothing() {
    for topo in Topology::EVERY {
        let mut q = Q::new(topo).await;
        q.enqueue("J:1", "0", "").await;
        let before = q.snapshot().await;
        for (delay, keep) in [
            ("-1", "5"),
            ("1e400", "5"),
            ("abc", "5"),
            ("0", "nan"),
            ("0", "1.5"),
        ] {
            let revival = "[]";
            let r: redis::RedisResult<Value> = q
                .run(&lua::QUEUE_ENQUEUE, &["J:2", JOB, delay, NOTE, revival, keep, ""])
                .await;
            assert_eq!(code(r), "BADARG", "{topo:?}: delay {delay} keep {keep}");
        }
        let meta = q.k.meta.clone();
        q.set(&["HSET", &meta, "v", "9"]).await;
        let newer = q.snapshot().await;
        let r: redis::RedisResult<Value> = q
            .run(&lua::QUEUE_ENQUEUE, &["J:2", JOB, "0", NOTE, "[]", "5", ""])
            .await;
        assert_eq!(code(r), "NEWER", "{topo:?}");
        assert_eq!(q.snapshot().await, newer, "{topo:?}: NEWER wrote something");
        q.set(&["HSET", &meta, "v", "2"]).await;
        let ready = q.k.ready.clone();
        q.set(&["SET", &ready, "not a zset"]).await;
        let damaged = q.snapshot().await;
        let r: redis::RedisResult<Value> = q
            .run(&lua::QUEUE_ENQUEUE, &["J:2", JOB, "0", NOTE, "[]", "5", ""])
            .await;
        assert_eq!(code(r), "CORRUPT", "{topo:?}");
        assert_eq!(q.snapshot().await, damaged, "{topo:?}: CORRUPT wrote something");
        q.set(&["DEL", &ready]).await;
        q.set(&["HSET", &meta, "v", "2"]).await;
        assert_ne!(before, damaged);
    }
}

#[tokio::test]
async fn claim_reclaims_promotes_and_leases_oldest_first_with_fresh_tokens() {
    for topo in Topology::EVERY {
        let mut q = Q::new(topo).await;
        for id in ["J:a", "J:b", "J:c"] {
            q.enqueue(id, "0", "").await;
        }
        let first = q.k.first.clone();
        // J:c failed first: it is leased first.
        q.set(&["ZADD", &first, "1", "J:c"]).await;
        let (now, reclaimed, promoted, leased) = q.claim("2", "1").await;
        assert_eq!((reclaimed, promoted), (0, 3), "{topo:?}");
        let ids: Vec<&str> = leased.iter().map(|e| e[0].as_str()).collect();
        assert_eq!(ids, ["J:c", "J:a"], "{topo:?}: oldest first failure first");
        assert!(
            leased[0][1].starts_with("nonce:") && leased[0][1] != leased[1][1],
            "{topo:?}: {leased:?}"
        );
        assert_eq!(&leased[0][2..4], [JOB, "0"], "{topo:?}");
        assert_eq!(leased[0][4], "1", "{topo:?}: the first failure");
        assert_eq!(leased[0][5], NOTE, "{topo:?}");
        assert!(now > 0);
        // The 1 ms leases run out: both come back first, then J:b is leased too.
        tokio::time::sleep(std::time::Duration::from_millis(5)).await;
        let (_, reclaimed, promoted, leased) = q.claim("10", "60000").await;
        assert_eq!((reclaimed, promoted, leased.len()), (2, 0, 3), "{topo:?}");
    }
}

#[tokio::test]
async fn claim_never_leases_twice_and_names_a_lost_job() {
    for topo in Topology::EVERY {
        let mut q = Q::new(topo).await;
        q.enqueue("J:live", "0", "").await;
        q.enqueue("J:dead", "0", "").await;
        q.enqueue("J:nojob", "0", "").await;
        q.enqueue("J:nofirst", "0", "").await;
        let (leased, dead, jobs, first) = (
            q.k.leased.clone(),
            q.k.dead.clone(),
            q.k.jobs.clone(),
            q.k.first.clone(),
        );
        // Damage: an id still leased and waiting, one dead and waiting, a lost job field,
        // a lost first-failure score.
        q.set(&["ZADD", &leased, "99999999999999", "J:live"]).await;
        q.set(&["ZADD", &dead, "1", "J:dead"]).await;
        q.set(&["HDEL", &jobs, "J:nojob"]).await;
        q.set(&["ZREM", &first, "J:nofirst"]).await;
        let (now, _, _, got) = q.claim("10", "60000").await;
        let ids: Vec<&str> = got.iter().map(|e| e[0].as_str()).collect();
        assert!(
            !ids.contains(&"J:live") && !ids.contains(&"J:dead"),
            "{topo:?}: {ids:?}"
        );
        let nojob = got.iter().find(|e| e[0] == "J:nojob").expect("leased");
        assert_eq!(
            nojob[2], "",
            "{topo:?}: a missing job is '' for the caller to dead-letter"
        );
        let nofirst = got.iter().find(|e| e[0] == "J:nofirst").expect("leased");
        assert_eq!(
            nofirst[4].parse::<i64>().ok(),
            Some(now),
            "{topo:?}: indexed at now"
        );
        assert_eq!(q.sets_of("J:live").await, ["leased"], "{topo:?}");
        assert_eq!(q.sets_of("J:dead").await, ["dead"], "{topo:?}");
        // A lease counter INCR cannot add to is refused before anything moves.
        let seq = q.k.seq.clone();
        q.set(&["SET", &seq, "x"]).await;
        let before = q.snapshot().await;
        let r: redis::RedisResult<Value> = q.run(&lua::QUEUE_CLAIM, &["1", "1000", "100", "n"]).await;
        assert_eq!(code(r), "CORRUPT", "{topo:?}");
        assert_eq!(q.snapshot().await, before, "{topo:?}");
        // INCR refuses a leading zero too: refused before anything moves, never half-way.
        for bad in ["007", "00", "-1", "1e3", " 7"] {
            q.set(&["SET", &seq, bad]).await;
            let before = q.snapshot().await;
            let r: redis::RedisResult<Value> = q.run(&lua::QUEUE_CLAIM, &["1", "1000", "100", "n"]).await;
            assert_eq!(code(r), "CORRUPT", "{topo:?}: seq {bad:?}");
            assert_eq!(q.snapshot().await, before, "{topo:?}: seq {bad:?}");
        }
        // A counter past Lua's 14 digits of number-to-text still makes exact, distinct tokens.
        q.set(&["SET", &seq, "123456789012340"]).await;
        q.enqueue("J:big1", "0", "").await;
        q.enqueue("J:big2", "0", "").await;
        let (_, _, _, big) = q.claim("2", "60000").await;
        let tokens: Vec<&str> = big.iter().map(|e| e[1].as_str()).collect();
        assert_eq!(
            tokens,
            ["nonce:123456789012341", "nonce:123456789012342"],
            "{topo:?}"
        );
        q.set(&["SET", &seq, "7"]).await;
        let r: redis::RedisResult<Value> = q.run(&lua::QUEUE_CLAIM, &["0", "1000", "100", "n"]).await;
        assert_eq!(code(r), "BADARG", "{topo:?}: k must be >= 1");
        // Without a nonce nothing moves: no token could be made.
        let waiting = q.k.waiting.clone();
        q.set(&["ZADD", &waiting, "1", "J:nofirst"]).await;
        let before = q.snapshot().await;
        for nonce in [&["1", "1000", "100", ""][..], &["1", "1000", "100"][..]] {
            let r: redis::RedisResult<Value> = q.run(&lua::QUEUE_CLAIM, nonce).await;
            assert_eq!(code(r), "BADARG", "{topo:?}: {nonce:?}");
        }
        assert_eq!(
            q.snapshot().await,
            before,
            "{topo:?}: a refused claim moved something"
        );
        // A meta key of another type is CORRUPT by name, before anything is read from it.
        let meta = q.k.meta.clone();
        q.set(&["DEL", &meta]).await;
        q.set(&["SET", &meta, "x"]).await;
        let r: redis::RedisResult<Value> = q.run(&lua::QUEUE_STATS, &[]).await;
        assert_eq!(code(r), "CORRUPT", "{topo:?}");
    }
}

/// One leased entry's (id, token).
async fn leased_one(q: &mut Q, id: &str) -> String {
    q.enqueue(id, "0", "").await;
    let (_, _, _, got) = q.claim("1", "60000").await;
    assert_eq!(got[0][0], id);
    got[0][1].clone()
}

#[tokio::test]
async fn settle_ends_a_lease_as_its_action_says() {
    for topo in Topology::EVERY {
        let mut q = Q::new(topo).await;
        let (count, errors, first, alerts) = (
            q.k.count.clone(),
            q.k.errors.clone(),
            q.k.first.clone(),
            q.k.alerts.clone(),
        );
        let token = leased_one(&mut q, "J:ack").await;
        assert_eq!(
            q.settle("J:ack", &token, "ack", "0", "0").await,
            Ok(1),
            "{topo:?}"
        );
        assert_eq!(q.sets_of("J:ack").await, Vec::<&str>::new(), "{topo:?}");
        assert_eq!(
            (
                q.field(&q.k.jobs.clone(), "J:ack").await,
                q.score(&first, "J:ack").await
            ),
            (None, None)
        );

        let token = leased_one(&mut q, "J:retry").await;
        assert_eq!(q.settle("J:retry", &token, "retry", "4", "60000").await, Ok(1));
        assert_eq!(q.sets_of("J:retry").await, ["waiting"], "{topo:?}");
        assert_eq!(q.field(&count, "J:retry").await.as_deref(), Some("4"));
        assert_eq!(q.field(&errors, "J:retry").await.as_deref(), Some(NOTE));

        let token = leased_one(&mut q, "J:dead").await;
        assert_eq!(q.settle("J:dead", &token, "dead", "30", "0").await, Ok(1));
        assert_eq!(q.sets_of("J:dead").await, ["dead"], "{topo:?}");
        assert!(
            q.score(&alerts, "J:dead").await.is_some(),
            "{topo:?}: an alert is owed"
        );
        assert_eq!(q.score(&first, "J:dead").await, None, "{topo:?}: no longer live");

        // Later before release: a released entry is due at once, and would be claimed next.
        let token = leased_one(&mut q, "J:later").await;
        assert_eq!(q.settle("J:later", &token, "later", "9", "60000").await, Ok(1));
        assert_eq!(q.sets_of("J:later").await, ["waiting"], "{topo:?}");
        assert_eq!(
            q.field(&count, "J:later").await.as_deref(),
            Some("0"),
            "count kept"
        );
        let token = leased_one(&mut q, "J:release").await;
        q.set(&["ZREM", &first, "J:release"]).await;
        assert_eq!(q.settle("J:release", &token, "release", "9", "0").await, Ok(1));
        assert_eq!(q.sets_of("J:release").await, ["ready"], "{topo:?}");
        assert!(
            q.score(&first, "J:release").await.is_some(),
            "{topo:?}: indexed at now"
        );
        assert_eq!(
            q.field(&count, "J:release").await.as_deref(),
            Some("0"),
            "count kept"
        );
    }
}

#[tokio::test]
async fn settle_by_a_stale_holder_or_with_a_bad_action_changes_nothing() {
    for topo in Topology::EVERY {
        let mut q = Q::new(topo).await;
        let _token = leased_one(&mut q, "J:1").await;
        let before = q.snapshot().await;
        assert_eq!(
            q.settle("J:1", "stale", "ack", "0", "0").await,
            Ok(0),
            "{topo:?}: LEASE_LOST"
        );
        assert_eq!(q.snapshot().await, before, "{topo:?}");
        assert_eq!(
            code(q.settle("J:1", "stale", "bogus", "0", "0").await),
            "BADACTION"
        );
        assert_eq!(code(q.settle("J:1", "stale", "retry", "-1", "0").await), "BADARG");
        assert_eq!(
            code(q.settle("J:1", "stale", "retry", "0", "inf").await),
            "BADARG"
        );
        assert_eq!(q.snapshot().await, before, "{topo:?}: a refusal wrote something");
    }
}

#[tokio::test]
async fn bury_moves_a_live_entry_to_the_dead_and_alerts_a_dead_one_again() {
    for topo in Topology::EVERY {
        let mut q = Q::new(topo).await;
        let (count, alerts) = (q.k.count.clone(), q.k.alerts.clone());
        let _token = leased_one(&mut q, "J:1").await;
        assert_eq!(
            q.bury("J:1", NOTE, "5").await,
            (1, "J:1".into()),
            "{topo:?}: BURIED"
        );
        assert_eq!(q.sets_of("J:1").await, ["dead"], "{topo:?}");
        assert_eq!(
            q.field(&count, "J:1").await.as_deref(),
            Some("1"),
            "{topo:?}: one more failure"
        );
        assert_eq!(
            q.field(&q.k.lease.clone(), "J:1").await,
            None,
            "{topo:?}: the lease is gone"
        );
        let alerts_before = q.score(&alerts, "J:1").await.expect("alert owed");
        q.set(&["ZADD", &alerts, "1", "J:1"]).await;
        assert_eq!(
            q.bury("J:1", NOTE, "5").await,
            (0, "J:1".into()),
            "{topo:?}: ALREADY_DEAD"
        );
        assert!(
            q.score(&alerts, "J:1").await.expect("owed again") >= alerts_before,
            "{topo:?}"
        );
        let history: Vec<serde_json::Value> =
            serde_json::from_str(&q.field(&q.k.errors.clone(), "J:1").await.expect("history")).expect("JSON");
        assert_eq!(history.len(), 3, "{topo:?}: the enqueue's note and two appended");
    }
}

/// includes/history.lua, through queue_bury: the newest `keep` notes; an old history that
/// cannot be read is replaced; a note that cannot be encoded again is dropped.
#[tokio::test]
async fn history_keeps_the_newest_and_never_fails_on_a_damaged_one() {
    for topo in Topology::EVERY {
        let mut q = Q::new(topo).await;
        let errors = q.k.errors.clone();
        let note = |m: &str| format!(r#"[{{"atMs":1,"kind":"k","message":"{m}"}}]"#);
        for m in ["a", "b", "c"] {
            q.bury("J:1", &note(m), "2").await;
        }
        let kept = |text: String| -> Vec<String> {
            let notes: Vec<serde_json::Value> = serde_json::from_str(&text).expect("a JSON array");
            notes
                .iter()
                .map(|n| n["message"].as_str().unwrap_or("?").to_owned())
                .collect()
        };
        assert_eq!(
            kept(q.field(&errors, "J:1").await.expect("h")),
            ["b", "c"],
            "{topo:?}"
        );
        q.set(&["HSET", &errors, "J:1", "not json"]).await;
        q.bury("J:1", &note("d"), "2").await;
        assert_eq!(
            kept(q.field(&errors, "J:1").await.expect("h")),
            ["d"],
            "{topo:?}: replaced"
        );
        q.set(&[
            "HSET",
            &errors,
            "J:1",
            r#"[{"atMs":1e400,"kind":"x","message":"huge"}]"#,
        ])
        .await;
        q.bury("J:1", &note("e"), "2").await;
        assert_eq!(
            kept(q.field(&errors, "J:1").await.expect("h")),
            ["e"],
            "{topo:?}: dropped"
        );
    }
}

#[tokio::test]
async fn redrive_puts_the_dead_back_and_cleans_those_without_a_job() {
    for topo in Topology::EVERY {
        let mut q = Q::new(topo).await;
        let (jobs, count) = (q.k.jobs.clone(), q.k.count.clone());
        for id in ["J:1", "J:2", "J:3"] {
            q.bury(id, NOTE, "5").await;
        }
        q.set(&["HDEL", &jobs, "J:3"]).await;
        let one: (i64, i64) = q.run(&lua::QUEUE_REDRIVE, &["J:1", "10"]).await.expect("redrive");
        assert_eq!(one, (1, 0), "{topo:?}");
        assert_eq!(q.sets_of("J:1").await, ["waiting"], "{topo:?}");
        assert_eq!(q.field(&count, "J:1").await.as_deref(), Some("0"), "{topo:?}");
        let rest: (i64, i64) = q.run(&lua::QUEUE_REDRIVE, &["", "10"]).await.expect("redrive");
        assert_eq!(rest, (1, 1), "{topo:?}: J:2 back, J:3 cleaned away");
        assert_eq!(q.sets_of("J:3").await, Vec::<&str>::new(), "{topo:?}");
        let r: redis::RedisResult<Value> = q.run(&lua::QUEUE_REDRIVE, &["", "0"]).await;
        assert_eq!(code(r), "BADARG", "{topo:?}");
    }
}

#[tokio::test]
async fn stats_count_an_expired_lease_as_due_and_refuse_a_newer_state() {
    for topo in Topology::EVERY {
        let mut q = Q::new(topo).await;
        q.enqueue("J:due", "0", "").await;
        q.enqueue("J:later", "60000", "").await;
        q.bury("J:dead", NOTE, "5").await;
        let leased = q.k.leased.clone();
        q.set(&["ZREM", &q.k.waiting.clone(), "J:due"]).await;
        q.set(&["ZADD", &leased, "1", "J:due"]).await;
        let v: Vec<i64> = q.run(&lua::QUEUE_STATS, &[]).await.expect("stats");
        let (now, depth, due_now, in_flight, dead, oldest, next_due) =
            (v[0], v[1], v[2], v[3], v[4], v[5], v[6]);
        assert_eq!((depth, due_now, in_flight, dead), (2, 1, 0, 1), "{topo:?}: {v:?}");
        assert!(oldest > 0 && oldest <= now, "{topo:?}");
        assert!(next_due > now + 50_000, "{topo:?}: J:later's due time");
        let meta = q.k.meta.clone();
        q.set(&["HSET", &meta, "v", "3"]).await;
        let r: redis::RedisResult<Vec<i64>> = q.run(&lua::QUEUE_STATS, &[]).await;
        assert_eq!(code(r), "NEWER", "{topo:?}");
    }
}

#[tokio::test]
async fn alerted_marks_only_what_was_read() {
    for topo in Topology::EVERY {
        let mut q = Q::new(topo).await;
        let alerts = q.k.alerts.clone();
        q.set(&["ZADD", &alerts, "100", "J:1", "200", "J:2"]).await;
        // J:2 died again after it was read (score 150 then): its alert stays owed.
        let marked: i64 = q
            .run(&lua::QUEUE_ALERTED, &["J:1", "100", "J:2", "150"])
            .await
            .expect("alerted");
        assert_eq!(marked, 1, "{topo:?}");
        assert_eq!(q.score(&alerts, "J:1").await, None, "{topo:?}");
        assert_eq!(q.score(&alerts, "J:2").await, Some(200.0), "{topo:?}");
    }
}

#[tokio::test]
async fn the_lock_is_extended_and_released_only_by_its_holder() {
    for topo in Topology::EVERY {
        let mut conn = topo.connect().await;
        let key = unique_ns("lualock").drainer_lock();
        let lock = OneKey {
            name: "lock",
            key: &key,
        };
        let _: Value = redis::cmd("SET")
            .arg(&key)
            .arg("mine")
            .arg("PX")
            .arg(10_000)
            .query_async(&mut conn)
            .await
            .expect("set");
        let call = |s: &'static lua::LuaScript, token: &str, ttl: Option<u64>| {
            let mut c = s.prepare(&lock);
            c.arg(token);
            if let Some(ttl) = ttl {
                c.arg(ttl);
            }
            c
        };
        let n: i64 = call(&lua::LOCK_EXTEND, "theirs", Some(60_000))
            .invoke_async(&mut conn)
            .await
            .expect("extend");
        assert_eq!(n, 0, "{topo:?}: NOT_HELD");
        let n: i64 = call(&lua::LOCK_EXTEND, "mine", Some(60_000))
            .invoke_async(&mut conn)
            .await
            .expect("extend");
        let ttl: i64 = redis::cmd("PTTL")
            .arg(&key)
            .query_async(&mut conn)
            .await
            .expect("pttl");
        assert_eq!(n, 1, "{topo:?}: EXTENDED");
        assert!(ttl > 50_000, "{topo:?}: {ttl}");
        let n: i64 = call(&lua::LOCK_RELEASE, "theirs", None)
            .invoke_async(&mut conn)
            .await
            .expect("release");
        assert_eq!(n, 0, "{topo:?}: NOT_HELD");
        let n: i64 = call(&lua::LOCK_RELEASE, "mine", None)
            .invoke_async(&mut conn)
            .await
            .expect("release");
        assert_eq!(n, 1, "{topo:?}: RELEASED");
        let exists: i64 = redis::cmd("EXISTS")
            .arg(&key)
            .query_async(&mut conn)
            .await
            .expect("exists");
        assert_eq!(exists, 0, "{topo:?}");
    }
}
