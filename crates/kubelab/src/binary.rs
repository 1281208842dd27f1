//! Finding the `vigil-testenv` binary: from `VIGIL_GO_BIN_DIR` (set by `scripts/test.sh`),
//! else built once per test process through `conformance/build.sh testenv`.

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::OnceLock;

/// The binary's file name in the Go bin directory.
pub const TESTENV_BIN: &str = "vigil-testenv";

/// The `vigil-testenv` binary, or `None` (the caller skips) when it is not there and cannot be
/// built. With `VIGIL_REQUIRE_GO=1` (as in CI) a missing binary is a panic instead of a skip.
/// Tests run in parallel threads; the build runs at most once per process.
pub fn testenv_binary(test: &str) -> Option<PathBuf> {
    static FOUND: OnceLock<Result<PathBuf, String>> = OnceLock::new();
    match FOUND.get_or_init(find) {
        Ok(path) => Some(path.clone()),
        Err(why) => {
            assert!(
                std::env::var("VIGIL_REQUIRE_GO").as_deref() != Ok("1"),
                "{test}: VIGIL_REQUIRE_GO=1 but vigil-testenv is unavailable: {why}"
            );
            eprintln!("skipping {test}: vigil-testenv unavailable: {why}");
            None
        }
    }
}

fn find() -> Result<PathBuf, String> {
    if let Some(dir) = std::env::var_os("VIGIL_GO_BIN_DIR") {
        let bin = Path::new(&dir).join(TESTENV_BIN);
        if bin.is_file() {
            return Ok(bin);
        }
    }
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../conformance/build.sh");
    // The build prints its progress on stderr (left to the terminal: a cold build takes
    // minutes) and the bin directory as the last line of stdout.
    let out = Command::new("bash")
        .arg(&script)
        .arg("testenv")
        .stdin(Stdio::null())
        .stderr(Stdio::inherit())
        .output()
        .map_err(|e| format!("{}: {e}", script.display()))?;
    if !out.status.success() {
        return Err(format!(
            "{} testenv failed ({})",
            script.display(),
            out.status
        ));
    }
    let stdout = String::from_utf8_lossy(&out.stdout);
    let dir = stdout.lines().last().unwrap_or_default().trim();
    let bin = Path::new(dir).join(TESTENV_BIN);
    if bin.is_file() {
        Ok(bin)
    } else {
        Err(format!("{} missing after the build", bin.display()))
    }
}
