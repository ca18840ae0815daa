//! The retry queue's and the drainer lock's Lua scripts, each loaded here and nowhere else.
//!
//! A script may pull in a shared piece from `lua/includes/` with a line
//! `--- @include "name"` (BullMQ's convention); the piece is pasted in place when the
//! script is first used, so a helper is written once.

use std::sync::LazyLock;

use redis::Script;

/// The shared pieces, by the name an `@include` line gives.
const INCLUDES: &[(&str, &str)] = &[
    ("history", include_str!("../../lua/includes/history.lua")),
    ("version", include_str!("../../lua/includes/version.lua")),
    ("args", include_str!("../../lua/includes/args.lua")),
    ("shape", include_str!("../../lua/includes/shape.lua")),
];

/// `body` with every `--- @include "name"` line replaced by that piece.
///
/// # Panics
/// On an include that does not exist: a build-time mistake, caught by every test that
/// runs the script.
pub fn assemble(body: &str) -> String {
    body.lines()
        .map(|line| match line.trim().strip_prefix("--- @include ") {
            Some(name) => {
                let name = name.trim_matches('"');
                INCLUDES
                    .iter()
                    .find(|(n, _)| *n == name)
                    .map(|(_, text)| *text)
                    .unwrap_or_else(|| panic!("lua: no include named {name:?}"))
            }
            None => line,
        })
        .collect::<Vec<_>>()
        .join("\n")
}

macro_rules! script {
    ($name:ident, $file:literal) => {
        #[doc = concat!("Contract in `lua/", $file, "`.")]
        pub(crate) static $name: LazyLock<Script> =
            LazyLock::new(|| Script::new(&assemble(include_str!(concat!("../../lua/", $file)))));
    };
}

script!(ENQUEUE, "queue_enqueue.lua");
script!(CLAIM, "queue_claim.lua");
script!(SETTLE, "queue_settle.lua");
script!(REDRIVE, "queue_redrive.lua");
script!(BURY, "queue_bury.lua");
script!(STATS, "queue_stats.lua");
script!(ALERTED, "queue_alerted.lua");
script!(LOCK_RELEASE, "lock_release.lua");
script!(LOCK_EXTEND, "lock_extend.lua");
