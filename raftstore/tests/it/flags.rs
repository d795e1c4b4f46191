//! The `raftstore` binary's flags and the plain-HTTP side of the client port.

use std::io::{Read, Write};
use std::net::TcpStream;
use std::process::Command;
use std::time::Duration;

use crate::common::server::{free_port, raftstore_bin};
use crate::common::{block_on, Kind, Options, Server};

/// Bad flags are refused with a message naming the flag, exit non-zero, and
/// leave no data dir behind (etcd checks flags before creating anything).
#[test]
fn bad_flags_are_refused_before_touching_the_data_dir() {
    let cases: Vec<(&str, Vec<&str>, &str)> = vec![
        ("https without TLS", vec!["--listen-client-urls", "https://127.0.0.1:0"], "an https URL needs --cert-file and --key-file"),
        ("https peer without TLS", vec!["--listen-peer-urls", "https://127.0.0.1:0"], "an https URL needs --peer-cert-file and --peer-key-file"),
        ("cert without key", vec!["--cert-file", "/nonexistent.pem"], "--cert-file and --key-file must be given together"),
        ("unreadable cert", vec!["--cert-file", "/nonexistent.pem", "--key-file", "/nonexistent.key"], "--cert-file: cannot read /nonexistent.pem"),
        ("unknown scheme", vec!["--listen-client-urls", "foo://127.0.0.1:0"], "URL scheme must be http or https"),
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
        let out = Command::new(raftstore_bin()).arg("--data-dir").arg(&data).args(["--listen-peer-urls", "http://127.0.0.1:0"]).args(&args).output().expect("run raftstore");
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(!out.status.success(), "{name}: should fail: {stderr}");
        assert!(stderr.contains(want), "{name}: want {want:?} in {stderr:?}");
        assert!(!data.exists(), "{name}: left a data dir behind");
    }
}

/// Runs `raftstore` on `data` with client URL `client_url` (peer port 0),
/// asserts that it refuses to start, and returns its stderr.
fn refused_start(data: &std::path::Path, client_url: &str) -> String {
    let out = Command::new(raftstore_bin()).arg("--data-dir").arg(data).args(["--listen-client-urls", client_url, "--listen-peer-urls", "http://127.0.0.1:0"]).output().expect("run raftstore");
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
