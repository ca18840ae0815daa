//! The demo's chart and figures, from the local runtime's event lines and the look-alike's
//! arrival log: per-instance call timelines, cooldowns, spacing at law.go.kr.

use std::collections::BTreeSet;

use crate::lookalike::Arrival;

/// One law.go.kr attempt, from an instance's event line.
#[derive(Debug, Clone, PartialEq)]
pub struct Call {
    pub instance: String,
    pub endpoint: String,
    /// When the request was sent, epoch ms.
    pub at_ms: f64,
    pub waited_ms: f64,
    /// `None`: no reply (a network failure or timeout).
    pub status: Option<u16>,
    /// The cooldown this call set (after a 429).
    pub cooldown_ms: Option<f64>,
}

/// A batch that parked jobs in the retry queue.
#[derive(Debug, Clone, PartialEq)]
pub struct Park {
    pub instance: String,
    pub at_ms: f64,
    pub jobs: u64,
}

/// Everything the chart shows.
#[derive(Debug, Clone, Default)]
pub struct Timeline {
    /// Time zero, epoch ms.
    pub t0: f64,
    pub calls: Vec<Call>,
    pub parks: Vec<Park>,
    /// What law.go.kr saw.
    pub arrivals: Vec<Arrival>,
    /// (epoch ms, label) of each injected fault.
    pub injected: Vec<(f64, String)>,
    /// The subtitle's first words (the pacing mode).
    pub mode: String,
    pub rule_ms: u64,
    pub gate_ms: u64,
    /// Whether cooldowns are the cluster's (shared gate) or each instance's own.
    pub shared: bool,
}

/// Gaps between consecutive arrivals at law.go.kr, in ms.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Spacing {
    pub min: f64,
    pub median: f64,
}

impl Timeline {
    /// Every instance that made a call, sorted.
    pub fn instances(&self) -> BTreeSet<&str> {
        self.calls.iter().map(|c| c.instance.as_str()).collect()
    }

    /// Min and median gap between arrivals; `None` with fewer than two.
    pub fn spacing(&self) -> Option<Spacing> {
        let mut at: Vec<f64> = self.arrivals.iter().map(|a| a.at_ms).collect();
        at.sort_by(f64::total_cmp);
        let mut gaps: Vec<f64> = at.windows(2).map(|w| w[1] - w[0]).collect();
        gaps.sort_by(f64::total_cmp);
        Some(Spacing {
            min: *gaps.first()?,
            median: gaps[gaps.len() / 2],
        })
    }

    /// Arrivals answered 429 for breaking the rule.
    pub fn rule_breaks(&self) -> usize {
        self.arrivals.iter().filter(|a| a.cause == "rate").count()
    }

    /// Cooldown periods as [start, end] in epoch ms, overlaps merged.
    pub fn cooldowns(&self) -> Vec<(f64, f64)> {
        let mut spans: Vec<(f64, f64)> = self
            .calls
            .iter()
            .filter_map(|c| c.cooldown_ms.map(|cd| (c.at_ms, c.at_ms + cd)))
            .collect();
        spans.sort_by(|a, b| a.0.total_cmp(&b.0));
        let mut out: Vec<(f64, f64)> = Vec::new();
        for (a, b) in spans {
            match out.last_mut() {
                Some(last) if a <= last.1 => last.1 = last.1.max(b),
                _ => out.push((a, b)),
            }
        }
        out
    }
}

fn escape(s: &str) -> String {
    s.replace('&', "&amp;").replace('<', "&lt;").replace('>', "&gt;")
}

impl Timeline {
    /// The chart: call start times per instance, arrivals at law.go.kr on top, cooldowns
    /// shaded, injected faults marked. Self-contained SVG.
    pub fn svg(&self) -> String {
        let (view, arrivals, injected) = (self, &self.arrivals, &self.injected);
        let rows: Vec<&str> = self.instances().into_iter().collect();
        let (left, right, top, row_h) = (170.0, 30.0, 90.0, 26.0);
        let width = 1200.0;
        let height = top + row_h * (rows.len() as f64 + 1.0) + 80.0;
        let t0 = view.t0;
        let end = view
            .calls
            .iter()
            .map(|c| c.at_ms)
            .chain(arrivals.iter().map(|a| a.at_ms))
            .fold(t0 + 1000.0, f64::max);
        let span = (end - t0) / 1000.0 + 2.0;
        let x = |ms: f64| left + (ms - t0) / 1000.0 / span * (width - left - right);
        let mut s = String::new();
        let mut w = |t: String| s.push_str(&t);
        w(format!(
            r#"<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}" font-family="sans-serif" font-size="12">"#
        ));
        w(format!(
            r#"<rect width="{width}" height="{height}" fill="white"/>"#
        ));
        w(format!(
            r##"<text x="20" y="28" font-size="18" font-weight="bold">lawsync demo: law.go.kr calls per instance over time</text><text x="20" y="50" fill="#444">{} · rule {} ms · gate {} ms · {} calls at law.go.kr · {} broke the rule</text>"##,
            escape(&self.mode),
            self.rule_ms,
            self.gate_ms,
            arrivals.len(),
            arrivals.iter().filter(|a| a.cause == "rate").count()
        ));
        let bottom = top + row_h * (rows.len() as f64 + 1.0);
        for (a, b) in self.cooldowns() {
            w(format!(
                r##"<rect x="{:.1}" y="{top}" width="{:.1}" height="{:.1}" fill="#f8c4c4" opacity="0.6"><title>cluster cooldown {:.1} s</title></rect>"##,
                x(a),
                (x(b) - x(a)).max(1.0),
                bottom - top,
                (b - a) / 1000.0
            ));
        }
        for (at, label) in injected {
            w(format!(
                r##"<line x1="{0:.1}" x2="{0:.1}" y1="{1}" y2="{bottom}" stroke="#e65100" stroke-dasharray="4 3"/><text x="{2:.1}" y="{3}" fill="#e65100">{4}</text>"##,
                x(*at),
                top - 14.0,
                x(*at) + 3.0,
                top - 4.0,
                escape(label)
            ));
        }
        let mut tick = 0.0;
        while tick <= span {
            let tx = left + tick / span * (width - left - right);
            w(format!(
                r##"<line x1="{tx:.1}" x2="{tx:.1}" y1="{top}" y2="{bottom}" stroke="#eee"/><text x="{tx:.1}" y="{:.1}" text-anchor="middle" fill="#666">{tick:.0} s</text>"##,
                bottom + 16.0
            ));
            tick += 10.0;
        }
        let colour = |status: Option<u16>| match status {
            Some(200) => "#2e7d32",
            Some(429) => "#c62828",
            None => "#757575",
            _ => "#ef6c00",
        };
        // Row 0: what law.go.kr saw.
        let y0 = top + 4.0;
        w(format!(
            r#"<text x="10" y="{:.1}" font-weight="bold">law.go.kr (arrivals)</text>"#,
            y0 + 13.0
        ));
        for a in arrivals {
            let fill = if a.cause == "rate" {
                "#b71c1c"
            } else if a.cause.starts_with("injected") {
                "#ef6c00"
            } else {
                "#1565c0"
            };
            w(format!(
                r#"<rect x="{:.1}" y="{y0}" width="3" height="18" fill="{fill}"><title>{} {} {}</title></rect>"#,
                x(a.at_ms),
                a.endpoint,
                a.status,
                escape(&a.cause)
            ));
        }
        for (i, inst) in rows.iter().enumerate() {
            let y = top + row_h * (i as f64 + 1.0) + 4.0;
            w(format!(
                r#"<text x="10" y="{:.1}">{}</text>"#,
                y + 13.0,
                escape(inst)
            ));
            w(format!(
                r##"<line x1="{left}" x2="{:.1}" y1="{:.1}" y2="{:.1}" stroke="#ddd"/>"##,
                width - right,
                y + 9.0,
                y + 9.0
            ));
            for Park {
                at_ms: at, jobs: n, ..
            } in view.parks.iter().filter(|p| p.instance == *inst)
            {
                w(format!(
                    r##"<path d="M{:.1} {:.1} l5 9 h-10 z" fill="#6a1b9a"><title>{n} job(s) parked in the retry queue</title></path>"##,
                    x(*at) + 1.5,
                    y + 4.0
                ));
            }
            for c in view.calls.iter().filter(|c| c.instance == *inst) {
                w(format!(
                    r#"<rect x="{:.1}" y="{y}" width="3" height="18" fill="{}"><title>{} {} waited {:.0} ms</title></rect>"#,
                    x(c.at_ms),
                    colour(c.status),
                    c.endpoint,
                    c.status.map_or("network".to_owned(), |s| s.to_string()),
                    c.waited_ms
                ));
            }
        }
        let ly = bottom + 40.0;
        let legend = [
            ("#2e7d32", "200"),
            ("#c62828", "429"),
            ("#ef6c00", "other status / injected fault"),
            ("#b71c1c", "429 for breaking the rule"),
            ("#1565c0", "arrival at law.go.kr"),
            (
                "#f8c4c4",
                if self.shared {
                    "cluster cooldown"
                } else {
                    "cooldown (one instance's own)"
                },
            ),
            ("#6a1b9a", "jobs parked in the retry queue"),
        ];
        let mut lx = 20.0;
        for (fill, label) in legend {
            w(format!(
                r#"<rect x="{lx}" y="{:.1}" width="12" height="12" fill="{fill}"/><text x="{:.1}" y="{ly}">{label}</text>"#,
                ly - 10.0,
                lx + 16.0
            ));
            lx += 30.0 + label.len() as f64 * 6.5;
        }
        w("</svg>\n".into());
        s
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn call(instance: &str, at_ms: f64, status: u16, cooldown_ms: Option<f64>) -> Call {
        Call {
            instance: instance.into(),
            endpoint: "detail".into(),
            at_ms,
            waited_ms: 5.0,
            status: Some(status),
            cooldown_ms,
        }
    }

    fn arrival(at_ms: f64, cause: &str) -> Arrival {
        Arrival {
            at_ms,
            endpoint: "detail".into(),
            item: None,
            window: None,
            status: if cause == "ok" { 200 } else { 429 },
            cause: cause.into(),
            format: None,
        }
    }

    fn sample() -> Timeline {
        Timeline {
            t0: 1000.0,
            calls: vec![
                call("p1/detail-1", 1000.0, 200, None),
                call("p2/detail-1", 2100.0, 429, Some(2000.0)),
                call("p1/detail-1", 3000.0, 429, Some(3000.0)),
                call("p2/detail-<2>", 9000.0, 200, None),
            ],
            parks: vec![Park {
                instance: "p1/detail-1".into(),
                at_ms: 3100.0,
                jobs: 3,
            }],
            arrivals: vec![
                arrival(1001.0, "ok"),
                arrival(2101.0, "ok"),
                arrival(2601.0, "rate"),
                arrival(9001.0, "ok"),
            ],
            injected: vec![(2000.0, "429 storm & more".into())],
            mode: "the shared Redis gate".into(),
            rule_ms: 1000,
            gate_ms: 1050,
            shared: true,
        }
    }

    #[test]
    fn overlapping_cooldowns_merge_and_spacing_is_measured_between_arrivals() {
        let t = sample();
        assert_eq!(t.cooldowns(), vec![(2100.0, 6000.0)]);
        let s = t.spacing().expect("spacing");
        assert_eq!((s.min, s.median), (500.0, 1100.0));
        assert_eq!(t.rule_breaks(), 1);
        assert_eq!(Timeline::default().spacing(), None);
    }

    #[test]
    fn the_svg_is_well_formed_with_a_row_per_instance() {
        let svg = sample().svg();
        let mut depth = 0i32;
        let mut texts = Vec::new();
        let mut rects = 0;
        for token in xmlparser::Tokenizer::from(svg.as_str()) {
            match token.expect("well-formed XML") {
                xmlparser::Token::ElementStart { local, .. } => {
                    depth += 1;
                    if local.as_str() == "rect" {
                        rects += 1;
                    }
                }
                xmlparser::Token::ElementEnd { end, .. } if !matches!(end, xmlparser::ElementEnd::Open) => {
                    depth -= 1
                }
                xmlparser::Token::Text { text } => texts.push(text.as_str().to_owned()),
                _ => {}
            }
        }
        assert_eq!(depth, 0, "unbalanced elements");
        for row in [
            "law.go.kr (arrivals)",
            "p1/detail-1",
            "p2/detail-1",
            "p2/detail-&lt;2&gt;",
        ] {
            assert!(texts.iter().any(|t| t == row), "no row {row}: {texts:?}");
        }
        assert!(texts.iter().any(|t| t == "429 storm &amp; more"));
        // Background, one cooldown, 4 arrivals, 4 calls, 7 legend squares.
        assert_eq!(rects, 1 + 1 + 4 + 4 + 7);
    }
}
