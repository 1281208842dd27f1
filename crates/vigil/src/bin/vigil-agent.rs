//! `vigil-agent`: the same program as `vigil agent`, as a binary of its own.
//!
//! It links only the agent, so a host running many agents maps less code per process than
//! with the full `vigil` binary (whose resident size grows with every subcommand).

use clap::Parser;

fn main() -> std::process::ExitCode {
    vigil::cmd::agent::run(vigil::cmd::agent::Args::parse())
}
