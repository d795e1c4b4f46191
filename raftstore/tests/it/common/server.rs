//! A single-member server, real etcd or raftstore, run as a child process on
//! loopback with its data dir in a temp dir.

use std::collections::HashSet;
use std::fmt;
use std::fs::{File, OpenOptions};
use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpListener;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::mpsc::{self, Receiver, RecvTimeoutError};
use std::sync::{Mutex, OnceLock};
use std::time::{Duration, Instant};

use tempfile::TempDir;

use super::etcdctl::etcdctl_with_timeout;

/// How long a server may take from spawn to answering a read.
const START_TIMEOUT: Duration = Duration::from_secs(60);

/// Which implementation a [`Server`] runs.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Kind {
    /// Debian's etcd 3.4 (`etcd` on `PATH`).
    Etcd,
    /// This crate's binary.
    Raftstore,
}

impl fmt::Display for Kind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Kind::Etcd => "etcd",
            Kind::Raftstore => "raftstore",
        })
    }
}

impl Kind {
    /// Parses `etcd` or `raftstore`.
    pub fn parse(s: &str) -> Kind {
        match s.trim() {
            "etcd" => Kind::Etcd,
            "raftstore" => Kind::Raftstore,
            other => panic!("unknown server kind {other:?}: use etcd or raftstore"),
        }
    }
}

/// Path of a program on `PATH`, or a failure naming the Debian package.
pub fn program(name: &str, package: &str) -> PathBuf {
    let path = std::env::var_os("PATH").unwrap_or_default();
    for dir in std::env::split_paths(&path) {
        let candidate = dir.join(name);
        if candidate.is_file() {
            return candidate;
        }
    }
    panic!("`{name}` is not on PATH; these tests need it (Debian package `{package}`), they never skip")
}

/// The raftstore binary cargo built for this test binary.
pub fn raftstore_bin() -> PathBuf {
    PathBuf::from(env!("CARGO_BIN_EXE_raftstore"))
}

/// A loopback port that was free a moment ago and that this process has not
/// handed out before (real etcd cannot bind port 0 and report it).
pub fn free_port() -> u16 {
    static GIVEN: OnceLock<Mutex<HashSet<u16>>> = OnceLock::new();
    let given = GIVEN.get_or_init(|| Mutex::new(HashSet::new()));
    loop {
        let port = TcpListener::bind("127.0.0.1:0").and_then(|l| l.local_addr()).expect("bind a loopback port").port();
        if given.lock().unwrap().insert(port) {
            return port;
        }
    }
}

/// Options for [`Server::start_with`].
#[derive(Clone, Debug, Default)]
pub struct Options {
    /// Member name; `default` if empty.
    pub name: String,
    /// An existing data dir (e.g. one made by a snapshot restore). A fresh
    /// one inside the server's temp dir if `None`.
    pub data_dir: Option<PathBuf>,
    /// Peer URL to use for `--initial-advertise-peer-urls`, `--listen-peer-urls`
    /// and `--initial-cluster`; port 0 for raftstore, a free port for etcd if
    /// `None`.
    pub peer_url: Option<String>,
    /// Extra flags, passed verbatim to both kinds.
    pub args: Vec<String>,
}

/// A running single-member server. Killed (SIGKILL) on drop.
pub struct Server {
    kind: Kind,
    opts: Options,
    dir: TempDir,
    data_dir: PathBuf,
    /// Fixed client/peer ports for etcd, which cannot report a bound port 0.
    etcd_ports: Option<(u16, u16)>,
    child: Option<Child>,
    endpoint: String,
    peer_url: String,
    log_path: PathBuf,
}

impl Server {
    /// Starts a fresh server of `kind` and waits until it answers.
    pub fn start(kind: Kind) -> Server {
        Server::start_with(kind, Options::default())
    }

    /// Starts a server of `kind` with `opts` and waits until it answers.
    pub fn start_with(kind: Kind, mut opts: Options) -> Server {
        if opts.name.is_empty() {
            opts.name = "default".to_owned();
        }
        let dir = tempfile::Builder::new().prefix(&format!("it-{kind}-")).tempdir().expect("create temp dir");
        let data_dir = opts.data_dir.clone().unwrap_or_else(|| dir.path().join("data"));
        let etcd_ports = (kind == Kind::Etcd).then(|| {
            let peer = opts.peer_url.as_deref().map(port_of).unwrap_or_else(free_port);
            (free_port(), peer)
        });
        let log_path = dir.path().join("server.log");
        let mut server = Server { kind, opts, dir, data_dir, etcd_ports, child: None, endpoint: String::new(), peer_url: String::new(), log_path };
        server.spawn();
        server
    }

    /// Client URL, `http://127.0.0.1:PORT`.
    pub fn endpoint(&self) -> &str {
        &self.endpoint
    }

    /// Peer URL the server reported (raftstore) or was given (etcd).
    pub fn peer_url(&self) -> &str {
        &self.peer_url
    }

    /// A scratch directory that lives as long as the server.
    pub fn scratch(&self) -> &Path {
        self.dir.path()
    }

    /// `kill -9`, then wait for the process to be reaped.
    pub fn kill9(&mut self) {
        if let Some(mut child) = self.child.take() {
            let _ = child.kill();
            let _ = child.wait();
        }
    }

    /// Kills the process if it runs, then starts it again on the same data dir.
    pub fn restart(&mut self) {
        self.kill9();
        self.spawn();
    }

    /// The last `n` lines the server wrote.
    pub fn log_tail(&self, n: usize) -> String {
        let mut text = String::new();
        if let Ok(mut f) = File::open(&self.log_path) {
            let _ = f.read_to_string(&mut text);
        }
        let lines: Vec<&str> = text.lines().collect();
        lines[lines.len().saturating_sub(n)..].join("\n")
    }

    /// An etcd-client connected to this server.
    pub async fn client(&self) -> etcd_client::Client {
        super::connect(&self.endpoint).await
    }

    fn spawn(&mut self) {
        let name = self.opts.name.clone();
        let data_dir = self.data_dir.display().to_string();
        let (program, client_url, peer_url) = match self.kind {
            Kind::Etcd => {
                let (client, peer) = self.etcd_ports.expect("etcd ports");
                (program("etcd", "etcd-server"), format!("http://127.0.0.1:{client}"), format!("http://127.0.0.1:{peer}"))
            }
            Kind::Raftstore => (raftstore_bin(), "http://127.0.0.1:0".to_owned(), self.opts.peer_url.clone().unwrap_or_else(|| "http://127.0.0.1:0".to_owned())),
        };
        let mut args = vec![
            format!("--name={name}"),
            format!("--data-dir={data_dir}"),
            format!("--listen-client-urls={client_url}"),
            format!("--advertise-client-urls={client_url}"),
            format!("--listen-peer-urls={peer_url}"),
            format!("--initial-advertise-peer-urls={peer_url}"),
            format!("--initial-cluster={name}={peer_url}"),
            "--initial-cluster-state=new".to_owned(),
        ];
        if self.kind == Kind::Etcd {
            // A single fresh member elects itself sooner with short ticks.
            args.push("--heartbeat-interval=20".to_owned());
            args.push("--election-timeout=200".to_owned());
        }
        args.extend(self.opts.args.iter().cloned());

        let mut log = OpenOptions::new().create(true).append(true).open(&self.log_path).expect("open server log");
        let _ = writeln!(log, "=== {} {}", program.display(), args.join(" "));
        let stdout_log = log.try_clone().expect("clone log handle");
        let mut child = Command::new(&program)
            .args(&args)
            .env("NO_COLOR", "1")
            .env("ETCD_UNSUPPORTED_ARCH", "")
            .stdin(Stdio::null())
            .stdout(Stdio::from(stdout_log))
            .stderr(Stdio::piped())
            .spawn()
            .unwrap_or_else(|e| panic!("spawn {}: {e}", program.display()));
        let stderr = child.stderr.take().expect("piped stderr");
        let lines = tee_lines(stderr, log);
        self.child = Some(child);

        let deadline = Instant::now() + START_TIMEOUT;
        match self.kind {
            Kind::Etcd => {
                self.wait_line(&lines, deadline, |l| l.contains("ready to serve client requests").then_some(()));
                self.endpoint = client_url;
                self.peer_url = peer_url;
            }
            Kind::Raftstore => {
                let (mut client, mut peer) = (None, None);
                while client.is_none() || peer.is_none() {
                    let (c, p) = self.wait_line(&lines, deadline, |l| {
                        let c = url_after(l, "serving client requests on ");
                        let p = url_after(l, "serving peer traffic on ");
                        (c.is_some() || p.is_some()).then_some((c, p))
                    });
                    client = client.or(c);
                    peer = peer.or(p);
                }
                self.endpoint = client.expect("client url");
                self.peer_url = peer.expect("peer url");
            }
        }
        self.wait_healthy(deadline);
    }

    /// Reads stderr lines until `want` matches one; fails on exit or timeout.
    fn wait_line<T>(&mut self, lines: &Receiver<String>, deadline: Instant, want: impl Fn(&str) -> Option<T>) -> T {
        loop {
            let left = deadline.saturating_duration_since(Instant::now());
            match lines.recv_timeout(left) {
                Ok(line) => {
                    if let Some(found) = want(&strip_ansi(&line)) {
                        return found;
                    }
                }
                Err(RecvTimeoutError::Timeout) => panic!("{} did not report it was serving within {START_TIMEOUT:?}; log:\n{}", self.kind, self.log_tail(40)),
                Err(RecvTimeoutError::Disconnected) => {
                    let status = self.child.as_mut().and_then(|c| c.wait().ok());
                    self.child = None;
                    panic!("{} exited before serving ({status:?}); log:\n{}", self.kind, self.log_tail(40))
                }
            }
        }
    }

    fn wait_healthy(&mut self, deadline: Instant) {
        loop {
            let out = etcdctl_with_timeout(
                &self.endpoint,
                // A linearizable read: the member has a leader and serves.
                // (Not `endpoint health`, which also needs the Alarm RPC;
                // etcdctl.rs tests that separately.)
                &["get", "--command-timeout=2s", "readiness-probe"],
                None,
                Duration::from_secs(10),
            );
            // With auth enabled the read is refused, after the member did
            // the linearizable read: it serves.
            if out.code == 0 || out.stderr.contains("etcdserver: user name is empty") {
                return;
            }
            if Instant::now() > deadline {
                panic!("{} at {} never became healthy: {out}\nlog:\n{}", self.kind, self.endpoint, self.log_tail(40));
            }
            std::thread::sleep(Duration::from_millis(100));
        }
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        self.kill9();
        if std::thread::panicking() {
            eprintln!("--- last lines of {} log ({}):\n{}", self.kind, self.log_path.display(), self.log_tail(30));
        }
    }
}

/// Forwards each line of `r` to `log` and to the returned channel, on a thread.
fn tee_lines(r: impl Read + Send + 'static, mut log: File) -> Receiver<String> {
    let (tx, rx) = mpsc::channel();
    std::thread::spawn(move || {
        let mut reader = BufReader::new(r);
        let mut buf = Vec::new();
        loop {
            buf.clear();
            match reader.read_until(b'\n', &mut buf) {
                Ok(0) | Err(_) => return,
                Ok(_) => {
                    let _ = log.write_all(&buf);
                    let line = String::from_utf8_lossy(&buf).trim_end().to_owned();
                    let _ = tx.send(line);
                }
            }
        }
    });
    rx
}

/// The URL that follows `marker` in `line`, if any.
fn url_after(line: &str, marker: &str) -> Option<String> {
    let rest = &line[line.find(marker)? + marker.len()..];
    let url: String = rest.chars().take_while(|c| c.is_ascii_alphanumeric() || ":/.[]-_".contains(*c)).collect();
    let url = url.trim_end_matches(['.', ':']).to_owned();
    url.starts_with("http").then_some(url)
}

fn strip_ansi(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    let mut chars = s.chars();
    while let Some(c) = chars.next() {
        if c == '\u{1b}' {
            // CSI: ESC [ params final-byte
            for c in chars.by_ref() {
                if c.is_ascii_alphabetic() {
                    break;
                }
            }
        } else {
            out.push(c);
        }
    }
    out
}

fn port_of(url: &str) -> u16 {
    url.rsplit(':').next().and_then(|p| p.trim_end_matches('/').parse().ok()).unwrap_or_else(|| panic!("no port in {url}"))
}

#[test]
fn url_after_parses_log_lines() {
    let cases = [
        ("2024 INFO raftstore: serving client requests on http://127.0.0.1:41234", Some("http://127.0.0.1:41234")),
        ("\u{1b}[32mINFO\u{1b}[0m serving client requests on http://127.0.0.1:5, tls=false", Some("http://127.0.0.1:5")),
        ("serving client requests on 127.0.0.1:5", None),
        ("nothing here", None),
    ];
    for (line, want) in cases {
        assert_eq!(url_after(&strip_ansi(line), "serving client requests on ").as_deref(), want, "{line}");
    }
}
