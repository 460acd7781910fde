fn main() {
    mpistages_bench::main()
}
