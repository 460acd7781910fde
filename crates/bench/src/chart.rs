//! The recovery-time-vs-ranks chart of one application as SVG (drawn with
//! `plotters`): one line per recovery mode through the medians, and a bar
//! from the fastest to the slowest repetition at each point.

use plotters::prelude::*;

pub struct Series {
    pub mode: String,
    /// (ranks, median, fastest, slowest recovery ms)
    pub points: Vec<(usize, f64, f64, f64)>,
}

const COLOURS: [RGBColor; 4] = [
    RGBColor(31, 119, 180),
    RGBColor(214, 39, 40),
    RGBColor(44, 160, 44),
    RGBColor(148, 103, 189),
];

/// The chart as an SVG document.
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

pub fn svg(app: &str, series: &[Series]) -> Result<String, String> {
    let mut out = String::new();
    draw(&mut out, app, series).map_err(|e| format!("drawing the {app} chart: {e}"))?;
    Ok(out)
}

fn draw(out: &mut String, app: &str, series: &[Series]) -> Result<(), Box<dyn std::error::Error>> {
    let points = || series.iter().flat_map(|s| s.points.iter());
    let lo = points().map(|p| p.0).min().unwrap_or(1) as i32;
    let hi = points().map(|p| p.0).max().unwrap_or(1) as i32;
    let top = points().map(|p| p.3).fold(1.0f64, f64::max) * 1.1;
    let root = SVGBackend::with_string(out, (720, 440)).into_drawing_area();
    root.fill(&WHITE)?;
    let mut chart = ChartBuilder::on(&root)
        .caption(
            format!("{app}: recovery time after one SIGKILL"),
            ("sans-serif", 20),
        )
        .margin(15)
        .x_label_area_size(40)
        .y_label_area_size(60)
        .build_cartesian_2d((lo - 1)..(hi + 1), 0f64..top)?;
    chart
        .configure_mesh()
        .x_desc("ranks")
        .y_desc("recovery time (ms): median, fastest to slowest")
        .disable_x_mesh()
        .label_style(("sans-serif", 14))
        .axis_desc_style(("sans-serif", 15))
        .draw()?;
    for (k, s) in series.iter().enumerate() {
        let colour = COLOURS[k % COLOURS.len()];
        chart
            .draw_series(LineSeries::new(
                s.points.iter().map(|p| (p.0 as i32, p.1)),
                colour.stroke_width(3),
            ))?
            .label(s.mode.as_str())
            .legend(move |(x, y)| {
                PathElement::new(vec![(x, y), (x + 24, y)], colour.stroke_width(3))
            });
        chart.draw_series(s.points.iter().map(|p| {
            PathElement::new(
                vec![(p.0 as i32, p.2), (p.0 as i32, p.3)],
                colour.stroke_width(1),
            )
        }))?;
        chart.draw_series(
            s.points
                .iter()
                .map(|p| Circle::new((p.0 as i32, p.1), 4, colour.filled())),
        )?;
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
        let colour = PALETTE[k % PALETTE.len()];
        chart
            .draw_series(LineSeries::new(pts.iter().copied(), colour.stroke_width(2)))?
            .label(name.as_str())
            .legend(move |(x, y)| {
                PathElement::new(vec![(x, y), (x + 24, y)], colour.stroke_width(3))
            });
        // A marker of its own per series, for print in grey.
        match k % 3 {
            0 => chart.draw_series(pts.iter().map(|&p| Circle::new(p, 4, colour.filled())))?,
            1 => chart.draw_series(
                pts.iter()
                    .map(|&p| TriangleMarker::new(p, 5, colour.filled())),
            )?,
            _ => chart.draw_series(
                pts.iter()
                    .map(|&p| Cross::new(p, 4, colour.stroke_width(2))),
            )?,
        };
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
        // Two lines and two legend marks, one min-max bar per point.
        assert!(svg.matches("<polyline").count() >= 4 + 4, "{svg}");
        assert_eq!(svg.matches("<circle").count(), 4);
    }
}
