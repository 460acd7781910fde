//! `mpicc`, `mpicxx` (and later `mpifort`): run the real compiler with our
//! include directory and library. They work from the build tree
//! (`target/<profile>/mpicc` with `include/` two levels up) and from an
//! installed prefix (`PREFIX/bin/mpicc` with `PREFIX/include`, `PREFIX/lib`).

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
    // leaves it in deps/.
    let lib = if !bin.join("libmpistages.so").exists() && bin.join("deps/libmpistages.so").exists()
    {
        bin.join("deps")
    } else {
        bin.to_path_buf()
    };
    Layout {
        include,
        lib: canon(lib),
    }
}

fn canon(p: PathBuf) -> PathBuf {
    p.canonicalize().unwrap_or(p)
}

/// The full compiler command for `args`.
pub fn command(lang: Lang, layout: &Layout, args: &[String]) -> Vec<String> {
    let (var, default) = match lang {
        Lang::C => ("MPISTAGES_CC", "cc"),
        Lang::Cxx => ("MPISTAGES_CXX", "c++"),
        Lang::Fortran => ("MPISTAGES_FC", "gfortran"),
    };
    let compiler = std::env::var(var).unwrap_or_else(|_| default.to_string());
    let compile_only = args
        .iter()
        .any(|a| matches!(a.as_str(), "-c" | "-E" | "-S" | "-M" | "-MM"));
    let inc = layout.include.display().to_string();
    let lib = layout.lib.display().to_string();
    let mut cmd = vec![compiler, format!("-I{inc}")];
    if let Lang::Fortran = lang {
        cmd.push(format!("-J{lib}/fortran"));
        cmd.push(format!("-I{lib}/fortran"));
    }
    cmd.extend(args.iter().cloned());
    if !compile_only {
        cmd.push(format!("-L{lib}"));
        cmd.push(format!("-Wl,-rpath,{lib}"));
        if let Lang::Fortran = lang {
            cmd.push("-lmpistages_fortran".into());
        }
        cmd.extend(["-lmpistages", "-lpthread", "-ldl", "-lm"].map(String::from));
    }
    cmd
}

pub fn main(lang: Lang) -> ! {
    let exe = std::env::current_exe().unwrap_or_else(|_| PathBuf::from("mpicc"));
    let layout = locate(&exe);
    let mut args: Vec<String> = std::env::args().skip(1).collect();
    let show = args
        .iter()
        .any(|a| a == "-show" || a == "--showme" || a == "-showme");
    args.retain(|a| a != "-show" && a != "--showme" && a != "-showme");
    let cmd = command(lang, &layout, &args);
    if show {
        println!("{}", cmd.join(" "));
        std::process::exit(0);
    }
    let err = Command::new(&cmd[0]).args(&cmd[1..]).exec();
    eprintln!("mpistages: cannot run '{}': {err}", cmd[0]);
    std::process::exit(127)
}
