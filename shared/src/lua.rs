//! Every Lua script lawsync runs, assembled and loaded here and nowhere else.
//!
//! A script in `shared/lua/` opens with its contract (what it does, its keys, its ARGV,
//! its reply and its errors), then pulls in shared pieces from `shared/lua/includes/` with
//! lines `--- @include "name"` (BullMQ's convention). At load time [`LuaScript`]:
//! - pastes each include in place (an include may include others; each piece is pasted
//!   once per script), so the clock, the gate state, the queue's checks and the
//!   membership rules are written once;
//! - binds the script's keys by name right after its contract, as
//!   `local K = { jobs = KEYS[1], ... }`, from the one list of key names each script
//!   declares here, so the Lua says `K.jobs` and never a position, and the Rust side fills
//!   KEYS from the same list ([`LuaScript::prepare`]).
//!
//! The assembled text ([`LuaScript::assembled`]) is what Redis runs and what the contract
//! tests run. [`redis::Script`] sends `EVALSHA` and falls back to `EVAL` once on
//! `NOSCRIPT` (a fresh or failed-over node), so a steady-state call is one round trip.

use std::sync::OnceLock;

use redis::{Script, ScriptInvocation};

use crate::keys::QueueKeys;

/// The shared pieces, by the name an `@include` line gives.
const INCLUDES: &[(&str, &str)] = &[
    ("args", include_str!("../lua/includes/args.lua")),
    ("clock", include_str!("../lua/includes/clock.lua")),
    ("first", include_str!("../lua/includes/first.lua")),
    ("gate_hold", include_str!("../lua/includes/gate_hold.lua")),
    ("gate_state", include_str!("../lua/includes/gate_state.lua")),
    ("health_state", include_str!("../lua/includes/health_state.lua")),
    ("history", include_str!("../lua/includes/history.lua")),
    ("queue_checks", include_str!("../lua/includes/queue_checks.lua")),
    ("queued", include_str!("../lua/includes/queued.lua")),
    ("run_progress", include_str!("../lua/includes/run_progress.lua")),
    ("shape", include_str!("../lua/includes/shape.lua")),
    ("version", include_str!("../lua/includes/version.lua")),
];

/// Where a script's keys come from: a name from its key list to the Redis key.
pub trait ScriptKeys {
    /// The Redis key named `name`, or `None` when this source has no such key.
    fn key(&self, name: &str) -> Option<&str>;
}

impl ScriptKeys for QueueKeys {
    fn key(&self, name: &str) -> Option<&str> {
        QueueKeys::named(self, name)
    }
}

/// One key under its name: the gate's state (`gate`), the runner lock (`lock`).
#[derive(Debug, Clone, Copy)]
pub struct OneKey<'a> {
    pub name: &'static str,
    pub key: &'a str,
}

impl ScriptKeys for OneKey<'_> {
    fn key(&self, name: &str) -> Option<&str> {
        (name == self.name).then_some(self.key)
    }
}

/// One atomic operation: a script of `shared/lua/`, its includes and its named keys.
#[derive(Debug)]
pub struct LuaScript {
    name: &'static str,
    source: &'static str,
    keys: &'static [&'static str],
    loaded: OnceLock<Script>,
}

impl LuaScript {
    const fn new(name: &'static str, source: &'static str, keys: &'static [&'static str]) -> Self {
        Self {
            name,
            source,
            keys,
            loaded: OnceLock::new(),
        }
    }

    /// The script's name, as its file and its contract's first word say.
    pub fn name(&self) -> &'static str {
        self.name
    }

    /// The file as written, contract first.
    pub fn source(&self) -> &'static str {
        self.source
    }

    /// The names of its keys, in KEYS order: `K.<name>` in the Lua.
    pub fn key_names(&self) -> &'static [&'static str] {
        self.keys
    }

    /// The text Redis runs: the contract, the key binding, the includes pasted in.
    ///
    /// # Panics
    /// On an include that does not exist, or a file without a closing `]]` to its
    /// contract: build-time mistakes, caught by every test that runs the script.
    pub fn assembled(&self) -> String {
        let end = self
            .source
            .find("]]")
            .map(|i| i + 2)
            .unwrap_or_else(|| panic!("lua: {} has no contract header", self.name));
        let (contract, body) = self.source.split_at(end);
        let binding: Vec<String> = self
            .keys
            .iter()
            .enumerate()
            .map(|(i, name)| format!("{name} = KEYS[{}]", i + 1))
            .collect();
        let mut out = format!("{contract}\nlocal K = {{ {} }}", binding.join(", "));
        let mut pasted = Vec::new();
        paste(body, &mut pasted, &mut out);
        out
    }

    /// The loaded script (assembled on first use).
    pub fn script(&self) -> &Script {
        self.loaded.get_or_init(|| Script::new(&self.assembled()))
    }

    /// An invocation with KEYS filled from `keys` in the order this script names them;
    /// the ARGV are the caller's.
    ///
    /// # Panics
    /// When `keys` lacks one of the names: a mismatch between a script's key list and the
    /// key source its caller passes, caught by the contract tests.
    pub fn prepare(&self, keys: &impl ScriptKeys) -> ScriptInvocation<'_> {
        let mut call = self.script().prepare_invoke();
        for name in self.keys {
            let key = keys
                .key(name)
                .unwrap_or_else(|| panic!("lua: {} needs a key named {name}", self.name));
            call.key(key);
        }
        call
    }
}

/// `body` with every `--- @include "name"` line replaced by that piece (its own includes
/// pasted first), each piece once.
fn paste(body: &str, pasted: &mut Vec<&'static str>, out: &mut String) {
    for line in body.lines() {
        match line.trim().strip_prefix("--- @include ") {
            Some(name) => {
                let name = name.trim_matches('"');
                let (name, text) = INCLUDES
                    .iter()
                    .find(|(n, _)| *n == name)
                    .copied()
                    .unwrap_or_else(|| panic!("lua: no include named {name:?}"));
                if !pasted.contains(&name) {
                    pasted.push(name);
                    paste(text, pasted, out);
                }
            }
            None => {
                out.push('\n');
                out.push_str(line);
            }
        }
    }
}

const GATE: &[&str] = &["gate"];
const GATE_HEALTH: &[&str] = &["gate", "health"];
const HEALTH: &[&str] = &["health"];
const HEALTH_REFUSED: &[&str] = &["health", "alerted", "gate"];
const HEALTH_ALERT: &[&str] = &["health", "alerted"];
const LOCK: &[&str] = &["lock"];
/// Every key of a sync run (`crate::keys::RunKeys`), for each run script.
const RUN: &[&str] = &[
    "run",
    "ids",
    "pages",
    "parts",
    "changes",
    "runs",
    "unrecorded",
    "alerts",
];

macro_rules! script {
    ($(#[$doc:meta])* $name:ident, $file:literal, $keys:expr) => {
        $(#[$doc])*
        #[doc = concat!("\n\nContract in `shared/lua/", $file, ".lua`.")]
        pub static $name: LuaScript =
            LuaScript::new($file, include_str!(concat!("../lua/", $file, ".lua")), $keys);
    };
}

script!(
    /// Reserve or confirm a start slot on the rate gate.
    GATE_ACQUIRE, "gate_acquire", GATE_HEALTH);
script!(
    /// Start or extend the cluster-wide cooldown.
    GATE_DEFER, "gate_defer", GATE);
script!(
    /// Read the gate's state on the clock of the node that holds it.
    GATE_STATUS, "gate_status", GATE);
script!(
    /// Give back a granted start that was never sent.
    GATE_RELEASE, "gate_release", GATE_HEALTH);
script!(
    /// Take over the state the release before kept per environment.
    GATE_ADOPT, "gate_adopt", GATE);
script!(
    /// Open the key-health circuit, or count one more refusal of the key.
    KEY_REFUSED, "key_refused", HEALTH_REFUSED);
script!(
    /// Close the key-health circuit: the key was accepted.
    KEY_ACCEPTED, "key_accepted", HEALTH);
script!(
    /// End a probe that brought no answer about the key.
    KEY_PROBE_OVER, "key_probe_over", HEALTH);
script!(
    /// Take the key-health circuit's alert on a lease, confirm its delivery, or owe it again.
    KEY_ALERT, "key_alert", HEALTH_ALERT);
script!(
    /// Park a job for a later retry (idempotent; revives a dead letter).
    QUEUE_ENQUEUE, "queue_enqueue",
    &["jobs", "first", "count", "errors", "waiting", "ready", "leased", "lease", "dead", "alerts", "meta"]);
script!(
    /// Lease up to k due jobs.
    QUEUE_CLAIM, "queue_claim",
    &["jobs", "first", "count", "errors", "waiting", "ready", "leased", "lease", "dead", "seq", "meta"]);
script!(
    /// End a lease: ack, retry, dead, release or later.
    QUEUE_SETTLE, "queue_settle",
    &["jobs", "first", "count", "errors", "waiting", "ready", "leased", "lease", "dead", "alerts", "meta"]);
script!(
    /// Record a job straight as a dead letter.
    QUEUE_BURY, "queue_bury",
    &["jobs", "first", "count", "errors", "waiting", "ready", "leased", "lease", "dead", "alerts", "meta"]);
script!(
    /// Put dead letters back as fresh entries.
    QUEUE_REDRIVE, "queue_redrive",
    &["jobs", "first", "count", "errors", "waiting", "dead", "alerts", "meta"]);
script!(
    /// The queue's shape in one atomic read.
    QUEUE_STATS, "queue_stats", &["first", "waiting", "ready", "leased", "dead", "meta"]);
script!(
    /// Mark dead-letter alerts delivered.
    QUEUE_ALERTED, "queue_alerted", &["alerts"]);
script!(
    /// Release the single-runner lock, only by its holder.
    LOCK_RELEASE, "lock_release", LOCK);
script!(
    /// Extend the single-runner lock, only by its holder.
    LOCK_EXTEND, "lock_extend", LOCK);

script!(
    /// Start counting a sync run.
    RUN_OPEN, "run_open", RUN);
script!(
    /// Count one search page of a run, once.
    RUN_PAGE, "run_page", RUN);
script!(
    /// Record what became of one id of a run.
    RUN_MARK, "run_mark", RUN);
script!(
    /// Note that a run's record and feed lines were written.
    RUN_RECORDED, "run_recorded", RUN);
script!(
    /// Forget a finished run, or one that read nothing, so that its id counts afresh.
    RUN_DISCARD, "run_discard", RUN);

/// Every script, for the contract tests.
pub static ALL: [&LuaScript; 23] = [
    &GATE_ACQUIRE,
    &GATE_DEFER,
    &GATE_STATUS,
    &GATE_RELEASE,
    &GATE_ADOPT,
    &KEY_REFUSED,
    &KEY_ACCEPTED,
    &KEY_ALERT,
    &KEY_PROBE_OVER,
    &QUEUE_ENQUEUE,
    &QUEUE_CLAIM,
    &QUEUE_SETTLE,
    &QUEUE_BURY,
    &QUEUE_REDRIVE,
    &QUEUE_STATS,
    &QUEUE_ALERTED,
    &LOCK_RELEASE,
    &LOCK_EXTEND,
    &RUN_OPEN,
    &RUN_PAGE,
    &RUN_MARK,
    &RUN_RECORDED,
    &RUN_DISCARD,
];

#[cfg(test)]
mod tests {
    use super::*;

    /// Each script's contract names exactly the keys this module gives it, in order, and
    /// its code (includes pasted) uses no other.
    #[test]
    fn contracts_name_the_keys_their_callers_fill() {
        for s in ALL {
            let end = s.source().find("]]").expect("contract");
            let contract = &s.source()[..end];
            assert!(
                contract.starts_with(&format!("--[[ {}:", s.name())),
                "{}: contract first",
                s.name()
            );
            assert_eq!(k_names(contract), s.key_names(), "{}: contract keys", s.name());
            let assembled = s.assembled();
            let code = &assembled[assembled.find("local K = ").expect("binding")..];
            for used in k_names(code) {
                assert!(
                    s.key_names().contains(&used.as_str()),
                    "{}: K.{used} is not bound",
                    s.name()
                );
            }
            assert!(
                !assembled.contains("@include"),
                "{}: an include was left",
                s.name()
            );
            assert_eq!(
                code.matches("KEYS[").count(),
                s.key_names().len(),
                "{}: only the binding reads KEYS",
                s.name()
            );
        }
    }

    /// Every `K.name` in `text`, in order, without repeats.
    fn k_names(text: &str) -> Vec<String> {
        let mut out: Vec<String> = Vec::new();
        for (i, _) in text.match_indices("K.") {
            let before = text[..i].chars().next_back();
            if before.is_some_and(|c| c.is_alphanumeric() || c == '_') {
                continue;
            }
            let name: String = text[i + 2..]
                .chars()
                .take_while(|c| c.is_ascii_alphanumeric() || *c == '_')
                .collect();
            if !name.is_empty() && !out.contains(&name) {
                out.push(name);
            }
        }
        out
    }

    #[test]
    fn the_queue_names_every_key_it_passes() {
        let q = crate::keys::Namespace::new("t", "u").expect("valid").queue();
        for s in ALL.iter().filter(|s| s.name().starts_with("queue_")) {
            for name in s.key_names() {
                assert!(q.named(name).is_some(), "{}: no queue key {name}", s.name());
            }
        }
    }
}
