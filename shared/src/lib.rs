//! lawsync's shared library: what every function (search, detail, drainer) and the
//! `lawsync` command line stand on.
//!
//! It mirrors a strict public API from many concurrent instances without getting the key
//! banned or leaked: one Redis gate spaces every call across the cluster, a 429 cools the
//! whole cluster down, and the key (OC) is a type that never prints.
//!
//! # Layout
//! - [`alert`]: dead-letter alerts: the [`AlertSink`](alert::AlertSink) trait and a Slack webhook.
//! - [`app`]: what the functions do (search fan-out, detail store, SQS batches), over injected [`app::Deps`].
//! - [`aws`]: AWS SDK configuration and error reduction.
//! - `cli` (feature `cli`): the `lawsync` command line.
//! - `local` (feature `cli`): `lawsync local`, the functions run as AWS would, on one machine.
//! - [`local_events`]: the event lines `lawsync local` writes, as [`LocalEvent`](local_events::LocalEvent).
//! - [`clock`]: instants as Unix epoch milliseconds.
//! - [`config`]: reads and validates every environment variable, once.
//! - [`probe`]: `lawsync probe`, a few dozen calls that check the API's behaviour the mirror relies on.
//! - [`policy`]: every policy number (1 req/s, 30 s, 16 MiB, ...) with its reason.
//! - [`secret`]: [`Secret`], the string that formats as `***`.
//! - [`secrets`]: secrets given as Secrets Manager ARNs, resolved once per cold start.
//! - [`telemetry`]: the JSON log subscriber the functions install.
//! - [`redis_conn`]: [`RedisConn`], standalone or cluster Redis with bounded timeouts, and [`RedisFailure`].
//! - [`keys`]: every Redis key name, hash-tagged per environment and upstream.
//! - [`key_health`]: the key-health circuit (law.go.kr refusing the key itself stops the
//!   cluster, alerts once, and is probed every few minutes), the format the key is served
//!   in, and replies of no known shape kept for `lawsync probe`.
//! - [`gate`]: [`Gate`], the cluster-wide rate gate (GCRA with reservation, cooldown).
//! - [`documents`]: where precedents are stored: a local folder or an S3 bucket.
//! - [`drainer`]: [`Drainer`](drainer::Drainer), passes over the retry queue under the single-runner lock.
//! - [`deadline`]: [`Deadline`], so nothing starts that cannot finish in the invocation.
//! - [`history`]: [`RedisHistory`](history::RedisHistory), the capped stream of sanitized failures.
//! - [`lambda`]: being run by Lambda: a failed cold start reported to `init/error`, the graceful shutdown on SIGTERM.
//! - [`law`]: [`LawClient`], the law.go.kr DRF client, its typed replies and errors.
//! - [`lock`]: [`RunnerLock`](lock::RunnerLock), the single-runner lock (token-checked release).
//! - [`lua`]: every Lua script, assembled from `shared/lua/` with its includes and named keys.
//! - [`queue`]: [`RetryQueue`](queue::RetryQueue), failed work parked in Redis with leases and dead letters.
//!
//! The Lua scripts live in `shared/lua/`, one per atomic operation, each loaded in
//! exactly one place ([`lua`]).

pub mod alert;
pub mod app;
pub mod aws;
#[cfg(feature = "cli")]
pub mod cli;
pub mod clock;
pub mod config;
pub mod deadline;
pub mod documents;
pub mod drainer;
pub mod gate;
pub mod history;
pub mod key_health;
pub mod keys;
pub mod lambda;
pub mod law;
#[cfg(feature = "cli")]
pub mod local;
pub mod local_events;
pub mod lock;
pub mod lua;
pub mod metrics;
pub mod mirror;
pub mod policy;
pub mod probe;
pub mod queue;
pub mod redis_auth;
pub mod redis_conn;
pub mod secret;
pub mod secrets;
pub mod telemetry;

pub use config::{Config, ConfigError, GateConfig};
pub use deadline::Deadline;
pub use gate::{Gate, GateError, Grant, Refusal};
pub use keys::Namespace;
pub use law::{LawClient, LawError};
pub use redis_conn::{RedisConn, RedisFailure};
pub use secret::Secret;
