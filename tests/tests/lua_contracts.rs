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

        // Confirming a held slot before it: wait again for the same slot.
        let early = acquire(&mut conn, &key, 30 * SEC, again[1], 2_000, again[4]).await;
        assert_eq!((early[0], early[1]), (1, again[1]), "{topo:?}: {early:?}");
        // Late while another call has started since (the first, within interval −
        // tolerance): a fresh slot at the back of the queue.
        let now = redis_now(&mut conn, &key).await;
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

/// Writes a gate state as the scripts keep it (µs on Redis' clock).
async fn set_state(conn: &mut lawsync::RedisConn, key: &str, tat: i64, sat: i64, epoch: i64) {
    let _: () = redis::cmd("HSET")
        .arg(key)
        .arg("tat")
        .arg(tat)
        .arg("sat")
        .arg(sat)
        .arg("cool")
        .arg(0)
        .arg("epoch")
        .arg(epoch)
        .query_async(conn)
        .await
        .expect("hset");
    let _: () = redis::cmd("PEXPIRE")
        .arg(key)
        .arg(60_000)
        .query_async(conn)
        .await
        .expect("pexpire");
}

async fn field(conn: &mut lawsync::RedisConn, key: &str, name: &str) -> i64 {
    let v: String = redis::cmd("HGET")
        .arg(key)
        .arg(name)
        .query_async(conn)
        .await
        .expect("hget");
    v.parse().expect("a number")
}

/// A holder that wakes late keeps its slot when nobody has started since: it starts in the
/// gap it left (an idle slot is the cost the old rule paid), and the next holder, on time,
/// is moved back just far enough to keep interval − tolerance between the two starts.
#[tokio::test]
async fn a_late_holder_starts_in_its_gap_and_moves_the_next_back() {
    // 50 ms, law.go.kr's default at 1 s: room for the round trip between reading Redis'
    // clock and confirming on it.
    const TOL: i64 = 50_000;
    for topo in Topology::ALL {
        let mut conn = topo.connect().await;
        let key = unique_ns("lua").gate();
        let epoch = 7;
        let now = redis_now(&mut conn, &key).await;
        // The last call started 1.5 s ago; reservations run 5 s ahead (a queue of holders).
        set_state(&mut conn, &key, now + 5 * SEC, now - SEC / 2, epoch).await;

        // 300 ms late on its slot, nobody started since: go, on the slot it held.
        let held = now - 300_000;
        let late = acquire(&mut conn, &key, 30 * SEC, held, TOL, epoch).await;
        assert_eq!(
            (late[0], late[1]),
            (0, held),
            "{topo:?}: a late holder in an idle gap goes: {late:?}"
        );
        let started = late[2];
        assert_eq!(
            field(&mut conn, &key, "sat").await,
            started + SEC - TOL,
            "{topo:?}: the start is recorded"
        );
        assert_eq!(
            field(&mut conn, &key, "tat").await,
            now + 5 * SEC,
            "{topo:?}: no new reservation"
        );

        // The next holder, on time: moved back to interval − tolerance after that start.
        let next_slot = redis_now(&mut conn, &key).await;
        let moved = acquire(&mut conn, &key, 30 * SEC, next_slot, TOL, epoch).await;
        assert_eq!(
            (moved[0], moved[1]),
            (1, started + SEC - TOL),
            "{topo:?}: the next holder waits just long enough: {moved:?}"
        );
        // ... unless that is further than it may wait: refused, nothing reserved.
        let bounded = acquire(&mut conn, &key, 1_000, next_slot, TOL, epoch).await;
        assert_eq!(bounded[0], 2, "{topo:?}: {bounded:?}");

        // A holder later than the tolerance whose slot another call started in while it
        // slept: a fresh slot at the back, behind every reservation and the last start.
        let behind = acquire(&mut conn, &key, 30 * SEC, next_slot - 200_000, TOL, epoch).await;
        assert_eq!(behind[0], 1, "{topo:?}: {behind:?}");
        assert_eq!(
            behind[1],
            now + 5 * SEC,
            "{topo:?}: queued at the back: {behind:?}"
        );

        // A holder later than the tolerance, held back by a call that started before its
        // slot (the one before overran): moved back like an on-time one, not queued again.
        let key3 = unique_ns("lua").gate();
        let now3 = redis_now(&mut conn, &key3).await;
        // The last start was 450 ms ago (sat = last start + interval − tolerance).
        set_state(&mut conn, &key3, now3 + 5 * SEC, now3 + SEC / 2, epoch).await;
        let overran = acquire(&mut conn, &key3, 30 * SEC, now3 - 300_000, TOL, epoch).await;
        assert_eq!(
            (overran[0], overran[1]),
            (1, now3 + SEC / 2),
            "{topo:?}: moved back behind the overrun, not to the back: {overran:?}"
        );

        // A fresh caller never starts inside interval − tolerance of the last start, even
        // on a gate with no reservations left.
        let key2 = unique_ns("lua").gate();
        let now2 = redis_now(&mut conn, &key2).await;
        set_state(&mut conn, &key2, now2 - SEC, now2 + SEC / 2, epoch).await;
        let fresh = acquire(&mut conn, &key2, 30 * SEC, 0, TOL, 0).await;
        assert_eq!((fresh[0], fresh[1]), (1, now2 + SEC / 2), "{topo:?}: {fresh:?}");
        assert_eq!(
            field(&mut conn, &key2, "tat").await,
            now2 + SEC / 2 + SEC,
            "{topo:?}: the reservation after it is an interval later"
        );
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
        let confirm = acquire(&mut conn, &key, 30 * SEC, now, 2_000, held[4]).await;
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
        // gate_defer: ARGV cooldown µs, interval µs, burst, tolerance µs → {cool, now}.
        let d: Vec<i64> = Script::new(DEFER)
            .key(&key)
            .arg(5 * SEC)
            .arg(SEC)
            .arg(1)
            .arg(2_000)
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
            .arg(2_000)
            .invoke_async(&mut conn)
            .await
            .expect("defer");
        assert_eq!(
            shorter[0], d[0],
            "{topo:?}: a shorter cooldown must not shorten the end"
        );
        // The slot reserved before the cooldown is void: its confirmation queues it again
        // behind the cooldown's end.
        let voided = acquire(&mut conn, &key, 30 * SEC, waiting[1], 2_000, waiting[4]).await;
        assert_eq!(voided[0], 1, "{topo:?}: {voided:?}");
        assert!(
            voided[1] >= d[0],
            "{topo:?}: new slot inside the cooldown: {voided:?} vs {d:?}"
        );
        assert!(held[1] < d[0]);
        // gate_status: → {now, tat, cool, sat}.
        let st: Vec<i64> = Script::new(STATUS)
            .key(&key)
            .invoke_async(&mut conn)
            .await
            .expect("status");
        assert_eq!(st.len(), 4);
        assert!(
            st[3] > held[2],
            "{topo:?}: sat follows the first start: {st:?} {held:?}"
        );
        assert_eq!(st[2], d[0], "{topo:?}: status shows the cooldown end");
        assert!(st[1] > st[2], "{topo:?}: tat is behind the cooldown: {st:?}");

        // With a burst, the starts after a cooldown are spaced too: sat is moved so that
        // the first start at the cooldown's end leaves no allowance for a second at once.
        let key2 = unique_ns("lua").gate();
        let d2: Vec<i64> = Script::new(DEFER)
            .key(&key2)
            .arg(SEC)
            .arg(SEC)
            .arg(3)
            .arg(2_000)
            .invoke_async(&mut conn)
            .await
            .expect("defer");
        assert_eq!(
            field(&mut conn, &key2, "sat").await,
            d2[0] + 2 * (SEC - 2_000),
            "{topo:?}: sat = cool + (burst − 1) × (interval − tolerance)"
        );
    }
}

/// Every queue script as the queue loads it (its `@include`s pasted in).
fn queue_scripts() -> Vec<(&'static str, String)> {
    [
        (
            "queue_enqueue",
            include_str!("../../shared/lua/queue_enqueue.lua"),
        ),
        ("queue_claim", include_str!("../../shared/lua/queue_claim.lua")),
        ("queue_settle", include_str!("../../shared/lua/queue_settle.lua")),
        ("queue_bury", include_str!("../../shared/lua/queue_bury.lua")),
        (
            "queue_redrive",
            include_str!("../../shared/lua/queue_redrive.lua"),
        ),
        ("queue_stats", include_str!("../../shared/lua/queue_stats.lua")),
    ]
    .into_iter()
    .map(|(name, body)| (name, body.to_owned()))
    .collect()
}

/// The highest `WORD[n]` in `text`.
fn highest(text: &str, word: &str) -> usize {
    text.match_indices(&format!("{word}["))
        .filter_map(|(i, m)| {
            let rest = &text[i + m.len()..];
            rest[..rest.find(']')?].parse().ok()
        })
        .max()
        .unwrap_or(0)
}

/// A queue script's header names every KEYS and ARGV slot its code reads, and no more.
#[test]
fn queue_script_headers_name_exactly_the_slots_their_code_reads() {
    for (name, body) in queue_scripts() {
        assert!(body.starts_with(&format!("--[[ {name}:")), "{name}: header first");
        let end = body.find("]]").expect("header end");
        let (header, code) = body.split_at(end);
        assert!(header.contains("Input:") && header.contains("Output:"), "{name}");
        for word in ["KEYS", "ARGV"] {
            assert_eq!(
                highest(header, word),
                highest(code, word),
                "{name}: {word} drifted"
            );
        }
        let assembled = lawsync::queue::assemble_script(&body);
        assert!(
            !assembled.contains("@include"),
            "{name}: an include was not pasted"
        );
    }
}

/// queue_enqueue, called with the KEYS/ARGV its header documents: {status, due, id}, and a
/// dead letter revived with the notes appended to its history.
#[tokio::test]
async fn queue_enqueue_follows_its_header() {
    let body = include_str!("../../shared/lua/queue_enqueue.lua");
    let script = Script::new(&lawsync::queue::assemble_script(body));
    for topo in Topology::ALL {
        let mut conn = topo.connect().await;
        let k = unique_ns("lua").queue();
        let call = |id: &str| {
            let mut s = script.prepare_invoke();
            for key in [
                &k.jobs, &k.first, &k.count, &k.errors, &k.waiting, &k.dead, &k.ready, &k.leased, &k.lease,
                &k.alerts, &k.meta,
            ] {
                s.key(key);
            }
            s.arg(id)
                .arg(r#"{"type":"DETAIL","identity":"1","payload":{}}"#)
                .arg(1000)
                .arg(r#"[{"atMs":1,"kind":"a","message":"new"}]"#)
                .arg(r#"[{"atMs":2,"kind":"revived","message":"r"},{"atMs":3,"kind":"a","message":"again"}]"#)
                .arg(2)
                .arg("");
            s
        };
        let (status, due, id): (i64, i64, String) =
            call("DETAIL:1").invoke_async(&mut conn).await.expect("enqueue");
        assert_eq!((status, id.as_str()), (1, "DETAIL:1"), "{topo:?}");
        assert!(due > 0);
        let (status, due, _): (i64, i64, String) =
            call("DETAIL:1").invoke_async(&mut conn).await.expect("enqueue");
        assert_eq!((status, due), (0, 0), "{topo:?}: already queued");
        let _: () = redis::pipe()
            .cmd("ZREM")
            .arg(&k.waiting)
            .arg("DETAIL:1")
            .ignore()
            .cmd("ZADD")
            .arg(&k.dead)
            .arg(1)
            .arg("DETAIL:1")
            .ignore()
            .query_async(&mut conn)
            .await
            .expect("make it dead");
        let (status, _, _): (i64, i64, String) =
            call("DETAIL:1").invoke_async(&mut conn).await.expect("enqueue");
        assert_eq!(status, 3, "{topo:?}: revived");
        let history: String = redis::cmd("HGET")
            .arg(&k.errors)
            .arg("DETAIL:1")
            .query_async(&mut conn)
            .await
            .expect("errors");
        let notes: Vec<serde_json::Value> = serde_json::from_str(&history).expect("a JSON array");
        let kept: Vec<&str> = notes.iter().filter_map(|n| n["message"].as_str()).collect();
        assert_eq!(
            kept,
            ["r", "again"],
            "{topo:?}: the newest ARGV[6] notes: {history}"
        );
        let v: String = redis::cmd("HGET")
            .arg(&k.meta)
            .arg("v")
            .query_async(&mut conn)
            .await
            .expect("v");
        assert_eq!(v, "2", "{topo:?}");
    }
}
