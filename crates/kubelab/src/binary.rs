//! Finding the Go programs the tests run (`vigil-testenv`, MetalLB's speaker and controller):
//! from `VIGIL_GO_BIN_DIR` (set by `scripts/test.sh`), else built once per test process through
//! `conformance/build.sh <target>`.

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
    let found =
        FOUND.get_or_init(|| go_bin_dir("testenv", &[TESTENV_BIN]).map(|d| d.join(TESTENV_BIN)));
    found_or_skip(test, "vigil-testenv", found).cloned()
}

/// `Some` for a program found; `None` with a note when not (the caller skips), or a panic under
/// `VIGIL_REQUIRE_GO=1`, naming the test and why.
pub(crate) fn found_or_skip<'a, T>(
    test: &str,
    what: &str,
    found: &'a Result<T, String>,
) -> Option<&'a T> {
    match found {
        Ok(found) => Some(found),
        Err(why) => {
            assert!(
                std::env::var("VIGIL_REQUIRE_GO").as_deref() != Ok("1"),
                "{test}: VIGIL_REQUIRE_GO=1 but {what} is unavailable: {why}"
            );
            eprintln!("skipping {test}: {what} unavailable: {why}");
            None
        }
    }
}

/// The Go bin directory holding every file in `wanted`: `VIGIL_GO_BIN_DIR` if it has them, else
/// the one `conformance/build.sh <target>` prints after building them.
pub(crate) fn go_bin_dir(target: &str, wanted: &[&str]) -> Result<PathBuf, String> {
    let complete = |dir: &Path| wanted.iter().all(|name| dir.join(name).is_file());
    if let Some(dir) = std::env::var_os("VIGIL_GO_BIN_DIR").map(PathBuf::from)
        && complete(&dir)
    {
        return Ok(dir);
    }
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../conformance/build.sh");
    // The build prints its progress on stderr (left to the terminal: a cold build takes
    // minutes) and the bin directory as the last line of stdout.
    let out = Command::new("bash")
        .arg(&script)
        .arg(target)
        .stdin(Stdio::null())
        .stderr(Stdio::inherit())
        .output()
        .map_err(|e| format!("{}: {e}", script.display()))?;
    if !out.status.success() {
        return Err(format!(
            "{} {target} failed ({})",
            script.display(),
            out.status
        ));
    }
    let stdout = String::from_utf8_lossy(&out.stdout);
    let dir = PathBuf::from(stdout.lines().last().unwrap_or_default().trim());
    if complete(&dir) {
        Ok(dir)
    } else {
        Err(format!(
            "{} lacks {wanted:?} after the build",
            dir.display()
        ))
    }
}
