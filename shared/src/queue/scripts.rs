//! The retry queue's and the drainer lock's Lua scripts, each loaded here and nowhere else.

use std::sync::LazyLock;

use redis::Script;

macro_rules! script {
    ($name:ident, $file:literal) => {
        #[doc = concat!("Contract in `lua/", $file, "`.")]
        pub(crate) static $name: LazyLock<Script> =
            LazyLock::new(|| Script::new(include_str!(concat!("../../lua/", $file))));
    };
}

script!(ENQUEUE, "queue_enqueue.lua");
script!(CLAIM, "queue_claim.lua");
script!(SETTLE, "queue_settle.lua");
script!(REDRIVE, "queue_redrive.lua");
script!(BURY, "queue_bury.lua");
script!(STATS, "queue_stats.lua");
script!(LOCK_RELEASE, "lock_release.lua");
script!(LOCK_EXTEND, "lock_extend.lua");
