//! What the fuzz targets share: how an input becomes a body or a message, and the checks
//! every outcome must pass. A failed check panics, which libFuzzer reports as a crash and
//! keeps the input under `fuzz/artifacts/<target>/`.
//!
//! Two bytes of the input are placeholders, so the fuzzer can put them anywhere:
//! `$` becomes [`MARK`] (no error may carry it) and `%` becomes [`OC`] (the key: no error,
//! decoded body or parsed value may carry it).

use lawsync::Secret;
use lawsync::law::LawError;
use serde_json::Value;

/// Stands for any content of an input: never allowed in an error.
pub const MARK: &str = "FUZZMARK-3c8e71";
/// The key (OC) the targets decode with.
pub const OC: &str = "fzOC4k9Qx2";
/// The search hit field that carries the caller's key.
pub const LINK: &str = "판례상세링크";

/// The key as the library holds it.
pub fn oc() -> Secret {
    Secret::new(OC)
}

/// The input with its placeholders filled in.
pub fn expand(data: &[u8]) -> Vec<u8> {
    let mut out = Vec::with_capacity(data.len() + 32);
    for &b in data {
        match b {
            b'$' => out.extend_from_slice(MARK.as_bytes()),
            b'%' => out.extend_from_slice(OC.as_bytes()),
            _ => out.push(b),
        }
    }
    out
}

/// An error text says something and carries neither the mark nor the key.
pub fn assert_clear(what: &str, text: &str) {
    assert!(!text.trim().is_empty(), "{what}: empty error text");
    assert!(
        !text.contains(MARK),
        "{what}: the error carries input content: {text}"
    );
    assert!(!text.contains(OC), "{what}: the error carries the key: {text}");
}

pub fn assert_law_error(what: &str, e: &LawError) {
    assert_clear(what, &e.to_string());
    assert_clear(what, &format!("{e:?}"));
    assert!(!e.kind().is_empty());
}

/// A decoded body holds no link field and the key nowhere, object keys included.
pub fn assert_scrubbed(v: &Value) {
    match v {
        Value::Object(m) => {
            for (k, x) in m {
                assert!(k != LINK, "the link field survived decoding");
                assert!(!k.contains(OC), "the key survived in an object key: {k:?}");
                assert_scrubbed(x);
            }
        }
        Value::Array(items) => items.iter().for_each(assert_scrubbed),
        Value::String(s) => assert!(!s.contains(OC), "the key survived decoding: {s:?}"),
        _ => {}
    }
}
