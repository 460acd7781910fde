fn main() {
    // The control-plane simulator drives mpiexec's own state machines,
    // which live in the launcher (the benchmark crate cannot depend on it).
    let args: Vec<String> = std::env::args().skip(1).collect();
    if args.first().map(String::as_str) == Some("simulate") {
        std::process::exit(launcher::simulate::main(&args[1..]));
    }
    mpistages_bench::main()
}
