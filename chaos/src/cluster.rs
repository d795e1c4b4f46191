//! A three-member cluster of real processes on loopback, with peer traffic
//! through a [`PeerProxy`]. Each member listens on its own client and peer
//! ports (bound to port 0 first to pick free ones); the peer URL it
//! advertises, and that `--initial-cluster` names, is the proxy's address.
//!
//! Both targets take etcd's flag names, so one command line serves both:
//! `--name --data-dir --listen-client-urls --advertise-client-urls
//! --listen-peer-urls --initial-advertise-peer-urls --initial-cluster
//! --initial-cluster-state --heartbeat-interval --election-timeout
//! --snapshot-count --experimental-watch-progress-notify-interval`.

use std::fs::File;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use anyhow::{anyhow, bail, Context, Result};
use etcd_client::{Client, ConnectOptions};

use crate::proxy::PeerProxy;

/// Which server to run.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Target {
    /// Our `raftstore` binary at this path.
    Raftstore(PathBuf),
    /// The Debian `etcd` binary at this path.
    Etcd(PathBuf),
}

impl Target {
    /// `raftstore` or `etcd`.
    pub fn name(&self) -> &'static str {
        match self {
            Target::Raftstore(_) => "raftstore",
            Target::Etcd(_) => "etcd",
        }
    }

    fn bin(&self) -> &Path {
        match self {
            Target::Raftstore(p) | Target::Etcd(p) => p,
        }
    }

    /// Log entries a member's peers must purge before a restarted member
    /// needs a snapshot: raftstore is started to keep 1000 entries behind
    /// its snapshot (`--experimental-snapshot-catchup-entries`, whose
    /// default is etcd's 5000), etcd 3.4 keeps 5000
    /// (`SnapshotCatchUpEntries`).
    pub fn entries_kept_after_snapshot(&self) -> u64 {
        match self {
            Target::Raftstore(_) => 1000,
            Target::Etcd(_) => 5000,
        }
    }
}

/// Finds the `raftstore` binary: `$RAFTSTORE_BIN`, else next to the
/// running executable or one directory up (test binaries live in
/// `target/<profile>/deps`).
///
/// # Errors
/// If no such file exists; build it with `cargo build --bin raftstore` (from the
/// workspace root, so that it shares the workspace build).
pub fn find_raftstore() -> Result<PathBuf> {
    if let Ok(p) = std::env::var("RAFTSTORE_BIN") {
        return Ok(PathBuf::from(p));
    }
    let exe = std::env::current_exe().context("current_exe")?;
    for dir in exe.ancestors().skip(1).take(2) {
        let p = dir.join("raftstore");
        if p.is_file() {
            return Ok(p);
        }
    }
    bail!("raftstore binary not found next to {} (run `cargo build --bin raftstore` from the workspace root, or set RAFTSTORE_BIN)", exe.display())
}

/// Cluster options.
#[derive(Clone, Debug)]
pub struct Options {
    /// The server.
    pub target: Target,
    /// Data dirs and logs go here.
    pub dir: PathBuf,
    /// Raft heartbeat interval in ms.
    pub heartbeat_ms: u64,
    /// Election timeout in ms.
    pub election_ms: u64,
    /// `--snapshot-count`.
    pub snapshot_count: u64,
    /// `--experimental-watch-progress-notify-interval` in ms.
    pub progress_notify_ms: u64,
}

impl Options {
    /// Defaults for chaos runs: 50 ms heartbeat, 500 ms election timeout,
    /// a snapshot every 200 entries, progress notifications every 500 ms.
    pub fn new(target: Target, dir: &Path) -> Self {
        Options { target, dir: dir.to_path_buf(), heartbeat_ms: 50, election_ms: 500, snapshot_count: 200, progress_notify_ms: 500 }
    }
}

/// One member process.
pub struct Member {
    /// `m0`, `m1`, `m2`.
    pub name: String,
    /// Client port (clients connect here directly).
    pub client_port: u16,
    /// The member's real peer port.
    pub peer_port: u16,
    child: Option<Child>,
    paused: bool,
    starts: usize,
}

/// A running cluster.
pub struct Cluster {
    /// Options it was started with.
    pub opts: Options,
    /// Members by index.
    pub members: Vec<Member>,
    /// The peer proxy.
    pub proxy: PeerProxy,
}

fn free_port() -> Result<u16> {
    Ok(std::net::TcpListener::bind("127.0.0.1:0")?.local_addr()?.port())
}

/// Connects a client to one endpoint with short timeouts.
///
/// # Errors
/// Connection errors from etcd-client.
pub async fn connect(endpoint: &str, timeout: Duration) -> Result<Client> {
    let opts = ConnectOptions::new().with_connect_timeout(timeout).with_timeout(timeout);
    Ok(Client::connect([endpoint], Some(opts)).await?)
}

impl Cluster {
    /// Starts the proxy and three members, and waits until every member
    /// answers and one leader is known. Ports are picked by binding port 0
    /// and released before the member binds them, so another socket can
    /// take one in between; a start whose member exits early is retried
    /// (three attempts) with fresh ports and empty data dirs.
    ///
    /// # Errors
    /// If a process cannot start or the cluster is not healthy within 30 s.
    pub async fn start(opts: Options) -> Result<Self> {
        let mut last = None;
        for _ in 0..3 {
            match Self::start_once(opts.clone()).await {
                Ok(c) => return Ok(c),
                Err(e) => {
                    for i in 0..3 {
                        let _ = std::fs::remove_dir_all(opts.dir.join(format!("m{i}")));
                    }
                    last = Some(e);
                }
            }
        }
        Err(last.unwrap_or_else(|| anyhow!("cluster did not start")))
    }

    async fn start_once(opts: Options) -> Result<Self> {
        let n = 3;
        let mut members = Vec::new();
        for i in 0..n {
            members.push(Member { name: format!("m{i}"), client_port: free_port()?, peer_port: free_port()?, child: None, paused: false, starts: 0 });
        }
        let targets = members.iter().map(|m| std::net::SocketAddr::from(([127, 0, 0, 1], m.peer_port))).collect();
        let proxy = PeerProxy::start(targets).await?;
        let mut c = Cluster { opts, members, proxy };
        for i in 0..n {
            c.spawn(i)?;
        }
        c.wait_healthy(Duration::from_secs(30)).await?;
        Ok(c)
    }

    /// Client endpoint of member `i` (`127.0.0.1:port`).
    pub fn endpoint(&self, i: usize) -> String {
        format!("127.0.0.1:{}", self.members[i].client_port)
    }

    fn initial_cluster(&self) -> String {
        self.members.iter().enumerate().map(|(i, m)| format!("{}=http://{}", m.name, self.proxy.addr(i))).collect::<Vec<_>>().join(",")
    }

    fn spawn(&mut self, i: usize) -> Result<()> {
        let ic = self.initial_cluster();
        let o = &self.opts;
        let m = &self.members[i];
        let data = o.dir.join(&m.name);
        let log = File::options().create(true).append(true).open(o.dir.join(format!("{}.log", m.name)))?;
        let client = format!("http://127.0.0.1:{}", m.client_port);
        let mut cmd = Command::new(o.target.bin());
        cmd.args(["--name", &m.name])
            .arg("--data-dir")
            .arg(&data)
            .args(["--listen-client-urls", &client, "--advertise-client-urls", &client])
            .args(["--listen-peer-urls", &format!("http://127.0.0.1:{}", m.peer_port)])
            .args(["--initial-advertise-peer-urls", &format!("http://{}", self.proxy.addr(i))])
            .args(["--initial-cluster", &ic, "--initial-cluster-state", "new", "--initial-cluster-token", "chaos"])
            .args(["--heartbeat-interval", &o.heartbeat_ms.to_string(), "--election-timeout", &o.election_ms.to_string()])
            .args(["--snapshot-count", &o.snapshot_count.to_string()])
            .args(["--experimental-watch-progress-notify-interval", &format!("{}ms", o.progress_notify_ms)])
            .stdin(Stdio::null())
            .stdout(log.try_clone()?)
            .stderr(log);
        if matches!(o.target, Target::Etcd(_)) {
            cmd.args(["--logger", "zap", "--log-level", "warn"]);
        } else {
            // raftstore keeps etcd's 5000 entries after a snapshot by
            // default; keep fewer so that snapshot-restart's writes purge
            // the log past the killed member (etcd 3.4 has no such flag).
            cmd.args(["--experimental-snapshot-catchup-entries", &o.target.entries_kept_after_snapshot().to_string()]);
        }
        let child = cmd.spawn().with_context(|| format!("start {}", o.target.bin().display()))?;
        self.proxy.set_pid(i, Some(child.id()));
        self.proxy.set_listening(i, true);
        let m = &mut self.members[i];
        m.child = Some(child);
        m.paused = false;
        m.starts += 1;
        Ok(())
    }

    /// Sends SIGKILL to member `i` and reaps it.
    pub fn kill(&mut self, i: usize) {
        if let Some(mut c) = self.members[i].child.take() {
            let _ = c.kill();
            let _ = c.wait();
        }
        self.members[i].paused = false;
        self.proxy.set_pid(i, None);
        // Peers of a dead member get "connection refused", as without
        // the proxy.
        self.proxy.set_listening(i, false);
    }

    /// Starts member `i` again on its data dir (after [`Cluster::kill`]).
    ///
    /// # Errors
    /// If the process cannot start.
    pub fn restart(&mut self, i: usize) -> Result<()> {
        self.kill(i);
        self.spawn(i)
    }

    fn signal(&mut self, i: usize, sig: &str) -> Result<()> {
        let pid = self.members[i].child.as_ref().map(|c| c.id()).ok_or_else(|| anyhow!("member {i} is not running"))?;
        let st = Command::new("kill").args([sig, &pid.to_string()]).status()?;
        if !st.success() {
            bail!("kill {sig} {pid} failed");
        }
        Ok(())
    }

    /// SIGSTOPs member `i`.
    ///
    /// # Errors
    /// If it is not running.
    pub fn pause(&mut self, i: usize) -> Result<()> {
        self.signal(i, "-STOP")?;
        self.members[i].paused = true;
        Ok(())
    }

    /// SIGCONTs member `i`.
    ///
    /// # Errors
    /// If it is not running.
    pub fn resume(&mut self, i: usize) -> Result<()> {
        self.signal(i, "-CONT")?;
        self.members[i].paused = false;
        Ok(())
    }

    /// The leader's index, asking each member's Status (a member's
    /// `header.member_id` names it; `leader` names the leader).
    pub async fn leader(&self) -> Option<usize> {
        let mut ids = vec![0u64; self.members.len()];
        let mut leader = 0u64;
        for (i, id) in ids.iter_mut().enumerate() {
            let Ok(mut c) = connect(&self.endpoint(i), Duration::from_secs(1)).await else {
                continue;
            };
            if let Ok(Ok(s)) = tokio::time::timeout(Duration::from_secs(1), c.status()).await {
                *id = s.header().map(|h| h.member_id()).unwrap_or(0);
                if s.leader() != 0 {
                    leader = s.leader();
                }
            }
        }
        if leader == 0 {
            return None;
        }
        if let Some(i) = ids.iter().position(|&id| id == leader) {
            return Some(i);
        }
        // The leader did not answer; map through the member list.
        for i in 0..self.members.len() {
            let Ok(mut c) = connect(&self.endpoint(i), Duration::from_secs(1)).await else {
                continue;
            };
            if let Ok(Ok(l)) = tokio::time::timeout(Duration::from_secs(1), c.member_list()).await {
                return l.members().iter().find(|m| m.id() == leader).and_then(|m| self.members.iter().position(|x| x.name == m.name()));
            }
        }
        None
    }

    /// Waits until a leader is known and every running member answers a
    /// linearizable read.
    ///
    /// # Errors
    /// If that does not happen within `timeout`.
    pub async fn wait_healthy(&self, timeout: Duration) -> Result<()> {
        let start = Instant::now();
        loop {
            let mut ok = self.leader().await.is_some();
            for i in 0..self.members.len() {
                if !ok {
                    break;
                }
                let read = async {
                    let mut c = connect(&self.endpoint(i), Duration::from_secs(1)).await?;
                    c.get("health", None).await?;
                    anyhow::Ok(())
                };
                ok = matches!(tokio::time::timeout(Duration::from_secs(2), read).await, Ok(Ok(())));
            }
            if ok {
                return Ok(());
            }
            if let Some(i) = self.exited() {
                bail!("m{i} exited; see {}", self.opts.dir.join(format!("m{i}.log")).display());
            }
            if start.elapsed() > timeout {
                bail!("cluster not healthy after {timeout:?}; logs in {}", self.opts.dir.display());
            }
            tokio::time::sleep(Duration::from_millis(200)).await;
        }
    }

    /// The first member whose process exited on its own, if any.
    fn exited(&self) -> Option<usize> {
        // An exited child stays a zombie until reaped: state `Z` in /proc.
        let dead = |pid: u32| std::fs::read_to_string(format!("/proc/{pid}/stat")).map(|s| s.rsplit_once(')').is_some_and(|(_, rest)| rest.trim_start().starts_with('Z'))).unwrap_or(true);
        self.members.iter().position(|m| m.child.as_ref().is_some_and(|c| dead(c.id())))
    }

    /// How many times member `i` was started.
    pub fn starts(&self, i: usize) -> usize {
        self.members[i].starts
    }
}

impl Drop for Cluster {
    fn drop(&mut self) {
        for i in 0..self.members.len() {
            if self.members[i].paused {
                let _ = self.resume(i);
            }
            self.kill(i);
        }
    }
}
