//! SQS message bodies as the search and detail functions read them: a message, or a
//! clear reason that carries nothing of the body.
//!
//! Input: a first byte `D` for the detail function (anything else: search), then the body.
#![no_main]

use lawsync::app::sqs::{Message, MessageKind, parse_message};
use lawsync::law::check_precedent_id;
use lawsync_fuzz::{assert_clear, expand};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let Some((&first, rest)) = data.split_first() else {
        return;
    };
    let kind = if first == b'D' {
        MessageKind::Detail
    } else {
        MessageKind::Search
    };
    let body = String::from_utf8_lossy(&expand(rest)).into_owned();
    match parse_message(kind, &body) {
        Err(e) => {
            let reason = e.to_string();
            assert_clear("parse_message", &reason);
            assert_clear("parse_message (Debug)", &format!("{e:?}"));
            assert!(reason.contains("invalid message body"), "{reason}");
        }
        Ok(Message::Detail(d)) => {
            assert_eq!(kind, MessageKind::Detail);
            assert!(check_precedent_id(&d.id).is_ok(), "id {:?} taken", d.id);
        }
        Ok(Message::Search(req)) => {
            assert_eq!(kind, MessageKind::Search);
            assert!(req.params().is_ok(), "{req:?} taken");
        }
    }
});
