//! The gate's Lua scripts, each loaded here and nowhere else.
//!
//! [`redis::Script`] sends `EVALSHA` and falls back to `EVAL` once on `NOSCRIPT` (a fresh
//! or failed-over node), so a steady-state call is one round trip.

use std::sync::LazyLock;

use redis::Script;

/// Reserve or confirm a slot. Contract in `lua/gate_acquire.lua`.
pub(crate) static ACQUIRE: LazyLock<Script> =
    LazyLock::new(|| Script::new(include_str!("../../lua/gate_acquire.lua")));
/// Start or extend the cooldown. Contract in `lua/gate_defer.lua`.
pub(crate) static DEFER: LazyLock<Script> =
    LazyLock::new(|| Script::new(include_str!("../../lua/gate_defer.lua")));
/// Read the state on the holder's clock. Contract in `lua/gate_status.lua`.
pub(crate) static STATUS: LazyLock<Script> =
    LazyLock::new(|| Script::new(include_str!("../../lua/gate_status.lua")));
