//! law.go.kr's request parameters and replies, typed, tolerant of the API's real quirks.
//!
//! The quirks handled here: every number may come as a string; a single search hit comes
//! as an object instead of an array; zero hits drop the `prec` key; errors come as HTTP 200
//! with `{"result","msg"}` (key or IP rejected) or `{"Law": ...}` (no such precedent); an
//! anti-bot HTML page comes as HTTP 200; `판례상세링크` embeds the caller's key. The same
//! replies in XML (`type=XML`) are read into the same shape first ([`super::xml`]).

use std::collections::BTreeMap;

use serde::{Deserialize, Deserializer, Serialize};
use serde_json::Value;

use super::error::LawError;
use super::refusals::KeyProblem;
use crate::policy::MAX_DISPLAY;
use crate::secret::Secret;

/// A search over precedents decided in a date window (or the whole list): the
/// `{"from","to",...}` message.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SearchRequest {
    /// First decision date, `YYYYMMDD`; empty only with `all`.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub from: String,
    /// Last decision date, `YYYYMMDD`, inclusive; empty only with `all`.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub to: String,
    /// The whole list, without a date window: the only search that lists precedents
    /// without a decision date.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub all: bool,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub query: Option<String>,
    /// 1-based page; 1 when absent.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub page: Option<u32>,
    /// Hits per page, 1..=100; 100 when absent.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub display: Option<u32>,
    /// The sync run this page belongs to, counted in its record.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub run: Option<crate::mirror::runs::RunId>,
    /// Fetch every hit again, held or not.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub refresh: bool,
    /// A probe of the daily schedule: one hit is asked for, only `totalCnt` is read.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub probe: Option<Probe>,
}

/// What a probe of the daily schedule decides.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Probe {
    /// A recent month: read in full whatever the count (revisions come soon after
    /// publication); probed for its count only.
    Recent,
    /// An older month: read only when law.go.kr lists more than the mirror holds.
    Month,
    /// The whole list, after every month probe: read in full when it lists more not held
    /// than the months did (precedents without a decision date, or older than the
    /// probed months).
    All,
}

/// Longest free-text query accepted; law.go.kr's own search box is far shorter.
const MAX_QUERY_CHARS: usize = 200;

impl SearchRequest {
    /// Checks every field and returns the query parameters for `lawSearch.do`
    /// (`OC`, `target` and `type` are added by the client).
    pub fn params(&self) -> Result<Vec<(&'static str, String)>, LawError> {
        let invalid = |m: String| Err(LawError::InvalidRequest(m));
        if self.all {
            if !self.from.is_empty() || !self.to.is_empty() {
                return invalid("all reads the whole list: give it without from and to".into());
            }
        } else {
            if self.from.is_empty() || self.to.is_empty() {
                return invalid(
                    "from and to are required (or \"all\": true for the whole list, undated precedents included)"
                        .into(),
                );
            }
            check_date("from", &self.from)?;
            check_date("to", &self.to)?;
            if self.from > self.to {
                return invalid(format!("from {} is after to {}", self.from, self.to));
            }
        }
        let page = self.page.unwrap_or(1);
        let display = if self.probe.is_some() {
            1
        } else {
            self.display.unwrap_or(MAX_DISPLAY)
        };
        if page == 0 {
            return invalid("page must be 1 or more".into());
        }
        if !(1..=MAX_DISPLAY).contains(&display) {
            return invalid(format!("display must be 1..={MAX_DISPLAY}, got {display}"));
        }
        let mut params = Vec::with_capacity(5);
        if !self.all {
            params.push(("prncYd", format!("{}~{}", self.from, self.to)));
        }
        params.extend([
            ("page", page.to_string()),
            ("display", display.to_string()),
            // Newest first, so the first pages of a window are the freshest decisions.
            ("sort", "ddes".to_owned()),
        ]);
        if let Some(q) = self.query.as_deref().filter(|q| !q.trim().is_empty()) {
            if q.chars().count() > MAX_QUERY_CHARS || q.chars().any(char::is_control) {
                return invalid(format!(
                    "query must be at most {MAX_QUERY_CHARS} printable characters"
                ));
            }
            params.push(("query", q.to_owned()));
        }
        Ok(params)
    }

    /// The window this request reads, as a run names its parts: `from~to` or `all`, with
    /// `~query` when there is one.
    pub fn window_name(&self) -> String {
        let window = if self.all {
            "all".to_owned()
        } else {
            format!("{}~{}", self.from, self.to)
        };
        match self.query.as_deref().filter(|q| !q.trim().is_empty()) {
            Some(q) => format!("{window}~{q}"),
            None => window,
        }
    }

    /// The request for the next page.
    pub fn next_page(&self) -> Self {
        Self {
            page: Some(self.page.unwrap_or(1).saturating_add(1)),
            ..self.clone()
        }
    }
}

/// Checks a precedent id (`판례일련번호`): 1-20 ASCII digits, the only form law.go.kr
/// issues, and the only one safe in a query string and a document key.
pub fn check_precedent_id(id: &str) -> Result<(), LawError> {
    if id.is_empty() || id.len() > 20 || !id.bytes().all(|b| b.is_ascii_digit()) {
        // Not echoed: a message may carry anything, a key included.
        return Err(LawError::InvalidRequest(format!(
            "precedent id must be 1-20 ASCII digits (got {} characters that are not)",
            id.chars().count()
        )));
    }
    Ok(())
}

/// Checks a `YYYYMMDD` calendar date from 1900 on. The error says why without echoing the
/// value, which may be anything a message carried.
pub fn check_date(field: &str, v: &str) -> Result<(), LawError> {
    let bad = |why: String| LawError::InvalidRequest(format!("{field} must be a date as YYYYMMDD: {why}"));
    let day = super::calendar::day_number(v).map_err(|e| bad(e.to_string()))?;
    if day < super::calendar::days_from_civil(1900, 1, 1) {
        return Err(bad("it is before 1900".into()));
    }
    Ok(())
}

/// One hit of a search. Field names are the API's own; `판례상세링크` is not kept.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct PrecedentSummary {
    #[serde(rename = "판례일련번호", deserialize_with = "text")]
    pub id: String,
    #[serde(
        rename = "사건명",
        default,
        deserialize_with = "opt_text",
        skip_serializing_if = "Option::is_none"
    )]
    pub case_name: Option<String>,
    #[serde(
        rename = "사건번호",
        default,
        deserialize_with = "opt_text",
        skip_serializing_if = "Option::is_none"
    )]
    pub case_number: Option<String>,
    /// As sent: `2026.01.29`.
    #[serde(
        rename = "선고일자",
        default,
        deserialize_with = "opt_text",
        skip_serializing_if = "Option::is_none"
    )]
    pub decided_on: Option<String>,
    #[serde(
        rename = "법원명",
        default,
        deserialize_with = "opt_text",
        skip_serializing_if = "Option::is_none"
    )]
    pub court_name: Option<String>,
    #[serde(
        rename = "법원종류코드",
        default,
        deserialize_with = "opt_text",
        skip_serializing_if = "Option::is_none"
    )]
    pub court_type_code: Option<String>,
    #[serde(
        rename = "사건종류명",
        default,
        deserialize_with = "opt_text",
        skip_serializing_if = "Option::is_none"
    )]
    pub case_type: Option<String>,
    #[serde(
        rename = "판결유형",
        default,
        deserialize_with = "opt_text",
        skip_serializing_if = "Option::is_none"
    )]
    pub judgment_type: Option<String>,
    #[serde(
        rename = "선고",
        default,
        deserialize_with = "opt_text",
        skip_serializing_if = "Option::is_none"
    )]
    pub pronouncement: Option<String>,
    #[serde(
        rename = "데이터출처명",
        default,
        deserialize_with = "opt_text",
        skip_serializing_if = "Option::is_none"
    )]
    pub data_source: Option<String>,
}

impl PrecedentSummary {
    /// Its decision date as `YYYYMMDD`, however it was listed; `None` when it has none.
    pub fn decided_yyyymmdd(&self) -> Option<String> {
        self.decided_on
            .as_deref()
            .and_then(super::calendar::normalize_date)
    }
}

/// One page of search results.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct SearchPage {
    /// Hits in the whole window.
    pub total: u64,
    /// This page's number.
    pub page: u32,
    pub items: Vec<PrecedentSummary>,
    /// Hits without a `판례일련번호`: they cannot be fetched, so they are counted, not kept.
    pub skipped_items: u32,
}

impl SearchPage {
    /// True when pages after this one hold more hits, given the page size used.
    pub fn has_more(&self, display: u32) -> bool {
        u64::from(self.page) * u64::from(display.max(1)) < self.total
    }
}

/// A precedent's full record from `lawService.do`. Body fields keep their HTML (`<br/>`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct PrecedentDetail {
    #[serde(rename = "판례정보일련번호", deserialize_with = "text")]
    pub id: String,
    #[serde(rename = "사건명", default, deserialize_with = "opt_text")]
    pub case_name: Option<String>,
    #[serde(rename = "사건번호", default, deserialize_with = "opt_text")]
    pub case_number: Option<String>,
    /// As sent: `20260312`.
    #[serde(rename = "선고일자", default, deserialize_with = "opt_text")]
    pub decided_on: Option<String>,
    #[serde(rename = "법원명", default, deserialize_with = "opt_text")]
    pub court_name: Option<String>,
    #[serde(rename = "판시사항", default, deserialize_with = "opt_text")]
    pub holdings: Option<String>,
    #[serde(rename = "판결요지", default, deserialize_with = "opt_text")]
    pub summary: Option<String>,
    #[serde(rename = "참조조문", default, deserialize_with = "opt_text")]
    pub referenced_statutes: Option<String>,
    #[serde(rename = "참조판례", default, deserialize_with = "opt_text")]
    pub referenced_precedents: Option<String>,
    #[serde(rename = "판례내용", default, deserialize_with = "opt_text")]
    pub full_text: Option<String>,
    /// Every other field, kept so that nothing the API sends is lost (links removed,
    /// the key scrubbed).
    #[serde(flatten)]
    pub other: BTreeMap<String, Value>,
}

/// A string field that may arrive as a JSON string or number.
fn text<'de, D: Deserializer<'de>>(d: D) -> Result<String, D::Error> {
    match Value::deserialize(d)? {
        Value::String(s) if !s.trim().is_empty() => Ok(s.trim().to_owned()),
        Value::Number(n) => Ok(n.to_string()),
        _ => Err(serde::de::Error::custom("expected a non-empty string or number")),
    }
}

fn opt_text<'de, D: Deserializer<'de>>(d: D) -> Result<Option<String>, D::Error> {
    Ok(match Value::deserialize(d)? {
        Value::String(s) => Some(s),
        Value::Number(n) => Some(n.to_string()),
        Value::Bool(b) => Some(b.to_string()),
        _ => None,
    })
}

/// A number that may arrive as a string (`"231"`) or a number.
fn count(v: Option<&Value>, what: &str) -> Result<u64, LawError> {
    match v {
        None | Some(Value::Null) => Ok(0),
        Some(Value::Number(n)) => n
            .as_u64()
            .ok_or_else(|| malformed(format!("{what} is not a whole number"))),
        Some(Value::String(s)) if s.trim().is_empty() => Ok(0),
        Some(Value::String(s)) => s
            .trim()
            .parse()
            .map_err(|_| malformed(format!("{what} is not a whole number"))),
        Some(_) => Err(malformed(format!("{what} is not a number"))),
    }
}

fn malformed(what: impl Into<String>) -> LawError {
    LawError::Malformed { what: what.into() }
}

/// Turns a 200 body, JSON or XML (see [`super::xml`]), into the JSON shape of the reply,
/// recognising law.go.kr's refusals and error bodies first. The returned value has every
/// `판례상세링크` removed and every occurrence of `oc` replaced by `***`.
///
/// A body in angle brackets whose root is not `root` nor one of law.go.kr's error roots is
/// a page: a refusal of the key when [`super::refusals::PAGES`] knows it, else
/// [`LawError::HtmlPage`]. `{"result","msg"}` (`<Response>` in XML) is the verification
/// failure, or the missing key; `{"Law":"…"}` (`<Law>…</Law>`) a missing precedent.
pub fn decode_body(body: &[u8], oc: &Secret, root: &str) -> Result<Value, LawError> {
    let text = std::str::from_utf8(body).map_err(|_| malformed("body is not UTF-8"))?;
    let text = text.trim_start_matches('\u{feff}').trim();
    if text.is_empty() {
        return Err(LawError::EmptyBody);
    }
    let mut value: Value = if looks_like_a_page(text) {
        return Err(page(text));
    } else if text.starts_with('<') {
        // XML: a reply or one of law.go.kr's error bodies. Whatever else a document in
        // angle brackets is, no refusal is read into its text.
        match super::xml::to_json(text) {
            Ok((name, v)) if name == root || ERROR_ROOTS.contains(&name.as_str()) => v,
            Ok(_) => return Err(malformed("an XML document of another root")),
            Err(e) => return Err(malformed(format!("XML: {e}"))),
        }
    } else if text.starts_with('{') || text.starts_with('[') {
        // serde_json's messages name a position and a category, never the input.
        serde_json::from_str(text).map_err(|e| {
            malformed(format!(
                "{} at line {} column {}",
                category(&e),
                e.line(),
                e.column()
            ))
        })?
    } else {
        return Err(malformed("neither JSON nor XML"));
    };
    let Value::Object(map) = &value else {
        return Err(malformed("top level is not an object"));
    };
    if !map.contains_key(root) {
        // The verification failure: `{"result","msg"}` in JSON, `<Response>` in XML.
        let error_body = match map.get("Response") {
            Some(Value::Object(inner)) => inner,
            _ => map,
        };
        if let Some(result) = error_body.get("result") {
            return Err(match result.as_str().unwrap_or_default() {
                r if r.contains(VERIFY_FAILED_MARK) => LawError::KeyRefused(KeyProblem::VerifyFailed),
                r if r.contains(KEY_MISSING_MARK) => LawError::KeyRefused(KeyProblem::KeyMissing),
                // Not echoed: an error body law.go.kr is not known to send.
                _ => malformed("an error body of no known kind (result)"),
            });
        }
        if error_body.contains_key("msg") {
            // A message without a result: no known refusal; kept for `lawsync probe`.
            return Err(malformed("an error body of no known kind (msg)"));
        }
        if matches!(map.get("Law"), Some(Value::String(_))) {
            return Err(LawError::NotFound);
        }
        return Err(malformed(format!("no {root} object")));
    }
    sanitize(&mut value, oc);
    Ok(value)
}

/// The roots of law.go.kr's error bodies in XML: the verification failure and the missing
/// precedent.
const ERROR_ROOTS: [&str; 2] = ["Response", "Law"];
/// The verification failure's `result` (the key, the IP or the Referer refused).
pub const VERIFY_FAILED_MARK: &str = "사용자 정보 검증에 실패";
/// The `result` when no key reached law.go.kr.
pub const KEY_MISSING_MARK: &str = "필수입력요소 검증에 실패";

/// How much of a page its fingerprint is looked for in: law.go.kr's refusal pages say what
/// they are in their first kilobytes (the anti-bot script in its first 130 bytes, the
/// page of an API not applied for in under 2 KB), and a reply's own text never counts.
const PAGE_HEAD: usize = 4096;

/// Whether a body is a page rather than a reply, by how it begins: an HTML document or a
/// script, or a bare script with `location.assign` in its head. A reply begins otherwise,
/// whatever its text holds.
fn looks_like_a_page(text: &str) -> bool {
    let start: String = text.chars().take(16).collect::<String>().to_ascii_lowercase();
    ["<!doctype html", "<html", "<head", "<body", "<script"]
        .iter()
        .any(|p| start.starts_with(p))
        || (!text.starts_with(['<', '{', '[']) && head_of(text).contains("location.assign"))
}

/// The first [`PAGE_HEAD`] bytes of `text`, cut at a character boundary.
fn head_of(text: &str) -> &str {
    let mut end = text.len().min(PAGE_HEAD);
    while !text.is_char_boundary(end) {
        end -= 1;
    }
    &text[..end]
}

/// A page instead of a reply: a refusal [`super::refusals::PAGES`] knows by its head, or
/// one of no known shape.
fn page(text: &str) -> LawError {
    match super::refusals::recognise(head_of(text)) {
        Some(f) => LawError::KeyRefused(f.problem),
        None => LawError::HtmlPage,
    }
}

/// A serde_json error's category in words (never the input).
pub(crate) fn category(e: &serde_json::Error) -> &'static str {
    match e.classify() {
        serde_json::error::Category::Io => "read error",
        serde_json::error::Category::Syntax => "syntax error",
        serde_json::error::Category::Data => "unexpected data",
        serde_json::error::Category::Eof => "truncated",
    }
}

/// The key that carries the caller's OC in every search hit.
const LINK_FIELD: &str = "판례상세링크";

fn sanitize(v: &mut Value, oc: &Secret) {
    match v {
        Value::Object(map) => {
            map.remove(LINK_FIELD);
            // Keys too: an object keyed by something holding the key would keep it.
            if map.keys().any(|k| oc.occurs_in(k)) {
                *map = std::mem::take(map)
                    .into_iter()
                    .map(|(k, v)| (oc.scrub(&k), v))
                    .collect();
            }
            map.values_mut().for_each(|x| sanitize(x, oc));
        }
        Value::Array(items) => items.iter_mut().for_each(|x| sanitize(x, oc)),
        Value::String(s) if oc.occurs_in(s) => *s = oc.scrub(s),
        _ => {}
    }
}

/// Reads a decoded `lawSearch.do` reply.
pub fn parse_search(v: Value) -> Result<SearchPage, LawError> {
    let Some(Value::Object(mut root)) = v.get("PrecSearch").cloned() else {
        return Err(malformed("PrecSearch is not an object"));
    };
    let total = count(root.get("totalCnt"), "totalCnt")?;
    let page =
        u32::try_from(count(root.get("page"), "page")?.max(1)).map_err(|_| malformed("page out of range"))?;
    let raw = match root.remove("prec") {
        None | Some(Value::Null) => Vec::new(),
        Some(Value::Array(items)) => items,
        Some(one @ Value::Object(_)) => vec![one],
        Some(_) => return Err(malformed("prec is neither an object nor an array")),
    };
    let mut items = Vec::with_capacity(raw.len());
    let mut skipped_items = 0;
    for item in raw {
        match serde_json::from_value::<PrecedentSummary>(item) {
            Ok(p) => items.push(p),
            Err(_) => skipped_items += 1,
        }
    }
    Ok(SearchPage {
        total,
        page,
        items,
        skipped_items,
    })
}

/// Reads a decoded `lawService.do` reply.
pub fn parse_detail(v: Value) -> Result<PrecedentDetail, LawError> {
    let Some(inner) = v.get("PrecService").cloned() else {
        return Err(malformed("no PrecService object"));
    };
    if !inner.is_object() {
        return Err(malformed("PrecService is not an object"));
    }
    serde_json::from_value(inner).map_err(|e| malformed(format!("PrecService: {}", category(&e))))
}

#[cfg(test)]
mod tests;
