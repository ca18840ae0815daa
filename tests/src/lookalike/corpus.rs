//! A deterministic synthetic corpus of precedents, shaped like law.go.kr's: Korean field
//! names, case numbers by court and case type, decisions on weekdays only, and a share of
//! 국세청 (National Tax Service) entries whose detail is missing, as on the real service.
//!
//! The same seed always gives the same corpus, so a test or the demo can compute what a
//! date window holds without asking the server.

use lawsync::law::calendar::yyyymmdd;
use serde_json::{Value, json};

/// Days since 1970-01-01 of a YYYYMMDD date, `None` if it is not one.
fn day_number(yyyymmdd: &str) -> Option<i64> {
    lawsync::law::calendar::day_number(yyyymmdd).ok()
}

/// First and last decision dates the corpus covers.
pub const FIRST_DAY: &str = "20200101";
pub const LAST_DAY: &str = "20261231";

/// One synthetic precedent.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Precedent {
    /// 판례일련번호.
    pub id: u64,
    /// YYYYMMDD.
    pub decided: String,
    pub case_name: &'static str,
    pub case_type: &'static str,
    pub case_number: String,
    pub court: &'static str,
    pub court_code: &'static str,
    pub source: &'static str,
    /// The detail endpoint answers `{"Law":"일치하는 판례가 없습니다..."}` for this one.
    pub detail_missing: bool,
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

/// The corpus of one seed.
#[derive(Debug, Clone, Copy)]
pub struct Corpus {
    seed: u64,
}

impl Corpus {
    pub fn new(seed: u64) -> Self {
        Self { seed }
    }

    /// Every precedent decided in `from..=to` (YYYYMMDD, inclusive), oldest first; days
    /// outside the corpus hold none.
    pub fn window(&self, from: &str, to: &str) -> Vec<Precedent> {
        let (Some(a), Some(b)) = (day_number(from), day_number(to)) else {
            return Vec::new();
        };
        let (first, last) = (
            day_number(FIRST_DAY).unwrap_or(0),
            day_number(LAST_DAY).unwrap_or(0),
        );
        (a.max(first)..=b.min(last)).flat_map(|d| self.day(d)).collect()
    }

    /// The precedent with this id, if the corpus has one.
    pub fn get(&self, id: u64) -> Option<Precedent> {
        let day = id.checked_sub(ID_BASE)? / PER_DAY_MAX;
        self.day(i64::try_from(day).ok()? + day_number(FIRST_DAY)?)
            .into_iter()
            .find(|p| p.id == id)
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
        let decided = yyyymmdd(day);
        let year: u32 = decided[..4].parse().unwrap_or(2020);
        (0..count)
            .map(|k| {
                let r = mix(h ^ (k + 1));
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
                Precedent {
                    id: ID_BASE + index * PER_DAY_MAX + k,
                    decided: decided.clone(),
                    case_name: name,
                    case_type: kind,
                    case_number: format!("{}{mark}{serial}", year - 1 - (r >> 40) as u32 % 2),
                    court,
                    court_code,
                    source: if nts { "국세청" } else { "대법원" },
                    detail_missing: nts && (r >> 48).is_multiple_of(3),
                }
            })
            .collect()
    }
}

const ID_BASE: u64 = 100_000;
/// At most this many decisions a day (ids leave room for them).
const PER_DAY_MAX: u64 = 4;

impl Precedent {
    /// The search item, as law.go.kr lists it: every number a string, the date dotted,
    /// and the detail link carrying the caller's OC.
    pub fn search_item(&self, oc: &str) -> Value {
        let d = &self.decided;
        json!({
            "id": "1",
            "판례일련번호": self.id.to_string(),
            "사건명": self.case_name,
            "사건번호": self.case_number,
            "선고일자": format!("{}.{}.{}", &d[..4], &d[4..6], &d[6..]),
            "법원명": self.court,
            "법원종류코드": self.court_code,
            "사건종류명": self.case_type,
            "사건종류코드": case_type_code(self.case_type),
            "판결유형": "판결",
            "선고": "선고",
            "데이터출처명": self.source,
            "판례상세링크": format!("/DRF/lawService.do?OC={oc}&target=prec&ID={}&type=HTML&mobileYn=", self.id),
        })
    }

    /// The detail reply's `PrecService` object; text fields carry `<br/>` as the real ones do.
    pub fn detail(&self) -> Value {
        json!({
            "판례정보일련번호": self.id.to_string(),
            "사건명": self.case_name,
            "사건번호": self.case_number,
            "선고일자": self.decided,
            "선고": "선고",
            "법원명": self.court,
            "법원종류코드": self.court_code,
            "사건종류명": self.case_type,
            "사건종류코드": case_type_code(self.case_type),
            "판결유형": "판결",
            "판시사항": format!("[1] {}에 관한 법리<br/>[2] 원심의 판단에 법리오해의 잘못이 있는지 여부(소극)", self.case_name),
            "판결요지": "[1] 원심이 인정한 사실관계에 비추어 보면 원심의 판단은 정당하다.<br/>[2] 상고이유 주장은 받아들일 수 없다.",
            "참조조문": "[1] 민법 제750조<br/>[2] 민사소송법 제432조",
            "참조판례": "대법원 2019. 5. 16. 선고 2017다226629 판결",
            "판례내용": format!(
                "【원고, 상고인】 원고<br/>【피고, 피상고인】 피고<br/>【원심판결】 {} 선고<br/>【주 문】<br/>상고를 기각한다.<br/>【이 유】<br/>상고이유를 판단한다. (사건 {})",
                self.court, self.case_number
            ),
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
}
