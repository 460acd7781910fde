fn main() {
    println!("cargo:rerun-if-changed=csrc");
    cc::Build::new()
        .file("csrc/reduce_ld.c")
        .file("csrc/fortran_sentinels.c")
        .opt_level(2)
        .warnings(true)
        .compile("mpistages_c");
}
