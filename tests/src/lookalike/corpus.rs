//! A deterministic synthetic corpus of precedents, shaped like law.go.kr's: Korean field
//! names, case numbers by court and case type, decisions on weekdays only, and a share of
//! 국세청 (National Tax Service) entries whose detail is missing, as on the real service.
//!
//! Like the real service it publishes late, so a mirror has something to look back for:
//! - every precedent has a publication date on or after its decision date, drawn from the
//!   distribution of [`WITHIN_A_MONTH_PERMILLE`] and its neighbours: most within a month,
//!   a tail of one to twelve months, a few more than two years late;
//! - a handful of *undated* precedents (no 선고일자, `""` in the list and in the detail) are
//!   published each month, with ids of their own from [`UNDATED_ID_BASE`] on, so the dated
//!   corpus and its ids are the same as without them; a date window never lists them;
//! - a few precedents are revised after publication ([`Revision`]): their list metadata
//!   and detail text change on the revision date.
//!
//! The same seed always gives the same corpus, so a test or the demo can compute what a
//! date window holds, and what a search lists on a given day ([`Corpus::visible`],
//! [`Precedent::search_item_on`], [`Precedent::detail_on`]), without asking the server.
//! Without a day (`today = None`) everything is published and every revision applied.

use lawsync::law::calendar::yyyymmdd;
use serde_json::{Value, json};

/// Days since 1970-01-01 of a YYYYMMDD date, `None` if it is not one.
fn day_number(yyyymmdd: &str) -> Option<i64> {
    lawsync::law::calendar::day_number(yyyymmdd).ok()
}

/// First and last decision dates the corpus covers.
pub const FIRST_DAY: &str = "20200101";
pub const LAST_DAY: &str = "20261231";

// How late the service publishes a dated precedent after its decision, in per mille of the
// dated corpus. Each precedent draws from a hash of its own, so its other fields (and the
// ids) are the same as before publication dates existed.
/// Published within a month: 0..=[`A_MONTH_DAYS`] days after the decision (800 ‰).
pub const WITHIN_A_MONTH_PERMILLE: u64 = 800;
/// Published one to twelve months late: `A_MONTH_DAYS + 1..=A_YEAR_DAYS` days (170 ‰),
/// as the lower courts' and the 국세청 batches are.
pub const MONTHS_LATE_PERMILLE: u64 = 170;
/// Published more than two years late: [`YEARS_LATE_MIN_DAYS`]..=[`YEARS_LATE_MAX_DAYS`]
/// days, up to about four years (30 ‰). None is published between a year and two late.
pub const YEARS_LATE_PERMILLE: u64 = 30;
const _: () = assert!(WITHIN_A_MONTH_PERMILLE + MONTHS_LATE_PERMILLE + YEARS_LATE_PERMILLE == 1000);
/// The longest delay counted as "within a month", in days.
pub const A_MONTH_DAYS: i64 = 30;
/// The longest delay counted as "one to twelve months", in days.
pub const A_YEAR_DAYS: i64 = 365;
/// The shortest and longest delay of the "years late" tail, in days.
pub const YEARS_LATE_MIN_DAYS: i64 = 731;
pub const YEARS_LATE_MAX_DAYS: i64 = 1461;

/// Ids of undated precedents start here, far above every dated id, and grow with the month
/// of publication: `UNDATED_ID_BASE + month * UNDATED_SLOTS_PER_MONTH + slot`, months counted
/// from [`FIRST_DAY`]'s.
pub const UNDATED_ID_BASE: u64 = 900_000;
/// Each month of [`FIRST_DAY`]..=[`LAST_DAY`] has this many slots for an undated precedent,
/// each filled with a chance of [`UNDATED_SLOT_PERCENT`] %: about 0.66 a month, ~2 % of
/// the corpus (which holds ~33 dated precedents a month).
pub const UNDATED_SLOTS_PER_MONTH: u64 = 3;
pub const UNDATED_SLOT_PERCENT: u64 = 22;

/// This many per mille of all precedents, dated or not, are revised after publication.
pub const REVISED_PERMILLE: u64 = 30;
/// A revision comes 1..=this many days after publication.
pub const REVISION_MAX_DAYS: i64 = 180;
/// What a [`Change::CaseName`] revision appends to 사건명.
pub const REVISED_SUFFIX: &str = " [정정]";
/// 판결유형 before and after a [`Change::JudgmentType`] revision.
pub const JUDGMENT_TYPE: &str = "판결";
pub const REVISED_JUDGMENT_TYPE: &str = "결정";

/// One synthetic precedent, with everything the service will ever say about it; what it
/// says on a given day is [`Precedent::search_item_on`] and [`Precedent::detail_on`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Precedent {
    /// 판례일련번호.
    pub id: u64,
    /// YYYYMMDD; `""` for an undated one ([`Precedent::is_undated`]).
    pub decided: String,
    /// YYYYMMDD of the first day the service lists it and answers its detail; on or after
    /// `decided`.
    pub published: String,
    /// The later correction of it, if it gets one.
    pub revision: Option<Revision>,
    pub case_name: &'static str,
    pub case_type: &'static str,
    pub case_number: String,
    pub court: &'static str,
    pub court_code: &'static str,
    pub source: &'static str,
    /// The detail endpoint answers `{"Law":"일치하는 판례가 없습니다..."}` for this one.
    pub detail_missing: bool,
}

/// A correction published after the precedent: from `on` the service serves the changed
/// list metadata and a detail whose 판례내용 ends with a note of it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Revision {
    /// YYYYMMDD, after the precedent's publication date.
    pub on: String,
    pub change: Change,
}

/// What a [`Revision`] changes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Change {
    /// 사건명 gains [`REVISED_SUFFIX`], in the list item and in the detail.
    CaseName,
    /// 판결유형 becomes [`REVISED_JUDGMENT_TYPE`], in the list item and in the detail.
    JudgmentType,
}

/// (사건명, 사건종류명, 대법원 사건부호, 하급심 사건부호, 하급심 법원)
const CASES: &[(&str, &str, &str, &str, &str)] = &[
    ("손해배상(기)", "민사", "다", "나", "서울고등법원"),
    ("부당이득금", "민사", "다", "나", "부산고등법원"),
    ("소유권이전등기", "민사", "다", "나", "대전고등법원"),
    ("건물명도", "민사", "다", "나", "서울고등법원"),
    ("사기", "형사", "도", "노", "서울고등법원"),
    ("업무상횡령", "형사", "도", "노", "대구고등법원"),
    ("도로교통법위반(음주운전)", "형사", "도", "노", "광주고등법원"),
    ("해고무효확인", "민사", "다", "나", "서울고등법원"),
    ("종합소득세부과처분취소", "세무", "두", "누", "서울고등법원"),
    ("법인세부과처분취소", "세무", "두", "누", "서울고등법원"),
    ("양도소득세부과처분취소", "세무", "두", "누", "수원고등법원"),
    ("영업정지처분취소", "일반행정", "두", "누", "서울고등법원"),
];

/// Salts of the hashes drawn for publication, revision and undated slots, so that each is
/// independent of the fields drawn before them.
const PUBLISHED_SALT: u64 = 0x7075_626C_6973_6865;
const REVISION_SALT: u64 = 0x7265_7669_7369_6F6E;
const UNDATED_SALT: u64 = 0x756E_6461_7465_6421;

/// The corpus of one seed.
#[derive(Debug, Clone, Copy)]
pub struct Corpus {
    seed: u64,
    /// Only the precedents decided in these days (day numbers, inclusive), and no undated
    /// ones: a small world (the demo's), where a daily run's probes of other months find
    /// nothing to read.
    decided: Option<(i64, i64)>,
}

impl Corpus {
    pub fn new(seed: u64) -> Self {
        Self { seed, decided: None }
    }

    /// The corpus of `seed` cut down to the precedents decided in `from..=to` (YYYYMMDD),
    /// without undated ones; `None` when a date is not one.
    pub fn decided_within(seed: u64, from: &str, to: &str) -> Option<Self> {
        let (a, b) = (day_number(from)?, day_number(to)?);
        (a <= b).then_some(Self {
            seed,
            decided: Some((a, b)),
        })
    }

    /// Every dated precedent decided in `from..=to` (YYYYMMDD, inclusive), oldest first,
    /// published or not; days outside the corpus hold none.
    pub fn window(&self, from: &str, to: &str) -> Vec<Precedent> {
        let (Some(a), Some(b)) = (day_number(from), day_number(to)) else {
            return Vec::new();
        };
        let (mut first, mut last) = (
            day_number(FIRST_DAY).unwrap_or(0),
            day_number(LAST_DAY).unwrap_or(0),
        );
        if let Some((x, y)) = self.decided {
            (first, last) = (first.max(x), last.min(y));
        }
        (a.max(first)..=b.min(last)).flat_map(|d| self.day(d)).collect()
    }

    /// The undated precedents published by `today` (YYYYMMDD; `None`: all of them), in id
    /// order, which is publication order.
    pub fn undated(&self, today: Option<&str>) -> Vec<Precedent> {
        if self.decided.is_some() {
            return Vec::new();
        }
        (0..months())
            .flat_map(|m| (0..UNDATED_SLOTS_PER_MONTH).filter_map(move |k| self.undated_slot(m, k)))
            .filter(|p| p.is_published_by(today))
            .collect()
    }

    /// What a search with `sort=ddes` lists on `today` (YYYYMMDD; `None`: everything
    /// published), in the server's order. With a `(from, to)` window (`prncYd=from~to`):
    /// the dated precedents decided in it, newest first. Without: every dated precedent
    /// newest first, then the undated ones, the latest published first.
    pub fn visible(&self, window: Option<(&str, &str)>, today: Option<&str>) -> Vec<Precedent> {
        self.listing(window, today, true)
    }

    /// [`Corpus::visible`] in either order; oldest first lists the undated ones last too.
    pub(crate) fn listing(
        &self,
        window: Option<(&str, &str)>,
        today: Option<&str>,
        newest_first: bool,
    ) -> Vec<Precedent> {
        let (from, to) = window.unwrap_or((FIRST_DAY, LAST_DAY));
        let mut dated = self.window(from, to);
        dated.retain(|p| p.is_published_by(today));
        let mut undated = if window.is_some() {
            Vec::new()
        } else {
            self.undated(today)
        };
        if newest_first {
            dated.reverse();
            undated.reverse();
        }
        dated.extend(undated);
        dated
    }

    /// The precedent with this id, dated or undated, if the corpus has one (published or
    /// not).
    pub fn get(&self, id: u64) -> Option<Precedent> {
        if let Some(slot) = id.checked_sub(UNDATED_ID_BASE) {
            if self.decided.is_some() {
                return None;
            }
            let month = slot / UNDATED_SLOTS_PER_MONTH;
            return (month < months())
                .then(|| self.undated_slot(month, slot % UNDATED_SLOTS_PER_MONTH))
                .flatten();
        }
        let day = i64::try_from(id.checked_sub(ID_BASE)? / PER_DAY_MAX).ok()? + day_number(FIRST_DAY)?;
        if self.decided.is_some_and(|(a, b)| day < a || day > b) {
            return None;
        }
        self.day(day).into_iter().find(|p| p.id == id)
    }

    fn day(&self, day: i64) -> Vec<Precedent> {
        let weekday = (day + 3).rem_euclid(7); // 1970-01-01 was a Thursday: 0 = Monday
        if weekday >= 5 {
            return Vec::new();
        }
        let first = day_number(FIRST_DAY).unwrap_or(0);
        let index = (day - first) as u64;
        let h = mix(self.seed ^ index.wrapping_mul(0x9E37_79B9));
        let count = h % (PER_DAY_MAX);
        (0..count)
            .map(|k| {
                let r = mix(h ^ (k + 1));
                let published = day + publication_delay(mix(r ^ PUBLISHED_SALT));
                precedent(ID_BASE + index * PER_DAY_MAX + k, r, Some(day), published)
            })
            .collect()
    }

    /// The undated precedent of slot `k` of month `month` (counted from [`FIRST_DAY`]'s),
    /// if that slot is filled.
    fn undated_slot(&self, month: u64, k: u64) -> Option<Precedent> {
        let slot = month * UNDATED_SLOTS_PER_MONTH + k;
        let h = mix(mix(self.seed ^ UNDATED_SALT) ^ slot);
        if h % 100 >= UNDATED_SLOT_PERCENT {
            return None;
        }
        let (y0, m0) = year_month(FIRST_DAY);
        let months_in = i64::try_from(month).ok()? + m0 - 1;
        let (y, m) = (y0 + months_in / 12, months_in % 12 + 1);
        let days = lawsync::law::calendar::days_in_month(y, m);
        let first = lawsync::law::calendar::days_from_civil(y, m, 1);
        // Slot k publishes in the k-th part of the month, so ids grow with publication.
        let slots = UNDATED_SLOTS_PER_MONTH as i64;
        let (k, part) = (k as i64, days / slots);
        let published = first + k * part + ((h >> 8) % part as u64) as i64;
        Some(precedent(UNDATED_ID_BASE + slot, mix(h ^ 1), None, published))
    }
}

const ID_BASE: u64 = 100_000;
/// At most this many decisions a day (ids leave room for them).
const PER_DAY_MAX: u64 = 4;

/// Year and month of a YYYYMMDD constant.
fn year_month(yyyymmdd: &str) -> (i64, i64) {
    (
        yyyymmdd[..4].parse().unwrap_or(2020),
        yyyymmdd[4..6].parse().unwrap_or(1),
    )
}

/// Months of publication the undated precedents spread over: those of
/// [`FIRST_DAY`]..=[`LAST_DAY`].
fn months() -> u64 {
    let ((y0, m0), (y1, m1)) = (year_month(FIRST_DAY), year_month(LAST_DAY));
    ((y1 - y0) * 12 + m1 - m0 + 1).max(0) as u64
}

/// Days from decision to publication, drawn from the hash `u` by the distribution of
/// [`WITHIN_A_MONTH_PERMILLE`], [`MONTHS_LATE_PERMILLE`] and [`YEARS_LATE_PERMILLE`].
fn publication_delay(u: u64) -> i64 {
    let roll = u % 1000;
    let spread = (u >> 16) as i64 & 0xFFFF_FFFF;
    if roll < WITHIN_A_MONTH_PERMILLE {
        spread % (A_MONTH_DAYS + 1)
    } else if roll < WITHIN_A_MONTH_PERMILLE + MONTHS_LATE_PERMILLE {
        A_MONTH_DAYS + 1 + spread % (A_YEAR_DAYS - A_MONTH_DAYS)
    } else {
        YEARS_LATE_MIN_DAYS + spread % (YEARS_LATE_MAX_DAYS - YEARS_LATE_MIN_DAYS + 1)
    }
}

/// The precedent of id `id` whose fields come from the hash `r`, decided on day `decided`
/// (none: undated) and published on day `published`.
pub(crate) fn precedent(id: u64, r: u64, decided: Option<i64>, published: i64) -> Precedent {
    let (name, kind, top, lower, high_court) = CASES[(r % CASES.len() as u64) as usize];
    let supreme = !(r >> 8).is_multiple_of(3);
    let tax = kind == "세무";
    let nts = tax && (r >> 16).is_multiple_of(2);
    let serial = 1000 + (r >> 24) % 89_000;
    let (court, court_code, mark) = if supreme {
        ("대법원", "400201", top)
    } else {
        (high_court, "400202", lower)
    };
    let year: u32 = yyyymmdd(decided.unwrap_or(published))[..4]
        .parse()
        .unwrap_or(2020);
    let q = mix(r ^ REVISION_SALT);
    let revision = (q % 1000 < REVISED_PERMILLE).then(|| Revision {
        on: yyyymmdd(published + 1 + ((q >> 16) % REVISION_MAX_DAYS as u64) as i64),
        change: if (q >> 40).is_multiple_of(2) {
            Change::CaseName
        } else {
            Change::JudgmentType
        },
    });
    Precedent {
        id,
        decided: decided.map(yyyymmdd).unwrap_or_default(),
        published: yyyymmdd(published),
        revision,
        case_name: name,
        case_type: kind,
        case_number: format!("{}{mark}{serial}", year - 1 - (r >> 40) as u32 % 2),
        court,
        court_code,
        source: if nts { "국세청" } else { "대법원" },
        detail_missing: nts && (r >> 48).is_multiple_of(3),
    }
}

impl Precedent {
    /// No decision date: 선고일자 is `""` in the list item and in the detail.
    pub fn is_undated(&self) -> bool {
        self.decided.is_empty()
    }

    /// Listed and answered on `today` (YYYYMMDD; `None`: always).
    pub fn is_published_by(&self, today: Option<&str>) -> bool {
        today.is_none_or(|t| self.published.as_str() <= t)
    }

    /// Served in its revised version on `today` (YYYYMMDD; `None`: if it has a revision).
    pub fn is_revised_by(&self, today: Option<&str>) -> bool {
        self.revision
            .as_ref()
            .is_some_and(|r| today.is_none_or(|t| r.on.as_str() <= t))
    }

    /// Days from decision to publication; `None` for an undated one.
    pub fn publication_delay_days(&self) -> Option<i64> {
        Some(day_number(&self.published)? - day_number(&self.decided)?)
    }

    /// 사건명 as served on `today`.
    pub fn case_name_on(&self, today: Option<&str>) -> String {
        match &self.revision {
            Some(r) if r.change == Change::CaseName && self.is_revised_by(today) => {
                format!("{}{REVISED_SUFFIX}", self.case_name)
            }
            _ => self.case_name.to_owned(),
        }
    }

    /// 판결유형 as served on `today`.
    pub fn judgment_type_on(&self, today: Option<&str>) -> &'static str {
        match &self.revision {
            Some(r) if r.change == Change::JudgmentType && self.is_revised_by(today) => REVISED_JUDGMENT_TYPE,
            _ => JUDGMENT_TYPE,
        }
    }

    /// The search item with every revision applied: [`Precedent::search_item_on`] with no
    /// day.
    pub fn search_item(&self, oc: &str) -> Value {
        self.search_item_on(oc, None)
    }

    /// The search item as law.go.kr lists it on `today` (YYYYMMDD; `None`: every revision
    /// applied): every number a string, the date dotted (`""` when undated), and the
    /// detail link carrying the caller's OC. Whether it is listed at all that day is
    /// [`Precedent::is_published_by`].
    pub fn search_item_on(&self, oc: &str, today: Option<&str>) -> Value {
        let d = &self.decided;
        let dotted = if self.is_undated() {
            String::new()
        } else {
            format!("{}.{}.{}", &d[..4], &d[4..6], &d[6..])
        };
        json!({
            "id": "1",
            "판례일련번호": self.id.to_string(),
            "사건명": self.case_name_on(today),
            "사건번호": self.case_number,
            "선고일자": dotted,
            "법원명": self.court,
            "법원종류코드": self.court_code,
            "사건종류명": self.case_type,
            "사건종류코드": case_type_code(self.case_type),
            "판결유형": self.judgment_type_on(today),
            "선고": "선고",
            "데이터출처명": self.source,
            "판례상세링크": format!("/DRF/lawService.do?OC={oc}&target=prec&ID={}&type=HTML&mobileYn=", self.id),
        })
    }

    /// The detail with every revision applied: [`Precedent::detail_on`] with no day.
    pub fn detail(&self) -> Value {
        self.detail_on(None)
    }

    /// The detail reply's `PrecService` object as served on `today` (YYYYMMDD; `None`:
    /// every revision applied); text fields carry `<br/>` as the real ones do, and a
    /// revised one's 판례내용 ends with a note of the revision. Whether it is answered at
    /// all that day is [`Precedent::is_published_by`] (and not [`Precedent::detail_missing`]).
    pub fn detail_on(&self, today: Option<&str>) -> Value {
        let mut text = format!(
            "【원고, 상고인】 원고<br/>【피고, 피상고인】 피고<br/>【원심판결】 {} 선고<br/>【주 문】<br/>상고를 기각한다.<br/>【이 유】<br/>상고이유를 판단한다. (사건 {})",
            self.court, self.case_number
        );
        if let Some(r) = self.revision.as_ref().filter(|_| self.is_revised_by(today)) {
            let what = match r.change {
                Change::CaseName => "사건명",
                Change::JudgmentType => "판결유형",
            };
            text.push_str(&format!("<br/>【정정】 {} {what} 정정", r.on));
        }
        let case_name = self.case_name_on(today);
        json!({
            "판례정보일련번호": self.id.to_string(),
            "사건명": case_name,
            "사건번호": self.case_number,
            "선고일자": self.decided,
            "선고": "선고",
            "법원명": self.court,
            "법원종류코드": self.court_code,
            "사건종류명": self.case_type,
            "사건종류코드": case_type_code(self.case_type),
            "판결유형": self.judgment_type_on(today),
            "판시사항": format!("[1] {case_name}에 관한 법리<br/>[2] 원심의 판단에 법리오해의 잘못이 있는지 여부(소극)"),
            "판결요지": "[1] 원심이 인정한 사실관계에 비추어 보면 원심의 판단은 정당하다.<br/>[2] 상고이유 주장은 받아들일 수 없다.",
            "참조조문": "[1] 민법 제750조<br/>[2] 민사소송법 제432조",
            "참조판례": "대법원 2019. 5. 16. 선고 2017다226629 판결",
            "판례내용": text,
        })
    }
}

fn case_type_code(kind: &str) -> &'static str {
    match kind {
        "민사" => "400101",
        "형사" => "400102",
        "세무" => "400104",
        _ => "400103",
    }
}

/// splitmix64's finalizer: a well-spread hash of a u64.
fn mix(mut x: u64) -> u64 {
    x = x.wrapping_add(0x9E37_79B9_7F4A_7C15);
    x = (x ^ (x >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    x = (x ^ (x >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    x ^ (x >> 31)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_corpus_is_deterministic_weekday_only_and_addressable_by_id() {
        let c = Corpus::new(7);
        let a = c.window("20260105", "20260130");
        assert_eq!(a, c.window("20260105", "20260130"));
        assert!(a.len() > 10, "{}", a.len());
        for p in &a {
            let wd = (day_number(&p.decided).expect("valid") + 3).rem_euclid(7);
            assert!(wd < 5, "{} is a weekend", p.decided);
            assert_eq!(c.get(p.id).as_ref(), Some(p));
        }
        assert_ne!(a, Corpus::new(8).window("20260105", "20260130"));
        assert!(c.window("19990101", "19991231").is_empty());
    }

    /// The dated corpus, field by field, is the one it was before publication dates,
    /// revisions and undated precedents existed: tests and the demo rely on its ids.
    #[test]
    fn the_dated_corpus_is_unchanged_by_publication_dates() {
        // FNV-style fingerprints computed from the corpus as it was (commit 09578ff).
        for (seed, len, want) in [
            (1, 2763, 0x4935_4e2c_8d02_736b_u64),
            (7, 2792, 0x7d50_7826_d198_37c7),
        ] {
            let v = Corpus::new(seed).window(FIRST_DAY, LAST_DAY);
            let mut f = 0u64;
            for p in &v {
                let line = format!(
                    "{}|{}|{}|{}|{}|{}|{}|{}|{}",
                    p.id,
                    p.decided,
                    p.case_name,
                    p.case_type,
                    p.case_number,
                    p.court,
                    p.court_code,
                    p.source,
                    p.detail_missing
                );
                for b in line.bytes() {
                    f = (f ^ u64::from(b)).wrapping_mul(0x100_0000_01B3);
                }
            }
            assert_eq!((v.len(), f), (len, want), "seed {seed}");
        }
    }

    #[test]
    fn publication_follows_decision_and_undated_ones_have_ids_of_their_own() {
        let c = Corpus::new(7);
        for p in c.window(FIRST_DAY, LAST_DAY) {
            let delay = p.publication_delay_days().expect("dated");
            assert!((0..=YEARS_LATE_MAX_DAYS).contains(&delay), "{p:?}");
            if let Some(r) = &p.revision {
                assert!(r.on > p.published, "{p:?}");
            }
        }
        let undated = c.undated(None);
        assert!(!undated.is_empty());
        for p in &undated {
            assert!(p.is_undated() && p.id >= UNDATED_ID_BASE, "{p:?}");
            assert_eq!(p.publication_delay_days(), None);
            assert!((FIRST_DAY..="20261231").contains(&p.published.as_str()));
            assert_eq!(c.get(p.id).as_ref(), Some(p));
            assert_eq!(p.search_item("k")["선고일자"], "");
            assert_eq!(p.detail()["선고일자"], "");
        }
        assert!(undated.windows(2).all(|w| w[0].published <= w[1].published));
        // An empty slot has no precedent.
        let slots = months() * UNDATED_SLOTS_PER_MONTH;
        let empty = (UNDATED_ID_BASE..UNDATED_ID_BASE + slots).find(|&id| c.get(id).is_none());
        assert!(empty.is_some());
        assert_eq!(c.get(UNDATED_ID_BASE + slots), None);
    }

    #[test]
    fn the_listing_is_newest_first_with_the_undated_last_and_hides_the_unpublished() {
        let c = Corpus::new(3);
        let all = c.visible(None, None);
        assert_eq!(
            all.len(),
            c.window(FIRST_DAY, LAST_DAY).len() + c.undated(None).len()
        );
        let split = all.iter().position(Precedent::is_undated).expect("undated");
        assert!(all[split..].iter().all(Precedent::is_undated));
        assert!(all[..split].windows(2).all(|w| w[0].decided >= w[1].decided));
        let today = "20250615";
        let then = c.visible(Some(("20250101", "20250630")), Some(today));
        let every = c.window("20250101", "20250630");
        assert!(then.len() < every.len(), "some are not yet published");
        assert!(then.iter().all(|p| p.published.as_str() <= today));
        assert_eq!(
            then.len(),
            every.iter().filter(|p| p.published.as_str() <= today).count()
        );
    }
}
