//! `latency.svg`: every client operation as a dot at its completion time and latency (log
//! scale), coloured by outcome, with each fault window shaded and named, as Jepsen draws it.

use std::fmt::Write as _;

use crate::checker::completed;
use crate::history::{Op, OpKind, Operation};

const WIDTH: f64 = 1000.0;
const HEIGHT: f64 = 400.0;
const MARGIN: f64 = 50.0;
/// The latency axis spans 1 ms to 10 s.
const LATENCY_DECADES: f64 = 4.0;

pub fn latency_svg(ops: &[Op], faults: &[(String, Vec<u64>, u64, u64)]) -> String {
    let end_ms = ops.last().map_or(1, |op| op.time_ms.max(1)) as f64;
    let x = |ms: u64| MARGIN + (ms as f64 / end_ms) * (WIDTH - 2.0 * MARGIN);
    let y = |latency_ms: u64| {
        let decades = (latency_ms.max(1) as f64).log10().min(LATENCY_DECADES);
        HEIGHT - MARGIN - decades / LATENCY_DECADES * (HEIGHT - 2.0 * MARGIN)
    };
    let mut svg = format!(
        r#"<svg xmlns="http://www.w3.org/2000/svg" width="{WIDTH}" height="{HEIGHT}" font-family="sans-serif" font-size="11">"#
    );
    svg.push_str(r#"<rect width="100%" height="100%" fill="white"/>"#);
    for (name, _, start, stop) in faults {
        let (left, right) = (x(*start), x(*stop));
        let _ = write!(
            svg,
            r##"<rect x="{left:.1}" y="{MARGIN}" width="{:.1}" height="{:.1}" fill="#f4c7c3" opacity="0.6"/><text x="{left:.1}" y="{:.1}">{name}</text>"##,
            right - left,
            HEIGHT - 2.0 * MARGIN,
            MARGIN - 4.0
        );
    }
    for pair in completed(ops) {
        if matches!(
            pair.invoke.f,
            Operation::Status
                | Operation::Digest { .. }
                | Operation::PserverStatus { .. }
                | Operation::MemberChange { .. }
                | Operation::Members
        ) {
            continue;
        }
        let colour = match pair.kind() {
            OpKind::Ok => "#1a73e8",
            OpKind::Fail => "#e8710a",
            _ => "#d93025",
        };
        let latency = pair.complete.time_ms - pair.invoke.time_ms;
        let _ = write!(
            svg,
            r#"<circle cx="{:.1}" cy="{:.1}" r="1.5" fill="{colour}"/>"#,
            x(pair.complete.time_ms),
            y(latency)
        );
    }
    axes(&mut svg, end_ms, &y);
    svg.push_str("</svg>\n");
    svg
}

fn axes(svg: &mut String, end_ms: f64, y: &dyn Fn(u64) -> f64) {
    let bottom = HEIGHT - MARGIN;
    let _ = write!(
        svg,
        r#"<line x1="{MARGIN}" y1="{bottom}" x2="{:.1}" y2="{bottom}" stroke="black"/>"#,
        WIDTH - MARGIN
    );
    let _ = write!(
        svg,
        r#"<line x1="{MARGIN}" y1="{MARGIN}" x2="{MARGIN}" y2="{bottom}" stroke="black"/>"#
    );
    for (latency, label) in
        [(1, "1 ms"), (10, "10 ms"), (100, "100 ms"), (1_000, "1 s"), (10_000, "10 s")]
    {
        let _ = write!(svg, r#"<text x="4" y="{:.1}">{label}</text>"#, y(latency) + 4.0);
    }
    let _ = write!(
        svg,
        r#"<text x="{:.1}" y="{:.1}">time ({:.0} s) — blue ok, orange fail, red unknown</text>"#,
        WIDTH / 2.0 - 120.0,
        HEIGHT - 15.0,
        end_ms / 1000.0
    );
}
