//! The backfill (issue 16): planned in month windows plus the undated hits, resumable after
//! a crash without searching done windows again, held under its watermark, giving way to a
//! daily run; bad requests named; no key anywhere. Real Redis, the look-alike, the
//! functions' handlers over in-memory queues, and on SQS under the functions' roles.

use std::collections::BTreeSet;

use lawsync::app::backfill;
use lawsync::app::schedule::ScheduleKind;
use lawsync::app::sqs::MessageKind;
use lawsync::queue::{ErrorNote, Job, JobKind};
use lawsync_tests::backfill::{TODAY, held, open_foreground, request, rig, status, wanted, window_states};
use lawsync_tests::mirror::{MirrorRig, Queues, Store};
use lawsync_tests::stack::{Role, calls_of};

async fn pump_to_the_end(rig: &MirrorRig) {
    for _ in 0..20 {
        rig.pump().await;
        rig.drain(3).await;
        if status(rig).await.complete() {
            return;
        }
    }
    panic!("the backfill never completed: {}", status(rig).await.text(0));
}

#[tokio::test]
async fn a_backfill_killed_midway_resumes_without_searching_done_windows() {
    let rig = rig(61).await;
    let req = request("20240101", "20240630");
    rig.send(
        &rig.search_url,
        &serde_json::json!({ "backfill": req }).to_string(),
    )
    .await;
    // Work until two windows are done, then lose everything queued.
    loop {
        assert!(
            rig.pump_once().await,
            "the queues ran dry before two windows were done"
        );
        if status(&rig).await.done >= 2 {
            break;
        }
    }
    let done_before: Vec<String> = window_states(&rig)
        .await
        .into_iter()
        .filter(|(_, s)| s.starts_with("done:"))
        .map(|(w, _)| w)
        .collect();
    let flying_before = status(&rig).await.flying;
    assert!(
        done_before.len() >= 2 && !flying_before.is_empty(),
        "{done_before:?} {flying_before:?}"
    );
    let lost = rig.lose_queued();
    assert!(lost > 0, "the crash lost nothing: not a test of resuming");
    let mark = rig.arrivals_len();

    // Run again: the windows in flight start over, the done ones are not searched.
    let again = backfill::start(&rig.deps, &req).await.expect("start again");
    assert_eq!(again.done as usize, done_before.len(), "{}", again.text(0));
    pump_to_the_end(&rig).await;

    let after = &rig.lookalike.arrivals()[mark..];
    for w in &done_before {
        let searched = after
            .iter()
            .filter(|a| a.endpoint == "search" && a.window.as_deref() == Some(w.as_str()))
            .count();
        assert_eq!(searched, 0, "done window {w} was searched again");
    }
    for w in &flying_before {
        assert!(
            after
                .iter()
                .any(|a| a.endpoint == "search" && a.window.as_deref() == Some(w.as_str())),
            "window {w}, in flight at the crash, was not searched again"
        );
    }
    let s = status(&rig).await;
    assert!(s.complete(), "{}", s.text(0));
    assert_eq!(s.windows, 7, "six months and the undated hits: {}", s.text(0));
    let want = wanted(&rig, "20240101", "20240630");
    let have = held(&rig).await;
    let absent: Vec<_> = want.difference(&have).collect();
    assert!(absent.is_empty(), "not mirrored: {absent:?}");
    let extra: Vec<_> = have.difference(&want).collect();
    assert!(extra.is_empty(), "fetched outside the range: {extra:?}");
    // Each window is a recorded run.
    assert!(
        rig.keys("runs/backfill-20240101-20240131.json").await.len() == 1
            && rig.keys("runs/backfill-undated.json").await.len() == 1
    );
    // The backfill's runs are gone from Redis soon; Redis never holds the corpus.
    let ttl: i64 = redis::cmd("PTTL")
        .arg(rig.ns.run("backfill-20240101-20240131").ids)
        .query_async(&mut rig.deps.queue.connection().clone())
        .await
        .expect("pttl");
    assert!(
        ttl > 0 && ttl <= lawsync::policy::BACKFILL_WINDOW_KEEP.as_millis() as i64,
        "window run ids kept for {ttl} ms"
    );
    // A backfill planned again after it completed searches nothing.
    let mark = rig.arrivals_len();
    let s = backfill::start(&rig.deps, &req).await.expect("plan again");
    rig.pump().await;
    assert!(s.complete(), "{}", s.text(0));
    assert_eq!(rig.calls_since(mark), (0, 0), "a completed backfill called again");
}

#[tokio::test]
async fn at_the_watermark_no_window_is_released_until_the_backlog_drains() {
    let rig = rig(62).await;
    // The backlog: the watermark's worth of parked jobs, not due for an hour.
    let n = lawsync::policy::BACKFILL_WATERMARK;
    for i in 0..n {
        let job = Job::new(
            JobKind::Detail,
            format!("backlog-{i}"),
            serde_json::json!({ "id": (100_000 + i).to_string() }),
        );
        rig.deps
            .queue
            .enqueue_due_in(
                &job,
                std::time::Duration::from_secs(3600),
                ErrorNote::now("test", "backlog", None),
            )
            .await
            .expect("park");
    }
    let mark = rig.arrivals_len();
    let s = backfill::start(&rig.deps, &request("20240101", "20240331"))
        .await
        .expect("start");
    assert_eq!((s.in_flight, s.planned), (0, 4), "{}", s.text(0));
    assert!(s.waiting >= n, "{}", s.text(0));
    // Pumping (as every page, record and drainer pass does) releases nothing.
    for _ in 0..3 {
        let s = backfill::pump(&rig.deps).await.expect("pump");
        assert_eq!(s.in_flight, 0, "released over the watermark: {}", s.text(0));
    }
    assert!(!rig.pump_once().await, "a window's first page was sent");
    assert_eq!(rig.calls_since(mark), (0, 0));

    // The backlog drains: the windows go out, newest first.
    let conn = rig.deps.queue.connection().clone();
    let keys = rig.ns.queue();
    for key in [&keys.jobs, &keys.first, &keys.count, &keys.errors, &keys.waiting] {
        let _: i64 = redis::cmd("DEL")
            .arg(key)
            .query_async(&mut conn.clone())
            .await
            .expect("del");
    }
    let s = backfill::pump(&rig.deps).await.expect("pump");
    assert!(s.in_flight >= 1, "{}", s.text(0));
    assert_eq!(s.flying[0], "20240301~20240331", "newest first: {:?}", s.flying);
    pump_to_the_end(&rig).await;
}

#[tokio::test]
async fn a_daily_run_started_during_a_backfill_finishes_first() {
    let rig = rig(63).await;
    let req = request("20200101", "20211231");
    backfill::start(&rig.deps, &req).await.expect("start");
    // Some backfill work in flight.
    for _ in 0..4 {
        rig.pump_once().await;
    }
    let before = status(&rig).await;
    assert!(!before.complete() && before.in_flight > 0, "{}", before.text(0));
    // The daily firing, as the search function starts it.
    let firing = lawsync::app::schedule::Firing {
        schedule: ScheduleKind::Daily,
        at: "2026-11-29T19:00:00Z".into(),
    };
    let daily = lawsync::app::schedule::start(&rig.deps, &firing)
        .await
        .expect("daily run started");
    let mark = rig.arrivals_len();
    let settled_at_start = status(&rig).await.ids_settled;
    // Until the daily run is recorded, every call is the daily run's.
    let mut daily_done_at = None;
    for i in 0..100_000 {
        // Backfill messages that give way go back to the queue, so the queues may never
        // run dry while the daily run is open: its parked work is drained regularly too.
        if !rig.pump_once().await || i % 50 == 49 {
            rig.drain(3).await;
        }
        let d = rig.status(&daily).await;
        if d.recorded_ms.is_some() {
            daily_done_at = Some(rig.arrivals_len());
            break;
        }
        assert_eq!(
            status(&rig).await.ids_settled,
            settled_at_start,
            "backfill work was done while the daily run was open"
        );
    }
    let daily_end = daily_done_at.expect("the daily run never completed");
    let during = &rig.lookalike.arrivals()[mark..daily_end];
    let backfill_windows: BTreeSet<String> = req
        .windows()
        .expect("windows")
        .into_iter()
        .map(|w| w.name)
        .collect();
    let backfill_searches = during
        .iter()
        .filter(|a| a.endpoint == "search" && a.window.as_ref().is_some_and(|w| backfill_windows.contains(w)))
        .count();
    assert_eq!(
        backfill_searches, 0,
        "backfill pages were read while the daily run was open"
    );
    // Every precedent fetched meanwhile was the daily run's.
    let daily_ids: BTreeSet<String> = redis::cmd("HKEYS")
        .arg(rig.ns.run(daily.as_str()).ids)
        .query_async(&mut rig.deps.queue.connection().clone())
        .await
        .expect("hkeys");
    let others: Vec<_> = during
        .iter()
        .filter(|a| a.endpoint == "detail")
        .filter_map(|a| a.item.clone())
        .filter(|id| !daily_ids.contains(id))
        .collect();
    assert!(
        others.is_empty(),
        "backfill details fetched while the daily run was open: {others:?}"
    );
    assert!(
        before.ids_waiting + before.waiting > 0,
        "no backfill work waited: {}",
        before.text(0)
    );
    assert!(
        !status(&rig).await.complete(),
        "the backfill finished first: not a test of priority"
    );
    // Then the backfill goes on to the end.
    pump_to_the_end(&rig).await;
}

#[tokio::test]
async fn bad_backfill_requests_are_named_and_never_become_work() {
    let rig = rig(64).await;
    for (body, says) in [
        (
            r#"{"backfill":{"from":"2024-01-01","to":"20240131"}}"#,
            "backfill.from must be a date",
        ),
        (
            r#"{"backfill":{"from":"20240201","to":"20240101"}}"#,
            "must not be after",
        ),
        (r#"{"backfill":{"from":"20240101"}}"#, "missing field"),
        (
            r#"{"backfill":{"from":"20240101","to":"20240131","x":1}}"#,
            "expected",
        ),
    ] {
        let e =
            lawsync::app::sqs::parse_message(lawsync::app::sqs::MessageKind::Search, body).expect_err(body);
        assert!(
            e.to_string().contains(says) || says == "missing field",
            "{body}: {e}"
        );
        assert!(!e.to_string().contains(&rig.oc));
    }
    assert!(backfill::status(&rig.deps).await.expect("status").is_none());
}

#[tokio::test]
async fn a_window_listing_too_many_hits_is_split_in_two_by_date() {
    let rig = rig(65).await;
    backfill::start(&rig.deps, &request("20240101", "20240131"))
        .await
        .expect("start");
    let first = lawsync::law::SearchRequest {
        from: "20240101".into(),
        to: "20240131".into(),
        run: Some(lawsync::mirror::runs::RunId::parse("backfill-20240101-20240131").expect("run")),
        ..Default::default()
    };
    let limit = lawsync::policy::BACKFILL_SPLIT_HITS;
    assert!(
        !backfill::split_if_large(&rig.deps, &first, limit)
            .await
            .expect("split")
    );
    assert!(
        backfill::split_if_large(&rig.deps, &first, limit + 1)
            .await
            .expect("split")
    );
    let states = window_states(&rig).await;
    let state = |w: &str| states.iter().find(|(n, _)| n == w).map(|(_, s)| s.as_str());
    assert_eq!(state("20240101~20240131"), Some("split"));
    assert_eq!(state("20240117~20240131"), Some("planned"));
    assert_eq!(state("20240101~20240116"), Some("planned"));
    // A later page, or a one-day window, is never split.
    let later = lawsync::law::SearchRequest {
        page: Some(2),
        ..first.clone()
    };
    assert!(
        !backfill::split_if_large(&rig.deps, &later, limit * 10)
            .await
            .expect("split")
    );
    let s = backfill::status(&rig.deps)
        .await
        .expect("status")
        .expect("backfill");
    assert_eq!(s.windows, 3, "the halves and the undated window: {}", s.text(0));
}

/// On SQS, under the functions' roles as the template grants them: the run the detail
/// function completes releases the backfill's windows (their first pages sent to the
/// search queue), and backfill work met beside another run is sent back to the detail
/// queue to wait. Both sends are the detail function's; on AWS a refused send returns the
/// message to SQS five times, then to the dead-letter queue, and the backfill stalls.
#[tokio::test]
async fn on_sqs_the_detail_function_releases_and_defers_backfill_work_under_its_role() {
    let rig = MirrorRig::start_with(Store::Bucket, Queues::Sqs, 66, Some(TODAY)).await;
    let first = rig
        .sync(lawsync::law::SearchRequest {
            from: "20261101".into(),
            to: "20261130".into(),
            ..Default::default()
        })
        .await;
    // Planned behind the open sync run: nothing released yet.
    let req = request("20260801", "20261031");
    let planned = backfill::start(&rig.deps, &req).await.expect("start");
    assert_eq!(planned.in_flight, 0, "{}", planned.text(0));
    // The sync run's work, until the detail function records it and goes on with the backfill.
    for _ in 0..200 {
        rig.pump_queue(MessageKind::Search).await;
        rig.pump_queue(MessageKind::Detail).await;
        if rig.status(&first).await.recorded_ms.is_some() {
            break;
        }
    }
    assert!(
        rig.status(&first).await.recorded_ms.is_some(),
        "the sync run was never recorded"
    );
    let released = status(&rig).await;
    assert!(
        released.in_flight > 0,
        "the run's record released no window: {}",
        released.text(0)
    );
    // The backfill's first pages fan out; then another run opens while its details wait.
    assert!(
        rig.pump_queue(MessageKind::Search).await,
        "no backfill page was sent"
    );
    open_foreground(&rig, "sync-20261130T010000000Z-0002").await;
    assert!(
        rig.pump_queue(MessageKind::Detail).await,
        "no backfill detail was sent"
    );
    let sends: Vec<String> = calls_of(Role::Detail, &rig.stack)
        .into_iter()
        .filter(|c| c.operation == "SendMessageBatch")
        .map(|c| {
            format!(
                "{} {}",
                c.outcome,
                c.checks[0].resource.rsplit(':').next().unwrap_or_default()
            )
        })
        .collect();
    let search = format!("allowed {}", rig.stack.queue_name("search"));
    let detail = format!("allowed {}", rig.stack.queue_name("detail"));
    assert!(
        sends.contains(&search) && sends.contains(&detail),
        "the detail function's sends (release to the search queue, deferral to the detail queue): {sends:?}"
    );
    assert!(sends.iter().all(|s| s.starts_with("allowed")), "{sends:?}");
}
