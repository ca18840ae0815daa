//! Each gate script called directly with the KEYS/ARGV its header documents, so that a
//! header and its script cannot drift apart unnoticed.

use lawsync_tests::servers::{Topology, unique_ns};
use redis::Script;

const ACQUIRE: &str = include_str!("../../shared/lua/gate_acquire.lua");
const DEFER: &str = include_str!("../../shared/lua/gate_defer.lua");
const STATUS: &str = include_str!("../../shared/lua/gate_status.lua");

const SEC: i64 = 1_000_000;

async fn redis_now(conn: &mut lawsync::RedisConn, key: &str) -> i64 {
    let v: Vec<i64> = Script::new(STATUS)
        .key(key)
        .invoke_async(conn)
        .await
        .expect("status");
    v[0]
}

/// gate_acquire: ARGV interval, burst, max wait, held slot, tolerance, epoch
/// → {code, slot, now, cool, epoch}.
async fn acquire(
    conn: &mut lawsync::RedisConn,
    key: &str,
    max_wait: i64,
    held: i64,
    tolerance: i64,
    epoch: i64,
) -> Vec<i64> {
    Script::new(ACQUIRE)
        .key(key)
        .arg(SEC) // interval: 1 s
        .arg(1) // burst
        .arg(max_wait)
        .arg(held)
        .arg(tolerance)
        .arg(epoch)
        .invoke_async(conn)
        .await
        .expect("gate_acquire")
}

#[tokio::test]
async fn gate_acquire_follows_its_header() {
    for topo in Topology::ALL {
        let mut conn = topo.connect().await;
        let key = unique_ns("lua").gate();
        let first = acquire(&mut conn, &key, 30 * SEC, 0, 2_000, 0).await;
        assert_eq!(first.len(), 5);
        assert_eq!(first[0], 0, "{topo:?}: a fresh gate grants at once: {first:?}");
        assert_eq!(first[1], first[2], "{topo:?}: granted slot is now");

        let second = acquire(&mut conn, &key, 30 * SEC, 0, 2_000, 0).await;
        assert_eq!(second[0], 1, "{topo:?}: must wait: {second:?}");
        assert_eq!(
            second[1],
            first[1] + SEC,
            "{topo:?}: the next slot is one interval later"
        );

        // Refused: the wait exceeds ARGV[3]; nothing is reserved, so asking again with room
        // returns the same slot the refused caller was shown.
        let refused = acquire(&mut conn, &key, 10, 0, 2_000, 0).await;
        assert_eq!(refused[0], 2, "{topo:?}: {refused:?}");
        let again = acquire(&mut conn, &key, 30 * SEC, 0, 2_000, 0).await;
        assert_eq!(
            (again[0], again[1]),
            (1, refused[1]),
            "{topo:?}: a refusal reserved a slot"
        );

        // Confirming a held slot: early → wait again for the same slot; on time → go;
        // later than the tolerance → a fresh slot at the back of the queue.
        let early = acquire(&mut conn, &key, 30 * SEC, again[1], 2_000, again[4]).await;
        assert_eq!((early[0], early[1]), (1, again[1]), "{topo:?}: {early:?}");
        let now = redis_now(&mut conn, &key).await;
        let on_time = acquire(&mut conn, &key, 30 * SEC, now, 10 * SEC, again[4]).await;
        assert_eq!((on_time[0], on_time[1]), (0, now), "{topo:?}: {on_time:?}");
        let late = acquire(&mut conn, &key, 30 * SEC, now - 5 * SEC, 1_000, again[4]).await;
        assert_eq!(late[0], 1, "{topo:?}: a late holder must queue again: {late:?}");
        assert!(
            late[1] > again[1],
            "{topo:?}: the new slot is behind every reserved one: {late:?}"
        );
        // A held slot whose wait exceeds the caller's bound is refused, not slept on.
        let far = acquire(&mut conn, &key, 10, late[1], 2_000, late[4]).await;
        assert_eq!(far[0], 2, "{topo:?}: {far:?}");
    }
}

#[tokio::test]
async fn a_slot_is_honoured_only_by_the_state_that_issued_it() {
    for topo in Topology::ALL {
        let mut conn = topo.connect().await;
        let key = unique_ns("lua").gate();
        acquire(&mut conn, &key, 30 * SEC, 0, 2_000, 0).await;
        let held = acquire(&mut conn, &key, 30 * SEC, 0, 2_000, 0).await;
        assert_eq!(held[0], 1);
        // The key vanishes (DEL after CORRUPT, eviction, a failover that lost writes).
        let _: () = redis::cmd("DEL")
            .arg(&key)
            .query_async(&mut conn)
            .await
            .expect("del");
        let now = redis_now(&mut conn, &key).await;
        let confirm = acquire(&mut conn, &key, 30 * SEC, now, 10 * SEC, held[4]).await;
        assert_ne!(confirm[4], held[4], "{topo:?}: a new state has a new epoch");
        // The confirmation was handled as a fresh request and recorded: the next caller waits.
        let next = acquire(&mut conn, &key, 30 * SEC, 0, 2_000, 0).await;
        assert_eq!(
            next[0], 1,
            "{topo:?}: two grants inside one interval: {confirm:?} then {next:?}"
        );
        assert!(next[1] >= confirm[1] + SEC, "{topo:?}");
    }
}

#[tokio::test]
async fn gate_defer_and_status_follow_their_headers() {
    for topo in Topology::ALL {
        let mut conn = topo.connect().await;
        let key = unique_ns("lua").gate();
        let held = acquire(&mut conn, &key, 30 * SEC, 0, 2_000, 0).await; // slot now
        let waiting = acquire(&mut conn, &key, 30 * SEC, 0, 2_000, 0).await; // slot now + 1 s
        // gate_defer: ARGV cooldown µs, interval µs, burst → {cool, now}.
        let d: Vec<i64> = Script::new(DEFER)
            .key(&key)
            .arg(5 * SEC)
            .arg(SEC)
            .arg(1)
            .invoke_async(&mut conn)
            .await
            .expect("defer");
        assert_eq!(d.len(), 2);
        assert!(d[0] >= d[1] + 5 * SEC - 1, "{topo:?}: {d:?}");
        let shorter: Vec<i64> = Script::new(DEFER)
            .key(&key)
            .arg(SEC)
            .arg(SEC)
            .arg(1)
            .invoke_async(&mut conn)
            .await
            .expect("defer");
        assert_eq!(
            shorter[0], d[0],
            "{topo:?}: a shorter cooldown must not shorten the end"
        );
        // The slot reserved before the cooldown is void: its confirmation queues it again
        // behind the cooldown's end.
        let voided = acquire(&mut conn, &key, 30 * SEC, waiting[1], 10 * SEC, waiting[4]).await;
        assert_eq!(voided[0], 1, "{topo:?}: {voided:?}");
        assert!(
            voided[1] >= d[0],
            "{topo:?}: new slot inside the cooldown: {voided:?} vs {d:?}"
        );
        assert!(held[1] < d[0]);
        // gate_status: → {now, tat, cool}.
        let st: Vec<i64> = Script::new(STATUS)
            .key(&key)
            .invoke_async(&mut conn)
            .await
            .expect("status");
        assert_eq!(st.len(), 3);
        assert_eq!(st[2], d[0], "{topo:?}: status shows the cooldown end");
        assert!(st[1] > st[2], "{topo:?}: tat is behind the cooldown: {st:?}");
    }
}
