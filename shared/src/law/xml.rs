//! law.go.kr's XML replies (`type=XML`) read into the shape of its JSON replies, so that
//! one reader serves both forms.
//!
//! The mapping is the one the two forms of the same reply share: the root element becomes
//! the one top-level key (`<PrecSearch>…</PrecSearch>` → `{"PrecSearch":{…}}`); an element
//! with child elements becomes an object of them, a name repeated among siblings an array
//! in document order (one `<prec>` stays an object, as one hit does in JSON); an element
//! without children becomes its text, `""` when empty. Attributes are dropped: the only one
//! law.go.kr sends, `<prec id="1">`, numbers the hits of a page and has no JSON twin.
//!
//! What the real service sends, and is read as sent: text in CDATA sections (a case name
//! whose text ends in `]`, a body with literal `<br/>` inside), whitespace and indentation
//! between elements (the verification failure comes indented), a declaration in either
//! case (`UTF-8` and `utf-8`), HTML's named entities where XML allows none (the search
//! echoes a query's `·` as `&middot;`). An unknown named entity is kept as written rather
//! than failing the reply. Text with child elements (a `<br/>` written as an element) keeps
//! them as literal markup, as the CDATA form has it.
//!
//! Errors say where and what, never the text: a reply may carry anything, the key included.

use serde_json::{Map, Value};
use xmlparser::{ElementEnd, Token, Tokenizer};

/// Why a body is not XML this reader can take. Holds positions and names of the XML's
/// structure, never text.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum XmlError {
    #[error("not well-formed XML at byte {0}")]
    Syntax(usize),
    #[error("a closing tag that does not match the open element at byte {0}")]
    Mismatched(usize),
    #[error("no root element")]
    NoRoot,
    #[error("content after the root element at byte {0}")]
    AfterRoot(usize),
    #[error("nested deeper than {MAX_DEPTH} elements")]
    TooDeep,
}

/// Deepest nesting read: law.go.kr's replies are three levels deep; a hostile body must
/// not recurse without end.
const MAX_DEPTH: usize = 64;

/// One open element while the document is read.
struct Open<'a> {
    name: &'a str,
    /// Where its start tag begins, for re-serializing it as markup inside mixed content.
    from: usize,
    parts: Vec<Part<'a>>,
}

enum Part<'a> {
    /// Text and CDATA, decoded.
    Text(String),
    /// A child element: its name, its value, and its source span.
    Child(&'a str, Value, std::ops::Range<usize>),
}

/// The root element's name and the document as JSON: `{"<root>": value}`.
pub fn to_json(doc: &str) -> Result<(String, Value), XmlError> {
    let mut stack: Vec<Open<'_>> = Vec::new();
    let mut root: Option<(String, Value)> = None;
    for token in Tokenizer::from(doc) {
        let token = token.map_err(|e| XmlError::Syntax(byte_of(doc, e.pos())))?;
        match token {
            Token::ElementStart { local, span, .. } => {
                if root.is_some() {
                    return Err(XmlError::AfterRoot(span.start()));
                }
                if stack.len() >= MAX_DEPTH {
                    return Err(XmlError::TooDeep);
                }
                stack.push(Open {
                    name: local.as_str(),
                    from: span.start(),
                    parts: Vec::new(),
                });
            }
            Token::ElementEnd { end, span } => {
                let closes = match end {
                    ElementEnd::Open => continue,
                    ElementEnd::Empty => None,
                    ElementEnd::Close(_, name) => Some(name.as_str()),
                };
                let open = stack.pop().ok_or(XmlError::Mismatched(span.start()))?;
                if closes.is_some_and(|n| n != open.name) {
                    return Err(XmlError::Mismatched(span.start()));
                }
                let range = open.from..span.end();
                let (name, value) = (open.name, value_of(doc, open.parts));
                match stack.last_mut() {
                    Some(parent) => parent.parts.push(Part::Child(name, value, range)),
                    None => root = Some((name.to_owned(), value)),
                }
            }
            Token::Text { text } => match stack.last_mut() {
                Some(open) => open.parts.push(Part::Text(decode_entities(text.as_str()))),
                None if text.as_str().trim().is_empty() => {}
                None => return Err(XmlError::AfterRoot(text.start())),
            },
            Token::Cdata { text, span } => match stack.last_mut() {
                Some(open) => open.parts.push(Part::Text(text.as_str().to_owned())),
                None => return Err(XmlError::AfterRoot(span.start())),
            },
            // Declarations, comments, processing instructions, a DOCTYPE: no content.
            _ => {}
        }
    }
    if !stack.is_empty() {
        return Err(XmlError::Syntax(doc.len()));
    }
    let (name, value) = root.ok_or(XmlError::NoRoot)?;
    let mut top = Map::new();
    top.insert(name.clone(), value);
    Ok((name, Value::Object(top)))
}

/// An element's value from its parts (see the module docs).
fn value_of(doc: &str, parts: Vec<Part<'_>>) -> Value {
    let has_children = parts.iter().any(|p| matches!(p, Part::Child(..)));
    let has_text = parts
        .iter()
        .any(|p| matches!(p, Part::Text(t) if !t.trim().is_empty()));
    if !has_children {
        let text: String = parts
            .into_iter()
            .filter_map(|p| match p {
                Part::Text(t) => Some(t),
                Part::Child(..) => None,
            })
            .collect();
        return Value::String(text);
    }
    if has_text {
        // Mixed content: the children as the markup they were written as.
        let mut text = String::new();
        for p in parts {
            match p {
                Part::Text(t) => text.push_str(&t),
                Part::Child(_, _, range) => text.push_str(&doc[range]),
            }
        }
        return Value::String(text);
    }
    let mut map = Map::new();
    for p in parts {
        let Part::Child(name, value, _) = p else { continue };
        match map.get_mut(name) {
            None => {
                map.insert(name.to_owned(), value);
            }
            // An element's own value is a string or an object: an array here was built
            // from earlier siblings of the same name.
            Some(Value::Array(items)) => items.push(value),
            Some(first) => {
                let first = std::mem::take(first);
                map.insert(name.to_owned(), Value::Array(vec![first, value]));
            }
        }
    }
    Value::Object(map)
}

/// The byte offset of a 1-based row and column (xmlparser counts characters).
fn byte_of(doc: &str, pos: xmlparser::TextPos) -> usize {
    let line_start: usize = doc
        .split_inclusive('\n')
        .take(pos.row.saturating_sub(1) as usize)
        .map(str::len)
        .sum();
    let rest = &doc[line_start.min(doc.len())..];
    line_start
        + rest
            .char_indices()
            .nth(pos.col.saturating_sub(1) as usize)
            .map_or(rest.len(), |(i, _)| i)
}

/// XML's five entities, numeric references, and the HTML named entities law.go.kr has
/// been seen to send; any other `&…;` is kept as written.
pub fn decode_entities(text: &str) -> String {
    if !text.contains('&') {
        return text.to_owned();
    }
    let mut out = String::with_capacity(text.len());
    let mut rest = text;
    while let Some(at) = rest.find('&') {
        out.push_str(&rest[..at]);
        rest = &rest[at..];
        let end = rest[1..].find(';').map(|i| i + 1).filter(|&i| i <= 12);
        let decoded = end.and_then(|end| entity(&rest[1..end]).map(|c| (c, end)));
        match decoded {
            Some((c, end)) => {
                out.push(c);
                rest = &rest[end + 1..];
            }
            None => {
                out.push('&');
                rest = &rest[1..];
            }
        }
    }
    out.push_str(rest);
    out
}

/// The character an entity's name (between `&` and `;`) stands for.
fn entity(name: &str) -> Option<char> {
    if let Some(num) = name.strip_prefix('#') {
        let code = match num.strip_prefix(['x', 'X']) {
            Some(hex) => u32::from_str_radix(hex, 16).ok()?,
            None => num.parse().ok()?,
        };
        return char::from_u32(code).filter(|c| *c != '\0');
    }
    Some(match name {
        "lt" => '<',
        "gt" => '>',
        "amp" => '&',
        "quot" => '"',
        "apos" => '\'',
        // HTML's, seen in law.go.kr's search echo of a query (`·` as `&middot;`) and in
        // public clients' notes of what it sends.
        "middot" => '\u{00B7}',
        "nbsp" => '\u{00A0}',
        "deg" => '\u{00B0}',
        "hellip" => '\u{2026}',
        "ndash" => '\u{2013}',
        "mdash" => '\u{2014}',
        "lsquo" => '\u{2018}',
        "rsquo" => '\u{2019}',
        "ldquo" => '\u{201C}',
        "rdquo" => '\u{201D}',
        "times" => '\u{00D7}',
        _ => return None,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn repeated_siblings_become_an_array_and_one_stays_an_object() {
        let (root, v) = to_json("<R><h><a>1</a></h><h><a>2</a></h><n>3</n></R>").expect("xml");
        assert_eq!(root, "R");
        assert_eq!(v, json!({"R": {"h": [{"a": "1"}, {"a": "2"}], "n": "3"}}));
        let (_, one) = to_json("<R><h id=\"1\"><a>1</a></h></R>").expect("xml");
        assert_eq!(one, json!({"R": {"h": {"a": "1"}}}));
        let (_, three) = to_json("<R><h>1</h><h>2</h><h>3</h></R>").expect("xml");
        assert_eq!(three, json!({"R": {"h": ["1", "2", "3"]}}));
    }

    #[test]
    fn cdata_entities_and_empty_elements_read_as_sent() {
        let doc = "<?xml version=\"1.0\" encoding=\"utf-8\"?>\n  <R>\n    <a><![CDATA[x]]]]></a>\n    <b></b><c/><d>식품&middot;광고 &amp; &lt;br/&gt; &#51;&#x41; &bogus; & x</d><e><![CDATA[]]></e>\n  </R>\n";
        let (_, v) = to_json(doc).expect("xml");
        assert_eq!(
            v,
            json!({"R": {"a": "x]]", "b": "", "c": "", "d": "식품·광고 & <br/> 3A &bogus; & x", "e": ""}})
        );
    }

    #[test]
    fn mixed_content_keeps_the_children_as_markup() {
        let (_, v) = to_json("<R><t> 가<br/>나 <b>다</b></t></R>").expect("xml");
        assert_eq!(v, json!({"R": {"t": " 가<br/>나 <b>다</b>"}}));
    }

    #[test]
    fn broken_documents_are_named_without_their_text() {
        for (doc, want) in [
            ("", XmlError::NoRoot),
            ("<a><b></a>", XmlError::Mismatched(6)),
            ("<a></a><b/>", XmlError::Syntax(7)),
            ("<a>", XmlError::Syntax(3)),
            (
                "<html><meta charset=\"x\"></head></html>",
                XmlError::Mismatched(24),
            ),
        ] {
            assert_eq!(to_json(doc).map(|_| ()), Err(want), "{doc}");
        }
        assert!(matches!(to_json("<a>1 < 2</a>"), Err(XmlError::Syntax(_))));
        let deep = "<a>".repeat(100) + &"</a>".repeat(100);
        assert_eq!(to_json(&deep).map(|_| ()), Err(XmlError::TooDeep));
        let secret = to_json("<a>KEY-SECRET<</a>").expect_err("broken").to_string();
        assert!(!secret.contains("KEY-SECRET"), "{secret}");
    }
}
