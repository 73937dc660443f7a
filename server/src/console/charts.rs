//! Small bar charts of the operator's own latency histograms, read from the very histograms
//! the metrics endpoint serves (so a chart shows exactly what Prometheus scrapes, without
//! encoding the registry to read four of its metrics back), drawn as inline SVG on the
//! server: no chart library, nothing to load.

use super::html::Html;
use crate::metrics::OperatorMetrics;
use stunner_gateway_cds::CdsMetrics;
use stunner_gateway_cds::latency::{HistogramSnapshot, LatencyHistogram};
use stunner_gateway_k8s::metrics::WriterMetrics;

/// The histograms the console charts, with what each measures: handles to the ones
/// registered for `/metrics`.
#[derive(Debug, Clone)]
pub struct Charts(Vec<(&'static str, LatencyHistogram)>);

impl Charts {
    /// The render, update, push and ack times of these metrics.
    pub fn of(operator: &OperatorMetrics, writer: &WriterMetrics, cds: &CdsMetrics) -> Charts {
        Charts(vec![
            ("Render time", operator.render_time.clone()),
            ("Update (write) time", writer.update_time.clone()),
            ("Push time (store to send)", cds.push_time.clone()),
            ("Ack time (store to applied)", cds.ack_time.clone()),
        ])
    }

    /// Each chart's title and its histogram's values now.
    pub fn read(&self) -> impl Iterator<Item = (&'static str, HistogramSnapshot)> + '_ {
        self.0.iter().map(|(title, h)| (*title, h.snapshot()))
    }
}

/// Histograms nobody else observes: for a console served without the daemon's metrics.
impl Default for Charts {
    fn default() -> Self {
        Charts::of(&OperatorMetrics::default(), &WriterMetrics::default(), &CdsMetrics::default())
    }
}

/// The upper bound of the bucket holding the `q` quantile (0..=1) of `h`.
pub fn quantile_bound(h: &HistogramSnapshot, q: f64) -> Option<f64> {
    let rank = (q * h.count as f64).ceil().max(1.0) as u64;
    let mut seen = 0;
    h.buckets.iter().find_map(|&(le, n)| {
        seen += n;
        (seen >= rank).then_some(le)
    })
}

/// Chart geometry, in SVG user units.
const WIDTH: f64 = 320.0;
const HEIGHT: f64 = 80.0;
/// Buckets drawn at least: the chart keeps its scale while few observations are in.
const MIN_BARS: usize = 8;

/// An SVG bar chart of `h`: one bar per bucket up to the last one used, labelled by bound.
pub fn draw(html: &mut Html, title: &str, h: &HistogramSnapshot) {
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

fn summary(h: &HistogramSnapshot) -> String {
    if h.count == 0 {
        return " — no observations yet".into();
    }
    let mean = h.sum / h.count as f64;
    let p = |q| quantile_bound(h, q).map_or_else(|| "?".into(), bound);
    let plural = if h.count == 1 { "" } else { "s" };
    format!(" — {} observation{plural}, mean {:.4} s, p50 ≤ {} s, p99 ≤ {} s", h.count, mean, p(0.5), p(0.99))
}

fn bound(le: f64) -> String {
    if le.is_infinite() { "+Inf".into() } else { format!("{le}") }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    #[test]
    fn charts_a_histogram_by_its_values() {
        let render = LatencyHistogram::new(&[0.01, 0.1, 1.0]);
        for ms in [2, 30, 40, 2000] {
            render.observe(Duration::from_millis(ms));
        }
        let read = render.snapshot();
        assert_eq!(quantile_bound(&read, 0.5), Some(0.1));
        assert_eq!(quantile_bound(&read, 1.0), Some(f64::INFINITY));
        let mut html = Html::new();
        draw(&mut html, "Render time", &read);
        let svg = html.into_string();
        assert_eq!(svg.matches("<rect").count(), 4, "every bucket, the chart having fewer than the minimum");
        assert!(svg.contains("4 observations"));
    }

    #[test]
    fn charts_read_the_histograms_the_metrics_observe() {
        let operator = OperatorMetrics::default();
        let charts = Charts::of(&operator, &WriterMetrics::default(), &CdsMetrics::default());
        operator.render_time.observe(Duration::from_millis(20));
        let counts: Vec<(&str, u64)> = charts.read().map(|(title, h)| (title, h.count)).collect();
        assert_eq!(
            counts,
            [
                ("Render time", 1),
                ("Update (write) time", 0),
                ("Push time (store to send)", 0),
                ("Ack time (store to applied)", 0)
            ]
        );
    }
}
