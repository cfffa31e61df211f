//! The report's two plots as SVG, drawn with plotters' SVG backend: a scatter of points per
//! series, and point estimates with confidence-interval bars per category.
//!
//! plotters is built without its font features (`ttf`, `ab_glyph`): the SVG backend writes text
//! as `<text>` elements that the viewer lays out, so no font file is needed at build or run time
//! and there is no C dependency; plotters then only estimates text extents (for label areas),
//! which is enough here. Nothing in plotters' SVG path is random or hash-ordered, so the output
//! is a pure function of the input (tested below).
//!
//! Two plotters traps are avoided on purpose: integer axes must never be asked for zero light
//! lines (`max_light_lines(0)` overflows in plotters 0.3.7's integer key-point search), so light
//! lines are made transparent instead; and float axes must be finite and non-degenerate (plotters
//! asserts on NaN), which [`range`] guarantees.

use plotters::coord::Shift;
use plotters::coord::ranged1d::SegmentValue;
use plotters::prelude::*;
use plotters::style::text_anchor::{HPos, Pos, VPos};

use super::ReportError;

const PLOT_WIDTH: u32 = 560;
const HEIGHT: u32 = 440;
const FONT: &str = "sans-serif";
/// Colour-blind-friendly and distinguishable in print; series beyond eight reuse colours, and the
/// legend still names each one.
const PALETTE: [RGBColor; 8] = [
    RGBColor(0x4c, 0x72, 0xb0),
    RGBColor(0xdd, 0x84, 0x52),
    RGBColor(0x55, 0xa8, 0x68),
    RGBColor(0xc4, 0x4e, 0x52),
    RGBColor(0x81, 0x72, 0xb3),
    RGBColor(0x93, 0x78, 0x60),
    RGBColor(0xda, 0x8b, 0xc3),
    RGBColor(0x8c, 0x8c, 0x8c),
];

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

type Area<'a> = DrawingArea<SVGBackend<'a>, Shift>;

fn colour(index: usize) -> RGBColor {
    PALETTE[index % PALETTE.len()]
}

fn failed<E: std::fmt::Display>(title: &str) -> impl Fn(E) -> ReportError + '_ {
    move |error| ReportError::Plot {
        plot: title.to_string(),
        message: error.to_string(),
    }
}

/// Axis range padded by 5 % (and widened when degenerate); `(0, 1)` when nothing is finite.
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

/// A fraction as a percentage, with as many decimals as the axis span needs to tell ticks apart.
fn percent_tick(value: f64, span: f64) -> String {
    let span_percent = span * 100.0;
    let decimals = if span_percent >= 20.0 {
        0
    } else if span_percent >= 2.0 {
        1
    } else {
        2
    };
    format!("{:.*}%", decimals, value * 100.0)
}

fn text_style(size: u32) -> TextStyle<'static> {
    TextStyle::from((FONT, size).into_font()).pos(Pos::new(HPos::Left, VPos::Center))
}

/// The whole image, titled, split into the plot (left) and a legend column wide enough for the
/// longest label (right).
fn canvas<'a>(
    out: &'a mut String,
    title: &str,
    labels: &[String],
) -> Result<(Area<'a>, Area<'a>, Area<'a>), ReportError> {
    let longest = labels.iter().map(|l| l.chars().count()).max().unwrap_or(0);
    // About 7 px per character at the legend's font size, plus the swatch.
    let legend_width = u32::try_from(40 + 7 * longest)
        .unwrap_or(u32::MAX / 2)
        .max(160);
    let root =
        SVGBackend::with_string(out, (PLOT_WIDTH + legend_width, HEIGHT)).into_drawing_area();
    root.fill(&WHITE).map_err(failed(title))?;
    let body = root.titled(title, (FONT, 20)).map_err(failed(title))?;
    let (plot, legend) = body.split_horizontally(PLOT_WIDTH);
    Ok((root, plot, legend))
}

/// One swatch and label per series, in series order, under a heading.
fn legend(
    area: &Area<'_>,
    title: &str,
    heading: &str,
    labels: &[String],
) -> Result<(), ReportError> {
    area.draw(&Text::new(heading, (12, 24), text_style(16)))
        .map_err(failed(title))?;
    for (index, label) in labels.iter().enumerate() {
        // Bounded by the number of series drawn, far below i32::MAX.
        let y = 48 + 22 * i32::try_from(index).unwrap_or(i32::MAX / 32);
        area.draw(&Rectangle::new(
            [(12, y - 6), (24, y + 6)],
            colour(index).filled(),
        ))
        .map_err(failed(title))?;
        area.draw(&Text::new(label.as_str(), (32, y), text_style(15)))
            .map_err(failed(title))?;
    }
    Ok(())
}

fn finite(point: &&(f64, f64)) -> bool {
    point.0.is_finite() && point.1.is_finite()
}

/// Scatter plot: one colour per series, a legend on the right. Non-finite points are not drawn.
pub fn scatter(
    title: &str,
    x_label: &str,
    y_label: &str,
    series: &[Series],
) -> Result<String, ReportError> {
    let points = || series.iter().flat_map(|s| s.points.iter()).filter(finite);
    let x = range(points().map(|p| p.0));
    let y = range(points().map(|p| p.1));
    let labels: Vec<String> = series.iter().map(|s| s.label.clone()).collect();
    let mut out = String::new();
    {
        let (root, plot, legend_area) = canvas(&mut out, title, &labels)?;
        let mut chart = ChartBuilder::on(&plot)
            .margin(12)
            .x_label_area_size(48)
            .y_label_area_size(72)
            .build_cartesian_2d(x.0..x.1, y.0..y.1)
            .map_err(failed(title))?;
        chart
            .configure_mesh()
            .light_line_style(TRANSPARENT)
            .bold_line_style(BLACK.mix(0.12))
            .label_style((FONT, 14))
            .axis_desc_style((FONT, 16))
            .x_desc(x_label)
            .y_desc(y_label)
            .x_label_formatter(&|v| tick_label(*v))
            .y_label_formatter(&|v| tick_label(*v))
            .draw()
            .map_err(failed(title))?;
        for (index, s) in series.iter().enumerate() {
            let style = colour(index).mix(0.8).filled();
            chart
                .draw_series(
                    s.points
                        .iter()
                        .filter(finite)
                        .map(|&p| Circle::new(p, 5, style)),
                )
                .map_err(failed(title))?;
        }
        if points().next().is_none() {
            chart
                .plotting_area()
                .draw(&Text::new(
                    "no points to plot",
                    ((x.0 + x.1) / 2.0, (y.0 + y.1) / 2.0),
                    text_style(16).pos(Pos::new(HPos::Center, VPos::Center)),
                ))
                .map_err(failed(title))?;
        }
        legend(&legend_area, title, "condition", &labels)?;
        root.present().map_err(failed(title))?;
    }
    Ok(out)
}

/// Point estimates (y, as fractions shown in percent) with interval bars, one category per item
/// along the x axis, numbered from 1 and named in the legend. Items with a non-finite value are
/// listed in the legend as such and not drawn.
pub fn intervals(title: &str, y_label: &str, items: &[Interval]) -> Result<String, ReportError> {
    let drawn = |i: &Interval| i.estimate.is_finite() && i.low.is_finite() && i.high.is_finite();
    let y = range(
        items
            .iter()
            .filter(|i| drawn(i))
            .flat_map(|i| [i.estimate, i.low, i.high])
            .chain([0.0]),
    );
    let labels: Vec<String> = items
        .iter()
        .enumerate()
        .map(|(index, item)| {
            let missing = if drawn(item) {
                ""
            } else {
                " (no finite estimate)"
            };
            format!("{}: {}{missing}", index + 1, item.label)
        })
        .collect();
    let count = items.len();
    // Integer categories 0..=last; an empty plot keeps one empty category so the axes still draw.
    let last = i32::try_from(count.saturating_sub(1)).map_err(|_| ReportError::Plot {
        plot: title.to_string(),
        message: format!("{count} intervals are more than one plot can show"),
    })?;
    let mut out = String::new();
    {
        let (root, plot, legend_area) = canvas(&mut out, title, &labels)?;
        let mut chart = ChartBuilder::on(&plot)
            .margin(12)
            .x_label_area_size(48)
            .y_label_area_size(72)
            .build_cartesian_2d((0..last).into_segmented(), y.0..y.1)
            .map_err(failed(title))?;
        let x_tick = |v: &SegmentValue<i32>| match v {
            SegmentValue::CenterOf(i) if usize::try_from(*i).is_ok_and(|i| i < count) => {
                (i + 1).to_string()
            }
            _ => String::new(),
        };
        let y_tick = |v: &f64| percent_tick(*v, y.1 - y.0);
        chart
            .configure_mesh()
            .disable_x_mesh()
            .light_line_style(TRANSPARENT)
            .bold_line_style(BLACK.mix(0.12))
            .label_style((FONT, 14))
            .axis_desc_style((FONT, 16))
            .x_labels(count.max(1))
            .x_label_formatter(&x_tick)
            .y_label_formatter(&y_tick)
            .x_desc("comparison")
            .y_desc(y_label)
            .draw()
            .map_err(failed(title))?;
        // The no-effect line: a bar that crosses it is not a significant reduction.
        chart
            .draw_series(std::iter::once(PathElement::new(
                vec![(SegmentValue::Exact(0), 0.0), (SegmentValue::Last, 0.0)],
                BLACK.mix(0.5).stroke_width(1),
            )))
            .map_err(failed(title))?;
        for (index, item) in items.iter().enumerate() {
            if !drawn(item) {
                continue;
            }
            // index <= last, which fits in i32 (checked above).
            let key = SegmentValue::CenterOf(i32::try_from(index).unwrap_or(last));
            chart
                .draw_series(std::iter::once(ErrorBar::new_vertical(
                    key,
                    item.low,
                    item.estimate,
                    item.high,
                    colour(index).filled().stroke_width(2),
                    // Cap width in pixels; plotters also uses half of it as the dot's radius.
                    10,
                )))
                .map_err(failed(title))?;
        }
        if !items.iter().any(drawn) {
            chart
                .plotting_area()
                .draw(&Text::new(
                    "no comparison has an estimate",
                    (SegmentValue::CenterOf(0), (y.0 + y.1) / 2.0),
                    text_style(16).pos(Pos::new(HPos::Center, VPos::Center)),
                ))
                .map_err(failed(title))?;
        }
        legend(&legend_area, title, "comparison", &labels)?;
        root.present().map_err(failed(title))?;
    }
    Ok(out)
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;

    /// Checks that every tag is closed in order and text holds no bare `<` or `&`: enough to
    /// catch broken escaping or truncated output without an XML parser dependency.
    pub(crate) fn assert_well_formed(svg: &str) {
        let mut open: Vec<String> = Vec::new();
        let mut rest = svg;
        while let Some(start) = rest.find('<') {
            let text = &rest[..start];
            for (i, _) in text.match_indices('&') {
                let entity = &text[i..];
                assert!(
                    ["&lt;", "&gt;", "&amp;", "&quot;", "&apos;"]
                        .iter()
                        .any(|e| entity.starts_with(e)),
                    "bare & in text: {entity:.20}"
                );
            }
            let end = rest[start..].find('>').expect("unclosed tag") + start;
            let tag = &rest[start + 1..end];
            assert!(!tag.contains('<'), "< inside a tag: {tag}");
            if let Some(name) = tag.strip_prefix('/') {
                assert_eq!(
                    open.pop().as_deref(),
                    Some(name.trim()),
                    "mismatched </{name}>"
                );
            } else if !tag.ends_with('/') && !tag.starts_with('?') && !tag.starts_with('!') {
                let name = tag.split_whitespace().next().expect("tag name");
                open.push(name.to_string());
            }
            rest = &rest[end + 1..];
        }
        assert!(open.is_empty(), "unclosed elements: {open:?}");
        assert!(
            rest.trim().is_empty(),
            "text after the root element: {rest}"
        );
    }

    pub(crate) fn fill(index: usize) -> String {
        let c = colour(index);
        format!("fill=\"#{:02X}{:02X}{:02X}\"", c.0, c.1, c.2)
    }

    fn stroke(index: usize) -> String {
        fill(index).replace("fill", "stroke")
    }

    /// `<circle` elements in a series' colour.
    pub(crate) fn circles(svg: &str, index: usize) -> usize {
        let fill = fill(index);
        svg.lines()
            .filter(|l| l.starts_with("<circle") && l.contains(&fill))
            .count()
    }

    /// Text contents of every `<text>` element.
    pub(crate) fn texts(svg: &str) -> Vec<String> {
        svg.split("<text")
            .skip(1)
            .filter_map(|t| {
                let body = &t[t.find('>')? + 1..t.find("</text>")?];
                Some(body.trim().to_string())
            })
            .collect()
    }

    fn two_series() -> Vec<Series> {
        vec![
            Series {
                label: "a<b".into(),
                points: vec![(100.0, 0.5), (200.0, 0.75), (f64::NAN, 0.1)],
            },
            Series {
                label: "svc".into(),
                points: vec![(50.0, 0.7)],
            },
        ]
    }

    #[test]
    fn scatter_draws_each_finite_point_in_its_series_colour() {
        let svg = scatter("Title & more", "x axis", "y axis", &two_series()).expect("svg");
        assert_well_formed(&svg);
        assert!(
            svg.starts_with("<svg") && svg.ends_with("</svg>\n"),
            "{svg}"
        );
        assert_eq!(circles(&svg, 0), 2, "the NaN point is skipped");
        assert_eq!(circles(&svg, 1), 1);
        let texts = texts(&svg);
        for expected in [
            "Title &amp; more",
            "x axis",
            "y axis",
            "condition",
            "a&lt;b",
            "svc",
        ] {
            assert!(
                texts.iter().any(|t| t == expected),
                "{expected} in {texts:?}"
            );
        }
        // The y axis title is rotated.
        assert!(svg.contains("transform=\"rotate(270"), "{svg}");
    }

    #[test]
    fn scatter_with_no_points_still_renders_and_says_so() {
        let svg = scatter("t", "x", "y", &[]).expect("svg");
        assert_well_formed(&svg);
        assert!(texts(&svg).iter().any(|t| t == "no points to plot"));
        assert_eq!(svg.matches("<circle").count(), 0);
    }

    #[test]
    fn intervals_draw_one_bar_with_caps_per_item() {
        let items = [
            Interval {
                label: "svc vs raw".into(),
                estimate: 0.5,
                low: 0.4,
                high: 0.6,
            },
            Interval {
                label: "combined vs raw".into(),
                estimate: -0.1,
                low: -0.3,
                high: 0.05,
            },
            Interval {
                label: "broken".into(),
                estimate: f64::NAN,
                low: 0.0,
                high: 1.0,
            },
        ];
        let svg = intervals("Reduction", "relative reduction", &items).expect("svg");
        assert_well_formed(&svg);
        for index in 0..2 {
            assert_eq!(circles(&svg, index), 1, "estimate dot of item {index}");
            let lines = svg
                .lines()
                .filter(|l| l.starts_with("<line") && l.contains(&stroke(index)))
                .count();
            assert_eq!(lines, 3, "bar and two caps of item {index}");
        }
        assert_eq!(circles(&svg, 2), 0, "a NaN estimate is not drawn");
        let texts = texts(&svg);
        for expected in [
            "1: svc vs raw",
            "2: combined vs raw",
            "3: broken (no finite estimate)",
            "1",
            "2",
            "3",
            "comparison",
            "relative reduction",
        ] {
            assert!(
                texts.iter().any(|t| t == expected),
                "{expected} in {texts:?}"
            );
        }
        assert!(texts.iter().any(|t| t.ends_with('%')), "{texts:?}");
    }

    #[test]
    fn intervals_with_no_items_still_render() {
        let svg = intervals("t", "y", &[]).expect("svg");
        assert_well_formed(&svg);
        assert!(
            texts(&svg)
                .iter()
                .any(|t| t == "no comparison has an estimate")
        );
    }

    #[test]
    fn the_same_input_gives_the_same_bytes() {
        let a = scatter("t", "x", "y", &two_series()).expect("svg");
        let b = scatter("t", "x", "y", &two_series()).expect("svg");
        assert_eq!(a, b);
    }

    #[test]
    fn well_formedness_check_can_fail() {
        for broken in ["<svg><g></svg>", "<svg>a & b</svg>", "<svg><text>x</svg>"] {
            assert!(
                std::panic::catch_unwind(|| assert_well_formed(broken)).is_err(),
                "{broken}"
            );
        }
    }

    #[test]
    fn percent_ticks_keep_enough_decimals_to_differ() {
        assert_eq!(percent_tick(0.5, 1.0), "50%");
        assert_eq!(percent_tick(0.605, 0.05), "60.5%");
        assert_eq!(percent_tick(0.6055, 0.01), "60.55%");
    }
}
