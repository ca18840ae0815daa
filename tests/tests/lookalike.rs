//! The law.go.kr look-alike, driven by the real client: the corpus and its paging, the
//! checks the real service makes, the rate rule, and every injectable fault turning into
//! the error the client gives for it; late publication, undated hits, revisions and the
//! settable "today". The demo's claims rest on these.

use std::sync::Arc;
use std::time::Duration;

use lawsync::config::Config;
use lawsync::law::calendar::{day_number, yyyymmdd};
use lawsync::law::{LawError, SearchRequest};
use lawsync::{Deadline, Gate, LawClient, Secret};
use lawsync_tests::lookalike::corpus::{
    A_MONTH_DAYS, A_YEAR_DAYS, FIRST_DAY, JUDGMENT_TYPE, LAST_DAY, MONTHS_LATE_PERMILLE,
    REVISED_JUDGMENT_TYPE, REVISED_PERMILLE, REVISED_SUFFIX, WITHIN_A_MONTH_PERMILLE, YEARS_LATE_MAX_DAYS,
    YEARS_LATE_MIN_DAYS, YEARS_LATE_PERMILLE,
};
use lawsync_tests::lookalike::{
    Change, Corpus, Fault, Injection, Lookalike, LookalikeConfig, NO_MATCH, Precedent, raw_request,
};
use lawsync_tests::servers::{Topology, unique_ns};
use serde_json::Value;

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
        ..Default::default()
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
    let client = LawClient::new(&cfg.law, Secret::new(OC), gate).expect("client");
    let e = client.detail("100001", in_time()).await.expect_err("wrong key");
    assert!(
        matches!(e, LawError::KeyRefused(lawsync::law::KeyProblem::VerifyFailed)),
        "{e:?}"
    );
    assert!(!format!("{e} {e:?}").contains(OC));

    // The refusal holds that key's gate off (the key-health circuit); the right key has a
    // gate of its own.
    let cfg = config(&server.base_url, &[("LAW_API_REFERER", "https://example.com/")]);
    let gate = Arc::new(Gate::new(
        Topology::Standalone.connect().await,
        &unique_ns("lookalike"),
        cfg.gate,
    ));
    let client = LawClient::new(&cfg.law, Secret::new("the-right-key"), gate).expect("client");
    let e = client.detail("100001", in_time()).await.expect_err("bad referer");
    assert!(
        matches!(e, LawError::KeyRefused(lawsync::law::KeyProblem::VerifyFailed)),
        "{e:?}"
    );
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
        (Fault::Html, |e| {
            matches!(e, LawError::KeyRefused(lawsync::law::KeyProblem::AntiBot))
        }),
        (Fault::Result, |e| {
            matches!(e, LawError::KeyRefused(lawsync::law::KeyProblem::VerifyFailed))
        }),
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
        // A fresh gate each time: the 429 case leaves its own cooling down for an hour, the
        // refusals of the key theirs for the circuit's probe interval.
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

// Late publication, undated hits, revisions and "today". These call the look-alike raw (no
// client, no gate, no Redis), with its rule off.

/// A look-alike without the rate rule whose "today" is `today`.
async fn published_by(today: Option<&str>) -> Lookalike {
    let mut cfg = LookalikeConfig::new(OC);
    cfg.interval = None;
    cfg.today = today.map(str::to_owned);
    Lookalike::start(cfg).await.expect("start look-alike")
}

/// The JSON body of a raw API call (`lawSearch.do` or `lawService.do`) with `params` added.
async fn api(server: &Lookalike, endpoint: &str, params: &str) -> Value {
    let path = format!("/DRF/{endpoint}?OC={OC}&target=prec&type=JSON&{params}");
    let referer = [("Referer", "https://www.law.go.kr/")];
    let out = raw_request(&server.base_url, "GET", &path, &referer, "")
        .await
        .expect("call");
    assert!(out.starts_with("HTTP/1.1 200"), "{out}");
    serde_json::from_str(out.split("\r\n\r\n").nth(1).expect("body")).expect("JSON body")
}

/// Every item of a `sort=ddes` search, paged through at 100 a page, and its `totalCnt`.
/// `window`: the `prncYd` parameter, or none.
async fn search_all(server: &Lookalike, window: Option<(&str, &str)>) -> (usize, Vec<Value>) {
    let prncyd = window.map_or(String::new(), |(a, b)| format!("&prncYd={a}~{b}"));
    let mut items = Vec::new();
    for page in 1.. {
        let v = api(
            server,
            "lawSearch.do",
            &format!("sort=ddes&display=100&page={page}{prncyd}"),
        )
        .await;
        let total: usize = v["PrecSearch"]["totalCnt"]
            .as_str()
            .expect("totalCnt")
            .parse()
            .expect("a number");
        match &v["PrecSearch"]["prec"] {
            Value::Array(a) => items.extend(a.iter().cloned()),
            Value::Null => {}
            one => items.push(one.clone()),
        }
        if items.len() >= total || page * 100 >= total {
            return (total, items);
        }
    }
    unreachable!()
}

fn ids(items: &[Value]) -> Vec<u64> {
    items
        .iter()
        .map(|i| i["판례일련번호"].as_str().expect("id").parse().expect("number"))
        .collect()
}

fn corpus_ids(ps: &[Precedent]) -> Vec<u64> {
    ps.iter().map(|p| p.id).collect()
}

async fn detail(server: &Lookalike, id: u64) -> Value {
    api(server, "lawService.do", &format!("ID={id}")).await
}

/// The day before a YYYYMMDD day.
fn day_before(day: &str) -> String {
    yyyymmdd(day_number(day).expect("a date") - 1)
}

#[tokio::test]
async fn a_precedent_published_after_today_is_hidden_until_today_reaches_it() {
    let (from, to, today) = ("20260105", "20260220", "20260215");
    let corpus = Corpus::new(1);
    let decided = corpus.window(from, to);
    let late = decided
        .iter()
        .find(|p| p.published.as_str() > today && !p.detail_missing)
        .expect("a precedent of the window published after today")
        .clone();
    let server = published_by(Some(today)).await;
    assert_eq!(server.today().as_deref(), Some(today));

    let (total, items) = search_all(&server, Some((from, to))).await;
    let visible = corpus.visible(Some((from, to)), Some(today));
    assert_eq!(
        ids(&items),
        corpus_ids(&visible),
        "what the corpus says is listed"
    );
    assert_eq!(total, visible.len());
    assert!(total < decided.len(), "{total} of {} listed", decided.len());
    assert!(!ids(&items).contains(&late.id));
    assert!(items.iter().all(|i| {
        let id = i["판례일련번호"].as_str().and_then(|s| s.parse().ok());
        corpus
            .get(id.expect("id"))
            .is_some_and(|p| p.published.as_str() <= today)
    }));
    assert_eq!(
        detail(&server, late.id).await,
        serde_json::json!({ "Law": NO_MATCH })
    );
    assert_eq!(
        server.arrivals().last().map(|a| a.cause.clone()).as_deref(),
        Some("unpublished")
    );
    let shown = visible
        .iter()
        .find(|p| !p.detail_missing)
        .expect("a published one");
    assert_eq!(
        detail(&server, shown.id).await["PrecService"]["판례정보일련번호"],
        shown.id.to_string()
    );

    // Today reaches its publication day: listed, counted and served.
    server.set_today(Some(&late.published)).expect("a valid today");
    let (total, items) = search_all(&server, Some((from, to))).await;
    assert!(ids(&items).contains(&late.id));
    assert_eq!(
        total,
        corpus.visible(Some((from, to)), Some(&late.published)).len()
    );
    let d = detail(&server, late.id).await;
    assert_eq!(d["PrecService"]["판례정보일련번호"], late.id.to_string(), "{d}");

    // The control endpoint moves it back, and lifts it.
    let url = format!("{}/_control/today", server.base_url);
    let before = day_before(&late.published);
    let out = post(&url, &format!(r#"{{"today":"{before}"}}"#)).await;
    assert!(out.starts_with("HTTP/1.1 200"), "{out}");
    assert!(!ids(&search_all(&server, Some((from, to))).await.1).contains(&late.id));
    let out = post(&url, r#"{"today":null}"#).await;
    assert!(
        out.starts_with("HTTP/1.1 200") && out.contains(r#""today":null"#),
        "{out}"
    );
    assert_eq!(server.today(), None);
    assert_eq!(search_all(&server, Some((from, to))).await.0, decided.len());
}

#[tokio::test]
async fn undated_hits_appear_only_in_a_search_without_a_window() {
    let server = published_by(None).await;
    let corpus = server.corpus();
    let dated = corpus.window(FIRST_DAY, LAST_DAY);
    let undated = corpus.undated(None);
    assert!(!undated.is_empty());

    let (total, items) = search_all(&server, None).await;
    assert_eq!(total, dated.len() + undated.len());
    assert_eq!(ids(&items), corpus_ids(&corpus.visible(None, None)));
    let blank: Vec<bool> = items.iter().map(|i| i["선고일자"] == "").collect();
    let first_blank = blank.iter().position(|&b| b).expect("undated hits listed");
    assert_eq!(first_blank, dated.len(), "undated ones come last under ddes");
    assert!(blank[first_blank..].iter().all(|&b| b));

    // A window over the whole corpus lists no undated hit.
    let (total, items) = search_all(&server, Some((FIRST_DAY, LAST_DAY))).await;
    assert_eq!(total, dated.len());
    assert!(items.iter().all(|i| i["선고일자"] != ""));
    assert!(ids(&items).iter().all(|id| undated.iter().all(|u| u.id != *id)));

    // The detail says so too, and today hides the ones published later.
    let one = undated
        .iter()
        .find(|p| !p.detail_missing)
        .expect("one with a detail");
    let d = detail(&server, one.id).await;
    assert_eq!(d["PrecService"]["선고일자"], "", "{d}");
    server.set_today(Some("20230101")).expect("valid");
    let (total, items) = search_all(&server, None).await;
    let by_then = corpus.visible(None, Some("20230101"));
    assert_eq!((total, ids(&items)), (by_then.len(), corpus_ids(&by_then)));
    let undated_then = items.iter().filter(|i| i["선고일자"] == "").count();
    assert!(undated_then > 0 && undated_then < undated.len(), "{undated_then}");
}

#[tokio::test]
async fn a_revised_precedent_changes_on_its_revision_date() {
    let server = published_by(None).await;
    let corpus = server.corpus();
    let all = corpus.window(FIRST_DAY, LAST_DAY);
    for change in [Change::CaseName, Change::JudgmentType] {
        let p = all
            .iter()
            .find(|p| !p.detail_missing && p.revision.as_ref().is_some_and(|r| r.change == change))
            .unwrap_or_else(|| panic!("a {change:?} revision with a detail"));
        let on = p.revision.as_ref().expect("revised").on.clone();
        let before = day_before(&on);
        let listed = |items: Vec<Value>| {
            items
                .into_iter()
                .find(|i| ids(std::slice::from_ref(i)) == [p.id])
                .expect("listed")
        };

        server.set_today(Some(&before)).expect("valid");
        let old_item = listed(search_all(&server, Some((&p.decided, &p.decided))).await.1);
        let old_detail = detail(&server, p.id).await["PrecService"].clone();
        assert_eq!(old_item["사건명"], p.case_name);
        assert_eq!(old_item["판결유형"], JUDGMENT_TYPE);
        assert_eq!(old_detail["사건명"], p.case_name);
        assert!(
            !old_detail["판례내용"]
                .as_str()
                .expect("text")
                .contains("【정정】")
        );
        assert_eq!(old_item, p.search_item_on(OC, Some(&before)));
        assert_eq!(old_detail, p.detail_on(Some(&before)));

        server.set_today(Some(&on)).expect("valid");
        let new_item = listed(search_all(&server, Some((&p.decided, &p.decided))).await.1);
        let new_detail = detail(&server, p.id).await["PrecService"].clone();
        let (name, kind) = match change {
            Change::CaseName => (format!("{}{REVISED_SUFFIX}", p.case_name), JUDGMENT_TYPE),
            Change::JudgmentType => (p.case_name.to_owned(), REVISED_JUDGMENT_TYPE),
        };
        assert_eq!(
            (&new_item["사건명"], &new_item["판결유형"]),
            (&Value::from(name.clone()), &Value::from(kind))
        );
        assert_eq!(
            (&new_detail["사건명"], &new_detail["판결유형"]),
            (&Value::from(name), &Value::from(kind))
        );
        assert!(
            new_detail["판례내용"]
                .as_str()
                .expect("text")
                .contains(&format!("【정정】 {on}"))
        );
        assert_ne!(old_item, new_item);
        assert_eq!(
            new_item,
            p.search_item(OC),
            "the revised version is the final one"
        );
        assert_eq!(new_detail, p.detail());
    }
}

#[test]
fn the_publication_delays_are_distributed_as_documented() {
    for seed in [1, 2, 3] {
        let corpus = Corpus::new(seed);
        let dated = corpus.window(FIRST_DAY, LAST_DAY);
        let undated = corpus.undated(None);
        let delays: Vec<i64> = dated
            .iter()
            .map(|p| p.publication_delay_days().expect("dated"))
            .collect();
        let n = delays.len() as f64;
        let share = |f: &dyn Fn(i64) -> bool| delays.iter().filter(|&&d| f(d)).count() as f64 / n;
        let within_a_month = share(&|d| (0..=A_MONTH_DAYS).contains(&d));
        let months_late = share(&|d| (A_MONTH_DAYS + 1..=A_YEAR_DAYS).contains(&d));
        let years_late = share(&|d| (YEARS_LATE_MIN_DAYS..=YEARS_LATE_MAX_DAYS).contains(&d));
        let total = (dated.len() + undated.len()) as f64;
        let undated_share = undated.len() as f64 / total;
        let revised = dated
            .iter()
            .chain(&undated)
            .filter(|p| p.revision.is_some())
            .count() as f64
            / total;
        eprintln!(
            "seed {seed}: {} dated, {} undated ({:.1} %); within a month {:.1} %, 1-12 months {:.1} %, 2-4 years {:.1} %; revised {:.1} %",
            dated.len(),
            undated.len(),
            undated_share * 100.0,
            within_a_month * 100.0,
            months_late * 100.0,
            years_late * 100.0,
            revised * 100.0
        );
        assert!(delays.iter().all(|&d| d >= 0), "published before decided");
        let outside = delays.iter().filter(|&&d| {
            !(0..=A_YEAR_DAYS).contains(&d) && !(YEARS_LATE_MIN_DAYS..=YEARS_LATE_MAX_DAYS).contains(&d)
        });
        assert_eq!(outside.count(), 0, "a delay outside every band");
        let near =
            |got: f64, permille: u64, tolerance: f64| (got - permille as f64 / 1000.0).abs() <= tolerance;
        assert!(
            near(within_a_month, WITHIN_A_MONTH_PERMILLE, 0.03),
            "{within_a_month}"
        );
        assert!(near(months_late, MONTHS_LATE_PERMILLE, 0.03), "{months_late}");
        assert!(near(years_late, YEARS_LATE_PERMILLE, 0.012), "{years_late}");
        assert!((0.01..=0.035).contains(&undated_share), "{undated_share}");
        assert!(near(revised, REVISED_PERMILLE, 0.012), "{revised}");
        // Published on or after the decision, revised after publication.
        for p in dated.iter().chain(&undated) {
            assert!(p.decided.is_empty() || p.published >= p.decided, "{p:?}");
            assert!(p.revision.as_ref().is_none_or(|r| r.on > p.published), "{p:?}");
        }
    }
}

#[tokio::test]
async fn bad_today_values_are_refused_with_the_field_named() {
    let server = published_by(Some("20260101")).await;
    for bad in ["2026-01-01", "20261301", "20260230", "", "tomorrow"] {
        let e = server.set_today(Some(bad)).expect_err(bad);
        assert!(e.starts_with("today: not a YYYYMMDD date"), "{bad}: {e}");
    }
    assert_eq!(
        server.today().as_deref(),
        Some("20260101"),
        "a refused today changes nothing"
    );

    let url = format!("{}/_control/today", server.base_url);
    for (body, says) in [
        (
            r#"{"today":"20260230"}"#,
            "today: not a YYYYMMDD date: its day does not exist",
        ),
        (r#"{"today":20260101}"#, "today: not a string"),
        (r#"{}"#, "today: missing"),
        (r#"{"today":"20260101","day":"x"}"#, "unknown field \"day\""),
        ("20260101", "want an object"),
        ("not json", "not JSON"),
    ] {
        let out = post(&url, body).await;
        assert!(
            out.starts_with("HTTP/1.1 400") && out.contains(says),
            "{body}: {out}"
        );
    }
    let out = get(&url).await;
    assert!(out.contains(r#"{"today":"20260101"}"#), "{out}");

    let mut cfg = LookalikeConfig::new(OC);
    cfg.today = Some("2026011".into());
    let e = Lookalike::start(cfg).await.expect_err("a bad configured today");
    assert_eq!(e.kind(), std::io::ErrorKind::InvalidInput);
    assert!(e.to_string().starts_with("today: not a YYYYMMDD date"), "{e}");

    let out = std::process::Command::new(env!("CARGO_BIN_EXE_law-lookalike"))
        .args(["--oc", OC, "--today", "2026-1-1"])
        .output()
        .expect("run law-lookalike");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{stderr}");
    assert!(
        stderr.contains("--today: not a YYYYMMDD date") && stderr.contains("usage:"),
        "{stderr}"
    );
}
