fn main() {
    launcher::wrapper::main(launcher::wrapper::Lang::Fortran)
}
