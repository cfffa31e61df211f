//! The report's plots as SVG, drawn with plotters' SVG backend: per workload, the quality–cost
//! plane (token reduction vs Δ task score, both with intervals, non-inferiority band shaded)
//! and budget curves (task score and evidence recall vs budget per condition).
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

/// `text` without the sign of a value that rounded to zero: `-0.000` and `-0.0%` read as a loss
/// where there is none.
pub(super) fn without_negative_zero(text: String) -> String {
    match text.strip_prefix('-') {
        Some(rest)
            if rest.chars().any(|c| c.is_ascii_digit())
                && rest.chars().all(|c| matches!(c, '0' | '.' | '%')) =>
        {
            rest.to_string()
        }
        _ => text,
    }
}

fn tick_label(value: f64) -> String {
    let magnitude = value.abs();
    without_negative_zero(if magnitude >= 1000.0 {
        format!("{value:.0}")
    } else if magnitude >= 10.0 {
        format!("{value:.1}")
    } else {
        format!("{value:.3}")
    })
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
    without_negative_zero(format!("{:.*}%", decimals, value * 100.0))
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

/// A point of the quality–cost plane: x the context-token reduction, y the Δ task score, each
/// as (estimate, low, high); `series` indexes the legend (colour), `tag` is written beside the
/// point (its budget when there are several).
pub struct PlanePoint {
    pub series: usize,
    pub tag: String,
    pub x: (f64, f64, f64),
    pub y: (f64, f64, f64),
}

fn finite3(v: (f64, f64, f64)) -> bool {
    v.0.is_finite() && v.1.is_finite() && v.2.is_finite()
}

/// The quality–cost plane: one point per comparison, coloured by its series (condition vs
/// baseline) and tagged, with horizontal (token reduction) and vertical (Δ task score) interval
/// bars; the non-inferiority band (Δ ≥ −margin) shaded and the no-effect lines drawn. Series
/// without a finite point are marked "(no estimate)" in the legend.
pub fn quality_cost(
    title: &str,
    margin: f64,
    series: &[String],
    points: &[PlanePoint],
) -> Result<String, ReportError> {
    let drawn = |p: &PlanePoint| finite3(p.x) && finite3(p.y);
    let x = range(
        points
            .iter()
            .filter(|p| drawn(p))
            .flat_map(|p| [p.x.1, p.x.2])
            .chain([0.0]),
    );
    let y = range(
        points
            .iter()
            .filter(|p| drawn(p))
            .flat_map(|p| [p.y.1, p.y.2])
            .chain([-2.0 * margin, margin]),
    );
    let labels: Vec<String> = series
        .iter()
        .enumerate()
        .map(|(i, label)| {
            let any = points.iter().any(|p| p.series == i && drawn(p));
            if any {
                label.clone()
            } else {
                format!("{label} (no estimate)")
            }
        })
        .collect();
    let mut out = String::new();
    {
        let heading = if points.iter().any(|p| !p.tag.is_empty()) {
            "condition vs baseline (tag: budget)"
        } else {
            "condition vs baseline"
        };
        // The legend column is sized for its labels and its heading.
        let mut sized = labels.clone();
        sized.push(heading.to_string());
        let (root, plot, legend_area) = canvas(&mut out, title, &sized)?;
        let mut chart = ChartBuilder::on(&plot)
            .margin(12)
            .x_label_area_size(48)
            .y_label_area_size(72)
            .build_cartesian_2d(x.0..x.1, y.0..y.1)
            .map_err(failed(title))?;
        let x_tick = |v: &f64| percent_tick(*v, x.1 - x.0);
        chart
            .configure_mesh()
            .light_line_style(TRANSPARENT)
            .bold_line_style(BLACK.mix(0.12))
            .label_style((FONT, 14))
            .axis_desc_style((FONT, 16))
            .x_desc("context-token reduction vs baseline (CI)")
            .y_desc("Δ task score (CI)")
            .x_label_formatter(&x_tick)
            .y_label_formatter(&|v| tick_label(*v))
            .draw()
            .map_err(failed(title))?;
        // Non-inferior region: the quality loss stays within the margin.
        chart
            .draw_series(std::iter::once(Rectangle::new(
                [(x.0, (-margin).max(y.0)), (x.1, y.1)],
                RGBColor(0x55, 0xa8, 0x68).mix(0.12).filled(),
            )))
            .map_err(failed(title))?;
        chart
            .draw_series([
                PathElement::new(vec![(x.0, 0.0), (x.1, 0.0)], BLACK.mix(0.5).stroke_width(1)),
                PathElement::new(vec![(0.0, y.0), (0.0, y.1)], BLACK.mix(0.5).stroke_width(1)),
                PathElement::new(
                    vec![(x.0, -margin), (x.1, -margin)],
                    RGBColor(0x55, 0xa8, 0x68).stroke_width(1),
                ),
            ])
            .map_err(failed(title))?;
        chart
            .plotting_area()
            .draw(&Text::new(
                format!("non-inferior: Δ ≥ −{margin}"),
                (x.0 + (x.1 - x.0) * 0.02, y.1 - (y.1 - y.0) * 0.04),
                text_style(13),
            ))
            .map_err(failed(title))?;
        for p in points.iter().filter(|p| drawn(p)) {
            let style = colour(p.series).filled().stroke_width(2);
            chart
                .draw_series(std::iter::once(ErrorBar::new_vertical(
                    p.x.0, p.y.1, p.y.0, p.y.2, style, 10,
                )))
                .map_err(failed(title))?;
            chart
                .draw_series(std::iter::once(ErrorBar::new_horizontal(
                    p.y.0, p.x.1, p.x.0, p.x.2, style, 10,
                )))
                .map_err(failed(title))?;
            if !p.tag.is_empty() {
                // Tags of different series stack upwards, so points that coincide (svc and
                // combined at the largest budget) keep readable tags.
                let rise = 4 + 13 * i32::try_from(p.series).unwrap_or(0).min(8);
                chart
                    .plotting_area()
                    .draw(
                        &(EmptyElement::at((p.x.0, p.y.0))
                            + Text::new(
                                p.tag.clone(),
                                (6, -rise),
                                text_style(12)
                                    .pos(Pos::new(HPos::Left, VPos::Bottom))
                                    .color(&colour(p.series)),
                            )),
                    )
                    .map_err(failed(title))?;
            }
        }
        if !points.iter().any(drawn) {
            chart
                .plotting_area()
                .draw(&Text::new(
                    "no comparison has an estimate",
                    ((x.0 + x.1) / 2.0, (y.0 + y.1) / 2.0),
                    text_style(16).pos(Pos::new(HPos::Center, VPos::Center)),
                ))
                .map_err(failed(title))?;
        }
        legend(&legend_area, title, heading, &labels)?;
        root.present().map_err(failed(title))?;
    }
    Ok(out)
}

/// A labelled curve: (budget, value) points.
pub struct Curve {
    pub label: String,
    pub points: Vec<(f64, f64)>,
}

/// Budget curves: two panels (task score, evidence recall) of one line per condition over the
/// budgets, on a log2 budget axis.
pub fn budget_curves(
    title: &str,
    task_score: &[Curve],
    evidence_recall: &[Curve],
) -> Result<String, ReportError> {
    let labels: Vec<String> = task_score.iter().map(|c| c.label.clone()).collect();
    let budgets = || {
        task_score
            .iter()
            .chain(evidence_recall)
            .flat_map(|c| c.points.iter().map(|p| p.0))
            .filter(|b| b.is_finite() && *b > 0.0)
    };
    let x = range(budgets().map(f64::log2));
    let mut out = String::new();
    {
        let (root, plot, legend_area) = canvas(&mut out, title, &labels)?;
        let (left, right) = plot.split_horizontally(PLOT_WIDTH / 2);
        for (area, curves, name) in [
            (&left, task_score, "task score"),
            (&right, evidence_recall, "evidence recall"),
        ] {
            let y = range(
                curves
                    .iter()
                    .flat_map(|c| c.points.iter().map(|p| p.1))
                    .chain([0.0, 1.0]),
            );
            let mut chart = ChartBuilder::on(area)
                .margin(10)
                .caption(name, (FONT, 15))
                .x_label_area_size(44)
                .y_label_area_size(52)
                .build_cartesian_2d(x.0..x.1, y.0..y.1)
                .map_err(failed(title))?;
            chart
                .configure_mesh()
                .light_line_style(TRANSPARENT)
                .bold_line_style(BLACK.mix(0.12))
                .label_style((FONT, 12))
                .axis_desc_style((FONT, 14))
                .x_desc("budget (tokens, log scale)")
                // About one label per doubling, so ticks land on the budgets (powers of two).
                .x_labels(((x.1 - x.0).round() as usize + 1).clamp(2, 8))
                .x_label_formatter(&|v| format!("{:.0}", v.exp2()))
                .y_label_formatter(&|v| format!("{v:.2}"))
                .draw()
                .map_err(failed(title))?;
            // A curve that a later one covers exactly (svc equal to raw) is drawn wider
            // underneath, so both colours show.
            for (index, curve) in curves.iter().enumerate() {
                let points: Vec<(f64, f64)> = curve
                    .points
                    .iter()
                    .filter(|p| p.0 > 0.0 && p.1.is_finite())
                    .map(|p| (p.0.log2(), p.1))
                    .collect();
                let covered = curves[index + 1..]
                    .iter()
                    .filter(|later| later.points == curve.points)
                    .count();
                let layer = u32::try_from(covered).unwrap_or(0).min(4);
                let style = colour(index).stroke_width(2 + 2 * layer);
                chart
                    .draw_series(std::iter::once(PathElement::new(points.clone(), style)))
                    .map_err(failed(title))?;
                chart
                    .draw_series(
                        points
                            .iter()
                            .map(|&p| Circle::new(p, 3 + 2 * layer, colour(index).filled())),
                    )
                    .map_err(failed(title))?;
            }
        }
        legend(&legend_area, title, "condition", &labels)?;
        root.present().map_err(failed(title))?;
    }
    Ok(out)
}

#[cfg(test)]
pub(crate) mod tests {
    /// Found by probing: values that rounded to zero were printed `-0.000` and `-0.0%`.
    #[test]
    fn a_value_rounded_to_zero_has_no_sign() {
        assert_eq!(super::without_negative_zero("-0.000".into()), "0.000");
        assert_eq!(super::without_negative_zero("-0.0%".into()), "0.0%");
        assert_eq!(super::without_negative_zero("-0.001".into()), "-0.001");
        assert_eq!(super::without_negative_zero("-".into()), "-");
        assert_eq!(super::tick_label(-0.0001), "0.000");
        assert_eq!(super::percent_tick(-0.00001, 0.5), "0%");
    }

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

    fn points() -> Vec<PlanePoint> {
        vec![
            PlanePoint {
                series: 0,
                tag: "256".into(),
                x: (0.6, 0.55, 0.65),
                y: (-0.01, -0.03, 0.01),
            },
            PlanePoint {
                series: 1,
                tag: "512".into(),
                x: (0.3, 0.2, 0.4),
                y: (f64::NAN, 0.0, 0.0),
            },
        ]
    }

    fn series() -> Vec<String> {
        vec!["svc vs raw".into(), "a<b vs raw".into()]
    }

    #[test]
    fn quality_cost_draws_each_finite_point_tagged_with_its_band() {
        let svg = quality_cost("plane", 0.02, &series(), &points()).expect("svg");
        assert_well_formed(&svg);
        let texts = texts(&svg);
        assert!(texts.contains(&"svc vs raw".to_string()), "{texts:?}");
        assert!(
            texts.contains(&"a&lt;b vs raw (no estimate)".to_string()),
            "{texts:?}"
        );
        assert!(texts.contains(&"non-inferior: Δ ≥ −0.02".to_string()));
        assert!(texts.contains(&"condition vs baseline (tag: budget)".to_string()));
        // The finite point is tagged on the plot; the other is not drawn.
        assert_eq!(texts.iter().filter(|t| *t == "256").count(), 1);
        assert_eq!(texts.iter().filter(|t| *t == "512").count(), 0);
        assert_eq!(
            svg,
            quality_cost("plane", 0.02, &series(), &points()).expect("svg")
        );
        let empty = quality_cost("plane", 0.02, &[], &[]).expect("svg");
        assert!(texts_of(&empty).contains(&"no comparison has an estimate".to_string()));
    }

    fn texts_of(svg: &str) -> Vec<String> {
        texts(svg)
    }

    #[test]
    fn budget_curves_draw_one_point_per_budget_and_condition() {
        let curve = |label: &str, v: f64| Curve {
            label: label.into(),
            points: vec![(256.0, v), (512.0, v + 0.1), (1024.0, v + 0.2)],
        };
        let scores = [curve("raw", 0.5), curve("svc", 0.4)];
        let recall = [curve("raw", 0.6), curve("svc", 0.3)];
        let svg = budget_curves("curves", &scores, &recall).expect("svg");
        assert_well_formed(&svg);
        assert_eq!(circles(&svg, 0), 6);
        assert_eq!(circles(&svg, 1), 6);
        let texts = texts(&svg);
        assert!(texts.contains(&"task score".to_string()));
        assert!(texts.contains(&"evidence recall".to_string()));
        assert!(texts.contains(&"512".to_string()), "{texts:?}");
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
