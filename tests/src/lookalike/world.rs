//! A corpus at law.go.kr's volume, for `bench-mirror`: its shape is fixed by
//! [`WorldShape::REALISTIC`] (the figures of issue 16, not tuned to any design) and scaled
//! down only by count. Generated once from a seed, held in memory, and indexed so that the
//! look-alike answers a search or a detail without a scan of the whole corpus: precedents
//! sorted by decision date (a window is a binary search), ids to positions in a map, and
//! each listing a day asks for kept until the day changes (a month is paged many times).
//!
//! - Decisions: `before` precedents decided uniformly over the `years` before day 0, then
//!   `per_day` decided on each day from day 0 on (every calendar day: the figures are
//!   averages, not a court calendar).
//! - Publication, after the decision: 50 % within 7 days, 80 % within 30, 95 % within
//!   180, 99 % within two years, the last 1 % two to four years late ([`DELAY_TIERS`]).
//! - 1 % undated: listed with an empty 선고일자 and an id from [`super::corpus::UNDATED_ID_BASE`]
//!   on, in order of publication; published after a hidden decision day like the others.
//! - 0.5 % revised once, 1 to 180 days after publication.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use lawsync::law::calendar::{day_number, yyyymmdd};

use super::corpus::{self, Change, Precedent, Revision, UNDATED_ID_BASE};

/// Delay tiers of publication: (cumulative per mille, first day, last day). 50 % within a
/// week, 80 % within 30 days, 95 % within 180, 99 % within two years, 1 % two to four
/// years late.
pub const DELAY_TIERS: [(u64, i64, i64); 5] = [
    (500, 0, 7),
    (800, 8, 30),
    (950, 31, 180),
    (990, 181, 730),
    (1000, 731, 1461),
];
/// Per mille of precedents without a decision date.
pub const UNDATED_PERMILLE: u64 = 10;
/// Per ten thousand of precedents revised once.
pub const REVISED_PER_10K: u64 = 50;
/// A revision comes 1..=this many days after publication.
pub const REVISION_MAX_DAYS: u64 = 180;
/// Ids of dated precedents start here (below the undated ones).
const DATED_ID_BASE: u64 = 100_000;

/// The figures a world is drawn from.
#[derive(Debug, Clone, PartialEq)]
pub struct WorldShape {
    /// Precedents decided before day 0.
    pub before: u64,
    /// Over this many years before day 0.
    pub years: u32,
    /// Decided on each day from day 0 on.
    pub per_day: u64,
    /// Days from day 0 on that have decisions.
    pub days: i64,
    /// Day 0, YYYYMMDD.
    pub day0: String,
}

impl WorldShape {
    /// 100,000 precedents over 20 years, 40 new decisions a day (issue 16).
    pub const REALISTIC_BEFORE: u64 = 100_000;
    pub const REALISTIC_YEARS: u32 = 20;
    pub const REALISTIC_PER_DAY: u64 = 40;

    /// The realistic shape, every count times `scale` (at least one a day), decisions on
    /// `days` days from `day0` on.
    pub fn realistic(scale: f64, day0: &str, days: i64) -> Self {
        Self {
            before: ((Self::REALISTIC_BEFORE as f64 * scale).round() as u64).max(1),
            years: Self::REALISTIC_YEARS,
            per_day: ((Self::REALISTIC_PER_DAY as f64 * scale).round() as u64).max(1),
            days,
            day0: day0.to_owned(),
        }
    }
}

/// A generated world: every precedent, indexed.
#[derive(Debug)]
pub struct World {
    pub shape: WorldShape,
    pub seed: u64,
    /// Dated, by (decision date, id).
    dated: Vec<Precedent>,
    /// Undated, by id (which is publication order).
    undated: Vec<Precedent>,
    /// Id -> (undated?, position).
    by_id: HashMap<u64, (bool, u32)>,
    /// Listings asked for on the current day: (window, today, newest first) -> positions
    /// (undated ones as `dated.len() + i`).
    cache: Mutex<ListingCache>,
}

/// A listing asked for: its window (none: the whole list) and whether newest first.
type ListingKey = (Option<(String, String)>, bool);

#[derive(Debug, Default)]
struct ListingCache {
    today: Option<String>,
    lists: HashMap<ListingKey, Arc<Vec<u32>>>,
}

/// splitmix64, seeded: the world's only source of chance.
#[derive(Debug, Clone)]
pub struct SplitMix(pub u64);

impl SplitMix {
    pub fn next_u64(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut x = self.0;
        x = (x ^ (x >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        x = (x ^ (x >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        x ^ (x >> 31)
    }

    /// Uniform in `0..n` (n > 0).
    pub fn below(&mut self, n: u64) -> u64 {
        self.next_u64() % n.max(1)
    }

    /// Uniform in `[0, 1)`.
    pub fn unit(&mut self) -> f64 {
        (self.next_u64() >> 11) as f64 / (1u64 << 53) as f64
    }
}

/// Days from decision to publication for a draw `u` in `0..1000` and a spread `s`.
fn delay(u: u64, s: u64) -> i64 {
    DELAY_TIERS
        .iter()
        .find(|(upto, _, _)| u < *upto)
        .map(|&(_, first, last)| first + (s % (last - first + 1) as u64) as i64)
        .unwrap_or(0)
}

impl World {
    /// Draws the world of `shape` from `seed`. A `day0` that is not a YYYYMMDD date is an
    /// error naming it.
    pub fn generate(seed: u64, shape: WorldShape) -> Result<Self, String> {
        let day0 = day_number(&shape.day0).map_err(|e| format!("day0: {e}"))?;
        let first = day0 - i64::from(shape.years) * 365 - i64::from(shape.years / 4);
        let span = (day0 - first) as u64;
        let mut rng = SplitMix(seed ^ 0x776F_726C_6421);
        // (decision day, publication day, hash, undated, revision)
        let mut drawn: Vec<(i64, i64, u64, bool, Option<Revision>)> = Vec::new();
        let total = shape.before + shape.per_day * shape.days.max(0) as u64;
        drawn.reserve(total as usize);
        for i in 0..total {
            let decided = if i < shape.before {
                first + rng.below(span) as i64
            } else {
                day0 + ((i - shape.before) / shape.per_day.max(1)) as i64
            };
            let published = decided + delay(rng.below(1000), rng.next_u64() >> 8);
            let undated = rng.below(1000) < UNDATED_PERMILLE;
            let revision = (rng.below(10_000) < REVISED_PER_10K).then(|| Revision {
                on: yyyymmdd(published + 1 + rng.below(REVISION_MAX_DAYS) as i64),
                change: if rng.below(2) == 0 {
                    Change::CaseName
                } else {
                    Change::JudgmentType
                },
            });
            drawn.push((decided, published, rng.next_u64(), undated, revision));
        }
        // Dated ids in decision order, undated ones in publication order.
        drawn.sort_by_key(|d| (d.3, if d.3 { d.1 } else { d.0 }, d.2));
        let mut dated = Vec::new();
        let mut undated = Vec::new();
        for (decided, published, hash, is_undated, revision) in drawn {
            let id = if is_undated {
                UNDATED_ID_BASE + undated.len() as u64
            } else {
                DATED_ID_BASE + dated.len() as u64
            };
            let when = (!is_undated).then_some(decided);
            let mut p = corpus::precedent(id, hash, when, published);
            p.revision = revision;
            if is_undated {
                undated.push(p);
            } else {
                dated.push(p);
            }
        }
        if DATED_ID_BASE + dated.len() as u64 >= UNDATED_ID_BASE {
            return Err(format!(
                "scale: {} dated precedents do not fit below the undated ids",
                dated.len()
            ));
        }
        let mut by_id = HashMap::with_capacity(dated.len() + undated.len());
        for (i, p) in dated.iter().enumerate() {
            by_id.insert(p.id, (false, i as u32));
        }
        for (i, p) in undated.iter().enumerate() {
            by_id.insert(p.id, (true, i as u32));
        }
        Ok(Self {
            shape,
            seed,
            dated,
            undated,
            by_id,
            cache: Mutex::new(ListingCache::default()),
        })
    }

    /// Every precedent, dated then undated.
    pub fn all(&self) -> impl Iterator<Item = &Precedent> {
        self.dated.iter().chain(self.undated.iter())
    }

    pub fn len(&self) -> usize {
        self.dated.len() + self.undated.len()
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// The first decision date of the world, YYYYMMDD.
    pub fn first_day(&self) -> &str {
        self.dated.first().map(|p| p.decided.as_str()).unwrap_or("")
    }

    /// The precedent with this id, published or not.
    pub fn get(&self, id: u64) -> Option<&Precedent> {
        let (undated, i) = *self.by_id.get(&id)?;
        let list = if undated { &self.undated } else { &self.dated };
        list.get(i as usize)
    }

    fn at(&self, pos: u32) -> &Precedent {
        let pos = pos as usize;
        match self.dated.get(pos) {
            Some(p) => p,
            None => &self.undated[pos - self.dated.len()],
        }
    }

    /// What a search lists on `today`, as [`corpus::Corpus::listing`] does: a window's
    /// dated precedents, or without one every dated precedent then the undated ones; the
    /// unpublished left out. Cut to `skip..skip + take`, with the whole listing's length.
    pub fn page(
        &self,
        window: Option<(&str, &str)>,
        today: Option<&str>,
        newest_first: bool,
        skip: usize,
        take: usize,
    ) -> (usize, Vec<&Precedent>) {
        let list = self.listing(window, today, newest_first);
        let items = list
            .iter()
            .skip(skip)
            .take(take)
            .map(|&pos| self.at(pos))
            .collect();
        (list.len(), items)
    }

    fn listing(
        &self,
        window: Option<(&str, &str)>,
        today: Option<&str>,
        newest_first: bool,
    ) -> Arc<Vec<u32>> {
        let key = (window.map(|(a, b)| (a.to_owned(), b.to_owned())), newest_first);
        let mut cache = self.cache.lock().unwrap_or_else(|p| p.into_inner());
        if cache.today.as_deref() != today {
            cache.today = today.map(str::to_owned);
            cache.lists.clear();
        }
        if let Some(list) = cache.lists.get(&key) {
            return list.clone();
        }
        let published = |p: &Precedent| p.is_published_by(today);
        let (lo, hi) = match window {
            Some((from, to)) => (
                self.dated.partition_point(|p| p.decided.as_str() < from),
                self.dated.partition_point(|p| p.decided.as_str() <= to),
            ),
            None => (0, self.dated.len()),
        };
        let mut dated: Vec<u32> = (lo..hi.max(lo))
            .filter(|&i| published(&self.dated[i]))
            .map(|i| i as u32)
            .collect();
        let mut undated: Vec<u32> = if window.is_some() {
            Vec::new()
        } else {
            (0..self.undated.len())
                .filter(|&i| published(&self.undated[i]))
                .map(|i| (self.dated.len() + i) as u32)
                .collect()
        };
        if newest_first {
            dated.reverse();
            undated.reverse();
        }
        dated.extend(undated);
        let list = Arc::new(dated);
        cache.lists.insert(key, list.clone());
        list
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_world_has_its_figures() {
        let w = World::generate(7, WorldShape::realistic(0.1, "20260901", 60)).expect("world");
        assert_eq!(w.len(), 10_000 + 4 * 60);
        let undated = w.all().filter(|p| p.is_undated()).count();
        assert!((50..200).contains(&undated), "{undated}");
        let delays: Vec<i64> = w.all().filter_map(|p| p.publication_delay_days()).collect();
        let within = |d: i64| delays.iter().filter(|&&x| x <= d).count() as f64 / delays.len() as f64;
        assert!((0.47..0.53).contains(&within(7)), "{}", within(7));
        assert!((0.77..0.83).contains(&within(30)), "{}", within(30));
        assert!((0.93..0.97).contains(&within(180)), "{}", within(180));
        assert!(within(730) < 1.0 && within(730) > 0.98);
        for p in w.all().take(500) {
            assert_eq!(w.get(p.id), Some(p));
        }
        let (n, page) = w.page(Some(("20260101", "20260131")), Some("20260901"), true, 0, 100);
        assert!(n > 0 && page.len() == n.min(100));
        assert!(page.iter().all(|p| p.decided.starts_with("202601")));
        let (all, _) = w.page(None, Some("20260901"), true, 0, 1);
        let by_hand = w.all().filter(|p| p.is_published_by(Some("20260901"))).count();
        assert_eq!(all, by_hand);
    }
}
