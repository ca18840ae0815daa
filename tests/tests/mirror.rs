//! The mirror as its users rely on it (issue 15): what is held is not fetched again, even
//! with Redis lost; revisions, old missing markers and `refresh` are fetched; every sync
//! is a run with exact counts under duplicate deliveries, complete only when every id
//! settled, with one alert for a discrepancy; every stored object matches its JSON Schema;
//! the increment feed lists exactly what each run changed; bad input is named; no key
//! anywhere. Real Redis, SQS and S3 on moto, the look-alike.

use lawsync::law::SearchRequest;
use lawsync::mirror::runs::RunId;
use lawsync_tests::lookalike::{Fault, Injection};
use lawsync_tests::mirror::{MirrorRig, Schemas, Store};
use serde_json::Value;

fn window(from: &str, to: &str) -> SearchRequest {
    SearchRequest {
        from: from.into(),
        to: to.into(),
        ..Default::default()
    }
}

/// Runs until the run is complete and recorded (the drainer works off what was parked).
async fn settle(rig: &MirrorRig, run: &RunId) {
    for _ in 0..60 {
        rig.pump().await;
        let s = rig.status(run).await;
        if s.recorded_ms.is_some() {
            return;
        }
        rig.drain(3).await;
    }
    panic!("run {run} never completed: {:?}", rig.status(run).await);
}

/// The ids a window lists today, and which of them have a detail.
fn expected(rig: &MirrorRig, from: &str, to: &str) -> (Vec<String>, Vec<String>) {
    let all = rig.lookalike.corpus().window(from, to);
    let ids = all.iter().map(|p| p.id.to_string()).collect();
    let missing = all
        .iter()
        .filter(|p| p.detail_missing)
        .map(|p| p.id.to_string())
        .collect();
    (ids, missing)
}

fn ids_under(keys: &[String], prefix: &str) -> Vec<String> {
    let mut ids: Vec<String> = keys
        .iter()
        .filter_map(|k| k.strip_prefix(prefix))
        .filter_map(|k| k.strip_suffix(".json"))
        .map(str::to_owned)
        .collect();
    ids.sort();
    ids
}

#[tokio::test]
async fn a_mirrored_window_costs_only_its_search_calls_even_with_redis_lost() {
    let rig = MirrorRig::start(Store::Bucket, 3, None).await;
    let (from, to) = ("20250301", "20250331");
    let (ids, missing) = expected(&rig, from, to);
    assert!(ids.len() > 20, "a window worth mirroring: {}", ids.len());

    let first = rig.sync(window(from, to)).await;
    settle(&rig, &first).await;
    let stored = ids_under(&rig.keys("prec/").await, "prec/");
    let marked = ids_under(&rig.keys("missing/").await, "missing/");
    let mut held: Vec<String> = stored.iter().chain(&marked).cloned().collect();
    held.sort();
    let mut want = ids.clone();
    want.sort();
    assert_eq!(held, want, "every listed id is stored or recorded missing");
    assert_eq!(marked.len(), missing.len());

    // Again: search calls only.
    let before = rig.arrivals_len();
    let again = rig.sync(window(from, to)).await;
    settle(&rig, &again).await;
    let (searches, details) = rig.calls_since(before);
    assert_eq!(details, 0, "a held precedent is never fetched again");
    assert_eq!(searches, ids.len().div_ceil(100));
    let s = rig.status(&again).await;
    assert_eq!(s.counts.get("skipped").copied(), Some(ids.len() as i64), "{s:?}");

    // Redis lost: the store answers, nothing is fetched, and nothing held is skipped wrongly.
    rig.flush_redis().await;
    let before = rig.arrivals_len();
    let after_flush = rig.sync(window(from, to)).await;
    settle(&rig, &after_flush).await;
    assert_eq!(
        rig.calls_since(before).1,
        0,
        "Redis flushed: still no detail call"
    );

    // Refresh: every precedent again, on purpose.
    let before = rig.arrivals_len();
    let refresh = rig
        .sync(SearchRequest {
            refresh: true,
            ..window(from, to)
        })
        .await;
    settle(&rig, &refresh).await;
    assert_eq!(
        rig.calls_since(before).1,
        ids.len(),
        "refresh fetches every id listed"
    );
    let s = rig.status(&refresh).await;
    assert_eq!(
        s.counts.get("unchanged").copied().unwrap_or(0) + s.counts.get("missing").copied().unwrap_or(0),
        ids.len() as i64,
        "the same content is unchanged, not revised: {s:?}"
    );
}

#[tokio::test]
async fn a_store_without_a_document_is_fetched_even_when_redis_says_held() {
    // The other direction of "the store is the truth": Redis holds nothing the store does
    // not, because it is written after the store. A document deleted from the store while
    // Redis is flushed is fetched again.
    let rig = MirrorRig::start(Store::Folder, 4, None).await;
    let (from, to) = ("20250505", "20250509");
    let run = rig.sync(window(from, to)).await;
    settle(&rig, &run).await;
    let stored = rig.keys("prec/").await;
    let gone = stored.first().expect("something stored").clone();
    let folder = rig.folder.clone().expect("folder");
    std::fs::remove_file(folder.join(&gone)).expect("remove");
    rig.flush_redis().await;
    let before = rig.arrivals_len();
    let again = rig.sync(window(from, to)).await;
    settle(&rig, &again).await;
    assert_eq!(
        rig.calls_since(before).1,
        1,
        "exactly the missing document is fetched"
    );
    assert!(rig.keys("prec/").await.contains(&gone));
}

#[tokio::test]
async fn a_revised_hit_and_an_old_missing_marker_are_fetched_again() {
    // Find a precedent revised in the corpus, and mirror its day before the revision.
    let rig = MirrorRig::start(Store::Bucket, 5, None).await;
    let corpus = rig.lookalike.corpus();
    let revised = corpus
        .window("20240101", "20241231")
        .into_iter()
        .find(|p| p.revision.is_some() && !p.detail_missing)
        .expect("a revised precedent in 2024");
    let rev = revised.revision.clone().expect("revision");
    let day_before =
        lawsync::law::calendar::yyyymmdd(lawsync::law::calendar::day_number(&rev.on).expect("date") - 1);
    rig.lookalike.set_today(Some(&day_before)).expect("today");
    let (from, to) = (revised.decided.as_str(), revised.decided.as_str());
    let run = rig.sync(window(from, to)).await;
    settle(&rig, &run).await;
    let key = format!("prec/{}.json", revised.id);
    let old = rig.json(&key).await;

    // The revision is published: the listing differs, the precedent is fetched again.
    rig.lookalike.set_today(Some(&rev.on)).expect("today");
    let before = rig.arrivals_len();
    let run = rig.sync(window(from, to)).await;
    settle(&rig, &run).await;
    assert_eq!(rig.calls_since(before).1, 1, "only the revised precedent");
    let new = rig.json(&key).await;
    assert_ne!(old["listingHash"], new["listingHash"]);
    assert_ne!(old["contentHash"], new["contentHash"]);
    assert_eq!(
        old["firstSeenAt"], new["firstSeenAt"],
        "first seen survives a revision"
    );
    let s = rig.status(&run).await;
    assert_eq!(s.counts.get("revised").copied(), Some(1), "{s:?}");
    let feed = rig.keys("changes/").await;
    let last = rig
        .text(feed.iter().find(|k| k.contains(run.as_str())).expect("feed file"))
        .await;
    let lines: Vec<Value> = last
        .lines()
        .map(|l| serde_json::from_str(l).expect("line"))
        .collect();
    assert_eq!(lines.len(), 1, "{last}");
    assert_eq!(lines[0]["change"], "revised");
    assert_eq!(lines[0]["id"], revised.id.to_string());

    // A missing marker checked long ago is asked again; a fresh one is not.
    let missing = corpus
        .window("20240101", "20241231")
        .into_iter()
        .find(|p| p.detail_missing)
        .expect("a missing precedent");
    rig.lookalike.set_today(None).expect("today");
    let (mf, mt) = (missing.decided.as_str(), missing.decided.as_str());
    let run = rig.sync(window(mf, mt)).await;
    settle(&rig, &run).await;
    let before = rig.arrivals_len();
    let run = rig.sync(window(mf, mt)).await;
    settle(&rig, &run).await;
    assert_eq!(rig.calls_since(before).1, 0, "a fresh marker is trusted");
    // Age the marker past the recheck interval, in the store, and lose Redis' copy.
    let mkey = format!("missing/{}.json", missing.id);
    let mut marker = rig.json(&mkey).await;
    let old_ms = lawsync::clock::now_millis() - lawsync::policy::MISSING_RECHECK.as_millis() as u64 - 1000;
    marker["checkedAtMs"] = old_ms.into();
    marker["checkedAt"] = lawsync::clock::rfc3339_millis(old_ms).into();
    rig.docs
        .put(&mkey, marker.to_string().as_bytes())
        .await
        .expect("age the marker");
    rig.flush_redis().await;
    let before = rig.arrivals_len();
    let run = rig.sync(window(mf, mt)).await;
    settle(&rig, &run).await;
    assert_eq!(rig.calls_since(before).1, 1, "an old marker is checked again");
}

#[tokio::test]
async fn a_clean_run_completes_with_exact_counts_under_duplicate_deliveries() {
    let mut rig = MirrorRig::start(Store::Bucket, 6, None).await;
    rig.duplicate = true;
    let (from, to) = ("20230102", "20230228");
    let (ids, missing) = expected(&rig, from, to);
    assert!(ids.len() > 50, "more than two pages of 25: {}", ids.len());
    let run = rig
        .sync(SearchRequest {
            display: Some(25),
            ..window(from, to)
        })
        .await;
    settle(&rig, &run).await;
    let s = rig.status(&run).await;
    let n = |k: &str| s.counts.get(k).copied().unwrap_or(0);
    assert_eq!(s.ids_seen, ids.len() as u64, "{s:?}");
    assert_eq!(s.total_cnt, ids.len() as u64);
    assert_eq!(n("added"), (ids.len() - missing.len()) as i64, "{s:?}");
    assert_eq!(n("missing"), missing.len() as i64);
    assert_eq!(
        (n("sent"), n("parked"), n("dead"), n("skipped")),
        (0, 0, 0, 0),
        "{s:?}"
    );
    assert_eq!(s.pages_done, ids.len().div_ceil(25) as u64);
    assert_eq!(
        (s.parts, s.parts_done),
        (1, 1),
        "one window, read to its last page"
    );
    let text = s.text(lawsync::clock::now_millis());
    assert!(
        text.contains("windows 1/1") && text.contains("100%") && text.contains("complete, recorded"),
        "{text}"
    );
    assert!(s.discrepancies().is_empty(), "{:?}", s.discrepancies());

    let record = rig.json(&format!("runs/{run}.json")).await;
    assert_eq!(record["complete"], true);
    assert_eq!(record["ids"]["seen"], ids.len());
    assert_eq!(record["discrepancies"], serde_json::json!([]));
    assert!(
        rig.alerts.runs.lock().expect("alerts").is_empty(),
        "a clean run alerts nobody"
    );

    // The feed lists exactly what the run added or found missing, once each.
    let feed = record["feed"].as_array().expect("feed").clone();
    assert_eq!(feed.len(), 1, "{feed:?}");
    let text = rig.text(feed[0].as_str().expect("key")).await;
    let mut listed: Vec<String> = text
        .lines()
        .map(|l| {
            serde_json::from_str::<Value>(l).expect("line")["id"]
                .as_str()
                .expect("id")
                .to_owned()
        })
        .collect();
    listed.sort();
    let mut want = ids.clone();
    want.sort();
    assert_eq!(listed, want, "one line per id, none twice");
}

#[tokio::test]
async fn parked_and_dead_ids_keep_a_run_open_then_it_completes_with_the_discrepancy_and_one_alert() {
    let logs = lawsync_tests::capture::capture_global();
    let rig = MirrorRig::start(Store::Bucket, 7, None).await;
    let (from, to) = ("20220103", "20220121");
    let (ids, _) = expected(&rig, from, to);
    // Three details fail with a 503 (parked, retried later), then two with a 410
    // (permanent: dead letters).
    rig.lookalike.inject(Injection {
        endpoint: Some("detail".into()),
        ..Injection::new(Fault::Status { status: 503 }, 3)
    });
    rig.lookalike.inject(Injection {
        endpoint: Some("detail".into()),
        ..Injection::new(Fault::Status { status: 410 }, 2)
    });
    let run = rig.sync(window(from, to)).await;
    rig.pump().await;
    let s = rig.status(&run).await;
    let live = rig.deps.queue.list(20).await.expect("list");
    assert!(
        s.completed_ms.is_none(),
        "parked ids keep it open: {s:?} {live:?}"
    );
    let dead = rig.deps.queue.dead(20).await.expect("dead");
    assert!(
        s.counts.get("parked").copied().unwrap_or(0) > 0,
        "{s:?}\nlive {live:?}\ndead {dead:?}\narrivals {:?}",
        rig.lookalike.arrivals()
    );
    assert!(
        rig.keys("runs/").await.is_empty(),
        "no record before it completes"
    );
    settle(&rig, &run).await;
    let s = rig.status(&run).await;
    assert_eq!(s.ids_seen, ids.len() as u64);
    assert_eq!(s.outstanding(), 0);
    let dead = s.counts.get("dead").copied().unwrap_or(0);
    assert!(dead >= 1, "{s:?}");
    let record = rig.json(&format!("runs/{run}.json")).await;
    let d = record["discrepancies"].as_array().expect("discrepancies");
    assert!(
        d.iter()
            .any(|x| x.as_str().is_some_and(|t| t.contains("dead-lettered"))),
        "{d:?}"
    );
    // One alert, however many passes follow.
    rig.drain(2).await;
    rig.drain(2).await;
    let alerts = rig.alerts.runs.lock().expect("alerts").clone();
    assert_eq!(alerts.len(), 1, "{alerts:?}");
    assert_eq!(alerts[0].run_id, run);
    // What Slack would be sent, the record, the feed and the logs: no key.
    let hook = lawsync::alert::SlackWebhook::new(
        lawsync::Secret::new("https://hooks.invalid/x"),
        Some(lawsync::Secret::new(&rig.oc)),
    )
    .expect("hook");
    let text = hook.runs_message("test", &alerts)["text"]
        .as_str()
        .expect("text")
        .to_owned();
    assert!(
        text.contains(run.as_str()) && text.contains("dead-lettered"),
        "{text}"
    );
    let mut everything = text;
    for key in rig.keys("").await {
        everything.push_str(&rig.text(&key).await);
    }
    everything.push_str(&logs.text());
    lawsync_tests::leaks::assert_nowhere("alerts, the store and the logs", &everything, &[&rig.oc]);
}

#[test]
fn every_new_message_field_rejects_bad_input_by_name() {
    use lawsync::app::sqs::{MessageKind, parse_message};
    let detail = |body: &str| {
        parse_message(MessageKind::Detail, body)
            .map(|_| ())
            .map_err(|e| e.to_string())
    };
    let search = |body: &str| {
        parse_message(MessageKind::Search, body)
            .map(|_| ())
            .map_err(|e| e.to_string())
    };
    let listing = r#""listing":{"판례일련번호":"123","사건명":"사기"}"#;
    detail(&format!(
        r#"{{"id":"123","run":"sync-1",{listing},"firstSeenAt":"2026-01-01T00:00:00.000Z","reason":"new"}}"#
    ))
    .expect("a run's detail message");
    for (body, says) in [
        (r#"{"id":"123","run":"a/b"}"#.to_owned(), "invalid message body"),
        (
            r#"{"id":"123","refresh":"yes"}"#.to_owned(),
            "invalid message body",
        ),
        (
            r#"{"id":"123","reason":"because"}"#.to_owned(),
            "invalid message body",
        ),
        (
            r#"{"id":"123","firstSeenAt":"yesterday"}"#.to_owned(),
            "firstSeenAt must be an instant",
        ),
        (
            r#"{"id":"124","listing":{"판례일련번호":"123"}}"#.to_owned(),
            "listing.판례일련번호 must be the message's id",
        ),
        (
            r#"{"id":"123","listing":{"사건명":"x"}}"#.to_owned(),
            "invalid message body",
        ),
    ] {
        let e = detail(&body).expect_err(&body);
        assert!(e.contains(says), "{body}: {e}");
    }
    search(r#"{"schedule":"daily","at":"2026-12-01T19:00:00Z"}"#).expect("a daily firing");
    search(r#"{"all":true,"run":"sweep-1","refresh":true}"#).expect("a sweep page");
    for (body, says) in [
        (
            r#"{"schedule":"hourly","at":"2026-12-01T19:00:00Z"}"#,
            "invalid message body",
        ),
        (
            r#"{"schedule":"daily","at":"tomorrow"}"#,
            "at must be an RFC 3339 instant",
        ),
        (r#"{"schedule":"daily"}"#, "invalid message body"),
        (
            r#"{"schedule":"daily","at":"2026-12-01T19:00:00Z","extra":1}"#,
            "invalid message body",
        ),
        (
            r#"{"all":true,"from":"20260101","to":"20260102"}"#,
            "all reads the whole list",
        ),
        (r#"{"from":"20260101"}"#, "from and to are required"),
        (
            r#"{"from":"20260101","to":"20260102","run":"-x"}"#,
            "invalid message body",
        ),
        (
            r#"{"from":"20260101","to":"20260102","probe":"sometimes"}"#,
            "invalid message body",
        ),
    ] {
        let e = search(body).expect_err(body);
        assert!(e.contains(says), "{body}: {e}");
    }
}

#[tokio::test]
async fn every_stored_object_matches_its_schema_and_no_key_is_anywhere() {
    let schemas = Schemas::load();
    let rig = MirrorRig::start(Store::Bucket, 8, None).await;
    let run = rig.sync(window("20240610", "20240705")).await;
    settle(&rig, &run).await;
    let undated = rig.sync(SearchRequest {
        all: true,
        display: Some(100),
        page: Some(28),
        ..Default::default()
    });
    // The tail of the whole list holds the undated precedents.
    let undated = undated.await;
    rig.pump().await;
    let _ = undated;
    let mut checked = std::collections::BTreeMap::<&str, usize>::new();
    for key in rig.keys("").await {
        let name = Schemas::for_key(&key).unwrap_or_else(|| panic!("{key}: under no documented prefix"));
        let text = rig.text(&key).await;
        assert!(!text.contains(&rig.oc), "{key} holds the key");
        let values: Vec<Value> = if name == "change" {
            text.lines()
                .map(|l| serde_json::from_str(l).expect("line"))
                .collect()
        } else {
            vec![serde_json::from_str(&text).expect("json")]
        };
        for v in values {
            if let Err(e) = schemas.validate(name, &v) {
                panic!("{key} does not match {name}.schema.json:\n{e}\n{v:#}");
            }
        }
        *checked.entry(name).or_default() += 1;
    }
    for name in ["precedent", "missing", "change", "index", "run"] {
        assert!(
            checked.get(name).copied().unwrap_or(0) > 0,
            "nothing stored under {name}: {checked:?}"
        );
    }
    eprintln!("validated: {checked:?}");
    let redis =
        lawsync_tests::leaks::redis_text(&lawsync_tests::servers::Topology::Standalone.url(), &rig.ns).await;
    lawsync_tests::leaks::assert_nowhere("Redis", &redis, &[&rig.oc]);
}

#[test]
fn the_schemas_reject_what_they_must() {
    let schemas = Schemas::load();
    let hash = format!("sha256:{}", "a".repeat(64));
    let good = serde_json::json!({
        "schemaVersion": 1, "id": "1", "fetchedAt": "2026-01-01T00:00:00.000Z",
        "firstSeenAt": null, "runId": null, "listing": null, "listingHash": null,
        "contentHash": hash, "detail": { "판례정보일련번호": "1" }
    });
    schemas.validate("precedent", &good).expect("valid");
    for (field, bad) in [
        ("schemaVersion", serde_json::json!(2)),
        ("id", serde_json::json!("12a")),
        ("fetchedAt", serde_json::json!("yesterday")),
        ("contentHash", serde_json::json!("md5:x")),
        (
            "detail",
            serde_json::json!({ "판례정보일련번호": "1", "판례상세링크": "/DRF?OC=x" }),
        ),
    ] {
        let mut v = good.clone();
        v[field] = bad;
        assert!(schemas.validate("precedent", &v).is_err(), "{field} accepted");
    }
    let mut extra = good.clone();
    extra["surprise"] = serde_json::json!(1);
    assert!(
        schemas.validate("precedent", &extra).is_err(),
        "unknown fields are refused"
    );
}

#[tokio::test]
async fn a_detail_whose_count_was_lost_counts_what_it_did_on_its_retry() {
    use lawsync::app::jobs::run_detail;
    use lawsync::app::sqs::DetailMessage;
    use lawsync::mirror::held::FetchReason;
    use lawsync::mirror::runs::{IdState, PageCount, RunPlan};
    let rig = MirrorRig::start(Store::Folder, 9, None).await;
    let corpus = rig.lookalike.corpus();
    let days = corpus.window("20240101", "20240331");
    let missing = days
        .iter()
        .find(|p| p.detail_missing)
        .expect("a missing one")
        .clone();
    let stored = days
        .iter()
        .find(|p| !p.detail_missing)
        .expect("a stored one")
        .clone();
    let run = RunId::parse("sync-lost-count").expect("id");
    let plan = RunPlan {
        kind: "sync".into(),
        windows: vec!["w".into()],
        query: None,
        refresh: false,
    };
    rig.deps
        .runs
        .open(&run, &plan, 0, lawsync::clock::now_millis())
        .await
        .expect("open");
    let (m_id, s_id) = (missing.id.to_string(), stored.id.to_string());
    let ids = [(m_id.as_str(), IdState::Sent), (s_id.as_str(), IdState::Sent)];
    let page = PageCount {
        part: "w",
        page: 1,
        last: false,
        total: 2,
        ids: &ids,
        ..Default::default()
    };
    rig.deps.runs.page(&run, &page).await.expect("page");
    let msg = |p: &lawsync_tests::lookalike::Precedent, reason| DetailMessage {
        id: p.id.to_string(),
        run: Some(run.clone()),
        listing: Some(serde_json::from_value(p.search_item(&rig.oc)).expect("listing")),
        first_seen_at: Some(lawsync::clock::rfc3339_millis(lawsync::clock::now_millis())),
        reason: Some(reason),
        refresh: false,
    };
    let deadline = lawsync::Deadline::after(std::time::Duration::from_secs(30));
    let keys = rig.ns.run(run.as_str());
    let mut conn = lawsync_tests::servers::Topology::Standalone.connect().await;
    for (p, reason, want) in [
        (&missing, FetchReason::New, "missing"),
        (&stored, FetchReason::New, "added"),
    ] {
        let first = run_detail(&rig.deps, &msg(p, reason), deadline)
            .await
            .expect("stored");
        assert_eq!(first.as_str(), want, "the first delivery");
        // The count is lost: the id is back to sent and its line gone, as if Redis had
        // failed between the store and the count.
        let id = p.id.to_string();
        let _: () = redis::pipe()
            .cmd("HSET")
            .arg(&keys.ids)
            .arg(&id)
            .arg("sent")
            .ignore()
            .cmd("HINCRBY")
            .arg(&keys.run)
            .arg(format!("n:{}", first.as_str()))
            .arg(-1)
            .ignore()
            .cmd("HINCRBY")
            .arg(&keys.run)
            .arg("n:sent")
            .arg(1)
            .ignore()
            .cmd("HDEL")
            .arg(&keys.changes)
            .arg(&id)
            .ignore()
            .query_async(&mut conn)
            .await
            .expect("lose the count");
        let before = rig.arrivals_len();
        let again = run_detail(&rig.deps, &msg(p, reason), deadline)
            .await
            .expect("retried");
        assert_eq!(rig.calls_since(before).1, 0, "the retry makes no call");
        assert_eq!(
            again.as_str(),
            want,
            "the retry counts what the first delivery did"
        );
        let line: Option<String> = redis::cmd("HGET")
            .arg(&keys.changes)
            .arg(&id)
            .query_async(&mut conn)
            .await
            .expect("line");
        let line: Value = serde_json::from_str(&line.expect("a feed line")).expect("json");
        assert_eq!(line["change"], want);
    }
}
