fn main() {
    launcher::wrapper::main(launcher::wrapper::Lang::Cxx)
}
