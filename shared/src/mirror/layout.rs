//! Where the mirror keeps what it writes: every prefix of the document store, what the
//! code does under it, and the key of each object.
//!
//! This table is the one place a prefix is named, one line each (`rustfmt::skip`: the check
//! parses them). `infra/check_template.py` reads it and
//! checks the SAM template's S3 policy grants exactly these actions on exactly these
//! prefixes; the tests' moto stand-in then refuses any call the rendered roles do not
//! allow (`infra/iam`).

use crate::documents::DocError;

/// One prefix of the store and the S3 actions the code uses under it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Prefix {
    /// The prefix, ending in `/`.
    pub path: &'static str,
    /// `s3:GetObject` (read, and `HeadObject`).
    pub read: bool,
    /// `s3:PutObject`.
    pub write: bool,
    /// `s3:ListBucket` restricted to this prefix (listing it, and telling a missing object
    /// from a forbidden one).
    pub list: bool,
}

/// `prec/{id}.json`: one envelope per precedent (see `docs/mirror.md`).
#[rustfmt::skip]
pub const PRECEDENTS: Prefix = Prefix { path: "prec/", read: true, write: true, list: true };
/// `missing/{id}.json`: ids law.go.kr listed but has no detail for, with when it was checked.
#[rustfmt::skip]
pub const MISSING: Prefix = Prefix { path: "missing/", read: true, write: true, list: true };
/// `runs/{run id}.json`: one record per finished sync run.
#[rustfmt::skip]
pub const RUNS: Prefix = Prefix { path: "runs/", read: true, write: true, list: true };
/// `changes/{YYYY-MM-DD}/{HHMMSSmmm}-{run id}.jsonl`: the increment feed, a file per
/// finished run (and per later record of it that adds lines), named by when it is written.
#[rustfmt::skip]
pub const CHANGES: Prefix = Prefix { path: "changes/", read: false, write: true, list: false };
/// `index/decided/{YYYYMMDD}/{id}.json` (and `index/decided/undated/{id}.json`): the index
/// by decision date, one small object per precedent, so no writer ever rewrites another's.
#[rustfmt::skip]
pub const INDEX: Prefix = Prefix { path: "index/", read: false, write: true, list: false };

/// Every prefix, for the template check and the docs.
pub const ALL: [Prefix; 5] = [PRECEDENTS, MISSING, RUNS, CHANGES, INDEX];

/// The key of a precedent's envelope.
pub fn precedent(id: &str) -> Result<String, DocError> {
    crate::documents::precedent_key(id)
}

/// The key of a missing-upstream marker.
pub fn missing(id: &str) -> Result<String, DocError> {
    precedent(id).map(|_| format!("{}{id}.json", MISSING.path))
}
