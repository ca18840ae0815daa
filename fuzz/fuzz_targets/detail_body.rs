//! `lawService.do` reply bodies (HTTP 200): decoded and parsed, or a clear error that
//! carries nothing of the body; the key scrubbed from the stored document.
#![no_main]

use lawsync::law::{decode_body, parse_detail};
use lawsync_fuzz::{LINK, assert_law_error, assert_scrubbed, expand, oc};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let body = expand(data);
    let value = match decode_body(&body, &oc(), "PrecService") {
        Ok(v) => v,
        Err(e) => return assert_law_error("decode_body", &e),
    };
    assert_scrubbed(&value);
    match parse_detail(value) {
        Err(e) => assert_law_error("parse_detail", &e),
        Ok(doc) => {
            assert!(!doc.id.is_empty());
            assert!(!doc.other.contains_key(LINK));
            // Walked, not searched as text: an escape can spell the key (`\f` then `zOC...`).
            assert_scrubbed(&serde_json::to_value(&doc).expect("a document serializes"));
        }
    }
});
