//! scripts/install lays out a prefix that works on its own: the installed
//! wrappers find the installed header and library, pkg-config describes
//! them, and CMake's find_package(MPI) builds a project against them.

mod common;
use common::Scratch;
use std::path::Path;
use std::process::Command;
use std::time::Duration;

fn run(cmd: &mut Command) -> String {
    let out = cmd.output().expect("run a command");
    assert!(
        out.status.success(),
        "{cmd:?} failed:\n{}\n{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// The bytes of the files under `dir`, each file once however many names
/// (hard links) it has.
fn prefix_bytes(dir: &Path) -> u64 {
    use std::os::unix::fs::MetadataExt;
    let mut seen = std::collections::HashSet::new();
    let mut total = 0;
    let mut todo = vec![dir.to_path_buf()];
    while let Some(d) = todo.pop() {
        for e in std::fs::read_dir(&d).unwrap().flatten() {
            let m = e.metadata().unwrap();
            if m.is_dir() {
                todo.push(e.path());
            } else if seen.insert(m.ino()) {
                total += m.len();
            }
        }
    }
    total
}

#[test]
fn installed_prefix_and_cmake() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let built = common::bin("mpiexec").parent().unwrap().to_path_buf();
    let tmp = Scratch::new("install");
    let prefix = tmp.0.join("prefix");
    run(Command::new(root.join("scripts/install"))
        .arg("--from")
        .arg(&built)
        .arg(&prefix));
    for f in [
        "bin/mpicc",
        "bin/mpicxx",
        "bin/mpifort",
        "bin/mpif90",
        "bin/mpif77",
        "bin/mpistages-ckpt",
        "bin/mpiexec",
        "bin/mpirun",
        "bin/mpistages-agent",
        "lib/libmpistages.so",
        "include/mpi.h",
        "include/mpif.h",
        "lib/pkgconfig/mpistages.pc",
    ] {
        assert!(prefix.join(f).exists(), "{f} not installed");
    }
    // Small: the other names of a program are links to it, the static
    // archive only with --static (in a prefix of its own here).
    let bytes = prefix_bytes(&prefix);
    assert!(bytes < 25 << 20, "the prefix holds {bytes} bytes");
    assert!(!prefix.join("lib/libmpistages.a").exists());
    let with_static = tmp.0.join("prefix-static");
    run(Command::new(root.join("scripts/install"))
        .arg("--from")
        .arg(&built)
        .arg("--static")
        .arg(&with_static));
    assert!(with_static.join("lib/libmpistages.a").exists());
    let show = run(Command::new(prefix.join("bin/mpicc")).args(["-show", "a.c"]));
    let inc = prefix.join("include").canonicalize().unwrap();
    assert!(
        show.contains(&format!("-I{}", inc.display())),
        "installed mpicc uses its own prefix: {show}"
    );
    // What build systems ask the wrappers (Open MPI's and MPICH's options).
    let mpicc = prefix.join("bin/mpicc");
    let flags = |opt: &str| run(Command::new(&mpicc).arg(opt)).trim().to_string();
    let (compile, link) = (flags("-showme:compile"), flags("--showme:link"));
    assert_eq!(compile, format!("-I{}", inc.display()));
    assert!(
        link.starts_with("-L") && link.contains("-lmpistages") && !link.contains("-I"),
        "-showme:link: {link}"
    );
    let ci = flags("-compile_info");
    assert!(
        ci.ends_with(&compile) && !ci.contains("-lmpistages"),
        "-compile_info: {ci}"
    );
    let li = flags("-link_info");
    assert!(
        li.contains(&compile) && li.ends_with(&link),
        "-link_info: {li}"
    );
    // Installed stripped: the debug information stays in the build tree.
    let size = |p: &Path| std::fs::metadata(p).unwrap().len();
    let (so, built_so) = (
        prefix.join("lib/libmpistages.so"),
        built.join("libmpistages.so"),
    );
    if built_so.exists() {
        assert!(
            size(&so) * 3 < size(&built_so),
            "the installed library is not stripped: {} of {} bytes",
            size(&so),
            size(&built_so)
        );
    }
    assert!(size(&prefix.join("bin/mpiexec")) < size(&built.join("mpiexec")));
    if Command::new("gfortran").arg("--version").output().is_ok() {
        // The install built the `use mpi` module inside the prefix.
        let show = run(Command::new(prefix.join("bin/mpifort")).args(["-show", "a.f90"]));
        let lib = prefix.join("lib/fortran").canonicalize().unwrap();
        assert!(
            show.contains(&format!("-I{}", inc.display()))
                && show.contains(&format!("-I{}/", lib.display())),
            "installed mpifort uses its own prefix: {show}"
        );
    }
    let pc = std::fs::read_to_string(prefix.join("lib/pkgconfig/mpistages.pc")).unwrap();
    assert!(
        pc.contains("-lmpistages")
            && pc.contains(&prefix.canonicalize().unwrap().display().to_string())
    );

    if Command::new("cmake").arg("--version").output().is_err() {
        // CI installs CMake (.ci/run): there, a missing cmake is a failure.
        assert!(
            std::env::var_os("CI").is_none(),
            "cmake is not installed (.ci/run installs it)"
        );
        common::skipped("the CMake find_package(MPI) check needs cmake (apt-get install cmake)");
        return;
    }
    let build = tmp.0.join("cmake-build");
    run(Command::new("cmake")
        .arg("-S")
        .arg(root.join("tests/cmake"))
        .arg("-B")
        .arg(&build)
        .arg(format!(
            "-DMPI_C_COMPILER={}",
            prefix.join("bin/mpicc").display()
        ))
        .arg(format!(
            "-DMPI_CXX_COMPILER={}",
            prefix.join("bin/mpicxx").display()
        )));
    run(Command::new("cmake").arg("--build").arg(&build));
    for exe in ["ring_c", "ring_cxx"] {
        let p = build.join(exe);
        let r = common::mpiexec(
            &["-n", "3", p.to_str().unwrap()],
            &[],
            Duration::from_secs(60),
        );
        assert!(
            r.ok() && r.stdout.contains("sum 3"),
            "{exe}: {}\n{}",
            r.stdout,
            r.stderr
        );
    }
}
