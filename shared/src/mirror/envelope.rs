//! The stored precedent as a contract: [`Envelope`] under `prec/{id}.json`, and
//! [`MissingMarker`] under `missing/{id}.json` for an id law.go.kr lists but has no detail
//! for. Both carry [`SCHEMA_VERSION`]; `docs/mirror.schema.json` is their JSON Schema and
//! `docs/mirror.md` the consumer's guide. A change to either shape is a new version.

use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};
use sha2::{Digest, Sha256};

use crate::law::PrecedentSummary;

/// The version of the stored shapes. Downstream systems read it first.
pub const SCHEMA_VERSION: u32 = 1;

/// `prec/{id}.json`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Envelope {
    pub schema_version: u32,
    /// 판례일련번호.
    pub id: String,
    /// When this detail was fetched, RFC 3339 UTC.
    pub fetched_at: String,
    /// The first time a search returned this id, RFC 3339 UTC; `None` when it was fetched
    /// by a bare `{"id"}` message and never seen in a search.
    pub first_seen_at: Option<String>,
    /// The sync run that fetched it, if any.
    pub run_id: Option<String>,
    /// The search hit's metadata as law.go.kr listed it (the detail link removed).
    pub listing: Option<PrecedentSummary>,
    /// [`listing_hash`] of `listing`: a hit whose hash differs is a revision.
    pub listing_hash: Option<String>,
    /// [`content_hash`] of `detail`.
    pub content_hash: String,
    /// `PrecService` as law.go.kr sent it, links removed and the key scrubbed.
    pub detail: Map<String, Value>,
}

/// `missing/{id}.json`: law.go.kr listed the id, and its detail said "no such precedent".
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct MissingMarker {
    pub schema_version: u32,
    pub id: String,
    /// Always `not_found`.
    pub status: String,
    /// When law.go.kr last said so, RFC 3339 UTC; checked again after
    /// [`crate::policy::MISSING_RECHECK`].
    pub checked_at: String,
    /// The same instant, epoch milliseconds (the field markers before schema 1 had).
    pub checked_at_ms: u64,
    pub first_seen_at: Option<String>,
    pub run_id: Option<String>,
    pub listing: Option<PrecedentSummary>,
    pub listing_hash: Option<String>,
}

/// `sha256:<hex>` of `bytes`.
pub fn sha256_tag(bytes: &[u8]) -> String {
    let digest = Sha256::digest(bytes);
    let hex: String = digest.iter().map(|b| format!("{b:02x}")).collect();
    format!("sha256:{hex}")
}

/// The hash of a search hit's metadata: its fields as the model names them, in a fixed
/// order, so the same listing always hashes the same and any change to a listed field is
/// a revision. The row number and the link are not part of it.
pub fn listing_hash(listing: &PrecedentSummary) -> String {
    sha256_tag(serde_json::to_string(listing).unwrap_or_default().as_bytes())
}

/// The hash of a detail: its JSON with object keys sorted (serde_json's map is ordered by
/// key), so the same content hashes the same however law.go.kr ordered it.
pub fn content_hash(detail: &Map<String, Value>) -> String {
    sha256_tag(serde_json::to_string(detail).unwrap_or_default().as_bytes())
}

/// What a stored object tells the held check, read from its JSON, with its decision
/// date (`YYYYMMDD`) when its listing or detail gives one. `None` for a body that is
/// neither shape; a document the release before schema 1 wrote has no listing hash, so its
/// next listing is treated as a revision and upgrades it.
pub fn held_from_body(body: &[u8]) -> Option<(super::held::Held, Option<String>)> {
    let v: Value = serde_json::from_slice(body).ok()?;
    let first_seen_ms = v
        .get("firstSeenAt")
        .and_then(Value::as_str)
        .and_then(parse_rfc3339_millis);
    let text = |ptr: &str| v.pointer(ptr).and_then(Value::as_str).map(str::to_owned);
    let decided = text("/listing/선고일자")
        .or_else(|| text("/detail/선고일자"))
        .or_else(|| text("/선고일자"))
        .and_then(|d| crate::law::calendar::normalize_date(&d));
    if v.get("status").and_then(Value::as_str) == Some("not_found") {
        let checked_ms = v.get("checkedAtMs").and_then(Value::as_u64)?;
        return Some((
            super::held::Held::Missing {
                checked_ms,
                first_seen_ms,
            },
            decided,
        ));
    }
    Some((
        super::held::Held::Stored {
            listing_hash: text("/listingHash"),
            content_hash: text("/contentHash"),
            first_seen_ms,
        },
        decided,
    ))
}

/// Epoch milliseconds of an instant this module wrote (`YYYY-MM-DDTHH:MM:SS.mmmZ`).
pub fn parse_rfc3339_millis(s: &str) -> Option<u64> {
    let b = s.as_bytes();
    if b.len() != 24 || b[4] != b'-' || b[7] != b'-' || b[10] != b'T' || b[19] != b'.' || b[23] != b'Z' {
        return None;
    }
    let date = format!("{}{}{}", &s[..4], &s[5..7], &s[8..10]);
    let day = crate::law::calendar::day_number(&date).ok()?;
    let num = |r: std::ops::Range<usize>| s.get(r)?.parse::<u64>().ok();
    let (h, m, sec, ms) = (num(11..13)?, num(14..16)?, num(17..19)?, num(20..23)?);
    if h > 23 || m > 59 || sec > 59 {
        return None;
    }
    u64::try_from(day)
        .ok()
        .map(|d| d * 86_400_000 + h * 3_600_000 + m * 60_000 + sec * 1000 + ms)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn instants_round_trip() {
        for ms in [0, 1_795_000_000_123, 1_709_164_800_000] {
            assert_eq!(parse_rfc3339_millis(&crate::clock::rfc3339_millis(ms)), Some(ms));
        }
        for bad in [
            "",
            "2026-13-01T00:00:00.000Z",
            "2026-11-18T11:06:40Z",
            "2026-11-18T24:00:00.000Z",
        ] {
            assert_eq!(parse_rfc3339_millis(bad), None, "{bad}");
        }
    }

    #[test]
    fn a_listing_hash_ignores_the_row_number_and_link_but_not_a_field() {
        let hit = |name: &str, row: &str| -> PrecedentSummary {
            serde_json::from_value(serde_json::json!({
                "id": row, "판례일련번호": "616247", "사건명": name, "선고일자": "2026.01.29",
                "판례상세링크": "/DRF/lawService.do?OC=x"
            }))
            .expect("hit")
        };
        assert_eq!(listing_hash(&hit("사기", "1")), listing_hash(&hit("사기", "7")));
        assert_ne!(
            listing_hash(&hit("사기", "1")),
            listing_hash(&hit("사기 [정정]", "1"))
        );
    }

    #[test]
    fn a_content_hash_ignores_key_order() {
        let a: Map<String, Value> = serde_json::from_str(r#"{"a":1,"b":"x"}"#).expect("a");
        let b: Map<String, Value> = serde_json::from_str(r#"{"b":"x","a":1}"#).expect("b");
        assert_eq!(content_hash(&a), content_hash(&b));
    }
}
