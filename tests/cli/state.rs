//! `state-write` and `state-read` (issue 2).

use crate::common::{json_out, Sandbox};

#[test]
fn write_then_read() {
    let s = Sandbox::new();
    let out = s
        .cmd(&["state-write", "run/s.json", "--require", "stage"])
        .write_stdin("{\"stage\":2}")
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(0));
    let v = json_out(&out);
    assert_eq!(v["written"], true);
    assert_eq!(v["bytes"], 11);
    let out = s.cmd(&["state-read", "run/s.json"]).output().unwrap();
    assert_eq!(json_out(&out)["data"]["stage"], 2);
}
