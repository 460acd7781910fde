fn main() {
    launcher::controller::main()
}
