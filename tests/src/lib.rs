//! Test kit of lawsync: real parts for black-box tests, never mocks of them.
//!
//! # Layout
//! - [`servers`]: the Redis servers started by `scripts/test-redis.sh` (standalone, a
//!   3-node cluster, and a TLS-only cluster with an ACL user and a replica per primary), a
//!   fresh key namespace per test, connection helpers, and detail jobs parked as a test's
//!   starting state.
//! - [`upstream`]: a real HTTP/1.1 server on `127.0.0.1:0` that plays law.go.kr from a
//!   script of replies, including broken ones, and records what it was sent.
//! - [`lookalike`]: a law.go.kr look-alike over a synthetic corpus that enforces the rate
//!   rule itself, publishes late (a settable "today"), with faults injected on demand; the
//!   demo runs it as `law-lookalike`.
//! - [`mirror`]: a whole mirror driven by hand (look-alike, Redis, SQS and S3 on moto,
//!   the handlers fed the queues' messages, duplicates on demand), and the JSON Schemas of
//!   `docs/schema/` to validate what it stored.
//! - [`stack`]: AWS as a deployed stack has it on the moto stand-in: the template's roles
//!   (calls signed as one are refused unless its grants allow them), resources named as
//!   the template names them, and the stand-in's record of every call.
//! - [`runtime_api`]: a Lambda Runtime API (and the Extensions API's registration) on
//!   loopback, and the functions' deployed `bootstrap` binaries run under it.
//! - [`timeline`]: the demo's SVG chart and spacing figures.
//! - [`idle`]: idle-while-due, the seconds the key sat unused while work waited for it,
//!   from call starts and samples of "work is due" (the demo and the benchmarks report it).
//! - [`backfill`]: what the backfill suites share (requests, status, what the store must
//!   hold, the foreground runs it gives way to).
//! - [`capture`]: a tracing subscriber that keeps every event and span field, so tests
//!   can search the output for the key.
//! - [`leaks`]: Redis keys and values and stored files as text, to search for the key.
//! - [`history`]: the law.go.kr client's failure records held in memory, to read back.
//!
//! Binaries: `gate-probe` (acquires slots from another process), `gate-load` (callers
//! through the gate against the look-alike, for the load test), `bench-gate`, `bench-queue`,
//! `bench-cost`, `law-lookalike` and `demo`.

pub mod backfill;
pub mod capture;
pub mod history;
pub mod idle;
pub mod leaks;
pub mod lookalike;
pub mod mirror;
pub mod runtime_api;
pub mod servers;
pub mod stack;
pub mod timeline;
pub mod upstream;
