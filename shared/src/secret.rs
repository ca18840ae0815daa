//! [`Secret`]: a string that never prints.
//!
//! The law.go.kr key (OC) travels as a query parameter, so every place that formats a
//! value — `Debug`, `Display`, tracing fields, error messages — is a place it could leak.
//! Holding it in this type makes the leak a type error instead of a review finding: the
//! only way to read it is [`Secret::expose`], and every call site of that is an audit point.

use std::fmt;

/// A secret string (an API key, a webhook URL). Formats as `***`; not `Serialize`.
#[derive(Clone, PartialEq, Eq)]
pub struct Secret(Box<str>);

impl Secret {
    /// Wraps a value. Surrounding whitespace is kept: a key is used byte for byte.
    pub fn new(value: impl Into<String>) -> Self {
        Self(value.into().into_boxed_str())
    }

    /// The raw value. Call it only where the secret must leave the process (the request).
    pub fn expose(&self) -> &str {
        &self.0
    }

    /// True for an empty secret (a misconfiguration, never a usable key).
    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }

    /// True when `text` contains the secret. Used by scrubbers and by tests.
    pub fn occurs_in(&self, text: &str) -> bool {
        !self.0.is_empty() && text.contains(&*self.0)
    }

    /// Replaces every occurrence of the secret in `text` by `***`.
    pub fn scrub(&self, text: &str) -> String {
        if self.0.is_empty() {
            text.to_owned()
        } else {
            text.replace(&*self.0, "***")
        }
    }
}

impl fmt::Debug for Secret {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("***")
    }
}

impl fmt::Display for Secret {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("***")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn never_formats_its_value() {
        let s = Secret::new("oc-value-123");
        assert_eq!(format!("{s}"), "***");
        assert_eq!(format!("{s:?}"), "***");
        assert_eq!(format!("{:?}", Some(&s)), "Some(***)");
        assert_eq!(s.expose(), "oc-value-123");
    }

    #[test]
    fn scrubs_every_occurrence() {
        let s = Secret::new("k3y");
        assert_eq!(s.scrub("a k3y b k3y"), "a *** b ***");
        assert!(s.occurs_in("xk3yx"));
        assert!(!Secret::new("").occurs_in("anything"));
    }
}
