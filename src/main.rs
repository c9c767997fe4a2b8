fn main() {
    std::process::exit(vigil::cli::main());
}
