//! HTML building blocks: escaping, the page frame, inline SVG bar charts, and a renderer for
//! the Markdown subset `svc report` writes (headings, pipe tables, lists, code, paragraphs).

use std::fmt::Write;

/// Escapes text for HTML element content and attribute values.
pub fn escape(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for c in text.chars() {
        match c {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '"' => out.push_str("&quot;"),
            '\'' => out.push_str("&#39;"),
            _ => out.push(c),
        }
    }
    out
}

/// Percent-encodes a query-string value.
pub fn url_encode(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for byte in text.bytes() {
        if byte.is_ascii_alphanumeric() || matches!(byte, b'-' | b'_' | b'.' | b'~') {
            out.push(byte as char);
        } else {
            let _ = write!(out, "%{byte:02X}");
        }
    }
    out
}

/// Which navigation entry is current.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Nav {
    Dashboard,
    Controls,
    Runs,
}

/// A whole page: head, navigation, `body`.
pub fn page(title: &str, nav: Nav, body: &str) -> String {
    let link = |href: &str, label: &str, this: Nav| {
        let current = if this == nav {
            " aria-current=\"page\""
        } else {
            ""
        };
        format!("<a href=\"{href}\"{current}>{label}</a>")
    };
    format!(
        "<!doctype html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">\
<meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">\
<title>{title} · svc</title><link rel=\"stylesheet\" href=\"/assets/style.css\">\
<script src=\"/assets/app.js\" defer></script></head>\n<body><header><span class=\"brand\">svc</span><nav>{}{}{}\
<a href=\"/api/openapi.json\">API</a></nav></header>\n<main>\n<h1>{title}</h1>\n{body}\n</main></body></html>\n",
        link("/", "Dashboard", Nav::Dashboard),
        link("/controls", "Controls", Nav::Controls),
        link("/runs", "Runs", Nav::Runs),
        title = escape(title),
    )
}

/// One bar of a chart.
#[derive(Debug, Clone)]
pub struct Bar {
    pub label: String,
    pub value: f64,
    /// Shown right of the bar (e.g. "12,300 tokens").
    pub caption: String,
    /// CSS class of the bar (`a`, `b`, `c`, `d` pick the palette).
    pub class: &'static str,
}

/// A horizontal bar chart as inline SVG, scaled to the largest value.
pub fn bar_chart(title: &str, bars: &[Bar]) -> String {
    const WIDTH: f64 = 560.0;
    const LABEL: f64 = 150.0;
    const CAPTION: f64 = 130.0;
    const ROW: f64 = 28.0;
    let height = ROW * bars.len() as f64 + 8.0;
    let max = bars.iter().map(|b| b.value).fold(0.0_f64, f64::max);
    let span = WIDTH - LABEL - CAPTION;
    let mut svg = format!(
        "<figure class=\"chart-figure\"><figcaption>{}</figcaption><svg class=\"chart\" role=\"img\" viewBox=\"0 0 {WIDTH} {height}\" width=\"{WIDTH}\" height=\"{height}\"><title>{}</title>",
        escape(title),
        escape(title)
    );
    for (i, bar) in bars.iter().enumerate() {
        let y = 4.0 + ROW * i as f64;
        let width = if max > 0.0 {
            (bar.value / max * span).max(if bar.value > 0.0 { 1.0 } else { 0.0 })
        } else {
            0.0
        };
        let _ = write!(
            svg,
            "<text x=\"{lx}\" y=\"{ty}\" text-anchor=\"end\">{label}</text>\
<rect class=\"bar {class}\" x=\"{LABEL}\" y=\"{y}\" width=\"{width:.1}\" height=\"{h}\" rx=\"3\"/>\
<text x=\"{cx:.1}\" y=\"{ty}\">{caption}</text>",
            lx = LABEL - 8.0,
            ty = y + ROW / 2.0 + 1.0,
            label = escape(&bar.label),
            class = bar.class,
            h = ROW - 8.0,
            cx = LABEL + width + 6.0,
            caption = escape(&bar.caption),
        );
    }
    svg.push_str("</svg></figure>");
    svg
}

/// Thousands separators for counts.
pub fn count(n: u64) -> String {
    let digits = n.to_string();
    let mut out = String::new();
    for (i, c) in digits.chars().enumerate() {
        if i > 0 && (digits.len() - i).is_multiple_of(3) {
            out.push(',');
        }
        out.push(c);
    }
    out
}

fn inline(text: &str) -> String {
    // `code` and **bold**; everything else escaped.
    let mut out = String::new();
    for (i, part) in text.split('`').enumerate() {
        if i % 2 == 1 {
            let _ = write!(out, "<code>{}</code>", escape(part));
        } else {
            let escaped = escape(part);
            let mut bold = false;
            for (j, piece) in escaped.split("**").enumerate() {
                if j > 0 {
                    out.push_str(if bold { "</strong>" } else { "<strong>" });
                    bold = !bold;
                }
                out.push_str(piece);
            }
            if bold {
                out.push_str("</strong>");
            }
        }
    }
    out
}

fn table_cells(line: &str) -> Vec<&str> {
    let trimmed = line.trim().trim_start_matches('|').trim_end_matches('|');
    trimmed.split('|').map(str::trim).collect()
}

fn is_separator(line: &str) -> bool {
    let cells = table_cells(line);
    !cells.is_empty()
        && cells
            .iter()
            .all(|c| !c.is_empty() && c.chars().all(|ch| matches!(ch, '-' | ':' | ' ')))
}

/// Renders the Markdown `svc report` writes. Unknown constructs become paragraphs, escaped.
pub fn markdown(text: &str) -> String {
    let lines: Vec<&str> = text.lines().collect();
    let mut out = String::new();
    let mut i = 0;
    while i < lines.len() {
        let line = lines[i];
        let trimmed = line.trim();
        if trimmed.is_empty() {
            i += 1;
        } else if trimmed.starts_with("```") {
            i += 1;
            out.push_str("<pre>");
            while i < lines.len() && !lines[i].trim().starts_with("```") {
                out.push_str(&escape(lines[i]));
                out.push('\n');
                i += 1;
            }
            out.push_str("</pre>\n");
            i += 1;
        } else if let Some(level) =
            (1..=6).find(|&n| trimmed.starts_with(&"#".repeat(n)) && trimmed[n..].starts_with(' '))
        {
            // Page titles are h1; report headings start one level below.
            let level = (level + 1).min(6);
            let _ = writeln!(
                out,
                "<h{level}>{}</h{level}>",
                inline(trimmed.trim_start_matches('#').trim())
            );
            i += 1;
        } else if trimmed.starts_with('|') && i + 1 < lines.len() && is_separator(lines[i + 1]) {
            out.push_str("<div class=\"scroll\"><table><thead><tr>");
            for cell in table_cells(trimmed) {
                let _ = write!(out, "<th>{}</th>", inline(cell));
            }
            out.push_str("</tr></thead><tbody>");
            i += 2;
            while i < lines.len() && lines[i].trim().starts_with('|') {
                out.push_str("<tr>");
                for cell in table_cells(lines[i]) {
                    let _ = write!(out, "<td>{}</td>", inline(cell));
                }
                out.push_str("</tr>");
                i += 1;
            }
            out.push_str("</tbody></table></div>\n");
        } else if trimmed.starts_with("- ") || trimmed.starts_with("* ") {
            out.push_str("<ul>");
            while i < lines.len() {
                let t = lines[i].trim();
                if let Some(item) = t.strip_prefix("- ").or_else(|| t.strip_prefix("* ")) {
                    let _ = write!(out, "<li>{}</li>", inline(item));
                    i += 1;
                } else {
                    break;
                }
            }
            out.push_str("</ul>\n");
        } else {
            let mut paragraph = Vec::new();
            while i < lines.len() {
                let t = lines[i].trim();
                if t.is_empty() || t.starts_with('#') || t.starts_with('|') || t.starts_with("```")
                {
                    break;
                }
                paragraph.push(t);
                i += 1;
            }
            if paragraph.is_empty() {
                // A lone line starting with `|` or `#` that is not a table or heading.
                paragraph.push(trimmed);
                i += 1;
            }
            let _ = writeln!(out, "<p>{}</p>", inline(&paragraph.join(" ")));
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn escaping_covers_markup_and_quotes() {
        assert_eq!(
            escape("<a href=\"x\">'&'</a>"),
            "&lt;a href=&quot;x&quot;&gt;&#39;&amp;&#39;&lt;/a&gt;"
        );
        assert_eq!(url_encode("a b/c&d"), "a%20b%2Fc%26d");
        assert_eq!(count(1234567), "1,234,567");
        assert_eq!(count(12), "12");
    }

    #[test]
    fn report_markdown_becomes_tables_headings_and_lists() {
        let html = markdown(
            "# Report\n\nSome **bold** `code` <b>.\n\n| a | b |\n|---|:-:|\n| 1 | <x> |\n\n- one\n- two\n",
        );
        assert!(html.contains("<h2>Report</h2>"), "{html}");
        assert!(html.contains("<p>Some <strong>bold</strong> <code>code</code> &lt;b&gt;.</p>"));
        assert!(html.contains("<th>a</th><th>b</th>"));
        assert!(html.contains("<td>1</td><td>&lt;x&gt;</td>"));
        assert!(html.contains("<ul><li>one</li><li>two</li></ul>"));
    }

    #[test]
    fn bar_chart_scales_to_the_largest_value() {
        let svg = bar_chart(
            "t",
            &[
                Bar {
                    label: "big".into(),
                    value: 10.0,
                    caption: "10".into(),
                    class: "a",
                },
                Bar {
                    label: "half".into(),
                    value: 5.0,
                    caption: "5".into(),
                    class: "b",
                },
            ],
        );
        assert!(svg.contains("width=\"280.0\""), "{svg}");
        assert!(svg.contains("width=\"140.0\""), "{svg}");
    }
}
