//! The sync-run scripts (`run_open`, `run_page`, `run_mark`, `run_recorded`, `run_discard`) called
//! directly with the ARGV their contracts document, on real Redis (standalone and
//! cluster): counts exact under repeats and any order, completion once and never early,
//! feed lines never lost, and every refusal writing nothing. Each case is one an
//! adversarial review of the first version broke.

use lawsync::RedisConn;
use lawsync::keys::RunKeys;
use lawsync::lua::{self, LuaScript};
use lawsync_tests::servers::{Topology, unique_ns};

const TTL: &str = "86400000";

struct Run {
    conn: RedisConn,
    k: RunKeys,
    id: String,
}

impl Run {
    async fn new(topo: Topology) -> Self {
        let id = "r1".to_owned();
        Self {
            conn: topo.connect().await,
            k: unique_ns("luarun").run(&id),
            id,
        }
    }

    async fn call<T: redis::FromRedisValue>(
        &mut self,
        s: &LuaScript,
        args: &[&str],
    ) -> redis::RedisResult<T> {
        let mut call = s.prepare(&self.k);
        for a in args {
            call.arg(*a);
        }
        call.invoke_async(&mut self.conn).await
    }

    async fn open(&mut self, probes: &str, parts: &[&str]) -> i64 {
        let id = self.id.clone();
        let mut args = vec![id.as_str(), "1000", TTL, "{}", probes];
        args.extend_from_slice(parts);
        self.call(&lua::RUN_OPEN, &args).await.expect("open")
    }

    /// run_page of a plain window page: (counted, completed, probes_left).
    async fn page(
        &mut self,
        part: &str,
        page: &str,
        last: bool,
        total: &str,
        ids: &[(&str, &str)],
    ) -> (i64, i64, i64) {
        self.page_full(part, page, last, total, "0", &[], ids)
            .await
            .expect("page")
    }

    #[allow(clippy::too_many_arguments)]
    async fn page_full(
        &mut self,
        part: &str,
        page: &str,
        last: bool,
        total: &str,
        probe: &str,
        spawn: &[&str],
        ids: &[(&str, &str)],
    ) -> redis::RedisResult<(i64, i64, i64)> {
        let id = self.id.clone();
        let n = spawn.len().to_string();
        let mut args = vec![
            id.as_str(),
            part,
            page,
            if last { "1" } else { "0" },
            total,
            "0",
            "0",
            "2000",
            probe,
            "0",
            n.as_str(),
        ];
        args.extend_from_slice(spawn);
        for (i, s) in ids {
            args.push(i);
            args.push(s);
        }
        self.call(&lua::RUN_PAGE, &args).await
    }

    async fn mark(&mut self, id: &str, state: &str, line: &str) -> (i64, i64) {
        let run = self.id.clone();
        self.call(&lua::RUN_MARK, &[&run, id, state, "3000", line])
            .await
            .expect("mark")
    }

    async fn field(&mut self, f: &str) -> Option<String> {
        redis::cmd("HGET")
            .arg(&self.k.run)
            .arg(f)
            .query_async(&mut self.conn)
            .await
            .expect("hget")
    }

    async fn n(&mut self, state: &str) -> i64 {
        self.field(&format!("n:{state}"))
            .await
            .map_or(0, |v| v.parse().expect("count"))
    }
}

async fn each_topology(f: impl AsyncFn(Topology)) {
    for topo in Topology::EVERY {
        f(topo).await;
    }
}

#[tokio::test]
async fn repeats_and_any_order_count_once() {
    each_topology(async |topo| {
        let mut r = Run::new(topo).await;
        assert_eq!(r.open("0", &["w"]).await, 1);
        assert_eq!(r.open("0", &["w"]).await, 0, "a repeated start changes nothing");
        // A detail's outcome before its page is counted.
        assert_eq!(r.mark("b", "added", "{\"id\":\"b\"}").await, (1, 0));
        assert_eq!(
            r.page("w", "1", false, "3", &[("a", "sent"), ("b", "sent")])
                .await,
            (1, 0, -1)
        );
        assert_eq!(
            r.page("w", "1", false, "3", &[("a", "sent"), ("b", "sent")])
                .await,
            (0, 0, -1),
            "a repeated page"
        );
        assert_eq!(r.mark("a", "parked", "").await, (1, 0));
        assert_eq!(r.mark("a", "parked", "").await, (0, 0), "a repeated outcome");
        assert_eq!(r.page("w", "2", true, "3", &[("c", "skipped")]).await, (1, 0, -1));
        assert_eq!(
            r.mark("a", "added", "{\"id\":\"a\"}").await,
            (1, 1),
            "the last outcome completes it"
        );
        assert_eq!(
            r.mark("a", "parked", "").await,
            (0, 0),
            "an outcome never moves back"
        );
        assert_eq!(r.field("seen").await.as_deref(), Some("3"));
        assert_eq!(
            (
                r.n("added").await,
                r.n("skipped").await,
                r.n("sent").await,
                r.n("parked").await
            ),
            (2, 1, 0, 0)
        );
    })
    .await;
}

#[tokio::test]
async fn a_skip_seen_by_another_page_never_hides_the_fetch_and_its_line() {
    each_topology(async |topo| {
        let mut r = Run::new(topo).await;
        r.open("0", &["m", "all"]).await;
        r.page("m", "1", true, "1", &[("x", "sent")]).await;
        // The whole list lists x after its detail stored it, before the detail's count.
        assert_eq!(r.page("all", "1", true, "1", &[("x", "skipped")]).await.0, 1);
        let line = r#"{"id":"x","change":"added"}"#;
        let (moved, record) = r.mark("x", "added", line).await;
        assert_eq!(moved, 1, "added outranks skipped");
        assert_eq!(record, 1, "the run's record is owed (again) with the line");
        let kept: Option<String> = redis::cmd("HGET")
            .arg(&r.k.changes)
            .arg("x")
            .query_async(&mut r.conn)
            .await
            .expect("hget");
        assert_eq!(kept.as_deref(), Some(line));
        assert_eq!(r.n("added").await, 1);
    })
    .await;
}

#[tokio::test]
async fn a_window_is_finished_only_when_every_page_to_its_last_is_counted() {
    each_topology(async |topo| {
        let mut r = Run::new(topo).await;
        r.open("0", &["w"]).await;
        r.page("w", "1", false, "250", &[]).await;
        r.page("w", "4", true, "0", &[]).await;
        assert_eq!(
            r.page("w", "3", true, "0", &[]).await,
            (1, 0, -1),
            "page 2 was never counted"
        );
        assert_eq!(
            r.field("last:w").await.as_deref(),
            Some("3"),
            "the smallest last page holds"
        );
        assert_eq!(
            r.page("w", "2", false, "0", &[]).await,
            (1, 1, -1),
            "now every page to the last is in"
        );
    })
    .await;
}

#[tokio::test]
async fn a_daily_run_waits_for_the_whole_list_probe_however_its_months_are_retried() {
    each_topology(async |topo| {
        let mut r = Run::new(topo).await;
        r.open("2", &["probe:a", "probe:b", "probe:all"]).await;
        // Month a found a window to read and adds it before counting itself.
        assert_eq!(
            r.page_full("probe:a", "1", true, "0", "4", &["a"], &[])
                .await
                .expect("probe"),
            (1, 0, 1)
        );
        // A window read before the probe that sent it was counted (its count was retried
        // and decided not to spawn): the run does not wait for it, nor finish by it.
        r.page("z", "1", true, "1", &[("z1", "skipped")]).await;
        assert_eq!(
            r.page_full("probe:b", "1", true, "0", "1", &[], &[])
                .await
                .expect("probe"),
            (1, 0, 0),
            "the last month probe"
        );
        assert_eq!(r.field("unheldProbed").await.as_deref(), Some("3"));
        assert_eq!(
            r.field("probedTotal").await.as_deref(),
            Some("0"),
            "these probes reported no totalCnt"
        );
        assert_eq!(
            r.field("totalCnt").await.as_deref(),
            Some("1"),
            "only window z's first page"
        );
        r.page("a", "1", true, "1", &[("a1", "skipped")]).await;
        assert!(
            r.field("completed").await.is_none(),
            "the whole-list probe has not answered"
        );
        assert_eq!(
            r.page_full("probe:all", "1", true, "0", "0", &[], &[])
                .await
                .expect("probe"),
            (1, 1, -1)
        );
    })
    .await;
}

#[tokio::test]
async fn refusals_write_nothing() {
    each_topology(async |topo| {
        let mut r = Run::new(topo).await;
        r.open("0", &["w"]).await;
        let run = r.id.clone();
        for args in [
            vec![
                run.as_str(),
                "w",
                "1.5",
                "0",
                "1",
                "0",
                "0",
                "2000",
                "0",
                "0",
                "0",
            ],
            vec![
                run.as_str(),
                "w",
                "1",
                "yes",
                "1",
                "0",
                "0",
                "2000",
                "0",
                "0",
                "0",
            ],
            vec![
                run.as_str(),
                "w",
                "1",
                "0",
                "1e20",
                "0",
                "0",
                "2000",
                "0",
                "0",
                "0",
            ],
            vec![
                run.as_str(),
                "w",
                "1",
                "0",
                "1",
                "0.5",
                "0",
                "2000",
                "0",
                "0",
                "0",
            ],
            vec![run.as_str(), "w", "1", "0", "1", "0", "0", "nan", "0", "0"],
            vec![
                run.as_str(),
                "w",
                "1",
                "0",
                "1",
                "0",
                "0",
                "2000",
                "0",
                "0",
                "2",
                "only-one",
            ],
            vec![
                run.as_str(),
                "w",
                "1",
                "0",
                "1",
                "0",
                "0",
                "2000",
                "0",
                "0",
                "0",
                "x",
                "fetched",
            ],
        ] {
            let e = r
                .call::<(i64, i64, i64)>(&lua::RUN_PAGE, &args)
                .await
                .expect_err("refused");
            assert!(e.to_string().contains("BADARG"), "{args:?}: {e}");
        }
        // A stored state that is not one: CORRUPT, and the page is not counted.
        let _: () = redis::cmd("HSET")
            .arg(&r.k.ids)
            .arg("x")
            .arg("bogus")
            .query_async(&mut r.conn)
            .await
            .expect("hset");
        let e = r
            .page_full("w", "1", true, "1", "0", &[], &[("x", "sent")])
            .await
            .expect_err("corrupt");
        assert!(e.to_string().contains("CORRUPT"), "{e}");
        let pages: i64 = redis::cmd("SCARD")
            .arg(&r.k.pages)
            .query_async(&mut r.conn)
            .await
            .expect("scard");
        assert_eq!(pages, 0, "nothing was counted");
        let e = r
            .call::<(i64, i64)>(&lua::RUN_MARK, &[&run, "x", "added", "3000", ""])
            .await
            .expect_err("corrupt");
        assert!(e.to_string().contains("CORRUPT"), "{e}");
        // A key of another type.
        let _: () = redis::cmd("DEL")
            .arg(&r.k.ids)
            .query_async(&mut r.conn)
            .await
            .expect("del");
        let _: () = redis::cmd("SET")
            .arg(&r.k.changes)
            .arg("x")
            .query_async(&mut r.conn)
            .await
            .expect("set");
        let e = r
            .call::<(i64, i64)>(&lua::RUN_MARK, &[&run, "x", "added", "3000", "line"])
            .await
            .expect_err("wrong type");
        assert!(
            e.to_string().contains("CORRUPT") && e.to_string().contains("is a string, not a hash"),
            "{e}"
        );
        assert!(
            r.field("seen").await.as_deref() == Some("0"),
            "the state did not move"
        );
        // Opening with bad numbers or no part.
        let mut fresh = Run::new(topo).await;
        let id = fresh.id.clone();
        for args in [
            vec![id.as_str(), "1000", "1.5", "{}", "0", "w"],
            vec![id.as_str(), "1000", TTL, "{}", "0"],
            vec![id.as_str(), "nan", TTL, "{}", "0", "w"],
        ] {
            let e = fresh
                .call::<i64>(&lua::RUN_OPEN, &args)
                .await
                .expect_err("refused");
            assert!(e.to_string().contains("BADARG"), "{args:?}: {e}");
        }
        let exists: i64 = redis::cmd("EXISTS")
            .arg(&fresh.k.run)
            .query_async(&mut fresh.conn)
            .await
            .expect("exists");
        assert_eq!(exists, 0, "a refused open writes nothing");
        // Recording a run that is gone creates nothing and leaves the owed set.
        let _: () = redis::cmd("SADD")
            .arg(&fresh.k.unrecorded)
            .arg(&id)
            .query_async(&mut fresh.conn)
            .await
            .expect("sadd");
        let gone: i64 = fresh
            .call(&lua::RUN_RECORDED, &[&id, "5000", "1", TTL, "0", ""])
            .await
            .expect("recorded");
        assert_eq!(gone, -1);
        let exists: i64 = redis::cmd("EXISTS")
            .arg(&fresh.k.run)
            .arg(&fresh.k.alerts)
            .arg(&fresh.k.unrecorded)
            .query_async(&mut fresh.conn)
            .await
            .expect("exists");
        assert_eq!(exists, 0, "no stub run, no alert, not owed");
    })
    .await;
}

#[tokio::test]
async fn a_record_deletes_only_the_lines_it_wrote_and_owes_one_alert() {
    each_topology(async |topo| {
        let mut r = Run::new(topo).await;
        r.open("0", &["w"]).await;
        r.page("w", "1", true, "2", &[("a", "sent"), ("b", "sent")]).await;
        r.mark("a", "added", "A1").await;
        assert_eq!(r.mark("b", "dead", "").await, (1, 1));
        let run = r.id.clone();
        // Between reading the lines and writing them, b is redriven and stored.
        let read_at = r.field("version").await.expect("version");
        r.mark("b", "added", "B1").await;
        let files: i64 = r
            .call(
                &lua::RUN_RECORDED,
                &[
                    &run,
                    "4000",
                    "1",
                    TTL,
                    &read_at,
                    "changes/f1",
                    "a",
                    "A1",
                    "b",
                    "OLD",
                ],
            )
            .await
            .expect("recorded");
        assert_eq!(files, 1);
        let left: Vec<String> = redis::cmd("HKEYS")
            .arg(&r.k.changes)
            .query_async(&mut r.conn)
            .await
            .expect("hkeys");
        assert_eq!(left, ["b"], "a line that changed since it was read stays");
        let owed: i64 = redis::cmd("SISMEMBER")
            .arg(&r.k.unrecorded)
            .arg(&run)
            .query_async(&mut r.conn)
            .await
            .expect("owed");
        assert_eq!(owed, 1, "still owed: a line is left");
        let now_at = r.field("version").await.expect("version");
        let files: i64 = r
            .call(
                &lua::RUN_RECORDED,
                &[&run, "5000", "1", TTL, &now_at, "changes/f2", "b", "B1"],
            )
            .await
            .expect("recorded");
        assert_eq!(files, 2);
        let feed: Vec<String> =
            serde_json::from_str(&r.field("feed").await.expect("feed")).expect("a JSON list");
        assert_eq!(feed, ["changes/f1", "changes/f2"]);
        let owed: i64 = redis::cmd("SISMEMBER")
            .arg(&r.k.unrecorded)
            .arg(&run)
            .query_async(&mut r.conn)
            .await
            .expect("owed");
        assert_eq!(owed, 0, "recorded from the current version, with no line left");
        let alerts: i64 = redis::cmd("SCARD")
            .arg(&r.k.alerts)
            .query_async(&mut r.conn)
            .await
            .expect("alerts");
        assert_eq!(alerts, 1, "one alert for the run, however often it is recorded");
        for key in [&r.k.run, &r.k.ids, &r.k.pages, &r.k.parts] {
            let ttl: i64 = redis::cmd("PTTL")
                .arg(key)
                .query_async(&mut r.conn)
                .await
                .expect("pttl");
            assert!(ttl > 0, "{key} lives as long as the run");
        }
    })
    .await;
}

#[tokio::test]
async fn month_probes_sum_their_totals_apart_from_the_windows_read() {
    each_topology(async |topo| {
        let mut r = Run::new(topo).await;
        r.open("2", &["probe:a", "probe:b", "probe:all"]).await;
        r.page_full("probe:a", "1", true, "40", "1", &[], &[])
            .await
            .expect("probe");
        r.page_full("probe:b", "1", true, "25", "3", &["b"], &[])
            .await
            .expect("probe");
        r.page("b", "1", true, "25", &[("b1", "skipped")]).await;
        assert_eq!(
            r.field("probedTotal").await.as_deref(),
            Some("65"),
            "what the whole-list probe subtracts"
        );
        assert_eq!(
            r.field("totalCnt").await.as_deref(),
            Some("25"),
            "only the window read"
        );
        assert_eq!(r.field("total:b").await.as_deref(), Some("25"));
    })
    .await;
}

#[tokio::test]
async fn a_record_read_before_a_later_change_leaves_the_run_owed() {
    each_topology(async |topo| {
        let mut r = Run::new(topo).await;
        r.open("0", &["w1", "w2"]).await;
        r.page("w1", "1", true, "2", &[("a", "sent"), ("c", "sent")])
            .await;
        r.mark("a", "added", "L-a").await;
        assert_eq!(
            r.page("w2", "1", true, "1", &[("c", "skipped")]).await.1,
            1,
            "completed"
        );
        let read_at = r.field("version").await.expect("version");
        // c's fetch settles while the record is being written from the older read.
        assert_eq!(r.mark("c", "unchanged", "").await, (1, 1));
        let run = r.id.clone();
        let _: i64 = r
            .call(
                &lua::RUN_RECORDED,
                &[&run, "4000", "0", TTL, &read_at, "changes/f1", "a", "L-a"],
            )
            .await
            .expect("recorded");
        let owed: i64 = redis::cmd("SISMEMBER")
            .arg(&r.k.unrecorded)
            .arg(&run)
            .query_async(&mut r.conn)
            .await
            .expect("owed");
        assert_eq!(owed, 1, "the record is stale: the run stays owed");
    })
    .await;
}

#[tokio::test]
async fn numbers_are_digits_as_redis_writes_them() {
    each_topology(async |topo| {
        let mut r = Run::new(topo).await;
        r.open("1", &["probe:a", "w"]).await;
        let run = r.id.clone();
        for bad in ["1e2", "0x10", " 7", "7.0", "+7", "07", "-0", "1234567890123456"] {
            let e = r
                .call::<(i64, i64, i64)>(
                    &lua::RUN_PAGE,
                    &[&run, "w", "1", "0", bad, "0", "0", "2000", "0", "0", "0"],
                )
                .await
                .expect_err(bad);
            assert!(e.to_string().contains("BADARG"), "{bad}: {e}");
            let e = r
                .call::<(i64, i64)>(&lua::RUN_MARK, &[&run, "x", "added", bad, ""])
                .await
                .expect_err(bad);
            assert!(e.to_string().contains("BADARG"), "{bad}: {e}");
        }
        let pages: i64 = redis::cmd("SCARD")
            .arg(&r.k.pages)
            .query_async(&mut r.conn)
            .await
            .expect("scard");
        assert_eq!(pages, 0, "nothing was counted");
        // One month probe, then a second: refused, probesLeft never below zero.
        r.page_full("probe:a", "1", true, "3", "1", &[], &[])
            .await
            .expect("probe");
        let e = r
            .page_full("probe:b", "1", true, "3", "1", &[], &[])
            .await
            .expect_err("no probe left");
        assert!(e.to_string().contains("no month probe left"), "{e}");
        assert_eq!(r.field("probesLeft").await.as_deref(), Some("0"));
    })
    .await;
}

#[tokio::test]
async fn hits_of_other_windows_are_counted_not_kept() {
    each_topology(async |topo| {
        let mut r = Run::new(topo).await;
        r.open("0", &["all"]).await;
        let run = r.id.clone();
        // The whole list's page: 3 hits, 2 of them dated (another window's), 1 undated.
        let (counted, completed, _) = r
            .call::<(i64, i64, i64)>(
                &lua::RUN_PAGE,
                &[
                    &run, "all", "1", "1", "3", "0", "0", "2000", "0", "2", "0", "u1", "sent",
                ],
            )
            .await
            .expect("page");
        assert_eq!((counted, completed), (1, 0));
        assert_eq!(r.field("elsewhere").await.as_deref(), Some("2"));
        assert_eq!(
            r.field("listed:all").await.as_deref(),
            Some("3"),
            "the window listed what it reported"
        );
        let kept: i64 = redis::cmd("HLEN")
            .arg(&r.k.ids)
            .query_async(&mut r.conn)
            .await
            .expect("hlen");
        assert_eq!(kept, 1, "only the undated hit is kept");
        assert_eq!(r.mark("u1", "added", "").await.1, 1, "the run completes");
        // A count that is not whole is refused.
        let e = r
            .call::<(i64, i64, i64)>(
                &lua::RUN_PAGE,
                &[&run, "all", "2", "1", "3", "0", "0", "2000", "0", "-1", "0"],
            )
            .await
            .expect_err("refused");
        assert!(e.to_string().contains("BADARG"), "{e}");
    })
    .await;
}

#[tokio::test]
async fn a_run_is_discarded_only_when_the_store_is_owed_nothing() {
    each_topology(async |topo| {
        let mut r = Run::new(topo).await;
        r.open("0", &["w"]).await;
        let run = r.id.clone();
        let discard = async |r: &mut Run| -> i64 {
            let run = r.id.clone();
            r.call(&lua::RUN_DISCARD, &[&run, "finished"])
                .await
                .expect("discard")
        };
        assert_eq!(discard(&mut r).await, 0, "an open run is kept");
        r.page("w", "1", true, "1", &[("x", "sent")]).await;
        let line = r#"{"id":"x","change":"added"}"#;
        assert_eq!(r.mark("x", "added", line).await.1, 1);
        assert_eq!(
            discard(&mut r).await,
            0,
            "a run owed its record and a line is kept"
        );
        let version = r.field("version").await.expect("version");
        let recorded: i64 = r
            .call(
                &lua::RUN_RECORDED,
                &[&run, "3000", "0", TTL, &version, "changes/f", "x", line],
            )
            .await
            .expect("recorded");
        assert_eq!(recorded, 1);
        assert_eq!(r.field("recorded").await.as_deref(), Some("3000"));
        assert_eq!(
            discard(&mut r).await,
            1,
            "a recorded run owed nothing is discarded"
        );
        for key in [&r.k.run, &r.k.ids, &r.k.pages, &r.k.parts, &r.k.changes] {
            let n: i64 = redis::cmd("EXISTS")
                .arg(key)
                .query_async(&mut r.conn)
                .await
                .expect("exists");
            assert_eq!(n, 0, "{key} left behind");
        }
        // The same id opens afresh and counts its first page again.
        assert_eq!(r.open("0", &["w"]).await, 1);
        assert_eq!(r.page("w", "1", true, "1", &[("x", "skipped")]).await.0, 1);
        assert_eq!(discard(&mut r).await, 0, "complete but not recorded: kept");
    })
    .await;
}

#[tokio::test]
async fn a_run_discarded_as_gone_is_owed_nothing_afterwards() {
    each_topology(async |topo| {
        let mut r = Run::new(topo).await;
        let run = r.id.clone();
        // A recorded run got a late mark (owed again) and its keys expired before the
        // drainer wrote the record: the id is still in the owed sets, its hash is gone.
        for key in [&r.k.unrecorded, &r.k.alerts] {
            let _: i64 = redis::cmd("SADD")
                .arg(key)
                .arg(&run)
                .query_async(&mut r.conn)
                .await
                .expect("sadd");
        }
        let gone: i64 = r
            .call(&lua::RUN_DISCARD, &[&run, "finished"])
            .await
            .expect("discard");
        assert_eq!(gone, 1);
        // The window is searched again under the same id.
        assert_eq!(r.open("0", &["w"]).await, 1);
        for key in [&r.k.unrecorded, &r.k.alerts] {
            let owed: i64 = redis::cmd("SISMEMBER")
                .arg(key)
                .arg(&run)
                .query_async(&mut r.conn)
                .await
                .expect("sismember");
            assert_eq!(
                owed, 0,
                "{key}: the new run, just opened, is owed a record or an alert it never earned"
            );
        }
    })
    .await;
}
