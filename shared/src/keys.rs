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

    /// The gate's state hash (`tat`, `cool`).
    pub fn gate(&self) -> String {
        format!("{}:gate", self.tag)
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
    fn refuses_braces_and_spaces() {
        assert!(Namespace::new("pr{od", "x").is_err());
        assert!(Namespace::new("prod", "a b").is_err());
        assert!(Namespace::new("", "x").is_err());
    }
}
