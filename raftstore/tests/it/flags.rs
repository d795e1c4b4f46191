//! The `raftstore` binary's flags and the plain-HTTP side of the client port.

use std::io::{Read, Write};
use std::net::TcpStream;
use std::process::Command;
use std::time::Duration;

use crate::common::server::{free_port, raftstore_bin};
use crate::common::{block_on, Kind, Options, Server};

/// Runs `cmd`, which is expected to refuse to start, and returns its
/// output. A server that starts after all is killed after 30 s and fails
/// the test, rather than hanging it.
fn output_of_refused(cmd: &mut Command) -> std::process::Output {
    let mut child = cmd.stdin(std::process::Stdio::null()).stdout(std::process::Stdio::piped()).stderr(std::process::Stdio::piped()).spawn().expect("run the server");
    let start = std::time::Instant::now();
    while child.try_wait().expect("wait").is_none() {
        if start.elapsed() > Duration::from_secs(30) {
            let _ = child.kill();
            let out = child.wait_with_output().expect("wait");
            panic!("{cmd:?} started instead of refusing; stderr:\n{}", String::from_utf8_lossy(&out.stderr));
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    child.wait_with_output().expect("wait")
}

/// Bad flags are refused with a message naming the flag, exit non-zero, and
/// leave no data dir behind (etcd checks flags before creating anything).
#[test]
fn bad_flags_are_refused_before_touching_the_data_dir() {
    let cases: Vec<(&str, Vec<&str>, &str)> = vec![
        ("https without TLS", vec!["--listen-client-urls", "https://127.0.0.1:0"], "an https URL needs --cert-file and --key-file"),
        ("https peer without TLS", vec!["--listen-peer-urls", "https://127.0.0.1:0"], "an https URL needs --peer-cert-file and --peer-key-file"),
        ("cert without key", vec!["--cert-file", "/nonexistent.pem"], "--cert-file and --key-file must be given together"),
        ("unreadable cert", vec!["--cert-file", "/nonexistent.pem", "--key-file", "/nonexistent.key"], "--cert-file: cannot read /nonexistent.pem"),
        ("unknown scheme", vec!["--listen-client-urls", "foo://127.0.0.1:0"], "URL scheme must be http, https, unix, or unixs: foo://127.0.0.1:0"),
        ("unknown peer scheme", vec!["--listen-peer-urls", "unix://localhost:1"], "URL scheme must be http or https"),
        ("unix URL with a path", vec!["--listen-client-urls", "unix:///tmp/x.sock"], "URL address does not have the form \"host:port\": unix:///tmp/x.sock"),
        ("unixs without TLS", vec!["--listen-client-urls", "unixs://localhost:1"], "a unixs URL needs --cert-file and --key-file (or --auto-tls)"),
        ("https metrics without TLS", vec!["--listen-metrics-urls", "https://127.0.0.1:0"], "--listen-metrics-urls: https://127.0.0.1:0: an https URL needs --cert-file"),
        ("metrics on a unix socket", vec!["--listen-metrics-urls", "unix://localhost:1"], "--listen-metrics-urls: URL scheme must be http or https"),
        ("unknown logger", vec!["--logger", "bogus"], "unknown logger option \"bogus\""),
        ("default with more outputs", vec!["--log-outputs", "default,stdout"], "multi logoutput for \"default\" is not supported yet"),
        ("unwritable log file", vec!["--log-outputs", "/nonexistent/x.log"], "open sink \"/nonexistent/x.log\": open /nonexistent/x.log: "),
        ("certificates valid for no time", vec!["--auto-tls", "--self-signed-cert-validity", "0"], "--self-signed-cert-validity is invalid"),
        ("missing config file", vec!["--config-file", "/nonexistent.yaml"], "open /nonexistent.yaml"),
        ("not a URL", vec!["--advertise-client-urls", "notaurl"], "--advertise-client-urls: invalid URL"),
        ("bad cluster URL", vec!["--initial-cluster", "default=notaurl"], "--initial-cluster: invalid URL"),
        ("this member missing", vec!["--initial-cluster", "other=http://127.0.0.1:9"], "no member named \"default\""),
        ("advertise not in cluster", vec!["--initial-cluster", "default=http://127.0.0.1:9", "--initial-advertise-peer-urls", "http://127.0.0.1:1"], "missing from --initial-advertise-peer-urls"),
        (
            "two members on one URL",
            vec!["--initial-cluster", "default=http://127.0.0.1:9,other=http://127.0.0.1:9", "--initial-advertise-peer-urls", "http://127.0.0.1:9"],
            "initial cluster default=http://127.0.0.1:9,other=http://127.0.0.1:9 has duplicate url",
        ),
        (
            "this member with a URL not advertised",
            vec!["--initial-cluster", "default=http://127.0.0.1:9,default=http://127.0.0.1:8", "--initial-advertise-peer-urls", "http://127.0.0.1:9"],
            "missing from --initial-advertise-peer-urls",
        ),
        (
            "a member with two peer URLs",
            vec!["--initial-cluster", "default=http://127.0.0.1:9,other=http://127.0.0.1:7,other=http://127.0.0.1:8", "--initial-advertise-peer-urls", "http://127.0.0.1:9"],
            "member \"other\" has more than one peer URL",
        ),
        ("existing with no peer to ask", vec!["--initial-cluster-state", "existing"], "cannot fetch cluster info"),
        ("bad log level", vec!["--log-level", "bogus["], "invalid --log-level"),
        ("zero request size", vec!["--max-request-bytes", "0"], "--max-request-bytes"),
        ("no connections allowed", vec!["--max-connections", "0"], "--max-connections must be positive"),
        ("no streams allowed", vec!["--max-concurrent-streams", "0"], "--max-concurrent-streams must be positive"),
    ];
    for (name, args, want) in cases {
        let dir = tempfile::tempdir().expect("tempdir");
        let data = dir.path().join("data");
        let out = output_of_refused(Command::new(raftstore_bin()).arg("--data-dir").arg(&data).args(["--listen-peer-urls", "http://127.0.0.1:0"]).args(&args));
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(!out.status.success(), "{name}: should fail: {stderr}");
        assert!(stderr.contains(want), "{name}: want {want:?} in {stderr:?}");
        assert!(!data.exists(), "{name}: left a data dir behind");
    }
}

/// Runs `raftstore` on `data` with client URL `client_url` (peer port 0),
/// asserts that it refuses to start, and returns its stderr.
fn refused_start(data: &std::path::Path, client_url: &str) -> String {
    let out = output_of_refused(Command::new(raftstore_bin()).arg("--data-dir").arg(data).args(["--listen-client-urls", client_url, "--listen-peer-urls", "http://127.0.0.1:0"]));
    let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
    assert!(!out.status.success(), "should fail: {stderr}");
    stderr
}

/// A data dir whose `db` is a file, not a directory: refused at start with
/// the path and the OS reason, not a panic or RocksDB's debug output; the
/// file is left as it was.
#[test]
fn data_dir_with_a_file_for_db_is_refused_plainly() {
    let dir = tempfile::tempdir().expect("tempdir");
    let data = dir.path().join("data");
    std::fs::create_dir_all(&data).expect("data dir");
    std::fs::write(data.join("db"), b"not a directory").expect("write db file");
    let stderr = refused_start(&data, "http://127.0.0.1:0");
    let want = format!("cannot create data directory {}: File exists", data.join("db").display());
    assert!(stderr.contains(&want), "want {want:?} in {stderr:?}");
    assert!(!stderr.contains("Os {") && !stderr.contains("panicked"), "plain message wanted: {stderr:?}");
    assert_eq!(std::fs::read(data.join("db")).expect("db file kept"), b"not a directory");
}

/// A data dir that is a dangling symlink is reported under its own name,
/// not as `<dir>/db`, and the failed start leaves nothing behind.
#[test]
fn dangling_symlink_data_dir_is_named_in_the_error() {
    let dir = tempfile::tempdir().expect("tempdir");
    let data = dir.path().join("data");
    std::os::unix::fs::symlink(dir.path().join("nowhere"), &data).expect("symlink");
    let stderr = refused_start(&data, "http://127.0.0.1:0");
    let want = format!("cannot create data directory {}: File exists", data.display());
    assert!(stderr.contains(&want), "want {want:?} in {stderr:?}");
    assert!(!stderr.contains("/db"), "the fault is the data dir, not db: {stderr:?}");
    assert!(!dir.path().join("nowhere").exists(), "nothing created at the link target");
}

/// A client port already in use is refused with the address that clashed,
/// in etcd's `listen tcp HOST:PORT: ...` form, before the data dir is made.
#[test]
fn client_port_in_use_names_the_address() {
    let taken = std::net::TcpListener::bind("127.0.0.1:0").expect("bind");
    let port = taken.local_addr().expect("addr").port();
    let dir = tempfile::tempdir().expect("tempdir");
    let data = dir.path().join("data");
    let stderr = refused_start(&data, &format!("http://127.0.0.1:{port}"));
    let want = format!("listen tcp 127.0.0.1:{port}: Address already in use");
    assert!(stderr.contains(&want), "want {want:?} in {stderr:?}");
    assert!(!data.exists(), "a refused start leaves no data dir");
}

fn http_get(addr: &str, path: &str) -> String {
    let mut s = TcpStream::connect(addr).expect("connect");
    s.set_read_timeout(Some(Duration::from_secs(5))).expect("timeout");
    write!(s, "GET {path} HTTP/1.1\r\nHost: {addr}\r\nConnection: close\r\n\r\n").expect("write");
    let mut out = String::new();
    let _ = s.read_to_string(&mut out);
    out
}

/// etcd serves `/health` and `/version` on its client URLs, and listens on
/// every `--listen-client-urls` entry.
#[test]
fn client_port_serves_health_version_and_every_listen_url() {
    let (p1, p2) = (free_port(), free_port());
    let opts = Options { args: vec![format!("--listen-client-urls=http://127.0.0.1:{p1},http://127.0.0.1:{p2}")], ..Default::default() };
    let s = Server::start_with(Kind::Raftstore, opts);
    for port in [p1, p2] {
        let addr = format!("127.0.0.1:{port}");
        let health = http_get(&addr, "/health");
        assert!(health.starts_with("HTTP/1.1 200"), "{health}");
        assert!(health.contains(r#""health":"true""#), "{health}");
        let version = http_get(&addr, "/version");
        assert!(version.contains(r#""etcdserver":"3.5."#), "{version}");
        block_on(async {
            let mut c = crate::common::connect(&addr).await;
            c.put("k", port.to_string(), None).await.expect("put on every client URL");
        });
    }
    drop(s);
}

/// A service raftstore does not serve answers like grpc-go does, with the
/// service named (tonic leaves the message empty).
#[test]
fn unknown_service_is_named() {
    let s = Server::start(Kind::Raftstore);
    block_on(async {
        // A service no etcd serves, called with an empty message.
        let channel = tonic::transport::Endpoint::from_shared(format!("http://{}", s.endpoint().trim_start_matches("http://"))).expect("endpoint").connect().await.expect("connect");
        let mut grpc = tonic::client::Grpc::new(channel);
        grpc.ready().await.expect("ready");
        let path = http::uri::PathAndQuery::from_static("/etcdserverpb.NoSuchService/Call");
        let err = grpc.unary::<(), (), _>(tonic::Request::new(()), path, tonic_prost::ProstCodec::default()).await.expect_err("not served");
        assert_eq!(err.code(), tonic::Code::Unimplemented);
        assert_eq!(err.message(), "unknown service etcdserverpb.NoSuchService");
    });
}

/// A member republishes its name and client URLs at every start, as etcd
/// does, so clients discovering endpoints through MemberList find it.
#[test]
fn member_list_shows_this_starts_name_and_client_urls() {
    let keep = tempfile::tempdir().expect("tempdir");
    let data = keep.path().join("data");
    let first = Server::start_with(Kind::Raftstore, Options { name: "first".into(), data_dir: Some(data.clone()), ..Default::default() });
    let first_ep = first.endpoint().to_string();
    drop(first);
    let second = Server::start_with(Kind::Raftstore, Options { name: "second".into(), data_dir: Some(data), ..Default::default() });
    assert_ne!(second.endpoint(), first_ep, "a fresh port 0 each start");
    block_on(async {
        let mut c = second.client().await;
        let mut last = String::new();
        for _ in 0..50 {
            let list = c.member_list().await.expect("member list");
            let m = &list.members()[0];
            last = format!("{} {:?}", m.name(), m.client_urls());
            if m.name() == "second" && m.client_urls() == [second.endpoint().to_string()] {
                return;
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
        panic!("member list still shows {last}");
    });
}

/// etcd reads every flag from an `ETCD_<FLAG>` environment variable too
/// (what `member add` prints and container images set); a flag given on
/// the command line wins over its variable.
#[test]
fn flags_come_from_etcd_environment_variables() {
    let dir = tempfile::tempdir().expect("tempdir");
    let data = dir.path().join("from-env");
    let port = free_port();
    let mut child = Command::new(raftstore_bin())
        .env("ETCD_NAME", "envname")
        .env("ETCD_DATA_DIR", &data)
        .env("ETCD_LISTEN_CLIENT_URLS", format!("http://127.0.0.1:{port}"))
        .env("ETCD_LISTEN_PEER_URLS", "http://127.0.0.1:1")
        .args(["--listen-peer-urls", "http://127.0.0.1:0"])
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn()
        .expect("start raftstore");
    let addr = format!("127.0.0.1:{port}");
    let start = std::time::Instant::now();
    let names = loop {
        let got = block_on(async {
            let mut c = crate::common::connect(&addr).await;
            c.member_list().await.ok().map(|l| l.members().iter().map(|m| m.name().to_string()).collect::<Vec<_>>())
        });
        if let Some(n) = got {
            break n;
        }
        assert!(start.elapsed() < Duration::from_secs(20), "no server on ETCD_LISTEN_CLIENT_URLS");
        std::thread::sleep(Duration::from_millis(100));
    };
    let _ = child.kill();
    let _ = child.wait();
    assert_eq!(names, ["envname"]);
    assert!(data.join("db").is_dir(), "ETCD_DATA_DIR not used");
}

/// A server of either kind started by hand, for flags the shared harness
/// cannot pass: it runs in its own working directory (`unix://` sockets
/// are made there), logs where its flags say, and listens on fixed ports
/// (etcd cannot report a bound port 0). Killed on drop.
struct Manual {
    kind: Kind,
    child: Option<std::process::Child>,
    dir: tempfile::TempDir,
    /// `http://127.0.0.1:<port>`.
    client: String,
}

impl Manual {
    /// Starts `kind` as a one-member cluster in a fresh directory, with
    /// `extra` after the usual flags (a later flag wins, for both kinds).
    /// Does not wait for it to serve.
    fn spawn(kind: Kind, extra: &[String]) -> Manual {
        let dir = tempfile::Builder::new().prefix(&format!("flags-{kind}-")).tempdir().expect("tempdir");
        Manual::spawn_in(kind, dir, extra, &[])
    }

    /// [`Manual::spawn`] in `dir`, with the environment variables `env`
    /// set too.
    fn spawn_in(kind: Kind, dir: tempfile::TempDir, extra: &[String], env: &[(&str, String)]) -> Manual {
        let (client, peer) = (format!("http://127.0.0.1:{}", free_port()), format!("http://127.0.0.1:{}", free_port()));
        let program = match kind {
            Kind::Etcd => crate::common::server::program("etcd", "etcd-server"),
            Kind::Raftstore => raftstore_bin(),
        };
        let mut args = vec![
            "--name=default".to_string(),
            format!("--data-dir={}", dir.path().join("data").display()),
            format!("--listen-client-urls={client}"),
            format!("--advertise-client-urls={client}"),
            format!("--listen-peer-urls={peer}"),
            format!("--initial-advertise-peer-urls={peer}"),
            format!("--initial-cluster=default={peer}"),
        ];
        if kind == Kind::Etcd {
            args.extend(["--heartbeat-interval=20".to_string(), "--election-timeout=200".to_string()]);
        }
        args.extend(extra.iter().cloned());
        let out = std::fs::File::create(dir.path().join("stdout")).expect("stdout file");
        let err = std::fs::File::create(dir.path().join("stderr")).expect("stderr file");
        let child = Command::new(&program)
            .args(&args)
            .envs(env.iter().map(|(k, v)| (k, v)))
            .current_dir(dir.path())
            .stdin(std::process::Stdio::null())
            .stdout(out)
            .stderr(err)
            .spawn()
            .unwrap_or_else(|e| panic!("spawn {}: {e}", program.display()));
        Manual { kind, child: Some(child), dir, client }
    }

    fn path(&self, name: &str) -> std::path::PathBuf {
        self.dir.path().join(name)
    }

    fn read(&self, name: &str) -> String {
        std::fs::read_to_string(self.path(name)).unwrap_or_default()
    }

    /// `etcdctl` run in the server's directory (where `unix://` names are
    /// looked up).
    fn etcdctl(&self, endpoint: &str, args: &[&str]) -> (i32, String, String) {
        let out = Command::new(crate::common::server::program("etcdctl", "etcd-client"))
            .env("ETCDCTL_API", "3")
            .current_dir(self.dir.path())
            .arg(format!("--endpoints={endpoint}"))
            .args(["--dial-timeout=2s", "--command-timeout=4s"])
            .args(args)
            .output()
            .expect("run etcdctl");
        (out.status.code().unwrap_or(-1), String::from_utf8_lossy(&out.stdout).into_owned(), String::from_utf8_lossy(&out.stderr).into_owned())
    }

    /// Waits until `etcdctl <args>` on `endpoint` succeeds; its stdout.
    fn wait_for(&mut self, endpoint: &str, args: &[&str]) -> String {
        let start = std::time::Instant::now();
        loop {
            let (code, stdout, stderr) = self.etcdctl(endpoint, args);
            if code == 0 {
                return stdout;
            }
            if let Some(Ok(Some(status))) = self.child.as_mut().map(|c| c.try_wait()) {
                panic!("{} exited ({status}) before serving; stderr:\n{}", self.kind, self.read("stderr"));
            }
            assert!(start.elapsed() < Duration::from_secs(60), "{} never served `etcdctl {}` on {endpoint}: {stderr}\nserver stderr:\n{}", self.kind, args.join(" "), self.read("stderr"));
            std::thread::sleep(Duration::from_millis(200));
        }
    }

    /// Waits until the file `name` in the server's directory contains
    /// `text`.
    fn wait_text(&mut self, name: &str, text: &str) {
        let start = std::time::Instant::now();
        while !self.read(name).contains(text) {
            if let Some(Ok(Some(status))) = self.child.as_mut().map(|c| c.try_wait()) {
                panic!("{} exited ({status}) before writing {text:?} to {name}; stderr:\n{}", self.kind, self.read("stderr"));
            }
            assert!(start.elapsed() < Duration::from_secs(60), "{} wrote no {text:?} to {name}; stderr:\n{}", self.kind, self.read("stderr"));
            std::thread::sleep(Duration::from_millis(100));
        }
    }

    /// Sends SIGTERM and waits for the process to exit; its exit code (-1
    /// for the signal).
    fn terminate(&mut self) -> i32 {
        let pid = self.child.as_ref().expect("running").id();
        let sent = Command::new("kill").args(["-TERM", &pid.to_string()]).status().expect("run kill");
        assert!(sent.success(), "kill -TERM {pid}");
        self.exit_code()
    }

    /// Waits for the process to exit by itself; its exit code.
    fn exit_code(&mut self) -> i32 {
        let mut child = self.child.take().expect("running");
        let start = std::time::Instant::now();
        loop {
            if let Some(status) = child.try_wait().expect("wait") {
                return status.code().unwrap_or(-1);
            }
            if start.elapsed() > Duration::from_secs(30) {
                let _ = child.kill();
                let _ = child.wait();
                panic!("{} did not exit; stderr:\n{}", self.kind, self.read("stderr"));
            }
            std::thread::sleep(Duration::from_millis(50));
        }
    }
}

impl Drop for Manual {
    fn drop(&mut self) {
        if let Some(mut c) = self.child.take() {
            let _ = c.kill();
            let _ = c.wait();
        }
    }
}

/// The same binary run with `args` and nothing else, in an empty
/// directory: exit code, stdout, stderr.
fn run_kind(kind: Kind, args: &[&str]) -> (i32, String, String) {
    let dir = tempfile::tempdir().expect("tempdir");
    let program = match kind {
        Kind::Etcd => crate::common::server::program("etcd", "etcd-server"),
        Kind::Raftstore => raftstore_bin(),
    };
    let out = output_of_refused(Command::new(program).args(args).current_dir(dir.path()));
    (out.status.code().unwrap_or(-1), String::from_utf8_lossy(&out.stdout).into_owned(), String::from_utf8_lossy(&out.stderr).into_owned())
}

/// A flag neither knows is refused as Go's flag package refuses it: the
/// same first line on stderr, then the usage, nothing on stdout, exit
/// code 2. So are a flag without its value and a value that does not
/// parse; a word that is not a flag is refused by etcd's own check, with
/// exit code 1 (etcd's line carries a log prefix and names `etcd`).
#[test]
fn bad_flags_are_refused_in_etcds_words() {
    let cases: [(&[&str], i32, &str); 6] = [
        (&["--no-such-flag"], 2, "flag provided but not defined: -no-such-flag"),
        (&["-no-such-flag"], 2, "flag provided but not defined: -no-such-flag"),
        (&["--no-such-flag=3"], 2, "flag provided but not defined: -no-such-flag"),
        (&["--max-txn-ops=abc"], 2, "invalid value \"abc\" for flag -max-txn-ops: parse error"),
        (&["--name"], 2, "flag needs an argument: -name"),
        (&["extra-arg"], 1, "error verifying flags, 'extra-arg' is not a valid flag. See '"),
    ];
    crate::common::for_each_kind(|kind| {
        for (args, code, want) in cases {
            let (got_code, stdout, stderr) = run_kind(kind, args);
            assert_eq!(got_code, code, "{args:?}: exit code; stderr {stderr:?}");
            assert_eq!(stdout, "", "{args:?}: nothing on stdout");
            if code == 2 {
                let mut lines = stderr.lines();
                assert_eq!(lines.next(), Some(want), "{args:?}: {stderr:?}");
                assert_eq!(lines.next(), Some("Usage:"), "{args:?}: the usage follows: {stderr:?}");
            } else {
                assert!(stderr.contains(want), "{args:?}: want {want:?} in {stderr:?}");
            }
        }
    });
}

/// `--max-txn-ops` bounds the ops of a txn: with 3, three puts pass and
/// four are refused with etcd's error (the default, 128, would take them).
#[test]
fn max_txn_ops_bounds_a_txn() {
    use etcd_client::{Txn, TxnOp};
    crate::common::for_each_kind(|kind| {
        let s = Server::start_with(kind, Options { args: vec!["--max-txn-ops=3".into()], ..Default::default() });
        block_on(async {
            let mut c = s.client().await;
            let puts = |n: usize| Txn::new().and_then((0..n).map(|i| TxnOp::put(format!("k{i}"), "v", None)).collect::<Vec<_>>());
            c.txn(puts(3)).await.expect("three ops are allowed");
            let err = c.txn(puts(4)).await.expect_err("four ops are too many");
            assert_eq!(crate::common::status_of(&err), (tonic::Code::InvalidArgument, "etcdserver: too many operations in txn request".to_string()));
            let compares = Txn::new().when((0..4).map(|i| etcd_client::Compare::version(format!("k{i}"), etcd_client::CompareOp::Greater, 0)).collect::<Vec<_>>());
            let err = c.txn(compares).await.expect_err("four compares are too many");
            assert_eq!(crate::common::status_of(&err).0, tonic::Code::InvalidArgument);
        });
    });
}

/// `--listen-metrics-urls` listeners serve `/metrics` and `/health`, and
/// nothing else (etcd's metrics mux).
#[test]
fn metrics_urls_serve_metrics_and_health() {
    crate::common::for_each_kind(|kind| {
        let (p1, p2) = (free_port(), free_port());
        let s = Server::start_with(kind, Options { args: vec![format!("--listen-metrics-urls=http://127.0.0.1:{p1},http://127.0.0.1:{p2}")], ..Default::default() });
        for port in [p1, p2] {
            let addr = format!("127.0.0.1:{port}");
            let metrics = http_get(&addr, "/metrics");
            assert!(metrics.starts_with("HTTP/1.1 200"), "{metrics}");
            assert!(metrics.contains("\netcd_server_has_leader 1"), "{metrics}");
            let health = http_get(&addr, "/health");
            assert!(health.starts_with("HTTP/1.1 200") && health.contains(r#""health":"true""#), "{health}");
            let version = http_get(&addr, "/version");
            assert!(version.starts_with("HTTP/1.1 404"), "the metrics port serves no /version: {version}");
        }
        drop(s);
    });
}

/// `--log-outputs` sends the log to each target it names (a file, stderr,
/// stdout) and to no other, with `--logger=zap`; `--logger=capnslog` is
/// taken with etcd 3.4's deprecation warning first on stderr; a bad logger
/// or output list is refused as etcd refuses a bad flag value, with exit
/// code 1.
#[test]
fn log_flags_choose_where_the_log_goes() {
    // The targets a case names, and the other two.
    let cases: [(&str, &[&str]); 4] = [("server.log", &["server.log"]), ("stderr", &["stderr"]), ("stdout", &["stdout"]), ("stderr,server.log", &["stderr", "server.log"])];
    crate::common::for_each_kind(|kind| {
        // What each logs once it serves clients.
        let ready = match kind {
            Kind::Etcd => "serving client traffic",
            Kind::Raftstore => "ready to serve client requests",
        };
        for (outputs, targets) in cases {
            let mut s = Manual::spawn(kind, &["--logger=zap".into(), format!("--log-outputs={outputs}")]);
            for t in targets {
                s.wait_text(t, ready);
            }
            s.wait_for(&s.client.clone(), &["put", "k", "v"]);
            for other in ["server.log", "stderr", "stdout"].into_iter().filter(|f| !targets.contains(f)) {
                assert!(!s.read(other).contains(ready), "{kind} --log-outputs={outputs} logged to {other} too:\n{}", s.read(other));
            }
        }

        let mut s = Manual::spawn(kind, &["--logger=capnslog".into(), "--log-outputs=stderr".into()]);
        s.wait_for(&s.client.clone(), &["put", "k", "v"]);
        assert_eq!(s.read("stderr").lines().next(), Some("[WARNING] Deprecated '--logger=capnslog' flag is set; use '--logger=zap' flag instead"));
        drop(s);

        let refused = [
            ("--logger=bogus", "unknown logger option \"bogus\""),
            ("--log-outputs=default,stderr", "multi logoutput for \"default\" is not supported yet"),
            ("--log-outputs=no-such-dir/x.log", "open sink \"no-such-dir/x.log\": open no-such-dir/x.log: "),
        ];
        for (flag, problem) in refused {
            let mut s = Manual::spawn(kind, &["--logger=zap".into(), flag.into()]);
            assert_eq!(s.exit_code(), 1, "{flag}: {}", s.read("stderr"));
            let want = format!("error verifying flags, {problem}");
            assert!(s.read("stderr").contains(&want), "{flag}: want {want:?} in {}", s.read("stderr"));
        }
    });
}

/// A `unix://HOST:PORT` client URL is a socket file named `HOST:PORT` in
/// the working directory that etcdctl reaches with the same URL, removed
/// when the server stops on SIGTERM; a path in the URL is refused.
#[test]
fn unix_socket_client_urls_serve_etcdctl() {
    crate::common::for_each_kind(|kind| {
        let port = free_port();
        let unix = format!("unix://localhost:{port}");
        let http = format!("http://127.0.0.1:{}", free_port());
        let mut s = Manual::spawn(kind, &[format!("--listen-client-urls={unix},{http}"), format!("--advertise-client-urls={http}")]);
        s.wait_for(&unix, &["put", "over-unix", "v1"]);
        let got = s.wait_for(&http, &["get", "over-unix", "--print-value-only"]);
        assert_eq!(got.trim(), "v1");
        let socket = s.path(&format!("localhost:{port}"));
        let meta = std::fs::symlink_metadata(&socket).expect("the socket file is in the working directory");
        assert!(std::os::unix::fs::FileTypeExt::is_socket(&meta.file_type()));
        // etcd exits by the signal once it has cleaned up, raftstore with 0.
        s.terminate();
        assert!(!socket.exists(), "{kind} left its socket file behind");
        drop(s);

        let mut s = Manual::spawn(kind, &["--listen-client-urls=unix:///tmp/raftstore-flags.sock".into()]);
        assert_ne!(s.exit_code(), 0);
        let stderr = s.read("stderr");
        assert!(stderr.contains("URL address does not have the form \"host:port\": unix:///tmp/raftstore-flags.sock"), "{stderr}");
    });
}

/// With `--config-file` the file alone configures the server, with the
/// keys of etcd's sample `etcd.conf.yml`: name, data and WAL dirs, URLs,
/// metrics URLs, the txn op limit, logger and log outputs, and TLS
/// (`client-transport-security: {auto-tls: true}`). The command line's
/// other flags and the `ETCD_*` variables, which say otherwise here, are
/// ignored, as the log says; so is a key that names no setting. A file
/// that is not YAML is refused as etcd refuses it.
#[test]
fn config_file_is_obeyed_and_flags_ignored() {
    crate::common::for_each_kind(|kind| {
        let dir = tempfile::Builder::new().prefix(&format!("flags-{kind}-")).tempdir().expect("tempdir");
        let port = || format!("127.0.0.1:{}", free_port());
        let (https, http, peer, metrics) = (format!("https://{}", port()), format!("http://{}", port()), format!("http://{}", port()), port());
        let (data, wal) = (dir.path().join("from-file"), dir.path().join("wal-from-file"));
        let yaml = format!(
            "# keys as in etcd's etcd.conf.yml.sample
name: from-file
data-dir: {data}
wal-dir: {wal}
listen-client-urls: {https},{http}
advertise-client-urls: {https}
listen-peer-urls: {peer}
initial-advertise-peer-urls: {peer}
initial-cluster: from-file={peer}
initial-cluster-state: 'new'
listen-metrics-urls: http://{metrics}
max-txn-ops: 2
logger: zap
log-outputs: [file.log]
no-such-key: 3
client-transport-security:
  auto-tls: true
",
            data = data.display(),
            wal = wal.display(),
        );
        std::fs::write(dir.path().join("etcd.yaml"), yaml).expect("write config");
        // The usual flags name another member, data dir and client URL;
        // these and the variables contradict the file's other settings.
        let flags = ["--config-file=etcd.yaml".to_string(), "--max-txn-ops=100".into(), "--log-outputs=stderr".into(), format!("--listen-metrics-urls=http://{}", port())];
        // ETCD_PEER_AUTO_TLS names a setting the file leaves out: read, it
        // would make `fixtures/peer` in the data dir.
        let env =
            [("ETCD_NAME", "from-env".to_string()), ("ETCD_MAX_TXN_OPS", "100".into()), ("ETCD_WAL_DIR", dir.path().join("wal-from-env").display().to_string()), ("ETCD_PEER_AUTO_TLS", "true".into())];
        let mut s = Manual::spawn_in(kind, dir, &flags, &env);
        let list = s.wait_for(&https, &["--insecure-transport=false", "--insecure-skip-tls-verify", "member", "list"]);
        assert!(list.contains(", from-file, ") && list.contains(&https), "{list}");
        assert!(data.join("fixtures/client/cert.pem").is_file(), "auto TLS from the file");
        assert!(std::fs::read_dir(&wal).map(|d| d.count()).unwrap_or(0) > 0, "no WAL in the file's wal-dir");
        for ignored in ["data", "wal-from-env", "from-file/fixtures/peer"] {
            assert!(!s.path(ignored).exists(), "{ignored}: a flag or variable was obeyed");
        }
        let (code, _, _) = s.etcdctl(&s.client.clone(), &["get", "k"]);
        assert_ne!(code, 0, "--listen-client-urls on the command line was ignored");
        let scraped = http_get(&metrics, "/metrics");
        assert!(scraped.contains("\netcd_server_has_leader 1"), "metrics URL from the file: {scraped}");
        block_on(async {
            let mut c = crate::common::connect(&http).await;
            let puts = |n: usize| etcd_client::Txn::new().and_then((0..n).map(|i| etcd_client::TxnOp::put(format!("k{i}"), "v", None)).collect::<Vec<_>>());
            c.txn(puts(2)).await.expect("two ops are allowed");
            let err = c.txn(puts(3)).await.expect_err("the file's max-txn-ops is 2");
            assert_eq!(crate::common::status_of(&err).1, "etcdserver: too many operations in txn request");
        });
        let ignoring = "other configuration command line flags and environment variables will be ignored if provided";
        s.wait_text("file.log", ignoring);
        assert!(!s.read("stderr").contains(ignoring), "the log went to stderr too:\n{}", s.read("stderr"));
        drop(s);

        let dir = tempfile::Builder::new().prefix(&format!("flags-{kind}-")).tempdir().expect("tempdir");
        std::fs::write(dir.path().join("etcd.yaml"), "name: [from-file\n").expect("write config");
        let mut s = Manual::spawn_in(kind, dir, &["--config-file=etcd.yaml".into()], &[]);
        assert_eq!(s.exit_code(), 1, "{}", s.read("stderr"));
        let want = "error verifying flags, error converting YAML to JSON: ";
        assert!(s.read("stderr").contains(want), "want {want:?} in {}", s.read("stderr"));
        assert!(!s.path("data").exists(), "a refused start leaves no data dir");
    });
}

/// `--auto-tls` serves https client URLs with a self-signed certificate
/// kept in `<data-dir>/fixtures/client`: etcdctl connects when told not to
/// verify it, and fails to verify it otherwise. (etcdctl 3.4 applies
/// `--insecure-skip-tls-verify` only with `--insecure-transport=false`,
/// against etcd too.)
#[test]
fn auto_tls_serves_a_self_signed_certificate() {
    crate::common::for_each_kind(|kind| {
        let https = format!("https://127.0.0.1:{}", free_port());
        let mut s = Manual::spawn(kind, &[format!("--listen-client-urls={https}"), format!("--advertise-client-urls={https}"), "--auto-tls".into()]);
        s.wait_for(&https, &["--insecure-transport=false", "--insecure-skip-tls-verify", "put", "k", "v"]);
        for f in ["cert.pem", "key.pem"] {
            assert!(s.path("data/fixtures/client").join(f).is_file(), "{kind}: no {f}");
        }
        let (code, _, stderr) = s.etcdctl(&https, &["--insecure-transport=false", "get", "k"]);
        assert_ne!(code, 0, "a self-signed certificate does not verify: {stderr}");
    });
}

/// What `openssl s_client` says of the TLS server at `addr`
/// (`HOST:PORT`), offering HTTP/2 as a member does: the certificate and
/// whether it verifies.
fn s_client(addr: &str) -> String {
    let out = Command::new("openssl").args(["s_client", "-connect", addr, "-alpn", "h2"]).stdin(std::process::Stdio::null()).output().expect("run openssl s_client");
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// OpenSSL's verdict on a certificate that signed itself.
const SELF_SIGNED: &str = "Verify return code: 18 (self-signed certificate)";

/// `--peer-auto-tls` serves an https peer URL with a self-signed
/// certificate kept in `<data-dir>/fixtures/peer`.
#[test]
fn peer_auto_tls_serves_a_self_signed_certificate() {
    crate::common::for_each_kind(|kind| {
        let addr = format!("127.0.0.1:{}", free_port());
        let peer = format!("https://{addr}");
        let flags = [format!("--listen-peer-urls={peer}"), format!("--initial-advertise-peer-urls={peer}"), format!("--initial-cluster=default={peer}"), "--peer-auto-tls".into()];
        let mut s = Manual::spawn(kind, &flags);
        s.wait_for(&s.client.clone(), &["put", "k", "v"]);
        let shown = s_client(&addr);
        assert!(shown.contains(SELF_SIGNED), "{kind}: {shown}");
        for f in ["cert.pem", "key.pem"] {
            assert!(s.path("data/fixtures/peer").join(f).is_file(), "{kind}: no {f}");
        }
    });
}

/// Three members with `--peer-auto-tls` (and `--auto-tls`) on https peer
/// URLs make their own certificates, accept each other's without a CA,
/// elect a leader and replicate.
#[test]
fn peer_auto_tls_members_elect_a_leader() {
    let dir = tempfile::tempdir().expect("tempdir");
    let procs = crate::common::cluster::start_new_with(dir.path(), 3, &["--auto-tls", "--peer-auto-tls"], "https");
    let tls = ["--insecure-transport=false", "--insecure-skip-tls-verify", "--dial-timeout=2s", "--command-timeout=4s"];
    let run = |ep: &str, args: &[&str]| crate::common::etcdctl(ep, &tls.iter().chain(args).copied().collect::<Vec<_>>());
    let start = std::time::Instant::now();
    while run(&procs[1].client_url(), &["put", "peer-tls", "v1"]).code != 0 {
        assert!(start.elapsed() < Duration::from_secs(60), "no write over auto-TLS peers:\n{}", procs[1].log());
        std::thread::sleep(Duration::from_millis(300));
    }
    for p in &procs {
        let got = run(&p.client_url(), &["get", "peer-tls", "--print-value-only"]);
        assert_eq!(got.ok().trim(), "v1", "{}", p.name);
        assert!(p.dir.join(&p.name).join("fixtures/peer/cert.pem").is_file(), "{}: no peer certificate", p.name);
        let shown = s_client(&format!("127.0.0.1:{}", p.peer_port));
        assert!(shown.contains(SELF_SIGNED), "{}: {shown}", p.name);
    }
    // Each member publishes its client URL once it has started.
    let start = std::time::Instant::now();
    loop {
        let list = run(&procs[0].client_url(), &["member", "list"]);
        if list.ok().matches("https://127.0.0.1:").count() == 6 {
            break;
        }
        assert!(start.elapsed() < Duration::from_secs(20), "https peer and client URLs: {list}");
        std::thread::sleep(Duration::from_millis(200));
    }
}

/// `--wal-dir` is created and holds the write-ahead log (etcd's WAL
/// segments; raftstore's RocksDB WAL, which then is not in the data dir).
#[test]
fn wal_dir_holds_the_write_ahead_log() {
    crate::common::for_each_kind(|kind| {
        let wal = tempfile::tempdir().expect("tempdir");
        let wal_dir = wal.path().join("wal");
        let s = Server::start_with(kind, Options { args: vec![format!("--wal-dir={}", wal_dir.display())], ..Default::default() });
        block_on(async { s.client().await.put("k", "v", None).await.expect("put") });
        let files: Vec<String> = std::fs::read_dir(&wal_dir).expect("the WAL dir exists").flatten().map(|e| e.file_name().to_string_lossy().into_owned()).collect();
        assert!(!files.is_empty(), "{kind}: empty WAL dir");
        if kind == Kind::Raftstore {
            assert!(files.iter().any(|f| f.ends_with(".log")), "no RocksDB WAL in {files:?}");
            let db = s.scratch().join("data").join("db");
            let in_db: Vec<_> = std::fs::read_dir(&db).expect("db").flatten().filter(|e| e.file_name().to_string_lossy().ends_with(".log")).collect();
            assert!(in_db.is_empty(), "WAL files in {}: {in_db:?}", db.display());
        }
        drop(s);
    });
}

/// A data dir keeps its writes when `--wal-dir` is added, changed or
/// dropped between starts that end in kill -9 (the writes are then only in
/// the old WAL): the store is first opened with the old WAL, flushed, and
/// then moved over. A WAL dir that has gone missing is refused.
#[test]
fn moving_the_wal_dir_keeps_every_write() {
    let keep = tempfile::tempdir().expect("tempdir");
    let data = keep.path().join("data");
    let (wal_a, wal_b) = (keep.path().join("wal-a"), keep.path().join("wal-b"));
    let starts: [(&str, Option<&std::path::Path>); 4] = [("none", None), ("a", Some(&wal_a)), ("b", Some(&wal_b)), ("none again", None)];
    for (i, (name, wal)) in starts.iter().enumerate() {
        let args = wal.map(|w| vec![format!("--wal-dir={}", w.display())]).unwrap_or_default();
        let s = Server::start_with(Kind::Raftstore, Options { data_dir: Some(data.clone()), args, ..Default::default() });
        block_on(async {
            let mut c = s.client().await;
            for j in 0..i {
                let got = c.get(format!("k{j}"), None).await.expect("get");
                assert_eq!(got.kvs().first().map(|kv| kv.value().to_vec()), Some(b"v".to_vec()), "start {name}: k{j} lost");
            }
            c.put(format!("k{i}"), "v", None).await.expect("put");
        });
        drop(s);
    }
    // The last start kept its WAL in the data dir; one with wal-b, then
    // wal-b removed, must not start without it.
    drop(Server::start_with(Kind::Raftstore, Options { data_dir: Some(data.clone()), args: vec![format!("--wal-dir={}", wal_b.display())], ..Default::default() }));
    let wal_b = wal_b.canonicalize().expect("wal-b exists");
    std::fs::remove_dir_all(&wal_b).expect("remove wal-b");
    let out = output_of_refused(Command::new(raftstore_bin()).arg("--data-dir").arg(&data).args(["--listen-client-urls", "http://127.0.0.1:0", "--listen-peer-urls", "http://127.0.0.1:0"]));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success(), "{stderr}");
    assert!(stderr.contains(&format!("was kept in {} (--wal-dir), which is gone", wal_b.display())), "{stderr}");
}
