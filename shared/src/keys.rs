//! Redis key names: the only place they are spelled.
//!
//! Every key of one upstream in one environment shares the hash tag
//! `{lawsync:ENV:UPSTREAM}`, so any script touching several of them runs on a Redis
//! Cluster (ElastiCache Serverless) without a CROSSSLOT error, and stages never share a
//! queue. The rate gate is the exception: the limit belongs to the API key, not to a
//! stage, so its key is [`GateKey::for_secret`], the same for every environment that
//! shares a Redis and a key.

use hmac::{Hmac, KeyInit, Mac};
use sha2::Sha256;

use crate::config::{ConfigError, parse_namespace};
use crate::secret::Secret;

/// The Redis key of one rate gate's state hash (`v`, `tat`, `sat`, `cool`, `epoch`, `g`;
/// see `lua/includes/gate_state.lua`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct GateKey(String);

impl GateKey {
    /// The gate of `upstream` for the API key `secret`: `{lawsync:gate:UPSTREAM:FP}:gate`,
    /// where FP is a keyed fingerprint (HMAC-SHA-256 under a fixed label, first 96 bits in
    /// hex) of the key. Every process on this Redis with the same key shares the gate,
    /// whatever its `APP_ENV`; the key itself never reaches Redis. A fingerprint does not
    /// hide a guessable key from someone who can read Redis and try candidates: treat
    /// Redis access as sensitive (it holds the queue's payloads too).
    pub fn for_secret(upstream: &str, secret: &Secret) -> Result<Self, ConfigError> {
        let upstream = parse_namespace("upstream name", upstream)?;
        let mut mac = <Hmac<Sha256> as KeyInit>::new_from_slice(GATE_FINGERPRINT_LABEL)
            .expect("HMAC takes a key of any length");
        mac.update(secret.expose().as_bytes());
        let digest = mac.finalize().into_bytes();
        let fp: String = digest[..12].iter().map(|b| format!("{b:02x}")).collect();
        Ok(Self(format!("{{lawsync:gate:{upstream}:{fp}}}:gate")))
    }

    /// The key as Redis sees it.
    pub fn as_str(&self) -> &str {
        &self.0
    }
}

/// A key beside a gate's state, in its hash slot: `{…}:gate` → `{…}:<name>` (the
/// key-health circuit and its records, see [`crate::key_health`]).
pub fn beside_gate(gate_key: &str, name: &str) -> String {
    let stem = gate_key.strip_suffix(":gate").unwrap_or(gate_key);
    format!("{stem}:{name}")
}

/// A gate named by a namespace: per environment, as every gate was before the per-key
/// gate (and as the tests and the per-instance contrast use it).
impl From<&Namespace> for GateKey {
    fn from(ns: &Namespace) -> Self {
        GateKey(ns.gate())
    }
}

/// The HMAC key of [`GateKey::for_secret`]: fixed, so that every release and every stack
/// derives the same gate from the same API key. Changing it splits the gate in two.
const GATE_FINGERPRINT_LABEL: &[u8] = b"lawsync gate identity v1";

/// The key space of one upstream in one environment.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Namespace {
    tag: String,
}

impl Namespace {
    /// `env` is `APP_ENV`; `upstream` names the rate-limited API (e.g. `law-go-kr`).
    pub fn new(env: &str, upstream: &str) -> Result<Self, ConfigError> {
        let env = parse_namespace("APP_ENV", env)?;
        let upstream = parse_namespace("upstream name", upstream)?;
        Ok(Self {
            tag: format!("{{lawsync:{env}:{upstream}}}"),
        })
    }

    /// The hash tag shared by every key of this namespace, braces included.
    pub fn tag(&self) -> &str {
        &self.tag
    }

    /// A gate state hash per environment: the gate of a generic upstream, and the key the
    /// release before this one kept law.go.kr's gate in (adopted once, see
    /// [`crate::gate::Gate::adopting`]).
    pub fn gate(&self) -> String {
        format!("{}:gate", self.tag)
    }

    /// The retry queue's keys.
    pub fn queue(&self) -> QueueKeys {
        let k = |name: &str| format!("{}:q:{name}", self.tag);
        QueueKeys {
            jobs: k("jobs"),
            first: k("first"),
            count: k("count"),
            errors: k("errors"),
            waiting: k("waiting"),
            ready: k("ready"),
            leased: k("leased"),
            lease: k("lease"),
            dead: k("dead"),
            alerts: k("alerts"),
            seq: k("seq"),
            meta: k("meta"),
        }
    }

    /// The capped stream of sanitized failure records (the seed's `job_run_errors`).
    pub fn history(&self) -> String {
        format!("{}:history", self.tag)
    }

    /// Hash: precedent id → what the document store holds for it (the held cache, see
    /// [`crate::mirror::held`]).
    pub fn held(&self) -> String {
        format!("{}:held", self.tag)
    }

    /// The keys of sync run `run_id` (already checked, see [`crate::mirror::runs::RunId`]).
    pub fn run(&self, run_id: &str) -> RunKeys {
        let k = |name: &str| format!("{}:run:{run_id}:{name}", self.tag);
        RunKeys {
            run: format!("{}:run:{run_id}", self.tag),
            ids: k("ids"),
            pages: k("pages"),
            parts: k("parts"),
            changes: k("changes"),
            runs: format!("{}:runs", self.tag),
            unrecorded: format!("{}:runs:unrecorded", self.tag),
            alerts: format!("{}:runs:alerts", self.tag),
        }
    }

    /// Hash: the backfill's windows (`w:<window>` → its state) and its counters.
    pub fn backfill(&self) -> String {
        format!("{}:backfill", self.tag)
    }

    /// Hash: `w:<window>` → the time a backfill window was released (its release claim).
    pub fn backfill_claims(&self) -> String {
        format!("{}:backfill:claims", self.tag)
    }

    /// Hash: open runs that are not backfill windows → the time (ms) after which they no
    /// longer hold the backfill back.
    pub fn foreground_runs(&self) -> String {
        format!("{}:runs:foreground", self.tag)
    }

    /// The drainer's single-runner lock.
    pub fn drainer_lock(&self) -> String {
        format!("{}:drainer:lock", self.tag)
    }
}

/// Every key of one sync run, and the run lists it belongs to.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RunKeys {
    /// Hash: the run's description, counters and completion.
    pub run: String,
    /// Hash: precedent id → its state in the run.
    pub ids: String,
    /// Set: `part|page` of every search page counted.
    pub pages: String,
    /// Set: the parts (windows, probes) the run waits for.
    pub parts: String,
    /// Hash: id → its increment-feed line, until written to the store.
    pub changes: String,
    /// Sorted set: run ids by start (ms), for `lawsync sync status`.
    pub runs: String,
    /// Set: runs whose record (or a further feed file) is owed to the store.
    pub unrecorded: String,
    /// Set: runs whose discrepancy alert is owed.
    pub alerts: String,
}

impl crate::lua::ScriptKeys for RunKeys {
    fn key(&self, name: &str) -> Option<&str> {
        Some(match name {
            "run" => &self.run,
            "ids" => &self.ids,
            "pages" => &self.pages,
            "parts" => &self.parts,
            "changes" => &self.changes,
            "runs" => &self.runs,
            "unrecorded" => &self.unrecorded,
            "alerts" => &self.alerts,
            _ => return None,
        })
    }
}

/// Every key of the retry queue. One entry lives in several of them, by job id.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct QueueKeys {
    /// Hash: id → job JSON (`{"type","payload"}`), written once at enqueue.
    pub jobs: String,
    /// Sorted set: live ids by first failure (ms); gives oldest-first order and age.
    pub first: String,
    /// Hash: id → retryCount.
    pub count: String,
    /// Hash: id → sanitized error history (JSON array, newest last).
    pub errors: String,
    /// Sorted set: ids not yet due, by due time (ms).
    pub waiting: String,
    /// Sorted set: due ids, by first failure (ms).
    pub ready: String,
    /// Sorted set: leased ids, by lease deadline (ms).
    pub leased: String,
    /// Hash: id → current lease token.
    pub lease: String,
    /// Sorted set: dead letters, by the time they died (ms).
    pub dead: String,
    /// Sorted set: dead letters whose alert is not delivered yet, by the time they died.
    pub alerts: String,
    /// Counter for lease tokens.
    pub seq: String,
    /// Hash: `v` = the format of the queue's state (absent: the first release's), checked
    /// by every queue script so that an older release never misreads a newer state.
    pub meta: String,
}

impl QueueKeys {
    /// The key named `name` (a field of this struct), as the queue's scripts name their
    /// keys (see [`crate::lua`]).
    pub fn named(&self, name: &str) -> Option<&str> {
        Some(match name {
            "jobs" => &self.jobs,
            "first" => &self.first,
            "count" => &self.count,
            "errors" => &self.errors,
            "waiting" => &self.waiting,
            "ready" => &self.ready,
            "leased" => &self.leased,
            "lease" => &self.lease,
            "dead" => &self.dead,
            "alerts" => &self.alerts,
            "seq" => &self.seq,
            "meta" => &self.meta,
            _ => return None,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keys_share_one_hash_tag() {
        let ns = Namespace::new("prod", "law-go-kr").expect("valid");
        assert_eq!(ns.gate(), "{lawsync:prod:law-go-kr}:gate");
        // Redis Cluster hashes only the text between the first `{` and the next `}`.
        let tag_of = |k: &str| k[k.find('{').unwrap_or(0)..=k.find('}').unwrap_or(0)].to_owned();
        assert_eq!(tag_of(&ns.gate()), ns.tag());
    }

    #[test]
    fn the_gate_key_is_per_api_key_and_never_holds_it() {
        let oc = Secret::new("my-oc-value".to_owned());
        let a = GateKey::for_secret("law-go-kr", &oc).expect("valid");
        let b = GateKey::for_secret("law-go-kr", &Secret::new("my-oc-value".to_owned())).expect("valid");
        let other = GateKey::for_secret("law-go-kr", &Secret::new("another".to_owned())).expect("valid");
        assert_eq!(a, b, "one key, one gate, whatever the environment");
        assert_ne!(a, other);
        assert!(!a.as_str().contains("my-oc-value"), "{}", a.as_str());
        assert!(
            a.as_str().starts_with("{lawsync:gate:law-go-kr:"),
            "{}",
            a.as_str()
        );
        assert_eq!(a.as_str().len(), "{lawsync:gate:law-go-kr:}:gate".len() + 24);
    }

    #[test]
    fn refuses_braces_and_spaces() {
        assert!(Namespace::new("pr{od", "x").is_err());
        assert!(Namespace::new("prod", "a b").is_err());
        assert!(Namespace::new("", "x").is_err());
    }
}
