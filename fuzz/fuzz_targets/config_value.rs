//! Configuration values through `Config::from_lookup` (never the process environment):
//! a configuration, or an error that names a variable that was set, and never the key.
//!
//! Input: lines `NAME=VALUE`; `LAW_API_OC` is the key unless a line sets it. `%` in a value
//! stands for the key. The key may show in a variable that is echoed by design (a queue
//! URL, a bucket, an ARN, APP_ENV, ...); it must not show from LAW_API_OC, REDIS_URL,
//! SLACK_WEBHOOK_URL, or LAW_API_BASE_URL's query string.
#![no_main]

use std::collections::BTreeMap;

use lawsync::config::Config;
use lawsync_fuzz::{OC, expand};
use libfuzzer_sys::fuzz_target;

/// Where the key may go without ever being shown.
fn secret_place(name: &str, raw: &str) -> bool {
    match name {
        "LAW_API_OC" | "REDIS_URL" | "SLACK_WEBHOOK_URL" => true,
        // Only in the query string: a base URL is otherwise shown, path and all.
        "LAW_API_BASE_URL" => match (raw.find('?'), raw.find('%')) {
            (Some(q), Some(k)) => q < k && !raw.contains('#'),
            (_, None) => true,
            _ => false,
        },
        _ => !raw.contains('%'),
    }
}

fuzz_target!(|data: &[u8]| {
    let text = String::from_utf8_lossy(data);
    let mut raw: BTreeMap<String, String> = BTreeMap::from([("LAW_API_OC".into(), "%".into())]);
    for line in text.lines() {
        if let Some((name, value)) = line.split_once('=') {
            raw.insert(name.to_owned(), value.to_owned());
        }
    }
    let vars: BTreeMap<String, String> = raw
        .iter()
        .map(|(k, v)| {
            (
                k.clone(),
                String::from_utf8_lossy(&expand(v.as_bytes())).into_owned(),
            )
        })
        .collect();
    let watch_key = raw.iter().all(|(k, v)| secret_place(k, v));
    match Config::from_lookup(|name| vars.get(name).cloned()) {
        Ok(cfg) => {
            if watch_key {
                let shown = format!("{cfg:?}");
                assert!(
                    !shown.contains(OC),
                    "the key in the configuration's Debug: {shown}"
                );
            }
        }
        Err(e) => {
            let shown = e.to_string();
            assert!(
                raw.contains_key(e.var),
                "the error names {}, which was not set: {shown}",
                e.var
            );
            assert!(shown.starts_with(&format!("{}: ", e.var)), "{shown}");
            assert!(!e.reason.trim().is_empty(), "{shown}");
            if watch_key {
                let debug = format!("{e:?}");
                assert!(
                    !shown.contains(OC) && !debug.contains(OC),
                    "the key in an error: {debug}"
                );
            }
        }
    }
});
