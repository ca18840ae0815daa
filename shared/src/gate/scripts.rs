//! The gate's Lua scripts, each loaded here and nowhere else.
//!
//! Every script starts with `lua/includes/gate_state.lua`, which reads, checks and writes
//! the state hash, so its format (and its version) is written once.
//! [`redis::Script`] sends `EVALSHA` and falls back to `EVAL` once on `NOSCRIPT` (a fresh
//! or failed-over node), so a steady-state call is one round trip.

use std::sync::LazyLock;

use redis::Script;

/// A gate script with the state include in front of it.
macro_rules! gate_script {
    ($file:literal) => {
        LazyLock::new(|| {
            Script::new(concat!(
                include_str!("../../lua/includes/gate_state.lua"),
                include_str!(concat!("../../lua/", $file))
            ))
        })
    };
}

/// Reserve or confirm a slot. Contract in `lua/gate_acquire.lua`.
pub(crate) static ACQUIRE: LazyLock<Script> = gate_script!("gate_acquire.lua");
/// Start or extend the cooldown. Contract in `lua/gate_defer.lua`.
pub(crate) static DEFER: LazyLock<Script> = gate_script!("gate_defer.lua");
/// Read the state on the holder's clock. Contract in `lua/gate_status.lua`.
pub(crate) static STATUS: LazyLock<Script> = gate_script!("gate_status.lua");
/// Give back a start that was never sent. Contract in `lua/gate_release.lua`.
pub(crate) static RELEASE: LazyLock<Script> = gate_script!("gate_release.lua");
/// Take over the state the release before kept per environment. Contract in
/// `lua/gate_adopt.lua`.
pub(crate) static ADOPT: LazyLock<Script> = gate_script!("gate_adopt.lua");
