//! A throwaway single-node etcd on free loopback ports.

use std::fs::File;
use std::net::{TcpListener, TcpStream};
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use tempfile::TempDir;

/// How long etcd may take to start serving.
const START_TIMEOUT: Duration = Duration::from_secs(30);

/// A running etcd, killed on drop.
pub struct Etcd {
    child: Child,
    dir: TempDir,
    /// The client endpoint, `127.0.0.1:<port>`.
    pub endpoint: String,
}

/// The etcd binary: `ETCD_BIN`, else `etcd` on `PATH`.
fn etcd_bin() -> String {
    std::env::var("ETCD_BIN").unwrap_or_else(|_| "etcd".to_owned())
}

/// A loopback port that was free a moment ago.
fn free_port() -> u16 {
    let l = TcpListener::bind("127.0.0.1:0").unwrap_or_else(|e| panic!("binding 127.0.0.1:0 to find a free port: {e}"));
    l.local_addr().unwrap_or_else(|e| panic!("local_addr of a bound listener: {e}")).port()
}

impl Etcd {
    /// Starts etcd and waits until its client port accepts connections.
    ///
    /// # Panics
    /// When etcd is not installed, exits early, or does not listen in time;
    /// the message says which, with the tail of etcd's log.
    pub fn start() -> Etcd {
        let bin = etcd_bin();
        match Command::new(&bin).arg("--version").output() {
            Ok(out) if out.status.success() => {}
            Ok(out) => panic!("`{bin} --version` failed ({}): these tests need a working etcd", out.status),
            Err(e) => panic!(
                "etcd not found (`{bin}`: {e}). These tests need a real etcd: install Debian's \
                 etcd-server package or set ETCD_BIN to an etcd binary."
            ),
        }
        let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("creating a temp dir: {e}"));
        let (client, peer) = (free_port(), free_port());
        let endpoint = format!("127.0.0.1:{client}");
        let peer_url = format!("http://127.0.0.1:{peer}");
        let log = File::create(dir.path().join("etcd.log")).unwrap_or_else(|e| panic!("creating etcd.log: {e}"));
        let log_err = log.try_clone().unwrap_or_else(|e| panic!("cloning etcd.log handle: {e}"));
        let child = Command::new(&bin)
            .arg("--name=it")
            .arg(format!("--data-dir={}", dir.path().join("data").display()))
            .arg(format!("--listen-client-urls=http://{endpoint}"))
            .arg(format!("--advertise-client-urls=http://{endpoint}"))
            .arg(format!("--listen-peer-urls={peer_url}"))
            .arg(format!("--initial-advertise-peer-urls={peer_url}"))
            .arg(format!("--initial-cluster=it={peer_url}"))
            .stdin(Stdio::null())
            .stdout(log)
            .stderr(log_err)
            .spawn()
            .unwrap_or_else(|e| panic!("spawning {bin}: {e}"));
        let mut etcd = Etcd { child, dir, endpoint };
        etcd.wait_listening();
        etcd
    }

    fn log_path(&self) -> PathBuf {
        self.dir.path().join("etcd.log")
    }

    /// The last lines of etcd's log, for failure messages.
    pub fn log_tail(&self) -> String {
        let log = std::fs::read_to_string(self.log_path()).unwrap_or_default();
        let lines: Vec<&str> = log.lines().collect();
        lines[lines.len().saturating_sub(20)..].join("\n")
    }

    fn wait_listening(&mut self) {
        let deadline = Instant::now() + START_TIMEOUT;
        while Instant::now() < deadline {
            if let Ok(Some(status)) = self.child.try_wait() {
                panic!("etcd exited during startup ({status}):\n{}", self.log_tail());
            }
            if TcpStream::connect(&self.endpoint).is_ok() {
                return;
            }
            std::thread::sleep(Duration::from_millis(100));
        }
        panic!("etcd did not listen on {} within {START_TIMEOUT:?}:\n{}", self.endpoint, self.log_tail());
    }
}

impl Drop for Etcd {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}
