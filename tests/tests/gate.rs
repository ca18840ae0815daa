//! The rate gate against real Redis: standalone and a 3-node cluster.

use std::process::Stdio;
use std::sync::Arc;
use std::time::Duration;

use lawsync::config::GateConfig;
use lawsync::gate::Grant;
use lawsync::{Deadline, Gate, GateError, Refusal};
use lawsync_tests::servers::{Topology, settle_gate, unique_env, unique_ns};
use tokio::io::AsyncWriteExt;

fn cfg(interval_ms: u64, burst: u32, max_wait_ms: u64) -> GateConfig {
    GateConfig::new(
        Duration::from_millis(interval_ms),
        burst,
        Duration::from_millis(max_wait_ms),
    )
}

fn assert_spaced(mut times: Vec<u64>, interval: Duration) {
    assert!(times.len() >= 2);
    times.sort_unstable();
    let min_gap = times
        .windows(2)
        .map(|w| w[1] - w[0])
        .min()
        .expect("two or more slots");
    assert!(
        min_gap >= interval.as_micros() as u64,
        "starts closer than allowed: min gap {min_gap} µs < {} µs",
        interval.as_micros()
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_gates_and_many_tasks_share_one_interval() {
    for topo in Topology::EVERY {
        let ns = unique_ns("spacing");
        let interval = Duration::from_millis(15);
        // Two independent gates, each with its own connection, as two instances would have.
        let gates = [
            Arc::new(Gate::new(topo.connect().await, &ns, cfg(15, 1, 30_000))),
            Arc::new(Gate::new(topo.connect().await, &ns, cfg(15, 1, 30_000))),
        ];
        let tasks: Vec<_> = (0..24)
            .map(|i| {
                let gate = gates[i % 2].clone();
                tokio::spawn(async move { gate.acquire(Deadline::NONE).await })
            })
            .collect();
        let mut grants: Vec<Grant> = Vec::new();
        for t in tasks {
            grants.push(t.await.expect("task").expect("grant"));
        }
        // The moments of grant, on Redis' clock, are never closer than the interval, however
        // late a caller woke (a late one starts in its gap and moves the next back).
        assert_spaced(grants.iter().map(|g| g.granted_at_us).collect(), interval);
        for g in &grants {
            assert!(
                g.granted_at_us >= g.slot_us,
                "{topo:?}: granted before its slot: {g:?}"
            );
            // No polling: one reservation, one confirmation, one more call per moved slot.
            assert!(g.round_trips <= 2 + g.reslotted, "{topo:?}: polled: {g:?}");
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn separate_processes_and_local_tasks_share_one_interval() {
    let probe = env!("CARGO_BIN_EXE_gate-probe");
    for topo in Topology::EVERY {
        let env = unique_env("procs");
        let ns = lawsync::Namespace::new(&env, "law-go-kr").expect("ns");
        let mut children = Vec::new();
        for _ in 0..2 {
            let child = tokio::process::Command::new(probe)
                .args([format!("{topo:?}"), env.clone(), "20".into(), "6".into()])
                .stdin(Stdio::piped())
                .stdout(Stdio::piped())
                .kill_on_drop(true)
                .spawn()
                .expect("spawn gate-probe");
            children.push(child);
        }
        // Give both probes time to connect, then release them and the local tasks together.
        tokio::time::sleep(Duration::from_millis(300)).await;
        let gate = Arc::new(Gate::new(topo.connect().await, &ns, cfg(20, 1, 30_000)));
        for c in &mut children {
            c.stdin
                .take()
                .expect("stdin")
                .write_all(b"go\n")
                .await
                .expect("release probe");
        }
        let local: Vec<_> = (0..6)
            .map(|_| {
                let gate = gate.clone();
                tokio::spawn(async move { gate.acquire(Deadline::NONE).await })
            })
            .collect();
        let mut starts = Vec::new();
        for t in local {
            starts.push(t.await.expect("task").expect("grant").granted_at_us);
        }
        for c in children {
            let out = c.wait_with_output().await.expect("probe output");
            assert!(
                out.status.success(),
                "{topo:?}: probe failed: {}",
                String::from_utf8_lossy(&out.stderr)
            );
            let text = String::from_utf8(out.stdout).expect("utf8");
            let got: Vec<u64> = text.lines().map(|l| l.parse().expect("grant time")).collect();
            assert_eq!(got.len(), 6, "{topo:?}: probe printed {text:?}");
            starts.extend(got);
        }
        assert_eq!(starts.len(), 18);
        // Whatever the tolerance, the interval is the floor.
        assert_spaced(starts, Duration::from_millis(20));
    }
}

#[tokio::test]
async fn burst_allows_back_to_back_calls_then_spaces() {
    for topo in Topology::EVERY {
        let ns = unique_ns("burst");
        settle_gate(&mut topo.connect().await, &ns.gate()).await;
        let gate = Gate::new(topo.connect().await, &ns, cfg(200, 3, 30_000));
        let mut grants = Vec::new();
        for _ in 0..4 {
            grants.push(gate.acquire(Deadline::NONE).await.expect("grant"));
        }
        for g in &grants[..3] {
            assert_eq!(g.round_trips, 1, "{topo:?}: burst call had to wait: {g:?}");
        }
        // One reservation and one confirmation (plus one per slot moved behind a late
        // start on a busy test machine).
        assert_eq!(
            grants[3].round_trips,
            2 + grants[3].reslotted,
            "{topo:?}: 4th call should wait: {:?}",
            grants[3]
        );
        assert!(
            grants[3].slot_us >= grants[0].slot_us + 200_000,
            "{topo:?}: {grants:?}"
        );
    }
}

#[tokio::test]
async fn defer_never_shortens_a_cooldown() {
    for topo in Topology::EVERY {
        let gate = Gate::new(topo.connect().await, &unique_ns("defer"), cfg(100, 1, 30_000));
        let long = gate.defer(Duration::from_secs(20)).await.expect("defer");
        let short = gate.defer(Duration::from_millis(200)).await.expect("defer");
        assert_eq!(
            short.until_us, long.until_us,
            "{topo:?}: a shorter defer moved the end"
        );
        let status = gate.status().await.expect("status");
        assert!(
            status.cooldown.is_some_and(|c| c > Duration::from_secs(19)),
            "{topo:?}: {status:?}"
        );
        let longer = gate.defer(Duration::from_secs(40)).await.expect("defer");
        assert!(
            longer.until_us > long.until_us,
            "{topo:?}: a longer defer must extend"
        );
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn cooldown_holds_back_a_caller_that_already_reserved_a_slot() {
    for topo in Topology::EVERY {
        // A wide tolerance, so that only the cooldown (never a late wake-up) can void the slot.
        let wide = GateConfig {
            tolerance: Duration::from_millis(75),
            ..cfg(300, 1, 30_000)
        };
        let ns = unique_ns("hold");
        settle_gate(&mut topo.connect().await, &ns.gate()).await;
        let gate = Arc::new(Gate::new(topo.connect().await, &ns, wide));
        let first = gate.acquire(Deadline::NONE).await.expect("first grant");
        let sleeper = {
            let gate = gate.clone();
            tokio::spawn(async move { gate.acquire(Deadline::NONE).await })
        };
        // Wait until the sleeper holds its slot (first + 300 ms); then a 429 elsewhere
        // sets a cooldown over it.
        while gate.stats().round_trips < 2 {
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
        let cooldown = gate.defer(Duration::from_millis(700)).await.expect("defer");
        let held = sleeper.await.expect("task").expect("grant after cooldown");
        assert!(
            cooldown.until_us > first.slot_us + 300_000,
            "{topo:?}: the cooldown must cover the held slot"
        );
        assert!(
            held.slot_us >= cooldown.until_us && held.granted_at_us >= cooldown.until_us,
            "{topo:?}: granted inside the cooldown: {held:?}, cooldown until {}",
            cooldown.until_us
        );
        assert!(
            held.reslotted >= 1,
            "{topo:?}: the held slot was not voided: {held:?}"
        );
        assert_eq!(
            held.round_trips,
            2 + held.reslotted,
            "{topo:?}: reserve, voided confirm, confirm: {held:?}"
        );
    }
}

#[tokio::test]
async fn a_wait_over_the_bound_fails_at_once_and_reserves_nothing() {
    for topo in Topology::EVERY {
        let ns = unique_ns("bound");
        settle_gate(&mut topo.connect().await, &ns.gate()).await;
        let gate = Gate::new(topo.connect().await, &ns, cfg(10_000, 1, 1_000));
        gate.acquire(Deadline::NONE).await.expect("first grant");
        let before = gate.status().await.expect("status");
        let err = gate
            .acquire(Deadline::NONE)
            .await
            .expect_err("second must be refused");
        match err {
            GateError::WaitTooLong { wait, bound, cause } => {
                assert!(wait > Duration::from_secs(8), "{topo:?}: wait {wait:?}");
                assert_eq!(bound, Duration::from_secs(1));
                assert_eq!(cause, Refusal::QueueAhead, "{topo:?}: no cooldown, callers ahead");
            }
            other => panic!("{topo:?}: unexpected {other:?}"),
        }
        let after = gate.status().await.expect("status");
        assert!(
            after.next_slot_in <= before.next_slot_in,
            "{topo:?}: the refusal reserved a slot: {before:?} -> {after:?}"
        );
        let stats = gate.stats();
        assert_eq!(
            (stats.round_trips, stats.refusals),
            (2, 1),
            "{topo:?}: the refusal must not sleep and retry"
        );
        // The caller's own deadline shortens the bound further.
        let gate = Gate::new(
            topo.connect().await,
            &unique_ns("deadline"),
            cfg(5_000, 1, 30_000),
        );
        gate.acquire(Deadline::NONE).await.expect("first grant");
        let err = gate
            .acquire(Deadline::after(Duration::from_millis(1_500)))
            .await
            .expect_err("refused");
        assert!(
            matches!(err, GateError::WaitTooLong { bound, cause: Refusal::Deadline, .. } if bound <= Duration::from_secs(1)),
            "{topo:?}: the deadline, not the wait bound, refused it: {err:?}"
        );
    }
}

#[tokio::test]
async fn a_refusal_during_cooldown_names_the_cooldown() {
    for topo in Topology::EVERY {
        let gate = Gate::new(topo.connect().await, &unique_ns("coolref"), cfg(100, 1, 30_000));
        gate.defer(Duration::from_secs(60)).await.expect("defer");
        let err = gate.acquire(Deadline::NONE).await.expect_err("refused");
        let GateError::WaitTooLong {
            cause: Refusal::Cooldown { remaining: c },
            wait,
            ..
        } = &err
        else {
            panic!("{topo:?}: {err:?}")
        };
        assert!(*c > Duration::from_secs(59) && *wait >= *c, "{topo:?}: {err:?}");
        let text = err.to_string();
        assert!(text.contains("cluster cooldown"), "{text}");
        assert_eq!(err.retry_after(), Some(*wait));
    }
}

#[tokio::test]
async fn keys_live_in_one_slot_under_the_namespace_tag() {
    let topo = Topology::Cluster;
    let ns = unique_ns("slot");
    let gate = Gate::new(topo.connect().await, &ns, cfg(100, 1, 30_000));
    gate.acquire(Deadline::NONE).await.expect("grant");
    let mut conn = topo.connect().await;
    let slot_of_key: i64 = redis::cmd("CLUSTER")
        .arg("KEYSLOT")
        .arg(ns.gate())
        .query_async(&mut conn)
        .await
        .expect("keyslot");
    let slot_of_tag: i64 = redis::cmd("CLUSTER")
        .arg("KEYSLOT")
        .arg(ns.tag())
        .query_async(&mut conn)
        .await
        .expect("keyslot");
    assert_eq!(slot_of_key, slot_of_tag);
    let ttl: i64 = redis::cmd("PTTL")
        .arg(ns.gate())
        .query_async(&mut conn)
        .await
        .expect("pttl");
    assert!(ttl > 0, "the gate state must expire when idle, PTTL = {ttl}");
}

#[tokio::test]
async fn bad_redis_state_is_a_clear_error_and_never_a_grant() {
    for topo in Topology::EVERY {
        let mut conn = topo.connect().await;
        // A field that is not a number: the scripts refuse to guess.
        let ns = unique_ns("corrupt");
        let _: () = redis::cmd("HSET")
            .arg(ns.gate())
            .arg("tat")
            .arg("soon")
            .query_async(&mut conn)
            .await
            .expect("hset");
        let gate = Gate::new(topo.connect().await, &ns, cfg(100, 1, 30_000));
        for err in [
            gate.acquire(Deadline::NONE).await.expect_err("corrupt tat"),
            gate.defer(Duration::from_secs(1)).await.expect_err("corrupt tat"),
            gate.status().await.expect_err("corrupt tat"),
        ] {
            let GateError::Unavailable(lawsync::RedisFailure::Corrupt(what)) = &err else {
                panic!("{topo:?}: {err:?}")
            };
            assert!(
                what.contains(&ns.gate()),
                "{topo:?}: the error names the key: {err}"
            );
            assert!(err.to_string().contains("delete the key"), "{err}");
        }
        assert_eq!(gate.stats().grants, 0);
        // The key holds another type altogether.
        let ns = unique_ns("wrongtype");
        let _: () = redis::cmd("SET")
            .arg(ns.gate())
            .arg("x")
            .query_async(&mut conn)
            .await
            .expect("set");
        let gate = Gate::new(topo.connect().await, &ns, cfg(100, 1, 30_000));
        let err = gate.acquire(Deadline::NONE).await.expect_err("wrong type");
        // CORRUPT by name (it was a bare WRONGTYPE half-way through the script).
        let GateError::Unavailable(lawsync::RedisFailure::Corrupt(what)) = &err else {
            panic!("{topo:?}: {err:?}")
        };
        assert!(
            what.contains(&ns.gate()) && what.contains("not a hash"),
            "{topo:?}: {err}"
        );
        // Deleting the key resets the gate, as the message says.
        let _: () = redis::cmd("DEL")
            .arg(ns.gate())
            .query_async(&mut conn)
            .await
            .expect("del");
        gate.acquire(Deadline::NONE)
            .await
            .expect("a reset gate grants again");
    }
}
