//! What law.go.kr sends when it refuses the key itself rather than one call, and what to do
//! about each: the causes of the key-health circuit ([`crate::key_health`]).
//!
//! A refusal of the key fails every call alike: retrying each job, once a second for a
//! day, only spends the key's budget and leaves a trail of dead letters. So the first one
//! stops the whole cluster, is alerted once with its likely cause and fix, and is probed
//! every few minutes until it is gone.
//!
//! Refusals come as structured 200 bodies (the verification failure, in JSON and XML),
//! as HTML pages recognised by [`PAGES`], the fingerprint table, or as a certificate that
//! cannot be verified. An HTML page in no entry of the table is not taken for a refusal:
//! it is kept for `lawsync probe` and cools the cluster down (see
//! [`crate::policy::UNKNOWN_PAGE_COOLDOWN`]); when one turns out to be a throttle or block
//! page, it gets an entry here, with where it was seen.

use super::format::Format;

/// Why law.go.kr will not serve this key from here.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum KeyProblem {
    /// `사용자 정보 검증에 실패하였습니다`: the key, the calling IP or the Referer not
    /// accepted. On a first deploy, the stack's egress IP not yet registered.
    VerifyFailed,
    /// `필수입력요소 검증에 실패하였습니다`: law.go.kr received no key.
    KeyMissing,
    /// `미신청된 목록/본문에 대한 접근입니다`: the key has not been granted this list or
    /// body API in the format asked for (`None`: in neither format).
    NotApplied { format: Option<Format> },
    /// The anti-bot page (`location.assign(...)`) law.go.kr sends to some cloud IPs.
    AntiBot,
    /// law.go.kr's TLS certificate could not be verified from here.
    Tls { problem: TlsProblem },
}

/// Why a certificate was not accepted: rustls's verdict, reduced to what an operator acts on.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TlsProblem {
    /// No chain to a trusted root: an incomplete chain (rustls does not fetch missing
    /// intermediates, as browsers do), or a root this host does not trust.
    UnknownIssuer,
    /// Expired, or not yet valid.
    Expired,
    /// Not issued for the host name in `LAW_API_BASE_URL`.
    WrongName,
    /// Revoked, badly encoded, or refused for another reason.
    Invalid,
}

impl KeyProblem {
    /// A stable, short name, for records, metrics and the circuit's state.
    pub fn kind(&self) -> &'static str {
        match self {
            KeyProblem::VerifyFailed => "auth_rejected",
            KeyProblem::KeyMissing => "key_missing",
            KeyProblem::NotApplied { format: None } => "not_applied",
            KeyProblem::NotApplied {
                format: Some(Format::Json),
            } => "not_applied_json",
            KeyProblem::NotApplied {
                format: Some(Format::Xml),
            } => "not_applied_xml",
            KeyProblem::AntiBot => "anti_bot",
            KeyProblem::Tls { problem } => match problem {
                TlsProblem::UnknownIssuer => "tls_unknown_issuer",
                TlsProblem::Expired => "tls_expired",
                TlsProblem::WrongName => "tls_wrong_name",
                TlsProblem::Invalid => "tls_invalid",
            },
        }
    }

    /// Every problem, for lookups by [`KeyProblem::kind`].
    pub const ALL: [KeyProblem; 9] = [
        KeyProblem::VerifyFailed,
        KeyProblem::KeyMissing,
        KeyProblem::NotApplied { format: None },
        KeyProblem::NotApplied {
            format: Some(Format::Json),
        },
        KeyProblem::NotApplied {
            format: Some(Format::Xml),
        },
        KeyProblem::AntiBot,
        KeyProblem::Tls {
            problem: TlsProblem::UnknownIssuer,
        },
        KeyProblem::Tls {
            problem: TlsProblem::Expired,
        },
        KeyProblem::Tls {
            problem: TlsProblem::WrongName,
        },
    ];

    /// The problem a [`KeyProblem::kind`] names (as the circuit keeps it), if any.
    pub fn from_kind(kind: &str) -> Option<KeyProblem> {
        if kind == "tls_invalid" {
            return Some(KeyProblem::Tls {
                problem: TlsProblem::Invalid,
            });
        }
        KeyProblem::ALL.into_iter().find(|p| p.kind() == kind)
    }

    /// What happened, in a few words: law.go.kr refused the key, or its certificate was
    /// refused here.
    pub fn headline(&self) -> &'static str {
        match self {
            KeyProblem::Tls { .. } => {
                "law.go.kr's TLS certificate could not be verified (the key was not sent)"
            }
            _ => "law.go.kr refused the key",
        }
    }

    /// What it most likely means, in one sentence.
    pub fn cause(&self) -> &'static str {
        match self {
            KeyProblem::VerifyFailed => {
                "law.go.kr did not accept the key from this address (사용자 정보 검증에 실패): the calling IP is not registered with the key, the key is wrong, or the Referer was refused"
            }
            KeyProblem::KeyMissing => "law.go.kr received no key (필수입력요소 검증에 실패)",
            KeyProblem::NotApplied {
                format: Some(Format::Json),
            } => {
                "the key is not granted this list or body API in JSON (미신청된 목록/본문에 대한 접근입니다)"
            }
            KeyProblem::NotApplied {
                format: Some(Format::Xml),
            } => "the key is not granted this list or body API in XML (미신청된 목록/본문에 대한 접근입니다)",
            KeyProblem::NotApplied { format: None } => {
                "the key is not granted this list or body API in JSON or XML (미신청된 목록/본문에 대한 접근입니다)"
            }
            KeyProblem::AntiBot => {
                "law.go.kr answered with its anti-bot page (location.assign), which it sends to some cloud IPs"
            }
            KeyProblem::Tls {
                problem: TlsProblem::UnknownIssuer,
            } => {
                "law.go.kr's certificate does not chain to a trusted root: the server may send an incomplete chain (rustls does not fetch missing intermediates), or this host lacks the root"
            }
            KeyProblem::Tls {
                problem: TlsProblem::Expired,
            } => "law.go.kr's certificate is expired or not yet valid",
            KeyProblem::Tls {
                problem: TlsProblem::WrongName,
            } => "law.go.kr's certificate is not issued for the host in LAW_API_BASE_URL",
            KeyProblem::Tls {
                problem: TlsProblem::Invalid,
            } => "law.go.kr's certificate was refused (revoked or invalid)",
        }
    }

    /// What to do about it.
    pub fn fix(&self) -> &'static str {
        match self {
            KeyProblem::VerifyFailed => {
                "register the stack's egress IP (the stack output EgressIp) with the key at open.law.go.kr (사용자 정보 → IP 등록), and check the key in its secret"
            }
            KeyProblem::KeyMissing => "check that the key's secret holds the key (LAW_API_OC)",
            KeyProblem::NotApplied { format: Some(_) } => {
                "apply for the list (목록) and body (본문) APIs of 판례 in this format at open.law.go.kr, or set LAW_API_FORMAT=auto to use the format the key is granted"
            }
            KeyProblem::NotApplied { format: None } => {
                "apply for the list (목록) and body (본문) APIs of 판례 at open.law.go.kr (OPEN API → OPEN API 신청)"
            }
            KeyProblem::AntiBot => {
                "call from the registered egress IP; if it is registered, ask law.go.kr (open.law.go.kr) to allow it"
            }
            KeyProblem::Tls {
                problem: TlsProblem::UnknownIssuer,
            } => {
                "put the missing intermediate (or law.go.kr's full chain) in a PEM file and set LAW_API_CA_FILE to it; never switch to http, which sends the key in the clear"
            }
            KeyProblem::Tls { .. } => {
                "check the host in LAW_API_BASE_URL and this host's clock; the key is never sent without a verified certificate"
            }
        }
    }

    /// A refusal no format switch can help with: every kind but [`KeyProblem::NotApplied`]
    /// for one format.
    pub fn is_format_specific(&self) -> bool {
        matches!(self, KeyProblem::NotApplied { format: Some(_) })
    }
}

/// An HTML page law.go.kr is known to send instead of a reply, and what it means.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Fingerprint {
    /// A short name, for logs.
    pub name: &'static str,
    /// Text every one of which the page contains.
    pub marks: &'static [&'static str],
    /// The refusal it is.
    pub problem: KeyProblem,
    /// Where it was seen: a public source, so that an entry can be checked.
    pub seen: &'static str,
}

/// The pages law.go.kr is known to send instead of a reply. No throttle or block page of
/// law.go.kr had been recorded publicly by 2026-12 (law.go.kr documents no rate limit, and
/// public clients report no 429); a page of no entry here is kept for `lawsync probe`.
pub const PAGES: &[Fingerprint] = &[
    Fingerprint {
        name: "anti-bot challenge",
        marks: &["location.assign"],
        problem: KeyProblem::AntiBot,
        seen: "rabqatab/LexLink-ko-mcp CHANGELOG v1.5.1 (2026-03-01) and chrisryugj/korean-law-mcp src/lib/law-antibot.ts: a small <script> page calling location.assign, sent to GCP and AWS IPs",
    },
    Fingerprint {
        name: "not applied for",
        marks: &["미신청된 목록/본문에 대한 접근입니다"],
        problem: KeyProblem::NotApplied { format: None },
        seen: "rabqatab/LexLink-ko-mcp docs/ISSUES.md (2025-11-10): <h2>미신청된 목록/본문에 대한 접근입니다</h2> for type=JSON while type=XML worked",
    },
];

/// The entry of [`PAGES`] a page matches, if any.
pub fn recognise(page: &str) -> Option<&'static Fingerprint> {
    PAGES.iter().find(|f| f.marks.iter().all(|m| page.contains(m)))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_entry_says_where_it_was_seen_and_matches_its_own_marks() {
        for f in PAGES {
            assert!(f.seen.len() > 20, "{}: cite a source", f.name);
            let page = format!("<html><body>{}</body></html>", f.marks.join(" "));
            assert_eq!(recognise(&page).map(|x| x.name), Some(f.name));
        }
        assert_eq!(recognise("<html><body>점검 중</body></html>"), None);
    }

    #[test]
    fn every_problem_names_its_cause_and_its_fix_and_is_found_by_its_kind() {
        let invalid = KeyProblem::Tls {
            problem: TlsProblem::Invalid,
        };
        for p in KeyProblem::ALL.into_iter().chain([invalid]) {
            assert!(!p.cause().is_empty() && !p.fix().is_empty(), "{p:?}");
            assert_eq!(KeyProblem::from_kind(p.kind()), Some(p), "{p:?}");
        }
        assert_eq!(KeyProblem::from_kind("bogus"), None);
        assert!(KeyProblem::VerifyFailed.fix().contains("EgressIp"));
        assert!(
            KeyProblem::Tls {
                problem: TlsProblem::UnknownIssuer
            }
            .fix()
            .contains("LAW_API_CA_FILE")
        );
    }
}
