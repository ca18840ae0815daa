//! The deployed artifact as AWS runs it: the three `bootstrap` binaries that
//! `scripts/lambda-build.sh` builds with cargo-lambda (release profile, taken out of their
//! zips), each run as a process under a local Lambda Runtime API
//! ([`lawsync_tests::runtime_api`]), against the look-alike, a real Redis and moto.
//!
//! What Lambda does is done here: events exactly as SQS and EventBridge Scheduler deliver
//! them, the deadline header, the request and trace ids, the init phase and its errors,
//! SIGTERM at shutdown with the internal extension registered.

#![allow(clippy::print_stderr)]

use std::time::{Duration, Instant};

use lawsync::queue::{Backoff, RetryQueue};
use lawsync::{Namespace, RedisConn};
use lawsync_tests::lookalike::{Fault, Injection, Lookalike, LookalikeConfig, Precedent};
use lawsync_tests::runtime_api::{Bootstrap, Outcome, RuntimeApi};
use lawsync_tests::servers::{
    LawsyncEnv, Topology, create_queues, dead_port, moto_sdk, park_details, unique_env, unique_oc,
};
use lawsync_tests::stack::Stack;
use serde_json::{Value, json};

const OC: &str = "oc-SECRET-rt5521";

struct Rig {
    up: Lookalike,
    env: LawsyncEnv,
    ns: Namespace,
    conn: RedisConn,
    docs: std::path::PathBuf,
    sqs: aws_sdk_sqs::Client,
    search_queue: String,
}

/// The look-alike (rule 30 ms), a key space of its own, queues on moto, documents in a
/// folder, and the environment a deployment gives the functions (gate at 60 ms).
async fn rig(label: &str) -> Rig {
    let mut la = LookalikeConfig::new(&unique_oc(OC));
    la.interval = Some(Duration::from_millis(30));
    let up = Lookalike::start(la).await.expect("look-alike");
    let app_env = unique_env(label);
    let sqs = aws_sdk_sqs::Client::new(&moto_sdk().await);
    let urls = create_queues(&sqs, &app_env).await.expect("queues");
    let docs = std::env::temp_dir().join(format!("{app_env}-docs"));
    let mut env = LawsyncEnv::new(&up.oc, &up.base_url, &Topology::Standalone.url(), &app_env, 60)
        .set("LAW_API_MAX_WAIT_MS", "1500")
        .set("SEARCH_QUEUE_URL", urls[0].clone())
        .set("DETAIL_QUEUE_URL", urls[1].clone())
        .set("DOCUMENT_DIR", docs.display().to_string())
        .set("DRAIN_INTERVAL_MS", "200");
    // Lambda's own logging controls, not RUST_LOG, set the level here.
    env.unset("RUST_LOG");
    Rig {
        ns: Namespace::new(&app_env, lawsync::law::UPSTREAM).expect("namespace"),
        conn: Topology::Standalone.connect().await,
        up,
        env,
        docs,
        sqs,
        search_queue: urls[0].clone(),
    }
}

fn precedents(up: &Lookalike, n: usize) -> Vec<Precedent> {
    up.corpus()
        .window("20240101", "20261231")
        .into_iter()
        .take(n)
        .collect()
}

/// An SQS event as the event source mapping delivers it: every field of every record.
fn sqs_event(queue: &str, bodies: &[(&str, String)]) -> Value {
    let records: Vec<Value> = bodies
        .iter()
        .map(|(id, body)| {
            json!({
                "messageId": id,
                "receiptHandle": format!("AQEB{id}/receipt+handle=="),
                "body": body,
                "attributes": {
                    "ApproximateReceiveCount": "1",
                    "SentTimestamp": "1764733200000",
                    "SenderId": "AROAEXAMPLE:lawsync-scheduler",
                    "ApproximateFirstReceiveTimestamp": "1764733200123"
                },
                "messageAttributes": {},
                "md5OfBody": "0123456789abcdef0123456789abcdef",
                "eventSource": "aws:sqs",
                "eventSourceARN": format!("arn:aws:sqs:ap-northeast-2:123456789012:{queue}"),
                "awsRegion": "ap-northeast-2"
            })
        })
        .collect();
    json!({ "Records": records })
}

/// The event EventBridge Scheduler delivers to the drainer: the schedule's `Input`, as is.
fn scheduler_event() -> Value {
    json!({"source": "lawsync.schedule"})
}

fn assert_no_key(rig: &Rig, bootstrap: &Bootstrap, api: &RuntimeApi) {
    let out = bootstrap.output();
    assert!(
        !out.contains(&rig.up.oc),
        "the key leaked into the function's output:\n{out}"
    );
    assert!(
        api.unexpected().is_empty(),
        "requests outside the Runtime API: {:?}",
        api.unexpected()
    );
}

fn log_lines_of(bootstrap: &Bootstrap, request_id: &str) -> Vec<Value> {
    bootstrap
        .json_lines()
        .into_iter()
        .filter(|l| l.get("_aws").is_none() && l["requestId"] == request_id)
        .collect()
}

/// Waits until `count` EMF lines have been read from `bootstrap`. A handler writes its
/// metrics line last, just before it answers, so once it is read every line the
/// invocation wrote before it has been read too (they share stdout, read in order).
async fn read_through_metrics(bootstrap: &Bootstrap, count: usize) {
    let emf = |ls: &[String]| {
        ls.iter()
            .filter(|l| l.starts_with('{') && l.contains("\"_aws\""))
            .count()
    };
    let lines = bootstrap
        .lines_when(Duration::from_secs(10), |ls| emf(ls) >= count)
        .await;
    assert!(
        emf(&lines) >= count,
        "{count} metrics lines expected:\n{}",
        lines.join("\n")
    );
}

fn emf_lines(bootstrap: &Bootstrap) -> Vec<Value> {
    bootstrap
        .json_lines()
        .into_iter()
        .filter(|l| l.get("_aws").is_some())
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn detail_takes_sqs_batches_and_answers_as_sqs_reads_them() {
    let rig = rig("rt-detail").await;
    let api = RuntimeApi::start().await;
    let mut fun = Bootstrap::start("detail", &rig.env, &api);
    let ps = precedents(&rig.up, 3);
    assert!(
        api.wait_polls(1, Duration::from_secs(20)).await,
        "no cold start:\n{}",
        fun.output()
    );
    assert_eq!(
        api.extensions(),
        vec!["lawsync-graceful-shutdown".to_owned()],
        "the internal extension that makes Lambda send SIGTERM is registered during init"
    );

    // One batch: two precedents and a body that is no detail request.
    let batch = sqs_event(
        "detail",
        &[
            ("m-1", json!({"id": ps[0].id.to_string()}).to_string()),
            ("m-2", json!({"id": ps[1].id.to_string()}).to_string()),
            ("m-3", "{not json".to_owned()),
        ],
    );
    let first = api.invoke("detail", batch, Duration::from_secs(60));
    let out = api
        .outcome(&first, Duration::from_secs(30))
        .await
        .expect("an answer");
    assert_eq!(
        out.response(),
        &json!({"batchItemFailures": []}),
        "every message done or recorded as a dead letter; nothing handed back"
    );
    assert_eq!(stored(&rig), 2, "both precedents stored");
    let stats = RetryQueue::new(rig.conn.clone(), &rig.ns)
        .stats()
        .await
        .expect("stats");
    assert_eq!(stats.dead, 1, "the invalid body is kept as a dead letter");

    // A warm invocation, without X-Ray: its lines carry its own request id, no trace id.
    let inv = lawsync_tests::runtime_api::Invocation::new(
        "detail",
        sqs_event(
            "detail",
            &[("m-4", json!({"id": ps[2].id.to_string()}).to_string())],
        ),
        Duration::from_secs(60),
    )
    .untraced();
    let second = api.push(inv);
    api.outcome(&second, Duration::from_secs(30))
        .await
        .expect("an answer")
        .response();
    assert!(api.wait_polls(3, Duration::from_secs(5)).await);
    read_through_metrics(&fun, 2).await;

    let lines = log_lines_of(&fun, &first);
    assert!(
        lines.iter().any(|l| l["message"] == "batch done"),
        "the batch's lines carry its request id: {:#?}",
        fun.json_lines()
    );
    assert!(
        lines.iter().all(|l| l["xrayTraceId"]
            .as_str()
            .is_some_and(|t| t.starts_with("Root=1-"))),
        "and its X-Ray trace id"
    );
    let warm = log_lines_of(&fun, &second);
    assert!(!warm.is_empty() && warm.iter().all(|l| l.get("xrayTraceId").is_none()));
    // Every line written while an invocation ran is one of its lines.
    for l in fun.json_lines() {
        if l.get("_aws").is_none() && l.get("spans").is_some() {
            assert!(
                l.get("requestId").is_some(),
                "a line inside a span without a request id: {l}"
            );
        }
    }
    let emf = emf_lines(&fun);
    assert_eq!(emf.len(), 2, "one EMF line per invocation: {emf:#?}");
    assert_eq!(
        (emf[0]["ColdStart"].clone(), emf[0]["FunctionVersion"].clone()),
        (json!(1), json!("7"))
    );
    assert!(
        emf[1].get("ColdStart").is_none(),
        "the warm invocation is no cold start"
    );
    assert_eq!(emf[1]["MessagesDone"], 1);
    assert_no_key(&rig, &fun, &api);

    // Scale-in: SIGTERM with the extension told; the process ends at once, cleanly.
    api.shut_down();
    fun.terminate();
    let status = fun
        .exit_within(Duration::from_secs(2))
        .await
        .expect("exits on SIGTERM");
    assert!(status.success(), "{status:?}\n{}", fun.output());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_near_deadline_hands_every_message_back_untouched() {
    let rig = rig("rt-deadline").await;
    let api = RuntimeApi::start().await;
    let fun = Bootstrap::start("detail", &rig.env, &api);
    let ps = precedents(&rig.up, 2);
    let batch = sqs_event(
        "detail",
        &[
            ("d-1", json!({"id": ps[0].id.to_string()}).to_string()),
            ("d-2", json!({"id": ps[1].id.to_string()}).to_string()),
        ],
    );
    // One second left: less than a call's window.
    let id = api.invoke("detail", batch, Duration::from_secs(1));
    let out = api
        .outcome(&id, Duration::from_secs(20))
        .await
        .expect("an answer");
    assert_eq!(
        out.response(),
        &json!({"batchItemFailures": [{"itemIdentifier": "d-1"}, {"itemIdentifier": "d-2"}]})
    );
    assert!(
        rig.up.arrivals().is_empty(),
        "no call to law.go.kr: {:?}",
        rig.up.arrivals()
    );
    assert!(!rig.docs.exists() || std::fs::read_dir(&rig.docs).expect("docs").count() == 0);
    assert_no_key(&rig, &fun, &api);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn search_takes_the_schedules_messages_and_the_drainer_the_schedulers_event() {
    let rig = rig("rt-sched").await;
    let api = RuntimeApi::start().await;
    let search = Bootstrap::start("search", &rig.env, &api);
    // The daily and weekly schedules' Input, as EventBridge Scheduler sends it to the search
    // queue (the scheduled time filled in), in one SQS batch.
    let batch = sqs_event(
        "search",
        &[
            (
                "s-1",
                json!({"schedule": "daily", "at": "2026-12-02T19:00:00Z"}).to_string(),
            ),
            (
                "s-2",
                json!({"schedule": "sweep", "at": "2026-11-28T18:00:00Z"}).to_string(),
            ),
        ],
    );
    let id = api.invoke("search", batch, Duration::from_secs(120));
    let out = api
        .outcome(&id, Duration::from_secs(60))
        .await
        .expect("an answer");
    assert_eq!(
        out.response(),
        &json!({"batchItemFailures": []}),
        "{}",
        search.output()
    );
    read_through_metrics(&search, 1).await;
    let started = log_lines_of(&search, &id)
        .into_iter()
        .filter(|l| l["message"] == "schedule: run started")
        .count();
    assert_eq!(started, 2, "both runs opened:\n{}", search.output());

    // The runs' first searches, from the search queue, as the next batch.
    let received = rig
        .sqs
        .receive_message()
        .queue_url(&rig.search_queue)
        .max_number_of_messages(10)
        .send()
        .await
        .expect("receive");
    let bodies: Vec<(String, String)> = received
        .messages()
        .iter()
        .map(|m| {
            (
                m.message_id().unwrap_or_default().to_owned(),
                m.body().unwrap_or_default().to_owned(),
            )
        })
        .collect();
    assert!(!bodies.is_empty(), "the schedules sent their searches");
    let refs: Vec<(&str, String)> = bodies.iter().map(|(i, b)| (i.as_str(), b.clone())).collect();
    let id = api.invoke("search", sqs_event("search", &refs), Duration::from_secs(120));
    let out = api
        .outcome(&id, Duration::from_secs(100))
        .await
        .expect("an answer");
    assert_eq!(
        out.response(),
        &json!({"batchItemFailures": []}),
        "{}",
        search.output()
    );
    let calls = rig.up.arrivals();
    assert!(
        calls.iter().any(|a| a.endpoint == "search"),
        "the runs searched law.go.kr: {calls:?}"
    );
    assert_no_key(&rig, &search, &api);

    // The drainer, on the schedule's event, over parked detail work.
    let queue = due_at_once(&rig);
    let ps = precedents(&rig.up, 2);
    park_details(&queue, ps.iter().map(|p| p.id.to_string())).await;
    let api2 = RuntimeApi::start().await;
    let drainer = Bootstrap::start("drainer", &rig.env, &api2);
    let id = api2.invoke("drainer", scheduler_event(), Duration::from_secs(8));
    let out = api2
        .outcome(&id, Duration::from_secs(30))
        .await
        .expect("an answer");
    let report = out.response();
    assert_eq!(report["status"], "ran", "{report}");
    let succeeded: u64 = report["passes"]
        .as_array()
        .map(|ps| ps.iter().map(|p| p["succeeded"].as_u64().unwrap_or(0)).sum())
        .unwrap_or(0);
    assert_eq!(succeeded, 2, "the drainer worked the parked jobs: {report}");
    assert_eq!(queue.stats().await.expect("stats").depth, 0);
    assert_no_key(&rig, &drainer, &api2);
}

/// A cold start that cannot succeed: the process reports `init/error` naming what to fix,
/// exits non-zero within seconds, never asks for an invocation, never prints the key.
async fn broken_cold_start(function: &str, env: &LawsyncEnv, names: &str) {
    let api = RuntimeApi::start().await;
    let started = Instant::now();
    let mut fun = Bootstrap::start(function, env, &api);
    let status = fun
        .exit_within(Duration::from_secs(15))
        .await
        .unwrap_or_else(|| panic!("{function} hung at its cold start:\n{}", fun.output()));
    let took = started.elapsed();
    assert!(!status.success(), "{function} exited 0 on a broken cold start");
    let Some(Outcome::Error { error_type, body }) = api.init_error(Duration::from_secs(1)).await else {
        panic!("no init/error reported:\n{}", fun.output());
    };
    assert_eq!(error_type.as_deref(), Some("Runtime.InitError"));
    assert_eq!(body["errorType"], "Runtime.InitError");
    let message = body["errorMessage"].as_str().unwrap_or_default();
    assert!(
        message.contains(names),
        "init/error should name {names}: {message}"
    );
    assert!(
        api.handed().is_empty() && !api.wait_polls(1, Duration::ZERO).await,
        "asked for an invocation"
    );
    let out = fun.output();
    assert!(out.contains(names), "the log should name {names}:\n{out}");
    if let Some(oc) = env.get("LAW_API_OC") {
        assert!(
            !out.contains(oc) && !body.to_string().contains(oc),
            "the key leaked:\n{out}"
        );
    }
    eprintln!("{function}: broken cold start ({names}) reported in {took:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_broken_cold_start_fails_fast_naming_the_variable() {
    let rig = rig("rt-broken").await;
    let mut no_key = rig.env.clone();
    no_key.unset("LAW_API_OC");
    broken_cold_start("detail", &no_key, "LAW_API_OC").await;

    // An empty secret in Secrets Manager, named as the stack names the key's.
    let arn = Stack::new(&unique_env("empty-oc"))
        .create_secret("law-api-oc", " ")
        .await
        .expect("create secret");
    let empty = no_key.clone().set("LAW_API_OC_SECRET_ARN", arn);
    broken_cold_start("search", &empty, "LAW_API_OC_SECRET_ARN").await;

    let bad_url = rig.env.clone().set("REDIS_URL", "http://not-redis:6379");
    broken_cold_start("drainer", &bad_url, "REDIS_URL").await;

    let unreachable = rig
        .env
        .clone()
        .set("REDIS_URL", format!("redis://127.0.0.1:{}", dead_port()));
    broken_cold_start("detail", &unreachable, "REDIS_URL").await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sigterm_mid_drain_hands_back_the_lock_and_the_leases() {
    let rig = rig("rt-sigterm").await;
    let queue = due_at_once(&rig);
    let ps = precedents(&rig.up, 30);
    park_details(&queue, ps.iter().map(|p| p.id.to_string())).await;
    // law.go.kr slow to answer: a call in flight when the signal comes.
    rig.up.inject(Injection {
        endpoint: Some("detail".into()),
        ..Injection::new(Fault::Slow { delay_ms: 400 }, 100)
    });
    let api = RuntimeApi::start().await;
    let mut fun = Bootstrap::start("drainer", &rig.env, &api);
    assert!(
        api.wait_polls(1, Duration::from_secs(20)).await,
        "{}",
        fun.output()
    );
    let _id = api.invoke("drainer", scheduler_event(), Duration::from_secs(600));
    // Wait until the drainer holds the lock and has worked a job or two.
    let until = Instant::now() + Duration::from_secs(20);
    while rig.up.arrivals().len() < 2 && Instant::now() < until {
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let before = queue.stats().await.expect("stats");
    assert!(before.in_flight > 0, "the drainer holds leases: {before:?}");
    assert!(lock_held(&rig).await, "the drainer holds its lock");

    // Lambda shuts the environment down (a timeout, or scale-in during a long run).
    let signalled = Instant::now();
    api.shut_down();
    fun.terminate();
    let status = fun
        .exit_within(Duration::from_secs(3))
        .await
        .expect("exits after SIGTERM");
    let took = signalled.elapsed();
    assert!(status.success(), "{status:?}");
    assert!(took < Duration::from_millis(1500), "took {took:?} to shut down");
    eprintln!(
        "drainer: SIGTERM with {} leases held; exited in {took:?}",
        before.in_flight
    );
    let after = queue.stats().await.expect("stats");
    assert_eq!(
        after.in_flight, 0,
        "every lease handed back, none left to expire: {after:?}"
    );
    assert!(
        !lock_held(&rig).await,
        "the lock is free for the next drainer at once"
    );
    assert_eq!(
        after.depth + stored(&rig),
        ps.len() as u64,
        "nothing lost: {after:?}"
    );
    assert!(fun.output().contains("shutting down"), "{}", fun.output());
    assert_no_key(&rig, &fun, &api);
}

/// The rig's retry queue, parking jobs due at once (the first retry's backoff is 10 s).
fn due_at_once(rig: &Rig) -> RetryQueue {
    RetryQueue::new(rig.conn.clone(), &rig.ns).with_backoff(Backoff {
        base: Duration::from_millis(1),
        cap: Duration::from_millis(1),
    })
}

async fn lock_held(rig: &Rig) -> bool {
    let n: i64 = redis::cmd("EXISTS")
        .arg(rig.ns.drainer_lock())
        .query_async(&mut rig.conn.clone())
        .await
        .expect("EXISTS");
    n == 1
}

/// Documents held: stored, or recorded as missing at law.go.kr.
fn stored(rig: &Rig) -> u64 {
    walk(&rig.docs.join("prec")) + walk(&rig.docs.join("missing"))
}

fn walk(dir: &std::path::Path) -> u64 {
    std::fs::read_dir(dir).map_or(0, |rd| {
        rd.flatten()
            .map(|e| {
                let p = e.path();
                if p.is_dir() { walk(&p) } else { 1 }
            })
            .sum()
    })
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn lambdas_log_controls_are_honoured() {
    let rig = rig("rt-logs").await;
    // Text at WARN: an invocation's INFO lines are gone, its ERROR line (the invalid body)
    // is there, in Text, with the request id.
    let env = rig
        .env
        .clone()
        .set("AWS_LAMBDA_LOG_FORMAT", "Text")
        .set("AWS_LAMBDA_LOG_LEVEL", "WARN");
    let api = RuntimeApi::start().await;
    let fun = Bootstrap::start("detail", &env, &api);
    let id = api.invoke(
        "detail",
        sqs_event("detail", &[("x-1", "{bad".to_owned())]),
        Duration::from_secs(30),
    );
    api.outcome(&id, Duration::from_secs(20))
        .await
        .expect("answer")
        .response();
    read_through_metrics(&fun, 1).await;
    let out = fun.output();
    assert!(!out.contains("batch done"), "an INFO line at WARN:\n{out}");
    let text_lines: Vec<&str> = out.lines().filter(|l| !l.starts_with('{')).collect();
    assert!(
        text_lines
            .iter()
            .any(|l| l.contains(&id) && l.contains("ERROR") && l.contains("invalid message body")),
        "an ERROR line in Text with the request id:\n{out}"
    );

    // RUST_LOG still overrides the level.
    let env = env.set("RUST_LOG", "info");
    let api = RuntimeApi::start().await;
    let fun = Bootstrap::start("detail", &env, &api);
    let id = api.invoke(
        "detail",
        sqs_event("detail", &[("x-2", "{bad".to_owned())]),
        Duration::from_secs(30),
    );
    api.outcome(&id, Duration::from_secs(20))
        .await
        .expect("answer")
        .response();
    read_through_metrics(&fun, 1).await;
    assert!(fun.output().contains("batch done"), "{}", fun.output());
}
