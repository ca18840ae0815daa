//! The reply format asked of law.go.kr (`type=JSON` or `type=XML`), and the setting that
//! chooses it (`LAW_API_FORMAT`).
//!
//! law.go.kr grants each key its list and body APIs per format: a key may be served JSON
//! and refused XML, or the reverse, with an HTML page (`미신청된 목록/본문에 대한
//! 접근입니다`) on a 200. Both forms are read into the same types ([`super::xml`]), so the
//! format is a setting, not a code path. With `auto` (the default) the client asks in the
//! format it last found served, JSON at first; a format refused that way is asked once more
//! in the other, and the one that answers is kept for the cluster (in Redis, beside the
//! gate), so later cold starts ask in it at once.

use serde::{Deserialize, Serialize};

/// A reply format law.go.kr serves.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Format {
    Json,
    Xml,
}

impl Format {
    /// The `type=` value.
    pub fn param(self) -> &'static str {
        match self {
            Format::Json => "JSON",
            Format::Xml => "XML",
        }
    }

    /// The name `LAW_API_FORMAT` and the records use.
    pub fn name(self) -> &'static str {
        match self {
            Format::Json => "json",
            Format::Xml => "xml",
        }
    }

    /// The other format.
    pub fn other(self) -> Format {
        match self {
            Format::Json => Format::Xml,
            Format::Xml => Format::Json,
        }
    }

    /// A format by its name, case-blind.
    pub fn parse(name: &str) -> Option<Format> {
        match name.trim().to_ascii_lowercase().as_str() {
            "json" => Some(Format::Json),
            "xml" => Some(Format::Xml),
            _ => None,
        }
    }
}

impl std::fmt::Display for Format {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}

/// `LAW_API_FORMAT`: one format, or whichever the key is served.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum FormatSetting {
    /// The format last found served, JSON at first; a refused one is tried in the other.
    #[default]
    Auto,
    /// Only this format; a refusal of it is a refusal of the key.
    Only(Format),
}

impl FormatSetting {
    /// `auto`, `json` or `xml`, case-blind; `None` for anything else.
    pub fn parse(value: &str) -> Option<FormatSetting> {
        if value.trim().eq_ignore_ascii_case("auto") {
            return Some(FormatSetting::Auto);
        }
        Format::parse(value).map(FormatSetting::Only)
    }

    /// The format a client starts with.
    pub fn first(self) -> Format {
        match self {
            FormatSetting::Auto => Format::Json,
            FormatSetting::Only(f) => f,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn settings_read_case_blind_and_refuse_the_rest() {
        assert_eq!(FormatSetting::parse("AUTO"), Some(FormatSetting::Auto));
        assert_eq!(
            FormatSetting::parse(" xml "),
            Some(FormatSetting::Only(Format::Xml))
        );
        assert_eq!(
            FormatSetting::parse("Json"),
            Some(FormatSetting::Only(Format::Json))
        );
        for bad in ["", "html", "jsonl"] {
            assert_eq!(FormatSetting::parse(bad), None, "{bad}");
        }
        assert_eq!(FormatSetting::Auto.first(), Format::Json);
        assert_eq!(Format::Xml.other(), Format::Json);
    }
}
