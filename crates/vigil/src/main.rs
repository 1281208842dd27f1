//! The `vigil` binary: everything lives in the library (`vigil::run`).

fn main() -> std::process::ExitCode {
    vigil::run(std::env::args_os())
}
