//! `vigil lab`: a failover demonstration in network namespaces ([`crate::lab`]). This module
//! only hands the parsed arguments to the lab, which builds, runs and tears down everything.

pub use crate::lab::{Args, LONG_ABOUT};

use std::process::ExitCode;

/// Runs `vigil lab` (as root) and tears the lab down before returning.
pub fn run(args: Args) -> ExitCode {
    crate::lab::run(args)
}
