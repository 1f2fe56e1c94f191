//! The retry storm, small (bench/storm/storm.py with 8 agents): admission control (permits and
//! the retry budget) sends a smaller share of requests into the rate limit than no control.

use crate::common::{bin, on_path, skip_unless};

#[test]
fn admission_control_cuts_the_share_of_429s_in_a_small_storm() {
    if !skip_unless(
        on_path("python3") && on_path("curl"),
        "python3 or curl is not installed",
        "TRIAGE_REQUIRE_STORM",
    ) {
        return;
    }
    let script = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("bench/storm/storm.py");
    let out = std::process::Command::new("python3")
        .arg(script)
        .args([
            "--agents", "8", "--calls", "3", "--rate", "5", "--burst", "2",
        ])
        .args(["--latency", "0.2", "--permits", "1", "--json", "--triage"])
        .arg(bin())
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let rows: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let (without, with) = (&rows[0], &rows[1]);
    assert_eq!(with["completed"], 24, "{rows}");
    let share = |r: &serde_json::Value| r["share_429"].as_f64().unwrap();
    assert!(
        share(with) < share(without),
        "429 share with admission control {} is not below {} without: {rows}",
        share(with),
        share(without)
    );
}
