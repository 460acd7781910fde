//! The recovery-time-vs-ranks chart of one application, one line per
//! recovery mode, as SVG and as PNG (drawn on the same layout).

use crate::png::Canvas;

pub struct Series {
    pub mode: String,
    /// (ranks, median recovery ms)
    pub points: Vec<(usize, f64)>,
}

const W: f64 = 720.0;
const H: f64 = 440.0;
const LEFT: f64 = 80.0;
const RIGHT: f64 = 150.0;
const TOP: f64 = 50.0;
const BOTTOM: f64 = 60.0;
const COLOURS: [[u8; 3]; 4] = [
    [31, 119, 180],
    [214, 39, 40],
    [44, 160, 44],
    [148, 103, 189],
];

struct Layout {
    ranks: Vec<usize>,
    ymax: f64,
}

impl Layout {
    fn new(series: &[Series]) -> Layout {
        let mut ranks: Vec<usize> = series
            .iter()
            .flat_map(|s| s.points.iter().map(|p| p.0))
            .collect();
        ranks.sort_unstable();
        ranks.dedup();
        let top = series
            .iter()
            .flat_map(|s| s.points.iter().map(|p| p.1))
            .fold(1.0f64, f64::max);
        // A round axis end: 1, 2 or 5 times a power of ten.
        let mag = 10f64.powf(top.log10().floor());
        let ymax = [1.0, 2.0, 5.0, 10.0]
            .iter()
            .map(|m| m * mag)
            .find(|&v| v >= top)
            .unwrap_or(10.0 * mag);
        Layout { ranks, ymax }
    }
    fn x(&self, ranks: usize) -> f64 {
        let i = self.ranks.iter().position(|&r| r == ranks).unwrap_or(0) as f64;
        let n = (self.ranks.len().max(2) - 1) as f64;
        LEFT + (W - LEFT - RIGHT) * if self.ranks.len() == 1 { 0.5 } else { i / n }
    }
    fn y(&self, ms: f64) -> f64 {
        H - BOTTOM - (H - TOP - BOTTOM) * (ms / self.ymax)
    }
    fn ticks(&self) -> Vec<f64> {
        (0..=5).map(|i| self.ymax * i as f64 / 5.0).collect()
    }
}

fn label(v: f64) -> String {
    if v >= 10.0 || v == 0.0 {
        format!("{v:.0}")
    } else {
        format!("{v:.1}")
    }
}

pub fn svg(app: &str, series: &[Series]) -> String {
    let l = Layout::new(series);
    let mut s = format!(
        "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"{W}\" height=\"{H}\" font-family=\"sans-serif\" font-size=\"13\">\n\
         <rect width=\"100%\" height=\"100%\" fill=\"white\"/>\n\
         <text x=\"{}\" y=\"28\" text-anchor=\"middle\" font-size=\"16\">{app}: recovery time after one SIGKILL</text>\n",
        (LEFT + W - RIGHT) / 2.0
    );
    for t in l.ticks() {
        let y = l.y(t);
        s += &format!(
            "<line x1=\"{LEFT}\" x2=\"{}\" y1=\"{y:.1}\" y2=\"{y:.1}\" stroke=\"#ddd\"/>\n\
             <text x=\"{}\" y=\"{:.1}\" text-anchor=\"end\">{}</text>\n",
            W - RIGHT,
            LEFT - 8.0,
            y + 4.0,
            label(t)
        );
    }
    for &r in &l.ranks {
        s += &format!(
            "<text x=\"{:.1}\" y=\"{}\" text-anchor=\"middle\">{r}</text>\n",
            l.x(r),
            H - BOTTOM + 20.0
        );
    }
    s += &format!(
        "<text x=\"{:.1}\" y=\"{}\" text-anchor=\"middle\">ranks</text>\n\
         <text transform=\"translate(22,{:.1}) rotate(-90)\" text-anchor=\"middle\">recovery time (ms, median)</text>\n\
         <line x1=\"{LEFT}\" x2=\"{LEFT}\" y1=\"{TOP}\" y2=\"{}\" stroke=\"black\"/>\n\
         <line x1=\"{LEFT}\" x2=\"{}\" y1=\"{}\" y2=\"{}\" stroke=\"black\"/>\n",
        (LEFT + W - RIGHT) / 2.0,
        H - 15.0,
        (TOP + H - BOTTOM) / 2.0,
        H - BOTTOM,
        W - RIGHT,
        H - BOTTOM,
        H - BOTTOM
    );
    for (k, se) in series.iter().enumerate() {
        let [r, g, b] = COLOURS[k % COLOURS.len()];
        let colour = format!("rgb({r},{g},{b})");
        let pts: Vec<String> = se
            .points
            .iter()
            .map(|&(n, ms)| format!("{:.1},{:.1}", l.x(n), l.y(ms)))
            .collect();
        s += &format!(
            "<polyline points=\"{}\" fill=\"none\" stroke=\"{colour}\" stroke-width=\"2.5\"/>\n",
            pts.join(" ")
        );
        for &(n, ms) in &se.points {
            s += &format!(
                "<circle cx=\"{:.1}\" cy=\"{:.1}\" r=\"4\" fill=\"{colour}\"><title>{} at {n} ranks: {ms:.1} ms</title></circle>\n",
                l.x(n),
                l.y(ms),
                se.mode
            );
        }
        let ly = TOP + 20.0 + 24.0 * k as f64;
        s += &format!(
            "<line x1=\"{}\" x2=\"{}\" y1=\"{ly}\" y2=\"{ly}\" stroke=\"{colour}\" stroke-width=\"3\"/>\n\
             <text x=\"{}\" y=\"{}\">{}</text>\n",
            W - RIGHT + 15.0,
            W - RIGHT + 45.0,
            W - RIGHT + 52.0,
            ly + 4.0,
            se.mode
        );
    }
    s + "</svg>\n"
}

pub fn png(app: &str, series: &[Series]) -> Vec<u8> {
    let l = Layout::new(series);
    let mut c = Canvas::new(W as usize, H as usize);
    let black = [0, 0, 0];
    let p = |x: f64, y: f64| (x.round() as i64, y.round() as i64);
    let title = format!("{app}: recovery time after one sigkill");
    let cx = ((LEFT + W - RIGHT) / 2.0) as i64;
    c.text(cx - Canvas::text_width(&title, 3) / 2, 12, &title, 3, black);
    for t in l.ticks() {
        let y = l.y(t);
        c.line(p(LEFT, y), p(W - RIGHT, y), 1, [221, 221, 221]);
        let s = label(t);
        c.text(
            LEFT as i64 - 8 - Canvas::text_width(&s, 2),
            y as i64 - 5,
            &s,
            2,
            black,
        );
    }
    for &r in &l.ranks {
        let s = r.to_string();
        c.text(
            l.x(r) as i64 - Canvas::text_width(&s, 2) / 2,
            (H - BOTTOM) as i64 + 10,
            &s,
            2,
            black,
        );
    }
    c.text(
        cx - Canvas::text_width("ranks", 2) / 2,
        H as i64 - 24,
        "ranks",
        2,
        black,
    );
    c.text(8, (TOP - 22.0) as i64, "ms (median)", 2, black);
    c.line(p(LEFT, TOP), p(LEFT, H - BOTTOM), 2, black);
    c.line(p(LEFT, H - BOTTOM), p(W - RIGHT, H - BOTTOM), 2, black);
    for (k, se) in series.iter().enumerate() {
        let colour = COLOURS[k % COLOURS.len()];
        for w in se.points.windows(2) {
            c.line(
                p(l.x(w[0].0), l.y(w[0].1)),
                p(l.x(w[1].0), l.y(w[1].1)),
                3,
                colour,
            );
        }
        for &(n, ms) in &se.points {
            c.fill(l.x(n) as i64 - 4, l.y(ms) as i64 - 4, 9, 9, colour);
        }
        let ly = (TOP + 20.0 + 24.0 * k as f64) as i64;
        let lx = (W - RIGHT + 15.0) as i64;
        c.line((lx, ly), (lx + 30, ly), 3, colour);
        c.text(lx + 37, ly - 5, &se.mode, 2, black);
    }
    c.png()
}
