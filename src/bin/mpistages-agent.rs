fn main() {
    launcher::remote_agent::main()
}
