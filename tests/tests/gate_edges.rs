//! The gate's promises at its edges, through the library's own API on real Redis: one gate
//! per API key whatever the environment, a roll from the release before, a grant given
//! back, a moved holder past its bound, damaged and newer state.

use std::time::Duration;

use lawsync::app::law_gate;
use lawsync::config::GateConfig;
use lawsync::keys::GateKey;
use lawsync::{Deadline, Gate, GateError, RedisFailure, Refusal, Secret};
use lawsync_tests::servers::{Topology, settle_gate, unique_env, unique_ns};

fn cfg(interval_ms: u64, max_wait_ms: u64) -> GateConfig {
    GateConfig::new(
        Duration::from_millis(interval_ms),
        1,
        Duration::from_millis(max_wait_ms),
    )
}

fn key_of(label: &str) -> Secret {
    Secret::new(format!("oc-{}", unique_env(label)))
}

async fn hset(conn: &mut lawsync::RedisConn, key: &str, pairs: &[(&str, String)]) {
    let _: () = redis::cmd("HSET")
        .arg(key)
        .arg(pairs)
        .query_async(conn)
        .await
        .expect("HSET");
}

/// Issue 13.10: a staging stack (or a laptop) on the same Redis and key shares the
/// production gate; another key has a gate of its own; the key never reaches Redis.
#[tokio::test]
async fn environments_on_one_key_share_one_gate() {
    for topo in Topology::EVERY {
        let conn = topo.connect().await;
        let oc = key_of("shared");
        let (prod, staging) = (unique_ns("prod"), unique_ns("staging"));
        let a = law_gate(conn.clone(), &oc, &prod, cfg(200, 30_000)).expect("gate");
        let b = law_gate(conn.clone(), &oc, &staging, cfg(200, 30_000)).expect("gate");
        let other = law_gate(conn.clone(), &key_of("other"), &prod, cfg(200, 30_000)).expect("gate");
        assert_eq!(a.key(), b.key(), "{topo:?}");
        assert_ne!(a.key(), other.key(), "{topo:?}");
        assert!(!a.key().contains(oc.expose()), "{topo:?}: {}", a.key());
        settle_gate(&mut conn.clone(), a.key()).await;
        let first = a.acquire(Deadline::NONE).await.expect("grant");
        let second = b.acquire(Deadline::NONE).await.expect("grant");
        assert!(
            second.granted_at_us >= first.granted_at_us + 200_000,
            "{topo:?}: another APP_ENV started {} µs after, within the interval",
            second.granted_at_us - first.granted_at_us
        );
        let mut c = conn.clone();
        let keys: Vec<String> = redis::cmd("KEYS")
            .arg(format!("*{}*", oc.expose()))
            .query_async(&mut c)
            .await
            .expect("KEYS");
        assert!(keys.is_empty(), "{topo:?}: {keys:?}");
    }
}

/// Issue 13.11: the release before kept the gate per environment, without a version.
/// Mid-cooldown there, the new per-key gate honours that cooldown and schedule.
#[tokio::test]
async fn a_roll_keeps_the_previous_releases_cooldown_and_schedule() {
    for topo in Topology::EVERY {
        let mut conn = topo.connect().await;
        let ns = unique_ns("roll");
        let probe = Gate::new(conn.clone(), &unique_ns("clock"), cfg(1000, 1000));
        let now = probe.status().await.expect("status").now_us as i64;
        // As the release before wrote it: tat, sat (last start + interval − tolerance),
        // cool, epoch; no v.
        let old = [
            ("tat", (now + 4_000_000).to_string()),
            ("sat", (now + 2_950_000).to_string()),
            ("cool", (now + 3_000_000).to_string()),
            ("epoch", now.to_string()),
        ];
        hset(&mut conn, &ns.gate(), &old).await;
        let gate = law_gate(conn.clone(), &key_of("roll"), &ns, cfg(1000, 1000)).expect("gate");
        let st = gate.status().await.expect("status");
        let cool = st.cooldown.expect("the old cooldown is in force");
        assert!(cool > Duration::from_millis(2800), "{topo:?}: {st:?}");
        assert!(!st.fresh, "{topo:?}");
        match gate.acquire(Deadline::NONE).await {
            Err(GateError::WaitTooLong { wait, cause, .. }) => {
                assert!(matches!(cause, Refusal::Cooldown { .. }), "{topo:?}: {cause:?}");
                assert!(wait >= Duration::from_millis(3800), "{topo:?}: {wait:?}");
            }
            other => panic!("{topo:?}: a call inside the old cooldown: {other:?}"),
        }
    }
}

/// Issue 13.1b: a grant that could not be sent in time is given back, and the start it
/// would have been does not count.
#[tokio::test]
async fn a_stale_grant_is_given_back() {
    for topo in Topology::EVERY {
        let mut conn = topo.connect().await;
        let ns = unique_ns("stale");
        settle_gate(&mut conn, &ns.gate()).await;
        let gate = Gate::new(conn.clone(), &ns, cfg(200, 30_000));
        let grant = gate.acquire(Deadline::NONE).await.expect("grant");
        tokio::time::sleep(Duration::from_millis(10)).await;
        assert!(grant.age() > lawsync::policy::grant_validity(Duration::from_millis(200)));
        assert!(gate.give_back(&grant).await.expect("give back"), "{topo:?}");
        let next = gate.acquire(Deadline::NONE).await.expect("grant");
        assert_eq!(
            next.round_trips, 1,
            "{topo:?}: the unsent start still counted: {next:?}"
        );
        assert!(
            !gate.give_back(&grant).await.expect("give back"),
            "{topo:?}: given back twice"
        );
        assert_eq!(gate.stats().given_back, 1);
    }
}

/// Issue 13.3: a holder moved back behind a call that overran may wait past its own bound
/// (by up to one pace), instead of being refused with its slot left idle.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_moved_holder_waits_past_its_bound() {
    for topo in Topology::EVERY {
        let mut conn = topo.connect().await;
        let ns = unique_ns("moved");
        settle_gate(&mut conn, &ns.gate()).await;
        let gate = std::sync::Arc::new(Gate::new(conn.clone(), &ns, cfg(300, 30_000)));
        let first = gate.acquire(Deadline::NONE).await.expect("grant");
        let waiter = {
            let gate = gate.clone();
            tokio::spawn(async move {
                gate.acquire_within(Deadline::NONE, Duration::from_millis(350))
                    .await
            })
        };
        // While it sleeps towards its slot (first + 303 ms), a start recorded 100 ms before
        // that slot: the call before it overran, so it is moved back 200 ms at its confirm.
        tokio::time::sleep(Duration::from_millis(100)).await;
        let slot = first.granted_at_us + 303_000;
        hset(&mut conn, &ns.gate(), &[("sat", (slot + 200_000).to_string())]).await;
        let grant = waiter.await.expect("task").expect("moved, not refused");
        assert_eq!(grant.reslotted, 1, "{topo:?}: {grant:?}");
        assert!(grant.granted_at_us >= slot + 200_000, "{topo:?}: {grant:?}");
    }
}

/// Issue 13.6 and 13.11 through the library: damaged or newer state is a named error that
/// says what to do, and never a grant.
#[tokio::test]
async fn damaged_and_newer_state_are_named_errors() {
    let mut conn = Topology::Standalone.connect().await;
    for (field, value, want) in [
        ("tat", "nan", "CORRUPT"),
        ("cool", "1e400", "CORRUPT"),
        ("v", "9", "NEWER"),
    ] {
        let key = GateKey::for_secret("law-go-kr", &key_of("bad")).expect("key");
        settle_gate(&mut conn, key.as_str()).await;
        hset(&mut conn, key.as_str(), &[(field, value.to_owned())]).await;
        let gate = Gate::new(conn.clone(), key, cfg(200, 30_000));
        let err = gate.acquire(Deadline::NONE).await.expect_err("never a grant");
        let text = err.to_string();
        match (&err, want) {
            (GateError::Unavailable(RedisFailure::Corrupt(_)), "CORRUPT") => {
                assert!(text.contains("costs one interval of quiet"), "{text}");
            }
            (GateError::Unavailable(RedisFailure::Newer(_)), "NEWER") => {
                assert!(
                    text.contains("format 9, this release understands up to 2"),
                    "{text}"
                );
            }
            _ => panic!("{field}={value}: {err:?}"),
        }
        assert!(!text.contains("script:"), "{text}");
    }
}
