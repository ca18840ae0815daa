//! Captures everything tracing emits during a test, at every level and from every crate
//! (reqwest, hyper and redis included), as JSON lines with span fields.

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

/// Installs a TRACE-level JSON subscriber for the current thread (use it in a
/// current-thread runtime so every task logs into it). Keep the guard alive.
///
/// reqwest and redis log through the `log` crate, so a `log` → tracing bridge is
/// installed too (once per process), as a production subscriber's `init()` would.
pub fn capture_all() -> (Captured, tracing::subscriber::DefaultGuard) {
    static BRIDGE: std::sync::Once = std::sync::Once::new();
    BRIDGE.call_once(|| {
        let _ = tracing_log::LogTracer::init();
    });
    let captured = Captured::default();
    let subscriber = tracing_subscriber::fmt()
        .json()
        .with_max_level(tracing::Level::TRACE)
        .with_current_span(true)
        .with_span_list(true)
        .with_span_events(tracing_subscriber::fmt::format::FmtSpan::FULL)
        .with_writer(captured.clone())
        .finish();
    let guard = tracing::subscriber::set_default(subscriber);
    (captured, guard)
}
