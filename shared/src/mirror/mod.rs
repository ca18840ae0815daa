//! The mirror as its consumers see it: the stored envelope, what is held, the runs that
//! keep it complete, and the increment feed. See `docs/mirror.md`.

pub mod layout;
