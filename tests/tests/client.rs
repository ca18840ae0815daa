//! The law.go.kr client against a real local HTTP server and a real Redis gate.
//!
//! Every failure-mode test ends by searching the error (Display and Debug) for the key and
//! for the upstream's body; `no_failure_leaks_the_key_or_a_body` runs them all under a
//! TRACE-level capture of every crate's tracing output and searches that too.

use std::sync::Arc;
use std::time::{Duration, Instant, SystemTime};

use lawsync::config::{Config, GateConfig, LawApiConfig};
use lawsync::law::{Disposition, LawError, NetKind, SearchRequest};
use lawsync::{Deadline, Gate, GateError, LawClient, Refusal, Secret};
use lawsync_tests::history::MemoryHistory;
use lawsync_tests::servers::{OwnRedis, Topology, dead_port, unique_ns};
use lawsync_tests::upstream::{Body, Reply, Upstream};

const OC: &str = "oc-SECRET-4f9d2e";
/// Appears in every body the upstream sends, so any echo of a body is found.
const MARK: &str = "UPSTREAM-BODY-7c1e";

fn config(base: &str, extra: &[(&str, &str)]) -> Config {
    let mut vars: Vec<(String, String)> = vec![
        ("LAW_API_OC".into(), OC.into()),
        ("LAW_API_BASE_URL".into(), base.into()),
        // Fast tests: a 5 ms interval unless a test says otherwise.
        ("LAW_API_REQUEST_INTERVAL_MS".into(), "5".into()),
    ];
    vars.extend(extra.iter().map(|(k, v)| (k.to_string(), v.to_string())));
    Config::from_lookup(|k| vars.iter().rev().find(|(n, _)| n == k).map(|(_, v)| v.clone())).expect("config")
}

fn law_config(base: &str, extra: &[(&str, &str)]) -> LawApiConfig {
    config(base, extra).law
}

/// A client whose gate follows the configuration, on the shared standalone test Redis.
async fn client_for(base: &str, extra: &[(&str, &str)]) -> LawClient {
    // Every test of this binary logs into one capture, searched by the leak test.
    lawsync_tests::capture::capture_global();
    let cfg = config(base, extra);
    let gate = Arc::new(Gate::new(
        Topology::Standalone.connect().await,
        &unique_ns("client"),
        cfg.gate,
    ));
    LawClient::new(&cfg.law, Secret::new(OC), gate).expect("client")
}

fn window() -> SearchRequest {
    SearchRequest {
        from: "20260101".into(),
        to: "20260131".into(),
        query: None,
        page: None,
        display: None,
        ..Default::default()
    }
}

fn search_body(total: &str, prec: &str) -> String {
    format!(
        r#"{{"PrecSearch":{{"target":"prec","totalCnt":"{total}","page":"1","prec":{prec},"note":"{MARK}"}}}}"#
    )
}

fn hit(id: &str) -> String {
    format!(
        r#"{{"판례일련번호":"{id}","사건명":"손해배상(기)","사건번호":"2025다12345","선고일자":"2026.01.29","법원명":"대법원","법원종류코드":"400201","사건종류명":"민사","판결유형":"판결","선고":"선고","데이터출처명":"대법원","판례상세링크":"/DRF/lawService.do?OC={OC}&target=prec&ID={id}&type=HTML"}}"#
    )
}

/// Asserts that neither the error's Display nor its Debug carries the key or a body.
fn assert_clean(e: &LawError) {
    for text in [
        e.to_string(),
        format!("{e:?}"),
        serde_json::to_string(&e.record(lawsync::law::Endpoint::Detail)).expect("json"),
    ] {
        assert!(!text.contains(OC), "key leaked: {text}");
        assert!(!text.contains(MARK), "upstream body leaked: {text}");
        assert!(!text.contains("OC="), "URL leaked: {text}");
    }
}

#[tokio::test]
async fn search_sends_the_contract_and_reads_the_quirks() {
    let many = format!("[{},{}]", hit("101"), hit("102"));
    let up = Upstream::start(
        vec![
            Reply::json(search_body("231", &many)),
            Reply::json(search_body("1", &hit("103"))), // one hit: an object, not an array
            Reply::json(format!(
                r#"{{"PrecSearch":{{"totalCnt":0,"page":1,"x":"{MARK}"}}}}"#
            )), // zero hits: no prec
        ],
        Reply::status(500),
    )
    .await;
    let client = client_for(
        &up.base_url,
        &[
            ("LAW_API_USER_AGENT", "ua-test/1"),
            ("LAW_API_REFERER", "https://www.law.go.kr/"),
        ],
    )
    .await;
    let req = SearchRequest {
        query: Some("손해배상".into()),
        display: Some(2),
        page: Some(1),
        ..window()
    };
    let page = client.search(&req, Deadline::NONE).await.expect("search");
    assert_eq!((page.total, page.page, page.items.len()), (231, 1, 2));
    assert!(page.has_more(2));
    assert_eq!(page.items[0].id, "101");
    assert_eq!(page.items[0].decided_on.as_deref(), Some("2026.01.29"));
    let stored = serde_json::to_string(&page).expect("json");
    assert!(
        !stored.contains(OC) && !stored.contains("판례상세링크"),
        "link kept: {stored}"
    );

    let one = client.search(&window(), Deadline::NONE).await.expect("one hit");
    assert_eq!(one.items.len(), 1);
    assert_eq!(one.items[0].id, "103");
    let none = client.search(&window(), Deadline::NONE).await.expect("zero hits");
    assert_eq!((none.total, none.items.len()), (0, 0));

    let seen = up.seen();
    let first = &seen[0];
    assert_eq!(first.path, "/DRF/lawSearch.do");
    for (k, v) in [
        ("OC", OC),
        ("target", "prec"),
        ("type", "JSON"),
        ("prncYd", "20260101~20260131"),
        ("display", "2"),
        ("page", "1"),
        ("sort", "ddes"),
        ("query", "손해배상"),
    ] {
        assert_eq!(first.param(k), Some(v), "param {k}");
    }
    assert_eq!(first.header("referer"), Some("https://www.law.go.kr/"));
    assert_eq!(first.header("user-agent"), Some("ua-test/1"));
}

#[tokio::test]
async fn detail_keeps_the_text_and_drops_the_link() {
    let body = format!(
        r#"{{"PrecService":{{"판례정보일련번호":240001,"사건명":"부당이득금","사건번호":"2024다1","선고일자":"20260312","법원명":"대법원","판시사항":"[1] 가<br/>나","판례내용":"【주문】<br/>상고를 기각한다.","사건종류코드":400101,"판례상세링크":"x?OC={OC}","비고":"see OC {OC}"}}}}"#
    );
    let up = Upstream::start(vec![Reply::json(body)], Reply::status(500)).await;
    let client = client_for(&up.base_url, &[]).await;
    let doc = client.detail("240001", Deadline::NONE).await.expect("detail");
    assert_eq!(doc.id, "240001");
    assert_eq!(doc.holdings.as_deref(), Some("[1] 가<br/>나"));
    assert_eq!(
        doc.other.get("사건종류코드").and_then(|v| v.as_i64()),
        Some(400101),
        "unknown fields are kept"
    );
    let stored = serde_json::to_string(&doc).expect("json");
    assert!(!stored.contains(OC), "key in stored document: {stored}");
    assert!(!stored.contains("판례상세링크"));
    assert_eq!(up.seen()[0].param("ID"), Some("240001"));
    assert_eq!(up.seen()[0].path, "/DRF/lawService.do");
}

#[tokio::test]
async fn a_429_cools_the_whole_cluster_and_is_retried_after_retry_after() {
    let up = Upstream::start(
        vec![
            Reply::status(429).header("Retry-After", "2").text(MARK),
            Reply::json(search_body("0", "[]")),
        ],
        Reply::status(500),
    )
    .await;
    let client = client_for(&up.base_url, &[]).await;
    let page = client
        .search(&window(), Deadline::NONE)
        .await
        .expect("retried after the 429");
    assert_eq!(page.total, 0);
    let seen = up.seen();
    assert_eq!(seen.len(), 2);
    assert!(
        seen[1].at - seen[0].at >= Duration::from_secs(2),
        "Retry-After 2 s not honoured: {:?}",
        seen[1].at - seen[0].at
    );
    // A grant that went stale on a busy machine is given back and asked for again: the
    // grants sent are what counts.
    let stats = client.gate().stats();
    assert_eq!(
        stats.grants - stats.given_back,
        2,
        "the retry went through the gate again: {stats:?}"
    );
}

#[tokio::test]
async fn a_429_sets_a_cooldown_other_instances_see() {
    let up = Upstream::start(
        vec![Reply::status(429).header("Retry-After", "3600")],
        Reply::status(500),
    )
    .await;
    let client = client_for(&up.base_url, &[]).await;
    let started = Instant::now();
    let err = client.detail("1", Deadline::NONE).await.expect_err("try later");
    assert!(
        started.elapsed() < Duration::from_secs(20),
        "a 3600 s Retry-After must not be slept"
    );
    match &err {
        LawError::TryLater {
            wait,
            status: Some(429),
            attempts: 1,
        } => assert!(
            *wait >= Duration::from_secs(3600) && *wait <= Duration::from_millis(3_601_000),
            "the wait is Retry-After plus at most 20 % of the 1 s backoff: {wait:?}"
        ),
        other => panic!("unexpected {other:?}"),
    }
    assert!(
        matches!(err.disposition(), Disposition::RetryLater(Some(w)) if w >= Duration::from_secs(3600)),
        "{:?}",
        err.disposition()
    );
    assert_clean(&err);
    // The cluster is cooled down: the gate refuses at once and names the cooldown.
    let status = client.gate().status().await.expect("status");
    assert!(
        status.cooldown.is_some_and(|c| c > Duration::from_secs(3590)),
        "{status:?}"
    );
    let again = client
        .detail("1", Deadline::NONE)
        .await
        .expect_err("held back by the cooldown");
    assert!(
        matches!(
            again,
            LawError::Gate(GateError::WaitTooLong {
                cause: Refusal::Cooldown { .. },
                ..
            })
        ),
        "{again:?}"
    );
    assert_eq!(
        up.seen().len(),
        1,
        "nothing may reach the upstream during the cooldown"
    );
}

#[tokio::test]
async fn retry_after_as_an_http_date_is_honoured() {
    // HTTP dates have whole seconds: 5 s ahead is at least 4 s once truncated.
    let at = SystemTime::now() + Duration::from_secs(5);
    let up = Upstream::start(
        vec![
            Reply::status(503).header("Retry-After", &httpdate::fmt_http_date(at)),
            Reply::json(search_body("0", "[]")),
        ],
        Reply::status(500),
    )
    .await;
    let client = client_for(&up.base_url, &[]).await;
    client
        .search(&window(), Deadline::NONE)
        .await
        .expect("second attempt succeeds");
    let seen = up.seen();
    // At least 4 s were asked for, less the set-up time: 3 s is a safe floor.
    assert!(
        seen[1].at - seen[0].at >= Duration::from_secs(3),
        "{:?}",
        seen[1].at - seen[0].at
    );
}

#[tokio::test]
async fn server_errors_are_retried_up_to_max_attempts_with_backoff() {
    let up = Upstream::start(vec![], Reply::status(502).text(MARK)).await;
    let client = client_for(&up.base_url, &[]).await;
    let err = client.detail("7", Deadline::NONE).await.expect_err("exhausted");
    assert!(
        matches!(
            err,
            LawError::Http {
                status: 502,
                attempts: 3
            }
        ),
        "{err:?}"
    );
    assert_eq!(err.to_string(), "law.go.kr call failed: HTTP 502 (attempt 3)");
    assert_clean(&err);
    let seen = up.seen();
    assert_eq!(seen.len(), 3);
    // 2^0 s then 2^1 s, each plus up to 20 % jitter.
    assert!(seen[1].at - seen[0].at >= Duration::from_secs(1));
    assert!(seen[2].at - seen[1].at >= Duration::from_secs(2));
    assert!(matches!(err.disposition(), Disposition::RetryLater(None)));
}

#[tokio::test]
async fn redirects_and_client_errors_fail_at_once() {
    for status in [301u16, 302, 400, 401, 403, 404] {
        let up = Upstream::start(
            vec![
                Reply::status(status)
                    .header("Location", "https://www.law.go.kr/maintenance.html")
                    .text(format!("{MARK} OC={OC}")),
            ],
            Reply::json(search_body("0", "[]")),
        )
        .await;
        let client = client_for(&up.base_url, &[]).await;
        let err = client
            .detail("9", Deadline::NONE)
            .await
            .expect_err("fails at once");
        assert!(
            matches!(err, LawError::Http { status: s, attempts: 1 } if s == status),
            "{status}: {err:?}"
        );
        assert_eq!(up.seen().len(), 1, "{status}: retried or followed");
        assert_clean(&err);
    }
}

#[tokio::test]
async fn network_failures_are_retried_then_reported_by_kind() {
    let client = client_for(
        &format!("http://127.0.0.1:{}", dead_port()),
        &[("LAW_API_MAX_ATTEMPTS", "2")],
    )
    .await;
    let err = client.detail("1", Deadline::NONE).await.expect_err("refused");
    assert!(
        matches!(
            err,
            LawError::Network {
                kind: NetKind::Connect,
                attempts: 2
            }
        ),
        "{err:?}"
    );
    assert_clean(&err);
    assert!(
        !err.to_string().contains("127.0.0.1"),
        "the address is part of the URL: {err}"
    );
    let stats = client.gate().stats();
    assert_eq!(
        stats.grants, 0,
        "a connection is opened before the slot is asked for, so a refused one spends none: {stats:?}"
    );
}

/// A connection dropped after the request sets a cluster cooldown; the caller's pause
/// before its retry must be that same cooldown. A handler waits for a slot no longer than
/// an interval, so a pause drawn shorter than the cooldown would have the retry refused
/// and the message parked for a blip the matrix documents as done.
#[tokio::test]
async fn a_dropped_connection_pauses_for_exactly_the_cooldown_it_set() {
    let ok = Reply::json(search_body("0", "[]"));
    let dropped = Reply::status(200).with_body(Body::Reset);
    // Jitter is drawn at random: enough rounds that a second draw would lose one.
    const ROUNDS: usize = 6;
    let script: Vec<Reply> = (0..ROUNDS).flat_map(|_| [dropped.clone(), ok.clone()]).collect();
    let up = Upstream::start(script, Reply::status(500)).await;
    let cfg = config(&up.base_url, &[]);
    let client = client_for(&up.base_url, &[])
        .await
        .with_gate_wait(cfg.handler_max_wait);
    for round in 0..ROUNDS {
        let page = client.search(&window(), Deadline::NONE).await;
        assert!(
            page.is_ok(),
            "round {round}: the retry after a dropped connection was not sent: {page:?}"
        );
    }
    assert_eq!(up.seen().len(), 2 * ROUNDS);
}

#[tokio::test]
async fn a_stalled_reply_times_out_on_read() {
    let up = Upstream::start(vec![], Reply::status(200).with_body(Body::Stall)).await;
    let client = client_for(
        &up.base_url,
        &[("LAW_API_READ_TIMEOUT_MS", "300"), ("LAW_API_MAX_ATTEMPTS", "1")],
    )
    .await;
    let err = client.detail("1", Deadline::NONE).await.expect_err("timeout");
    assert!(
        matches!(
            err,
            LawError::Network {
                kind: NetKind::Timeout,
                attempts: 1
            }
        ),
        "{err:?}"
    );
}

/// A named reply and the check its error must pass.
type Case = (&'static str, Reply, fn(&LawError) -> bool);

/// The 200 replies that are failures, each with its own error.
fn bad_200s() -> Vec<Case> {
    vec![
        ("empty", Reply::status(200), |e| matches!(e, LawError::EmptyBody)),
        ("blank", Reply::status(200).text("  \n"), |e| {
            matches!(e, LawError::EmptyBody)
        }),
        (
            "anti-bot html",
            Reply::status(200)
                .header("Content-Type", "text/html")
                .text(format!(
                    "<html><script>location.assign('/x?{MARK}')</script></html>"
                )),
            |e| matches!(e, LawError::KeyRefused(lawsync::law::KeyProblem::AntiBot)),
        ),
        (
            "an html page of no known shape",
            Reply::status(200)
                .header("Content-Type", "text/html")
                .text(format!("<html><body>점검 중 {MARK}</body></html>")),
            |e| matches!(e, LawError::HtmlPage),
        ),
        (
            "key or ip rejected",
            Reply::json(format!(
                r#"{{"result":"사용자 정보 검증에 실패하였습니다.","msg":"OC={OC} {MARK}"}}"#
            )),
            |e| matches!(e, LawError::KeyRefused(lawsync::law::KeyProblem::VerifyFailed)),
        ),
        (
            "no such precedent",
            Reply::json(format!(r#"{{"Law":"일치하는 판례가 없습니다. {MARK}"}}"#)),
            |e| matches!(e, LawError::NotFound),
        ),
        ("not json", Reply::json(format!("{MARK} {OC} }}{{")), |e| {
            matches!(e, LawError::Malformed { .. })
        }),
        (
            "wrong root",
            Reply::json(format!(r#"{{"Other":"{MARK}"}}"#)),
            |e| matches!(e, LawError::Malformed { .. }),
        ),
        ("not an object", Reply::json(format!(r#"["{MARK}"]"#)), |e| {
            matches!(e, LawError::Malformed { .. })
        }),
        (
            "not utf-8",
            Reply::status(200).with_body(Body::Fixed(vec![0xff, 0xfe, b'{'])),
            |e| matches!(e, LawError::Malformed { .. }),
        ),
        (
            "too large with length",
            Reply::status(200).with_body(Body::Fixed(format!("{MARK}{}", "x".repeat(5000)).into_bytes())),
            |e| matches!(e, LawError::BodyTooLarge { limit: 4096 }),
        ),
        (
            "too large, streamed",
            Reply::status(200).with_body(Body::Endless { total: 10_000_000 }),
            |e| matches!(e, LawError::BodyTooLarge { limit: 4096 }),
        ),
        (
            "truncated body",
            Reply::status(200).with_body(Body::LyingLength {
                announced: 1000,
                actual: format!("{{\"{MARK}").into_bytes(),
            }),
            |e| matches!(e, LawError::Network { .. }),
        ),
    ]
}

#[tokio::test]
async fn each_bad_200_gets_its_own_clear_error() {
    for (name, reply, expected) in bad_200s() {
        let up = Upstream::start(vec![reply], Reply::status(599)).await;
        let client = client_for(
            &up.base_url,
            &[
                ("LAW_API_MAX_RESPONSE_BYTES", "4096"),
                ("LAW_API_MAX_ATTEMPTS", "1"),
            ],
        )
        .await;
        let err = client.detail("5", Deadline::NONE).await.expect_err(name);
        assert!(expected(&err), "{name}: got {err:?}");
        assert_clean(&err);
    }
}

#[tokio::test]
async fn not_found_is_permanent_and_the_history_is_sanitized() {
    let up = Upstream::start(
        vec![Reply::json(format!(r#"{{"Law":"{MARK}"}}"#))],
        Reply::status(503),
    )
    .await;
    let history = Arc::new(MemoryHistory::default());
    let client = client_for(&up.base_url, &[("LAW_API_MAX_ATTEMPTS", "1")])
        .await
        .with_history(history.clone());
    let err = client.detail("77", Deadline::NONE).await.expect_err("not found");
    assert_eq!(err.disposition(), Disposition::Permanent);
    let _ = client.detail("78", Deadline::NONE).await.expect_err("503");
    let records = history.snapshot();
    assert_eq!(records.len(), 2);
    assert_eq!(
        (records[0].kind.as_str(), records[0].permanent),
        ("not_found", true)
    );
    assert_eq!(
        (records[1].kind.as_str(), records[1].status, records[1].attempts),
        ("http_status", Some(503), 1)
    );
    let json = serde_json::to_string(&records).expect("json");
    assert!(!json.contains(OC) && !json.contains(MARK), "{json}");
}

#[tokio::test]
async fn invalid_requests_never_reach_the_upstream() {
    let up = Upstream::start(vec![], Reply::json(search_body("0", "[]"))).await;
    let client = client_for(&up.base_url, &[]).await;
    let bad = [
        SearchRequest {
            from: "2026013".into(),
            ..window()
        },
        SearchRequest {
            from: "20260230".into(),
            to: "20260301".into(),
            ..window()
        },
        SearchRequest {
            from: "20260201".into(),
            to: "20260101".into(),
            ..window()
        },
        SearchRequest {
            display: Some(101),
            ..window()
        },
        SearchRequest {
            display: Some(0),
            ..window()
        },
        SearchRequest {
            page: Some(0),
            ..window()
        },
        SearchRequest {
            query: Some("a\u{0}b".into()),
            ..window()
        },
    ];
    for req in bad {
        let err = client.search(&req, Deadline::NONE).await.expect_err("invalid");
        assert!(matches!(err, LawError::InvalidRequest(_)), "{req:?}: {err:?}");
        assert_eq!(err.disposition(), Disposition::Permanent);
    }
    for id in ["", "12a", "1 OR 1", "123456789012345678901"] {
        let err = client.detail(id, Deadline::NONE).await.expect_err("invalid id");
        assert!(matches!(err, LawError::InvalidRequest(_)), "{id:?}: {err:?}");
    }
    assert!(up.seen().is_empty());
}

#[tokio::test]
async fn a_close_deadline_starts_no_call_and_no_sleep() {
    let up = Upstream::start(
        vec![Reply::status(503).header("Retry-After", "2")],
        Reply::json(search_body("0", "[]")),
    )
    .await;
    let client = client_for(&up.base_url, &[]).await;
    let err = client
        .detail("1", Deadline::after(Duration::from_millis(1500)))
        .await
        .expect_err("too close");
    assert!(matches!(err, LawError::OutOfTime { attempts: 0 }), "{err:?}");
    assert!(up.seen().is_empty());
    // With 3.4 s left, the call is made, but the 2 s backoff plus another call would not fit.
    let started = Instant::now();
    let err = client
        .detail("1", Deadline::after(Duration::from_millis(3400)))
        .await
        .expect_err("no room to retry");
    assert!(
        matches!(
            err,
            LawError::TryLater {
                status: Some(503),
                attempts: 1,
                ..
            }
        ),
        "{err:?}"
    );
    // A hang guard: the backoff alone would take 2 s or more.
    assert!(
        started.elapsed() < Duration::from_secs(2),
        "the backoff must not be slept"
    );
    assert_eq!(up.seen().len(), 1);
}

#[tokio::test]
async fn a_dead_redis_means_no_call() {
    // A Redis of this test's own, so that stopping it disturbs no other test.
    let mut redis = OwnRedis::start().await;
    let conn = lawsync::RedisConn::connect(&redis.config()).await.ok();
    let gate_cfg = GateConfig::new(Duration::from_millis(5), 1, Duration::from_secs(30));
    let gate = Arc::new(Gate::new(
        conn.expect("own Redis up"),
        &unique_ns("dead"),
        gate_cfg,
    ));
    let up = Upstream::start(vec![], Reply::json(search_body("0", "[]"))).await;
    let client = LawClient::new(&law_config(&up.base_url, &[]), Secret::new(OC), gate).expect("client");
    client
        .search(&window(), Deadline::NONE)
        .await
        .expect("works while Redis is up");
    redis.kill().await;
    let started = Instant::now();
    let err = client
        .search(&window(), Deadline::NONE)
        .await
        .expect_err("Redis is gone");
    let took = started.elapsed();
    assert!(
        matches!(err, LawError::Gate(GateError::Unavailable(_))),
        "{err:?}"
    );
    assert!(err.to_string().contains("the upstream was not called"), "{err}");
    assert_eq!(up.seen().len(), 1, "a call was made without a grant");
    // A hang guard, not a speed claim: bounded retries and timeouts must end the wait.
    assert!(
        took < Duration::from_secs(5),
        "a dead Redis took {took:?} to report"
    );
}

#[tokio::test]
async fn no_failure_leaks_the_key_or_a_body() {
    // The binary-wide capture: it holds this test's output and every other test's here.
    let captured = lawsync_tests::capture::capture_global();
    let mut errors = Vec::new();
    let mut replies: Vec<Reply> = bad_200s().into_iter().map(|(_, r, _)| r).collect();
    replies.extend([
        Reply::status(429)
            .header("Retry-After", "1")
            .text(format!("{MARK} {OC}")),
        Reply::json(search_body("2", &format!("[{},{}]", hit("1"), hit("2")))),
        Reply::status(403).text(format!("OC={OC} {MARK}")),
        Reply::status(302).header("Location", &format!("https://www.law.go.kr/x?OC={OC}")),
        Reply::status(500).text(MARK),
        Reply::status(503).header("Retry-After", "3600").text(MARK),
        Reply::json(format!(
            r#"{{"PrecService":{{"판례정보일련번호":"9","판례내용":"{OC}","판례상세링크":"{OC}"}}}}"#
        )),
    ]);
    let n = replies.len();
    let up = Upstream::start(replies, Reply::status(200).with_body(Body::Stall)).await;
    let client = client_for(
        &up.base_url,
        &[
            ("LAW_API_MAX_RESPONSE_BYTES", "4096"),
            ("LAW_API_MAX_ATTEMPTS", "2"),
            ("LAW_API_READ_TIMEOUT_MS", "300"),
        ],
    )
    .await;
    let mut outputs = Vec::new();
    for i in 0..n + 1 {
        if i % 2 == 0 {
            match client.detail("9", Deadline::NONE).await {
                Ok(doc) => outputs.push(serde_json::to_string(&doc).expect("json")),
                Err(e) => errors.push(e),
            }
        } else {
            match client.search(&window(), Deadline::NONE).await {
                Ok(page) => outputs.push(serde_json::to_string(&page).expect("json")),
                Err(e) => errors.push(e),
            }
        }
    }
    let refused = client_for(
        &format!("http://127.0.0.1:{}", dead_port()),
        &[("LAW_API_MAX_ATTEMPTS", "1")],
    )
    .await;
    errors.push(refused.detail("1", Deadline::NONE).await.expect_err("refused"));
    outputs.push(format!("{client:?} {refused:?}"));

    let log = captured.text();
    assert!(
        log.contains("law.go.kr call failed"),
        "the capture saw nothing; the test would prove nothing"
    );
    assert!(log.contains("law.call"), "spans are captured too");
    // Records of the `log` crate (rustls writes those) are captured too: connections.rs
    // checks that on a TLS failure.
    assert!(errors.len() >= 10, "{errors:?}");
    let all = format!(
        "{log}\n{}\n{errors:?}\n{}",
        outputs.join("\n"),
        errors
            .iter()
            .map(|e| e.to_string())
            .collect::<Vec<_>>()
            .join("\n")
    );
    for needle in [OC, MARK, "OC="] {
        if let Some(at) = all.find(needle) {
            panic!(
                "{needle:?} leaked: …{}…",
                &all[at.saturating_sub(200)..(at + 100).min(all.len())]
            );
        }
    }
}

#[tokio::test]
async fn a_backoff_longer_than_the_wait_bound_is_handed_back_not_slept() {
    let up = Upstream::start(vec![], Reply::status(503).text(MARK)).await;
    let client = client_for(&up.base_url, &[("LAW_API_MAX_WAIT_MS", "1000")]).await;
    let err = client.detail("1", Deadline::NONE).await.expect_err("try later");
    // The first backoff is 1 s plus up to 20 % jitter: above the 1000 ms bound, it is handed
    // back (a jitter of exactly zero would allow one retry, whose 2 s backoff is handed back).
    let LawError::TryLater {
        wait,
        status: Some(503),
        attempts,
    } = &err
    else {
        panic!("unexpected {err:?}")
    };
    assert!(*wait > Duration::from_secs(1) && *attempts <= 2, "{err:?}");
    assert_eq!(
        up.seen().len() as u32,
        *attempts,
        "a backoff over the bound was slept"
    );
    assert_clean(&err);
}

/// A call that reached law.go.kr has made an attempt, whatever the gate does next: a 429
/// whose cooldown cannot be written, and a 503 whose retry finds the gate unusable, both
/// end as `TryLater` with the status and the attempt, not as a gate error (which the
/// drainer treats as no attempt at all).
#[tokio::test]
async fn a_gate_failure_after_a_call_keeps_the_attempt() {
    for status in [429, 503] {
        let up = Upstream::start(
            vec![Reply::status(status).delayed(Duration::from_millis(300))],
            Reply::status(500),
        )
        .await;
        let cfg = config(
            &up.base_url,
            &[("LAW_API_MAX_ATTEMPTS", "3"), ("LAW_API_MAX_WAIT_MS", "5000")],
        );
        let ns = unique_ns("client-gate-after");
        let mut conn = Topology::Standalone.connect().await;
        lawsync_tests::servers::settle_gate(&mut conn, &ns.gate()).await;
        let gate = Arc::new(Gate::new(conn.clone(), &ns, cfg.gate));
        let client = LawClient::new(&cfg.law, Secret::new(OC), gate).expect("client");
        let call = tokio::spawn(async move { client.detail("51", Deadline::NONE).await });
        // While the reply is on its way, the gate state is damaged: defer and acquire fail.
        tokio::time::sleep(Duration::from_millis(100)).await;
        let _: () = redis::cmd("HSET")
            .arg(ns.gate())
            .arg("cool")
            .arg("nan")
            .query_async(&mut conn)
            .await
            .expect("HSET");
        let err = call.await.expect("task").expect_err("no document");
        match err {
            LawError::TryLater {
                status: Some(s),
                attempts: 1,
                ..
            } => assert_eq!(s, status),
            other => panic!("{status}: the attempt was lost: {other:?}"),
        }
        assert_eq!(
            up.seen().len(),
            1,
            "{status}: one call, no retry through a broken gate"
        );
    }
}
