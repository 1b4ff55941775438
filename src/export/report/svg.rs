//! The report's charts as inline SVG: forest plots, line charts with error bars, grouped
//! bars, a binned scatter (heat grid) and a labelled scatter. Every chart draws
//! aggregates handed to it — one mark per run, task bin or k, never per rollout — so
//! its size does not grow with the sweep. Colours are the Okabe–Ito palette, which
//! reads for the common kinds of colour blindness.

use std::fmt::Write;

/// Escapes text for HTML and SVG (element text and quoted attribute values).
pub fn esc(s: &str) -> String {
    let mut o = String::with_capacity(s.len());
    for c in s.chars() {
        match c {
            '&' => o.push_str("&amp;"),
            '<' => o.push_str("&lt;"),
            '>' => o.push_str("&gt;"),
            '"' => o.push_str("&quot;"),
            '\'' => o.push_str("&#39;"),
            _ => o.push(c),
        }
    }
    o
}

/// Okabe–Ito colours, in the order runs get them.
pub const PALETTE: [&str; 8] = ["#0072B2", "#E69F00", "#009E73", "#CC79A7", "#56B4E9", "#D55E00", "#F0E442", "#000000"];

/// The colour of run `i`.
pub fn colour(i: usize) -> &'static str {
    PALETTE[i % PALETTE.len()]
}

/// Chart width in SVG units (the page scales it to its column).
const W: f64 = 1100.0;

/// One interval of a forest plot.
pub struct Interval {
    pub label: String,
    pub est: f64,
    pub ci: Option<(f64, f64)>,
    pub colour: &'static str,
}

/// A point of a line chart: `(x, y, 95% interval)`.
pub type Point = (f64, f64, Option<(f64, f64)>);

/// One line of a line chart.
pub struct Series {
    pub name: String,
    pub colour: &'static str,
    pub points: Vec<Point>,
}

/// A linear scale from a data range onto pixels, with readable tick values.
struct Scale {
    lo: f64,
    hi: f64,
    from: f64,
    to: f64,
}

impl Scale {
    /// A scale over `lo..hi` widened to whole tick steps.
    fn nice(lo: f64, hi: f64, from: f64, to: f64) -> Scale {
        let (mut lo, mut hi) = if lo.is_finite() && hi.is_finite() { (lo, hi) } else { (0.0, 1.0) };
        if hi - lo < 1e-12 {
            let pad = if lo == 0.0 { 1.0 } else { lo.abs() * 0.1 };
            lo -= pad;
            hi += pad;
        }
        let step = step(lo, hi);
        Scale { lo: (lo / step).floor() * step, hi: (hi / step).ceil() * step, from, to }
    }
    fn at(&self, v: f64) -> f64 {
        self.from + (v - self.lo) / (self.hi - self.lo) * (self.to - self.from)
    }
    fn ticks(&self) -> Vec<f64> {
        let s = step(self.lo, self.hi);
        let n = ((self.hi - self.lo) / s).round() as i64;
        (0..=n).map(|i| self.lo + i as f64 * s).collect()
    }
    fn label(&self, v: f64) -> String {
        tick_label(v, step(self.lo, self.hi))
    }
}

/// A tick step of 1, 2 or 5 times a power of ten giving about five ticks.
fn step(lo: f64, hi: f64) -> f64 {
    let raw = (hi - lo) / 5.0;
    let p = 10f64.powf(raw.log10().floor());
    let m = raw / p;
    p * if m < 1.5 {
        1.0
    } else if m < 3.5 {
        2.0
    } else if m < 7.5 {
        5.0
    } else {
        10.0
    }
}

/// `v` with as many decimals as the tick step needs.
fn tick_label(v: f64, step: f64) -> String {
    let decimals = (-step.log10().floor()).max(0.0) as usize;
    let v = if v.abs() < step * 1e-9 { 0.0 } else { v };
    if v.abs() >= 1e5 {
        return format!("{v:.1e}");
    }
    format!("{v:.decimals$}")
}

/// The opening of a chart: its frame, title and (optional) legend entries.
fn open(h: f64, title: &str, legend: &[(&str, &str)]) -> String {
    let mut s = format!(
        r#"<svg class="chart" viewBox="0 0 {W} {h}" width="100%" role="img" aria-label="{t}" xmlns="http://www.w3.org/2000/svg"><title>{t}</title><text class="ct" x="10" y="22">{t}</text>"#,
        t = esc(title)
    );
    let mut x = W - 10.0;
    for (name, c) in legend.iter().rev() {
        let w = 26.0 + 7.2 * name.chars().count() as f64;
        x -= w;
        let _ = write!(
            s,
            r#"<rect x="{x:.1}" y="12" width="12" height="12" fill="{c}"/><text class="lg" x="{:.1}" y="22">{}</text>"#,
            x + 16.0,
            esc(name)
        );
    }
    s
}

/// Axes: the left and bottom lines, ticks, grid lines and axis titles.
fn axes(s: &mut String, x: &Scale, y: &Scale, x_label: &str, y_label: &str, x_ticks: Option<Vec<f64>>) {
    let (top, bottom) = (y.to, y.from);
    for v in y.ticks() {
        let p = y.at(v);
        let _ = write!(
            s,
            r#"<line class="grid" x1="{:.1}" x2="{:.1}" y1="{p:.1}" y2="{p:.1}"/><text class="tk" x="{:.1}" y="{:.1}" text-anchor="end">{}</text>"#,
            x.from,
            x.to,
            x.from - 6.0,
            p + 4.0,
            y.label(v)
        );
    }
    let _ = write!(s, r#"<line class="ax" x1="{:.1}" x2="{:.1}" y1="{top:.1}" y2="{bottom:.1}"/>"#, x.from, x.from);
    x_axis(s, x, top, bottom, x_label, x_ticks);
    if !y_label.is_empty() {
        let cy = (top + bottom) / 2.0;
        let _ = write!(
            s,
            r#"<text class="al" x="18" y="{cy:.1}" text-anchor="middle" transform="rotate(-90 18 {cy:.1})">{}</text>"#,
            esc(y_label)
        );
    }
}

/// The x axis at `bottom`, with grid lines up to `top`.
fn x_axis(s: &mut String, x: &Scale, top: f64, bottom: f64, x_label: &str, x_ticks: Option<Vec<f64>>) {
    for v in x_ticks.unwrap_or_else(|| x.ticks()) {
        let p = x.at(v);
        let _ = write!(
            s,
            r#"<line class="grid" x1="{p:.1}" x2="{p:.1}" y1="{top:.1}" y2="{bottom:.1}"/><text class="tk" x="{p:.1}" y="{:.1}" text-anchor="middle">{}</text>"#,
            bottom + 16.0,
            x.label(v)
        );
    }
    let _ = write!(
        s,
        r#"<line class="ax" x1="{:.1}" x2="{:.1}" y1="{bottom:.1}" y2="{bottom:.1}"/><text class="al" x="{:.1}" y="{:.1}" text-anchor="middle">{}</text>"#,
        x.from,
        x.to,
        (x.from + x.to) / 2.0,
        bottom + 38.0,
        esc(x_label)
    );
}

/// The range of `values`, ignoring what is not finite.
fn range(values: impl Iterator<Item = f64>) -> (f64, f64) {
    values.filter(|v| v.is_finite()).fold((f64::INFINITY, f64::NEG_INFINITY), |(lo, hi), v| (lo.min(v), hi.max(v)))
}

/// A forest plot: one row per interval, the estimate as a dot and the interval as a
/// bar, with a dashed reference line (0 for differences) when given.
pub fn forest(title: &str, x_label: &str, rows: &[Interval], reference: Option<f64>) -> String {
    let row_h = 30.0;
    let left = 20.0 + 7.4 * rows.iter().map(|r| r.label.chars().count()).max().unwrap_or(0).min(40) as f64;
    let (top, h) = (44.0, 44.0 + row_h * rows.len() as f64 + 52.0);
    let (lo, hi) = range(rows.iter().flat_map(|r| [r.est, r.ci.map_or(r.est, |c| c.0), r.ci.map_or(r.est, |c| c.1)]));
    let (lo, hi) = match reference {
        Some(z) => (lo.min(z), hi.max(z)),
        None => (lo, hi),
    };
    let x = Scale::nice(lo, hi, left + 10.0, W - 30.0);
    let mut s = open(h, title, &[]);
    x_axis(&mut s, &x, top, h - 52.0, x_label, None);
    if let Some(z) = reference {
        let p = x.at(z);
        let _ = write!(s, r#"<line class="ref" x1="{p:.1}" x2="{p:.1}" y1="{top:.1}" y2="{:.1}"/>"#, h - 52.0);
    }
    for (i, r) in rows.iter().enumerate() {
        let cy = top + row_h * (i as f64 + 0.5);
        let _ = write!(
            s,
            r#"<text class="rl" x="{:.1}" y="{:.1}" text-anchor="end">{}</text>"#,
            left,
            cy + 4.0,
            esc(&r.label)
        );
        if let Some((a, b)) = r.ci {
            let _ = write!(
                s,
                r#"<line stroke="{c}" stroke-width="3" x1="{:.1}" x2="{:.1}" y1="{cy:.1}" y2="{cy:.1}"><title>{}: 95% interval {a:.4} to {b:.4}</title></line>"#,
                x.at(a),
                x.at(b),
                esc(&r.label),
                c = r.colour
            );
        }
        if r.est.is_finite() {
            let _ = write!(
                s,
                r##"<circle cx="{:.1}" cy="{cy:.1}" r="6" fill="{}" stroke="#fff"><title>{}: {:.4}</title></circle>"##,
                x.at(r.est),
                r.colour,
                esc(&r.label),
                r.est
            );
        }
    }
    s.push_str("</svg>");
    s
}

/// A line chart with error bars; `x_integer` puts a tick at every whole x (k, repeats).
pub fn lines(title: &str, x_label: &str, y_label: &str, series: &[Series], x_integer: bool) -> String {
    let h = 380.0;
    let legend: Vec<(&str, &str)> = series.iter().map(|s| (s.name.as_str(), s.colour)).collect();
    let mut s = open(h, title, &legend);
    let (xl, xh) = range(series.iter().flat_map(|s| s.points.iter().map(|p| p.0)));
    let (yl, yh) = range(
        series
            .iter()
            .flat_map(|s| s.points.iter().flat_map(|p| [p.1, p.2.map_or(p.1, |c| c.0), p.2.map_or(p.1, |c| c.1)])),
    );
    let x = if x_integer {
        Scale { lo: xl - 0.5, hi: xh + 0.5, from: 90.0, to: W - 30.0 }
    } else {
        Scale::nice(xl, xh, 90.0, W - 30.0)
    };
    let y = Scale::nice(yl, yh, h - 56.0, 44.0);
    let ticks = x_integer.then(|| {
        let n = (xh - xl).round() as i64;
        let every = (n / 20 + 1) as f64;
        (0..=n).map(|i| xl + i as f64).filter(|v| ((v - xl) / every).fract() == 0.0).collect()
    });
    axes(&mut s, &x, &y, x_label, y_label, ticks);
    // Runs side by side at one x, so their error bars do not hide each other.
    let spread = if x_integer && series.len() > 1 { 0.25 / series.len() as f64 } else { 0.0 };
    for (i, se) in series.iter().enumerate() {
        let dx = spread * (i as f64 - (series.len() as f64 - 1.0) / 2.0);
        let pts: Vec<String> = se
            .points
            .iter()
            .filter(|p| p.1.is_finite())
            .map(|p| format!("{:.1},{:.1}", x.at(p.0 + dx), y.at(p.1)))
            .collect();
        let _ =
            write!(s, r#"<polyline fill="none" stroke="{}" stroke-width="2" points="{}"/>"#, se.colour, pts.join(" "));
        for &(px, py, ci) in &se.points {
            let cx = x.at(px + dx);
            if let Some((a, b)) = ci {
                let _ = write!(
                    s,
                    r#"<path stroke="{c}" stroke-width="1.5" d="M{cx:.1} {:.1}V{:.1}M{:.1} {:.1}h8M{:.1} {:.1}h8"/>"#,
                    y.at(a),
                    y.at(b),
                    cx - 4.0,
                    y.at(a),
                    cx - 4.0,
                    y.at(b),
                    c = se.colour
                );
            }
            if py.is_finite() {
                let _ = write!(
                    s,
                    r#"<circle cx="{cx:.1}" cy="{:.1}" r="4" fill="{}"><title>{} at {px}: {py:.4}</title></circle>"#,
                    y.at(py),
                    se.colour,
                    esc(&se.name)
                );
            }
        }
    }
    s.push_str("</svg>");
    s
}

/// Grouped vertical bars: one group per category, one bar per series.
pub fn bars(
    title: &str,
    x_label: &str,
    y_label: &str,
    categories: &[String],
    series: &[(String, &'static str, Vec<f64>)],
) -> String {
    let h = 360.0;
    let legend: Vec<(&str, &str)> = series.iter().map(|s| (s.0.as_str(), s.1)).collect();
    let mut s = open(h, title, &legend);
    let top = range(series.iter().flat_map(|s| s.2.iter().copied())).1.max(1.0);
    let y = Scale::nice(0.0, top, h - 56.0, 44.0);
    let n = categories.len().max(1) as f64;
    let x = Scale { lo: 0.0, hi: n, from: 90.0, to: W - 30.0 };
    axes(&mut s, &x, &y, x_label, y_label, Some(Vec::new()));
    let band = (x.to - x.from) / n;
    let bw = (band * 0.8) / series.len().max(1) as f64;
    for (c, name) in categories.iter().enumerate() {
        let x0 = x.from + band * c as f64 + band * 0.1;
        let _ = write!(
            s,
            r#"<text class="tk" x="{:.1}" y="{:.1}" text-anchor="middle">{}</text>"#,
            x0 + band * 0.4,
            h - 40.0,
            esc(name)
        );
        for (i, (sname, col, v)) in series.iter().enumerate() {
            let val = v.get(c).copied().unwrap_or(0.0);
            let (yt, yb) = (y.at(val), y.at(0.0));
            let _ = write!(
                s,
                r#"<rect x="{:.1}" y="{yt:.1}" width="{:.1}" height="{:.1}" fill="{col}"><title>{}, {}: {val}</title></rect>"#,
                x0 + bw * i as f64,
                (bw - 1.0).max(1.0),
                (yb - yt).max(0.0),
                esc(sname),
                esc(name)
            );
        }
    }
    s.push_str("</svg>");
    s
}

/// A sequential colour from light to dark blue for a share `t` in 0..=1.
fn heat_colour(t: f64) -> String {
    let (a, b) = ([222.0, 235.0, 247.0], [8.0, 48.0, 107.0]);
    let c: Vec<u8> = (0..3).map(|i| (a[i] + (b[i] - a[i]) * t.clamp(0.0, 1.0)).round() as u8).collect();
    format!("#{:02x}{:02x}{:02x}", c[0], c[1], c[2])
}

/// Pairs `(x, y)` binned into a `bins`×`bins` grid over their common range, each cell
/// shaded by its count (and labelled with it while few cells are filled), with the
/// diagonal `y = x` drawn: one mark per filled cell, however many pairs.
pub fn heat(title: &str, x_label: &str, y_label: &str, points: &[(f64, f64)], bins: usize) -> String {
    let side = 420.0;
    let h = side + 100.0;
    let mut s = open(h, title, &[]);
    let (lo, hi) = range(points.iter().flat_map(|p| [p.0, p.1]));
    let (lo, hi) = if lo < hi { (lo, hi) } else { (lo - 0.5, hi + 0.5) };
    let left = (W - side) / 2.0;
    let x = Scale { lo, hi, from: left, to: left + side };
    let y = Scale { lo, hi, from: 44.0 + side, to: 44.0 };
    let cell = |v: f64| (((v - lo) / (hi - lo) * bins as f64).floor() as usize).min(bins - 1);
    let mut counts = vec![0usize; bins * bins];
    for &(a, b) in points.iter().filter(|p| p.0.is_finite() && p.1.is_finite()) {
        counts[cell(b) * bins + cell(a)] += 1;
    }
    let most = counts.iter().copied().max().unwrap_or(0).max(1);
    let filled = counts.iter().filter(|&&c| c > 0).count();
    let size = side / bins as f64;
    let _ = write!(s, r##"<rect x="{left:.1}" y="44" width="{side}" height="{side}" fill="#fafafa"/>"##);
    for (i, &c) in counts.iter().enumerate().filter(|(_, c)| **c > 0) {
        let (row, col) = (i / bins, i % bins);
        let (cx, cy) = (left + size * col as f64, 44.0 + side - size * (row + 1) as f64);
        let t = (c as f64).ln_1p() / (most as f64).ln_1p();
        let _ = write!(
            s,
            r#"<rect x="{cx:.1}" y="{cy:.1}" width="{:.1}" height="{:.1}" fill="{}"><title>{c} task(s)</title></rect>"#,
            size - 0.5,
            size - 0.5,
            heat_colour(0.15 + 0.85 * t)
        );
        if filled <= 80 && size >= 18.0 {
            let _ = write!(
                s,
                r#"<text class="hc" x="{:.1}" y="{:.1}" text-anchor="middle" fill="{}">{c}</text>"#,
                cx + size / 2.0,
                cy + size / 2.0 + 4.0,
                if t > 0.5 { "#fff" } else { "#123" }
            );
        }
    }
    let _ = write!(
        s,
        r##"<line class="ref" x1="{:.1}" y1="{:.1}" x2="{:.1}" y2="{:.1}"/>"##,
        x.at(lo),
        y.at(lo),
        x.at(hi),
        y.at(hi)
    );
    let ticks: Vec<f64> = (0..=4).map(|i| lo + (hi - lo) * i as f64 / 4.0).collect();
    for &v in &ticks {
        let _ = write!(
            s,
            r#"<text class="tk" x="{:.1}" y="{:.1}" text-anchor="middle">{}</text><text class="tk" x="{:.1}" y="{:.1}" text-anchor="end">{}</text>"#,
            x.at(v),
            44.0 + side + 16.0,
            short(v),
            left - 6.0,
            y.at(v) + 4.0,
            short(v)
        );
    }
    let _ = write!(
        s,
        r#"<text class="al" x="{:.1}" y="{:.1}" text-anchor="middle">{}</text><text class="al" x="{:.1}" y="{:.1}" text-anchor="middle" transform="rotate(-90 {:.1} {:.1})">{}</text>"#,
        left + side / 2.0,
        44.0 + side + 40.0,
        esc(x_label),
        left - 48.0,
        44.0 + side / 2.0,
        left - 48.0,
        44.0 + side / 2.0,
        esc(y_label)
    );
    // The count scale.
    let lx = left + side + 40.0;
    let _ = write!(s, r#"<text class="lg" x="{lx:.1}" y="60">tasks per cell</text>"#);
    for (i, c) in legend_counts(most as u64).into_iter().enumerate() {
        // Each swatch in the colour its own count gets in the cells.
        let t = (c as f64).ln_1p() / (most as f64).ln_1p().max(f64::MIN_POSITIVE);
        let _ = write!(
            s,
            r#"<rect x="{lx:.1}" y="{:.1}" width="16" height="16" fill="{}"/><text class="tk" x="{:.1}" y="{:.1}">{}</text>"#,
            70.0 + 22.0 * i as f64,
            heat_colour(0.15 + 0.85 * t.min(1.0)),
            lx + 22.0,
            83.0 + 22.0 * i as f64,
            c
        );
    }
    s.push_str("</svg>");
    s
}

/// The counts the heatmap's legend shows: five steps of the log scale from 1 to `most`,
/// rounded, each shown once (a small `most` gives fewer than five).
fn legend_counts(most: u64) -> Vec<u64> {
    let mut out: Vec<u64> = Vec::new();
    for i in 0..5 {
        let c = ((most as f64 + 1.0).powf(i as f64 / 4.0) - 1.0).round().max(1.0) as u64;
        if out.last() != Some(&c) {
            out.push(c);
        }
    }
    out
}

/// A tick label for an unrounded value.
fn short(v: f64) -> String {
    let s = format!("{v:.3}");
    let s = s.trim_end_matches('0').trim_end_matches('.');
    if s == "-0" {
        "0".into()
    } else {
        s.to_string()
    }
}

/// A scatter of labelled points (one per run).
pub fn scatter(title: &str, x_label: &str, y_label: &str, points: &[(String, &'static str, f64, f64)]) -> String {
    let h = 380.0;
    let legend: Vec<(&str, &str)> = points.iter().map(|p| (p.0.as_str(), p.1)).collect();
    let mut s = open(h, title, &legend);
    let (xl, xh) = range(points.iter().map(|p| p.2));
    let (yl, yh) = range(points.iter().map(|p| p.3));
    let pad = |lo: f64, hi: f64| {
        let d = (hi - lo).max(hi.abs() * 0.05).max(1e-9) * 0.1;
        (lo - d, hi + d)
    };
    let ((xl, xh), (yl, yh)) = (pad(xl, xh), pad(yl, yh));
    let x = Scale::nice(xl, xh, 90.0, W - 30.0);
    let y = Scale::nice(yl, yh, h - 56.0, 44.0);
    axes(&mut s, &x, &y, x_label, y_label, None);
    for (name, c, px, py) in points {
        let _ = write!(
            s,
            r##"<circle cx="{:.1}" cy="{:.1}" r="7" fill="{c}" stroke="#fff"><title>{}: {px:.1}, {py:.4}</title></circle>"##,
            x.at(*px),
            y.at(*py),
            esc(name)
        );
    }
    s.push_str("</svg>");
    s
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn heatmap_legend_counts_are_distinct() {
        assert_eq!(legend_counts(16), vec![1, 3, 7, 16]);
        assert_eq!(legend_counts(1), vec![1]);
        assert_eq!(legend_counts(1000), vec![1, 5, 31, 177, 1000]);
        for most in 1..500 {
            let c = legend_counts(most);
            assert!(c.windows(2).all(|w| w[0] < w[1]) && c[0] == 1 && *c.last().unwrap() == most, "{most}: {c:?}");
        }
    }

    #[test]
    fn ticks_are_round_and_cover_the_range() {
        let s = Scale::nice(0.13, 0.87, 0.0, 100.0);
        let t = s.ticks();
        assert!(t[0] <= 0.13 && *t.last().unwrap() >= 0.87, "{t:?}");
        assert!(t.iter().all(|v| (v * 10.0 - (v * 10.0).round()).abs() < 1e-9), "{t:?}");
        assert_eq!(s.label(0.2), "0.2");
    }

    #[test]
    fn heat_draws_one_mark_per_filled_cell() {
        let pts: Vec<(f64, f64)> = (0..10_000).map(|i| ((i % 7) as f64 / 6.0, (i % 5) as f64 / 4.0)).collect();
        let svg = heat("t", "x", "y", &pts, 20);
        // 35 filled cells and the 5 swatches of the count scale.
        assert_eq!(svg.matches("<rect").count(), 1 + 35 + 5, "{svg}");
    }

    #[test]
    fn text_is_escaped() {
        let svg = forest("a<b", "x", &[Interval { label: "<i>&".into(), est: 1.0, ci: None, colour: colour(0) }], None);
        assert!(!svg.contains("<i>") && svg.contains("&lt;i&gt;&amp;"), "{svg}");
    }
}
