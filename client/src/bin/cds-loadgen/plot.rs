//! `--plot`: the latency distribution as an SVG, a histogram with its CDF drawn over it.
//!
//! Written by hand: one chart of rectangles, one path and some text needs no plotting library
//! (plotters would add a font stack and dozens of crates for the same picture).

use std::fmt::Write;

const W: f64 = 800.0;
const H: f64 = 480.0;
const LEFT: f64 = 70.0;
const RIGHT: f64 = 70.0;
const TOP: f64 = 50.0;
const BOTTOM: f64 = 60.0;
const BINS: usize = 50;

/// The plot area, inside the margins.
const PW: f64 = W - LEFT - RIGHT;
const PH: f64 = H - TOP - BOTTOM;
const PLOT_BOTTOM: f64 = TOP + PH;

/// The SVG document for `sorted` latencies (microseconds, ascending), titled `title`.
pub fn svg(sorted: &[u32], title: &str) -> String {
    let mut s = String::new();
    frame(&mut s, title);
    match sorted.last() {
        None => {
            let _ =
                writeln!(s, r#"<text x="{}" y="{}" text-anchor="middle">no samples</text>"#, W / 2.0, TOP + PH / 2.0);
        }
        Some(&max_us) => {
            let x_max = nice_ceiling((max_us as f64 / 1000.0).max(0.001));
            let counts = histogram(sorted, x_max);
            let y_max = nice_ceiling(*counts.iter().max().unwrap_or(&1) as f64);
            bars(&mut s, &counts, x_max, y_max);
            cdf(&mut s, sorted, x_max);
            ticks(&mut s, x_max, y_max);
            axis_titles(&mut s);
        }
    }
    s.push_str("</svg>\n");
    s
}

/// The document's opening, background, title and axes.
fn frame(s: &mut String, title: &str) {
    let _ = writeln!(
        s,
        r#"<svg xmlns="http://www.w3.org/2000/svg" width="{W}" height="{H}" viewBox="0 0 {W} {H}" font-family="sans-serif" font-size="12">"#
    );
    let _ = writeln!(s, r#"<rect x="0" y="0" width="{W}" height="{H}" fill="white"/>"#);
    let _ = writeln!(s, r#"<text x="{}" y="25" text-anchor="middle" font-size="15">{}</text>"#, W / 2.0, escape(title));
    let _ = writeln!(
        s,
        r#"<path d="M{LEFT},{TOP} V{PLOT_BOTTOM} H{} V{TOP}" fill="none" stroke="black" stroke-width="1"/>"#,
        LEFT + PW
    );
}

/// The x coordinate of a latency of `ms` on an axis up to `x_max`.
fn x_of(ms: f64, x_max: f64) -> f64 {
    LEFT + ms / x_max * PW
}

/// Receipts per bin of `x_max / BINS` milliseconds.
fn histogram(sorted: &[u32], x_max: f64) -> [usize; BINS] {
    let bin_ms = x_max / BINS as f64;
    let mut counts = [0usize; BINS];
    for &us in sorted {
        let i = ((us as f64 / 1000.0) / bin_ms) as usize;
        counts[i.min(BINS - 1)] += 1;
    }
    counts
}

/// The histogram's bars, on the left axis.
fn bars(s: &mut String, counts: &[usize; BINS], x_max: f64, y_max: f64) {
    let bin_ms = x_max / BINS as f64;
    for (i, &n) in counts.iter().enumerate().filter(|(_, n)| **n > 0) {
        let h = n as f64 / y_max * PH;
        let _ = writeln!(
            s,
            r##"<rect x="{:.2}" y="{:.2}" width="{:.2}" height="{:.2}" fill="#7aa6d6" stroke="#3d6fa8" stroke-width="0.5"><title>{:.2}-{:.2} ms: {n}</title></rect>"##,
            x_of(i as f64 * bin_ms, x_max),
            PLOT_BOTTOM - h,
            PW / BINS as f64,
            h,
            i as f64 * bin_ms,
            (i + 1) as f64 * bin_ms
        );
    }
}

/// The CDF: fraction of receipts at or below each latency, on the right axis; one point per
/// sample step, thinned to at most ~2 points per pixel.
fn cdf(s: &mut String, sorted: &[u32], x_max: f64) {
    let mut d = format!("M{LEFT:.2},{PLOT_BOTTOM:.2}");
    let n = sorted.len();
    let step = (n / (2 * PW as usize)).max(1);
    for (i, &us) in sorted.iter().enumerate() {
        if i % step != 0 && i + 1 != n {
            continue;
        }
        let _ =
            write!(d, " L{:.2},{:.2}", x_of(us as f64 / 1000.0, x_max), PLOT_BOTTOM - (i + 1) as f64 / n as f64 * PH);
    }
    let _ = write!(d, " L{:.2},{TOP:.2}", LEFT + PW);
    let _ = writeln!(s, r##"<path d="{d}" fill="none" stroke="#c0392b" stroke-width="2"/>"##);
}

/// Six ticks on each axis with their labels: milliseconds, receipts, cumulative share.
fn ticks(s: &mut String, x_max: f64, y_max: f64) {
    for t in 0..=5 {
        let f = t as f64 / 5.0;
        let xt = LEFT + f * PW;
        let _ = writeln!(s, r#"<path d="M{xt:.2},{PLOT_BOTTOM} v5" stroke="black"/>"#);
        let _ = writeln!(
            s,
            r#"<text x="{xt:.2}" y="{}" text-anchor="middle">{}</text>"#,
            PLOT_BOTTOM + 18.0,
            label(f * x_max)
        );
        let yt = PLOT_BOTTOM - f * PH;
        let _ = writeln!(s, r#"<path d="M{LEFT},{yt:.2} h-5" stroke="black"/>"#);
        let _ = writeln!(
            s,
            r#"<text x="{}" y="{:.2}" text-anchor="end">{}</text>"#,
            LEFT - 8.0,
            yt + 4.0,
            label(f * y_max)
        );
        let _ = writeln!(s, r#"<path d="M{},{yt:.2} h5" stroke="black"/>"#, LEFT + PW);
        let _ = writeln!(
            s,
            r#"<text x="{}" y="{:.2}" text-anchor="start">{:.0}%</text>"#,
            LEFT + PW + 8.0,
            yt + 4.0,
            f * 100.0
        );
    }
}

/// What each axis measures.
fn axis_titles(s: &mut String) {
    let _ = writeln!(
        s,
        r#"<text x="{}" y="{}" text-anchor="middle">latency, file write to receipt (ms)</text>"#,
        LEFT + PW / 2.0,
        H - 15.0
    );
    let _ = writeln!(
        s,
        r#"<text transform="translate(18,{}) rotate(-90)" text-anchor="middle">receipts per bin</text>"#,
        TOP + PH / 2.0
    );
    let _ = writeln!(
        s,
        r##"<text transform="translate({},{}) rotate(90)" text-anchor="middle" fill="#c0392b">cumulative share (CDF)</text>"##,
        W - 15.0,
        TOP + PH / 2.0
    );
}

/// The next value of the 1, 2, 5 × 10^k series at or above `v`.
fn nice_ceiling(v: f64) -> f64 {
    let exp = 10f64.powf(v.log10().floor());
    for m in [1.0, 2.0, 5.0, 10.0] {
        if m * exp >= v {
            return m * exp;
        }
    }
    10.0 * exp
}

fn label(v: f64) -> String {
    if v == v.round() {
        format!("{v:.0}")
    } else if v >= 1.0 {
        format!("{v:.1}")
    } else {
        format!("{v:.3}")
    }
}

fn escape(text: &str) -> String {
    text.replace('&', "&amp;").replace('<', "&lt;").replace('>', "&gt;").replace('"', "&quot;")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn nice_ceilings() {
        assert_eq!(nice_ceiling(3.0), 5.0);
        assert_eq!(nice_ceiling(10.0), 10.0);
        assert_eq!(nice_ceiling(11.0), 20.0);
        assert_eq!(nice_ceiling(0.3), 0.5);
    }

    #[test]
    fn draws_bars_and_a_cdf() {
        let s = svg(&[1000, 1500, 2000, 40_000], "a <title> & more");
        assert!(s.starts_with("<svg ") && s.ends_with("</svg>\n"));
        assert!(s.matches("<rect").count() >= 3, "background and bars");
        assert!(s.contains("stroke=\"#c0392b\""), "the CDF");
        assert!(s.contains("a &lt;title&gt; &amp; more"));
        assert!(svg(&[], "empty").contains("no samples"));
    }
}
