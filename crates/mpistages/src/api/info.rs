//! `MPI_Info` objects: ordered (key, value) string pairs. Setting a key
//! that is there replaces its value in place, so `MPI_Info_get_nthkey`
//! gives keys in the order they were first set, as MPICH and Open MPI do.

use super::consts::err;
use super::error::{fail, MpiResult};

/// Longest key, in characters (`MPI_MAX_INFO_KEY`, without the NUL).
pub const MAX_INFO_KEY: usize = 255;
/// Longest value, in characters (`MPI_MAX_INFO_VAL`, without the NUL).
pub const MAX_INFO_VAL: usize = 1024;

#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Info {
    pairs: Vec<(String, String)>,
}

fn check_key(key: &str) -> MpiResult<()> {
    if key.is_empty() || key.len() > MAX_INFO_KEY {
        return fail(
            err::INFO_KEY,
            format!(
                "info key of {} characters (1 to {MAX_INFO_KEY} allowed)",
                key.len()
            ),
        );
    }
    Ok(())
}

impl Info {
    pub fn set(&mut self, key: &str, value: &str) -> MpiResult<()> {
        check_key(key)?;
        if value.is_empty() || value.len() > MAX_INFO_VAL {
            return fail(
                err::INFO_VALUE,
                format!(
                    "value of info key {key:?} has {} characters (1 to {MAX_INFO_VAL} allowed)",
                    value.len()
                ),
            );
        }
        match self.pairs.iter_mut().find(|(k, _)| k == key) {
            Some(p) => p.1 = value.to_string(),
            None => self.pairs.push((key.to_string(), value.to_string())),
        }
        Ok(())
    }

    pub fn get(&self, key: &str) -> MpiResult<Option<&str>> {
        check_key(key)?;
        Ok(self
            .pairs
            .iter()
            .find(|(k, _)| k == key)
            .map(|(_, v)| v.as_str()))
    }

    pub fn delete(&mut self, key: &str) -> MpiResult<()> {
        check_key(key)?;
        match self.pairs.iter().position(|(k, _)| k == key) {
            Some(i) => {
                self.pairs.remove(i);
                Ok(())
            }
            None => fail(err::INFO_NOKEY, format!("info key {key:?} is not set")),
        }
    }

    /// Every (key, value), in the order they were set.
    pub fn entries(&self) -> impl Iterator<Item = (&str, &str)> {
        self.pairs.iter().map(|(k, v)| (k.as_str(), v.as_str()))
    }

    pub fn nkeys(&self) -> usize {
        self.pairs.len()
    }

    pub fn nth_key(&self, n: i32) -> MpiResult<&str> {
        match usize::try_from(n).ok().and_then(|i| self.pairs.get(i)) {
            Some((k, _)) => Ok(k),
            None => fail(
                err::ARG,
                format!(
                    "key number {n} of an info object with {} keys",
                    self.nkeys()
                ),
            ),
        }
    }

    /// `MPI_INFO_ENV`: how this process was started, as far as it knows.
    pub fn env(argv: &[String], maxprocs: usize) -> Info {
        let mut i = Info::default();
        if let Some(cmd) = argv.first() {
            let _ = i.set("command", cmd);
        }
        if argv.len() > 1 {
            let _ = i.set("argv", &argv[1..].join(" "));
        }
        let _ = i.set("maxprocs", &maxprocs.to_string());
        if let Ok(wd) = std::env::current_dir() {
            let _ = i.set("wdir", &wd.to_string_lossy());
        }
        let _ = i.set("thread_level", "MPI_THREAD_MULTIPLE");
        if let Ok(h) = std::env::var(super::INITIAL_ERRHANDLER_ENV) {
            let _ = i.set("mpi_initial_errhandler", &h);
        }
        i
    }
}

/// `MPI_INFO_NULL` and `MPI_INFO_ENV`; objects of the program start at 2.
pub const INFO_NULL: i32 = 0;
pub const INFO_ENV: i32 = 1;

/// The info objects. Global rather than in `Mpi`'s tables: MPI 4.0 lets
/// a program use them before `MPI_Init` and after `MPI_Finalize`.
static INFOS: std::sync::Mutex<Vec<Option<Info>>> = std::sync::Mutex::new(Vec::new());

fn infos() -> std::sync::MutexGuard<'static, Vec<Option<Info>>> {
    let mut t = INFOS.lock().unwrap_or_else(|p| p.into_inner());
    if t.is_empty() {
        let argv: Vec<String> = std::env::args().collect();
        let size = std::env::var(crate::control::env::SIZE)
            .ok()
            .and_then(|v| v.parse().ok())
            .unwrap_or(1);
        t.push(None);
        t.push(Some(Info::env(&argv, size)));
    }
    t
}

/// Runs `f` on the info object `h` (`MPI_ERR_INFO` if there is none).
pub fn with<T>(h: i32, f: impl FnOnce(&mut Info) -> MpiResult<T>) -> MpiResult<T> {
    let mut t = infos();
    match usize::try_from(h)
        .ok()
        .and_then(|i| t.get_mut(i))
        .and_then(Option::as_mut)
    {
        Some(i) => f(i),
        None => fail(err::INFO, format!("invalid info handle {h}")),
    }
}

/// A copy of an info object, or an empty one for `MPI_INFO_NULL`.
pub fn get_or_empty(h: i32) -> MpiResult<Info> {
    if h == INFO_NULL {
        return Ok(Info::default());
    }
    with(h, |i| Ok(i.clone()))
}

pub fn add(info: Info) -> i32 {
    super::tables::alloc(&mut infos(), 2, info)
}

pub fn free(h: i32) -> MpiResult<()> {
    if h == INFO_ENV {
        return fail(err::INFO, "MPI_INFO_ENV cannot be freed");
    }
    with(h, |_| Ok(()))?;
    infos()[h as usize] = None;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keys_keep_first_order_and_values_replace() {
        let mut i = Info::default();
        i.set("b", "1").unwrap();
        i.set("a", "2").unwrap();
        i.set("b", "3").unwrap();
        assert_eq!(i.nkeys(), 2);
        assert_eq!(i.nth_key(0).unwrap(), "b");
        assert_eq!(i.get("b").unwrap(), Some("3"));
        assert_eq!(i.nth_key(2).unwrap_err().class, err::ARG);
        i.delete("b").unwrap();
        assert_eq!(i.nth_key(0).unwrap(), "a");
        assert_eq!(i.delete("b").unwrap_err().class, err::INFO_NOKEY);
    }

    #[test]
    fn bounds_are_checked() {
        let mut i = Info::default();
        let long = "k".repeat(MAX_INFO_KEY + 1);
        assert_eq!(i.set(&long, "v").unwrap_err().class, err::INFO_KEY);
        assert_eq!(i.set("", "v").unwrap_err().class, err::INFO_KEY);
        let big = "v".repeat(MAX_INFO_VAL + 1);
        assert_eq!(i.set("k", &big).unwrap_err().class, err::INFO_VALUE);
        assert!(i
            .set(&"k".repeat(MAX_INFO_KEY), &"v".repeat(MAX_INFO_VAL))
            .is_ok());
    }
}
