//! Each gate script called directly with the KEYS/ARGV its header documents, so that a
//! header and its script cannot drift apart unnoticed, and every branch of the state
//! include (versions, damage, a missing state) is driven on real Redis.

use lawsync::queue::{Job, JobKind};
use lawsync_tests::servers::{Topology, unique_ns};
use redis::Script;

use lawsync::lua::{
    GATE_ACQUIRE as ACQUIRE, GATE_ADOPT as ADOPT, GATE_DEFER as DEFER, GATE_RELEASE as RELEASE,
    GATE_STATUS as STATUS, LuaScript,
};

const SEC: i64 = 1_000_000;
/// The tolerance used below unless a test says otherwise: 10 ms, law.go.kr's default.
const TOL: i64 = 10_000;
const IDLE_MS: i64 = 60_000;

type Conn = lawsync::RedisConn;

/// A gate script as the library loads it (its includes pasted, its key bound).
fn script(s: &LuaScript) -> &Script {
    s.script()
}

/// gate_status: ARGV interval, burst, tolerance → {now, next_start, cool, fresh, tat, sat}.
async fn status(conn: &mut Conn, key: &str) -> Vec<i64> {
    script(&STATUS)
        .key(key)
        .arg(SEC)
        .arg(1)
        .arg(TOL)
        .invoke_async(conn)
        .await
        .expect("gate_status")
}

async fn redis_now(conn: &mut Conn, key: &str) -> i64 {
    status(conn, key).await[0]
}

/// The key-health circuit beside a gate state (gate_acquire's and gate_release's second key).
fn health_of(key: &str) -> String {
    lawsync::keys::beside_gate(key, "health")
}

/// gate_acquire: ARGV interval (1 s), burst, max wait, held slot, tolerance, epoch, idle ms,
/// and no probe ('' and 0) → {code, slot, now, cool, epoch, sat_before, sat_after, probe}.
async fn try_acquire(
    conn: &mut Conn,
    key: &str,
    max_wait: i64,
    held: i64,
    tolerance: i64,
    epoch: i64,
) -> redis::RedisResult<Vec<i64>> {
    try_acquire_burst(conn, key, 1, max_wait, held, tolerance, epoch).await
}

async fn try_acquire_burst(
    conn: &mut Conn,
    key: &str,
    burst: i64,
    max_wait: i64,
    held: i64,
    tolerance: i64,
    epoch: i64,
) -> redis::RedisResult<Vec<i64>> {
    script(&ACQUIRE)
        .key(key)
        .key(health_of(key))
        .arg(SEC)
        .arg(burst)
        .arg(max_wait)
        .arg(held)
        .arg(tolerance)
        .arg(epoch)
        .arg(IDLE_MS)
        .arg("")
        .arg(0)
        .invoke_async(conn)
        .await
}

/// A burst-3 acquire with room to wait, confirming `held` (0: a fresh request).
async fn acquire3(conn: &mut Conn, key: &str, held: i64, epoch: i64) -> Vec<i64> {
    try_acquire_burst(conn, key, 3, 30 * SEC, held, TOL, epoch)
        .await
        .expect("gate_acquire")
}

async fn acquire(conn: &mut Conn, key: &str, max_wait: i64, held: i64, epoch: i64) -> Vec<i64> {
    try_acquire(conn, key, max_wait, held, TOL, epoch)
        .await
        .expect("gate_acquire")
}

/// gate_defer: ARGV cooldown µs, interval µs, burst, tolerance µs, idle ms → {cool, now}.
async fn defer(conn: &mut Conn, key: &str, d: i64, burst: i64) -> Vec<i64> {
    script(&DEFER)
        .key(key)
        .arg(d)
        .arg(SEC)
        .arg(burst)
        .arg(TOL)
        .arg(IDLE_MS)
        .invoke_async(conn)
        .await
        .expect("gate_defer")
}

/// Writes a gate state as this release keeps it (v 2), µs on Redis' clock.
async fn set_state(conn: &mut Conn, key: &str, tat: i64, sat: i64, cool: i64, epoch: i64) {
    let _: () = redis::cmd("HSET")
        .arg(key)
        .arg(&[
            ("v", 2),
            ("tat", tat),
            ("sat", sat),
            ("cool", cool),
            ("epoch", epoch),
        ])
        .query_async(conn)
        .await
        .expect("hset");
}

async fn hset(conn: &mut Conn, key: &str, field: &str, value: &str) {
    let _: () = redis::cmd("HSET")
        .arg(key)
        .arg(field)
        .arg(value)
        .query_async(conn)
        .await
        .expect("hset");
}

async fn field(conn: &mut Conn, key: &str, name: &str) -> i64 {
    let v: String = redis::cmd("HGET")
        .arg(key)
        .arg(name)
        .query_async(conn)
        .await
        .expect("hget");
    v.parse().expect("a number")
}

/// gate_release: ARGV sat_before, sat_after, epoch, slot, interval, burst, tolerance, idle
/// ms, grant's now → 0|1.
async fn release(conn: &mut Conn, key: &str, go: &[i64], epoch: i64) -> i64 {
    release_b(conn, key, go, epoch, 1).await
}

async fn release_b(conn: &mut Conn, key: &str, go: &[i64], epoch: i64, burst: i64) -> i64 {
    script(&RELEASE)
        .key(key)
        .key(health_of(key))
        .arg(go[5])
        .arg(go[6])
        .arg(epoch)
        .arg(go[1])
        .arg(SEC)
        .arg(burst)
        .arg(TOL)
        .arg(IDLE_MS)
        .arg(go[2])
        .invoke_async(conn)
        .await
        .expect("gate_release")
}

/// gate_adopt: ARGV tat, sat, cool, interval, burst, tolerance, idle ms → 0|1.
async fn adopt(conn: &mut Conn, key: &str, tat: i64, sat: i64, cool: i64) -> i64 {
    script(&ADOPT)
        .key(key)
        .arg(tat)
        .arg(sat)
        .arg(cool)
        .arg(SEC)
        .arg(1)
        .arg(TOL)
        .arg(IDLE_MS)
        .invoke_async(conn)
        .await
        .expect("gate_adopt")
}

/// A gate whose first grant has been made (past the fresh quiet), with its epoch.
async fn granted_gate(conn: &mut Conn) -> (String, Vec<i64>) {
    let key = unique_ns("lua").gate();
    let now = redis_now(conn, &key).await;
    set_state(conn, &key, 0, 0, 0, 7).await;
    let go = acquire(conn, &key, 30 * SEC, 0, 0).await;
    assert_eq!(go[0], 0, "an idle gate grants at once: {go:?}");
    assert!(go[2] >= now);
    (key, go)
}

#[tokio::test]
async fn gate_acquire_follows_its_header() {
    for topo in Topology::EVERY {
        let mut conn = topo.connect().await;
        let (key, first) = granted_gate(&mut conn).await;
        assert_eq!(first.len(), 8);
        assert_eq!(first[7], 0, "{topo:?}: no circuit, no probe");
        assert_eq!(first[1], first[2], "{topo:?}: granted slot is now");
        assert_eq!(
            first[6],
            first[2] + SEC,
            "{topo:?}: sat_after is the next start allowed"
        );

        let second = acquire(&mut conn, &key, 30 * SEC, 0, 0).await;
        assert_eq!(second[0], 1, "{topo:?}: must wait: {second:?}");
        assert_eq!(
            second[1],
            first[1] + SEC + TOL,
            "{topo:?}: reservations are paced at interval + tolerance"
        );
        assert_eq!((second[5], second[6]), (0, 0), "{topo:?}: no sat on a wait");

        // Refused: the wait exceeds ARGV[3]; nothing is reserved, so asking again with room
        // returns the same slot the refused caller was shown.
        let refused = acquire(&mut conn, &key, 10, 0, 0).await;
        assert_eq!(refused[0], 2, "{topo:?}: {refused:?}");
        let again = acquire(&mut conn, &key, 30 * SEC, 0, 0).await;
        assert_eq!(
            (again[0], again[1]),
            (1, refused[1]),
            "{topo:?}: a refusal reserved a slot"
        );

        // Confirming a held slot before it: wait again for the same slot.
        let early = acquire(&mut conn, &key, 30 * SEC, again[1], again[4]).await;
        assert_eq!((early[0], early[1]), (1, again[1]), "{topo:?}: {early:?}");
        // Late while another call has started since (the first, within the interval):
        // a fresh slot at the back of the queue.
        let now = redis_now(&mut conn, &key).await;
        let late = acquire(&mut conn, &key, 30 * SEC, now - 5 * SEC, again[4]).await;
        assert_eq!(late[0], 1, "{topo:?}: a late holder must queue again: {late:?}");
        assert!(
            late[1] > again[1],
            "{topo:?}: the new slot is behind every reserved one: {late:?}"
        );
    }
}

/// Issue 13.1: a holder up to the tolerance late, then an on-time one, never start closer
/// than the interval (the release before granted them 951 ms apart at 1000/50).
#[tokio::test]
async fn the_interval_is_a_floor_whoever_is_late() {
    const TOL50: i64 = 50_000;
    for topo in Topology::EVERY {
        let mut conn = topo.connect().await;
        let (key, _) = granted_gate(&mut conn).await;
        let acq = |held: i64, epoch: i64| {
            let key = key.clone();
            async move {
                let mut c = topo.connect().await;
                try_acquire(&mut c, &key, 30 * SEC, held, TOL50, epoch)
                    .await
                    .expect("acquire")
            }
        };
        let b = acq(0, 0).await;
        let c = acq(0, 0).await;
        assert_eq!((b[0], c[0]), (1, 1), "{topo:?}: {b:?} {c:?}");
        // B wakes 49 ms late, within the tolerance; C is on time.
        sleep_until_redis(&mut conn, &key, b[1] + 49_000).await;
        let b_go = acq(b[1], b[4]).await;
        assert_eq!(b_go[0], 0, "{topo:?}: {b_go:?}");
        sleep_until_redis(&mut conn, &key, c[1]).await;
        let mut c_go = acq(c[1], c[4]).await;
        if c_go[0] == 1 {
            sleep_until_redis(&mut conn, &key, c_go[1]).await;
            c_go = acq(c_go[1], c_go[4]).await;
        }
        assert_eq!(c_go[0], 0, "{topo:?}: {c_go:?}");
        assert!(
            c_go[2] - b_go[2] >= SEC,
            "{topo:?}: grants {} µs apart, below the 1 s interval",
            c_go[2] - b_go[2]
        );
    }
}

async fn sleep_until_redis(conn: &mut Conn, key: &str, at: i64) {
    loop {
        let now = redis_now(conn, key).await;
        if now >= at {
            return;
        }
        tokio::time::sleep(std::time::Duration::from_micros((at - now) as u64)).await;
    }
}

/// A holder that wakes late keeps its slot when nobody has started since; the next one is
/// moved back just far enough to keep the interval; a moved holder refused for its bound
/// hands its slot back when nobody reserved after it (issue 13.3).
#[tokio::test]
async fn a_late_holder_starts_in_its_gap_and_a_refused_one_gives_its_slot_back() {
    for topo in Topology::EVERY {
        let mut conn = topo.connect().await;
        let key = unique_ns("lua").gate();
        let epoch = 7;
        let now = redis_now(&mut conn, &key).await;
        set_state(&mut conn, &key, now + 5 * SEC, now - SEC / 2, 0, epoch).await;

        // 300 ms late on its slot, nobody started since: go, on the slot it held.
        let held = now - 300_000;
        let late = acquire(&mut conn, &key, 30 * SEC, held, epoch).await;
        assert_eq!((late[0], late[1]), (0, held), "{topo:?}: {late:?}");
        let started = late[2];
        assert_eq!(field(&mut conn, &key, "sat").await, started + SEC, "{topo:?}");
        assert_eq!(
            field(&mut conn, &key, "tat").await,
            now + 5 * SEC,
            "{topo:?}: no new reservation"
        );

        // The next holder, on time: moved back to one interval after that start.
        let next_slot = redis_now(&mut conn, &key).await;
        let moved = acquire(&mut conn, &key, 30 * SEC, next_slot, epoch).await;
        assert_eq!((moved[0], moved[1]), (1, started + SEC), "{topo:?}: {moved:?}");

        // A holder later than the tolerance whose slot another call started in while it
        // slept: a fresh slot at the back, behind every reservation.
        let behind = acquire(&mut conn, &key, 30 * SEC, next_slot - 200_000, epoch).await;
        assert_eq!((behind[0], behind[1]), (1, now + 5 * SEC), "{topo:?}: {behind:?}");

        // The newest reservation (behind's), moved back and refused for its bound: handed
        // back, so the schedule's end returns to it.
        let key2 = unique_ns("lua").gate();
        let now2 = redis_now(&mut conn, &key2).await;
        let last = now2 - 1_000; // its slot; the one before it overran by 500 ms
        set_state(&mut conn, &key2, last + SEC + TOL, now2 + SEC / 2, 0, epoch).await;
        let refused = acquire(&mut conn, &key2, 1_000, last, epoch).await;
        assert_eq!(refused[0], 2, "{topo:?}: {refused:?}");
        assert_eq!(
            field(&mut conn, &key2, "tat").await,
            last,
            "{topo:?}: the refused slot is back in the schedule"
        );
        let taker = acquire(&mut conn, &key2, 30 * SEC, 0, 0).await;
        assert_eq!(
            (taker[0], taker[1]),
            (1, now2 + SEC / 2),
            "{topo:?}: the next caller gets the earliest start, not a pace later: {taker:?}"
        );
    }
}

/// Issue 13.8: a missing state (deleted, evicted, lost in a failover) opens with one
/// interval of quiet, and a slot of the lost state is not honoured.
#[tokio::test]
async fn a_lost_state_opens_with_an_interval_of_quiet() {
    for topo in Topology::EVERY {
        let mut conn = topo.connect().await;
        let (key, go) = granted_gate(&mut conn).await;
        let held = acquire(&mut conn, &key, 30 * SEC, 0, 0).await;
        assert_eq!(held[0], 1);
        let _: () = redis::cmd("DEL")
            .arg(&key)
            .query_async(&mut conn)
            .await
            .expect("del");
        let st = status(&mut conn, &key).await;
        assert_eq!(st[3], 1, "{topo:?}: status says the state is fresh: {st:?}");
        let fresh = acquire(&mut conn, &key, 30 * SEC, 0, 0).await;
        assert_eq!(
            fresh[0], 1,
            "{topo:?}: a fresh state grants nothing at once: {fresh:?}"
        );
        assert_eq!(fresh[1], fresh[2] + SEC, "{topo:?}: one interval of quiet");
        assert!(fresh[1] >= go[2] + SEC, "{topo:?}");
        // The slot of the lost state, confirmed now, is handled as a fresh request.
        let confirm = acquire(&mut conn, &key, 30 * SEC, held[1], held[4]).await;
        assert_ne!(confirm[4], held[4], "{topo:?}: a new state has a new epoch");
        assert_eq!(confirm[0], 1, "{topo:?}: {confirm:?}");
        assert!(confirm[1] > fresh[1], "{topo:?}: behind the first fresh caller");
    }
}

/// Issue 13.6: nan, inf, 1e400, negatives and text are CORRUPT in every script, and
/// nothing is granted or written.
#[tokio::test]
async fn damaged_fields_are_corrupt_not_a_stall() {
    let topo = Topology::Standalone;
    let mut conn = topo.connect().await;
    for bad in ["nan", "-nan", "inf", "-inf", "1e400", "-5", "soon"] {
        for name in ["tat", "sat", "cool", "epoch", "v"] {
            let key = unique_ns("lua").gate();
            set_state(&mut conn, &key, 0, 0, 0, 7).await;
            hset(&mut conn, &key, name, bad).await;
            let err = try_acquire(&mut conn, &key, 30 * SEC, 0, TOL, 0)
                .await
                .expect_err(&format!("{name}={bad} must be refused"));
            assert_eq!(err.code(), Some("CORRUPT"), "{name}={bad}: {err:?}");
            let d: redis::RedisResult<Vec<i64>> = script(&DEFER)
                .key(&key)
                .arg(SEC)
                .arg(SEC)
                .arg(1)
                .arg(TOL)
                .arg(IDLE_MS)
                .invoke_async(&mut conn)
                .await;
            assert_eq!(d.expect_err("defer").code(), Some("CORRUPT"), "{name}={bad}");
            let s: redis::RedisResult<Vec<i64>> = script(&STATUS)
                .key(&key)
                .arg(SEC)
                .arg(1)
                .arg(TOL)
                .invoke_async(&mut conn)
                .await;
            assert_eq!(s.expect_err("status").code(), Some("CORRUPT"), "{name}={bad}");
            let raw: String = redis::cmd("HGET")
                .arg(&key)
                .arg(name)
                .query_async(&mut conn)
                .await
                .expect("hget");
            assert_eq!(raw, bad, "{name}: a refused script wrote the state");
        }
    }
}

/// A time far ahead (a damaged cooldown of centuries) is CORRUPT, not a gate shut for years.
#[tokio::test]
async fn a_time_more_than_two_days_ahead_is_corrupt() {
    let mut conn = Topology::Standalone.connect().await;
    let key = unique_ns("lua").gate();
    let now = redis_now(&mut conn, &key).await;
    set_state(&mut conn, &key, 0, 0, now + 3 * 86_400 * SEC, 7).await;
    let err = try_acquire(&mut conn, &key, 30 * SEC, 0, TOL, 0)
        .await
        .expect_err("refused");
    assert_eq!(err.code(), Some("CORRUPT"), "{err:?}");
    set_state(&mut conn, &key, 0, 0, now + 86_400 * SEC, 7).await;
    let w = acquire(&mut conn, &key, 30 * SEC, 0, 0).await;
    assert_eq!(w[0], 2, "a day's cooldown is sound, and refuses: {w:?}");
}

/// An epoch or a last grant ahead of now is never sound (both are set to now when
/// written): past the two-day horizon it is CORRUPT, as a cooldown is; a future last grant
/// would otherwise switch off the "no burst right after a cooldown" rule. A gate key that
/// is not a hash is CORRUPT by name, not a WRONGTYPE half-way. Neither writes anything.
#[tokio::test]
async fn a_future_epoch_or_grant_and_a_foreign_key_are_corrupt() {
    for topo in Topology::EVERY {
        let mut conn = topo.connect().await;
        let key = unique_ns("lua").gate();
        let now = redis_now(&mut conn, &key).await;
        for field in ["epoch", "g"] {
            set_state(&mut conn, &key, 0, 0, 0, 7).await;
            hset(&mut conn, &key, field, &(now + 3 * 86_400 * SEC).to_string()).await;
            let err = try_acquire(&mut conn, &key, 30 * SEC, 0, TOL, 0)
                .await
                .expect_err("refused");
            assert_eq!(err.code(), Some("CORRUPT"), "{topo:?}: {field}: {err:?}");
        }
        let _: () = redis::cmd("DEL")
            .arg(&key)
            .query_async(&mut conn)
            .await
            .expect("del");
        let _: () = redis::cmd("SET")
            .arg(&key)
            .arg("foreign")
            .query_async(&mut conn)
            .await
            .expect("set");
        for s in [&ACQUIRE, &STATUS] {
            let mut call = script(s).key(&key);
            call.arg(SEC).arg(1).arg(TOL);
            if s.name() == "gate_acquire" {
                call.arg(0).arg(TOL).arg(0).arg(IDLE_MS);
            }
            let err = call
                .invoke_async::<Vec<i64>>(&mut conn)
                .await
                .expect_err("refused");
            assert_eq!(err.code(), Some("CORRUPT"), "{topo:?}: {}: {err:?}", s.name());
        }
        let kept: String = redis::cmd("GET")
            .arg(&key)
            .query_async(&mut conn)
            .await
            .expect("get");
        assert_eq!(kept, "foreign", "{topo:?}: nothing written");
    }
}

/// Issue 13.11: a newer format is refused by name; the release before's format (no `v`,
/// sat paced at interval − tolerance) is read safely and rewritten as this one.
#[tokio::test]
async fn state_versions_are_checked_and_the_old_format_is_read() {
    for topo in Topology::EVERY {
        let mut conn = topo.connect().await;
        let key = unique_ns("lua").gate();
        set_state(&mut conn, &key, 0, 0, 0, 7).await;
        hset(&mut conn, &key, "v", "3").await;
        let err = try_acquire(&mut conn, &key, 30 * SEC, 0, TOL, 0)
            .await
            .expect_err("newer");
        assert_eq!(err.code(), Some("NEWER"), "{topo:?}: {err:?}");
        assert!(
            format!("{err}").contains("format 3, this release understands up to 2"),
            "{topo:?}: {err}"
        );

        // v1, as the release before wrote it mid-cooldown: tat, sat, cool, epoch, no v.
        let old = unique_ns("lua").gate();
        let now = redis_now(&mut conn, &old).await;
        let _: () = redis::cmd("HSET")
            .arg(&old)
            .arg(&[
                ("tat", now + 3 * SEC),
                ("sat", now + 2 * SEC),
                ("cool", now + 2 * SEC),
                ("epoch", 5),
            ])
            .query_async(&mut conn)
            .await
            .expect("hset");
        let st = status(&mut conn, &old).await;
        assert_eq!(st[2], now + 2 * SEC, "{topo:?}: the cooldown is read");
        assert_eq!(st[5], now + 3 * SEC, "{topo:?}: v1's sat reads an interval later");
        let w = acquire(&mut conn, &old, 30 * SEC, 0, 0).await;
        assert_eq!(w[0], 1, "{topo:?}: {w:?}");
        assert!(w[1] >= now + 3 * SEC, "{topo:?}: behind the old schedule: {w:?}");
        assert_eq!(field(&mut conn, &old, "v").await, 2, "{topo:?}: rewritten as v2");
        assert_eq!(field(&mut conn, &old, "epoch").await, 5, "{topo:?}: same state");
    }
}

/// gate_release gives back a start that was never sent; not once another was granted.
#[tokio::test]
async fn gate_release_gives_back_only_the_last_start() {
    for topo in Topology::EVERY {
        let mut conn = topo.connect().await;
        let (key, go) = granted_gate(&mut conn).await;
        let wrong_epoch: i64 = release(&mut conn, &key, &go, go[4] + 1).await;
        assert_eq!(wrong_epoch, 0, "{topo:?}");
        let given: i64 = release(&mut conn, &key, &go, go[4]).await;
        assert_eq!(given, 1, "{topo:?}");
        let again = acquire(&mut conn, &key, 30 * SEC, 0, 0).await;
        assert_eq!(
            again[0], 0,
            "{topo:?}: the start given back does not count: {again:?}"
        );
        let twice: i64 = release(&mut conn, &key, &go, go[4]).await;
        assert_eq!(twice, 0, "{topo:?}: another start was granted since");
        assert_eq!(field(&mut conn, &key, "sat").await, again[6], "{topo:?}");
    }
}

#[tokio::test]
async fn gate_defer_adopt_and_status_follow_their_headers() {
    for topo in Topology::EVERY {
        let mut conn = topo.connect().await;
        let (key, held) = granted_gate(&mut conn).await;
        let waiting = acquire(&mut conn, &key, 30 * SEC, 0, 0).await;
        let d = defer(&mut conn, &key, 5 * SEC, 1).await;
        assert_eq!(d.len(), 2);
        assert!(d[0] >= d[1] + 5 * SEC - 1, "{topo:?}: {d:?}");
        let shorter = defer(&mut conn, &key, SEC, 1).await;
        assert_eq!(
            shorter[0], d[0],
            "{topo:?}: a shorter cooldown must not shorten the end"
        );
        // The slot reserved before the cooldown is void: queued again behind its end.
        let voided = acquire(&mut conn, &key, 30 * SEC, waiting[1], waiting[4]).await;
        assert_eq!(voided[0], 1, "{topo:?}: {voided:?}");
        assert!(voided[1] >= d[0], "{topo:?}: {voided:?} vs {d:?}");
        let st = status(&mut conn, &key).await;
        assert_eq!(st.len(), 6);
        assert_eq!(st[2], d[0], "{topo:?}: status shows the cooldown end");
        assert!(
            st[1] >= d[0],
            "{topo:?}: no start before the cooldown ends: {st:?}"
        );
        assert!(st[5] > held[2], "{topo:?}: sat follows the first start: {st:?}");
        assert_eq!(st[3], 0, "{topo:?}: not fresh");

        // With a burst, the starts after a cooldown are spaced too.
        let key2 = unique_ns("lua").gate();
        let d2 = defer(&mut conn, &key2, SEC, 3).await;
        assert_eq!(
            field(&mut conn, &key2, "sat").await,
            d2[0] + 2 * SEC,
            "{topo:?}: sat = cool + (burst − 1) × interval"
        );

        // gate_adopt takes the later of each time, and nothing from a past state.
        let key3 = unique_ns("lua").gate();
        let now = redis_now(&mut conn, &key3).await;
        let nothing: i64 = adopt(&mut conn, &key3, now - SEC, now - SEC, 0).await;
        assert_eq!(nothing, 0, "{topo:?}");
        let taken: i64 = adopt(&mut conn, &key3, now + 4 * SEC, now + 3 * SEC, now + 3 * SEC).await;
        assert_eq!(taken, 1, "{topo:?}");
        let st3 = status(&mut conn, &key3).await;
        assert_eq!(
            (st3[2], st3[4], st3[5]),
            (now + 3 * SEC, now + 4 * SEC, now + 3 * SEC),
            "{topo:?}"
        );
    }
}

/// gate_acquire with a burst (review findings): a grant given back twice gives back one
/// start only, and the first start after a cooldown leaves no burst behind it, however
/// late it came.
#[tokio::test]
async fn with_a_burst_a_grant_is_given_back_once_and_a_cooldown_ends_without_a_burst() {
    const BURST: i64 = 3;
    for topo in Topology::EVERY {
        let mut conn = topo.connect().await;
        let key = unique_ns("lua").gate();
        let now = redis_now(&mut conn, &key).await;
        // Two of the three burst starts used: sat two intervals ahead.
        set_state(&mut conn, &key, now, now + 2 * SEC, 0, 1).await;
        let a = acquire3(&mut conn, &key, 0, 0).await;
        assert_eq!(a[0], 0, "{topo:?}: the third burst start: {a:?}");
        assert_eq!(release_b(&mut conn, &key, &a, a[4], BURST).await, 1, "{topo:?}");
        let c = acquire3(&mut conn, &key, 0, 0).await;
        assert_eq!(c[0], 0, "{topo:?}: the start given back is taken: {c:?}");
        assert_eq!((c[5], c[6]), (a[5], a[6]), "{topo:?}: the same pair as A's");
        assert_eq!(
            release_b(&mut conn, &key, &a, a[4], BURST).await,
            0,
            "{topo:?}: A given back again would erase C, which was sent"
        );
        let d = acquire3(&mut conn, &key, 0, 0).await;
        assert_eq!(d[0], 1, "{topo:?}: a fourth start inside the burst window: {d:?}");

        // A cooldown; the first holder after it confirms 900 ms late; the next holder, on
        // its slot, must still wait a whole interval after that late start.
        let key2 = unique_ns("lua").gate();
        set_state(&mut conn, &key2, 0, 0, 0, 1).await;
        let d2: Vec<i64> = script(&DEFER)
            .key(&key2)
            .arg(SEC / 10)
            .arg(SEC)
            .arg(BURST)
            .arg(TOL)
            .arg(IDLE_MS)
            .invoke_async(&mut conn)
            .await
            .expect("defer");
        let (cool, epoch) = (d2[0], 1);
        sleep_until_redis(&mut conn, &key2, cool + 300_000).await;
        let first = acquire3(&mut conn, &key2, cool, epoch).await;
        assert_eq!(first[0], 0, "{topo:?}: the late first holder goes: {first:?}");
        let next = acquire3(&mut conn, &key2, 0, 0).await;
        assert_eq!(next[0], 1, "{topo:?}: a burst right after the cooldown: {next:?}");
        assert!(next[1] >= first[2] + SEC, "{topo:?}: {next:?} after {first:?}");
    }
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

/// Every script's header names every ARGV slot its code reads, and no more (its keys are
/// checked against the names its callers fill by the library's own `lua` tests).
#[test]
fn script_headers_name_exactly_the_slots_their_code_reads() {
    for s in lawsync::lua::ALL {
        let (name, body) = (s.name(), s.source());
        assert!(body.starts_with(&format!("--[[ {name}:")), "{name}: header first");
        let end = body.find("]]").expect("header end");
        let (header, code) = body.split_at(end);
        assert!(header.contains("Output:"), "{name}");
        assert_eq!(
            highest(header, "ARGV"),
            highest(code, "ARGV"),
            "{name}: ARGV drifted"
        );
        let assembled = s.assembled();
        assert!(
            !assembled.contains("@include"),
            "{name}: an include was not pasted"
        );
        assert!(
            assembled.starts_with(&body[..end]),
            "{name}: the assembled text opens with the contract"
        );
    }
}

/// queue_enqueue, called with the KEYS/ARGV its header documents: {status, due, id}, and a
/// dead letter revived with the notes appended to its history.
#[tokio::test]
async fn queue_enqueue_follows_its_header() {
    for topo in Topology::EVERY {
        let mut conn = topo.connect().await;
        let k = unique_ns("lua").queue();
        let job = Job::new(JobKind::Detail, "1", serde_json::json!({}));
        let (id, job) = (job.id(), serde_json::to_string(&job).expect("json"));
        let call = |id: &str| {
            let mut s = lawsync::lua::QUEUE_ENQUEUE.prepare(&k);
            s.arg(id)
                .arg(&job)
                .arg(1000)
                .arg(r#"[{"atMs":1,"kind":"a","message":"new"}]"#)
                .arg(r#"[{"atMs":2,"kind":"revived","message":"r"},{"atMs":3,"kind":"a","message":"again"}]"#)
                .arg(2)
                .arg("");
            s
        };
        let (status, due, id): (i64, i64, String) = call(&id).invoke_async(&mut conn).await.expect("enqueue");
        assert_eq!((status, id.as_str()), (1, id.as_str()), "{topo:?}");
        assert!(due > 0);
        let (status, due, _): (i64, i64, String) = call(&id).invoke_async(&mut conn).await.expect("enqueue");
        assert_eq!((status, due), (0, 0), "{topo:?}: already queued");
        let _: () = redis::pipe()
            .cmd("ZREM")
            .arg(&k.waiting)
            .arg(&id)
            .ignore()
            .cmd("ZADD")
            .arg(&k.dead)
            .arg(1)
            .arg(&id)
            .ignore()
            .query_async(&mut conn)
            .await
            .expect("make it dead");
        let (status, _, _): (i64, i64, String) = call(&id).invoke_async(&mut conn).await.expect("enqueue");
        assert_eq!(status, 3, "{topo:?}: revived");
        let history: String = redis::cmd("HGET")
            .arg(&k.errors)
            .arg(&id)
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

/// The README's worked example ("A late wake-up costs no slot"), on Redis' clock: interval
/// 1000 ms, tolerance 10 ms, A starts at 0, B wakes 40 ms late on slot 1010 and starts at
/// 1050; C (slot 2020) is moved to 2050, D (slot 3030) to 3050: each next holder waits
/// until an interval after the start before it, and the overrun shrinks by the tolerance
/// per slot. Real wake-ups add a little jitter to each start; the moves are exact. A run in
/// which this machine woke C or D later than their moved slot (a starved CPU) shows another
/// rule, not this one, and is tried again, up to five times.
#[tokio::test]
async fn the_readme_worked_example_holds() {
    for topo in Topology::EVERY {
        let mut conn = topo.connect().await;
        let mut tries = Vec::new();
        for _ in 0..5 {
            match readme_example(&mut conn, topo).await {
                Ok(()) => break,
                Err(why) => tries.push(why),
            }
        }
        assert!(
            tries.len() < 5,
            "{topo:?}: every try was too slow to show the example: {tries:?}"
        );
    }
}

/// One run of the README's example; `Err` when a wake-up was too late to show it.
async fn readme_example(conn: &mut Conn, topo: Topology) -> Result<(), String> {
    let key = unique_ns("readme").gate();
    set_state(conn, &key, 0, 0, 0, 1).await;
    let a = acquire(conn, &key, 30 * SEC, 0, 0).await;
    assert_eq!(a[0], 0, "{topo:?}: A goes at once: {a:?}");
    let a_start = a[2];
    let mut slots = Vec::new();
    for _ in 0..3 {
        let r = acquire(conn, &key, 30 * SEC, 0, 0).await;
        assert_eq!(r[0], 1, "{topo:?}: {r:?}");
        slots.push((r[1], r[4]));
    }
    let pace = SEC + TOL;
    let [(b, epoch), (c, _), (d, _)] = slots[..] else {
        unreachable!()
    };
    assert_eq!(
        (b, c, d),
        (a_start + pace, a_start + 2 * pace, a_start + 3 * pace),
        "{topo:?}: 1010, 2020, 3030"
    );
    // B wakes 40 ms late: nobody started since A, so B goes in the gap it left.
    sleep_until_redis(conn, &key, b + 40_000).await;
    let b_go = acquire(conn, &key, 30 * SEC, b, epoch).await;
    assert_eq!(b_go[0], 0, "{topo:?}: B goes late: {b_go:?}");
    let b_start = b_go[2];
    assert!(
        b_start - b >= 40_000,
        "{topo:?}: B started {} µs after its slot",
        b_start - b
    );
    // C on time is moved to an interval after B's start: 2050, 30 ms past its slot.
    sleep_until_redis(conn, &key, c).await;
    let c_moved = acquire(conn, &key, 30 * SEC, c, epoch).await;
    if c_moved[2] >= b_start + SEC {
        return Err(format!("C confirmed {} µs after its slot", c_moved[2] - c));
    }
    assert_eq!(c_moved[0], 1, "{topo:?}: C waits: {c_moved:?}");
    assert_eq!(
        c_moved[1],
        b_start + SEC,
        "{topo:?}: C's slot is an interval after B's start"
    );
    assert_eq!(
        c_moved[1] - c,
        (b_start - b) - TOL,
        "{topo:?}: the overrun shrank by the tolerance"
    );
    sleep_until_redis(conn, &key, c_moved[1]).await;
    let c_go = acquire(conn, &key, 30 * SEC, c_moved[1], epoch).await;
    assert_eq!(c_go[0], 0, "{topo:?}: C goes on its moved slot: {c_go:?}");
    let c_start = c_go[2];
    assert!(
        c_start - b_start >= SEC,
        "{topo:?}: B and C closer than the interval"
    );
    // D on time is moved to an interval after C's start: 3050.
    sleep_until_redis(conn, &key, d).await;
    let d_moved = acquire(conn, &key, 30 * SEC, d, epoch).await;
    if d_moved[2] >= c_start + SEC {
        return Err(format!("D confirmed {} µs after its slot", d_moved[2] - d));
    }
    assert_eq!(d_moved[0], 1, "{topo:?}: D waits: {d_moved:?}");
    assert_eq!(
        d_moved[1],
        c_start + SEC,
        "{topo:?}: D's slot is an interval after C's start"
    );
    assert_eq!(
        d_moved[1] - d,
        (c_start - c) - TOL,
        "{topo:?}: shrinking by the tolerance"
    );
    Ok(())
}
