//! raftstore members run as child processes on loopback, for the
//! multi-member suites: start, kill -9, restart, and find the leader.

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use super::connect;
use super::server::{free_port, raftstore_bin};

/// One raftstore member process. Its stderr goes to `<dir>/<name>.log`.
pub struct Proc {
    /// `--name`.
    pub name: String,
    /// Client port on 127.0.0.1.
    pub client_port: u16,
    /// Peer port on 127.0.0.1.
    pub peer_port: u16,
    /// Where data dir and log live.
    pub dir: PathBuf,
    /// Extra flags for every start.
    pub extra: Vec<String>,
    /// The running process, if any.
    pub child: Option<Child>,
    /// `http` or `https` for both its client and peer URLs.
    pub scheme: &'static str,
}

impl Drop for Proc {
    fn drop(&mut self) {
        self.kill();
    }
}

impl Proc {
    /// A member that is not started yet, with fresh ports.
    pub fn new(dir: &Path, name: &str, extra: &[&str]) -> Proc {
        Proc { name: name.to_string(), client_port: free_port(), peer_port: free_port(), dir: dir.to_path_buf(), extra: extra.iter().map(|s| s.to_string()).collect(), child: None, scheme: "http" }
    }

    /// `http://127.0.0.1:<peer port>` (or https).
    pub fn peer_url(&self) -> String {
        format!("{}://127.0.0.1:{}", self.scheme, self.peer_port)
    }

    /// `http://127.0.0.1:<client port>` (or https).
    pub fn client_url(&self) -> String {
        format!("{}://{}", self.scheme, self.ep())
    }

    /// `127.0.0.1:<client port>`, for etcd-client and etcdctl.
    pub fn ep(&self) -> String {
        format!("127.0.0.1:{}", self.client_port)
    }

    /// `name=peerURL`, one `--initial-cluster` entry.
    pub fn cluster_entry(&self) -> String {
        format!("{}={}", self.name, self.peer_url())
    }

    /// Starts the process with this `--initial-cluster` and state.
    pub fn start(&mut self, initial_cluster: &str, state: &str) {
        assert!(self.child.is_none(), "{} already running", self.name);
        let log = std::fs::OpenOptions::new().create(true).append(true).open(self.dir.join(format!("{}.log", self.name))).expect("open member log");
        let child = Command::new(raftstore_bin())
            .args(["--name", &self.name])
            .arg("--data-dir")
            .arg(self.dir.join(&self.name))
            .args(["--listen-client-urls", &self.client_url()])
            .args(["--listen-peer-urls", &self.peer_url()])
            .args(["--initial-advertise-peer-urls", &self.peer_url()])
            .args(["--initial-cluster", initial_cluster])
            .args(["--initial-cluster-state", state])
            .args(["--heartbeat-interval", "50", "--election-timeout", "500"])
            .args(&self.extra)
            .stdout(Stdio::null())
            .stderr(log)
            .spawn()
            .expect("start raftstore");
        self.child = Some(child);
    }

    /// Sends `signal` (e.g. "STOP", "CONT") to the running process with
    /// kill(1).
    pub fn signal(&self, signal: &str) {
        let pid = self.child.as_ref().expect("member running").id();
        let ok = Command::new("kill").arg(format!("-{signal}")).arg(pid.to_string()).status().expect("run kill").success();
        assert!(ok, "kill -{signal} {pid}");
    }

    /// kill -9 and reap.
    pub fn kill(&mut self) {
        if let Some(mut c) = self.child.take() {
            let _ = c.kill();
            let _ = c.wait();
        }
    }

    /// Waits for the process to exit on its own; its exit status, or `None`
    /// if it still runs after `limit`.
    pub fn wait_exit(&mut self, limit: Duration) -> Option<std::process::ExitStatus> {
        let start = Instant::now();
        while start.elapsed() < limit {
            if let Some(c) = self.child.as_mut() {
                if let Ok(Some(st)) = c.try_wait() {
                    self.child = None;
                    return Some(st);
                }
            } else {
                return None;
            }
            std::thread::sleep(Duration::from_millis(100));
        }
        None
    }

    /// CPU time (user plus system) the running process has used so far, from
    /// `/proc/<pid>/stat` (fields 14 and 15, in clock ticks of
    /// `getconf CLK_TCK`).
    pub fn cpu_time(&self) -> Duration {
        let pid = self.child.as_ref().expect("member is running").id();
        let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).expect("read /proc/<pid>/stat");
        // The command name (field 2) may hold spaces; count from after it.
        let rest = &stat[stat.rfind(')').expect("stat has the command in parentheses") + 2..];
        let fields: Vec<&str> = rest.split(' ').collect();
        let ticks: u64 = fields[11].parse::<u64>().expect("utime") + fields[12].parse::<u64>().expect("stime");
        let out = Command::new("getconf").arg("CLK_TCK").output().expect("getconf CLK_TCK");
        let hz: u64 = String::from_utf8_lossy(&out.stdout).trim().parse().expect("CLK_TCK is a number");
        Duration::from_millis(ticks * 1000 / hz)
    }

    /// Number of lines in the member's log so far.
    pub fn log_lines(&self) -> usize {
        std::fs::read_to_string(self.dir.join(format!("{}.log", self.name))).map(|t| t.lines().count()).unwrap_or(0)
    }

    /// The member's log so far, for failure messages.
    pub fn log(&self) -> String {
        let text = std::fs::read_to_string(self.dir.join(format!("{}.log", self.name))).unwrap_or_default();
        let tail: Vec<&str> = text.lines().rev().take(40).collect();
        tail.into_iter().rev().collect::<Vec<_>>().join("\n")
    }
}

/// Starts `n` members `m0..` as a new cluster with `extra` flags.
pub fn start_new(dir: &Path, n: usize, extra: &[&str]) -> Vec<Proc> {
    start_new_with(dir, n, extra, "http")
}

/// [`start_new`] with `https` URLs (the TLS flags go in `extra`).
pub fn start_new_with(dir: &Path, n: usize, extra: &[&str], scheme: &'static str) -> Vec<Proc> {
    let mut procs: Vec<Proc> = (0..n)
        .map(|i| {
            let mut p = Proc::new(dir, &format!("m{i}"), extra);
            p.scheme = scheme;
            p
        })
        .collect();
    let initial = procs.iter().map(Proc::cluster_entry).collect::<Vec<_>>().join(",");
    for p in &mut procs {
        p.start(&initial, "new");
    }
    procs
}

/// Puts `key` through `ep` until it succeeds; the revision.
pub async fn put_until_ok(ep: &str, key: &str, value: &str, deadline: Duration) -> i64 {
    let start = Instant::now();
    loop {
        let attempt = async {
            let mut c = connect(ep).await;
            c.put(key, value, None).await
        };
        match tokio::time::timeout(Duration::from_secs(3), attempt).await {
            Ok(Ok(r)) => return r.header().map(|h| h.revision()).unwrap_or(0),
            _ if start.elapsed() < deadline => tokio::time::sleep(Duration::from_millis(100)).await,
            other => panic!("put {key} via {ep} did not succeed within {deadline:?}: {other:?}"),
        }
    }
}

/// The leader's member ID as `ep` sees it (waits for one).
pub async fn leader_id(ep: &str) -> u64 {
    let start = Instant::now();
    loop {
        let mut c = connect(ep).await;
        if let Ok(Ok(s)) = tokio::time::timeout(Duration::from_secs(3), c.status()).await {
            if s.leader() != 0 {
                return s.leader();
            }
        }
        assert!(start.elapsed() < Duration::from_secs(20), "no leader seen via {ep}");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

/// The leader's member ID and its index in `procs`, asked of `procs[via]`
/// (Status for the leader, MemberList for its name).
pub async fn leader_proc(procs: &[Proc], via: usize) -> (u64, usize) {
    let ep = procs[via].ep();
    let leader = leader_id(&ep).await;
    let ids = member_ids(&ep).await;
    let li = procs.iter().position(|p| ids.iter().any(|(n, id, _)| *n == p.name && *id == leader)).expect("the leader is one of the started members");
    (leader, li)
}

/// Member ID by name, from MemberList via `ep`.
pub async fn member_ids(ep: &str) -> Vec<(String, u64, bool)> {
    let mut c = connect(ep).await;
    let list = c.member_list().await.expect("member list");
    list.members().iter().map(|m| (m.name().to_string(), m.id(), m.is_learner())).collect()
}

/// HashKV of every endpoint at `rev`, once each has applied `rev` (a
/// linearizable read first makes it catch up).
pub async fn hashes_at(eps: &[String], rev: i64) -> Vec<u32> {
    let mut out = Vec::new();
    for ep in eps {
        let mut c = connect(ep).await;
        let start = Instant::now();
        loop {
            let r = c.get("hash-sync", None).await;
            match r {
                Ok(r) if r.header().map(|h| h.revision()).unwrap_or(0) >= rev => break,
                _ if start.elapsed() < Duration::from_secs(20) => tokio::time::sleep(Duration::from_millis(100)).await,
                other => panic!("{ep} did not reach revision {rev}: {other:?}"),
            }
        }
        let h = c.hash_kv(rev).await.unwrap_or_else(|e| panic!("hash_kv on {ep}: {e}"));
        out.push(h.hash());
    }
    out
}

/// `GET path` on `addr` over plain HTTP/1.1; the response body.
pub fn http_get(addr: &str, path: &str) -> String {
    use std::io::{Read, Write};
    let mut s = std::net::TcpStream::connect(addr).expect("connect");
    s.set_read_timeout(Some(Duration::from_secs(5))).expect("timeout");
    write!(s, "GET {path} HTTP/1.1\r\nHost: {addr}\r\nConnection: close\r\n\r\n").expect("write");
    let mut out = String::new();
    let _ = s.read_to_string(&mut out);
    let (head, body) = out.split_once("\r\n\r\n").unwrap_or_else(|| panic!("not an HTTP response: {out:?}"));
    assert!(head.starts_with("HTTP/1.1 200"), "GET {path}: {head}");
    body.to_string()
}

/// The value of the sample `series` (name plus labels exactly as
/// exposed, e.g. `etcd_server_has_leader` or `x{To="ab"}`) in Prometheus
/// text, or `None`.
pub fn sample(text: &str, series: &str) -> Option<f64> {
    text.lines().filter(|l| !l.starts_with('#')).find_map(|l| l.strip_prefix(series).and_then(|rest| rest.strip_prefix(' ')).and_then(|v| v.trim().parse().ok()))
}
