fn main() {
    mpistages::runtime::controller::main()
}
