use serde_json::json;

use super::*;

fn oc() -> Secret {
    Secret::new("MYKEY123")
}

fn decode(v: serde_json::Value, root: &str) -> Result<Value, LawError> {
    decode_body(v.to_string().as_bytes(), &oc(), root)
}

#[test]
fn numbers_as_strings_one_hit_as_object_and_no_prec() {
    let one = decode(
        json!({"PrecSearch": {"totalCnt": "1", "page": "1", "prec": {"판례일련번호": "5", "사건명": "a"}}}),
        "PrecSearch",
    );
    let page = parse_search(one.expect("decoded")).expect("parsed");
    assert_eq!((page.total, page.page, page.items.len()), (1, 1, 1));
    assert_eq!(page.items[0].case_name.as_deref(), Some("a"));

    let none = parse_search(
        decode(
            json!({"PrecSearch": {"totalCnt": "0", "page": "1"}}),
            "PrecSearch",
        )
        .expect("decoded"),
    );
    assert_eq!(none.expect("parsed").items, vec![]);

    let numeric = json!({"PrecSearch": {"totalCnt": 250, "page": 3, "prec": [{"판례일련번호": 77}]}});
    let page = parse_search(decode(numeric, "PrecSearch").expect("decoded")).expect("parsed");
    assert_eq!((page.total, page.page, page.items[0].id.as_str()), (250, 3, "77"));
    assert!(!page.has_more(100), "page 3 of 100 holds hits 201..300 of 250");
    assert!(
        SearchPage {
            page: 2,
            ..page.clone()
        }
        .has_more(100)
    );
}

#[test]
fn hits_without_an_id_are_counted_not_kept() {
    let v = json!({"PrecSearch": {"totalCnt": "3", "page": "1", "prec": [{"판례일련번호": "1"}, {"사건명": "x"}, {"판례일련번호": ""}]}});
    let page = parse_search(decode(v, "PrecSearch").expect("decoded")).expect("parsed");
    assert_eq!((page.items.len(), page.skipped_items), (1, 2));
}

#[test]
fn bad_counts_are_malformed() {
    for total in [json!("many"), json!(-1), json!([1]), json!(1.5)] {
        let v = json!({"PrecSearch": {"totalCnt": total, "page": "1"}});
        let err = parse_search(decode(v, "PrecSearch").expect("decoded")).expect_err("bad count");
        assert!(matches!(err, LawError::Malformed { .. }), "{err:?}");
    }
    let v = json!({"PrecSearch": {"totalCnt": "1", "prec": "text"}});
    assert!(parse_search(decode(v, "PrecSearch").expect("decoded")).is_err());
}

#[test]
fn the_link_and_every_occurrence_of_the_key_are_removed() {
    let v = json!({"PrecService": {
        "판례정보일련번호": "9",
        "판례상세링크": "/DRF/lawService.do?OC=MYKEY123",
        "판례내용": "text MYKEY123 text",
        "nested": [{"판례상세링크": "x", "k": "MYKEY123"}]
    }});
    let decoded = decode(v, "PrecService").expect("decoded");
    let text = decoded.to_string();
    assert!(
        !text.contains("MYKEY123") && !text.contains("판례상세링크"),
        "{text}"
    );
    let doc = parse_detail(decoded).expect("parsed");
    assert_eq!(doc.full_text.as_deref(), Some("text *** text"));
}

/// A body and the check its error must pass.
type Case = (&'static [u8], fn(&LawError) -> bool);

#[test]
fn error_shapes_on_200_are_recognised() {
    use crate::law::KeyProblem;
    let cases: [Case; 14] = [
        (b"", |e| matches!(e, LawError::EmptyBody)),
        (b"\xef\xbb\xbf  ", |e| matches!(e, LawError::EmptyBody)),
        (b"<!DOCTYPE html><html>", |e| matches!(e, LawError::HtmlPage)),
        (b"<script>location.assign('/')</script>", |e| {
            matches!(e, LawError::KeyRefused(KeyProblem::AntiBot))
        }),
        ("<!DOCTYPE html><html><body><h2>미신청된 목록/본문에 대한 접근입니다.</h2></body></html>".as_bytes(), |e| {
            matches!(e, LawError::KeyRefused(KeyProblem::NotApplied { format: None }))
        }),
        (r#"{"result":"사용자 정보 검증에 실패하였습니다.","msg":"MYKEY123"}"#.as_bytes(), |e| {
            matches!(e, LawError::KeyRefused(KeyProblem::VerifyFailed))
        }),
        // The same in XML, indented as law.go.kr sends it.
        ("<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n    <Response>\n        <result>사용자 정보 검증에 실패하였습니다.</result>\n        <msg>MYKEY123</msg>\n    </Response>".as_bytes(), |e| {
            matches!(e, LawError::KeyRefused(KeyProblem::VerifyFailed))
        }),
        ("<Response><result>필수입력요소 검증에 실패하였습니다.</result><msg>x</msg></Response>".as_bytes(), |e| {
            matches!(e, LawError::KeyRefused(KeyProblem::KeyMissing))
        }),
        // An error body law.go.kr is not known to send is not taken for a refusal.
        (br#"{"result":"fail","msg":"MYKEY123"}"#, |e| matches!(e, LawError::Malformed { .. })),
        ("<?xml version=\"1.0\" encoding=\"utf-8\"?><Law>일치하는 판례가 없습니다.  판례명을 확인하여 주십시오.</Law>".as_bytes(), |e| {
            matches!(e, LawError::NotFound)
        }),
        (br#"{"Law":"none"}"#, |e| matches!(e, LawError::NotFound)),
        (
            br#"{"PrecSearch":"#,
            |e| matches!(e, LawError::Malformed { what } if what.starts_with("truncated")),
        ),
        (b"null", |e| matches!(e, LawError::Malformed { .. })),
        (b"\xff\xfe", |e| matches!(e, LawError::Malformed { .. })),
    ];
    for (body, expected) in cases {
        let err = decode_body(body, &oc(), "PrecSearch").expect_err("error");
        assert!(expected(&err), "{:?}: {err:?}", String::from_utf8_lossy(body));
        assert!(!err.to_string().contains("MYKEY123"));
    }
}

#[test]
fn a_detail_without_an_id_is_malformed() {
    for inner in [
        json!({"사건명": "x"}),
        json!({"판례정보일련번호": null}),
        json!("text"),
    ] {
        let v = json!({"PrecService": inner});
        let err = parse_detail(decode(v, "PrecService").expect("decoded")).expect_err("no id");
        assert!(matches!(err, LawError::Malformed { .. }), "{err:?}");
    }
}

#[test]
fn dates_are_real_calendar_days() {
    for ok in ["20260101", "20240229", "20001231", "19900615"] {
        assert!(check_date("from", ok).is_ok(), "{ok}");
    }
    for bad in [
        "2026011",
        "202601011",
        "2026-01-01",
        "20230229",
        "20261301",
        "20260100",
        "20260431",
        "18991231",
        "２０２６０１０１",
    ] {
        assert!(check_date("from", bad).is_err(), "{bad}");
    }
}

#[test]
fn search_messages_are_strict() {
    let ok: SearchRequest =
        serde_json::from_str(r#"{"from":"20260101","to":"20260102","query":"x","page":2,"display":50}"#)
            .expect("valid");
    assert_eq!(ok.next_page().page, Some(3));
    assert!(
        serde_json::from_str::<SearchRequest>(r#"{"from":"20260101","to":"20260102","pgae":2}"#).is_err(),
        "typo field"
    );
    let no_to: SearchRequest = serde_json::from_str(r#"{"from":"20260101"}"#).expect("parses");
    let e = no_to.params().expect_err("missing to");
    assert!(e.to_string().contains("from and to are required"), "{e}");
    let all: SearchRequest = serde_json::from_str(r#"{"all":true,"run":"daily-1"}"#).expect("whole list");
    assert!(!all.params().expect("valid").iter().any(|(k, _)| *k == "prncYd"));
    assert_eq!(all.window_name(), "all");
    let both: SearchRequest =
        serde_json::from_str(r#"{"all":true,"from":"20260101","to":"20260102"}"#).expect("parses");
    assert!(
        both.params()
            .expect_err("all with a window")
            .to_string()
            .contains("without from and to")
    );
    for bad in [
        r#"{"all":true,"run":"a/b"}"#,
        r#"{"all":true,"run":""}"#,
        r#"{"all":true,"refresh":"yes"}"#,
        r#"{"all":true,"probe":"weekly"}"#,
    ] {
        assert!(serde_json::from_str::<SearchRequest>(bad).is_err(), "{bad}");
    }
    let probe: SearchRequest =
        serde_json::from_str(r#"{"from":"20260101","to":"20260131","probe":"month","run":"daily-1"}"#)
            .expect("probe");
    assert!(
        probe
            .params()
            .expect("valid")
            .contains(&("display", "1".to_owned())),
        "a probe asks for one hit"
    );
    assert!(
        serde_json::from_str::<SearchRequest>(r#"{"from":"20260101","to":"20260102","page":-1}"#).is_err()
    );
}

/// A reply's own text, whatever it says, is never read as a refusal of the key: the
/// refusal pages are known by how a page begins and by its head, not by a mark anywhere.
#[test]
fn a_replys_text_is_never_taken_for_a_refusal() {
    let marks = "location.assign 미신청된 목록/본문에 대한 접근입니다 사용자 정보 검증에 실패하였습니다";
    // Well-formed, in both forms: read as the reply it is.
    let xml = format!(
        "<?xml version=\"1.0\" encoding=\"UTF-8\"?><PrecService><판례정보일련번호>7</판례정보일련번호><판례내용><![CDATA[{marks}]]></판례내용></PrecService>"
    );
    let v = decode_body(xml.as_bytes(), &oc(), "PrecService").expect("a reply");
    assert_eq!(v["PrecService"]["판례내용"], marks);
    let json =
        serde_json::json!({ "PrecService": { "판례정보일련번호": "7", "판례내용": marks } }).to_string();
    decode_body(json.as_bytes(), &oc(), "PrecService").expect("a reply");
    // Broken (an unclosed <br>, a stray <, cut short): malformed, kept, never a refusal.
    for broken in [
        format!("<?xml version=\"1.0\"?><PrecService><판례내용>{marks}<br></판례내용></PrecService>"),
        format!("<PrecService><판례내용>{marks} 1 < 2</판례내용></PrecService>"),
        format!("<PrecService><판례내용>{marks}"),
        format!("<Other>{marks}</Other>"),
    ] {
        let e = decode_body(broken.as_bytes(), &oc(), "PrecService").expect_err("broken");
        assert!(matches!(e, LawError::Malformed { .. }), "{broken}: {e:?}");
    }
    // A page, by how it begins: its head is what is recognised.
    let late = format!("<html><body>{}{marks}</body></html>", "x".repeat(5000));
    assert_eq!(
        decode_body(late.as_bytes(), &oc(), "PrecService"),
        Err(LawError::HtmlPage)
    );
    // A bare message is no refusal of the key either.
    let msg = br#"{"msg":"MYKEY123 wait"}"#;
    assert!(matches!(
        decode_body(msg, &oc(), "PrecSearch"),
        Err(LawError::Malformed { .. })
    ));
}
