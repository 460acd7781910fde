//! The recovery-time-vs-ranks chart of one application as SVG (drawn with
//! `plotters`): one line per recovery mode through the medians, each mode
//! in a colour and with a marker of its own (the same in every chart, and
//! told apart in grey), an error bar from the fastest to the slowest
//! repetition at each point (the modes' bars side by side around the rank
//! count), ranks on a log-2 axis and times on a log axis (a cpr recovery
//! is a hundred times a stages one).

use plotters::coord::CoordTranslate;
use plotters::element::{EmptyElement, ErrorBar};
use plotters::prelude::*;

pub struct Series {
    pub mode: String,
    /// (ranks, median, fastest, slowest recovery ms)
    pub points: Vec<(usize, f64, f64, f64)>,
}

/// How a series is drawn: its colour and marker.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Look {
    pub colour: RGBColor,
    pub marker: Marker,
}

#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Marker {
    Circle,
    Triangle,
    Square,
    Diamond,
    Plus,
    Down,
}

const MARKERS: [Marker; 6] = [
    Marker::Circle,
    Marker::Triangle,
    Marker::Square,
    Marker::Diamond,
    Marker::Plus,
    Marker::Down,
];

/// The recovery modes, in the order of their looks.
const MODES: [&str; 7] = [
    "stages",
    "reinit",
    "cpr",
    "restart",
    "ulfm",
    "ulfm-shrink",
    "none",
];

/// The look of recovery mode `mode` (fixed per mode, so a mode looks the
/// same in every chart); another name gets the next free one by `k`.
pub fn look_of_mode(mode: &str, k: usize) -> Look {
    let i = MODES
        .iter()
        .position(|m| *m == mode)
        .unwrap_or(MODES.len() + k);
    look(i)
}

/// The `i`-th look: colours far apart, and markers cycling apart from
/// them (no two of the first eight alike in colour or marker).
pub fn look(i: usize) -> Look {
    Look {
        colour: PALETTE[i % PALETTE.len()],
        marker: MARKERS[i % MARKERS.len()],
    }
}

/// The outline of `marker`, `size` pixels across, around (0, 0): every
/// marker a filled polygon (one element type for plotters to draw).
fn shape(marker: Marker, size: i32) -> Vec<(i32, i32)> {
    let r = size / 2;
    match marker {
        Marker::Circle => (0..12)
            .map(|k| {
                let a = k as f64 * std::f64::consts::PI / 6.0;
                (
                    (r as f64 * a.cos()).round() as i32,
                    (r as f64 * a.sin()).round() as i32,
                )
            })
            .collect(),
        Marker::Triangle => vec![(0, -r - 1), (r + 1, r), (-r - 1, r)],
        Marker::Down => vec![(0, r + 1), (r + 1, -r), (-r - 1, -r)],
        Marker::Square => vec![(-r, -r), (r, -r), (r, r), (-r, r)],
        Marker::Diamond => vec![(0, -r - 1), (r + 1, 0), (0, r + 1), (-r - 1, 0)],
        Marker::Plus => {
            let (t, w) = (r / 3 + 1, r + 1);
            vec![
                (-t, -w),
                (t, -w),
                (t, -t),
                (w, -t),
                (w, t),
                (t, t),
                (t, w),
                (-t, w),
                (-t, t),
                (-w, t),
                (-w, -t),
                (-t, -t),
            ]
        }
    }
}

/// `look`'s marker at each of `points`.
fn draw_markers<DB: DrawingBackend, CT: CoordTranslate>(
    chart: &mut ChartContext<'_, DB, CT>,
    points: impl Iterator<Item = CT::From>,
    look: Look,
    size: i32,
) -> Result<(), DrawingAreaErrorKind<DB::ErrorType>>
where
    CT::From: Clone,
{
    let outline = shape(look.marker, size);
    chart.draw_series(
        points.map(|p| EmptyElement::at(p) + Polygon::new(outline.clone(), look.colour.filled())),
    )?;
    Ok(())
}

/// A legend entry's marker of `look`, on a short line from (0, 0) to (24, 0).
fn legend_shape(look: Look) -> Vec<(i32, i32)> {
    shape(look.marker, 9)
        .into_iter()
        .map(|(x, y)| (x + 12, y))
        .collect()
}

/// The trimmed text of every `<text>` element of an SVG document.
#[cfg(test)]
fn texts(svg: &str) -> Vec<String> {
    svg.split("<text")
        .skip(1)
        .filter_map(|t| {
            let body = &t[t.find('>')? + 1..];
            Some(body[..body.find("</text>")?].trim().to_string())
        })
        .collect()
}

/// The chart as an SVG document.
pub fn svg(app: &str, series: &[Series]) -> Result<String, String> {
    let mut out = String::new();
    draw(&mut out, app, series).map_err(|e| format!("drawing the {app} chart: {e}"))?;
    Ok(out)
}

/// Where series `k` of `m` sits beside the others at each rank count, in
/// log-2 units: side by side, centred on the rank count.
fn offset(k: usize, m: usize) -> f64 {
    (k as f64 - (m as f64 - 1.0) / 2.0) * 0.07
}

fn draw(out: &mut String, app: &str, series: &[Series]) -> Result<(), Box<dyn std::error::Error>> {
    let points = || series.iter().flat_map(|s| s.points.iter());
    let log2 = |n: usize| (n.max(1) as f64).log2();
    let lo = points()
        .map(|p| log2(p.0))
        .fold(f64::MAX, f64::min)
        .min(20.0);
    let hi = points().map(|p| log2(p.0)).fold(0.0, f64::max).max(lo);
    let ylo = points()
        .map(|p| p.2)
        .fold(f64::MAX, f64::min)
        .clamp(1e-3, 1e9);
    let yhi = points().map(|p| p.3).fold(1e-3, f64::max).max(ylo * 2.0);
    // A label at each power of two between the smallest and largest rank
    // count: the count.
    let labels = (hi.ceil() - lo.floor()) as usize + 2;
    let root = SVGBackend::with_string(out, (760, 460)).into_drawing_area();
    root.fill(&WHITE)?;
    let mut chart = ChartBuilder::on(&root)
        .caption(
            format!("{app}: recovery time after one SIGKILL"),
            ("sans-serif", 20),
        )
        .margin(15)
        .x_label_area_size(40)
        .y_label_area_size(70)
        .build_cartesian_2d(
            (lo - 0.5)..(hi + 0.5),
            // From a power of ten: plotters labels a log axis from the
            // first one in its range on.
            (10f64.powf((ylo / 1.2).log10().floor())..yhi * 1.6).log_scale(),
        )?;
    chart
        .configure_mesh()
        .x_desc("ranks (log scale)")
        .y_desc("recovery (ms, log scale): median, fastest–slowest")
        .x_labels(labels)
        .x_label_formatter(&|x| {
            if (x - x.round()).abs() < 1e-9 {
                format!("{}", 2f64.powf(*x).round())
            } else {
                String::new()
            }
        })
        .y_label_formatter(&|v| {
            if *v >= 1.0 {
                format!("{v:.0}")
            } else {
                format!("{v}")
            }
        })
        .y_labels(16)
        .disable_x_mesh()
        .label_style(("sans-serif", 14))
        .axis_desc_style(("sans-serif", 15))
        .draw()?;
    for (k, s) in series.iter().enumerate() {
        let look = look_of_mode(&s.mode, k);
        let colour = look.colour;
        let x = |n: usize| log2(n) + offset(k, series.len());
        chart
            .draw_series(LineSeries::new(
                s.points.iter().map(|p| (x(p.0), p.1)),
                colour.stroke_width(2),
            ))?
            .label(s.mode.as_str())
            .legend(move |at| {
                let look = look;
                EmptyElement::at(at)
                    + PathElement::new(vec![(0, 0), (24, 0)], look.colour.stroke_width(2))
                    + Polygon::new(legend_shape(look), look.colour.filled())
            });
        chart.draw_series(
            s.points
                .iter()
                .map(|p| ErrorBar::new_vertical(x(p.0), p.2, p.1, p.3, colour.stroke_width(1), 8)),
        )?;
        draw_markers(&mut chart, s.points.iter().map(|p| (x(p.0), p.1)), look, 9)?;
    }
    chart
        .configure_series_labels()
        .position(SeriesLabelPosition::UpperLeft)
        .background_style(WHITE.mix(0.9))
        .border_style(BLACK)
        .label_font(("sans-serif", 14))
        .draw()?;
    root.present()?;
    Ok(())
}

/// Lines through points on log-log axes (one colour and marker per
/// series): how something grows with the job, for the simulator.
pub fn log_lines(
    title: &str,
    x_desc: &str,
    y_desc: &str,
    series: &[(String, Vec<(f64, f64)>)],
) -> Result<String, String> {
    let mut out = String::new();
    draw_log(&mut out, title, x_desc, y_desc, series)
        .map_err(|e| format!("drawing '{title}': {e}"))?;
    Ok(out)
}

fn draw_log(
    out: &mut String,
    title: &str,
    x_desc: &str,
    y_desc: &str,
    series: &[(String, Vec<(f64, f64)>)],
) -> Result<(), Box<dyn std::error::Error>> {
    let points = || series.iter().flat_map(|s| s.1.iter());
    let (xlo, xhi) = points().fold((f64::MAX, 1.0f64), |(a, b), p| (a.min(p.0), b.max(p.0)));
    let (ylo, yhi) = points().fold((f64::MAX, 1e-3f64), |(a, b), p| (a.min(p.1), b.max(p.1)));
    let root = SVGBackend::with_string(out, (760, 460)).into_drawing_area();
    root.fill(&WHITE)?;
    let mut chart = ChartBuilder::on(&root)
        .caption(title, ("sans-serif", 18))
        .margin(15)
        .x_label_area_size(40)
        .y_label_area_size(70)
        .build_cartesian_2d(
            (xlo.min(xhi) / 1.5..xhi * 1.5).log_scale(),
            (ylo.min(yhi).max(1e-4) / 2.0..yhi * 2.0).log_scale(),
        )?;
    let number = |v: &f64| {
        if *v >= 1.0 {
            format!("{v:.0}")
        } else {
            format!("{v}")
        }
    };
    chart
        .configure_mesh()
        .x_desc(x_desc)
        .y_desc(y_desc)
        .x_label_formatter(&number)
        .y_label_formatter(&number)
        .label_style(("sans-serif", 13))
        .axis_desc_style(("sans-serif", 14))
        .draw()?;
    for (k, (name, pts)) in series.iter().enumerate() {
        let colour = look(k).colour;
        chart
            .draw_series(LineSeries::new(pts.iter().copied(), colour.stroke_width(2)))?
            .label(name.as_str())
            .legend(move |at| {
                let look = look(k);
                EmptyElement::at(at)
                    + PathElement::new(vec![(0, 0), (24, 0)], look.colour.stroke_width(2))
                    + Polygon::new(legend_shape(look), look.colour.filled())
            });
        // A marker of its own per series, for print in grey.
        draw_markers(&mut chart, pts.iter().copied(), look(k), 8)?;
    }
    chart
        .configure_series_labels()
        .position(SeriesLabelPosition::UpperLeft)
        .background_style(WHITE.mix(0.9))
        .border_style(BLACK)
        .label_font(("sans-serif", 13))
        .draw()?;
    root.present()?;
    Ok(())
}

/// Colours far enough apart to tell eight series apart.
const PALETTE: [RGBColor; 8] = [
    RGBColor(31, 119, 180),
    RGBColor(214, 39, 40),
    RGBColor(44, 160, 44),
    RGBColor(148, 103, 189),
    RGBColor(255, 127, 14),
    RGBColor(23, 190, 207),
    RGBColor(140, 86, 75),
    RGBColor(227, 119, 194),
];

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_mode_has_its_line_and_its_name() {
        let series: Vec<Series> = ["stages", "reinit"]
            .iter()
            .enumerate()
            .map(|(k, m)| Series {
                mode: m.to_string(),
                points: vec![(1, 2.0 + k as f64, 1.5, 3.0), (4, 5.0, 4.0, 9.5)],
            })
            .collect();
        let svg = svg("md", &series).unwrap();
        assert!(svg.starts_with("<svg"), "{svg}");
        let words = texts(&svg);
        assert!(words.contains(&"md: recovery time after one SIGKILL".to_string()));
        for m in ["stages", "reinit"] {
            assert!(
                words.contains(&m.to_string()),
                "legend names {m}: {words:?}"
            );
        }
        // A marker per point and per legend entry, each mode in its own
        // colour; a bar (three lines: stem and two caps) per point.
        assert_eq!(svg.matches("<polygon").count(), 4 + 2, "{svg}");
        for m in ["stages", "reinit"] {
            let RGBColor(r, g, b) = look_of_mode(m, 0).colour;
            let fill = format!("#{r:02X}{g:02X}{b:02X}");
            assert!(svg.contains(&fill), "{m}'s colour {fill} in {svg}");
        }
    }

    #[test]
    fn every_mode_looks_different() {
        let modes = MODES;
        for (i, a) in modes.iter().enumerate() {
            for b in &modes[i + 1..] {
                let (la, lb) = (look_of_mode(a, 0), look_of_mode(b, 0));
                assert_ne!(la.colour, lb.colour, "{a} and {b}");
            }
        }
        // The first six differ in marker too (told apart in grey).
        for i in 0..6 {
            for j in i + 1..6 {
                assert_ne!(look(i).marker, look(j).marker);
            }
        }
        // An unknown mode gets a look no known mode has.
        assert!(!modes
            .iter()
            .any(|m| look_of_mode(m, 0) == look_of_mode("other", 0)));
    }
}
