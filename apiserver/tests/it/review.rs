//! Findings of a fresh-eyes review, each pinned by a regression test.

use std::process::Command;
use std::time::{Duration, Instant};

use crate::common::Server;

/// `curl -i` as the admin user with extra arguments; status line, headers
/// and body.
fn curl(s: &Server, path: &str, extra: &[&str]) -> String {
    let pki = s.ca().parent().expect("pki dir").to_path_buf();
    let out = Command::new("curl")
        .args(["-s", "-i", "--http1.1", "--max-time", "5", "--cacert"])
        .arg(s.ca())
        .arg("--cert")
        .arg(pki.join("admin.crt"))
        .arg("--key")
        .arg(pki.join("admin.key"))
        .args(extra)
        .arg(format!("https://{}{path}", s.host_port()))
        .output()
        .expect("run curl");
    String::from_utf8_lossy(&out.stdout).to_string()
}

/// `?watch=<v>` is a watch for every value but `0` and `false`, as kube's
/// query-parameter conversion reads booleans (`watch=yes`, `watch=` too).
#[test]
fn watch_param_any_value_but_false_is_a_watch() {
    let s = Server::start();
    for v in ["yes", "", "TRUE", "x"] {
        let start = Instant::now();
        let out = curl(&s, &format!("/api/v1/namespaces/default/configmaps?watch={v}&timeoutSeconds=1"), &[]);
        assert!(out.starts_with("HTTP/1.1 200"), "watch={v}: {out}");
        assert!(!out.contains("ConfigMapList"), "watch={v} was served as a list: {out}");
        assert!(start.elapsed() >= Duration::from_millis(900), "watch={v} did not stream");
    }
    for v in ["0", "false", "False"] {
        let out = curl(&s, &format!("/api/v1/namespaces/default/configmaps?watch={v}"), &[]);
        assert!(out.contains(r#""kind":"ConfigMapList""#), "watch={v}: {out}");
    }
}
