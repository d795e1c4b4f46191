//! Running Debian's `etcdctl` (3.4, API v3) against a server.

use std::fmt;
use std::io::{BufRead, BufReader, Read, Write};
use std::process::{Child, Command, Stdio};
use std::sync::mpsc::{self, Receiver};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use super::server::program;

/// A finished `etcdctl` run.
#[derive(Clone, Debug)]
pub struct Output {
    /// The command line, for messages.
    pub cmd: String,
    pub stdout: String,
    pub stderr: String,
    /// Exit code; -1 if killed by a signal.
    pub code: i32,
}

impl fmt::Display for Output {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "`{}` exited {}\n--- stdout:\n{}\n--- stderr:\n{}", self.cmd, self.code, self.stdout, self.stderr)
    }
}

impl Output {
    /// Stdout, after asserting the exit code is 0.
    #[track_caller]
    pub fn ok(&self) -> &str {
        assert_eq!(self.code, 0, "etcdctl failed: {self}");
        &self.stdout
    }

    /// Stderr, after asserting the command failed.
    #[track_caller]
    pub fn err(&self) -> &str {
        assert_ne!(self.code, 0, "etcdctl should have failed: {self}");
        &self.stderr
    }

    /// Stdout parsed as JSON (for `-w json`).
    #[track_caller]
    pub fn json(&self) -> serde_json::Value {
        serde_json::from_str(self.ok().trim()).unwrap_or_else(|e| panic!("etcdctl output is not JSON ({e}): {self}"))
    }
}

fn command(endpoint: &str, args: &[&str]) -> (Command, String) {
    let mut cmd = Command::new(program("etcdctl", "etcd-client"));
    cmd.env("ETCDCTL_API", "3").arg(format!("--endpoints={endpoint}")).args(args);
    let line = format!("etcdctl --endpoints={endpoint} {}", args.join(" "));
    (cmd, line)
}

/// Runs `etcdctl --endpoints=<endpoint> <args>` and waits (at most 30 s).
#[track_caller]
pub fn etcdctl(endpoint: &str, args: &[&str]) -> Output {
    etcdctl_with_timeout(endpoint, args, None, Duration::from_secs(30))
}

/// Like [`etcdctl`], feeding `stdin` to the process.
#[track_caller]
pub fn etcdctl_stdin(endpoint: &str, args: &[&str], stdin: &str) -> Output {
    etcdctl_with_timeout(endpoint, args, Some(stdin), Duration::from_secs(30))
}

/// Runs etcdctl; a run longer than `timeout` is killed and fails the test.
#[track_caller]
pub fn etcdctl_with_timeout(endpoint: &str, args: &[&str], stdin: Option<&str>, timeout: Duration) -> Output {
    let (mut cmd, line) = command(endpoint, args);
    let mut child = cmd.stdin(if stdin.is_some() { Stdio::piped() } else { Stdio::null() }).stdout(Stdio::piped()).stderr(Stdio::piped()).spawn().unwrap_or_else(|e| panic!("spawn {line}: {e}"));
    if let Some(input) = stdin {
        let mut pipe = child.stdin.take().expect("piped stdin");
        pipe.write_all(input.as_bytes()).expect("write etcdctl stdin");
    }
    let stdout = read_all(child.stdout.take().expect("piped stdout"));
    let stderr = read_all(child.stderr.take().expect("piped stderr"));
    let Some(status) = wait_or_kill(&mut child, timeout) else {
        panic!("`{line}` hung for more than {timeout:?}; stdout so far: {}", stdout.join().unwrap_or_default());
    };
    Output { cmd: line, stdout: stdout.join().unwrap_or_default(), stderr: stderr.join().unwrap_or_default(), code: status.code().unwrap_or(-1) }
}

fn read_all(mut r: impl Read + Send + 'static) -> std::thread::JoinHandle<String> {
    std::thread::spawn(move || {
        let mut buf = Vec::new();
        let _ = r.read_to_end(&mut buf);
        String::from_utf8_lossy(&buf).into_owned()
    })
}

/// A long-running etcdctl (e.g. `watch`) whose stdout is read line by line.
/// Killed on drop.
pub struct Background {
    line: String,
    child: Option<Child>,
    lines: Receiver<String>,
    stderr: Arc<Mutex<String>>,
}

impl Background {
    /// Starts `etcdctl --endpoints=<endpoint> <args>`.
    pub fn spawn(endpoint: &str, args: &[&str]) -> Background {
        let (mut cmd, line) = command(endpoint, args);
        let mut child = cmd.stdin(Stdio::null()).stdout(Stdio::piped()).stderr(Stdio::piped()).spawn().unwrap_or_else(|e| panic!("spawn {line}: {e}"));
        let (tx, lines) = mpsc::channel();
        let out = child.stdout.take().expect("piped stdout");
        std::thread::spawn(move || {
            for l in BufReader::new(out).lines() {
                let Ok(l) = l else { return };
                if tx.send(l).is_err() {
                    return;
                }
            }
        });
        let stderr = Arc::new(Mutex::new(String::new()));
        let err_pipe = child.stderr.take().expect("piped stderr");
        let sink = stderr.clone();
        std::thread::spawn(move || {
            for l in BufReader::new(err_pipe).lines() {
                let Ok(l) = l else { return };
                let mut s = sink.lock().unwrap();
                s.push_str(&l);
                s.push('\n');
            }
        });
        Background { line, child: Some(child), lines, stderr }
    }

    /// The next `n` stdout lines; fails if they do not come within `timeout`.
    #[track_caller]
    pub fn lines(&self, n: usize, timeout: Duration) -> Vec<String> {
        let deadline = Instant::now() + timeout;
        let mut got = Vec::new();
        while got.len() < n {
            let left = deadline.saturating_duration_since(Instant::now());
            match self.lines.recv_timeout(left) {
                Ok(l) => got.push(l),
                Err(_) => panic!("`{}`: wanted {n} lines within {timeout:?}, got {got:?}; stderr: {}", self.line, self.stderr.lock().unwrap()),
            }
        }
        got
    }

    /// Whether the process still runs.
    pub fn is_running(&mut self) -> bool {
        self.child.as_mut().is_some_and(|c| matches!(c.try_wait(), Ok(None)))
    }

    /// Waits for the process to exit by itself; fails after `timeout`.
    #[track_caller]
    pub fn wait_exit(mut self, timeout: Duration) -> Output {
        let mut child = self.child.take().expect("child");
        let Some(status) = wait_or_kill(&mut child, timeout) else {
            panic!("`{}` should have exited by itself within {timeout:?}; stderr: {}", self.line, self.stderr.lock().unwrap());
        };
        // Let the reader threads reach EOF.
        std::thread::sleep(Duration::from_millis(50));
        let stdout: Vec<String> = self.lines.try_iter().collect();
        let stderr = self.stderr.lock().unwrap().clone();
        Output { cmd: self.line.clone(), stdout: stdout.join("\n"), stderr, code: status.code().unwrap_or(-1) }
    }
}

impl Drop for Background {
    fn drop(&mut self) {
        if let Some(mut child) = self.child.take() {
            let _ = child.kill();
            let _ = child.wait();
        }
    }
}

/// Waits up to `timeout` for `child` to exit; kills it and returns `None`
/// if it does not.
fn wait_or_kill(child: &mut std::process::Child, timeout: Duration) -> Option<std::process::ExitStatus> {
    let deadline = Instant::now() + timeout;
    loop {
        if let Some(status) = child.try_wait().expect("wait etcdctl") {
            return Some(status);
        }
        if Instant::now() > deadline {
            let _ = child.kill();
            let _ = child.wait();
            return None;
        }
        std::thread::sleep(Duration::from_millis(5));
    }
}
