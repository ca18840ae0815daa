//! The retry queue against real Redis, standalone and a 3-node cluster.

use std::collections::HashSet;
use std::time::Duration;

use lawsync::Namespace;
use lawsync::queue::{Backoff, Enqueued, ErrorNote, Job, JobKind, RetryQueue, Settled};
use lawsync_tests::servers::{Topology, unique_ns};
use serde_json::json;

const LEASE: Duration = Duration::from_secs(30);

fn fast() -> Backoff {
    Backoff {
        base: Duration::from_millis(1),
        cap: Duration::from_millis(1),
    }
}

async fn queue(topo: Topology, ns: &Namespace, backoff: Backoff) -> RetryQueue {
    RetryQueue::new(topo.connect().await, ns).with_backoff(backoff)
}

fn detail(id: u32) -> Job {
    Job::detail(&id.to_string())
}

fn note(text: &str) -> ErrorNote {
    ErrorNote::now("http_status", text, Some(503))
}

#[tokio::test]
async fn enqueue_is_idempotent_per_job() {
    for topo in Topology::EVERY {
        let q = queue(topo, &unique_ns("idem"), fast()).await;
        assert!(matches!(
            q.enqueue(&detail(1), None, note("a")).await.expect("enqueue"),
            Enqueued::Queued { .. }
        ));
        assert_eq!(
            q.enqueue(&detail(1), None, note("b")).await.expect("enqueue"),
            Enqueued::AlreadyQueued
        );
        q.enqueue(&detail(2), None, note("c")).await.expect("enqueue");
        let stats = q.stats().await.expect("stats");
        assert_eq!(stats.depth, 2, "{topo:?}: {stats:?}");
        let lower = JobKind::Detail.as_str().to_lowercase();
        let bad: Job = serde_json::from_value(json!({ "type": lower, "identity": "1", "payload": {} }))
            .expect("a lower-case type reads");
        assert!(
            q.enqueue(&bad, None, note("x")).await.is_err(),
            "{topo:?}: lower-case type accepted"
        );
    }
}

#[tokio::test]
async fn due_entries_come_oldest_first_failure_first_and_never_early() {
    for topo in Topology::EVERY {
        let q = queue(topo, &unique_ns("order"), fast()).await;
        // P failed first but asked for a longer wait; Q failed later and is due sooner.
        q.enqueue(&detail(1), Some(Duration::from_millis(1500)), note("p"))
            .await
            .expect("p");
        tokio::time::sleep(Duration::from_millis(5)).await;
        q.enqueue(&detail(2), Some(Duration::from_millis(100)), note("q"))
            .await
            .expect("q");
        assert!(
            q.claim(10, LEASE).await.expect("claim").entries.is_empty(),
            "{topo:?}: claimed before due"
        );
        tokio::time::sleep(Duration::from_millis(400)).await;
        let early = q.claim(10, LEASE).await.expect("claim");
        let ids: Vec<&str> = early.entries.iter().map(|e| e.id.as_str()).collect();
        assert_eq!(ids, [detail(2).id()], "{topo:?}: only Q is due");
        q.release(&early.entries[0]).await.expect("release");
        tokio::time::sleep(Duration::from_millis(1600)).await;
        let both = q.claim(10, LEASE).await.expect("claim");
        let ids: Vec<&str> = both.entries.iter().map(|e| e.id.as_str()).collect();
        assert_eq!(
            ids,
            [detail(1).id(), detail(2).id()],
            "{topo:?}: oldest first failure first"
        );
        assert_eq!(both.entries[0].job, detail(1));
        assert_eq!(both.entries[0].retry_count, 0);
        assert_eq!(both.entries[0].errors.len(), 1);
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn concurrent_drainers_never_share_an_entry() {
    for topo in Topology::EVERY {
        let ns = unique_ns("race");
        let q = queue(topo, &ns, fast()).await;
        for i in 0..60 {
            q.enqueue(&detail(i), Some(Duration::ZERO), note("x"))
                .await
                .expect("enqueue");
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
        let mut tasks = Vec::new();
        for _ in 0..3 {
            let q = queue(topo, &ns, fast()).await;
            tasks.push(tokio::spawn(async move {
                let mut got = Vec::new();
                // Bounded: 60 entries in batches of 4 need 15 claims; more means entries
                // are being handed out again.
                for _ in 0..100 {
                    let c = q.claim(4, LEASE).await.expect("claim");
                    if c.entries.is_empty() {
                        return got;
                    }
                    got.extend(c.entries.into_iter().map(|e| e.id));
                }
                got
            }));
        }
        let mut seen = HashSet::new();
        let mut total = 0;
        for t in tasks {
            for id in t.await.expect("task") {
                total += 1;
                assert!(seen.insert(id.clone()), "{topo:?}: {id} handed out twice");
            }
        }
        assert_eq!((total, seen.len()), (60, 60), "{topo:?}");
        assert_eq!(q.stats().await.expect("stats").in_flight, 60);
    }
}

#[tokio::test]
async fn a_dead_drainers_lease_expires_and_its_late_ack_is_refused() {
    for topo in Topology::EVERY {
        let q = queue(topo, &unique_ns("lease"), fast()).await;
        q.enqueue(&detail(7), Some(Duration::ZERO), note("x"))
            .await
            .expect("enqueue");
        tokio::time::sleep(Duration::from_millis(10)).await;
        let dead_drainer = q
            .claim(1, Duration::from_millis(1000))
            .await
            .expect("claim")
            .entries;
        assert_eq!(dead_drainer.len(), 1);
        // The drainer "dies": no ack. While its lease is live, nobody else gets the entry.
        assert!(
            q.claim(1, LEASE).await.expect("claim").entries.is_empty(),
            "{topo:?}"
        );
        tokio::time::sleep(Duration::from_millis(1300)).await;
        let second = q.claim(1, LEASE).await.expect("claim");
        assert_eq!(second.reclaimed, 1, "{topo:?}");
        assert_eq!(second.entries.len(), 1);
        assert!(
            !q.ack(&dead_drainer[0]).await.expect("ack"),
            "{topo:?}: an expired lease acked"
        );
        assert_eq!(
            q.fail(&dead_drainer[0], note("late"), None, 30)
                .await
                .expect("fail"),
            Settled::LeaseLost
        );
        assert!(
            q.ack(&second.entries[0]).await.expect("ack"),
            "{topo:?}: the live lease must ack"
        );
        let stats = q.stats().await.expect("stats");
        assert_eq!(
            (stats.depth, stats.in_flight, stats.dead),
            (0, 0, 0),
            "{topo:?}: {stats:?}"
        );
    }
}

#[tokio::test]
async fn failures_reschedule_with_history_then_dead_letter_and_redrive() {
    for topo in Topology::EVERY {
        let q = queue(topo, &unique_ns("fail"), fast()).await;
        q.enqueue(&detail(3), Some(Duration::ZERO), note("first"))
            .await
            .expect("enqueue");
        for round in 1..=3u32 {
            tokio::time::sleep(Duration::from_millis(15)).await;
            let c = q.claim(1, LEASE).await.expect("claim");
            let leased = c.entries.first().expect("due").clone();
            assert_eq!(leased.retry_count, round - 1, "{topo:?}");
            assert_eq!(leased.errors.len() as u32, round, "{topo:?}: the history grows");
            let settled = q
                .fail(&leased, note(&format!("round {round}")), None, 3)
                .await
                .expect("fail");
            if round < 3 {
                assert!(
                    matches!(settled, Settled::Rescheduled { .. }),
                    "{topo:?}: {settled:?}"
                );
            } else {
                assert_eq!(settled, Settled::Dead, "{topo:?}");
            }
        }
        let stats = q.stats().await.expect("stats");
        assert_eq!((stats.depth, stats.dead), (0, 1), "{topo:?}: {stats:?}");
        let dead = q.dead(10).await.expect("dead");
        assert_eq!(dead.len(), 1);
        assert_eq!(dead[0].retry_count, 3);
        assert_eq!(
            dead[0].last_error.as_ref().map(|e| e.message.as_str()),
            Some("round 3")
        );
        assert_eq!(q.redrive(Some(&detail(404).id()), 10).await.expect("redrive"), 0);
        assert_eq!(q.redrive(Some(&detail(3).id()), 10).await.expect("redrive"), 1);
        tokio::time::sleep(Duration::from_millis(5)).await;
        let again = q.claim(1, LEASE).await.expect("claim").entries;
        assert_eq!(again.len(), 1, "{topo:?}: redriven entry is due now");
        assert_eq!(again[0].retry_count, 0, "{topo:?}: fresh entry");
        assert!(q.ack(&again[0]).await.expect("ack"));
    }
}

#[tokio::test]
async fn redrive_all_and_stats() {
    for topo in Topology::EVERY {
        let q = queue(topo, &unique_ns("stats"), fast()).await;
        for i in 0..5 {
            q.enqueue(&detail(i), Some(Duration::ZERO), note("x"))
                .await
                .expect("enqueue");
        }
        q.enqueue(&detail(99), Some(Duration::from_secs(60)), note("later"))
            .await
            .expect("enqueue");
        tokio::time::sleep(Duration::from_millis(10)).await;
        let c = q.claim(3, LEASE).await.expect("claim");
        for e in &c.entries {
            q.dead_letter(e, note("permanent")).await.expect("dead");
        }
        let stats = q.stats().await.expect("stats");
        assert_eq!(
            (stats.depth, stats.due_now, stats.in_flight, stats.dead),
            (3, 2, 0, 3),
            "{topo:?}: {stats:?}"
        );
        assert!(
            stats.oldest_age.is_some_and(|a| a >= Duration::from_millis(10)),
            "{stats:?}"
        );
        assert!(
            stats.next_due_in.is_some_and(|d| d > Duration::from_secs(50)),
            "{stats:?}"
        );
        assert_eq!(q.list(10).await.expect("list").len(), 3);
        assert_eq!(
            q.redrive(None, 2).await.expect("redrive"),
            2,
            "{topo:?}: limit respected"
        );
        assert_eq!(q.redrive(None, 100).await.expect("redrive"), 1);
        assert_eq!(q.stats().await.expect("stats").dead, 0);
    }
}

#[tokio::test]
async fn an_unreadable_entry_is_dead_lettered_not_lost() {
    for topo in Topology::EVERY {
        let ns = unique_ns("corrupt");
        let q = queue(topo, &ns, fast()).await;
        q.enqueue(&detail(5), Some(Duration::ZERO), note("x"))
            .await
            .expect("enqueue");
        let mut conn = topo.connect().await;
        let _: () = redis::cmd("HSET")
            .arg(ns.queue().jobs)
            .arg(detail(5).id())
            .arg("{not json")
            .query_async(&mut conn)
            .await
            .expect("corrupt it");
        tokio::time::sleep(Duration::from_millis(10)).await;
        let c = q.claim(5, LEASE).await.expect("claim");
        assert!(c.entries.is_empty());
        assert_eq!(c.corrupt, [detail(5).id()], "{topo:?}");
        let dead = q.dead(5).await.expect("dead");
        assert_eq!(dead.len(), 1);
        assert_eq!(dead[0].job, None, "{topo:?}: shown as unreadable");
        assert_eq!(
            dead[0].last_error.as_ref().map(|e| e.kind.as_str()),
            Some("corrupt_entry")
        );
    }
}

#[tokio::test]
async fn enqueue_while_leased_changes_nothing_and_retry_after_is_honoured() {
    for topo in Topology::EVERY {
        let q = queue(topo, &unique_ns("leased"), fast()).await;
        q.enqueue(&detail(8), Some(Duration::ZERO), note("x"))
            .await
            .expect("enqueue");
        tokio::time::sleep(Duration::from_millis(10)).await;
        let leased = q.claim(1, LEASE).await.expect("claim").entries;
        assert_eq!(
            q.enqueue(&detail(8), None, note("again")).await.expect("enqueue"),
            Enqueued::AlreadyQueued
        );
        let settled = q
            .fail(&leased[0], note("503"), Some(Duration::from_secs(120)), 30)
            .await
            .expect("fail");
        let Settled::Rescheduled { due_in } = settled else {
            panic!("{topo:?}: {settled:?}")
        };
        assert!(
            due_in >= Duration::from_secs(120),
            "{topo:?}: Retry-After not honoured: {due_in:?}"
        );
        let stats = q.stats().await.expect("stats");
        assert_eq!(
            (stats.depth, stats.due_now, stats.in_flight),
            (1, 0, 0),
            "{topo:?}: {stats:?}"
        );
        assert!(
            stats.next_due_in.is_some_and(|d| d > Duration::from_secs(110)),
            "{stats:?}"
        );
    }
}

#[tokio::test]
async fn an_expired_lease_counts_as_due_not_in_flight() {
    for topo in Topology::EVERY {
        let q = queue(topo, &unique_ns("expired"), fast()).await;
        q.enqueue(&detail(9), Some(Duration::ZERO), note("x"))
            .await
            .expect("enqueue");
        tokio::time::sleep(Duration::from_millis(10)).await;
        q.claim(1, Duration::from_millis(50)).await.expect("claim");
        tokio::time::sleep(Duration::from_millis(200)).await;
        let stats = q.stats().await.expect("stats");
        assert_eq!((stats.due_now, stats.in_flight), (1, 0), "{topo:?}: {stats:?}");
    }
}

#[tokio::test]
async fn entries_missing_a_part_are_neither_lost_nor_haunting() {
    for topo in Topology::EVERY {
        let ns = unique_ns("parts");
        let k = ns.queue();
        let q = queue(topo, &ns, fast()).await;
        let mut conn = topo.connect().await;
        // One entry loses its first-failure index, another its job.
        q.enqueue(&detail(1), Some(Duration::ZERO), note("x"))
            .await
            .expect("enqueue");
        q.enqueue(&detail(2), Some(Duration::ZERO), note("x"))
            .await
            .expect("enqueue");
        let _: () = redis::cmd("ZREM")
            .arg(&k.first)
            .arg(detail(1).id())
            .query_async(&mut conn)
            .await
            .expect("zrem");
        let _: () = redis::cmd("HDEL")
            .arg(&k.jobs)
            .arg(detail(2).id())
            .query_async(&mut conn)
            .await
            .expect("hdel");
        tokio::time::sleep(Duration::from_millis(10)).await;
        let c = q.claim(10, LEASE).await.expect("claim");
        let ids: Vec<&str> = c.entries.iter().map(|e| e.id.as_str()).collect();
        assert_eq!(
            ids,
            [detail(1).id()],
            "{topo:?}: the entry without an index is still claimed"
        );
        assert_eq!(
            c.corrupt,
            [detail(2).id()],
            "{topo:?}: the entry without a job is dead-lettered"
        );
        assert!(q.ack(&c.entries[0]).await.expect("ack"));
        let dead = q.dead(10).await.expect("dead");
        assert_eq!((dead.len(), dead[0].retry_count), (1, 1), "{topo:?}: {dead:?}");
        assert_eq!(
            dead[0].last_error.as_ref().map(|e| e.kind.as_str()),
            Some("corrupt_entry")
        );
        let stats = q.stats().await.expect("stats");
        assert_eq!(
            (stats.depth, stats.dead),
            (0, 1),
            "{topo:?}: nothing haunts the live set: {stats:?}"
        );
        // Redriving a dead letter whose job is gone cleans it away instead of reviving a ghost.
        assert_eq!(q.redrive(None, 10).await.expect("redrive"), 0);
        assert_eq!(q.stats().await.expect("stats").dead, 0, "{topo:?}");
    }
}

#[tokio::test]
async fn a_large_redrive_runs_in_bounded_steps() {
    let topo = Topology::Standalone;
    let q = queue(topo, &unique_ns("bulk"), fast()).await;
    for i in 0..1_200 {
        q.enqueue(&detail(i), Some(Duration::ZERO), note("x"))
            .await
            .expect("enqueue");
    }
    tokio::time::sleep(Duration::from_millis(10)).await;
    loop {
        let c = q.claim(50, LEASE).await.expect("claim");
        if c.entries.is_empty() {
            break;
        }
        for e in &c.entries {
            q.dead_letter(e, note("permanent")).await.expect("dead");
        }
    }
    assert_eq!(q.stats().await.expect("stats").dead, 1_200);
    // More than one script's worth (500): the Rust side loops.
    assert_eq!(q.redrive(None, 1_000).await.expect("redrive"), 1_000);
    assert_eq!(q.redrive(None, usize::MAX).await.expect("redrive"), 200);
    let stats = q.stats().await.expect("stats");
    assert_eq!((stats.dead, stats.depth), (0, 1_200));
}

/// Dead-letters `job` the way the drainer does: its last failure.
async fn kill(q: &RetryQueue, job: &Job) {
    q.enqueue(job, Some(Duration::ZERO), note("first"))
        .await
        .expect("enqueue");
    tokio::time::sleep(Duration::from_millis(10)).await;
    let leased = q.claim(1, LEASE).await.expect("claim").entries;
    assert_eq!(leased.len(), 1);
    assert_eq!(
        q.fail(&leased[0], note("last"), None, 1).await.expect("fail"),
        Settled::Dead
    );
}

/// New work for a job that died earlier (last week's outage) is not swallowed: the job
/// leaves the dead letters and their pending alerts, with fresh attempts and its story.
#[tokio::test]
async fn new_work_revives_a_dead_letter_with_fresh_attempts_and_its_history() {
    for topo in Topology::EVERY {
        let q = queue(topo, &unique_ns("revive"), fast()).await;
        kill(&q, &detail(3)).await;
        assert_eq!(q.pending_alerts(10).await.expect("alerts").len(), 1);
        let got = q.enqueue(&detail(3), None, note("today")).await.expect("enqueue");
        assert!(matches!(got, Enqueued::Revived { .. }), "{topo:?}: {got:?}");
        let stats = q.stats().await.expect("stats");
        assert_eq!((stats.depth, stats.dead), (1, 0), "{topo:?}: {stats:?}");
        assert!(q.pending_alerts(10).await.expect("alerts").is_empty(), "{topo:?}");
        tokio::time::sleep(Duration::from_millis(20)).await;
        let leased = q.claim(1, LEASE).await.expect("claim").entries;
        assert_eq!(leased.len(), 1, "{topo:?}");
        assert_eq!(leased[0].retry_count, 0, "{topo:?}: fresh attempts");
        let story: Vec<&str> = leased[0].errors.iter().map(|e| e.message.as_str()).collect();
        assert_eq!(story[..2], ["first", "last"], "{topo:?}: history kept: {story:?}");
        assert_eq!(story[3], "today", "{topo:?}: {story:?}");
        assert_eq!(leased[0].errors[2].kind, "revived", "{topo:?}: {story:?}");
        // Recording a permanent failure of a job that is dead already is not silent either.
        q.dead_letter(&leased[0], note("gone")).await.expect("dead");
        let owed = q.pending_alerts(10).await.expect("alerts");
        q.alerts_delivered(&owed).await.expect("delivered");
        let job = detail(3);
        let buried = q.record_dead(&job, note("still gone")).await.expect("bury");
        assert_eq!(buried, lawsync::queue::Buried::AlreadyDead, "{topo:?}");
        let owed = q.pending_alerts(10).await.expect("alerts");
        assert_eq!(owed.len(), 1, "{topo:?}: alerted again");
        let last = owed[0].last_error.as_ref().map(|e| e.message.as_str());
        assert_eq!(last, Some("still gone"), "{topo:?}");
    }
}

/// An entry whose job field was lost while it is leased is still that one entry: enqueueing
/// the job again restores the field, and no second lease is handed out while the first lives.
#[tokio::test]
async fn a_leased_entry_that_lost_its_job_field_is_never_leased_twice() {
    for topo in Topology::EVERY {
        let ns = unique_ns("twice");
        let q = queue(topo, &ns, fast()).await;
        q.enqueue(&detail(4), Some(Duration::ZERO), note("x"))
            .await
            .expect("enqueue");
        tokio::time::sleep(Duration::from_millis(10)).await;
        let first = q.claim(1, LEASE).await.expect("claim").entries;
        assert_eq!(first.len(), 1);
        let mut conn = topo.connect().await;
        let _: () = redis::cmd("HDEL")
            .arg(&ns.queue().jobs)
            .arg(detail(4).id())
            .query_async(&mut conn)
            .await
            .expect("lose the job field");
        let again = q
            .enqueue(&detail(4), Some(Duration::ZERO), note("y"))
            .await
            .expect("enqueue");
        assert_eq!(again, Enqueued::AlreadyQueued, "{topo:?}");
        tokio::time::sleep(Duration::from_millis(10)).await;
        let second = q.claim(5, LEASE).await.expect("claim");
        assert!(second.entries.is_empty(), "{topo:?}: leased twice: {second:?}");
        let stats = q.stats().await.expect("stats");
        assert_eq!((stats.depth, stats.in_flight), (1, 1), "{topo:?}: {stats:?}");
        let listed = q.list(5).await.expect("list");
        assert_eq!(
            listed[0].job,
            Some(detail(4)),
            "{topo:?}: the job field is restored"
        );
        assert!(q.ack(&first[0]).await.expect("ack"), "{topo:?}");
        assert_eq!(q.stats().await.expect("stats").depth, 0, "{topo:?}");
    }
}

/// The longest search the handlers accept (200 characters of query, the widest page
/// number) is a job the queue takes whole: queued once, claimed, failed to dead, redriven.
/// Its member name stays short and says what it is.
#[tokio::test]
async fn the_longest_accepted_search_can_be_parked_dead_lettered_and_redriven() {
    let longest = |query: String| {
        let req = lawsync::law::SearchRequest {
            from: "20260101".into(),
            to: "20261231".into(),
            query: Some(query),
            page: Some(u32::MAX),
            display: Some(100),
            ..Default::default()
        };
        assert!(req.params().is_ok(), "the handlers accept it");
        Job::search(&req)
    };
    let hangul = longest("가".repeat(200));
    let astral = longest("𝄞".repeat(200));
    let near = longest(format!("{}나", "가".repeat(199)));
    let id = hangul.id();
    assert!(
        id.starts_with(&format!("{}:20260101~20261231~가", JobKind::Search)) && id.len() < 160,
        "{id}"
    );
    assert_ne!(id, near.id(), "one name per job");
    for topo in Topology::EVERY {
        let q = queue(topo, &unique_ns("long"), fast()).await;
        for job in [&hangul, &astral, &near] {
            let parked = q.enqueue(job, Some(Duration::ZERO), note("x")).await;
            assert!(
                matches!(parked, Ok(Enqueued::Queued { .. })),
                "{topo:?}: {parked:?}"
            );
        }
        let again = q.enqueue(&hangul, None, note("y")).await.expect("enqueue");
        assert_eq!(again, Enqueued::AlreadyQueued, "{topo:?}");
        tokio::time::sleep(Duration::from_millis(10)).await;
        let claimed = q.claim(10, LEASE).await.expect("claim");
        assert_eq!(claimed.entries.len(), 3, "{topo:?}: {claimed:?}");
        for e in &claimed.entries {
            assert_eq!(
                q.fail(e, note("last"), None, 1).await.expect("fail"),
                Settled::Dead
            );
        }
        let dead = q.dead(10).await.expect("dead");
        let jobs: Vec<_> = dead.iter().filter_map(|d| d.job.clone()).collect();
        assert!(
            jobs.contains(&hangul) && jobs.contains(&astral),
            "{topo:?}: kept whole"
        );
        assert_eq!(q.redrive(Some(&id), 10).await.expect("redrive"), 1, "{topo:?}");
        assert_eq!(q.redrive(None, 10).await.expect("redrive"), 2, "{topo:?}");
        assert_eq!(q.stats().await.expect("stats").depth, 3, "{topo:?}");
    }
}

async fn raw(conn: &mut lawsync::RedisConn, args: &[&str]) {
    let mut cmd = redis::cmd(args[0]);
    for a in &args[1..] {
        cmd.arg(*a);
    }
    let _: redis::Value = cmd.query_async(conn).await.expect("raw command");
}

/// Review findings, each an entry left in no set: a claim that met a lease counter INCR
/// cannot add to after it had taken ids out of `ready`; a revival whose stored history
/// cjson reads but will not write; and an alert marked delivered although the entry died
/// again while it was being sent.
#[tokio::test]
async fn damage_met_half_way_never_drops_an_entry_or_an_alert() {
    for topo in Topology::EVERY {
        let ns = unique_ns("q-halfway");
        let q = queue(topo, &ns, fast()).await;
        let mut conn = topo.connect().await;
        let keys = ns.queue();
        for id in [1, 2] {
            q.enqueue(&detail(id), Some(Duration::ZERO), note("x"))
                .await
                .expect("enqueue");
        }
        raw(&mut conn, &["SET", &keys.seq, "garbage"]).await;
        tokio::time::sleep(Duration::from_millis(5)).await;
        let err = q.claim(2, LEASE).await.expect_err("a counter INCR cannot add to");
        assert!(err.to_string().contains("not a lease counter"), "{topo:?}: {err}");
        assert_eq!(q.stats().await.expect("stats").depth, 2, "{topo:?}");
        raw(&mut conn, &["DEL", &keys.seq]).await;
        assert_eq!(
            q.claim(2, LEASE).await.expect("claim").entries.len(),
            2,
            "{topo:?}: both still there"
        );

        // A dead letter whose history holds a number cjson will not encode again.
        let job = detail(3);
        kill(&q, &job).await;
        raw(
            &mut conn,
            &[
                "HSET",
                &keys.errors,
                &job.id(),
                r#"[{"atMs":1e400,"kind":"e","message":"m"}]"#,
            ],
        )
        .await;
        let revived = q
            .enqueue(&job, Some(Duration::ZERO), note("today"))
            .await
            .expect("revive");
        assert!(
            matches!(revived, Enqueued::Revived { .. }),
            "{topo:?}: {revived:?}"
        );
        assert_eq!(q.stats().await.expect("stats").dead, 0, "{topo:?}");
        tokio::time::sleep(Duration::from_millis(5)).await;
        let leased = q.claim(5, LEASE).await.expect("claim").entries;
        assert!(
            leased.iter().any(|l| l.id == job.id()),
            "{topo:?}: the revived entry is queued"
        );

        // Read for alerting, then the entry dies again before the alert is marked sent.
        let job = detail(4);
        kill(&q, &job).await;
        let read = q.pending_alerts(10).await.expect("alerts");
        assert!(read.iter().any(|v| v.id == job.id()), "{topo:?}");
        tokio::time::sleep(Duration::from_millis(5)).await;
        q.record_dead(&job, note("again")).await.expect("bury");
        q.alerts_delivered(&read).await.expect("delivered");
        let owed = q.pending_alerts(10).await.expect("alerts");
        assert!(
            owed.iter().any(|v| v.id == job.id()),
            "{topo:?}: the second death's alert was dropped"
        );
    }
}
