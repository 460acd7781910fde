//! `mpicc`, `mpicxx` and `mpifort`: run the real compiler with our
//! include directory and library. They work from the build tree
//! (`target/<profile>/mpicc` with `include/` two levels up) and from an
//! installed prefix (`PREFIX/bin/mpicc` with `PREFIX/include`, `PREFIX/lib`).
//! `mpifort` also finds (building it on first use) the `mpi` module for the
//! compiler it runs: see `fortran_module`.

use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::Command;

#[derive(Clone, Copy)]
pub enum Lang {
    C,
    Cxx,
    Fortran,
}

pub struct Layout {
    pub include: PathBuf,
    pub lib: PathBuf,
}

/// Where the headers and the library are, seen from the wrapper's own path.
pub fn locate(exe: &Path) -> Layout {
    let bin = exe.parent().unwrap_or(Path::new("."));
    let installed = bin.join("../include");
    if installed.join("mpi.h").exists() {
        return Layout {
            include: canon(installed),
            lib: canon(bin.join("../lib")),
        };
    }
    let tree = bin.join("../../include");
    let include = if tree.join("mpi.h").exists() {
        canon(tree)
    } else {
        PathBuf::from(concat!(env!("CARGO_MANIFEST_DIR"), "/include"))
    };
    // `cargo build` puts the library beside the wrappers; `cargo test`
    // rebuilds it only in deps/ (and leaves an older copy beside the
    // wrappers alone): take the newer.
    let modified = |dir: &Path| {
        std::fs::metadata(dir.join("libmpistages.so"))
            .and_then(|m| m.modified())
            .ok()
    };
    let deps = bin.join("deps");
    let lib = match (modified(bin), modified(&deps)) {
        (Some(b), Some(d)) if d > b => deps,
        (None, Some(_)) => deps,
        _ => bin.to_path_buf(),
    };
    Layout {
        include,
        lib: canon(lib),
    }
}

fn canon(p: PathBuf) -> PathBuf {
    p.canonicalize().unwrap_or(p)
}

/// The compiler a wrapper runs: MPICH's `-cc=`/`-cxx=`/`-fc=` option if
/// given (`chosen`), else the first of the variables set — ours, then Open
/// MPI's, then MPICH's — else `cc`, `c++`, `gfortran`.
fn compiler(lang: Lang, chosen: Option<&str>) -> String {
    if let Some(c) = chosen {
        return c.to_string();
    }
    let (vars, default): (&[&str], _) = match lang {
        Lang::C => (&["MPISTAGES_CC", "OMPI_CC", "MPICH_CC"], "cc"),
        Lang::Cxx => (&["MPISTAGES_CXX", "OMPI_CXX", "MPICH_CXX"], "c++"),
        Lang::Fortran => (
            &["MPISTAGES_FC", "OMPI_FC", "MPICH_FC", "MPICH_F90"],
            "gfortran",
        ),
    };
    vars.iter()
        .find_map(|v| std::env::var(v).ok().filter(|c| !c.is_empty()))
        .unwrap_or_else(|| default.to_string())
}

/// MPICH's `-cc=NAME` (`-cxx=`, `-fc=`, `-f90=`, `-f77=`): the compiler to
/// run, taken out of `args`.
fn take_compiler_option(args: &mut Vec<String>) -> Option<String> {
    let prefixes = ["-cc=", "-cxx=", "-CC=", "-fc=", "-f90=", "-f77="];
    let at = args
        .iter()
        .position(|a| prefixes.iter().any(|p| a.starts_with(p)))?;
    let a = args.remove(at);
    a.split_once('=').map(|(_, c)| c.to_string())
}

/// Whether `args` name anything to compile or link: a word that is not an
/// option nor an option's value (`-o out`, `-I dir`...), or `-` (standard
/// input). Without one (`mpicc --version`, `-v`, `-dumpversion`, or
/// nothing) the compiler runs without our link flags: it answers, or says
/// "no input files", instead of failing to link a program with no `main`.
fn has_inputs(args: &[String]) -> bool {
    const TAKES_VALUE: [&str; 18] = [
        "-o",
        "-I",
        "-L",
        "-D",
        "-U",
        "-x",
        "-include",
        "-imacros",
        "-isystem",
        "-iquote",
        "-idirafter",
        "-MF",
        "-MT",
        "-MQ",
        "-Xlinker",
        "-Xassembler",
        "-Xpreprocessor",
        "-J",
    ];
    let mut i = 0;
    while i < args.len() {
        let a = args[i].as_str();
        if a == "-" || !a.starts_with('-') {
            return true;
        }
        i += if TAKES_VALUE.contains(&a) { 2 } else { 1 };
    }
    false
}

/// What `mpifort` adds for the Fortran compiler it runs.
pub struct FortranSetup {
    /// The directory holding `mpi.mod`, `mpi_f08.mod` and the f08
    /// module's procedures (`libmpistages_f08.a`) for this compiler.
    pub module_dir: PathBuf,
    /// gfortran 10 and later reject one routine called with different
    /// argument types in one file, which every `mpif.h` code does (an
    /// `MPI_SEND` of REAL, then of INTEGER); this makes it a warning, as
    /// for the compilers those codes were written for.
    pub allow_mismatch: bool,
}

/// The flags a compilation needs (headers, the Fortran module).
pub fn compile_flags(layout: &Layout, fortran: Option<&FortranSetup>) -> Vec<String> {
    let mut v = vec![format!("-I{}", layout.include.display())];
    if let Some(f) = fortran {
        v.push(format!("-I{}", f.module_dir.display()));
        if f.allow_mismatch {
            v.push("-fallow-argument-mismatch".into());
        }
    }
    v
}

/// The flags a link needs (the library, found again at run time; for
/// Fortran the `mpi_f08` module's procedures, taken only when called).
pub fn link_flags(layout: &Layout, fortran: Option<&FortranSetup>) -> Vec<String> {
    let lib = layout.lib.display().to_string();
    let mut v = vec![format!("-L{lib}"), format!("-Wl,-rpath,{lib}")];
    if let Some(f) = fortran {
        v.push(f.module_dir.join(F08_ARCHIVE).display().to_string());
    }
    v.extend(["-lmpistages", "-lpthread", "-ldl", "-lm"].map(String::from));
    v
}

/// The full compiler command for `args`.
pub fn command(
    lang: Lang,
    chosen: Option<&str>,
    layout: &Layout,
    fortran: Option<&FortranSetup>,
    args: &[String],
) -> Vec<String> {
    let compile_only = !has_inputs(args)
        || args
            .iter()
            .any(|a| matches!(a.as_str(), "-c" | "-E" | "-S" | "-M" | "-MM"));
    let mut cmd = vec![compiler(lang, chosen)];
    cmd.extend(compile_flags(layout, fortran));
    cmd.extend(args.iter().cloned());
    if !compile_only {
        cmd.extend(link_flags(layout, fortran));
    }
    cmd
}

/// What a wrapper option asks to be shown instead of compiling: Open
/// MPI's `-showme[:compile|:link]` (and `-show`), MPICH's `-compile_info`
/// and `-link_info`.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub enum Show {
    Command,
    CompileFlags,
    LinkFlags,
    CompileCommand,
    LinkCommand,
    /// Open MPI's `-showme:version`.
    Version,
}

pub fn show_option(a: &str) -> Option<Show> {
    match a.trim_start_matches('-') {
        "show" | "showme" => Some(Show::Command),
        "showme:version" => Some(Show::Version),
        "showme:compile" | "showme:incdirs" => Some(Show::CompileFlags),
        "showme:link" | "showme:libs" | "showme:libdirs" => Some(Show::LinkFlags),
        "compile_info" | "compile-info" => Some(Show::CompileCommand),
        "link_info" | "link-info" => Some(Show::LinkCommand),
        _ => None,
    }
}

/// The `mpi` module for the Fortran compiler `fc`, compiled from
/// `abi::fortran::module::source()` on first use into
/// `LIB/fortran/<compiler>-<version>-<hash>/` (or the user's cache directory
/// when LIB is not writable). Concurrent first uses are safe: each builds
/// in its own directory and the first rename wins.
pub fn fortran_setup(fc: &str, layout: &Layout) -> Result<FortranSetup, String> {
    let out = Command::new(fc).arg("--version").output().map_err(|e| {
        format!("cannot run the Fortran compiler '{fc}': {e} (install gfortran, e.g. apt-get install gfortran, or set MPISTAGES_FC)")
    })?;
    let first = String::from_utf8_lossy(&out.stdout)
        .lines()
        .next()
        .unwrap_or("")
        .to_string();
    let version = first
        .split_whitespace()
        .last()
        .unwrap_or("unknown")
        .to_string();
    let major: u32 = version
        .split('.')
        .next()
        .and_then(|v| v.parse().ok())
        .unwrap_or(0);
    let allow_mismatch = first.starts_with("GNU Fortran") && major >= 10;
    let base = Path::new(fc)
        .file_name()
        .map_or("fc".into(), |n| n.to_string_lossy().into_owned());
    // The module source and mpif.h are in the name, so a changed library
    // never uses a module compiled from an older interface.
    let source = mpistages::abi::fortran::module::source();
    let f08 = mpistages::abi::fortran::f08::source();
    let mut crc = crc32fast::Hasher::new();
    crc.update(source.as_bytes());
    crc.update(f08.as_bytes());
    crc.update(mpistages::abi::fortran::module::EXT_SOURCE.as_bytes());
    crc.update(&std::fs::read(layout.include.join("mpif.h")).unwrap_or_default());
    let id: String = format!("{base}-{version}-{:08x}", crc.finalize())
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || c == '.' || c == '-' {
                c
            } else {
                '_'
            }
        })
        .collect();
    let mut roots = vec![layout.lib.join("fortran")];
    if let Some(cache) = std::env::var_os("XDG_CACHE_HOME")
        .map(PathBuf::from)
        .or_else(|| std::env::var_os("HOME").map(|h| PathBuf::from(h).join(".cache")))
    {
        roots.push(cache.join("mpistages/fortran"));
    }
    let mut errors = Vec::new();
    for root in roots {
        let dir = root.join(&id);
        let ready = if dir.join(F08_ARCHIVE).exists() {
            Ok(())
        } else {
            build_module(
                fc,
                layout,
                &[
                    ("mpi", &source),
                    ("mpi_f08", &f08),
                    ("mpi_ext", mpistages::abi::fortran::module::EXT_SOURCE),
                ],
                &root,
                &dir,
            )
        };
        match ready {
            Ok(()) => {
                return Ok(FortranSetup {
                    module_dir: dir,
                    allow_mismatch,
                })
            }
            Err(e) => errors.push(e),
        }
    }
    Err(errors.join("; "))
}

/// The archive of the `mpi_f08` module's procedures, beside its `.mod`.
const F08_ARCHIVE: &str = "libmpistages_f08.a";

/// Compiles the module sources (in order: `mpi_f08` uses nothing of
/// `mpi`, `mpi_ext` uses `mpi`; each must see the headers) and archives `mpi_f08`'s object.
fn build_module(
    fc: &str,
    layout: &Layout,
    sources: &[(&str, &str)],
    root: &Path,
    dir: &Path,
) -> Result<(), String> {
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.subsec_nanos());
    let tmp = root.join(format!(".build-{}-{nanos}", std::process::id()));
    std::fs::create_dir_all(&tmp).map_err(|e| format!("cannot create {}: {e}", tmp.display()))?;
    let result = (|| {
        for (name, source) in sources {
            let src = tmp.join(format!("{name}.f90"));
            std::fs::write(&src, source)
                .map_err(|e| format!("cannot write {}: {e}", src.display()))?;
            let out = Command::new(fc)
                .args(["-c", "-O0", "-fPIC"])
                .arg(format!("-I{}", layout.include.display()))
                .arg(format!("-J{}", tmp.display()))
                .arg(&src)
                .arg("-o")
                .arg(tmp.join(format!("{name}.o")))
                .output()
                .map_err(|e| format!("cannot run '{fc}': {e}"))?;
            if !out.status.success() {
                return Err(format!(
                    "'{fc}' could not compile the {name} module:\n{}",
                    String::from_utf8_lossy(&out.stderr)
                ));
            }
        }
        let out = Command::new("ar")
            .arg("rcs")
            .arg(tmp.join(F08_ARCHIVE))
            .arg(tmp.join("mpi_f08.o"))
            .output()
            .map_err(|e| format!("cannot run 'ar': {e}"))?;
        if !out.status.success() {
            return Err(format!(
                "'ar' could not archive the mpi_f08 module:\n{}",
                String::from_utf8_lossy(&out.stderr)
            ));
        }
        match std::fs::rename(&tmp, dir) {
            Ok(()) => Ok(()),
            // Another mpifort finished first: use its modules.
            Err(_) if dir.join(F08_ARCHIVE).exists() => Ok(()),
            Err(e) => Err(format!("cannot create {}: {e}", dir.display())),
        }
    })();
    let _ = std::fs::remove_dir_all(&tmp);
    result
}

pub fn main(lang: Lang) -> ! {
    let exe = std::env::current_exe().unwrap_or_else(|_| PathBuf::from("mpicc"));
    let layout = locate(&exe);
    let mut args: Vec<String> = std::env::args().skip(1).collect();
    let show = args.iter().find_map(|a| show_option(a));
    args.retain(|a| show_option(a).is_none());
    let name = exe
        .file_name()
        .map_or("mpicc".into(), |n| n.to_string_lossy().into_owned());
    if show == Some(Show::Version) {
        // As Open MPI's: "mpicc: Open MPI 4.1.4 (Language: C)".
        let language = match lang {
            Lang::C => "C",
            Lang::Cxx => "C++",
            Lang::Fortran => "Fortran",
        };
        println!(
            "{name}: mpistages {} (MPI {}.{}; Language: {language})",
            env!("CARGO_PKG_VERSION"),
            mpistages::api::consts::VERSION,
            mpistages::api::consts::SUBVERSION
        );
        std::process::exit(0);
    }
    let chosen = take_compiler_option(&mut args);
    let chosen = chosen.as_deref();
    let fortran = match lang {
        Lang::Fortran => match fortran_setup(&compiler(lang, chosen), &layout) {
            Ok(f) => Some(f),
            Err(e) => {
                crate::say!("mpifort: {e}");
                std::process::exit(1)
            }
        },
        _ => None,
    };
    let cmd = command(lang, chosen, &layout, fortran.as_ref(), &args);
    if let Some(what) = show {
        let compile = || compile_flags(&layout, fortran.as_ref());
        let shown = match what {
            Show::Command => cmd,
            Show::CompileFlags => compile(),
            Show::LinkFlags => link_flags(&layout, fortran.as_ref()),
            Show::Version => unreachable!("answered above"),
            Show::CompileCommand => [vec![compiler(lang, chosen)], compile(), args].concat(),
            Show::LinkCommand => [
                vec![compiler(lang, chosen)],
                compile(),
                args,
                link_flags(&layout, fortran.as_ref()),
            ]
            .concat(),
        };
        println!("{}", shown.join(" "));
        std::process::exit(0);
    }
    let err = Command::new(&cmd[0]).args(&cmd[1..]).exec();
    crate::say!("mpistages: cannot run '{}': {err}", cmd[0]);
    std::process::exit(127)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn words(s: &str) -> Vec<String> {
        s.split_whitespace().map(String::from).collect()
    }

    #[test]
    fn inputs_are_told_from_options_and_their_values() {
        assert!(has_inputs(&words("-O2 app.c -o app")));
        assert!(has_inputs(&words("-c -")));
        assert!(has_inputs(&words("a.o b.o -lm")));
        assert!(!has_inputs(&words("")));
        assert!(!has_inputs(&words("--version")));
        assert!(!has_inputs(&words("-v")));
        assert!(!has_inputs(&words("-o app -I include -D X")));
    }

    #[test]
    fn mpich_compiler_options_are_taken_out() {
        let mut a = words("-cc=clang -O2 x.c");
        assert_eq!(take_compiler_option(&mut a).as_deref(), Some("clang"));
        assert_eq!(a, words("-O2 x.c"));
        let mut a = words("-O2 x.c");
        assert_eq!(take_compiler_option(&mut a), None);
        assert_eq!(compiler(Lang::C, Some("clang")), "clang");
    }
}
