//! Logging set-up for the functions and the CLI: JSON lines (CloudWatch parses them), level
//! from `RUST_LOG` (default `info`).
//!
//! Crates below lawsync are held at `warn` unless `RUST_LOG` says otherwise: their debug
//! output names hosts and connection details, and nothing of it is needed to operate.
//!
//! # In Lambda ([`init_lambda`])
//! Every line an invocation writes carries its request id (`requestId`) and, when X-Ray
//! tracing is on, its trace id (`xrayTraceId`), lifted from the span `lambda_runtime` opens
//! around each invocation. Lambda's advanced logging controls are honoured:
//! `AWS_LAMBDA_LOG_FORMAT` (`JSON`, the default, or `Text`) and `AWS_LAMBDA_LOG_LEVEL`
//! (`TRACE` … `FATAL`, applied to lawsync; the crates below stay at `warn` or stricter);
//! `RUST_LOG`, when set, overrides the level. A JSON line:
//!
//! ```json
//! {"timestamp":"2026-12-03T04:00:00.123Z","level":"INFO","message":"batch done",
//!  "target":"detail","requestId":"8f5c…","xrayTraceId":"Root=1-…",
//!  "fields":{"summary":"…"},"spans":[{"name":"sqs.message","message_id":"…"}]}
//! ```

use std::io::Write;

use serde_json::{Map, Value};
use tracing::field::{Field, Visit};
use tracing::span::{Attributes, Id, Record};
use tracing::{Event, Subscriber};
use tracing_subscriber::filter::{FilterExt, filter_fn};
use tracing_subscriber::layer::Context;
use tracing_subscriber::prelude::*;
use tracing_subscriber::registry::LookupSpan;
use tracing_subscriber::{EnvFilter, Layer};

/// The filter used when `RUST_LOG` is unset.
pub const DEFAULT_FILTER: &str = "info,hyper=warn,hyper_util=warn,reqwest=warn,rustls=warn,h2=warn,aws_config=warn,aws_smithy_runtime=warn,aws_sigv4=warn,redis=warn";

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

/// Lambda's log format (`AWS_LAMBDA_LOG_FORMAT`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LogFormat {
    Json,
    Text,
}

/// What [`init_lambda`] reads, resolved: the filter directives and the format, and what
/// was wrong with the variables (each reported once the subscriber is installed).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LambdaLogSettings {
    pub filter: String,
    pub format: LogFormat,
    pub problems: Vec<String>,
}

impl LambdaLogSettings {
    /// From the variables `get` returns: `RUST_LOG` (wins when set and valid),
    /// `AWS_LAMBDA_LOG_LEVEL`, `AWS_LAMBDA_LOG_FORMAT`.
    pub fn from_lookup(get: impl Fn(&str) -> Option<String>) -> Self {
        let mut problems = Vec::new();
        let format = match get("AWS_LAMBDA_LOG_FORMAT").as_deref().map(str::trim) {
            None | Some("") => LogFormat::Json,
            Some(f) if f.eq_ignore_ascii_case("json") => LogFormat::Json,
            Some(f) if f.eq_ignore_ascii_case("text") => LogFormat::Text,
            Some(f) => {
                problems.push(format!(
                    "AWS_LAMBDA_LOG_FORMAT is {:?}; expected JSON or Text; logging JSON",
                    f.chars().take(32).collect::<String>()
                ));
                LogFormat::Json
            }
        };
        let level = match get("AWS_LAMBDA_LOG_LEVEL").as_deref().map(str::trim) {
            None | Some("") => None,
            Some(l) => match level_filter(l) {
                Some(f) => Some(f),
                None => {
                    problems.push(format!(
                        "AWS_LAMBDA_LOG_LEVEL is {:?}; expected TRACE, DEBUG, INFO, WARN, ERROR or FATAL; logging at INFO",
                        l.chars().take(32).collect::<String>()
                    ));
                    None
                }
            },
        };
        let from_level = match level {
            None | Some("info") => DEFAULT_FILTER.to_owned(),
            Some(l @ ("trace" | "debug")) => DEFAULT_FILTER.replacen("info", l, 1),
            // As strict as or stricter than the crates below: one level for all.
            Some(l) => l.to_owned(),
        };
        let filter = match get("RUST_LOG").filter(|v| !v.trim().is_empty()) {
            Some(r) if EnvFilter::try_new(&r).is_ok() => r,
            Some(_) => {
                problems.push("RUST_LOG is not a valid filter; using AWS_LAMBDA_LOG_LEVEL's level".into());
                from_level
            }
            None => from_level,
        };
        Self {
            filter,
            format,
            problems,
        }
    }
}

/// `AWS_LAMBDA_LOG_LEVEL`'s value as a filter level (`FATAL` is `error`: tracing has no
/// level above it).
fn level_filter(l: &str) -> Option<&'static str> {
    Some(match l.to_ascii_uppercase().as_str() {
        "TRACE" => "trace",
        "DEBUG" => "debug",
        "INFO" => "info",
        "WARN" => "warn",
        "ERROR" | "FATAL" => "error",
        _ => return None,
    })
}

/// Installs the functions' subscriber (see the module's docs). Call once, first thing in
/// `main`.
pub fn init_lambda() {
    let settings = LambdaLogSettings::from_lookup(|k| std::env::var(k).ok());
    let filter = EnvFilter::try_new(&settings.filter).unwrap_or_else(|_| EnvFilter::new(DEFAULT_FILTER));
    // The invocation's span is opened at INFO; it must exist at any level, or a WARN
    // line would lose its request id.
    let invoke_span = filter_fn(|meta| meta.is_span() && meta.name() == INVOKE_SPAN);
    let _ = tracing_subscriber::registry()
        .with(
            LambdaLog {
                format: settings.format,
            }
            .with_filter(filter.or(invoke_span)),
        )
        .try_init();
    for p in &settings.problems {
        tracing::warn!(problem = %p, "log settings");
    }
}

/// The span `lambda_runtime` opens around each invocation; its fields are lifted to the
/// top of every line written inside it.
const INVOKE_SPAN: &str = "Lambda runtime invoke";
/// The fields lifted.
const LIFTED: [&str; 3] = ["requestId", "xrayTraceId", "tenantId"];

/// The layer writing Lambda's lines to stdout, where Lambda reads them.
#[derive(Debug)]
pub struct LambdaLog {
    pub format: LogFormat,
}

/// A span's fields, kept in its extensions.
struct SpanFields(Map<String, Value>);

struct JsonVisitor<'a>(&'a mut Map<String, Value>);

impl Visit for JsonVisitor<'_> {
    fn record_debug(&mut self, field: &Field, value: &dyn std::fmt::Debug) {
        self.0
            .insert(field.name().to_owned(), Value::String(format!("{value:?}")));
    }
    fn record_str(&mut self, field: &Field, value: &str) {
        self.0
            .insert(field.name().to_owned(), Value::String(value.to_owned()));
    }
    fn record_i64(&mut self, field: &Field, value: i64) {
        self.0.insert(field.name().to_owned(), value.into());
    }
    fn record_u64(&mut self, field: &Field, value: u64) {
        self.0.insert(field.name().to_owned(), value.into());
    }
    fn record_f64(&mut self, field: &Field, value: f64) {
        self.0.insert(field.name().to_owned(), value.into());
    }
    fn record_bool(&mut self, field: &Field, value: bool) {
        self.0.insert(field.name().to_owned(), value.into());
    }
    fn record_error(&mut self, field: &Field, value: &(dyn std::error::Error + 'static)) {
        self.0
            .insert(field.name().to_owned(), Value::String(value.to_string()));
    }
}

impl<S> Layer<S> for LambdaLog
where
    S: Subscriber + for<'a> LookupSpan<'a>,
{
    fn on_new_span(&self, attrs: &Attributes<'_>, id: &Id, ctx: Context<'_, S>) {
        let mut fields = Map::new();
        attrs.record(&mut JsonVisitor(&mut fields));
        if let Some(span) = ctx.span(id) {
            span.extensions_mut().insert(SpanFields(fields));
        }
    }

    fn on_record(&self, id: &Id, values: &Record<'_>, ctx: Context<'_, S>) {
        if let Some(span) = ctx.span(id)
            && let Some(fields) = span.extensions_mut().get_mut::<SpanFields>()
        {
            values.record(&mut JsonVisitor(&mut fields.0));
        }
    }

    fn on_event(&self, event: &Event<'_>, ctx: Context<'_, S>) {
        let mut fields = Map::new();
        event.record(&mut JsonVisitor(&mut fields));
        let message = fields.remove("message");
        let mut lifted = Map::new();
        let mut spans = Vec::new();
        if let Some(scope) = ctx.event_scope(event) {
            for span in scope.from_root() {
                let ext = span.extensions();
                let mut own = ext.get::<SpanFields>().map(|f| f.0.clone()).unwrap_or_default();
                for name in LIFTED {
                    if let Some(v) = own.remove(name) {
                        lifted.insert(name.to_owned(), v);
                    }
                }
                if span.name() != INVOKE_SPAN {
                    let mut entry = Map::new();
                    entry.insert("name".into(), span.name().into());
                    entry.extend(own);
                    spans.push(Value::Object(entry));
                }
            }
        }
        let meta = event.metadata();
        let timestamp = crate::clock::rfc3339_millis(crate::clock::now_millis());
        let mut line = match self.format {
            LogFormat::Json => {
                let mut out = Map::new();
                out.insert("timestamp".into(), timestamp.into());
                out.insert("level".into(), meta.level().as_str().into());
                out.insert("message".into(), message.unwrap_or(Value::String(String::new())));
                out.insert("target".into(), meta.target().into());
                out.extend(lifted);
                if !fields.is_empty() {
                    out.insert("fields".into(), Value::Object(fields));
                }
                if !spans.is_empty() {
                    out.insert("spans".into(), Value::Array(spans));
                }
                Value::Object(out).to_string()
            }
            LogFormat::Text => {
                let request = lifted
                    .get("requestId")
                    .and_then(Value::as_str)
                    .unwrap_or("-")
                    .to_owned();
                let text = |v: &Value| match v {
                    Value::String(s) => s.clone(),
                    other => other.to_string(),
                };
                let mut out = format!(
                    "{timestamp}\t{request}\t{}\t{}",
                    meta.level(),
                    message.as_ref().map(text).unwrap_or_default()
                );
                for span in &spans {
                    if let Value::Object(m) = span {
                        for (k, v) in m.iter().filter(|(k, _)| *k != "name") {
                            out.push_str(&format!(" {k}={}", text(v)));
                        }
                    }
                }
                for (k, v) in fields
                    .iter()
                    .chain(lifted.iter().filter(|(k, _)| *k != "requestId"))
                {
                    out.push_str(&format!(" {k}={}", text(v)));
                }
                out
            }
        };
        line.push('\n');
        // One write per line, so lines from several tasks never interleave.
        let _ = std::io::stdout().lock().write_all(line.as_bytes());
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn settings(vars: &[(&str, &str)]) -> LambdaLogSettings {
        LambdaLogSettings::from_lookup(|k| vars.iter().find(|(n, _)| *n == k).map(|(_, v)| (*v).to_owned()))
    }

    #[test]
    fn lambdas_level_and_format_are_read_and_rust_log_overrides() {
        let s = settings(&[]);
        assert_eq!((s.filter.as_str(), s.format), (DEFAULT_FILTER, LogFormat::Json));
        let s = settings(&[
            ("AWS_LAMBDA_LOG_LEVEL", "DEBUG"),
            ("AWS_LAMBDA_LOG_FORMAT", "Text"),
        ]);
        assert!(s.filter.starts_with("debug,hyper=warn"), "{}", s.filter);
        assert_eq!(s.format, LogFormat::Text);
        assert_eq!(settings(&[("AWS_LAMBDA_LOG_LEVEL", "FATAL")]).filter, "error");
        assert_eq!(settings(&[("AWS_LAMBDA_LOG_LEVEL", "warn")]).filter, "warn");
        let s = settings(&[("AWS_LAMBDA_LOG_LEVEL", "ERROR"), ("RUST_LOG", "lawsync=trace")]);
        assert_eq!(s.filter, "lawsync=trace", "RUST_LOG wins");
        assert!(s.problems.is_empty());
    }

    #[test]
    fn bad_values_are_named_and_fall_back() {
        let s = settings(&[("AWS_LAMBDA_LOG_LEVEL", "LOUD"), ("AWS_LAMBDA_LOG_FORMAT", "xml")]);
        assert_eq!((s.filter.as_str(), s.format), (DEFAULT_FILTER, LogFormat::Json));
        assert!(
            s.problems
                .iter()
                .any(|p| p.contains("AWS_LAMBDA_LOG_LEVEL is \"LOUD\"")),
            "{:?}",
            s.problems
        );
        assert!(
            s.problems
                .iter()
                .any(|p| p.contains("AWS_LAMBDA_LOG_FORMAT is \"xml\"")),
            "{:?}",
            s.problems
        );
        let s = settings(&[("RUST_LOG", "info,[[["), ("AWS_LAMBDA_LOG_LEVEL", "WARN")]);
        assert_eq!(s.filter, "warn");
        assert!(s.problems.iter().any(|p| p.contains("RUST_LOG")));
    }
}
