//! Redis key names: the only place they are spelled.
//!
//! Every key of one upstream in one environment shares the hash tag
//! `{lawsync:ENV:UPSTREAM}`, so any script touching several of them runs on a Redis
//! Cluster (ElastiCache Serverless) without a CROSSSLOT error, and stages never share a gate.

use crate::config::{ConfigError, parse_namespace};

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

    /// The gate's state hash (`tat`, `sat`, `cool`, `epoch`; see `lua/gate_acquire.lua`).
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

    /// The drainer's single-runner lock.
    pub fn drainer_lock(&self) -> String {
        format!("{}:drainer:lock", self.tag)
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
    fn refuses_braces_and_spaces() {
        assert!(Namespace::new("pr{od", "x").is_err());
        assert!(Namespace::new("prod", "a b").is_err());
        assert!(Namespace::new("", "x").is_err());
    }
}
