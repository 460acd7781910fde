//! `mpistages-bench plot`: a log-log chart (`chart::log_lines`) of a CSV
//! of `series,x,y` rows, for the bench scripts (bench/scale draws its
//! recoveries against ranks with it).

const USAGE: &str = "\
usage: mpistages-bench plot [--title T] [--x-desc D] [--y-desc D] IN.csv OUT.svg
  IN.csv has a header line, then rows series,x,y (x and y positive);
  one line per series, in the order they first appear.";

pub fn main(args: &[String]) -> i32 {
    match run(args) {
        Ok(()) => 0,
        Err(e) if e.is_empty() => {
            eprintln!("{USAGE}");
            2
        }
        Err(e) => {
            eprintln!("mpistages-bench plot: {e}");
            eprintln!("see mpistages-bench plot --help");
            1
        }
    }
}

fn run(args: &[String]) -> Result<(), String> {
    let (mut title, mut x_desc, mut y_desc) = (String::new(), "x".to_string(), "y".to_string());
    let mut files = Vec::new();
    let mut it = args.iter();
    while let Some(a) = it.next() {
        let mut value = || it.next().cloned().ok_or(format!("{a} needs a value"));
        match a.as_str() {
            "--title" => title = value()?,
            "--x-desc" => x_desc = value()?,
            "--y-desc" => y_desc = value()?,
            "-h" | "--help" => return Err(String::new()),
            f if !f.starts_with('-') => files.push(f.to_string()),
            other => return Err(format!("unknown option {other}")),
        }
    }
    let [input, output] = files.as_slice() else {
        return Err("give IN.csv and OUT.svg".into());
    };
    let text = std::fs::read_to_string(input).map_err(|e| format!("{input}: {e}"))?;
    let series = parse(&text).map_err(|e| format!("{input}: {e}"))?;
    let svg = crate::chart::log_lines(&title, &x_desc, &y_desc, &series)?;
    std::fs::write(output, svg).map_err(|e| format!("{output}: {e}"))
}

/// A series' name and its points.
type Series = (String, Vec<(f64, f64)>);

/// The series of `series,x,y` rows after a header line.
fn parse(text: &str) -> Result<Vec<Series>, String> {
    let mut series: Vec<Series> = Vec::new();
    for (i, line) in text.lines().enumerate().skip(1) {
        if line.trim().is_empty() {
            continue;
        }
        let bad = || format!("line {}: expected series,x,y with x, y > 0: {line}", i + 1);
        let mut f = line.split(',');
        let (Some(name), Some(x), Some(y), None) = (f.next(), f.next(), f.next(), f.next()) else {
            return Err(bad());
        };
        let num = |s: &str| {
            s.trim()
                .parse::<f64>()
                .ok()
                .filter(|v| *v > 0.0 && v.is_finite())
        };
        let (Some(x), Some(y)) = (num(x), num(y)) else {
            return Err(bad());
        };
        match series.iter_mut().find(|s| s.0 == name) {
            Some(s) => s.1.push((x, y)),
            None => series.push((name.to_string(), vec![(x, y)])),
        }
    }
    if series.is_empty() {
        return Err("no rows".into());
    }
    Ok(series)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rows_make_series_and_bad_rows_are_errors() {
        let s = parse("series,x,y\nstages,64,2.8\nfloor,64,1.0\nstages,256,13.4\n").unwrap();
        assert_eq!(s.len(), 2);
        assert_eq!(
            s[0],
            ("stages".to_string(), vec![(64.0, 2.8), (256.0, 13.4)])
        );
        assert!(parse("h\nstages,64\n").is_err());
        assert!(parse("h\nstages,0,1\n").is_err());
        assert!(parse("h\nstages,x,1\n").is_err());
        assert!(parse("h\n").is_err());
    }
}
