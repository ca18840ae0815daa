//! [`Seen`]: what the probe's replies showed of the hits, tallied as it reads them: the
//! spellings of dates and courts, undated hits, and ids worth a detail call.

use std::collections::BTreeMap;

use serde::Serialize;

use crate::law::calendar::normalize_date;
use crate::law::{PrecedentDetail, PrecedentSummary};

/// Longest example of a spelling kept; a date is ten characters or so.
const EXAMPLE_CHARS: usize = 24;
/// 법원명 values listed in the report; the rest are counted.
const COURTS_SHOWN: usize = 8;

/// A date's spelling with each digit as `9`: `2026.01.29` → `9999.99.99`, `2026. 1. 15.` →
/// `9999. 9. 99.`; `(empty)` or `(missing)` when there is none.
pub fn shape(text: Option<&str>) -> String {
    match text {
        None => "(missing)".into(),
        Some(t) if t.trim().is_empty() => "(empty)".into(),
        Some(t) => t
            .chars()
            .map(|c| if c.is_ascii_digit() { '9' } else { c })
            .collect(),
    }
}

/// One spelling of a date, as seen.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Spelling {
    pub count: u32,
    /// The first value seen in this spelling.
    pub example: String,
    /// Whether the project's reader ([`normalize_date`]) takes it: an empty or missing
    /// date is read as undated, which is what it means.
    pub read: bool,
}

/// Date spellings by [`shape`].
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct Spellings(pub BTreeMap<String, Spelling>);

impl Spellings {
    pub fn add(&mut self, text: Option<&str>) {
        let dated = text.is_some_and(|t| !t.trim().is_empty());
        let read = !dated || text.and_then(normalize_date).is_some();
        let entry = self.0.entry(shape(text)).or_insert_with(|| Spelling {
            count: 0,
            example: text.unwrap_or("").chars().take(EXAMPLE_CHARS).collect(),
            read,
        });
        entry.count += 1;
        // One unreadable value makes its spelling unreadable.
        entry.read &= read;
    }

    /// Values seen in spellings the reader does not take.
    pub fn unread(&self) -> u32 {
        self.0.values().filter(|s| !s.read).map(|s| s.count).sum()
    }

    /// `"2026.01.29" ×120, (empty) ×3`: each spelling by an example, with its count.
    pub fn describe(&self) -> String {
        let parts: Vec<String> = self
            .0
            .iter()
            .map(|(shape, s)| {
                let name = if s.example.trim().is_empty() {
                    shape.clone()
                } else {
                    format!("{:?}", s.example)
                };
                let unread = if s.read { "" } else { " NOT READ" };
                format!("{name} ×{}{unread}", s.count)
            })
            .collect();
        if parts.is_empty() {
            "none".into()
        } else {
            parts.join(", ")
        }
    }
}

/// Everything the probe's replies showed of the hits.
#[derive(Debug, Clone, Default, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Seen {
    /// Hits read on every page (a hit read twice counts twice).
    pub hits: u32,
    /// 선고일자 of the list items.
    pub list_dates: Spellings,
    /// 선고일자 of the details.
    pub detail_dates: Spellings,
    /// 법원명 of the list items, `""` for an empty or missing one.
    pub courts: BTreeMap<String, u32>,
    /// 데이터출처명 of the list items whose 법원명 was empty.
    pub courtless_sources: BTreeMap<String, u32>,
    /// Ids of hits from a 국세 source (데이터출처명 containing 국세), in the order seen.
    #[serde(skip)]
    pub nts_ids: Vec<String>,
    /// An id of a hit from any other source.
    #[serde(skip)]
    pub other_id: Option<String>,
}

impl Seen {
    /// Tallies one page's hits; returns how many of them have no decision date (an empty
    /// or missing 선고일자; one the reader cannot take is a spelling, counted there).
    pub fn page(&mut self, items: &[PrecedentSummary]) -> u32 {
        let mut undated = 0;
        for p in items {
            self.hits += 1;
            self.list_dates.add(p.decided_on.as_deref());
            if p.decided_on.as_deref().is_none_or(|d| d.trim().is_empty()) {
                undated += 1;
            }
            let court = p.court_name.as_deref().unwrap_or("").trim().to_owned();
            let source = p.data_source.as_deref().unwrap_or("").trim().to_owned();
            if court.is_empty() {
                *self.courtless_sources.entry(source.clone()).or_default() += 1;
            }
            *self.courts.entry(court).or_default() += 1;
            if source.contains("국세") {
                if !self.nts_ids.contains(&p.id) {
                    self.nts_ids.push(p.id.clone());
                }
            } else if self.other_id.is_none() {
                self.other_id = Some(p.id.clone());
            }
        }
        undated
    }

    /// Tallies one detail.
    pub fn detail(&mut self, d: &PrecedentDetail) {
        self.detail_dates.add(d.decided_on.as_deref());
    }

    /// `대법원 ×80, 서울고등법원 ×12, (empty) ×5 (국세청 ×5)`: the courts seen, most first.
    pub fn describe_courts(&self) -> String {
        let mut courts: Vec<(&String, &u32)> = self.courts.iter().collect();
        courts.sort_by(|a, b| b.1.cmp(a.1).then(a.0.cmp(b.0)));
        let mut parts: Vec<String> = courts
            .iter()
            .take(COURTS_SHOWN)
            .map(|(name, n)| {
                if name.is_empty() {
                    let sources: Vec<String> = self
                        .courtless_sources
                        .iter()
                        .map(|(s, n)| format!("{} ×{n}", if s.is_empty() { "no source" } else { s }))
                        .collect();
                    format!("(empty) ×{n} ({})", sources.join(", "))
                } else {
                    format!("{name} ×{n}")
                }
            })
            .collect();
        if courts.len() > COURTS_SHOWN {
            parts.push(format!("{} more", courts.len() - COURTS_SHOWN));
        }
        if parts.is_empty() {
            "none".into()
        } else {
            parts.join(", ")
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn shapes_name_each_spelling_law_go_kr_uses() {
        assert_eq!(shape(Some("2026.01.29")), "9999.99.99");
        assert_eq!(shape(Some("2026. 1. 15.")), "9999. 9. 99.");
        assert_eq!(shape(Some("20260312")), "99999999");
        assert_eq!(shape(Some(" ")), "(empty)");
        assert_eq!(shape(None), "(missing)");
    }

    #[test]
    fn a_spelling_the_reader_refuses_is_counted_and_named() {
        let mut s = Spellings::default();
        for t in ["2026.01.29", "2026.02.03", "2026. 1. 15.", "", "2026-13-01"] {
            s.add(Some(t));
        }
        s.add(None);
        assert_eq!(s.unread(), 1);
        let text = s.describe();
        assert!(text.contains("\"2026.01.29\" ×2"), "{text}");
        assert!(text.contains("\"2026-13-01\" ×1 NOT READ"), "{text}");
        assert!(
            text.contains("(empty) ×1") && text.contains("(missing) ×1"),
            "{text}"
        );
    }
}
