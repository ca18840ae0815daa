//! Logging set-up for the functions and the CLI: JSON lines (CloudWatch parses them), level
//! from `RUST_LOG` (default `info`).
//!
//! Crates below lawsync are held at `warn` unless `RUST_LOG` says otherwise: their debug
//! output names hosts and connection details, and nothing of it is needed to operate.

use tracing_subscriber::EnvFilter;

/// The filter used when `RUST_LOG` is unset.
pub const DEFAULT_FILTER: &str = "info,hyper=warn,hyper_util=warn,reqwest=warn,rustls=warn,h2=warn,aws_config=warn,aws_smithy_runtime=warn,redis=warn";

/// Installs the global JSON subscriber. Call once, first thing in `main`.
pub fn init() {
    let filter = EnvFilter::try_from_default_env().unwrap_or_else(|_| EnvFilter::new(DEFAULT_FILTER));
    let _ = tracing_subscriber::fmt()
        .json()
        .with_env_filter(filter)
        .with_current_span(true)
        .with_span_list(false)
        .with_target(true)
        .without_time()
        .try_init();
}

/// The command line's subscriber: the same JSON lines, on stderr, so stdout stays the
/// command's output.
pub fn init_cli() {
    let filter = EnvFilter::try_from_default_env()
        .unwrap_or_else(|_| EnvFilter::new(DEFAULT_FILTER.replacen("info", "warn", 1)));
    let _ = tracing_subscriber::fmt()
        .json()
        .with_env_filter(filter)
        .with_writer(std::io::stderr)
        .try_init();
}
