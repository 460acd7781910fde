fn main() {
    mpistages::runtime::wrapper::main(mpistages::runtime::wrapper::Lang::Fortran)
}
