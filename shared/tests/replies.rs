//! law.go.kr's replies as public clients captured them (`fixtures/replies/`, written from
//! their shapes; sources in `docs/upstream-replies.md`), read through the client's
//! decoder: each into the type it stands for, each JSON reply and its XML twin into the
//! same value, and nothing of the key kept.

use lawsync::Secret;
use lawsync::law::{KeyProblem, LawError, decode_body, parse_detail, parse_search};
use serde_json::Value;

/// The key the fixtures' detail links carry.
const OC: &str = "FIXTURE-OC";

fn fixture(name: &str) -> Vec<u8> {
    let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fixtures/replies")
        .join(name);
    std::fs::read(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

fn decode(name: &str, root: &str) -> Result<Value, LawError> {
    decode_body(&fixture(name), &Secret::new(OC), root)
}

#[test]
fn each_search_and_detail_reads_the_same_from_json_and_xml() {
    for (json, xml, root) in [
        ("search.json", "search.xml", "PrecSearch"),
        ("detail.json", "detail.xml", "PrecService"),
    ] {
        let a = decode(json, root).expect(json);
        // The `id` attribute numbering an XML page's hits has no JSON twin and is not read.
        let b = decode(xml, root).expect(xml);
        assert_eq!(a, b, "{json} and {xml} differ");
        assert!(!b.to_string().contains(OC), "{xml}: the key kept");
        assert!(
            !b.to_string().contains("판례상세링크"),
            "{xml}: the detail link kept"
        );
    }
    let page = parse_search(decode("search.xml", "PrecSearch").expect("search")).expect("page");
    assert_eq!((page.total, page.items.len()), (3, 3));
    assert_eq!(
        page.items[0].court_name.as_deref(),
        Some(""),
        "a 국세 row lists no court"
    );
    assert_eq!(
        page.items[2].case_name.as_deref(),
        Some("교육세부과처분취소[교육세 과세표준에 관한 사건]"),
        "a CDATA text ending in ]"
    );
    assert_eq!(page.items[1].decided_yyyymmdd().as_deref(), Some("20260312"));
    let detail = parse_detail(decode("detail.xml", "PrecService").expect("detail")).expect("parsed");
    assert_eq!(detail.id, "617149");
    assert_eq!(detail.referenced_precedents.as_deref(), Some(""));
    assert!(
        detail
            .summary
            .as_deref()
            .is_some_and(|s| s.contains("<개정 2010.7.6>") && s.starts_with("<br/>"))
    );
}

#[test]
fn one_hit_and_no_hits_read_as_the_json_forms_do() {
    let one = parse_search(decode("search-one.xml", "PrecSearch").expect("one")).expect("page");
    assert_eq!((one.total, one.items.len()), (1, 1));
    let raw = decode("search-one.xml", "PrecSearch").expect("one");
    assert!(
        raw["PrecSearch"]["prec"].is_object(),
        "one hit is an object, as in JSON"
    );
    let none = decode("search-none-middot.xml", "PrecSearch").expect("none, with &middot;");
    assert_eq!(none["PrecSearch"]["키워드"], "식품등의 표시·광고에 관한 법률");
    let none = parse_search(none).expect("page");
    assert_eq!((none.total, none.items.len()), (0, 0));
}

#[test]
fn refusals_and_missing_precedents_read_alike_in_both_forms() {
    for name in ["missing.xml", "missing.json"] {
        assert_eq!(decode(name, "PrecService"), Err(LawError::NotFound), "{name}");
    }
    for name in ["verify-failed.xml", "verify-failed.json"] {
        assert_eq!(
            decode(name, "PrecSearch"),
            Err(LawError::KeyRefused(KeyProblem::VerifyFailed)),
            "{name}"
        );
    }
    assert_eq!(
        decode("key-missing.xml", "PrecSearch"),
        Err(LawError::KeyRefused(KeyProblem::KeyMissing))
    );
    assert_eq!(
        decode("not-applied.html", "PrecSearch"),
        Err(LawError::KeyRefused(KeyProblem::NotApplied { format: None }))
    );
    assert_eq!(
        decode("anti-bot.html", "PrecService"),
        Err(LawError::KeyRefused(KeyProblem::AntiBot))
    );
}
