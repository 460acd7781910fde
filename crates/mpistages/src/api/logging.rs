//! What the library says on standard error, by level: `MPISTAGES_LOG` is
//! `error`, `warn`, `info` (the default: warnings and what a recovery
//! restored), `debug` (also errors returned under `MPI_ERRORS_RETURN`,
//! failure notices, rollbacks and connections) or `trace`; `off` says
//! nothing. `MPISTAGES_DEBUG=1`, the older switch, means `debug`. Every
//! layer writes through the `log` macros; messages start with
//! `mpistages:` and name the rank where it matters.

use log::{LevelFilter, Log, Metadata, Record};

struct Stderr;

impl Log for Stderr {
    fn enabled(&self, m: &Metadata) -> bool {
        m.level() <= log::max_level()
    }
    fn log(&self, r: &Record) {
        if self.enabled(r.metadata()) {
            // One write per line: stderr is unbuffered, and a line written
            // in pieces can be interleaved with other ranks' output.
            use std::io::Write;
            let line = format!("{}\n", r.args());
            let _ = std::io::stderr().lock().write_all(line.as_bytes());
        }
    }
    fn flush(&self) {}
}

static STDERR: Stderr = Stderr;

/// The level `MPISTAGES_LOG` (or `MPISTAGES_DEBUG`) asks for; an unknown
/// value is an error naming the ones there are.
pub fn level_from(log: Option<&str>, debug: bool) -> Result<LevelFilter, String> {
    match log {
        None | Some("") if debug => Ok(LevelFilter::Debug),
        None | Some("") => Ok(LevelFilter::Info),
        Some(v) => v.parse().map_err(|_| {
            format!("MPISTAGES_LOG='{v}': expected off, error, warn, info, debug or trace")
        }),
    }
}

/// Installs the logger at the level the environment asks for (once per
/// process; a second call only sets the level again).
pub fn init() -> Result<(), String> {
    let log = std::env::var("MPISTAGES_LOG").ok();
    let debug = std::env::var_os("MPISTAGES_DEBUG").is_some();
    let level = level_from(log.as_deref(), debug)?;
    let _ = log::set_logger(&STDERR);
    log::set_max_level(level);
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn levels_from_the_environment() {
        assert_eq!(level_from(None, false), Ok(LevelFilter::Info));
        assert_eq!(level_from(None, true), Ok(LevelFilter::Debug));
        assert_eq!(level_from(Some("warn"), true), Ok(LevelFilter::Warn));
        assert_eq!(level_from(Some("debug"), false), Ok(LevelFilter::Debug));
        assert_eq!(level_from(Some("off"), false), Ok(LevelFilter::Off));
        assert!(level_from(Some("loud"), false)
            .unwrap_err()
            .contains("expected off, error"));
    }
}
