//! Test helpers: a real `apiserver` process on a free port with a temporary
//! data dir, and real kubectl binaries.

pub mod deploy;
pub mod https;

use std::io::{BufRead, BufReader, Read, Write};
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::sync::mpsc;
use std::time::Duration;

/// A running apiserver; killed on drop.
pub struct Server {
    child: Child,
    /// `https://127.0.0.1:PORT`.
    pub url: String,
    /// The data dir (kept until drop).
    pub dir: tempfile::TempDir,
    /// The flags it was started with besides the port and data dir
    /// (a restart passes them again).
    extra: Vec<String>,
}

impl Server {
    /// Starts `apiserver --secure-port 0 --data-dir <tmp>` and waits for its
    /// `serving on` line and then until `/readyz` passes.
    pub fn start() -> Server {
        Self::start_with(&[])
    }

    /// Starts `apiserver --secure-port 0 --data-dir <tmp> <extra>` and waits
    /// for its `serving on` line and then until `/readyz` passes.
    pub fn start_with(extra: &[String]) -> Server {
        Self::spawn(extra).wait()
    }

    /// Starts an apiserver without waiting for it (cluster members wait for
    /// each other).
    pub fn spawn(extra: &[String]) -> Starting {
        let dir = tempfile::tempdir().expect("tempdir");
        let (child, rx) = launch(dir.path(), extra);
        Starting { child: Some(child), rx, dir: Some(dir), extra: extra.to_vec() }
    }

    /// Starts an apiserver on an existing data dir without waiting for it.
    pub fn spawn_in(dir: tempfile::TempDir, extra: &[String]) -> Starting {
        let (child, rx) = launch(dir.path(), extra);
        Starting { child: Some(child), rx, dir: Some(dir), extra: extra.to_vec() }
    }

    /// Kills the server (SIGKILL) and starts it again on the same data dir
    /// with the same flags (a new port); returns once it serves and is
    /// ready.
    pub fn restart(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
        let (child, rx) = launch(self.dir.path(), &self.extra);
        self.child = child;
        self.url = rx.recv_timeout(Duration::from_secs(120)).expect("apiserver did not print `serving on` after a restart");
        self.wait_ready(Duration::from_secs(120));
    }

    /// The server's process ID.
    pub fn pid(&self) -> u32 {
        self.child.id()
    }

    /// Sends SIGTERM (a graceful shutdown, as systemd or kubelet stops a
    /// server).
    pub fn terminate(&self) {
        let ok = Command::new("kill").args(["-TERM", &self.child.id().to_string()]).status().is_ok_and(|s| s.success());
        assert!(ok, "kill -TERM {}", self.child.id());
    }

    /// Waits up to `timeout` for the process to exit; its status, or `None`
    /// if it still runs.
    pub fn wait_exit(&mut self, timeout: Duration) -> Option<std::process::ExitStatus> {
        let deadline = std::time::Instant::now() + timeout;
        loop {
            if let Ok(Some(status)) = self.child.try_wait() {
                return Some(status);
            }
            if std::time::Instant::now() >= deadline {
                return None;
            }
            std::thread::sleep(Duration::from_millis(50));
        }
    }

    /// Sends `GET <path>` without credentials (the health paths are
    /// public) and returns the raw response.
    pub fn get_anonymous(&self, path: &str) -> String {
        https_request(self, &format!("GET {path} HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n\r\n"), false)
    }

    /// Sends `GET <path>` as the admin user and returns the raw response.
    pub fn get_admin(&self, path: &str) -> String {
        https_request(self, &format!("GET {path} HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n\r\n"), true)
    }

    /// Whether `/readyz` answers 200 (asked as the admin, whom every
    /// authorization mode allows).
    pub fn is_ready(&self) -> bool {
        self.get_admin("/readyz").starts_with("HTTP/1.1 200")
    }

    /// Waits until `/readyz` answers 200 (the server prints `serving on`
    /// before its store is up, as kube-apiserver serves before etcd
    /// answers).
    #[track_caller]
    pub fn wait_ready(&self, timeout: Duration) {
        let deadline = std::time::Instant::now() + timeout;
        while !self.is_ready() {
            assert!(std::time::Instant::now() < deadline, "{} not ready after {timeout:?}: {}", self.url, self.get_admin("/readyz?verbose"));
            std::thread::sleep(Duration::from_millis(100));
        }
    }

    /// The admin kubeconfig.
    pub fn kubeconfig(&self) -> PathBuf {
        self.dir.path().join("admin.kubeconfig")
    }

    /// The cluster CA.
    pub fn ca(&self) -> PathBuf {
        self.dir.path().join("pki/ca.crt")
    }

    /// `host:port`.
    pub fn host_port(&self) -> &str {
        self.url.trim_start_matches("https://")
    }

    /// Runs `kubectl.1.<minor>` with the admin kubeconfig.
    pub fn kubectl(&self, minor: u32, args: &[&str]) -> Out {
        self.kubectl_stdin(minor, args, None)
    }

    /// Runs kubectl with `stdin` as its input.
    pub fn kubectl_stdin(&self, minor: u32, args: &[&str], stdin: Option<&str>) -> Out {
        let cache = self.dir.path().join(format!("kubectl-cache-{minor}"));
        let mut cmd = Command::new(kubectl_path(minor));
        cmd.arg("--kubeconfig").arg(self.kubeconfig()).arg("--cache-dir").arg(&cache).args(args);
        cmd.stdin(if stdin.is_some() { Stdio::piped() } else { Stdio::null() }).stdout(Stdio::piped()).stderr(Stdio::piped());
        let mut child = cmd.spawn().expect("spawn kubectl");
        if let Some(input) = stdin {
            child.stdin.take().expect("stdin").write_all(input.as_bytes()).expect("write stdin");
        }
        let o = child.wait_with_output().expect("kubectl");
        Out { code: o.status.code().unwrap_or(-1), stdout: String::from_utf8_lossy(&o.stdout).into_owned(), stderr: String::from_utf8_lossy(&o.stderr).into_owned() }
    }

    /// Starts kubectl in the background (for `-w`).
    pub fn kubectl_spawn(&self, minor: u32, args: &[&str]) -> Child {
        let cache = self.dir.path().join(format!("kubectl-cache-{minor}"));
        Command::new(kubectl_path(minor))
            .arg("--kubeconfig")
            .arg(self.kubeconfig())
            .arg("--cache-dir")
            .arg(&cache)
            .args(args)
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .expect("spawn kubectl")
    }
}

/// Starts `apiserver --secure-port 0 --data-dir <dir> <extra>`; the
/// receiver gets the URL of its `serving on` line.
fn launch(dir: &std::path::Path, extra: &[String]) -> (Child, mpsc::Receiver<String>) {
    let mut child =
        Command::new(env!("CARGO_BIN_EXE_apiserver")).args(["--secure-port", "0", "--data-dir"]).arg(dir).args(extra).stdout(Stdio::piped()).stderr(Stdio::inherit()).spawn().expect("spawn apiserver");
    let stdout = child.stdout.take().expect("stdout");
    let (tx, rx) = mpsc::channel();
    std::thread::spawn(move || {
        for line in BufReader::new(stdout).lines().map_while(Result::ok) {
            if let Some(url) = line.strip_prefix("serving on ") {
                let _ = tx.send(url.trim().to_string());
            }
        }
    });
    (child, rx)
}

/// An apiserver process that has not printed `serving on` yet.
pub struct Starting {
    child: Option<Child>,
    rx: mpsc::Receiver<String>,
    dir: Option<tempfile::TempDir>,
    extra: Vec<String>,
}

impl Starting {
    /// Waits for `serving on`, then until `/readyz` passes.
    pub fn wait(self) -> Server {
        let s = self.wait_serving();
        s.wait_ready(Duration::from_secs(120));
        s
    }

    /// Waits for `serving on` only (the store may still be waiting for its
    /// peers).
    pub fn wait_serving(mut self) -> Server {
        let url = self.rx.recv_timeout(Duration::from_secs(120)).expect("apiserver did not print `serving on`");
        Server { child: self.child.take().expect("child"), url, dir: self.dir.take().expect("dir"), extra: std::mem::take(&mut self.extra) }
    }
}

impl Drop for Starting {
    fn drop(&mut self) {
        if let Some(c) = self.child.as_mut() {
            let _ = c.kill();
            let _ = c.wait();
        }
    }
}

/// A free loopback port (for URLs that must be known before binding).
pub fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0").expect("bind").local_addr().expect("addr").port()
}

/// Three apiservers forming one embedded-store cluster, sharing one PKI
/// (`--pki-dir`), so one admin identity works on every node.
pub struct Cluster {
    /// The nodes.
    pub nodes: Vec<Server>,
    /// The shared PKI dir.
    pub _pki: tempfile::TempDir,
}

impl Cluster {
    /// Starts the three nodes and waits until each serves and is ready.
    pub fn start() -> Cluster {
        let plan = ClusterPlan::new();
        let starting: Vec<Starting> = (0..3).map(|i| plan.spawn(i)).collect();
        Cluster { nodes: starting.into_iter().map(Starting::wait).collect(), _pki: plan.pki }
    }
}

/// The flags of a three-node cluster, for starting its nodes one by one
/// (`n0`, `n1`, `n2`, sharing one PKI).
pub struct ClusterPlan {
    /// The shared PKI dir.
    pub pki: tempfile::TempDir,
    peers: Vec<String>,
}

impl ClusterPlan {
    /// Three free peer ports and a PKI.
    pub fn new() -> ClusterPlan {
        let pki = tempfile::tempdir().expect("tempdir");
        apiserver::pki::ensure_in(pki.path(), &["127.0.0.1".to_string()]).expect("pki");
        let peers: Vec<String> = (0..3).map(|_| format!("http://127.0.0.1:{}", free_port())).collect();
        ClusterPlan { pki, peers }
    }

    /// Starts node `i` (0..3) without waiting for it.
    pub fn spawn(&self, i: usize) -> Starting {
        let initial = self.peers.iter().enumerate().map(|(i, p)| format!("n{i}={p}")).collect::<Vec<_>>().join(",");
        let args: Vec<String> =
            vec!["--name".into(), format!("n{i}"), "--listen-peer-urls".into(), self.peers[i].clone(), "--initial-cluster".into(), initial, "--pki-dir".into(), self.pki.path().display().to_string()];
        Server::spawn(&args)
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// A finished command.
#[derive(Debug)]
pub struct Out {
    /// Exit code.
    pub code: i32,
    /// Standard output.
    pub stdout: String,
    /// Standard error.
    pub stderr: String,
}

impl Out {
    /// Asserts success and returns stdout.
    #[track_caller]
    pub fn ok(&self) -> &str {
        assert_eq!(self.code, 0, "kubectl failed: {self:?}");
        &self.stdout
    }
}

/// Asserts success and parses stdout as JSON (`-o json`, `get --raw`).
#[track_caller]
pub fn json(out: &Out) -> serde_json::Value {
    serde_json::from_str(out.ok()).unwrap_or_else(|e| panic!("not JSON ({e}): {out:?}"))
}

/// Runs `f` until it returns `Some`, for up to 30 s (another node's
/// informer, kubectl's discovery cache learning a new resource, a
/// controller's work).
#[track_caller]
pub fn eventually<T>(what: &str, mut f: impl FnMut() -> Option<T>) -> T {
    let start = std::time::Instant::now();
    loop {
        if let Some(t) = f() {
            return t;
        }
        assert!(start.elapsed() < Duration::from_secs(30), "timed out waiting for {what}");
        std::thread::sleep(Duration::from_millis(200));
    }
}

/// `kubectl.1.<minor>` beside the file the `kubectl` on PATH points to.
pub fn kubectl_path(minor: u32) -> PathBuf {
    let path = std::env::var_os("PATH").expect("PATH");
    for dir in std::env::split_paths(&path) {
        let k = dir.join("kubectl");
        if let Ok(real) = std::fs::canonicalize(&k) {
            if let Some(parent) = real.parent() {
                let p = parent.join(format!("kubectl.1.{minor}"));
                if p.exists() {
                    return p;
                }
            }
        }
        let p = dir.join(format!("kubectl.1.{minor}"));
        if p.exists() {
            return p;
        }
    }
    panic!("kubectl.1.{minor} not found beside kubectl on PATH");
}

/// The shared fixtures directory: `shared/fixtures` beside the checkout
/// (`../shared` from the repository root), found by walking up from the
/// crate directory, so that a clone anywhere under the project's directory
/// finds it.
pub fn fixtures() -> PathBuf {
    let crate_dir = std::env::var_os("CARGO_MANIFEST_DIR").map(PathBuf::from).unwrap_or_else(|| PathBuf::from(env!("CARGO_MANIFEST_DIR")));
    crate_dir.ancestors().map(|a| a.join("shared/fixtures")).find(|p| p.is_dir()).unwrap_or_else(|| panic!("no shared/fixtures directory above {}", crate_dir.display()))
}

/// Sends a raw HTTPS request without a client certificate; returns the
/// response (status line, headers, body).
pub fn raw_https(server: &Server, request: &str) -> String {
    https_request(server, request, false)
}

/// The body of a raw HTTP/1.1 response, its chunks joined.
pub fn body_of(resp: &str) -> String {
    let Some((head, body)) = resp.split_once("\r\n\r\n") else { return String::new() };
    if !head.to_ascii_lowercase().contains("transfer-encoding: chunked") {
        return body.to_string();
    }
    let (mut out, mut rest) = (String::new(), body);
    while let Some((size, after)) = rest.split_once("\r\n") {
        let n = usize::from_str_radix(size.trim(), 16).unwrap_or(0);
        if n == 0 || after.len() < n {
            break;
        }
        out.push_str(&after[..n]);
        rest = after[n..].trim_start_matches("\r\n");
    }
    out
}

/// A field of the server's admin kubeconfig (`certificate-authority-data`,
/// …), decoded from base64.
fn kubeconfig_data(server: &Server, field: &str) -> Vec<u8> {
    use base64::Engine as _;
    let cfg = std::fs::read_to_string(server.kubeconfig()).expect("read kubeconfig");
    let line = cfg.lines().find_map(|l| l.trim().strip_prefix(&format!("{field}: "))).unwrap_or_else(|| panic!("no {field} in the kubeconfig"));
    base64::engine::general_purpose::STANDARD.decode(line.trim()).expect("base64 in the kubeconfig")
}

/// Sends a raw HTTPS request, trusting the CA of the server's kubeconfig,
/// as its admin user (`admin`) or without a client certificate; returns
/// the response (status line, headers, body).
pub fn https_request(server: &Server, request: &str, admin: bool) -> String {
    use rustls::pki_types::pem::PemObject;
    let _ = rustls::crypto::aws_lc_rs::default_provider().install_default();
    let mut roots = rustls::RootCertStore::empty();
    for c in rustls::pki_types::CertificateDer::pem_slice_iter(&kubeconfig_data(server, "certificate-authority-data")) {
        roots.add(c.expect("CA pem")).expect("add CA");
    }
    let builder = rustls::ClientConfig::builder().with_root_certificates(roots);
    let cfg = if admin {
        let certs: Vec<_> = rustls::pki_types::CertificateDer::pem_slice_iter(&kubeconfig_data(server, "client-certificate-data")).map(|c| c.expect("cert pem")).collect();
        let key = rustls::pki_types::PrivateKeyDer::from_pem_slice(&kubeconfig_data(server, "client-key-data")).expect("key pem");
        builder.with_client_auth_cert(certs, key).expect("client cert")
    } else {
        builder.with_no_client_auth()
    };
    let name = rustls::pki_types::ServerName::try_from("127.0.0.1").expect("name").to_owned();
    let conn = rustls::ClientConnection::new(std::sync::Arc::new(cfg), name).expect("tls");
    let tcp = std::net::TcpStream::connect(server.host_port()).expect("connect");
    let mut tls = rustls::StreamOwned::new(conn, tcp);
    tls.write_all(request.as_bytes()).expect("write");
    let mut out = Vec::new();
    let _ = tls.read_to_end(&mut out);
    String::from_utf8_lossy(&out).into_owned()
}

/// Runs curl as the admin user (the client certificate the server wrote to
/// its pki dir) against `path`, with `-s -i` and the `extra` flags; returns
/// the status line, headers and body.
pub fn curl_admin(s: &Server, path: &str, extra: &[&str]) -> String {
    let out = curl_as_admin(s).args(["-s", "-i"]).args(extra).arg(format!("https://{}{path}", s.host_port())).output().expect("run curl");
    String::from_utf8_lossy(&out.stdout).to_string()
}

/// A curl command that trusts the server's CA and presents the admin
/// client certificate of its pki dir; add the flags and the URL.
pub fn curl_as_admin(s: &Server) -> Command {
    let pki = s.ca().parent().expect("pki dir").to_path_buf();
    let mut cmd = Command::new("curl");
    cmd.arg("--cacert").arg(s.ca()).arg("--cert").arg(pki.join("admin.crt")).arg("--key").arg(pki.join("admin.key"));
    cmd
}

/// A single-member Debian etcd on free loopback ports, killed on drop, and
/// a connected [`apiserver::storage::remote::RemoteKv`] once it answers.
/// A missing etcd binary fails the test: suites must run against real etcd.
pub struct RealEtcd {
    /// Client URL (`http://127.0.0.1:PORT`).
    pub url: String,
    /// Connected remote KV.
    pub kv: apiserver::storage::remote::RemoteKv,
    child: std::process::Child,
    _dir: tempfile::TempDir,
}

impl RealEtcd {
    /// Starts etcd and waits (up to 10 s) until it serves a revision.
    pub async fn start() -> RealEtcd {
        use apiserver::storage::Storage as _;
        let Some(etcd) = ["/usr/bin/etcd", "/usr/local/bin/etcd"].iter().find(|p| std::path::Path::new(p).exists()) else {
            panic!("etcd not found: install Debian's etcd-server package (.ci/setup does)");
        };
        let dir = tempfile::tempdir().expect("tempdir");
        let (c, p) = (free_port(), free_port());
        let url = format!("http://127.0.0.1:{c}");
        let peer = format!("http://127.0.0.1:{p}");
        let mut child = std::process::Command::new(etcd)
            .arg("--data-dir")
            .arg(dir.path())
            .args(["--listen-client-urls", &url, "--advertise-client-urls", &url])
            .args(["--listen-peer-urls", &peer, "--initial-advertise-peer-urls", &peer])
            .args(["--initial-cluster", &format!("default={peer}")])
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::null())
            .spawn()
            .expect("start etcd");
        for _ in 0..50 {
            if let Ok(k) = apiserver::storage::remote::RemoteKv::connect(std::slice::from_ref(&url), None).await {
                if apiserver::storage::KvStorage::new(std::sync::Arc::new(k.clone())).current_revision().await.is_ok() {
                    return RealEtcd { url, kv: k, child, _dir: dir };
                }
            }
            tokio::time::sleep(std::time::Duration::from_millis(200)).await;
        }
        let _ = child.kill();
        let _ = child.wait();
        panic!("etcd did not start");
    }
}

impl Drop for RealEtcd {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// Stops a `kubectl get -w --output-watch-events` process and returns its
/// events as (type, name) pairs, after the header line, with the raw output.
pub fn stop_watch(mut w: std::process::Child) -> (Vec<(String, String)>, String) {
    use std::io::Read as _;
    let _ = w.kill();
    let _ = w.wait();
    let mut out = String::new();
    if let Some(mut stdout) = w.stdout.take() {
        let _ = stdout.read_to_string(&mut out);
    }
    let events = out
        .lines()
        .skip(1)
        .map(|l| {
            let f: Vec<&str> = l.split_whitespace().collect();
            (f.first().unwrap_or(&"").to_string(), f.get(1).unwrap_or(&"").to_string())
        })
        .collect();
    (events, out)
}

/// A single-member embedded raftstore (real RocksDB in a temporary
/// directory) with a leader, for storage-level tests; keep the directory
/// alive as long as the member.
pub async fn embedded_member() -> (raftstore::node::NodeHandle, tempfile::TempDir) {
    let dir = tempfile::tempdir().unwrap();
    let cfg = raftstore::node::Config {
        data_dir: dir.path().to_path_buf(),
        listen_client_urls: vec!["http://127.0.0.1:0".into()],
        listen_peer_urls: vec!["http://127.0.0.1:0".into()],
        ..Default::default()
    };
    let h = raftstore::node::start(cfg).await.unwrap();
    h.node.wait_for_leader().await.unwrap();
    (h, dir)
}
