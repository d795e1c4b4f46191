//! Connection protection on the client and peer ports
//! (`raftstore/src/serving.rs`): connections that never finish a TLS
//! handshake, never send a request or sit idle are closed, idle HTTP/2
//! ones with a GOAWAY; a connection cap refuses the connections over it
//! with a log line; an open watch keeps its connection. The timeouts are
//! shortened with the binary's hidden flags.

use std::io::{ErrorKind, Read, Write};
use std::net::TcpStream;
use std::time::{Duration, Instant};

use crate::common::cluster::{put_until_ok, start_new, start_new_with, Proc};
use crate::common::pki::write_pki;
use crate::common::{block_on, connect, etcdctl, Background, Kind, Options, Server};

/// The HTTP/2 client connection preface.
const PREFACE: &[u8] = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n";
/// HTTP/2 frame types.
const DATA: u8 = 0x0;
const HEADERS: u8 = 0x1;
const RST_STREAM: u8 = 0x3;
const SETTINGS: u8 = 0x4;
const PING: u8 = 0x6;
const GOAWAY: u8 = 0x7;
/// How long a test waits for the server to close a connection whose
/// timeout (1 s here) has passed: a bound for a hang, not a measurement.
const CLOSE_WITHIN: Duration = Duration::from_secs(30);

/// `host:port` of a URL.
fn addr_of(url: &str) -> String {
    url.rsplit("://").next().unwrap_or(url).trim_end_matches('/').to_owned()
}

/// A TCP connection to `addr` that has sent `first` (maybe nothing).
fn raw(addr: &str, first: &[u8]) -> TcpStream {
    let mut s = TcpStream::connect(addr).unwrap_or_else(|e| panic!("connect {addr}: {e}"));
    s.write_all(first).expect("write");
    s
}

/// Whether the server closes `s` (EOF or reset) within `limit`; whatever
/// it sends before is skipped.
fn closed_by_server(s: &mut TcpStream, limit: Duration) -> bool {
    let deadline = Instant::now() + limit;
    let mut buf = [0u8; 4096];
    loop {
        let left = deadline.saturating_duration_since(Instant::now());
        if left.is_zero() {
            return false;
        }
        s.set_read_timeout(Some(left)).expect("read timeout");
        match s.read(&mut buf) {
            Ok(0) => return true,
            Ok(_) => {}
            Err(e) if matches!(e.kind(), ErrorKind::WouldBlock | ErrorKind::TimedOut) => return false,
            Err(_) => return true,
        }
    }
}

/// Whether `s` is still open: nothing to read and no EOF right now.
fn still_open(s: &mut TcpStream) -> bool {
    s.set_nonblocking(true).expect("nonblocking");
    let mut buf = [0u8; 4096];
    let open = loop {
        match s.read(&mut buf) {
            Ok(0) => break false,
            Ok(_) => {}
            Err(e) if e.kind() == ErrorKind::WouldBlock => break true,
            Err(_) => break false,
        }
    };
    s.set_nonblocking(false).expect("blocking");
    open
}

/// What [`H2::next`] read.
#[derive(Debug)]
enum Next {
    Frame { kind: u8, stream: u32 },
    Closed,
    Quiet,
}

/// A hand-driven HTTP/2 client connection: frames as the server sends
/// them, with SETTINGS and PING answered, so that what the server does on
/// its own (GOAWAY) is visible.
struct H2 {
    s: TcpStream,
    buf: Vec<u8>,
}

impl H2 {
    /// Connects and sends the preface and an empty SETTINGS frame.
    fn connect(addr: &str) -> H2 {
        let mut h = H2 { s: raw(addr, PREFACE), buf: Vec::new() };
        h.send(SETTINGS, 0, 0, &[]);
        h
    }

    fn send(&mut self, kind: u8, flags: u8, stream: u32, payload: &[u8]) {
        let len = payload.len() as u32;
        let mut f = vec![(len >> 16) as u8, (len >> 8) as u8, len as u8, kind, flags];
        f.extend_from_slice(&stream.to_be_bytes());
        f.extend_from_slice(payload);
        self.s.write_all(&f).expect("write frame");
    }

    /// A request whose header block is `block` (HPACK, no Huffman) on
    /// `stream`; `end` ends the request stream.
    fn request(&mut self, stream: u32, block: &[u8], end: bool) {
        self.send(HEADERS, if end { 0x5 } else { 0x4 }, stream, block);
    }

    /// The next frame the server sends by `deadline`, answering its
    /// SETTINGS and PINGs on the way.
    fn next(&mut self, deadline: Instant) -> Next {
        loop {
            if self.buf.len() >= 9 {
                let len = (usize::from(self.buf[0]) << 16) | (usize::from(self.buf[1]) << 8) | usize::from(self.buf[2]);
                if self.buf.len() >= 9 + len {
                    let (kind, flags) = (self.buf[3], self.buf[4]);
                    let stream = u32::from_be_bytes([self.buf[5], self.buf[6], self.buf[7], self.buf[8]]) & 0x7fff_ffff;
                    let payload: Vec<u8> = self.buf[9..9 + len].to_vec();
                    self.buf.drain(..9 + len);
                    if kind == SETTINGS && flags & 1 == 0 {
                        self.send(SETTINGS, 1, 0, &[]);
                    }
                    if kind == PING && flags & 1 == 0 {
                        self.send(PING, 1, 0, &payload);
                    }
                    return Next::Frame { kind, stream };
                }
            }
            let left = deadline.saturating_duration_since(Instant::now());
            if left.is_zero() {
                return Next::Quiet;
            }
            self.s.set_read_timeout(Some(left)).expect("read timeout");
            let mut chunk = [0u8; 16 * 1024];
            match self.s.read(&mut chunk) {
                Ok(0) => return Next::Closed,
                Ok(n) => self.buf.extend_from_slice(&chunk[..n]),
                Err(e) if matches!(e.kind(), ErrorKind::WouldBlock | ErrorKind::TimedOut) => return Next::Quiet,
                Err(_) => return Next::Closed,
            }
        }
    }

    /// The frame types (and streams) the server sends by `deadline`, and
    /// whether it closed the connection by then.
    fn read_until(&mut self, deadline: Instant) -> (Vec<(u8, u32)>, bool) {
        let mut frames = Vec::new();
        loop {
            match self.next(deadline) {
                Next::Frame { kind, stream } => frames.push((kind, stream)),
                Next::Closed => return (frames, true),
                Next::Quiet => return (frames, false),
            }
        }
    }
}

/// An HPACK header block (static-table names, no Huffman coding, never
/// indexed) for a request: `:method`, `:scheme: http`, `:path`, and for
/// gRPC `content-type: application/grpc` and `te: trailers`.
fn header_block(method_post: bool, path: &str, grpc: bool) -> Vec<u8> {
    let mut b = vec![if method_post { 0x83 } else { 0x82 }, 0x86, 0x04, path.len() as u8];
    b.extend_from_slice(path.as_bytes());
    b.extend_from_slice(&[0x01, 0x01, b'x']);
    if grpc {
        b.extend_from_slice(&[0x0f, 0x10, 16]);
        b.extend_from_slice(b"application/grpc");
        b.extend_from_slice(&[0x00, 2]);
        b.extend_from_slice(b"te");
        b.push(8);
        b.extend_from_slice(b"trailers");
    }
    b
}

/// Connections that never send a request (nothing at all, an HTTP/1 head
/// that never ends, or only the HTTP/2 preface) are closed on both ports
/// after the first-request timeout, the HTTP/2 ones with a GOAWAY, while
/// etcdctl keeps working.
#[test]
fn connections_without_a_request_are_closed() {
    let server = Server::start_with(Kind::Raftstore, Options { args: vec!["--first-request-timeout=1s".into()], ..Default::default() });
    let (client, peer) = (addr_of(server.endpoint()), addr_of(server.peer_url()));
    let preface: Vec<u8> = [PREFACE, &[0, 0, 0, SETTINGS, 0, 0, 0, 0, 0]].concat();
    let cases: [(&str, &str, &[u8], usize); 5] = [
        ("client port, nothing sent", &client, b"", 200),
        ("client port, an HTTP/1 head that never ends", &client, b"GET /health HTTP/1.1\r\nHost: x\r\n", 50),
        ("client port, HTTP/2 preface only", &client, &preface, 50),
        ("peer port, nothing sent", &peer, b"", 100),
        ("peer port, HTTP/2 preface only", &peer, &preface, 50),
    ];
    let mut open: Vec<(&str, TcpStream)> = Vec::new();
    for (what, addr, first, n) in &cases {
        open.extend((0..*n).map(|_| (*what, raw(addr, first))));
    }
    for i in 0..3 {
        etcdctl(server.endpoint(), &["put", "k", &i.to_string()]).ok();
        assert_eq!(etcdctl(server.endpoint(), &["get", "k", "--print-value-only"]).ok().trim(), i.to_string());
    }
    for (what, s) in &mut open {
        assert!(closed_by_server(s, CLOSE_WITHIN), "{what}: still open after {CLOSE_WITHIN:?}");
    }
    // The preface-only HTTP/2 connections are told to go away first.
    for addr in [&client, &peer] {
        let mut h = H2::connect(addr);
        let (frames, closed) = h.read_until(Instant::now() + CLOSE_WITHIN);
        assert!(closed, "{addr}: still open; frames {frames:?}");
        assert!(frames.iter().any(|(k, _)| *k == GOAWAY), "{addr}: closed without a GOAWAY; frames {frames:?}");
    }
    etcdctl(server.endpoint(), &["get", "k"]).ok();
}

/// On https ports, connections that never finish a TLS handshake (nothing
/// sent, or a ClientHello that never ends) are closed after the handshake
/// timeout on both ports, while etcdctl with client certificates keeps
/// working.
#[test]
fn connections_without_a_tls_handshake_are_closed() {
    let dir = tempfile::tempdir().expect("tempdir");
    write_pki(dir.path());
    let f = |n: &str| dir.path().join(n).display().to_string();
    let (ca, member, key, client, client_key) = (f("ca.pem"), f("member.pem"), f("member.key"), f("client.pem"), f("client.key"));
    #[rustfmt::skip]
    let flags = [
        "--cert-file", &member, "--key-file", &key, "--trusted-ca-file", &ca, "--client-cert-auth",
        "--peer-cert-file", &member, "--peer-key-file", &key, "--peer-trusted-ca-file", &ca, "--peer-client-cert-auth",
        "--tls-handshake-timeout=1s",
    ];
    let procs = start_new_with(dir.path(), 1, &flags, "https");
    let tls = ["--cacert", ca.as_str(), "--cert", client.as_str(), "--key", client_key.as_str(), "--dial-timeout=2s", "--command-timeout=4s"];
    let run = |args: &[&str]| etcdctl(&procs[0].client_url(), &tls.iter().chain(args).copied().collect::<Vec<_>>());
    let start = Instant::now();
    while run(&["put", "k", "0"]).code != 0 {
        assert!(start.elapsed() < Duration::from_secs(60), "no write over https:\n{}", procs[0].log());
        std::thread::sleep(Duration::from_millis(200));
    }
    // A TLS record header announcing a ClientHello whose body never comes.
    let hello_start: &[u8] = &[0x16, 0x03, 0x01, 0x02, 0x00, 0x01];
    let (client_addr, peer_addr) = (procs[0].ep(), format!("127.0.0.1:{}", procs[0].peer_port));
    let cases: [(&str, &str, &[u8], usize); 4] = [
        ("client port, nothing sent", &client_addr, b"", 150),
        ("client port, an unfinished ClientHello", &client_addr, hello_start, 50),
        ("peer port, nothing sent", &peer_addr, b"", 50),
        ("peer port, an unfinished ClientHello", &peer_addr, hello_start, 50),
    ];
    let mut open: Vec<(&str, TcpStream)> = Vec::new();
    for (what, addr, first, n) in &cases {
        open.extend((0..*n).map(|_| (*what, raw(addr, first))));
    }
    for i in 1..4 {
        run(&["put", "k", &i.to_string()]).ok();
    }
    for (what, s) in &mut open {
        assert!(closed_by_server(s, CLOSE_WITHIN), "{what}: still open after {CLOSE_WITHIN:?}");
    }
    assert_eq!(run(&["get", "k", "--print-value-only"]).ok().trim(), "3");
}

/// With `--max-connections 20`, the 21st connection is closed at once and
/// the log says why, the 20 stay open, and the port serves again once
/// they close.
#[test]
fn the_connection_cap_refuses_connections_over_it() {
    let dir = tempfile::tempdir().expect("tempdir");
    let procs = start_new(dir.path(), 1, &["--max-connections", "20"]);
    let p: &Proc = &procs[0];
    // Nothing else connects to a lone member: these are its first
    // connections, admitted in the order they were made.
    let start = Instant::now();
    let first = loop {
        match TcpStream::connect(p.ep()) {
            Ok(s) => break s,
            Err(_) if start.elapsed() < Duration::from_secs(60) => std::thread::sleep(Duration::from_millis(50)),
            Err(e) => panic!("{} never listened: {e}\n{}", p.ep(), p.log()),
        }
    };
    let mut held: Vec<TcpStream> = std::iter::once(first).chain((1..20).map(|_| raw(&p.ep(), b""))).collect();
    let mut over = raw(&p.ep(), b"");
    assert!(closed_by_server(&mut over, Duration::from_secs(10)), "the 21st connection was not closed");
    let log = p.log();
    assert!(log.contains("connection limit reached: 20 connections are open on the client port"), "no warning in the log:\n{log}");
    for (i, s) in held.iter_mut().enumerate() {
        assert!(still_open(s), "connection {i} under the cap was closed");
    }
    let refused = etcdctl(&p.client_url(), &["--dial-timeout=1s", "--command-timeout=2s", "get", "k"]);
    refused.err();

    drop(held);
    block_on(put_until_ok(&p.ep(), "k", "v", Duration::from_secs(20)));
}

/// An idle connection is closed after the idle timeout: HTTP/2 with a
/// GOAWAY after its last stream ended, HTTP/1 after its last response,
/// and a client reconnects cleanly. A connection with a stream open (a
/// watch) is not idle, however long the stream lasts.
#[test]
fn idle_connections_are_closed_and_open_streams_are_not() {
    let idle = Duration::from_secs(1);
    let server = Server::start_with(Kind::Raftstore, Options { args: vec!["--first-request-timeout=1s".into(), "--idle-timeout=1s".into()], ..Default::default() });
    let ep = server.endpoint().to_owned();
    let addr = addr_of(&ep);

    // etcdctl watch: still running, and still served, after many idle
    // timeouts.
    // From revision 1, so the first put is seen however late the watch
    // starts.
    let mut watch = Background::spawn(&ep, &["watch", "--rev=1", "w"]);
    etcdctl(&ep, &["put", "w", "1"]).ok();
    assert_eq!(watch.lines(3, Duration::from_secs(10)), ["PUT", "w", "1"]);

    // A raw gRPC Watch stream: no GOAWAY while it is open; one soon after
    // it ends. WatchRequest { create_request { key: "w" } }.
    let mut h = H2::connect(&addr);
    h.request(1, &header_block(true, "/etcdserverpb.Watch/Watch", true), false);
    let create: &[u8] = &[0x0a, 0x03, 0x0a, 0x01, b'w'];
    h.send(DATA, 0, 1, &[&[0, 0, 0, 0, create.len() as u8][..], create].concat());
    let window = Instant::now() + idle * 4;
    std::thread::sleep(idle * 2);
    etcdctl(&ep, &["put", "w", "2"]).ok();
    let (frames, closed) = h.read_until(window);
    assert!(!closed && !frames.iter().any(|(k, _)| *k == GOAWAY), "a connection with an open watch was closed; frames {frames:?}");
    let data = frames.iter().filter(|(k, s)| *k == DATA && *s == 1).count();
    assert!(data >= 2, "the watch answered its creation and the put: frames {frames:?}");
    h.send(RST_STREAM, 0, 1, &8u32.to_be_bytes());
    let (frames, closed) = h.read_until(Instant::now() + CLOSE_WITHIN);
    assert!(closed && frames.iter().any(|(k, _)| *k == GOAWAY), "idle after its watch ended, the connection got no GOAWAY or stayed open; frames {frames:?}");

    // HTTP/2 after a plain request, and HTTP/1 keep-alive.
    let mut h = H2::connect(&addr);
    h.request(1, &header_block(false, "/health", false), true);
    let (frames, closed) = h.read_until(Instant::now() + CLOSE_WITHIN);
    assert!(frames.iter().any(|(k, s)| *k == HEADERS && *s == 1), "no answer to GET /health; frames {frames:?}");
    assert!(closed && frames.iter().any(|(k, _)| *k == GOAWAY), "idle HTTP/2: frames {frames:?}, closed {closed}");
    let mut h1 = raw(&addr, b"GET /health HTTP/1.1\r\nHost: x\r\n\r\n");
    assert!(closed_by_server(&mut h1, CLOSE_WITHIN), "idle HTTP/1 connection still open");

    // A client whose connection was closed for idleness reconnects.
    block_on(async {
        let mut c = connect(&ep).await;
        c.get("w", None).await.expect("first get");
        tokio::time::sleep(idle * 3).await;
        let got = c.get("w", None).await.expect("a get after the connection went idle and was closed");
        assert_eq!(got.kvs().first().map(|kv| kv.value()), Some(&b"2"[..]));
    });

    etcdctl(&ep, &["put", "w", "3"]).ok();
    assert_eq!(watch.lines(6, Duration::from_secs(10)), ["PUT", "w", "2", "PUT", "w", "3"]);
    assert!(watch.is_running(), "etcdctl watch exited");
}
