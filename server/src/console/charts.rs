//! Small bar charts of the operator's own latency histograms, read from the registry the
//! metrics endpoint serves (so a chart shows exactly what Prometheus scrapes), drawn as
//! inline SVG on the server: no chart library, nothing to load.

use super::html::Html;
use prometheus_client::registry::Registry;

/// One histogram's buckets, not cumulative: `(upper bound, observations in this bucket)`.
#[derive(Debug, Clone, PartialEq)]
pub struct Histogram {
    pub buckets: Vec<(f64, u64)>,
    pub count: u64,
    pub sum: f64,
}

/// The histograms the console charts: metric name and what it measures.
pub const CHARTS: [(&str, &str); 4] = [
    ("stunner_gateway_operator_render_time_seconds", "Render time"),
    ("stunner_gateway_operator_update_time_seconds", "Update (write) time"),
    ("stunner_gateway_operator_cds_push_time_seconds", "Push time (store to send)"),
    ("stunner_gateway_operator_cds_ack_time_seconds", "Ack time (store to applied)"),
];

/// The registry's text exposition.
pub fn exposition(registry: &Registry) -> String {
    let mut text = String::new();
    // Writing into a String cannot fail.
    let _ = prometheus_client::encoding::text::encode(&mut text, registry);
    text
}

/// Reads histogram `name` (unlabelled) out of a text exposition.
pub fn histogram(exposition: &str, name: &str) -> Option<Histogram> {
    let bucket_prefix = format!("{name}_bucket{{le=\"");
    let mut cumulative = Vec::new();
    let (mut count, mut sum) = (None, None);
    for line in exposition.lines() {
        if let Some(rest) = line.strip_prefix(&bucket_prefix) {
            let (le, value) = rest.split_once("\"} ")?;
            let le = if le == "+Inf" { f64::INFINITY } else { le.parse().ok()? };
            cumulative.push((le, value.trim().parse::<u64>().ok()?));
        } else if let Some(v) = line.strip_prefix(name).and_then(|r| r.strip_prefix("_count ")) {
            count = v.trim().parse().ok();
        } else if let Some(v) = line.strip_prefix(name).and_then(|r| r.strip_prefix("_sum ")) {
            sum = v.trim().parse().ok();
        }
    }
    let mut previous = 0;
    let buckets = cumulative
        .into_iter()
        .map(|(le, total)| {
            let here = total.saturating_sub(previous);
            previous = total;
            (le, here)
        })
        .collect();
    Some(Histogram { buckets, count: count?, sum: sum? })
}

impl Histogram {
    /// The upper bound of the bucket holding the `q` quantile (0..=1).
    pub fn quantile_bound(&self, q: f64) -> Option<f64> {
        let rank = (q * self.count as f64).ceil().max(1.0) as u64;
        let mut seen = 0;
        self.buckets.iter().find_map(|&(le, n)| {
            seen += n;
            (seen >= rank).then_some(le)
        })
    }
}

/// Chart geometry, in SVG user units.
const WIDTH: f64 = 320.0;
const HEIGHT: f64 = 80.0;
/// Buckets drawn at least: the chart keeps its scale while few observations are in.
const MIN_BARS: usize = 8;

/// An SVG bar chart of `h`: one bar per bucket up to the last one used, labelled by bound.
pub fn draw(html: &mut Html, title: &str, h: &Histogram) {
    let used = h.buckets.iter().rposition(|&(_, n)| n > 0).map_or(0, |i| i + 1);
    let bars = &h.buckets[..used.max(MIN_BARS).min(h.buckets.len())];
    let tallest = bars.iter().map(|&(_, n)| n).max().unwrap_or(0).max(1) as f64;
    let width = WIDTH / bars.len().max(1) as f64;
    let view_box = format!("0 0 {WIDTH} {}", HEIGHT + 14.0);
    html.open("figure", &[("class", "chart")]);
    html.open("svg", &[("viewBox", &view_box), ("role", "img"), ("aria-label", title)]);
    for (i, &(le, n)) in bars.iter().enumerate() {
        let height = HEIGHT * n as f64 / tallest;
        let x = format!("{:.1}", i as f64 * width + 1.0);
        html.open(
            "rect",
            &[
                ("x", &x),
                ("y", &format!("{:.1}", HEIGHT - height)),
                ("width", &format!("{:.1}", (width - 2.0).max(1.0))),
                ("height", &format!("{height:.1}")),
            ],
        );
        html.element("title", &[], &format!("≤ {} s: {n}", bound(le))).close("rect");
        if i % 2 == 0 {
            html.element("text", &[("x", &x), ("y", &format!("{}", HEIGHT + 12.0))], &bound(le));
        }
    }
    html.close("svg");
    html.open("figcaption", &[]).element("strong", &[], title).text(&summary(h)).close("figcaption");
    html.close("figure");
}

fn summary(h: &Histogram) -> String {
    if h.count == 0 {
        return " — no observations yet".into();
    }
    let mean = h.sum / h.count as f64;
    let p = |q| h.quantile_bound(q).map_or_else(|| "?".into(), bound);
    let plural = if h.count == 1 { "" } else { "s" };
    format!(" — {} observation{plural}, mean {:.4} s, p50 ≤ {} s, p99 ≤ {} s", h.count, mean, p(0.5), p(0.99))
}

fn bound(le: f64) -> String {
    if le.is_infinite() { "+Inf".into() } else { format!("{le}") }
}

#[cfg(test)]
mod tests {
    use super::*;
    use prometheus_client::metrics::histogram::Histogram as PromHistogram;

    #[test]
    fn reads_a_histogram_back_from_the_exposition() {
        let h = PromHistogram::new([0.01, 0.1, 1.0]);
        for v in [0.005, 0.05, 0.06, 5.0] {
            h.observe(v);
        }
        let mut registry = Registry::default();
        registry.register("stunner_gateway_operator_render_time_seconds", "t", h);
        let text = exposition(&registry);
        let read = histogram(&text, CHARTS[0].0).expect("the histogram is there");
        assert_eq!(read.buckets, [(0.01, 1), (0.1, 2), (1.0, 0), (f64::INFINITY, 1)]);
        assert_eq!(read.count, 4);
        assert_eq!(read.quantile_bound(0.5), Some(0.1));
        assert_eq!(read.quantile_bound(1.0), Some(f64::INFINITY));
        assert!(histogram(&text, "absent").is_none());
        let mut html = Html::new();
        draw(&mut html, "Render time", &read);
        let svg = html.into_string();
        assert_eq!(svg.matches("<rect").count(), 4, "every bucket, the chart having fewer than the minimum");
        assert!(svg.contains("4 observations"));
    }
}
