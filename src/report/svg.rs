//! A small SVG writer for the report's two plots. Hand-written rather than plotters: two simple
//! plots do not justify a plotting dependency and the question of its font features; SVG
//! `<text>` is laid out by the viewer, so nothing here needs a font at build or run time, and the
//! output is byte-stable for tests.

use std::fmt::Write;

const WIDTH: f64 = 700.0;
const HEIGHT: f64 = 420.0;
const LEFT: f64 = 70.0;
const RIGHT: f64 = 210.0;
const TOP: f64 = 40.0;
const BOTTOM: f64 = 60.0;
const COLOURS: [&str; 4] = ["#4c72b0", "#dd8452", "#55a868", "#c44e52"];

/// A labelled series of points.
pub struct Series {
    pub label: String,
    pub points: Vec<(f64, f64)>,
}

/// A point estimate with an interval, drawn as a dot with a vertical bar.
pub struct Interval {
    pub label: String,
    pub estimate: f64,
    pub low: f64,
    pub high: f64,
}

fn escape(text: &str) -> String {
    text.replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
        .replace('"', "&quot;")
}

/// Axis range padded by 5 % (and widened when degenerate).
fn range(values: impl Iterator<Item = f64>) -> (f64, f64) {
    let (mut low, mut high) = (f64::INFINITY, f64::NEG_INFINITY);
    for v in values.filter(|v| v.is_finite()) {
        low = low.min(v);
        high = high.max(v);
    }
    if !low.is_finite() {
        return (0.0, 1.0);
    }
    if high - low < 1e-12 {
        let pad = if low.abs() > 1e-12 {
            low.abs() * 0.1
        } else {
            1.0
        };
        return (low - pad, high + pad);
    }
    let pad = (high - low) * 0.05;
    (low - pad, high + pad)
}

struct Frame {
    x: (f64, f64),
    y: (f64, f64),
    out: String,
}

impl Frame {
    /// `x_ticks` is false for a categorical x axis (labels are drawn by the caller).
    fn new(
        title: &str,
        x_label: &str,
        y_label: &str,
        x: (f64, f64),
        y: (f64, f64),
        x_ticks: bool,
    ) -> Self {
        let mut out = String::new();
        let _ = write!(
            out,
            "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"{WIDTH}\" height=\"{HEIGHT}\" viewBox=\"0 0 {WIDTH} {HEIGHT}\" font-family=\"sans-serif\" font-size=\"12\">\n\
<rect width=\"100%\" height=\"100%\" fill=\"white\"/>\n\
<text x=\"{}\" y=\"22\" text-anchor=\"middle\" font-size=\"15\">{}</text>\n",
            WIDTH / 2.0,
            escape(title)
        );
        let (plot_right, plot_bottom) = (WIDTH - RIGHT, HEIGHT - BOTTOM);
        let _ = write!(
            out,
            "<rect x=\"{LEFT}\" y=\"{TOP}\" width=\"{}\" height=\"{}\" fill=\"none\" stroke=\"#333\"/>\n\
<text x=\"{}\" y=\"{}\" text-anchor=\"middle\">{}</text>\n\
<text x=\"16\" y=\"{}\" text-anchor=\"middle\" transform=\"rotate(-90 16 {})\">{}</text>\n",
            plot_right - LEFT,
            plot_bottom - TOP,
            (LEFT + plot_right) / 2.0,
            HEIGHT - 18.0,
            escape(x_label),
            (TOP + plot_bottom) / 2.0,
            (TOP + plot_bottom) / 2.0,
            escape(y_label)
        );
        let mut frame = Self { x, y, out };
        frame.ticks(x_ticks);
        frame
    }

    fn px(&self, x: f64) -> f64 {
        LEFT + (x - self.x.0) / (self.x.1 - self.x.0) * (WIDTH - RIGHT - LEFT)
    }

    fn py(&self, y: f64) -> f64 {
        HEIGHT - BOTTOM - (y - self.y.0) / (self.y.1 - self.y.0) * (HEIGHT - BOTTOM - TOP)
    }

    fn ticks(&mut self, x_ticks: bool) {
        for i in 0..=4 {
            let fraction = f64::from(i) / 4.0;
            let xv = self.x.0 + fraction * (self.x.1 - self.x.0);
            let yv = self.y.0 + fraction * (self.y.1 - self.y.0);
            let (px, py) = (self.px(xv), self.py(yv));
            if x_ticks {
                let _ = writeln!(
                    self.out,
                    "<line x1=\"{px:.1}\" y1=\"{:.1}\" x2=\"{px:.1}\" y2=\"{:.1}\" stroke=\"#333\"/><text x=\"{px:.1}\" y=\"{:.1}\" text-anchor=\"middle\">{}</text>",
                    HEIGHT - BOTTOM,
                    HEIGHT - BOTTOM + 5.0,
                    HEIGHT - BOTTOM + 18.0,
                    tick_label(xv)
                );
            }
            let _ = writeln!(
                self.out,
                "<line x1=\"{:.1}\" y1=\"{py:.1}\" x2=\"{LEFT}\" y2=\"{py:.1}\" stroke=\"#333\"/><text x=\"{:.1}\" y=\"{:.1}\" text-anchor=\"end\">{}</text>",
                LEFT - 5.0,
                LEFT - 7.0,
                py + 4.0,
                tick_label(yv)
            );
        }
    }

    fn legend(&mut self, index: usize, label: &str) {
        let y = TOP + 10.0 + index as f64 * 18.0;
        let x = WIDTH - RIGHT + 15.0;
        let _ = writeln!(
            self.out,
            "<circle cx=\"{x}\" cy=\"{y}\" r=\"5\" fill=\"{}\"/><text x=\"{}\" y=\"{}\">{}</text>",
            COLOURS[index % COLOURS.len()],
            x + 10.0,
            y + 4.0,
            escape(label)
        );
    }

    fn finish(mut self) -> String {
        self.out.push_str("</svg>\n");
        self.out
    }
}

fn tick_label(value: f64) -> String {
    let magnitude = value.abs();
    if magnitude >= 1000.0 {
        format!("{value:.0}")
    } else if magnitude >= 10.0 {
        format!("{value:.1}")
    } else {
        format!("{value:.3}")
    }
}

/// Scatter plot: one colour per series, a legend on the right.
pub fn scatter(title: &str, x_label: &str, y_label: &str, series: &[Series]) -> String {
    let points = || series.iter().flat_map(|s| s.points.iter().copied());
    let mut frame = Frame::new(
        title,
        x_label,
        y_label,
        range(points().map(|p| p.0)),
        range(points().map(|p| p.1)),
        true,
    );
    for (index, s) in series.iter().enumerate() {
        for &(x, y) in &s.points {
            if x.is_finite() && y.is_finite() {
                let _ = writeln!(
                    frame.out,
                    "<circle cx=\"{:.1}\" cy=\"{:.1}\" r=\"5\" fill=\"{}\" fill-opacity=\"0.8\"/>",
                    frame.px(x),
                    frame.py(y),
                    COLOURS[index % COLOURS.len()]
                );
            }
        }
        frame.legend(index, &s.label);
    }
    frame.finish()
}

/// Point estimates with interval bars, one per category along the x axis.
pub fn intervals(title: &str, y_label: &str, items: &[Interval]) -> String {
    let values = items.iter().flat_map(|i| [i.estimate, i.low, i.high]);
    let (low, high) = range(values.chain([0.0]));
    let mut frame = Frame::new(
        title,
        "comparison",
        y_label,
        (-0.5, items.len().max(1) as f64 - 0.5),
        (low, high),
        false,
    );
    let zero = frame.py(0.0);
    let _ = writeln!(
        frame.out,
        "<line x1=\"{LEFT}\" y1=\"{zero:.1}\" x2=\"{}\" y2=\"{zero:.1}\" stroke=\"#999\" stroke-dasharray=\"4 3\"/>",
        WIDTH - RIGHT
    );
    for (index, item) in items.iter().enumerate() {
        let x = frame.px(index as f64);
        let colour = COLOURS[index % COLOURS.len()];
        let _ = writeln!(
            frame.out,
            "<line x1=\"{x:.1}\" y1=\"{:.1}\" x2=\"{x:.1}\" y2=\"{:.1}\" stroke=\"{colour}\" stroke-width=\"2\"/>\n\
<line x1=\"{:.1}\" y1=\"{:.1}\" x2=\"{:.1}\" y2=\"{:.1}\" stroke=\"{colour}\" stroke-width=\"2\"/>\n\
<line x1=\"{:.1}\" y1=\"{:.1}\" x2=\"{:.1}\" y2=\"{:.1}\" stroke=\"{colour}\" stroke-width=\"2\"/>\n\
<circle cx=\"{x:.1}\" cy=\"{:.1}\" r=\"5\" fill=\"{colour}\"/>",
            frame.py(item.low),
            frame.py(item.high),
            x - 8.0,
            frame.py(item.low),
            x + 8.0,
            frame.py(item.low),
            x - 8.0,
            frame.py(item.high),
            x + 8.0,
            frame.py(item.high),
            frame.py(item.estimate)
        );
        let _ = writeln!(
            frame.out,
            "<text x=\"{x:.1}\" y=\"{:.1}\" text-anchor=\"middle\">{}</text>",
            HEIGHT - BOTTOM + 18.0,
            index + 1
        );
        frame.legend(index, &format!("{}: {}", index + 1, item.label));
    }
    frame.finish()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn scatter_is_well_formed_and_escapes_labels() {
        let svg = scatter(
            "t",
            "x",
            "y",
            &[Series {
                label: "a<b".into(),
                points: vec![(1.0, 2.0), (3.0, 4.0)],
            }],
        );
        assert!(svg.starts_with("<svg") && svg.ends_with("</svg>\n"));
        assert!(svg.contains("a&lt;b"));
        assert_eq!(svg.matches("<circle").count(), 3); // two points + legend
    }

    #[test]
    fn intervals_draw_one_bar_per_item() {
        let svg = intervals(
            "t",
            "y",
            &[Interval {
                label: "svc vs raw".into(),
                estimate: 0.5,
                low: 0.4,
                high: 0.6,
            }],
        );
        assert!(svg.contains("svc vs raw"));
        assert!(svg.contains("stroke-dasharray"));
    }
}
