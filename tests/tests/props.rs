//! Property tests of every parser that reads outside input: `Retry-After` values, law.go.kr
//! search and detail bodies (with the API's quirks), SQS message bodies and configuration
//! values.
//!
//! The properties: no input panics; a bad input is a clear, non-empty error; no error text
//! (Display or Debug) carries the input's content. Generated inputs are sprinkled with
//! [`MARK`] and with an OC-like key [`OC`], and every error is searched for both. Decoded
//! bodies are searched for the key as well: the decoder must scrub it wherever it is.
//!
//! Each property prints `props NAME: N cases passed in T`; the cases are random on each run
//! (set `PROPTEST_RNG_SEED` to replay one, `PROPTEST_CASES` to run more). Failures are not
//! written to a regressions file: inputs found this way are kept below as plain tests.

use std::cell::RefCell;
use std::collections::BTreeMap;
use std::fmt::Debug;
use std::sync::atomic::{AtomicU32, Ordering};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use lawsync::Secret;
use lawsync::app::sqs::{Message, MessageKind, parse_message};
use lawsync::config::Config;
use lawsync::law::{
    LawError, SearchRequest, check_precedent_id, decode_body, parse_detail, parse_retry_after, parse_search,
};
use lawsync::policy::{self, RETRY_AFTER_CAP};
use proptest::collection::vec;
use proptest::prelude::*;
use proptest::test_runner::{Config as RunnerConfig, TestCaseResult, TestRunner};
use serde_json::{Value, json};

/// An OC-like key: must never come out of an error, and never out of a decoded body.
const OC: &str = "ocPROP7q3kZx";
/// Put into generated bodies and messages: must never come out of an error.
const MARK: &str = "BODYMARK-5e2a9c";
/// The search hit field that carries the caller's key.
const LINK: &str = "판례상세링크";

/// Runs one property for `cases` random cases and prints how many passed and how long
/// that took (a figure only: nothing asserts on it).
fn check<S>(name: &str, cases: u32, strategy: S, test: impl Fn(S::Value) -> TestCaseResult)
where
    S: Strategy,
    S::Value: Debug,
{
    // PROPTEST_CASES, when set, overrides every property's count (for longer runs).
    let cases = std::env::var("PROPTEST_CASES")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(cases);
    let mut runner = TestRunner::new(RunnerConfig {
        cases,
        failure_persistence: None,
        ..RunnerConfig::default()
    });
    let runs = AtomicU32::new(0);
    let started = Instant::now();
    let outcome = runner.run(&strategy, |v| {
        runs.fetch_add(1, Ordering::Relaxed);
        test(v)
    });
    if let Err(e) = outcome {
        panic!("property {name} failed: {e}");
    }
    eprintln!(
        "props {name}: {cases} cases passed ({} inputs tried) in {:.0} ms",
        runs.load(Ordering::Relaxed),
        started.elapsed().as_secs_f64() * 1e3
    );
}

/// An error text must say something and must not carry the input.
fn clear_and_silent(what: &str, text: &str) -> TestCaseResult {
    prop_assert!(!text.trim().is_empty(), "{what}: empty error text");
    for needle in [MARK, OC] {
        prop_assert!(
            !text.contains(needle),
            "{what}: error text carries {needle:?}: {text}"
        );
    }
    Ok(())
}

fn law_error_is_clear(what: &str, e: &LawError) -> TestCaseResult {
    clear_and_silent(what, &e.to_string())?;
    clear_and_silent(what, &format!("{e:?}"))?;
    prop_assert!(!e.kind().is_empty());
    Ok(())
}

// ---------------------------------------------------------------------------------------
// Generators
// ---------------------------------------------------------------------------------------

/// Text as the upstream or a producer might send it, often carrying the mark or the key.
fn text() -> impl Strategy<Value = String> {
    prop_oneof![
        3 => any::<String>(),
        2 => "[가-힣 .,()0-9]{0,24}",
        1 => Just(MARK.to_owned()),
        1 => Just(OC.to_owned()),
        1 => " *[0-9]{1,20} *",
        1 => Just("<br/>".to_owned()),
        2 => (any::<String>(), any::<String>()).prop_map(|(a, b)| format!("{a}{MARK}{b}")),
        2 => ("[a-z/.?=&]{0,12}", "[a-z&=]{0,8}").prop_map(|(a, b)| format!("{a}OC={OC}{b}")),
        1 => ("[가-힣 ]{0,12}", "[가-힣 ]{0,12}").prop_map(|(a, b)| format!("{a}<br/>{b}<br/>{MARK}")),
    ]
}

/// Object keys: the API's own field names, and anything else.
fn key() -> impl Strategy<Value = String> {
    prop_oneof![
        3 => prop::sample::select(vec![
            "PrecSearch", "PrecService", "prec", "totalCnt", "page", "result", "msg", "Law", "target",
            "판례일련번호", "판례정보일련번호", "사건명", "사건번호", "선고일자", "법원명", "판례내용",
            "판시사항", "판결요지", "참조조문", "참조판례", LINK, "id", "from", "to", "query",
            "display", "dayBefore",
        ])
        .prop_map(str::to_owned),
        2 => text(),
    ]
}

fn leaf() -> impl Strategy<Value = Value> {
    prop_oneof![
        Just(Value::Null),
        any::<bool>().prop_map(Value::Bool),
        any::<i64>().prop_map(Value::from),
        any::<u64>().prop_map(Value::from),
        any::<f64>().prop_filter_map("finite", |f| serde_json::Number::from_f64(f).map(Value::Number)),
        text().prop_map(Value::String),
    ]
}

/// Any JSON value, a few levels deep.
fn json_value() -> impl Strategy<Value = Value> {
    leaf().prop_recursive(4, 48, 6, |inner| {
        prop_oneof![
            vec(inner.clone(), 0..6).prop_map(Value::Array),
            vec((key(), inner), 0..6).prop_map(|kv| Value::Object(kv.into_iter().collect())),
        ]
    })
}

/// A count as law.go.kr sends it (a string, usually) or as it should not.
fn count_value() -> impl Strategy<Value = Option<Value>> {
    prop_oneof![
        Just(None),
        any::<u64>().prop_map(|n| Some(json!(n))),
        any::<u64>().prop_map(|n| Some(json!(n.to_string()))),
        (0u64..100_000).prop_map(|n| Some(json!(format!(" {n} ")))),
        Just(Some(json!(""))),
        leaf().prop_map(Some),
    ]
}

/// One search hit, well or badly formed.
fn hit() -> impl Strategy<Value = Value> {
    let id = prop_oneof![
        Just(None),
        any::<u64>().prop_map(|n| Some(json!(n))),
        "[0-9]{1,12}".prop_map(|s| Some(json!(s))),
        Just(Some(json!(""))),
        leaf().prop_map(Some),
    ];
    (
        id,
        text(),
        "[0-9]{4}\\.[0-9]{2}\\.[0-9]{2}",
        vec((key(), json_value()), 0..4),
    )
        .prop_map(|(id, name, date, extra)| {
            let mut m: serde_json::Map<String, Value> = extra.into_iter().collect();
            if let Some(id) = id {
                m.insert("판례일련번호".into(), id);
            }
            m.insert("사건명".into(), json!(name));
            m.insert("선고일자".into(), json!(date));
            m.insert(
                LINK.into(),
                json!(format!("/DRF/lawService.do?OC={OC}&target=prec&ID=1")),
            );
            Value::Object(m)
        })
}

/// A `lawSearch.do` reply body, from well formed to nonsense.
fn search_body() -> impl Strategy<Value = Vec<u8>> {
    let prec = prop_oneof![
        Just(None),
        Just(Some(Value::Null)),
        hit().prop_map(Some),
        vec(hit(), 0..6).prop_map(|v| Some(Value::Array(v))),
        json_value().prop_map(Some),
    ];
    let shaped = (
        count_value(),
        count_value(),
        prec,
        vec((key(), json_value()), 0..3),
    )
        .prop_map(|(total, page, prec, extra)| {
            let mut m: serde_json::Map<String, Value> = extra.into_iter().collect();
            for (k, v) in [("totalCnt", total), ("page", page), ("prec", prec)] {
                if let Some(v) = v {
                    m.insert(k.into(), v);
                }
            }
            json!({ "PrecSearch": m }).to_string().into_bytes()
        });
    prop_oneof![
        4 => shaped,
        2 => quirky_bodies(),
        1 => json_value().prop_map(|v| json!({ "PrecSearch": v }).to_string().into_bytes()),
        1 => json_value().prop_map(|v| v.to_string().into_bytes()),
        2 => any_bytes(),
    ]
}

/// A `lawService.do` reply body.
fn detail_body() -> impl Strategy<Value = Vec<u8>> {
    let id = prop_oneof![
        Just(None),
        any::<u64>().prop_map(|n| Some(json!(n))),
        " *[0-9]{1,12} *".prop_map(|s| Some(json!(s))),
        leaf().prop_map(Some),
    ];
    let shaped =
        (id, text(), text(), vec((key(), json_value()), 0..4)).prop_map(|(id, full, holdings, extra)| {
            let mut m: serde_json::Map<String, Value> = extra.into_iter().collect();
            if let Some(id) = id {
                m.insert("판례정보일련번호".into(), id);
            }
            m.insert("판례내용".into(), json!(full));
            m.insert("판시사항".into(), json!(holdings));
            json!({ "PrecService": m }).to_string().into_bytes()
        });
    prop_oneof![
        4 => shaped,
        2 => quirky_bodies(),
        1 => json_value().prop_map(|v| json!({ "PrecService": v }).to_string().into_bytes()),
        1 => json_value().prop_map(|v| v.to_string().into_bytes()),
        2 => any_bytes(),
    ]
}

/// The API's failure shapes on HTTP 200, and bodies cut short.
fn quirky_bodies() -> impl Strategy<Value = Vec<u8>> {
    prop_oneof![
        (text(), text()).prop_map(|(r, m)| json!({ "result": r, "msg": format!("{m} OC={OC}") }).to_string()),
        text().prop_map(|t| json!({ "Law": t }).to_string()),
        text().prop_map(|t| format!(
            "<!DOCTYPE html><html><script>location.assign('/?{MARK}{t}')</script></html>"
        )),
        text().prop_map(|t| format!("  \u{feff}<html><body>{MARK} {t}</body></html>")),
        (text(), any::<prop::sample::Index>()).prop_map(|(t, at)| {
            let full = json!({ "PrecSearch": { "totalCnt": "1", "prec": { "판례일련번호": "1", "사건명": t } }, "n": MARK })
                .to_string();
            let cut = at.index(full.len() + 1);
            let cut = (0..=cut).rev().find(|&i| full.is_char_boundary(i)).unwrap_or(0);
            full[..cut].to_owned()
        }),
        Just(String::new()),
        Just(" \n\t".to_owned()),
    ]
    .prop_map(String::into_bytes)
}

/// Raw bytes around the mark, UTF-8 or not.
fn any_bytes() -> impl Strategy<Value = Vec<u8>> {
    (vec(any::<u8>(), 0..64), vec(any::<u8>(), 0..64)).prop_map(|(a, b)| {
        let mut v = a;
        v.extend_from_slice(MARK.as_bytes());
        v.extend_from_slice(OC.as_bytes());
        v.extend(b);
        v
    })
}

/// Walks a decoded value: no link field, and the key nowhere, keys included.
fn scrubbed(v: &Value) -> TestCaseResult {
    match v {
        Value::Object(m) => {
            for (k, x) in m {
                prop_assert!(k != LINK, "the link field survived decoding");
                prop_assert!(
                    !k.contains(OC),
                    "the key survived decoding in an object key: {k:?}"
                );
                scrubbed(x)?;
            }
        }
        Value::Array(items) => items.iter().try_for_each(scrubbed)?,
        Value::String(s) => prop_assert!(!s.contains(OC), "the key survived decoding: {s:?}"),
        _ => {}
    }
    Ok(())
}

fn oc() -> Secret {
    Secret::new(OC)
}

// ---------------------------------------------------------------------------------------
// Retry-After
// ---------------------------------------------------------------------------------------

/// Whole seconds from 1970 to 9999, as `now` for the parser.
fn instant() -> impl Strategy<Value = SystemTime> {
    (0u64..=253_402_300_799).prop_map(|s| UNIX_EPOCH + Duration::from_secs(s))
}

#[test]
fn retry_after_any_text_is_capped_or_ignored() {
    let value = prop_oneof![
        any::<String>(),
        "[ \t]*-?[0-9]{0,40}[ \t]*",
        "[A-Za-z]{3}, [0-9]{1,2} [A-Za-z]{3} [0-9]{1,5} [0-9:]{1,9} [A-Z]{1,3}",
        "[0-9]+[.,e]?[0-9]*[a-z]?",
    ];
    check("retry_after_any_text", 2000, (value, instant()), |(v, now)| {
        let got = parse_retry_after(&v, now);
        let t = v.trim();
        if let Some(d) = got {
            prop_assert!(d <= RETRY_AFTER_CAP, "{v:?} gave {d:?}, above the cap");
            prop_assert!(
                !t.is_empty()
                    && (t.bytes().all(|b| b.is_ascii_digit()) || httpdate::parse_http_date(t).is_ok()),
                "{v:?} is neither form but gave {d:?}"
            );
        }
        if t.starts_with('-') || t.is_empty() {
            prop_assert_eq!(got, None, "{:?}", v);
        }
        Ok(())
    });
}

#[test]
fn retry_after_seconds_are_taken_up_to_the_cap() {
    let digits = prop_oneof![
        any::<u64>().prop_map(|n| n.to_string()),
        (0u64..200_000).prop_map(|n| n.to_string()),
        "[0-9]{1,60}",
        "0{1,30}[0-9]{1,6}",
    ];
    check(
        "retry_after_seconds",
        1000,
        (digits, "[ \t]{0,3}", "[ \t]{0,3}", instant()),
        |(n, pre, post, now)| {
            let want = n.parse::<u128>().map_or(RETRY_AFTER_CAP, |s| {
                Duration::from_secs(s.min(u128::from(RETRY_AFTER_CAP.as_secs())) as u64)
            });
            prop_assert_eq!(parse_retry_after(&format!("{pre}{n}{post}"), now), Some(want));
            for bad in [
                format!("-{n}"),
                format!("{n}.5"),
                format!("{n}s"),
                format!("+{n}"),
            ] {
                prop_assert_eq!(parse_retry_after(&bad, now), None, "{:?}", bad);
            }
            Ok(())
        },
    );
}

#[test]
fn retry_after_dates_give_the_time_left_past_dates_zero() {
    check(
        "retry_after_dates",
        1000,
        (0u64..=200_000_000_000, 0u64..=3 * 86_400, any::<bool>()),
        |(now_s, delta, ahead)| {
            let now = UNIX_EPOCH + Duration::from_secs(now_s);
            let at = if ahead {
                now + Duration::from_secs(delta)
            } else {
                now - Duration::from_secs(delta.min(now_s))
            };
            let header = httpdate::fmt_http_date(at);
            let want = if ahead {
                Duration::from_secs(delta).min(RETRY_AFTER_CAP)
            } else {
                Duration::ZERO
            };
            prop_assert_eq!(parse_retry_after(&header, now), Some(want), "{}", header);
            Ok(())
        },
    );
}

// ---------------------------------------------------------------------------------------
// Search and detail bodies
// ---------------------------------------------------------------------------------------

#[test]
fn search_bodies_parse_or_fail_clearly_without_echo() {
    check("search_bodies", 1000, search_body(), |body| {
        match decode_body(&body, &oc(), "PrecSearch") {
            Err(e) => law_error_is_clear("decode (search)", &e)?,
            Ok(v) => {
                scrubbed(&v)?;
                match parse_search(v) {
                    Err(e) => law_error_is_clear("parse_search", &e)?,
                    Ok(page) => {
                        prop_assert!(page.page >= 1);
                        for item in &page.items {
                            prop_assert!(!item.id.is_empty() && item.id.trim() == item.id, "{:?}", item.id);
                        }
                        let out = serde_json::to_string(&page).expect("serialize page");
                        prop_assert!(!out.contains(OC), "the key reached a parsed page: {out}");
                    }
                }
            }
        }
        Ok(())
    });
}

#[test]
fn detail_bodies_parse_or_fail_clearly_without_echo() {
    check("detail_bodies", 1000, detail_body(), |body| {
        match decode_body(&body, &oc(), "PrecService") {
            Err(e) => law_error_is_clear("decode (detail)", &e)?,
            Ok(v) => {
                scrubbed(&v)?;
                match parse_detail(v) {
                    Err(e) => law_error_is_clear("parse_detail", &e)?,
                    Ok(doc) => {
                        prop_assert!(!doc.id.is_empty());
                        prop_assert!(!doc.other.contains_key(LINK));
                        let out = serde_json::to_string(&doc).expect("serialize detail");
                        prop_assert!(!out.contains(OC), "the key reached a parsed detail: {out}");
                    }
                }
            }
        }
        Ok(())
    });
}

fn search_of(prec: Option<Value>, total: Value, page: Value) -> Result<lawsync::law::SearchPage, LawError> {
    let mut root = serde_json::Map::new();
    root.insert("totalCnt".into(), total);
    root.insert("page".into(), page);
    if let Some(p) = prec {
        root.insert("prec".into(), p);
    }
    let body = json!({ "PrecSearch": root }).to_string();
    parse_search(decode_body(body.as_bytes(), &oc(), "PrecSearch")?)
}

#[test]
fn search_quirks_mean_the_same_as_the_regular_form() {
    check(
        "search_quirks",
        500,
        (hit(), vec(hit(), 0..4), 0u64..=u64::MAX, 1u32..=u32::MAX),
        |(one, many, total, page)| {
            // One hit as an object is the array of that one hit.
            let as_object = search_of(Some(one.clone()), json!("1"), json!("1"));
            let as_array = search_of(Some(json!([one])), json!("1"), json!("1"));
            prop_assert_eq!(&as_object, &as_array);
            // Numbers as strings, padded or not, are the numbers.
            let numbers = search_of(Some(json!(many.clone())), json!(total), json!(page));
            let strings = search_of(
                Some(json!(many.clone())),
                json!(total.to_string()),
                json!(format!(" {page} ")),
            );
            prop_assert_eq!(&numbers, &strings);
            let parsed = numbers.expect("a well-formed page parses");
            prop_assert_eq!((parsed.total, parsed.page), (total, page));
            // Every hit is either kept or counted as skipped.
            prop_assert_eq!(parsed.items.len() + parsed.skipped_items as usize, many.len());
            // No prec, or a null one, is no hits.
            for none in [None, Some(Value::Null)] {
                let empty = search_of(none, json!("0"), json!("1")).expect("zero hits parse");
                prop_assert!(empty.items.is_empty() && empty.skipped_items == 0);
            }
            // A page number past u32 is a clear error, not a wrap.
            let far = search_of(None, json!("1"), json!(u64::from(u32::MAX) + 1 + u64::from(page)));
            prop_assert!(matches!(far, Err(LawError::Malformed { .. })), "{:?}", far);
            Ok(())
        },
    );
}

#[test]
fn errors_on_200_and_html_pages_are_named_not_echoed() {
    check(
        "errors_on_200",
        500,
        (text(), text(), "[ \t\r\n]{0,3}"),
        |(a, b, ws)| {
            use lawsync::law::KeyProblem;
            for root in ["PrecSearch", "PrecService"] {
                let verify = format!("{a}사용자 정보 검증에 실패하였습니다.{b}");
                let auth = json!({ "result": verify, "msg": format!("{b} OC={OC}") }).to_string();
                let e = decode_body(auth.as_bytes(), &oc(), root).expect_err("auth body");
                prop_assert_eq!(&e, &LawError::KeyRefused(KeyProblem::VerifyFailed));
                // A `result` law.go.kr is not known to send is no refusal of the key.
                let other =
                    json!({ "result": format!("{a}{MARK}"), "msg": format!("{b} OC={OC}") }).to_string();
                let e = decode_body(other.as_bytes(), &oc(), root).expect_err("other body");
                prop_assert!(matches!(e, LawError::Malformed { .. }), "{:?}", e);
                let missing = json!({ "Law": format!("{a}{MARK}") }).to_string();
                let e = decode_body(missing.as_bytes(), &oc(), root).expect_err("missing body");
                prop_assert_eq!(&e, &LawError::NotFound);
                let html = format!("{ws}\u{feff}<html><script>location.assign('{a}')</script>{MARK}</html>");
                let e = decode_body(html.as_bytes(), &oc(), root).expect_err("html body");
                prop_assert_eq!(&e, &LawError::KeyRefused(KeyProblem::AntiBot));
                let bare = format!("{ws}window.location.assign(\"/{b}{MARK}\")");
                let e = decode_body(bare.as_bytes(), &oc(), root).expect_err("script body");
                prop_assert_eq!(&e, &LawError::KeyRefused(KeyProblem::AntiBot));
                let page = format!("{ws}<html><body>{a}{MARK}</body></html>");
                let e = decode_body(page.as_bytes(), &oc(), root).expect_err("page");
                prop_assert_eq!(&e, &LawError::HtmlPage);
            }
            Ok(())
        },
    );
}

#[test]
fn detail_text_keeps_its_html_and_loses_the_key() {
    let piece = "[가-힣 .,()0-9a-z]{0,30}";
    check(
        "detail_text",
        500,
        (vec(piece, 1..6), any::<u64>(), any::<bool>(), any::<bool>()),
        |(parts, id, id_as_string, with_key)| {
            let mut full = parts.join("<br/>");
            if with_key {
                full.push_str(&format!("<br/>see /DRF/lawService.do?OC={OC}"));
            }
            let id_value = if id_as_string {
                json!(format!(" {id} "))
            } else {
                json!(id)
            };
            let body =
                json!({ "PrecService": { "판례정보일련번호": id_value, "판례내용": full, LINK: "x" } });
            let doc = parse_detail(
                decode_body(body.to_string().as_bytes(), &oc(), "PrecService").expect("decoded"),
            )
            .expect("parsed");
            prop_assert_eq!(doc.id, id.to_string());
            prop_assert_eq!(doc.full_text, Some(full.replace(OC, "***")));
            prop_assert!(doc.other.is_empty(), "{:?}", doc.other);
            Ok(())
        },
    );
}

// ---------------------------------------------------------------------------------------
// SQS message bodies
// ---------------------------------------------------------------------------------------

fn kind() -> impl Strategy<Value = MessageKind> {
    prop_oneof![Just(MessageKind::Search), Just(MessageKind::Detail)]
}

fn sqs_body() -> impl Strategy<Value = String> {
    let field = prop_oneof![leaf(), json_value()];
    prop_oneof![
        2 => any::<String>().prop_map(|s| format!("{s}{MARK}")),
        2 => json_value().prop_map(|v| v.to_string()),
        2 => field.clone().prop_map(|v| json!({ "id": v }).to_string()),
        2 => (field.clone(), field.clone(), vec((key(), field.clone()), 0..3)).prop_map(|(f, t, extra)| {
            let mut m: serde_json::Map<String, Value> = extra.into_iter().collect();
            m.insert("from".into(), f);
            m.insert("to".into(), t);
            Value::Object(m).to_string()
        }),
        2 => prop_oneof![text().prop_map(Value::String), field.clone()]
            .prop_map(|v| json!({ "dayBefore": v }).to_string()),
        1 => (text(), field).prop_map(|(t, v)| json!({ "dayBefore": t, MARK: v }).to_string()),
        1 => (json_value(), any::<prop::sample::Index>()).prop_map(|(v, at)| {
            let full = json!({ "id": MARK, "x": v }).to_string();
            let cut = at.index(full.len() + 1);
            let cut = (0..=cut).rev().find(|&i| full.is_char_boundary(i)).unwrap_or(0);
            full[..cut].to_owned()
        }),
    ]
}

#[test]
fn sqs_bodies_parse_or_fail_clearly_without_echo() {
    check("sqs_bodies", 2000, (kind(), sqs_body()), |(kind, body)| {
        if let Err(e) = parse_message(kind, &body) {
            let reason = e.to_string();
            clear_and_silent("parse_message", &reason)?;
            clear_and_silent("parse_message (Debug)", &format!("{e:?}"))?;
            prop_assert!(reason.contains("invalid message body"), "{reason}");
        }
        Ok(())
    });
}

#[test]
fn sqs_messages_round_trip() {
    let date = prop_oneof![
        3 => (1800i64..=2100, 1i64..=12, 1i64..=31).prop_map(|(y, m, d)| format!("{y:04}{m:02}{d:02}")),
        1 => any::<String>(),
        1 => any::<String>().prop_map(|s| format!("{s}{MARK}")),
    ];
    let request = (
        date.clone(),
        date,
        proptest::option::of(text()),
        proptest::option::of(prop_oneof![0u32..=3, any::<u32>()]),
        proptest::option::of(prop_oneof![0u32..=120, any::<u32>()]),
    )
        .prop_map(|(from, to, query, page, display)| SearchRequest {
            from,
            to,
            query,
            page,
            display,
            ..Default::default()
        });
    check("sqs_round_trip", 1000, (request, any::<String>()), |(req, id)| {
        // A request comes back as sent when its values are usable, else as a clear error.
        let body = serde_json::to_string(&req).expect("serialize");
        match (parse_message(MessageKind::Search, &body), req.params()) {
            (Ok(got), Ok(_)) => prop_assert_eq!(got, Message::Search(req)),
            (Err(reason), Err(_)) => clear_and_silent("search message", &reason.to_string())?,
            (got, params) => prop_assert!(false, "{req:?}: message {got:?}, params {params:?}"),
        }
        // An id that is 1-20 ASCII digits is taken as is; any other is refused, not shown.
        for id in [id.clone(), format!("{id}{MARK}")] {
            let digits = !id.is_empty() && id.len() <= 20 && id.bytes().all(|b| b.is_ascii_digit());
            let body = json!({ "id": id }).to_string();
            match parse_message(MessageKind::Detail, &body) {
                Ok(Message::Detail(d)) => prop_assert!(digits && d.id == id, "{id:?} accepted"),
                Ok(other) => prop_assert!(false, "{other:?}"),
                Err(reason) => {
                    prop_assert!(!digits, "{id:?} refused: {reason}");
                    clear_and_silent("detail message", &reason.to_string())?;
                }
            }
            prop_assert_eq!(check_precedent_id(&id).is_ok(), digits);
        }
        Ok(())
    });
}

/// Days since 1970-01-01 by counting, as a reference for the parser's arithmetic.
fn days_by_counting(y: i64, m: i64, d: i64) -> i64 {
    let leap = |y: i64| (y % 4 == 0 && y % 100 != 0) || y % 400 == 0;
    let year_len = |y: i64| if leap(y) { 366 } else { 365 };
    let mut days: i64 = if y >= 1970 {
        (1970..y).map(year_len).sum()
    } else {
        -(y..1970).map(year_len).sum::<i64>()
    };
    let months = [
        31,
        if leap(y) { 29 } else { 28 },
        31,
        30,
        31,
        30,
        31,
        31,
        30,
        31,
        30,
        31,
    ];
    days += months[..(m - 1) as usize].iter().sum::<i64>();
    days + d - 1
}

fn date_by_counting(day: i64) -> String {
    let mut y = 1970 + day.div_euclid(365);
    while days_by_counting(y, 1, 1) > day {
        y -= 1;
    }
    while days_by_counting(y + 1, 1, 1) <= day {
        y += 1;
    }
    let mut m = 1;
    while m < 12 && days_by_counting(y, m + 1, 1) <= day {
        m += 1;
    }
    format!("{y:04}{m:02}{:02}", day - days_by_counting(y, m, 1) + 1)
}

#[test]
fn day_before_is_the_korean_day_before_the_instant() {
    let instant = (
        (1i64..=9999, 1i64..=12, 1i64..=31),
        (0i64..=23, 0i64..=59, 0i64..=60),
        proptest::option::of("[0-9]{1,9}"),
        prop_oneof![Just(None), (any::<bool>(), 0i64..=23, 0i64..=59).prop_map(Some)],
        any::<bool>(),
    );
    check(
        "day_before",
        1000,
        instant,
        |((y, mo, d), (h, mi, s), frac, offset, lower)| {
            let d = d.min(match mo {
                2 if (y % 4 == 0 && y % 100 != 0) || y % 400 == 0 => 29,
                2 => 28,
                4 | 6 | 9 | 11 => 30,
                _ => 31,
            });
            let frac = frac.map(|f| format!(".{f}")).unwrap_or_default();
            let (zone, offset_s) = match offset {
                None if lower => ("z".to_owned(), 0),
                None => ("Z".to_owned(), 0),
                Some((west, oh, om)) => (
                    format!("{}{oh:02}:{om:02}", if west { '-' } else { '+' }),
                    if west { -1 } else { 1 } * (oh * 3600 + om * 60),
                ),
            };
            let t = if lower { 't' } else { 'T' };
            let at = format!("{y:04}-{mo:02}-{d:02}{t}{h:02}:{mi:02}:{s:02}{frac}{zone}");
            let secs = days_by_counting(y, mo, d) * 86_400 + h * 3600 + mi * 60 + s.min(59) - offset_s;
            let want = date_by_counting((secs + 9 * 3600).div_euclid(86_400) - 1);
            let body = json!({ "dayBefore": at }).to_string();
            match parse_message(MessageKind::Search, &body) {
                Ok(Message::Search(req)) => {
                    prop_assert!(want.as_str() >= "19000101", "{at}: {want} accepted");
                    prop_assert_eq!(&req.from, &want, "{}", at);
                    prop_assert_eq!(&req.to, &want, "{}", at);
                    prop_assert_eq!((req.query, req.page, req.display), (None, None, None));
                }
                // law.go.kr's dates start in 1900; an earlier day is refused as a date.
                Err(reason) if want.as_str() < "19000101" => {
                    prop_assert!(reason.to_string().contains("before 1900"), "{at}: {reason}");
                }
                other => prop_assert!(false, "{at} (want {want}): {other:?}"),
            }
            Ok(())
        },
    );
}

// ---------------------------------------------------------------------------------------
// Configuration values
// ---------------------------------------------------------------------------------------

/// Every variable `Config::from_lookup` reads, found by watching it read a valid set.
fn variables_read() -> Vec<String> {
    let seen = RefCell::new(Vec::new());
    Config::from_lookup(|name| {
        seen.borrow_mut().push(name.to_owned());
        (name == "LAW_API_OC").then(|| OC.to_owned())
    })
    .expect("a valid configuration");
    let mut names = seen.into_inner();
    names.sort();
    names.dedup();
    names
}

fn config_with(vars: &BTreeMap<String, String>) -> Result<Config, lawsync::ConfigError> {
    Config::from_lookup(|name| vars.get(name).cloned())
}

fn config_value() -> impl Strategy<Value = String> {
    prop_oneof![
        3 => any::<String>(),
        2 => "[ -~]{0,40}",
        2 => "[ \t]{0,2}[0-9+-]{0,22}[ \t]{0,2}",
        2 => "(https?|redis|rediss|ftp|file)://[a-zA-Z0-9.:@/?#%_~-]{0,30}",
        1 => "arn:[a-z0-9:/_-]{0,40}",
        1 => prop::sample::select(vec!["", " ", "auto", "true", "0", "no", "yes", "local", "a.b-c_d"])
            .prop_map(str::to_owned),
    ]
}

#[test]
fn config_values_are_accepted_or_refused_by_name() {
    let names = variables_read();
    for expected in [
        "LAW_API_OC",
        "LAW_API_BASE_URL",
        "REDIS_URL",
        "APP_ENV",
        "RETRY_MAX_ATTEMPTS",
    ] {
        assert!(
            names.iter().any(|n| n == expected),
            "{expected} not read: {names:?}"
        );
    }
    eprintln!("props config: {} variables read", names.len());
    let pick = prop::sample::select(names.clone());
    check("config_values", 2000, vec((pick, config_value()), 1..4), |set| {
        let mut vars = BTreeMap::from([("LAW_API_OC".to_owned(), OC.to_owned())]);
        vars.extend(set.iter().cloned());
        prop_assume!(!set.iter().any(|(_, v)| v.contains(OC)));
        match config_with(&vars) {
            Ok(cfg) => {
                let shown = format!("{cfg:?}");
                prop_assert!(!shown.contains(OC), "the key in Debug: {shown}");
            }
            Err(e) => {
                let shown = e.to_string();
                prop_assert!(
                    set.iter().any(|(n, _)| n == e.var),
                    "error names {}, which was not set: {shown}",
                    e.var
                );
                prop_assert!(
                    shown.starts_with(&format!("{}: ", e.var)) && e.reason.len() > 5,
                    "{shown}"
                );
                prop_assert!(!shown.contains(OC) && !format!("{e:?}").contains(OC), "{shown}");
            }
        }
        Ok(())
    });
}

/// The numeric variables: (name, largest accepted value, the value as read back).
type NumVar = (&'static str, u64, fn(&Config) -> u64);

fn numeric_vars() -> Vec<NumVar> {
    let big = u64::from(u32::MAX) * 1000;
    let ms = |d: Duration| d.as_millis() as u64;
    vec![
        ("LAW_API_MAX_ATTEMPTS", 10, |c| c.law.max_attempts.into()),
        ("LAW_API_MAX_RESPONSE_BYTES", big, |c| c.law.max_response_bytes),
        // Each with the other at its default, the key-health probe's window within the
        // ceiling.
        (
            "LAW_API_CONNECT_TIMEOUT_MS",
            ms(policy::MAX_WAIT_CEILING - policy::DEFAULT_READ_TIMEOUT - policy::KEY_PROBE_MARGIN),
            |c| c.law.connect_timeout.as_millis() as u64,
        ),
        (
            "LAW_API_READ_TIMEOUT_MS",
            ms(policy::MAX_WAIT_CEILING - policy::DEFAULT_CONNECT_TIMEOUT - policy::KEY_PROBE_MARGIN),
            |c| c.law.read_timeout.as_millis() as u64,
        ),
        ("LAW_API_BURST", policy::MAX_BURST.into(), |c| c.gate.burst.into()),
        ("LAW_API_REQUEST_INTERVAL_MS", ms(policy::MAX_INTERVAL), |c| {
            c.gate.interval.as_millis() as u64
        }),
        ("LAW_API_MAX_WAIT_MS", ms(policy::MAX_WAIT_CEILING), |c| {
            c.gate.max_wait.as_millis() as u64
        }),
        ("LAW_API_GATE_TOLERANCE_MS", ms(policy::MAX_GATE_TOLERANCE), |c| {
            c.gate.tolerance.as_millis() as u64
        }),
        ("REDIS_CONNECT_TIMEOUT_MS", big, |c| {
            c.redis.connect_timeout.as_millis() as u64
        }),
        ("REDIS_RESPONSE_TIMEOUT_MS", big, |c| {
            c.redis.response_timeout.as_millis() as u64
        }),
        ("LAW_API_HANDLER_MAX_WAIT_MS", ms(policy::MAX_WAIT_CEILING), |c| {
            c.handler_max_wait.as_millis() as u64
        }),
        ("RETRY_MAX_ATTEMPTS", u32::MAX.into(), |c| {
            c.retry_max_attempts.into()
        }),
        ("DRAIN_INTERVAL_MS", big, |c| c.drain_interval.as_millis() as u64),
    ]
}

/// Numbers around every bound that matters, and any number at all.
fn number() -> impl Strategy<Value = u64> {
    let m = u64::from(u32::MAX);
    prop_oneof![
        0u64..=20,
        prop::sample::select(vec![
            999,
            1000,
            10_000,
            10_001,
            900_000,
            900_001,
            3_600_000,
            3_600_001,
            m,
            m + 1,
            m + 3,
            m + 10,
            m * 1000,
            m * 1000 + 1,
            u64::MAX,
        ]),
        (0u64..=12).prop_map(move |k| (m + 1) * k + 3),
        any::<u64>(),
    ]
}

#[test]
fn config_numbers_are_taken_exactly_or_refused() {
    let vars = numeric_vars();
    let names = variables_read();
    for (name, _, _) in &vars {
        assert!(names.iter().any(|n| n == name), "{name} is not read any more");
    }
    check(
        "config_numbers",
        2000,
        (prop::sample::select(vars), number(), "[ \t]{0,2}", "[ \t]{0,2}"),
        |((name, max, read), n, pre, post)| {
            let vars = BTreeMap::from([
                ("LAW_API_OC".to_owned(), OC.to_owned()),
                (name.to_owned(), format!("{pre}{n}{post}")),
            ]);
            match config_with(&vars) {
                Ok(cfg) => {
                    prop_assert!((1..=max).contains(&n), "{name}={n} accepted (at most {max})");
                    prop_assert_eq!(read(&cfg), n, "{}={} read back differently", name, n);
                }
                Err(e) => {
                    prop_assert!(!(1..=max).contains(&n), "{name}={n} refused: {e}");
                    prop_assert_eq!(e.var, name);
                }
            }
            Ok(())
        },
    );
}

#[test]
fn config_never_shows_the_key_or_a_credential() {
    let key = "[a-z]{3}[0-9]{3}[A-Z]{2}[a-z0-9]{0,6}";
    let junk = "[a-zA-Z0-9.:/_-]{0,16}";
    check(
        "config_secrets",
        1000,
        (key, junk, 0usize..8, "[ \t\r\n]", any::<prop::sample::Index>()),
        |(key, junk, place, ws, at)| {
            let mut vars = BTreeMap::from([("LAW_API_OC".to_owned(), key.clone())]);
            match place {
                0 => vars.insert(
                    "LAW_API_BASE_URL".into(),
                    format!("https://www.law.go.kr/DRF/lawSearch.do?OC={key}&{junk}"),
                ),
                1 => vars.insert(
                    "LAW_API_BASE_URL".into(),
                    format!("https://{key}:{junk}@www.law.go.kr/"),
                ),
                2 => vars.insert("LAW_API_BASE_URL".into(), format!("{junk}?OC={key}")),
                3 => vars.insert("REDIS_URL".into(), format!("redis://:{key}@127.0.0.1:6379")),
                4 => vars.insert(
                    "REDIS_URL".into(),
                    format!("redis://default:{key}@{junk},{junk}{key}"),
                ),
                5 => vars.insert(
                    "SLACK_WEBHOOK_URL".into(),
                    format!("https://hooks.slack.com/services/{key}{junk}"),
                ),
                6 => vars.insert("SLACK_WEBHOOK_URL".into(), format!("{junk}{key}")),
                // A key with whitespace or a control character in it is refused, not shown.
                _ => {
                    let i = at.index(key.len() + 1);
                    vars.insert("LAW_API_OC".into(), format!("{}{ws}{}", &key[..i], &key[i..]))
                }
            };
            let shown = match config_with(&vars) {
                Ok(cfg) => format!("{cfg:?}"),
                Err(e) => format!("{e} {e:?}"),
            };
            // With whitespace put in, each part of the key is searched for too.
            let i = at.index(key.len() + 1);
            let parts = if place == 7 {
                vec![&key[..i], &key[i..]]
            } else {
                vec![]
            };
            for needle in parts.into_iter().filter(|p| p.len() >= 6).chain([key.as_str()]) {
                prop_assert!(
                    !shown.contains(needle),
                    "place {place}: {needle:?} is shown: {shown}"
                );
            }
            Ok(())
        },
    );
}

// ---------------------------------------------------------------------------------------
// Inputs the properties found, kept as plain tests
// ---------------------------------------------------------------------------------------

/// Found by `config_numbers`: values past u32 were truncated, not refused, so
/// `LAW_API_MAX_ATTEMPTS=4294967299` ran with 3 attempts and `RETRY_MAX_ATTEMPTS=4294967296`
/// with 0 retries.
#[test]
fn config_numbers_past_u32_are_refused_not_truncated() {
    for (var, value) in [
        ("LAW_API_MAX_ATTEMPTS", "4294967299"),
        ("RETRY_MAX_ATTEMPTS", "4294967296"),
    ] {
        let vars = BTreeMap::from([
            ("LAW_API_OC".to_owned(), OC.to_owned()),
            (var.to_owned(), value.to_owned()),
        ]);
        let e = config_with(&vars).expect_err(var);
        assert_eq!(e.var, var, "{e}");
    }
}

/// Found by the `config_value` fuzz target: a request interval above 15 minutes (allowed up
/// to an hour) made the default handler wait (interval + tolerance) exceed its ceiling, and
/// the start-up failed on `LAW_API_HANDLER_MAX_WAIT_MS`, a variable nobody had set.
#[test]
fn a_long_interval_alone_is_accepted() {
    for interval in ["900000", "1006379", "3600000"] {
        let vars = BTreeMap::from([
            ("LAW_API_OC".to_owned(), OC.to_owned()),
            ("LAW_API_REQUEST_INTERVAL_MS".to_owned(), interval.to_owned()),
        ]);
        let cfg = config_with(&vars).unwrap_or_else(|e| panic!("interval {interval}: {e}"));
        assert!(cfg.handler_max_wait <= policy::MAX_WAIT_CEILING);
    }
}

/// Found by `search_bodies` and `detail_bodies`: the key was scrubbed from strings but not
/// from object keys, so a detail carrying it as a field name stored it in `other`.
#[test]
fn the_key_is_scrubbed_from_object_keys_too() {
    let body =
        json!({ "PrecService": { "판례정보일련번호": "1", format!("OC={OC}"): "x", "n": { OC: [OC] } } });
    let decoded = decode_body(body.to_string().as_bytes(), &oc(), "PrecService").expect("decoded");
    assert!(!decoded.to_string().contains(OC), "{decoded}");
    let doc = parse_detail(decoded).expect("parsed");
    assert_eq!(doc.other.get("OC=***"), Some(&json!("x")));
    assert!(!serde_json::to_string(&doc).expect("json").contains(OC));
}
