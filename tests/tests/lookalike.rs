//! The law.go.kr look-alike, driven by the real client: the corpus and its paging, the
//! checks the real service makes, the rate rule, and every injectable fault turning into
//! the error the client gives for it. The demo's claims rest on these.

use std::sync::Arc;
use std::time::Duration;

use lawsync::config::Config;
use lawsync::law::{LawError, SearchRequest};
use lawsync::{Deadline, Gate, LawClient, Secret};
use lawsync_tests::lookalike::{Fault, Injection, Lookalike, LookalikeConfig, raw_request};
use lawsync_tests::servers::{Topology, unique_ns};

const OC: &str = "oc-LOOKALIKE-93b1";

fn config(base: &str, extra: &[(&str, &str)]) -> Config {
    let mut vars: Vec<(String, String)> = vec![
        ("LAW_API_OC".into(), OC.into()),
        ("LAW_API_BASE_URL".into(), base.into()),
        ("LAW_API_REQUEST_INTERVAL_MS".into(), "30".into()),
        ("LAW_API_GATE_TOLERANCE_MS".into(), "5".into()),
        ("LAW_API_MAX_ATTEMPTS".into(), "1".into()),
    ];
    vars.extend(extra.iter().map(|(k, v)| (k.to_string(), v.to_string())));
    Config::from_lookup(|k| vars.iter().rev().find(|(n, _)| n == k).map(|(_, v)| v.clone())).expect("config")
}

/// A look-alike whose rule is 10 ms, and a client gated at 30 ms on the standalone Redis
/// (the margin absorbs a loaded machine's scheduling noise).
async fn rig(extra: &[(&str, &str)]) -> (Lookalike, LawClient) {
    let mut cfg = LookalikeConfig::new(OC);
    cfg.interval = Some(Duration::from_millis(10));
    let server = Lookalike::start(cfg).await.expect("start look-alike");
    let client = client_for(&server, extra).await;
    (server, client)
}

/// A client of `server` on a gate of its own.
async fn client_for(server: &Lookalike, extra: &[(&str, &str)]) -> LawClient {
    let cfg = config(&server.base_url, extra);
    let gate = Arc::new(Gate::new(
        Topology::Standalone.connect().await,
        &unique_ns("lookalike"),
        cfg.gate,
    ));
    LawClient::new(&cfg.law, Secret::new(OC), gate).expect("client")
}

fn window(from: &str, to: &str, page: u32, display: u32) -> SearchRequest {
    SearchRequest {
        from: from.into(),
        to: to.into(),
        query: None,
        page: Some(page),
        display: Some(display),
    }
}

fn in_time() -> Deadline {
    Deadline::after(Duration::from_secs(20))
}

#[tokio::test]
async fn search_pages_through_the_window_newest_first_and_details_resolve() {
    let (server, client) = rig(&[]).await;
    let expected = server.corpus().window("20260105", "20260220");
    assert!(
        expected.len() > 12,
        "corpus too thin for paging: {}",
        expected.len()
    );
    let mut seen = Vec::new();
    for page in 1.. {
        let p = client
            .search(&window("20260105", "20260220", page, 10), in_time())
            .await
            .expect("search");
        assert_eq!(p.total as usize, expected.len());
        assert_eq!(p.page, page);
        seen.extend(p.items.iter().map(|i| i.id.clone()));
        if !p.has_more(10) {
            break;
        }
    }
    let mut want: Vec<String> = expected.iter().rev().map(|p| p.id.to_string()).collect();
    assert_eq!(seen, want, "every hit once, newest first");
    // Every listed date lies in the window (the dotted search format).
    let first = client
        .search(&window("20260105", "20260220", 1, 100), in_time())
        .await
        .expect("search");
    for item in &first.items {
        let d = item.decided_on.as_deref().expect("date").replace('.', "");
        assert!(("20260105".."20260221").contains(&d.as_str()), "{d}");
    }
    // Details: stored ones parse, 국세청 ones without a body are NotFound.
    want.truncate(40);
    let mut missing = 0;
    for p in expected.iter().rev().take(40) {
        match client.detail(&p.id.to_string(), in_time()).await {
            Ok(d) => {
                assert_eq!(d.id, p.id.to_string());
                assert_eq!(d.decided_on.as_deref(), Some(p.decided.as_str()));
                assert!(d.full_text.as_deref().is_some_and(|t| t.contains("<br/>")));
                assert!(!p.detail_missing);
            }
            Err(LawError::NotFound) => {
                assert!(p.detail_missing, "{} should exist", p.id);
                missing += 1;
            }
            Err(e) => panic!("detail {}: {e}", p.id),
        }
    }
    eprintln!(
        "{} precedents, {missing} of the first 40 missing at detail",
        expected.len()
    );
    assert!(
        server
            .arrivals()
            .iter()
            .all(|a| a.status == 200 && a.cause != "rate")
    );
}

#[tokio::test]
async fn one_hit_is_an_object_and_no_hit_leaves_prec_out() {
    let (server, client) = rig(&[]).await;
    // A day with exactly one decision, and a weekend with none.
    let corpus = server.corpus();
    let day = (1..=28)
        .map(|d| format!("202602{d:02}"))
        .find(|d| corpus.window(d, d).len() == 1)
        .expect("a day with one decision");
    let one = client
        .search(&window(&day, &day, 1, 20), in_time())
        .await
        .expect("one");
    assert_eq!((one.total, one.items.len()), (1, 1));
    let none = client
        .search(&window("20260207", "20260208", 1, 20), in_time())
        .await
        .expect("none");
    assert_eq!((none.total, none.items.len()), (0, 0));
}

#[tokio::test]
async fn a_wrong_key_or_a_missing_referer_fails_verification_without_echoing_the_key() {
    let mut cfg = LookalikeConfig::new("the-right-key");
    cfg.interval = None;
    let server = Lookalike::start(cfg).await.expect("start");
    let cfg = config(&server.base_url, &[]);
    let gate = Arc::new(Gate::new(
        Topology::Standalone.connect().await,
        &unique_ns("lookalike"),
        cfg.gate,
    ));
    let client = LawClient::new(&cfg.law, Secret::new(OC), gate.clone()).expect("client");
    let e = client.detail("100001", in_time()).await.expect_err("wrong key");
    assert!(matches!(e, LawError::AuthRejected), "{e:?}");
    assert!(!format!("{e} {e:?}").contains(OC));

    let cfg = config(&server.base_url, &[("LAW_API_REFERER", "https://example.com/")]);
    let client = LawClient::new(&cfg.law, Secret::new("the-right-key"), gate).expect("client");
    let e = client.detail("100001", in_time()).await.expect_err("bad referer");
    assert!(matches!(e, LawError::AuthRejected), "{e:?}");
    assert_eq!(
        server.arrivals().iter().filter(|a| a.cause == "verify").count(),
        2
    );
}

#[tokio::test]
async fn calls_closer_than_the_rule_get_429_and_the_log_never_holds_the_key() {
    let mut cfg = LookalikeConfig::new(OC);
    cfg.interval = Some(Duration::from_millis(200));
    let log = std::env::temp_dir().join(format!("lookalike-{}.jsonl", std::process::id()));
    cfg.log_file = Some(log.clone());
    let server = Lookalike::start(cfg).await.expect("start");
    // Two calls back to back, no gate: the second breaks the rule.
    let (first, second) = two_raw_calls(&server.base_url).await;
    assert!(
        first.starts_with("HTTP/1.1 200") && second.starts_with("HTTP/1.1 429"),
        "{first}\n{second}"
    );
    assert!(second.contains("Retry-After: 1"), "{second}");
    let a = server.arrivals();
    assert_eq!(a.len(), 2);
    assert_eq!((a[0].status, a[1].status), (200, 429));
    assert_eq!(a[1].cause, "rate");
    let text = std::fs::read_to_string(&log).expect("log file");
    assert_eq!(text.lines().count(), 2);
    assert!(!text.contains(OC), "the arrival log holds the key");
    let _ = std::fs::remove_file(log);
}

/// Two raw GETs over one connection (no client, no gate), returning the bodies.
async fn two_raw_calls(base: &str) -> (String, String) {
    let path = format!("/DRF/lawService.do?OC={OC}&target=prec&type=JSON&ID=1");
    let referer = [("Referer", "https://www.law.go.kr/")];
    let first = raw_request(base, "GET", &path, &referer, "")
        .await
        .expect("first call");
    let second = raw_request(base, "GET", &path, &referer, "")
        .await
        .expect("second call");
    (first, second)
}

/// What a fault's error must look like.
type Expect = fn(&LawError) -> bool;

#[tokio::test]
async fn every_injected_fault_becomes_its_own_clear_error() {
    let extra = [
        ("LAW_API_MAX_RESPONSE_BYTES", "100000"),
        ("LAW_API_READ_TIMEOUT_MS", "300"),
    ];
    let (server, _) = rig(&extra).await;
    let cases: Vec<(Fault, Expect)> = vec![
        (
            Fault::TooMany {
                retry_after: Some(3600),
                as_date: false,
            },
            |e| matches!(e, LawError::TryLater { status: Some(429), wait, .. } if *wait >= Duration::from_secs(3600)),
        ),
        (Fault::Status { status: 503 }, |e| {
            matches!(e, LawError::Http { status: 503, .. })
        }),
        (Fault::Status { status: 502 }, |e| {
            matches!(e, LawError::Http { status: 502, .. })
        }),
        (Fault::Redirect, |e| {
            matches!(e, LawError::Http { status: 302, .. })
        }),
        (Fault::Html, |e| matches!(e, LawError::HtmlPage)),
        (Fault::Result, |e| matches!(e, LawError::AuthRejected)),
        (Fault::Law, |e| matches!(e, LawError::NotFound)),
        (Fault::Oversized { bytes: 5_000_000 }, |e| {
            matches!(e, LawError::BodyTooLarge { .. })
        }),
        (Fault::Slow { delay_ms: 2000 }, |e| {
            matches!(e, LawError::Network { .. })
        }),
    ];
    let existing = server
        .corpus()
        .window("20260105", "20260109")
        .into_iter()
        .find(|p| !p.detail_missing)
        .expect("one");
    for (fault, expected) in cases {
        // A fresh gate each time: the 429 case leaves its own cooling down for an hour.
        let client = client_for(&server, &extra).await;
        server.inject(Injection::new(fault.clone(), 1));
        let e = client
            .detail(&existing.id.to_string(), in_time())
            .await
            .expect_err("fault");
        assert!(expected(&e), "{fault:?} gave {e:?}");
        assert!(!format!("{e} {e:?}").contains(OC), "{fault:?}: key in the error");
    }
    let causes: Vec<String> = server.arrivals().into_iter().map(|a| a.cause).collect();
    assert_eq!(
        causes.iter().filter(|c| c.starts_with("injected:")).count(),
        9,
        "{causes:?}"
    );
}

#[tokio::test]
async fn a_retry_after_date_is_honoured_as_a_date() {
    let (server, client) = rig(&[]).await;
    server.inject(Injection::new(
        Fault::TooMany {
            retry_after: Some(120),
            as_date: true,
        },
        1,
    ));
    let e = client.detail("100001", in_time()).await.expect_err("429");
    match e {
        LawError::TryLater {
            wait,
            status: Some(429),
            ..
        } => {
            assert!(
                wait >= Duration::from_secs(110) && wait <= Duration::from_secs(200),
                "{wait:?}"
            )
        }
        other => panic!("{other:?}"),
    }
}

#[tokio::test]
async fn the_control_endpoint_takes_injections_and_serves_the_log() {
    let (server, client) = rig(&[]).await;
    let url = format!("{}/_control/fault", server.base_url);
    let body = r#"[{"fault":"status","status":503,"count":2,"endpoint":"detail"},{"fault":"law"}]"#;
    let out = post(&url, body).await;
    assert!(out.contains(r#""queued":2"#), "{out}");
    // A search is not a detail: it skips the first injection and takes the second.
    let e = client
        .search(&window("20260105", "20260109", 1, 10), in_time())
        .await
        .expect_err("law on search");
    assert!(
        matches!(e, LawError::Malformed { .. } | LawError::NotFound),
        "{e:?}"
    );
    for _ in 0..2 {
        let e = client.detail("100001", in_time()).await.expect_err("503");
        assert!(matches!(e, LawError::Http { status: 503, .. }), "{e:?}");
    }
    let bad = post(&url, r#"{"fault":"teapot"}"#).await;
    assert!(bad.starts_with("HTTP/1.1 400"), "{bad}");
    let log = get(&format!("{}/_control/log?since=1", server.base_url)).await;
    let entries: Vec<serde_json::Value> =
        serde_json::from_str(log.split("\r\n\r\n").nth(1).expect("body")).expect("json");
    assert_eq!(entries.len(), 2);
    assert!(entries.iter().all(|e| e["status"] == 503));
}

async fn post(url: &str, body: &str) -> String {
    raw("POST", url, body).await
}

async fn get(url: &str) -> String {
    raw("GET", url, "").await
}

async fn raw(method: &str, url: &str, body: &str) -> String {
    let rest = url.trim_start_matches("http://");
    let (addr, path) = rest.split_at(rest.find('/').expect("path"));
    raw_request(addr, method, path, &[], body).await.expect("request")
}
