//! Captures everything tracing emits during a test binary's run, at every level and from
//! every crate (reqwest, hyper and redis included, through the `log` bridge), as JSON
//! lines with span fields.

use std::io::Write;
use std::sync::{Arc, Mutex};

use tracing_subscriber::fmt::MakeWriter;

/// The captured bytes; clone it into the subscriber and read it afterwards.
#[derive(Debug, Clone, Default)]
pub struct Captured(Arc<Mutex<Vec<u8>>>);

impl Captured {
    /// All output so far, as text.
    pub fn text(&self) -> String {
        String::from_utf8_lossy(&self.0.lock().expect("capture lock")).into_owned()
    }
}

impl Write for Captured {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        self.0.lock().expect("capture lock").extend_from_slice(buf);
        Ok(buf.len())
    }
    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

impl<'a> MakeWriter<'a> for Captured {
    type Writer = Captured;
    fn make_writer(&'a self) -> Self::Writer {
        self.clone()
    }
}

/// Installs, once per test binary, a TRACE-level JSON subscriber as the global default,
/// writing into one shared buffer, with the `log` bridge; returns that buffer.
///
/// Global rather than per thread: tracing caches each callsite's interest, and with
/// thread-scoped subscribers in a binary whose tests run in parallel, a callsite first
/// hit on another thread can stay disabled. Call it before the code under test logs.
pub fn capture_global() -> Captured {
    static CAPTURED: std::sync::OnceLock<Captured> = std::sync::OnceLock::new();
    CAPTURED
        .get_or_init(|| {
            let captured = Captured::default();
            let _ = tracing_log::LogTracer::init();
            let subscriber = tracing_subscriber::fmt()
                .json()
                .with_max_level(tracing::Level::TRACE)
                .with_current_span(true)
                .with_span_list(true)
                .with_span_events(tracing_subscriber::fmt::format::FmtSpan::FULL)
                .with_writer(captured.clone())
                .finish();
            let _ = tracing::subscriber::set_global_default(subscriber);
            captured
        })
        .clone()
}
