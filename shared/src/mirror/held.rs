//! What the mirror already holds, asked per search page before any detail is sent, so a
//! sync of a mirrored window costs its search calls and nothing more.
//!
//! The document store is the source of truth. Redis keeps a cache of it, one hash field per
//! id ([`HeldIndex`]), written after each store write. A page is checked with one `HMGET`;
//! an id the cache does not know is looked up in the store (the cache was flushed, or the
//! id is new), and what the store holds is written back to the cache. So a lost or flushed
//! Redis costs store reads, never a detail call for what is stored, and never a skip of
//! what is not: the cache only says "held" after the store said so.

use std::collections::BTreeMap;
use std::sync::Arc;

use futures::StreamExt;

use super::layout;
use crate::documents::{DocError, DocumentStore};
use crate::law::PrecedentSummary;
use crate::policy::{HELD_STORE_LOOKUPS_IN_FLIGHT, MISSING_RECHECK};
use crate::redis_conn::{RedisConn, RedisFailure};

/// What the store holds for one id.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Held {
    /// An envelope: its listing hash (none for a document from before schema 1) and
    /// content hash.
    Stored {
        listing_hash: Option<String>,
        content_hash: Option<String>,
        first_seen_ms: Option<u64>,
    },
    /// A missing-upstream marker, checked at `checked_ms`.
    Missing {
        checked_ms: u64,
        first_seen_ms: Option<u64>,
    },
}

impl Held {
    /// The first time a search returned the id, as stored.
    pub fn first_seen_ms(&self) -> Option<u64> {
        match self {
            Held::Stored { first_seen_ms, .. } | Held::Missing { first_seen_ms, .. } => *first_seen_ms,
        }
    }

    /// The cache's field value: `s <first seen> <listing hash> <content hash>` or
    /// `m <first seen> <checked>`, `-` for none. Hashes are kept whole: a shortened one
    /// could hide a revision.
    fn encode(&self) -> String {
        let n = |v: Option<u64>| v.map_or_else(|| "-".to_owned(), |v| v.to_string());
        let t = |v: &Option<String>| v.clone().unwrap_or_else(|| "-".to_owned());
        match self {
            Held::Stored {
                listing_hash,
                content_hash,
                first_seen_ms,
            } => format!("s {} {} {}", n(*first_seen_ms), t(listing_hash), t(content_hash)),
            Held::Missing {
                checked_ms,
                first_seen_ms,
            } => format!("m {} {checked_ms}", n(*first_seen_ms)),
        }
    }

    fn decode(text: &str) -> Option<Self> {
        let parts: Vec<&str> = text.split(' ').collect();
        let first_seen_ms = match *parts.get(1)? {
            "-" => None,
            n => Some(n.parse().ok()?),
        };
        let hash = |v: &str| (v != "-").then(|| v.to_owned());
        match parts.as_slice() {
            ["s", _, listing, content] => Some(Held::Stored {
                listing_hash: hash(listing),
                content_hash: hash(content),
                first_seen_ms,
            }),
            ["m", _, checked] => Some(Held::Missing {
                checked_ms: checked.parse().ok()?,
                first_seen_ms,
            }),
            _ => None,
        }
    }
}

/// Why a hit is fetched.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum FetchReason {
    /// Not held.
    New,
    /// Held with other list metadata.
    Revised,
    /// Recorded missing longer than [`MISSING_RECHECK`] ago.
    Recheck,
    /// Asked for (`refresh`).
    Refresh,
}

/// What to do with one search hit.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Verdict {
    /// Held and unchanged: no detail call. The first time it was seen, as stored.
    Skip { first_seen_ms: Option<u64> },
    /// Send a detail message.
    Fetch {
        reason: FetchReason,
        first_seen_ms: Option<u64>,
    },
}

/// Decides one hit against what is held, at `now_ms`.
pub fn verdict(hit: &PrecedentSummary, held: Option<&Held>, refresh: bool, now_ms: u64) -> Verdict {
    let first_seen_ms = held.and_then(Held::first_seen_ms);
    let fetch = |reason| Verdict::Fetch {
        reason,
        first_seen_ms,
    };
    match held {
        _ if refresh => fetch(FetchReason::Refresh),
        None => fetch(FetchReason::New),
        Some(Held::Stored { listing_hash, .. }) => {
            if listing_hash.as_deref() == Some(super::envelope::listing_hash(hit).as_str()) {
                Verdict::Skip { first_seen_ms }
            } else {
                fetch(FetchReason::Revised)
            }
        }
        Some(Held::Missing { checked_ms, .. }) => {
            if now_ms.saturating_sub(*checked_ms) >= MISSING_RECHECK.as_millis() as u64 {
                fetch(FetchReason::Recheck)
            } else {
                Verdict::Skip { first_seen_ms }
            }
        }
    }
}

/// Why the held check failed: Redis and the store both unusable for it.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum HeldError {
    #[error("held check: {0}")]
    Store(#[from] DocError),
}

/// The cache of what the store holds, over the store itself.
#[derive(Debug, Clone)]
pub struct HeldIndex {
    redis: RedisConn,
    key: String,
    months_key: String,
    docs: Arc<dyn DocumentStore>,
}

impl HeldIndex {
    pub fn new(redis: RedisConn, ns: &crate::keys::Namespace, docs: Arc<dyn DocumentStore>) -> Self {
        Self {
            redis,
            key: ns.held(),
            months_key: format!("{}:months", ns.held()),
            docs,
        }
    }

    /// What is held for each id, in order: one `HMGET`, then the store for the ids the
    /// cache does not know (at most [`HELD_STORE_LOOKUPS_IN_FLIGHT`] at a time), written
    /// back to the cache in one `HSET`. Redis being down is not an error: every id is then
    /// looked up in the store.
    pub async fn lookup(&self, ids: &[&str]) -> Result<Vec<Option<Held>>, HeldError> {
        if ids.is_empty() {
            return Ok(Vec::new());
        }
        let cached: Vec<Option<String>> = match redis::cmd("HMGET")
            .arg(&self.key)
            .arg(ids)
            .query_async(&mut self.redis.clone())
            .await
        {
            Ok(v) => v,
            Err(e) => {
                tracing::warn!(error = %RedisFailure::from(e), "held cache unreadable; asking the store for the whole page");
                vec![None; ids.len()]
            }
        };
        let mut out: Vec<Option<Held>> = cached
            .iter()
            .map(|c| c.as_deref().and_then(Held::decode))
            .collect();
        let unknown: Vec<usize> = (0..ids.len()).filter(|&i| out[i].is_none()).collect();
        if unknown.is_empty() {
            return Ok(out);
        }
        let found: Vec<(usize, StoreAnswer)> = futures::stream::iter(unknown)
            .map(|i| async move { (i, self.in_store(ids[i]).await) })
            .buffer_unordered(HELD_STORE_LOOKUPS_IN_FLIGHT)
            .collect()
            .await;
        let mut warm = Vec::new();
        for (i, held) in found {
            if let Some((h, decided)) = held? {
                warm.push((ids[i], h.clone(), decided));
                out[i] = Some(h);
            }
        }
        self.put(&warm).await;
        Ok(out)
    }

    /// The store's answer for one id: its envelope, else its missing marker, else
    /// nothing; with its decision date when the stored listing gives one.
    async fn in_store(&self, id: &str) -> StoreAnswer {
        for key in [layout::precedent(id)?, layout::missing(id)?] {
            if let Some(body) = self.docs.get(&key).await? {
                // A body that is neither shape is held with no listing: the next listing is
                // a revision and replaces it.
                return Ok(Some(super::envelope::held_from_body(&body).unwrap_or((
                    Held::Stored {
                        listing_hash: None,
                        content_hash: None,
                        first_seen_ms: None,
                    },
                    None,
                ))));
            }
        }
        Ok(None)
    }

    /// Records what the store now holds for `id` (decided on `decided`, `YYYYMMDD`), after
    /// the store write. A failure only costs a store read at the next sight of the id.
    pub async fn record(&self, id: &str, held: &Held, decided: Option<&str>) {
        self.put(&[(id, held.clone(), decided.map(str::to_owned))]).await;
    }

    /// Writes entries to the cache, and counts each id new to it under its decision month
    /// ([`HeldIndex::held_by_month`]).
    async fn put(&self, entries: &[(&str, Held, Option<String>)]) {
        if entries.is_empty() {
            return;
        }
        let mut pipe = redis::pipe();
        for (id, held, _) in entries {
            pipe.cmd("HSET").arg(&self.key).arg(*id).arg(held.encode());
        }
        let added: Vec<i64> = match pipe.query_async(&mut self.redis.clone()).await {
            Ok(v) => v,
            Err(e) => {
                tracing::warn!(error = %RedisFailure::from(e), "held cache not updated; the store has it");
                return;
            }
        };
        let mut counts = redis::pipe();
        let mut any = false;
        for ((_, _, decided), added) in entries.iter().zip(added) {
            if added == 1 {
                counts
                    .cmd("HINCRBY")
                    .arg(&self.months_key)
                    .arg(month_of(decided.as_deref()))
                    .arg(1)
                    .ignore();
                any = true;
            }
        }
        if any && let Err(e) = counts.query_async::<()>(&mut self.redis.clone()).await {
            tracing::warn!(error = %RedisFailure::from(e), "held counts by month not updated");
        }
    }

    /// How many ids the cache holds per decision month (`YYYYMM`, or `undated`), and in
    /// all: what the daily schedule compares law.go.kr's `totalCnt` against.
    pub async fn held_by_month(&self) -> Result<(BTreeMap<String, u64>, u64), RedisFailure> {
        let (months, total): (BTreeMap<String, i64>, u64) = redis::pipe()
            .cmd("HGETALL")
            .arg(&self.months_key)
            .cmd("HLEN")
            .arg(&self.key)
            .query_async(&mut self.redis.clone())
            .await?;
        Ok((
            months.into_iter().map(|(k, v)| (k, v.max(0) as u64)).collect(),
            total,
        ))
    }
}

/// What the store holds for one id, with its decision date; or why it could not say.
type StoreAnswer = Result<Option<(Held, Option<String>)>, DocError>;

/// The month bucket of a decision date: `YYYYMM`, or `undated`.
pub fn month_of(decided: Option<&str>) -> String {
    match decided {
        Some(d) if d.len() == 8 => d[..6].to_owned(),
        _ => "undated".to_owned(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn hit(name: &str) -> PrecedentSummary {
        serde_json::from_value(serde_json::json!({"판례일련번호": "1", "사건명": name})).expect("hit")
    }

    #[test]
    fn cache_values_round_trip_and_bad_ones_are_unknown() {
        for h in [
            Held::Stored {
                listing_hash: Some("sha256:ab".into()),
                content_hash: Some("sha256:cd".into()),
                first_seen_ms: Some(5),
            },
            Held::Stored {
                listing_hash: None,
                content_hash: None,
                first_seen_ms: None,
            },
            Held::Missing {
                checked_ms: 9,
                first_seen_ms: Some(1),
            },
        ] {
            assert_eq!(Held::decode(&h.encode()), Some(h));
        }
        for bad in [
            "",
            "s",
            "s 1 a",
            "x 1 2",
            "m 1 x",
            "m x 1",
            "s a b c",
            "s 1 a b c",
        ] {
            assert_eq!(Held::decode(bad), None, "{bad}");
        }
    }

    #[test]
    fn verdicts() {
        let day = 86_400_000;
        let h = hit("사기");
        let same = Held::Stored {
            listing_hash: Some(super::super::envelope::listing_hash(&h)),
            content_hash: None,
            first_seen_ms: Some(7),
        };
        assert_eq!(
            verdict(&h, Some(&same), false, 0),
            Verdict::Skip {
                first_seen_ms: Some(7)
            }
        );
        let fetch = |reason| Verdict::Fetch {
            reason,
            first_seen_ms: Some(7),
        };
        assert_eq!(verdict(&h, Some(&same), true, 0), fetch(FetchReason::Refresh));
        assert_eq!(
            verdict(&hit("사기 [정정]"), Some(&same), false, 0),
            fetch(FetchReason::Revised)
        );
        let legacy = Held::Stored {
            listing_hash: None,
            content_hash: None,
            first_seen_ms: Some(7),
        };
        assert_eq!(verdict(&h, Some(&legacy), false, 0), fetch(FetchReason::Revised));
        let missing = Held::Missing {
            checked_ms: 10 * day,
            first_seen_ms: Some(7),
        };
        let recheck_at = 10 * day + MISSING_RECHECK.as_millis() as u64;
        assert_eq!(
            verdict(&h, Some(&missing), false, recheck_at - 1),
            Verdict::Skip {
                first_seen_ms: Some(7)
            }
        );
        assert_eq!(
            verdict(&h, Some(&missing), false, recheck_at),
            fetch(FetchReason::Recheck)
        );
        assert_eq!(
            verdict(&h, None, false, 0),
            Verdict::Fetch {
                reason: FetchReason::New,
                first_seen_ms: None
            }
        );
    }
}
