//! The look-alike's replies in XML (`type=XML`), written as law.go.kr writes them.
//!
//! The shapes follow replies public clients captured from the real service and keep as
//! fixtures (see `docs/upstream-replies.md`): one line, no indentation, the declaration in
//! upper case (lower case before `<Law>`); the search's header fields, then `<prec id="n">`
//! hits numbered within the page; 사건명 in CDATA, empty fields as `<x></x>`, `&amp;` in
//! 판례상세링크; the detail's six text fields in CDATA with their literal `<br/>`, an empty
//! one as `<![CDATA[]]>`; the verification failure indented. A query's `·` is echoed in
//! 키워드 as `&middot;`, an HTML entity XML does not define, as the real search does.

use serde_json::Value;

/// The search's header fields, in the order law.go.kr writes them.
const SEARCH_HEADER: [&str; 5] = ["target", "키워드", "section", "totalCnt", "page"];
/// A hit's fields, in order.
const HIT_FIELDS: [&str; 12] = [
    "판례일련번호",
    "사건명",
    "사건번호",
    "선고일자",
    "법원명",
    "법원종류코드",
    "사건종류명",
    "사건종류코드",
    "판결유형",
    "선고",
    "데이터출처명",
    "판례상세링크",
];
/// The detail's fields, in order.
const DETAIL_FIELDS: [&str; 15] = [
    "판례정보일련번호",
    "사건명",
    "사건번호",
    "선고일자",
    "선고",
    "법원명",
    "법원종류코드",
    "사건종류명",
    "사건종류코드",
    "판결유형",
    "판시사항",
    "판결요지",
    "참조조문",
    "참조판례",
    "판례내용",
];
/// The detail's fields law.go.kr writes in CDATA.
const DETAIL_CDATA: [&str; 6] = [
    "사건명",
    "판시사항",
    "판결요지",
    "참조조문",
    "참조판례",
    "판례내용",
];

const DECLARATION: &str = "<?xml version=\"1.0\" encoding=\"UTF-8\"?>";

/// The XML of a JSON reply the look-alike built: `{"PrecSearch":…}`, `{"PrecService":…}`,
/// `{"Law":"…"}` or the verification failure `{"result","msg"}`.
pub fn render(reply: &Value) -> String {
    if let Some(search) = reply.get("PrecSearch") {
        return search_xml(search);
    }
    if let Some(detail) = reply.get("PrecService") {
        return detail_xml(detail);
    }
    if let Some(Value::String(law)) = reply.get("Law") {
        return format!(
            "<?xml version=\"1.0\" encoding=\"utf-8\"?><Law>{}</Law>",
            escape(law)
        );
    }
    let field = |k: &str| {
        reply
            .get(k)
            .and_then(Value::as_str)
            .unwrap_or_default()
            .to_owned()
    };
    format!(
        "{DECLARATION}\n    <Response>\n        <result>{}</result>\n        <msg>{}</msg>\n    </Response>",
        escape(&field("result")),
        escape(&field("msg"))
    )
}

fn search_xml(search: &Value) -> String {
    let mut out = format!("{DECLARATION}<PrecSearch>");
    for name in SEARCH_HEADER {
        let text = text_of(search.get(name));
        let text = if name == "키워드" {
            escape(&text).replace('\u{00B7}', "&middot;")
        } else {
            escape(&text)
        };
        out.push_str(&format!("<{name}>{text}</{name}>"));
    }
    let hits: Vec<&Value> = match search.get("prec") {
        Some(Value::Array(items)) => items.iter().collect(),
        Some(one @ Value::Object(_)) => vec![one],
        _ => Vec::new(),
    };
    for (n, hit) in hits.iter().enumerate() {
        out.push_str(&format!("<prec id=\"{}\">", n + 1));
        for name in HIT_FIELDS {
            let text = text_of(hit.get(name));
            if name == "사건명" {
                out.push_str(&format!("<{name}>{}</{name}>", cdata(&text)));
            } else {
                out.push_str(&format!("<{name}>{}</{name}>", escape(&text)));
            }
        }
        out.push_str("</prec>");
    }
    out.push_str("</PrecSearch>");
    out
}

fn detail_xml(detail: &Value) -> String {
    let mut out = format!("{DECLARATION}<PrecService>");
    for name in DETAIL_FIELDS {
        let Some(v) = detail.get(name) else { continue };
        let text = text_of(Some(v));
        if DETAIL_CDATA.contains(&name) {
            out.push_str(&format!("<{name}>{}</{name}>", cdata(&text)));
        } else {
            out.push_str(&format!("<{name}>{}</{name}>", escape(&text)));
        }
    }
    out.push_str("</PrecService>");
    out
}

fn text_of(v: Option<&Value>) -> String {
    match v {
        Some(Value::String(s)) => s.clone(),
        Some(Value::Null) | None => String::new(),
        Some(other) => other.to_string(),
    }
}

fn escape(text: &str) -> String {
    text.replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
}

/// A CDATA section; a `]]>` inside is split across two sections, as XML requires.
fn cdata(text: &str) -> String {
    format!("<![CDATA[{}]]>", text.replace("]]>", "]]]]><![CDATA[>"))
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn a_search_reads_back_as_its_json() {
        let reply = json!({"PrecSearch": {
            "target": "prec", "키워드": "식품·광고", "section": "evtNm", "totalCnt": "2", "page": "1",
            "prec": [
                {"판례일련번호": "1", "사건명": "가]", "판례상세링크": "/DRF/lawService.do?OC=k&target=prec&ID=1"},
                {"판례일련번호": "2", "사건명": "나"},
            ]
        }});
        let xml = render(&reply);
        assert!(xml.contains("<키워드>식품&middot;광고</키워드>"), "{xml}");
        assert!(xml.contains("<prec id=\"2\">"), "{xml}");
        assert!(xml.contains("<사건명><![CDATA[가]]]></사건명>"), "{xml}");
        assert!(xml.contains("OC=k&amp;target=prec"), "{xml}");
        let (_, back) = lawsync::law::xml::to_json(&xml).expect("reads");
        assert_eq!(back["PrecSearch"]["prec"][0]["사건명"], "가]");
        assert_eq!(back["PrecSearch"]["키워드"], "식품·광고");
        assert_eq!(back["PrecSearch"]["prec"][1]["법원명"], "");
    }
}
