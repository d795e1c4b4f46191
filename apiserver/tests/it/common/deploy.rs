//! A cluster brought up by `deploy/cluster.sh` (three apiservers with peer
//! TLS behind haproxy) in a temporary dir, on free ports, running the
//! test's apiserver binary (`APISERVER_BIN`); taken down on drop.

use std::io::{BufRead, BufReader, Read, Write};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use super::{kubectl_path, Out};

/// The node names `cluster.sh` uses by default.
pub const NAMES: [&str; 3] = ["n1", "n2", "n3"];

/// `deploy/cluster.sh` of this checkout.
pub fn script() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../deploy/cluster.sh")
}

/// Runs `bash deploy/cluster.sh ARGS` with `CLUSTER_DIR=dir` and `env`.
pub fn run_script(dir: &Path, env: &[(String, String)], args: &[&str]) -> Out {
    let o = Command::new("bash")
        .arg(script())
        .args(args)
        .env("CLUSTER_DIR", dir)
        .env("APISERVER_BIN", env!("CARGO_BIN_EXE_apiserver"))
        .env("STOP_TIMEOUT", "20")
        .envs(env.iter().map(|(k, v)| (k, v)))
        .stdin(Stdio::null())
        .output()
        .expect("run cluster.sh");
    Out { code: o.status.code().unwrap_or(-1), stdout: String::from_utf8_lossy(&o.stdout).into_owned(), stderr: String::from_utf8_lossy(&o.stderr).into_owned() }
}

/// A running deployed cluster.
pub struct Deployed {
    /// The cluster dir (`CLUSTER_DIR`).
    pub dir: tempfile::TempDir,
    env: Vec<(String, String)>,
    /// HTTPS port of each node.
    pub secure: Vec<u16>,
    /// Plaintext etcd client port of each node's store.
    pub client: Vec<u16>,
    /// TLS peer port of each node's store.
    pub peer: Vec<u16>,
}

impl Deployed {
    /// `cluster.sh up` on free ports; panics unless it succeeds (every
    /// node ready, haproxy reporting each up).
    pub fn up() -> Deployed {
        let dir = tempfile::tempdir().expect("tempdir");
        // Ten distinct free ports: all bound at once, then released.
        let held: Vec<std::net::TcpListener> = (0..10).map(|_| std::net::TcpListener::bind("127.0.0.1:0").expect("bind")).collect();
        let ports: Vec<u16> = held.iter().map(|l| l.local_addr().expect("addr").port()).collect();
        drop(held);
        let (secure, client, peer, lb) = (ports[0..3].to_vec(), ports[3..6].to_vec(), ports[6..9].to_vec(), ports[9]);
        let list = |p: &[u16]| p.iter().map(u16::to_string).collect::<Vec<_>>().join(",");
        let env = vec![("SECURE_PORTS".to_string(), list(&secure)), ("CLIENT_PORTS".to_string(), list(&client)), ("PEER_PORTS".to_string(), list(&peer)), ("LB_PORT".to_string(), lb.to_string())];
        let d = Deployed { dir, env, secure, client, peer };
        let out = d.script(&["up"]);
        assert_eq!(out.code, 0, "cluster.sh up failed: {out:?}\n{}", d.logs());
        d
    }

    /// Moves haproxy's round robin on by one node: one bare TCP
    /// connection through it (in mode tcp haproxy picks a node on
    /// accept), closed after a moment.
    pub fn shift_round_robin(&self) {
        let lb = self.env.iter().find(|(k, _)| k == "LB_PORT").map(|(_, v)| v.clone()).expect("LB_PORT");
        let mut c = std::net::TcpStream::connect(format!("127.0.0.1:{lb}")).expect("connect to haproxy");
        // A node that gets no TLS hello closes the connection after its
        // handshake timeout; haproxy has chosen the node long before.
        c.set_read_timeout(Some(Duration::from_millis(300))).expect("timeout");
        let _ = c.read(&mut [0u8; 1]);
    }

    /// Runs `cluster.sh ARGS` on this cluster.
    pub fn script(&self, args: &[&str]) -> Out {
        run_script(self.dir.path(), &self.env, args)
    }

    /// The tail of every node's log and haproxy's, for failure messages.
    pub fn logs(&self) -> String {
        let mut all = String::new();
        for n in NAMES.iter().chain(&["haproxy"]) {
            let log = std::fs::read_to_string(self.dir.path().join(format!("run/{n}.log"))).unwrap_or_default();
            let tail: Vec<&str> = log.lines().rev().take(30).collect();
            all += &format!("--- {n}.log (tail)\n{}\n", tail.into_iter().rev().collect::<Vec<_>>().join("\n"));
        }
        all
    }

    /// The admin kubeconfig, through haproxy.
    pub fn kubeconfig(&self) -> PathBuf {
        self.dir.path().join("admin.kubeconfig")
    }

    /// The cluster CA.
    pub fn ca(&self) -> PathBuf {
        self.dir.path().join("pki/ca.crt")
    }

    /// `kubectl.1.<minor>` with the admin kubeconfig; through haproxy, or
    /// straight to node `node`.
    pub fn kubectl_cmd(&self, minor: u32, node: Option<usize>) -> Command {
        let mut cmd = Command::new(kubectl_path(minor));
        cmd.arg("--kubeconfig").arg(self.kubeconfig()).arg("--cache-dir").arg(self.dir.path().join(format!("kubectl-cache-{minor}")));
        if let Some(i) = node {
            cmd.arg("--server").arg(format!("https://127.0.0.1:{}", self.secure[i]));
        }
        cmd
    }

    /// Runs kubectl (through haproxy, or at node `node`) with `stdin`.
    pub fn kubectl_at(&self, minor: u32, node: Option<usize>, args: &[&str], stdin: Option<&str>) -> Out {
        let mut cmd = self.kubectl_cmd(minor, node);
        cmd.args(args).stdin(if stdin.is_some() { Stdio::piped() } else { Stdio::null() }).stdout(Stdio::piped()).stderr(Stdio::piped());
        let mut child = cmd.spawn().expect("spawn kubectl");
        if let Some(input) = stdin {
            child.stdin.take().expect("stdin").write_all(input.as_bytes()).expect("write stdin");
        }
        let o = child.wait_with_output().expect("kubectl");
        Out { code: o.status.code().unwrap_or(-1), stdout: String::from_utf8_lossy(&o.stdout).into_owned(), stderr: String::from_utf8_lossy(&o.stderr).into_owned() }
    }

    /// Runs kubectl through haproxy.
    pub fn kubectl(&self, minor: u32, args: &[&str]) -> Out {
        self.kubectl_at(minor, None, args, None)
    }

    /// Runs `etcdctl ARGS` against node `i`'s store.
    pub fn etcdctl(&self, i: usize, args: &[&str]) -> Out {
        let o = Command::new("etcdctl")
            .env("ETCDCTL_API", "3")
            .arg(format!("--endpoints=127.0.0.1:{}", self.client[i]))
            .args(["--dial-timeout=2s", "--command-timeout=5s"])
            .args(args)
            .output()
            .expect("run etcdctl");
        Out { code: o.status.code().unwrap_or(-1), stdout: String::from_utf8_lossy(&o.stdout).into_owned(), stderr: String::from_utf8_lossy(&o.stderr).into_owned() }
    }

    /// The node whose store is the raft leader (etcdctl endpoint status);
    /// waits up to 30 s for one.
    #[track_caller]
    pub fn leader(&self) -> usize {
        let deadline = Instant::now() + Duration::from_secs(30);
        loop {
            for i in 0..3 {
                let out = self.etcdctl(i, &["endpoint", "status", "-w", "simple"]);
                // endpoint, ID, version, db size, is leader, ...
                if out.code == 0 && out.stdout.split(", ").nth(4) == Some("true") {
                    return i;
                }
            }
            assert!(Instant::now() < deadline, "no raft leader among the nodes\n{}", self.logs());
            std::thread::sleep(Duration::from_millis(200));
        }
    }

    /// The pid of node `i` (from its pid file).
    pub fn pid(&self, i: usize) -> i32 {
        let p = std::fs::read_to_string(self.dir.path().join(format!("run/{}.pid", NAMES[i]))).expect("pid file");
        p.trim().parse().expect("pid")
    }

    /// `kill -9` node `i` and waits until it is gone.
    pub fn kill9(&self, i: usize) {
        let pid = self.pid(i);
        let out = Command::new("kill").args(["-9", &pid.to_string()]).output().expect("kill");
        assert!(out.status.success(), "kill -9 {pid}: {out:?}");
        // Gone once its /proc entry is (the script's nohup child is
        // re-parented to init, which reaps it) or it is a zombie.
        let deadline = Instant::now() + Duration::from_secs(10);
        while std::fs::read_to_string(format!("/proc/{pid}/stat")).is_ok_and(|s| !s.contains(") Z ")) {
            assert!(Instant::now() < deadline, "{} (pid {pid}) survived kill -9", NAMES[i]);
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    /// Events each node's configmap watch cache has sent to its watchers
    /// (`apiserver_watch_cache_events_dispatched_total`).
    pub fn configmap_events_dispatched(&self) -> Vec<u64> {
        (0..3)
            .map(|i| {
                let m = self.kubectl_at(33, Some(i), &["get", "--raw", "/metrics"], None);
                m.ok().lines().find_map(|l| l.strip_prefix(r#"apiserver_watch_cache_events_dispatched_total{resource="/registry/configmaps/"} "#)).and_then(|v| v.trim().parse().ok()).unwrap_or(0)
            })
            .collect()
    }
}

impl Drop for Deployed {
    /// Takes the cluster down; a failed test keeps its dir (the logs).
    fn drop(&mut self) {
        let _ = self.script(&["down"]);
        if std::thread::panicking() {
            if let Ok(empty) = tempfile::tempdir() {
                let kept = std::mem::replace(&mut self.dir, empty).keep();
                eprintln!("cluster dir kept for the failure: {}", kept.display());
            }
        }
    }
}

/// `kubectl get -w --output-watch-events` running in the background, its
/// output collected as it comes.
pub struct KubectlWatch {
    child: Child,
    lines: Arc<Mutex<Vec<String>>>,
    reader: Option<std::thread::JoinHandle<()>>,
}

impl KubectlWatch {
    /// Starts `kubectl.1.<minor> get <args> -w --output-watch-events`.
    pub fn spawn(d: &Deployed, minor: u32, args: &[&str]) -> KubectlWatch {
        let mut child = d.kubectl_cmd(minor, None).args(["get"]).args(args).args(["-w", "--output-watch-events"]).stdout(Stdio::piped()).stderr(Stdio::piped()).spawn().expect("spawn kubectl");
        let stdout = child.stdout.take().expect("stdout");
        let lines = Arc::new(Mutex::new(Vec::new()));
        let sink = lines.clone();
        let reader = std::thread::spawn(move || {
            for l in BufReader::new(stdout).lines().map_while(Result::ok) {
                sink.lock().expect("lines").push(l);
            }
        });
        KubectlWatch { child, lines, reader: Some(reader) }
    }

    /// The (event, name) pairs printed so far (after the header).
    pub fn events(&self) -> Vec<(String, String)> {
        self.lines
            .lock()
            .expect("lines")
            .iter()
            .filter(|l| !l.starts_with("EVENT"))
            .map(|l| {
                let f: Vec<&str> = l.split_whitespace().collect();
                (f.first().unwrap_or(&"").to_string(), f.get(1).unwrap_or(&"").to_string())
            })
            .collect()
    }

    /// The names of the events so far.
    pub fn names(&self) -> std::collections::BTreeSet<String> {
        self.events().into_iter().map(|(_, n)| n).collect()
    }

    /// Waits until `name` was printed.
    #[track_caller]
    pub fn wait_for(&self, name: &str, timeout: Duration) {
        let deadline = Instant::now() + timeout;
        while !self.names().contains(name) {
            assert!(Instant::now() < deadline, "kubectl get -w did not print {name}: {:?}", self.lines.lock().expect("lines"));
            std::thread::sleep(Duration::from_millis(50));
        }
    }

    /// The exit status once the process has ended (without waiting).
    pub fn exited(&mut self) -> Option<std::process::ExitStatus> {
        self.child.try_wait().expect("try_wait")
    }

    /// Waits (up to `timeout`) for the process to end; its status and
    /// stderr.
    pub fn wait_exit(&mut self, timeout: Duration) -> Option<(std::process::ExitStatus, String)> {
        let deadline = Instant::now() + timeout;
        loop {
            if let Some(st) = self.exited() {
                if let Some(r) = self.reader.take() {
                    let _ = r.join();
                }
                let mut err = String::new();
                if let Some(mut e) = self.child.stderr.take() {
                    let _ = e.read_to_string(&mut err);
                }
                return Some((st, err));
            }
            if Instant::now() >= deadline {
                return None;
            }
            std::thread::sleep(Duration::from_millis(50));
        }
    }
}

impl Drop for KubectlWatch {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}
