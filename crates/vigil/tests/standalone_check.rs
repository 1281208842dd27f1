//! `vigil standalone --check`: every error in the file, each naming its field, before
//! anything starts (no root, no sockets).

use std::process::Command;

const VIGIL: &str = env!("CARGO_BIN_EXE_vigil");

fn check(text: &str, name: &str) -> (Option<i32>, String, String) {
    let dir = std::env::temp_dir().join(format!("vigil-check-{}-{name}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let path = dir.join("standalone.yaml");
    std::fs::write(&path, text).unwrap();
    let out = Command::new(VIGIL)
        .args(["standalone", "--check", "-c"])
        .arg(&path)
        .output()
        .unwrap();
    let _ = std::fs::remove_dir_all(&dir);
    (
        out.status.code(),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

#[test]
fn check_reports_every_error_in_the_file() {
    let text = "node: {name: \"a b\"}\n\
                gossip: {bind: 198.18.0.11, profile: turbo}\n\
                election: {hold_down: soon}\n\
                services:\n  \
                - {name: web, vips: [198.18.0.300]}\n  \
                - {name: web, vips: [198.18.0.101]}\n  \
                - {name: dns, vips: []}\n";
    let (code, _, stderr) = check(text, "bad");
    assert_eq!(code, Some(2), "{stderr}");
    for field in [
        "node.name",
        "gossip.profile",
        "election.hold_down",
        "services[0].vips[0]",
        "services[1].name",
        "services[2].vips",
    ] {
        assert!(
            stderr.lines().any(|l| l.contains(&format!(": {field}: "))),
            "{field} not reported:\n{stderr}"
        );
    }
    assert_eq!(stderr.lines().count(), 6, "{stderr}");
}

#[test]
fn check_accepts_a_good_file_without_starting() {
    let text = "node: {name: a}\ngossip: {bind: 198.18.0.11}\n\
                services: [{name: web, vips: [198.18.0.100]}]\n";
    let (code, stdout, stderr) = check(text, "good");
    assert_eq!(code, Some(0), "{stderr}");
    assert!(stdout.contains("ok (node a, 1 service(s))"), "{stdout}");
}
