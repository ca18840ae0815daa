//! The functions' handlers end to end: a real local upstream, real Redis, SQS and S3 on
//! moto, documents in a folder and in a bucket.

use std::sync::Arc;
use std::time::Duration;

use aws_lambda_events::event::sqs::SqsEvent;
use lawsync::alert::LogAlerts;
use lawsync::app::Deps;
use lawsync::app::outbox::SqsOutbox;
use lawsync::app::sqs::{MessageKind, handle_batch};
use lawsync::config::Config;
use lawsync::documents::{DocumentStore, LocalDir, S3Documents};
use lawsync::drainer::DrainReport;
use lawsync::queue::{Job, JobKind, RetryQueue};
use lawsync::{Deadline, Gate, LawClient, Namespace, Secret};
use lawsync_tests::capture::capture_global;
use lawsync_tests::leaks::{assert_nowhere, redis_text};
use lawsync_tests::servers::{Topology, moto_sdk, unique_env};
use lawsync_tests::stack::Stack;
use lawsync_tests::upstream::{Reply, Upstream};
use serde_json::json;

const OC: &str = "oc-SECRET-fn7733";

struct Rig {
    /// The search function's dependencies; each function signs its AWS calls as its role.
    deps: Deps,
    detail: Deps,
    drainer: Deps,
    ns: Namespace,
    search_url: String,
    detail_url: String,
    sqs: aws_sdk_sqs::Client,
}

enum Docs {
    Folder,
    Bucket,
}

async fn rig(upstream: &Upstream, docs: Docs) -> Rig {
    let env = unique_env("fn");
    let vars = [
        ("LAW_API_OC", OC.to_owned()),
        ("LAW_API_BASE_URL", upstream.base_url.clone()),
        ("LAW_API_REQUEST_INTERVAL_MS", "5".to_owned()),
        ("APP_ENV", env.clone()),
    ];
    let cfg =
        Config::from_lookup(|k| vars.iter().find(|(n, _)| *n == k).map(|(_, v)| v.clone())).expect("config");
    let sqs = aws_sdk_sqs::Client::new(&moto_sdk().await);
    let stack = Stack::new(&env);
    let urls = stack.create_queues(&sqs).await.expect("queues");
    let ns = Namespace::new(&env, "law-go-kr").expect("ns");
    let conn = Topology::Standalone.connect().await;
    let gate = Arc::new(Gate::new(conn.clone(), &ns, cfg.gate));
    let law = LawClient::new(&cfg.law, Secret::new(OC), gate).expect("client");
    let bucket = match docs {
        Docs::Folder => None,
        Docs::Bucket => Some(stack.create_bucket(false).await.expect("bucket")),
    };
    let queue = RetryQueue::new(conn, &ns).with_secret(Secret::new(OC));
    let [deps, detail, drainer] = lawsync_tests::stack::functions_deps(
        &cfg,
        &law,
        &queue,
        &ns,
        |sdk| -> Arc<dyn DocumentStore> {
            match &bucket {
                None => Arc::new(LocalDir::new(std::env::temp_dir().join(&env))),
                Some(b) => Arc::new(S3Documents::new(sdk, b.clone())),
            }
        },
        |sdk| Arc::new(SqsOutbox::new(sdk, Some(urls[0].clone()), Some(urls[1].clone()))),
    )
    .await;
    Rig {
        deps,
        detail,
        drainer,
        ns,
        search_url: urls[0].clone(),
        detail_url: urls[1].clone(),
        sqs,
    }
}

impl Rig {
    /// The function that handles `kind`'s messages.
    fn function(&self, kind: MessageKind) -> &Deps {
        match kind {
            MessageKind::Search => &self.deps,
            MessageKind::Detail => &self.detail,
        }
    }

    /// Parks a detail job, due at once, as a failed attempt would.
    async fn park_detail(&self, id: &str) {
        let note = lawsync::queue::ErrorNote::now("http_status", "HTTP 503", Some(503));
        let job = Job::detail(id);
        self.deps
            .queue
            .enqueue_due_in(&job, Duration::ZERO, note)
            .await
            .expect("park");
    }

    async fn drain_queue(&self, url: &str) -> Vec<serde_json::Value> {
        let mut bodies = Vec::new();
        loop {
            let out = self
                .sqs
                .receive_message()
                .queue_url(url)
                .max_number_of_messages(10)
                .send()
                .await
                .expect("receive");
            if out.messages().is_empty() {
                return bodies;
            }
            for m in out.messages() {
                bodies.push(serde_json::from_str(m.body().expect("body")).expect("json body"));
                self.sqs
                    .delete_message()
                    .queue_url(url)
                    .receipt_handle(m.receipt_handle().expect("handle"))
                    .send()
                    .await
                    .expect("delete");
            }
        }
    }
}

fn event(records: &[(&str, &str)]) -> SqsEvent {
    let records: Vec<_> = records
        .iter()
        .map(|(id, body)| json!({ "messageId": id, "body": body }))
        .collect();
    serde_json::from_value(json!({ "Records": records })).expect("event")
}

fn hit(id: &str) -> serde_json::Value {
    json!({ "판례일련번호": id, "사건명": "손해배상", "판례상세링크": format!("/DRF/lawService.do?OC={OC}&ID={id}") })
}

fn detail_body(id: &str) -> String {
    json!({ "PrecService": { "판례정보일련번호": id, "사건명": "부당이득금", "판례내용": format!("본문 {OC}") } }).to_string()
}

/// The `id` of each detail message.
fn ids_of(bodies: &[serde_json::Value]) -> Vec<&str> {
    bodies.iter().map(|b| b["id"].as_str().expect("id")).collect()
}

fn failures(r: &aws_lambda_events::event::sqs::SqsBatchResponse) -> Vec<String> {
    r.batch_item_failures
        .iter()
        .map(|f| f.item_identifier.clone())
        .collect()
}

#[tokio::test]
async fn the_daily_schedules_message_searches_the_korean_day_before() {
    let page = json!({ "PrecSearch": { "totalCnt": "1", "page": "1", "prec": hit("21") } }).to_string();
    let up = Upstream::start(vec![Reply::json(page)], Reply::status(500)).await;
    let r = rig(&up, Docs::Folder).await;
    // Scheduled for 04:00 KST on 1 December: 19:00 UTC the day before.
    let daily = r#"{"dayBefore":"2026-11-30T19:00:00Z"}"#;
    let bad = r#"{"dayBefore":"yesterday"}"#;
    let (resp, summary) = handle_batch(
        r.function(MessageKind::Search),
        MessageKind::Search,
        event(&[("d1", daily), ("d2", bad)]),
        Deadline::NONE,
    )
    .await;
    assert!(failures(&resp).is_empty(), "{summary:?}");
    assert_eq!((summary.done, summary.invalid), (1, 1), "{summary:?}");
    let seen = up.seen();
    assert_eq!(seen.len(), 1, "the malformed one must not reach law.go.kr");
    assert_eq!(seen[0].param("prncYd"), Some("20261130~20261130"));
    assert_eq!(ids_of(&r.drain_queue(&r.detail_url).await), ["21"]);
    let dead = r.deps.queue.dead(10).await.expect("dead");
    assert_eq!(dead.len(), 1);
    let err = dead[0]
        .last_error
        .as_ref()
        .map(|e| e.message.clone())
        .unwrap_or_default();
    assert!(err.contains("dayBefore must be an RFC 3339 instant"), "{err}");
}

#[tokio::test]
async fn bad_messages_carrying_the_key_never_echo_it() {
    let logs = capture_global();
    let up = Upstream::start(Vec::new(), Reply::status(500)).await;
    let r = rig(&up, Docs::Folder).await;
    let search = [
        json!({ "dayBefore": OC }).to_string(),
        json!({ "dayBefore": format!("2026-11-30T19:00:00Z{OC}") }).to_string(),
        json!({ "from": OC, "to": "20260101" }).to_string(),
        json!({ "from": "20260101", "to": "20260101", OC: 1 }).to_string(),
        format!("not json {OC}"),
    ];
    let records: Vec<(String, &str)> = search
        .iter()
        .enumerate()
        .map(|(i, b)| (format!("s{i}"), b.as_str()))
        .collect();
    let records: Vec<(&str, &str)> = records.iter().map(|(i, b)| (i.as_str(), *b)).collect();
    let (resp, summary) = handle_batch(
        r.function(MessageKind::Search),
        MessageKind::Search,
        event(&records),
        Deadline::NONE,
    )
    .await;
    assert!(failures(&resp).is_empty(), "{summary:?}");
    assert_eq!(summary.invalid as usize, search.len(), "{summary:?}");
    let detail = [
        json!({ "id": OC }).to_string(),
        format!("{{\"id\":\"1\",\"{OC}\":2}}"),
    ];
    let records = [("d0", detail[0].as_str()), ("d1", detail[1].as_str())];
    let (resp, summary) = handle_batch(
        r.function(MessageKind::Detail),
        MessageKind::Detail,
        event(&records),
        Deadline::NONE,
    )
    .await;
    assert!(failures(&resp).is_empty(), "{summary:?}");
    assert_eq!(summary.invalid, 2, "{summary:?}");
    assert!(up.seen().is_empty(), "no invalid message may reach law.go.kr");

    let dead = r.deps.queue.dead(20).await.expect("dead");
    assert_eq!(dead.len(), search.len() + 2, "each is kept as a dead letter");
    let reasons: Vec<String> = dead
        .iter()
        .filter_map(|d| d.last_error.as_ref().map(|e| e.message.clone()))
        .collect();
    assert!(
        reasons
            .iter()
            .any(|m| m.contains("dayBefore must be an RFC 3339 instant")),
        "{reasons:?}"
    );
    assert!(
        reasons
            .iter()
            .any(|m| m.contains("from must be a date as YYYYMMDD")),
        "{reasons:?}"
    );
    assert!(
        reasons
            .iter()
            .any(|m| m.contains("precedent id must be 1-20 ASCII digits")),
        "{reasons:?}"
    );
    assert_nowhere("the logs", &logs.text(), &[OC]);
    assert_nowhere("the dead letters", &format!("{dead:?}"), &[OC]);
    assert_nowhere(
        "Redis",
        &redis_text(&Topology::Standalone.url(), &r.ns).await,
        &[OC],
    );
}

/// With the gate's next slot far away (here a cluster cooldown), a handler does not sleep
/// for it, billed: the message is parked at once, due when the gate expects room.
#[tokio::test]
async fn a_handler_parks_what_the_gate_cannot_grant_by_the_next_slot() {
    let up = Upstream::start(vec![Reply::json(detail_body("31"))], Reply::status(500)).await;
    let r = rig(&up, Docs::Folder).await;
    r.deps
        .law
        .gate()
        .defer(Duration::from_secs(3))
        .await
        .expect("cooldown");
    let started = std::time::Instant::now();
    let (resp, summary) = handle_batch(
        r.function(MessageKind::Detail),
        MessageKind::Detail,
        event(&[("m1", r#"{"id":"31"}"#)]),
        Deadline::NONE,
    )
    .await;
    let took = started.elapsed();
    assert!(failures(&resp).is_empty(), "{summary:?}");
    assert_eq!(summary.parked, 1, "{summary:?}");
    assert!(up.seen().is_empty(), "no call before the gate grants one");
    assert!(
        took < Duration::from_secs(2),
        "it did not sleep out the cooldown: {took:?}"
    );
    let stats = r.deps.queue.stats().await.expect("stats");
    let due = stats.next_due_in.expect("parked");
    assert!(
        due > Duration::from_secs(2) && due <= Duration::from_secs(3),
        "due when the cooldown ends, not after the retry backoff: {due:?}"
    );
    let listed = r.deps.queue.list(5).await.expect("list");
    let kind = listed[0].last_error.as_ref().map(|e| e.kind.clone());
    assert_eq!(kind.as_deref(), Some("gate_wait_too_long"));
}

/// A drainer job the run's deadline leaves no room for is released unchanged, not counted
/// as a failure.
#[tokio::test]
async fn a_drainer_job_without_room_before_the_deadline_is_not_a_failure() {
    let up = Upstream::start(vec![Reply::json(detail_body("41"))], Reply::status(500)).await;
    let r = rig(&up, Docs::Folder).await;
    r.park_detail("41").await;
    // The slot lies 5 s out; the run has 3.5 s, so the gate refuses on the deadline's account.
    r.deps
        .law
        .gate()
        .defer(Duration::from_secs(5))
        .await
        .expect("cooldown");
    let report = r
        .drainer
        .drain(&LogAlerts, Deadline::after(Duration::from_millis(3500)), Some(1))
        .await
        .expect("drain");
    let DrainReport::Ran { passes } = report else {
        panic!("busy");
    };
    assert_eq!((passes[0].failed, passes[0].skipped), (0, 1), "{passes:?}");
    assert!(up.seen().is_empty());
    let listed = r.deps.queue.list(5).await.expect("list");
    assert_eq!(listed.len(), 1);
    assert_eq!(
        listed[0].retry_count, 0,
        "its retry count is not raised: {listed:?}"
    );
}

/// The environment that gets its slots works off what others parked, after its batch;
/// one that had to park does not try.
#[tokio::test]
async fn a_handler_with_the_slots_works_off_parked_jobs_after_its_batch() {
    let docs = ["51", "52", "53"].map(|id| Reply::json(detail_body(id)));
    let up = Upstream::start(docs.to_vec(), Reply::status(500)).await;
    let r = rig(&up, Docs::Folder).await;
    for id in ["52", "53"] {
        r.park_detail(id).await;
    }
    let (resp, summary) = handle_batch(
        r.function(MessageKind::Detail),
        MessageKind::Detail,
        event(&[("m1", r#"{"id":"51"}"#)]),
        Deadline::after(Duration::from_secs(30)),
    )
    .await;
    assert!(failures(&resp).is_empty(), "{summary:?}");
    assert_eq!((summary.done, summary.drained), (1, 2), "{summary:?}");
    assert_eq!(up.seen().len(), 3);
    assert_eq!(r.deps.queue.stats().await.expect("stats").depth, 0);

    // With the gate cooled down, the message is parked and nothing is drained.
    r.park_detail("54").await;
    r.deps
        .law
        .gate()
        .defer(Duration::from_secs(3))
        .await
        .expect("cooldown");
    let (_, summary) = handle_batch(
        r.function(MessageKind::Detail),
        MessageKind::Detail,
        event(&[("m2", r#"{"id":"55"}"#)]),
        Deadline::after(Duration::from_secs(30)),
    )
    .await;
    assert_eq!((summary.parked, summary.drained), (1, 0), "{summary:?}");
    assert_eq!(up.seen().len(), 3, "no call while the cluster cools down");
}

#[tokio::test]
async fn search_fans_out_detail_messages_and_the_next_page() {
    let pages = vec![
        Reply::json(
            json!({ "PrecSearch": { "totalCnt": "3", "page": "1", "prec": [hit("11"), hit("12")] } })
                .to_string(),
        ),
        Reply::json(json!({ "PrecSearch": { "totalCnt": "1", "page": "1", "prec": hit("13") } }).to_string()),
        Reply::json(json!({ "PrecSearch": { "totalCnt": "0", "page": "1" } }).to_string()),
    ];
    let up = Upstream::start(pages, Reply::status(500)).await;
    let r = rig(&up, Docs::Folder).await;
    let body = r#"{"from":"20260101","to":"20260131","display":2}"#;
    let (resp, summary) = handle_batch(
        r.function(MessageKind::Search),
        MessageKind::Search,
        event(&[("s1", body)]),
        Deadline::NONE,
    )
    .await;
    assert!(failures(&resp).is_empty(), "{summary:?}");
    let details = r.drain_queue(&r.detail_url).await;
    let mut ids: Vec<String> = details
        .iter()
        .map(|d| d["id"].as_str().expect("id").to_owned())
        .collect();
    ids.sort();
    assert_eq!(ids, ["11", "12"]);
    let next = r.drain_queue(&r.search_url).await;
    assert_eq!(
        next,
        [json!({ "from": "20260101", "to": "20260131", "page": 2, "display": 2 })]
    );

    let one = r#"{"from":"20260201","to":"20260228"}"#;
    let none = r#"{"from":"20260301","to":"20260331"}"#;
    let (resp, summary) = handle_batch(
        r.function(MessageKind::Search),
        MessageKind::Search,
        event(&[("s2", one), ("s3", none)]),
        Deadline::NONE,
    )
    .await;
    assert!(failures(&resp).is_empty() && summary.done == 2, "{summary:?}");
    let one_hit = r.drain_queue(&r.detail_url).await;
    assert_eq!(ids_of(&one_hit), ["13"], "one hit sent as an object");
    // What the page saw goes with the id: the listing (no link), when, and why.
    assert_eq!(one_hit[0]["listing"]["사건명"], "손해배상");
    assert!(one_hit[0]["listing"].get("판례상세링크").is_none());
    assert_eq!(one_hit[0]["reason"], "new");
    assert!(
        one_hit[0]["firstSeenAt"]
            .as_str()
            .is_some_and(|t| t.ends_with('Z'))
    );
    assert!(
        r.drain_queue(&r.search_url).await.is_empty(),
        "no page after the last"
    );
}

async fn stores_idempotently(docs: Docs) {
    let up = Upstream::start(
        vec![Reply::json(detail_body("21")), Reply::json(detail_body("21"))],
        Reply::status(500),
    )
    .await;
    let r = rig(&up, docs).await;
    let body = r#"{"id":"21"}"#;
    let (resp, summary) = handle_batch(
        r.function(MessageKind::Detail),
        MessageKind::Detail,
        event(&[("d1", body), ("d1-again", body)]),
        Deadline::NONE,
    )
    .await;
    assert!(failures(&resp).is_empty(), "{summary:?}");
    assert_eq!(summary.done, 2);
    let stored = r
        .deps
        .docs
        .get("prec/21.json")
        .await
        .expect("get")
        .expect("stored");
    let text = String::from_utf8(stored).expect("utf8");
    assert!(text.contains("부당이득금"), "{text}");
    assert!(!text.contains(OC), "the key reached a stored document: {text}");
}

#[tokio::test]
async fn detail_stores_in_a_folder_idempotently_without_the_key() {
    stores_idempotently(Docs::Folder).await;
}

#[tokio::test]
async fn detail_stores_in_s3_idempotently_without_the_key() {
    stores_idempotently(Docs::Bucket).await;
}

#[tokio::test]
async fn a_mixed_batch_reports_exactly_the_right_failures() {
    let up = Upstream::start(
        vec![
            Reply::status(403).text(format!("OC={OC}")),
            Reply::json(detail_body("33")),
        ],
        Reply::status(500),
    )
    .await;
    let r = rig(&up, Docs::Folder).await;
    let batch = event(&[
        ("bad", r#"{"id":33,"x":1}"#),
        ("forbidden", r#"{"id":"32"}"#),
        ("good", r#"{"id":"33"}"#),
    ]);
    let (resp, summary) = handle_batch(
        r.function(MessageKind::Detail),
        MessageKind::Detail,
        batch,
        Deadline::NONE,
    )
    .await;
    assert!(
        failures(&resp).is_empty(),
        "nothing here is worth a redelivery: {summary:?}"
    );
    assert_eq!((summary.invalid, summary.permanent, summary.done), (1, 1, 1));
    let dead = r.deps.queue.dead(10).await.expect("dead");
    let mut ids: Vec<&str> = dead.iter().map(|d| d.id.as_str()).collect();
    ids.sort_unstable();
    let invalid_bad = format!("{}:bad", JobKind::Invalid);
    assert_eq!(
        ids,
        [Job::detail("32").id(), invalid_bad.clone()],
        "the 403 and the bad body are recorded, not lost"
    );
    let bad = dead.iter().find(|d| d.id == invalid_bad).expect("bad body kept");
    assert!(
        bad.last_error
            .as_ref()
            .is_some_and(|e| e.message.contains("expected {\"id\"")),
        "{bad:?}"
    );
    assert!(r.deps.docs.get("prec/33.json").await.expect("get").is_some());
}

#[tokio::test]
async fn a_long_retry_after_parks_the_job_and_the_drainer_completes_it() {
    let up = Upstream::start(
        vec![
            Reply::status(429).header("Retry-After", "3600"),
            Reply::json(detail_body("44")),
        ],
        Reply::status(500),
    )
    .await;
    let r = rig(&up, Docs::Folder).await;
    let (resp, summary) = handle_batch(
        r.function(MessageKind::Detail),
        MessageKind::Detail,
        event(&[("m", r#"{"id":"44"}"#)]),
        Deadline::NONE,
    )
    .await;
    assert!(failures(&resp).is_empty(), "a parked job's message succeeds");
    assert_eq!(summary.parked, 1);
    let stats = r.deps.queue.stats().await.expect("stats");
    assert_eq!(stats.depth, 1);
    assert!(
        stats.next_due_in.is_some_and(|d| d > Duration::from_secs(3500)),
        "{stats:?}"
    );
    // An hour passes: the entry falls due and the cluster cooldown ends.
    let mut conn = Topology::Standalone.connect().await;
    let _: () = redis::cmd("ZADD")
        .arg(&r.ns.queue().waiting)
        .arg(0)
        .arg(Job::detail("44").id())
        .query_async(&mut conn)
        .await
        .expect("due now");
    let _: () = redis::cmd("DEL")
        .arg(r.ns.gate())
        .query_async(&mut conn)
        .await
        .expect("cooldown over");
    let report = r
        .drainer
        .drain(&LogAlerts, Deadline::NONE, Some(1))
        .await
        .expect("drain");
    let DrainReport::Ran { passes } = report else {
        panic!("lock busy")
    };
    assert_eq!(passes[0].succeeded, 1, "{passes:?}");
    assert!(r.deps.docs.get("prec/44.json").await.expect("get").is_some());
    assert_eq!(r.deps.queue.stats().await.expect("stats").depth, 0);
}

#[tokio::test]
async fn a_near_deadline_returns_every_message_untouched() {
    let up = Upstream::start(vec![], Reply::json(detail_body("1"))).await;
    let r = rig(&up, Docs::Folder).await;
    let batch = event(&[
        ("a", r#"{"id":"1"}"#),
        ("b", r#"{"id":"2"}"#),
        ("c", r#"{"id":"3"}"#),
    ]);
    let (resp, summary) = handle_batch(
        r.function(MessageKind::Detail),
        MessageKind::Detail,
        batch,
        Deadline::after(Duration::from_millis(1500)),
    )
    .await;
    assert_eq!(failures(&resp), ["a", "b", "c"]);
    assert_eq!(summary.returned, 3);
    assert!(up.seen().is_empty(), "no upstream call without time to finish it");
}

/// Counts the alerts a drainer delivers.
#[derive(Debug, Default)]
struct CountingAlerts(std::sync::atomic::AtomicU32);

impl lawsync::alert::AlertSink for CountingAlerts {
    fn dead_lettered<'a>(
        &'a self,
        _env: &'a str,
        alerts: &'a [lawsync::alert::DeadLetterAlert],
    ) -> lawsync::law::BoxFuture<'a, Result<(), lawsync::alert::AlertError>> {
        self.0
            .fetch_add(alerts.len() as u32, std::sync::atomic::Ordering::SeqCst);
        Box::pin(std::future::ready(Ok(())))
    }
}

/// A cooldown longer than the wait bound (a long Retry-After, or maintenance) is the gate
/// saying "not now", not a failure: in a drainer run whose deadline comes before the
/// cooldown's end, the entry on its last attempt is not dead-lettered, alerted or counted,
/// and no call is made; it is due again when the cooldown ends.
#[tokio::test]
async fn a_gate_cooldown_in_a_long_drainer_run_is_not_an_attempt() {
    let up = Upstream::start(vec![], Reply::json(detail_body("61"))).await;
    let r = rig(&up, Docs::Folder).await;
    r.park_detail("61").await;
    r.park_detail("62").await;
    let mut conn = Topology::Standalone.connect().await;
    let q = r.ns.queue();
    for id in ["61", "62"].map(|id| Job::detail(id).id()) {
        let _: () = redis::cmd("HSET")
            .arg(&q.count)
            .arg(id)
            .arg(29)
            .query_async(&mut conn)
            .await
            .expect("29 failures so far");
    }
    r.deps
        .law
        .gate()
        .defer(Duration::from_secs(60))
        .await
        .expect("cooldown");
    let alerts = CountingAlerts::default();
    let report = r
        .drainer
        .drain(&alerts, Deadline::after(Duration::from_secs(30)), None)
        .await
        .expect("drain");
    let DrainReport::Ran { passes } = report else {
        panic!("busy");
    };
    assert!(up.seen().is_empty(), "no call while the cluster cools down");
    assert_eq!(
        passes.len(),
        1,
        "the run stops while the gate is closed: {passes:?}"
    );
    assert_eq!(
        (passes[0].failed, passes[0].dead_lettered, passes[0].skipped),
        (0, 0, 2),
        "{passes:?}"
    );
    assert_eq!(alerts.0.load(std::sync::atomic::Ordering::SeqCst), 0, "no alert");
    let stats = r.deps.queue.stats().await.expect("stats");
    assert_eq!((stats.depth, stats.dead, stats.in_flight), (2, 0, 0), "{stats:?}");
    let listed = r.deps.queue.list(5).await.expect("list");
    for entry in &listed {
        assert_eq!(entry.retry_count, 29, "its count is not raised: {listed:?}");
        let kinds: Vec<_> = entry.last_error.iter().map(|e| e.kind.as_str()).collect();
        assert_eq!(kinds, ["http_status"], "no note for a refusal: {listed:?}");
    }
    // The entry the gate refused is due at the cooldown's end; the rest of the batch went
    // back unchanged, due at once (or, when it was already launched beside the first, was
    // refused the same way), and is not claimed again while the gate is closed.
    let due_in = stats.next_due_in.expect("one waits");
    assert!(
        due_in > Duration::from_secs(58) && due_in <= Duration::from_secs(60),
        "due when the cooldown ends: {due_in:?}"
    );
    assert!(stats.due_now <= 1, "the other went back as it was: {stats:?}");
}

/// A precedent that died in an earlier outage is not dropped by today's sync: a new
/// message for it that fails retryably revives it with fresh attempts, its story kept.
#[tokio::test]
async fn a_new_message_for_a_dead_letter_revives_it() {
    let up = Upstream::start(
        vec![Reply::status(429).header("Retry-After", "3600")],
        Reply::status(500),
    )
    .await;
    let r = rig(&up, Docs::Folder).await;
    let job = Job::detail("71");
    let old = lawsync::queue::ErrorNote::now("http_status", "HTTP 503 last week", Some(503));
    let old_at = old.at_ms;
    r.deps.queue.record_dead(&job, old).await.expect("dead letter");
    let (resp, summary) = handle_batch(
        r.function(MessageKind::Detail),
        MessageKind::Detail,
        event(&[("m", r#"{"id":"71"}"#)]),
        Deadline::NONE,
    )
    .await;
    assert!(failures(&resp).is_empty(), "{summary:?}");
    assert_eq!((summary.parked, summary.permanent), (1, 0), "{summary:?}");
    let stats = r.deps.queue.stats().await.expect("stats");
    assert_eq!((stats.depth, stats.dead), (1, 0), "{stats:?}");
    assert!(r.deps.queue.pending_alerts(5).await.expect("alerts").is_empty());
    let listed = r.deps.queue.list(5).await.expect("list");
    assert_eq!(listed[0].id, Job::detail("71").id());
    assert_eq!(listed[0].retry_count, 0, "fresh attempts: {listed:?}");
    assert_eq!(
        listed[0].first_error_at_ms,
        Some(old_at),
        "history kept: {listed:?}"
    );
    let last = listed[0].last_error.as_ref().map(|e| e.kind.clone());
    assert_eq!(last.as_deref(), Some("try_later"), "{listed:?}");
}

/// A search message the handler accepts is a job the queue accepts: one with the longest
/// query (200 Hangul syllables) that fails retryably is parked, not handed back to SQS to
/// cycle to its dead-letter queue unseen.
#[tokio::test]
async fn the_longest_accepted_search_message_is_parked_when_it_fails() {
    let up = Upstream::start(
        vec![Reply::status(429).header("Retry-After", "3600")],
        Reply::status(500),
    )
    .await;
    let r = rig(&up, Docs::Folder).await;
    let body = json!({
        "from": "20260101", "to": "20261231", "query": "가".repeat(200),
        "page": u32::MAX, "display": 100,
    })
    .to_string();
    let (resp, summary) = handle_batch(
        r.function(MessageKind::Search),
        MessageKind::Search,
        event(&[("m", &body)]),
        Deadline::NONE,
    )
    .await;
    assert!(failures(&resp).is_empty(), "{summary:?}");
    assert_eq!(summary.parked, 1, "{summary:?}");
    let listed = r.deps.queue.list(5).await.expect("list");
    let query = listed[0]
        .job
        .as_ref()
        .and_then(|j| j.payload["query"].as_str().map(str::to_owned));
    assert_eq!(query, Some("가".repeat(200)), "kept whole: {listed:?}");
}

/// A gate that cannot answer (here its key holds the wrong type) refuses every slot: the
/// drainer's entry on its last attempt is not counted, not dead-lettered and not called,
/// and falls due again shortly.
#[tokio::test]
async fn an_unusable_gate_in_a_drainer_run_is_not_an_attempt() {
    let up = Upstream::start(vec![], Reply::json(detail_body("63"))).await;
    let r = rig(&up, Docs::Folder).await;
    r.park_detail("63").await;
    let mut conn = Topology::Standalone.connect().await;
    let _: () = redis::cmd("HSET")
        .arg(&r.ns.queue().count)
        .arg(Job::detail("63").id())
        .arg(29)
        .query_async(&mut conn)
        .await
        .expect("29 failures so far");
    let _: () = redis::cmd("SET")
        .arg(r.ns.gate())
        .arg("not a gate")
        .query_async(&mut conn)
        .await
        .expect("break the gate");
    let alerts = CountingAlerts::default();
    let report = r
        .drainer
        .drain(&alerts, Deadline::after(Duration::from_secs(120)), None)
        .await
        .expect("drain");
    let DrainReport::Ran { passes } = report else {
        panic!("busy");
    };
    assert!(up.seen().is_empty(), "no call without a grant");
    assert_eq!((passes[0].failed, passes[0].dead_lettered), (0, 0), "{passes:?}");
    assert_eq!(alerts.0.load(std::sync::atomic::Ordering::SeqCst), 0);
    let listed = r.deps.queue.list(5).await.expect("list");
    assert_eq!(listed[0].retry_count, 29, "{listed:?}");
    let kind = listed[0].last_error.as_ref().map(|e| e.kind.clone());
    assert_eq!(kind.as_deref(), Some("http_status"), "no note: {listed:?}");
    let due = r.deps.queue.stats().await.expect("stats").next_due_in;
    assert!(due.is_some_and(|d| d > Duration::from_secs(5)), "{due:?}");
}
