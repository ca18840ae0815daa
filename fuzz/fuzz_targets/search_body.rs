//! `lawSearch.do` reply bodies (HTTP 200): decoded and parsed, or a clear error that
//! carries nothing of the body; the key scrubbed from whatever is kept.
#![no_main]

use lawsync::law::{decode_body, parse_search};
use lawsync_fuzz::{assert_law_error, assert_scrubbed, expand, oc};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let body = expand(data);
    let value = match decode_body(&body, &oc(), "PrecSearch") {
        Ok(v) => v,
        Err(e) => return assert_law_error("decode_body", &e),
    };
    assert_scrubbed(&value);
    match parse_search(value) {
        Err(e) => assert_law_error("parse_search", &e),
        Ok(page) => {
            assert!(page.page >= 1);
            for item in &page.items {
                assert!(
                    !item.id.is_empty() && item.id.trim() == item.id,
                    "id {:?}",
                    item.id
                );
            }
            // Walked, not searched as text: an escape can spell the key (`\f` then `zOC...`).
            assert_scrubbed(&serde_json::to_value(&page).expect("a page serializes"));
        }
    }
});
