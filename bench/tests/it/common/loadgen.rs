//! Running the `loadgen` binary and reading its JSON line.

use std::process::{Command, Output, Stdio};
use std::time::{Duration, Instant};

use serde_json::Value;

/// Upper bound on one loadgen run in these tests.
const RUN_TIMEOUT: Duration = Duration::from_secs(120);

/// Runs `loadgen --endpoints <endpoint> --json <args>` and returns its output.
///
/// # Panics
/// When the process cannot be run or does not finish within two minutes.
pub fn run(endpoint: &str, args: &[&str]) -> Output {
    let mut child = Command::new(env!("CARGO_BIN_EXE_loadgen"))
        .arg("--endpoints")
        .arg(endpoint)
        .arg("--json")
        .args(args)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap_or_else(|e| panic!("spawning loadgen: {e}"));
    let deadline = Instant::now() + RUN_TIMEOUT;
    loop {
        match child.try_wait() {
            Ok(Some(_)) => break,
            Ok(None) if Instant::now() < deadline => std::thread::sleep(Duration::from_millis(50)),
            Ok(None) => {
                let _ = child.kill();
                let _ = child.wait();
                panic!("loadgen {args:?} did not finish within {RUN_TIMEOUT:?}");
            }
            Err(e) => panic!("waiting for loadgen: {e}"),
        }
    }
    child.wait_with_output().unwrap_or_else(|e| panic!("collecting loadgen output: {e}"))
}

/// Runs loadgen, expects success, and parses the one JSON line on stdout.
///
/// # Panics
/// On a non-zero exit, or when stdout is not exactly one JSON object.
pub fn run_json(endpoint: &str, args: &[&str]) -> Value {
    let out = run(endpoint, args);
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "loadgen {args:?} failed ({}):\nstdout: {stdout}\nstderr: {stderr}", out.status);
    let lines: Vec<&str> = stdout.lines().collect();
    assert_eq!(lines.len(), 1, "expected one JSON line, got:\n{stdout}");
    serde_json::from_str(lines[0]).unwrap_or_else(|e| panic!("loadgen printed invalid JSON ({e}): {stdout}"))
}
