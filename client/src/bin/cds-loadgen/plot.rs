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

/// The SVG document for `sorted` latencies (microseconds, ascending), titled `title`.
pub fn svg(sorted: &[u32], title: &str) -> String {
    let mut s = String::new();
    let _ = writeln!(
        s,
        r#"<svg xmlns="http://www.w3.org/2000/svg" width="{W}" height="{H}" viewBox="0 0 {W} {H}" font-family="sans-serif" font-size="12">"#
    );
    let _ = writeln!(s, r#"<rect x="0" y="0" width="{W}" height="{H}" fill="white"/>"#);
    let _ = writeln!(s, r#"<text x="{}" y="25" text-anchor="middle" font-size="15">{}</text>"#, W / 2.0, escape(title));
    let (pw, ph) = (W - LEFT - RIGHT, H - TOP - BOTTOM);
    let bottom = TOP + ph;
    // Axes.
    let _ = writeln!(
        s,
        r#"<path d="M{LEFT},{TOP} V{bottom} H{} V{TOP}" fill="none" stroke="black" stroke-width="1"/>"#,
        LEFT + pw
    );
    if sorted.is_empty() {
        let _ = writeln!(s, r#"<text x="{}" y="{}" text-anchor="middle">no samples</text>"#, W / 2.0, TOP + ph / 2.0);
        s.push_str("</svg>\n");
        return s;
    }
    let max_ms = (*sorted.last().unwrap() as f64 / 1000.0).max(0.001);
    let x_max = nice_ceiling(max_ms);
    let bin_ms = x_max / BINS as f64;
    let mut counts = [0usize; BINS];
    for &us in sorted {
        let i = ((us as f64 / 1000.0) / bin_ms) as usize;
        counts[i.min(BINS - 1)] += 1;
    }
    let y_max = nice_ceiling(*counts.iter().max().unwrap() as f64);
    let x = |ms: f64| LEFT + ms / x_max * pw;
    // Histogram: receipts per bin, left axis.
    for (i, &n) in counts.iter().enumerate() {
        if n == 0 {
            continue;
        }
        let h = n as f64 / y_max * ph;
        let _ = writeln!(
            s,
            r##"<rect x="{:.2}" y="{:.2}" width="{:.2}" height="{:.2}" fill="#7aa6d6" stroke="#3d6fa8" stroke-width="0.5"><title>{:.2}-{:.2} ms: {n}</title></rect>"##,
            x(i as f64 * bin_ms),
            bottom - h,
            pw / BINS as f64,
            h,
            i as f64 * bin_ms,
            (i + 1) as f64 * bin_ms
        );
    }
    // CDF: fraction of receipts at or below each latency, right axis; one point per sample
    // step, thinned to at most ~2 points per pixel.
    let mut d = format!("M{LEFT:.2},{bottom:.2}");
    let n = sorted.len();
    let step = (n / (2 * pw as usize)).max(1);
    for (i, &us) in sorted.iter().enumerate() {
        if i % step != 0 && i + 1 != n {
            continue;
        }
        let _ = write!(d, " L{:.2},{:.2}", x(us as f64 / 1000.0), bottom - (i + 1) as f64 / n as f64 * ph);
    }
    let _ = write!(d, " L{:.2},{TOP:.2}", LEFT + pw);
    let _ = writeln!(s, r##"<path d="{d}" fill="none" stroke="#c0392b" stroke-width="2"/>"##);
    // Ticks and labels.
    for t in 0..=5 {
        let f = t as f64 / 5.0;
        let xt = LEFT + f * pw;
        let _ = writeln!(s, r#"<path d="M{xt:.2},{bottom} v5" stroke="black"/>"#);
        let _ =
            writeln!(s, r#"<text x="{xt:.2}" y="{}" text-anchor="middle">{}</text>"#, bottom + 18.0, label(f * x_max));
        let yt = bottom - f * ph;
        let _ = writeln!(s, r#"<path d="M{LEFT},{yt:.2} h-5" stroke="black"/>"#);
        let _ = writeln!(
            s,
            r#"<text x="{}" y="{:.2}" text-anchor="end">{}</text>"#,
            LEFT - 8.0,
            yt + 4.0,
            label(f * y_max)
        );
        let _ = writeln!(s, r#"<path d="M{},{yt:.2} h5" stroke="black"/>"#, LEFT + pw);
        let _ = writeln!(
            s,
            r#"<text x="{}" y="{:.2}" text-anchor="start">{:.0}%</text>"#,
            LEFT + pw + 8.0,
            yt + 4.0,
            f * 100.0
        );
    }
    let _ = writeln!(
        s,
        r#"<text x="{}" y="{}" text-anchor="middle">latency, file write to receipt (ms)</text>"#,
        LEFT + pw / 2.0,
        H - 15.0
    );
    let _ = writeln!(
        s,
        r#"<text transform="translate(18,{}) rotate(-90)" text-anchor="middle">receipts per bin</text>"#,
        TOP + ph / 2.0
    );
    let _ = writeln!(
        s,
        r##"<text transform="translate({},{}) rotate(90)" text-anchor="middle" fill="#c0392b">cumulative share (CDF)</text>"##,
        W - 15.0,
        TOP + ph / 2.0
    );
    s.push_str("</svg>\n");
    s
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
