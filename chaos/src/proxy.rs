//! A fault-injecting TCP proxy for peer traffic.
//!
//! Member `i` listens on its real peer port; the cluster is told to use
//! the proxy's address for `i` instead (the advertised peer URL), so every
//! connection *to* `i` passes here. To apply per-link faults the proxy must
//! know which member opened a connection: it looks the client socket up in
//! `/proc/net/tcp` and finds the member process holding that socket inode
//! in `/proc/<pid>/fd` (Linux only). A link is an unordered member pair;
//! a connection belongs to the link of its two ends.
//!
//! Faults per link ([`Faults`]):
//! - **pass**: bytes are copied as they come;
//! - **cut** (drop / partition): open connections are closed and new ones
//!   are accepted and then black-holed (read and discarded, nothing
//!   forwarded) until the link heals, when they are closed so the member
//!   reconnects;
//! - **delay**: every chunk is forwarded after the given delay, in order;
//! - **stall** (one direction): the connections member `a` has open to `b`
//!   when the fault is set stop carrying bytes either way but stay open, as
//!   a half-open connection to a peer that vanished does; connections `a`
//!   opens later pass.
//! - **hold** (one direction of one member's connections): the bytes that
//!   connections opened by `a` to `b` carry toward `b` (requests) or toward
//!   `a` (answers) are kept back, in order, and delivered when the hold is
//!   lifted. This stages the moments a pause would create by chance: a
//!   member that has sent a request but not yet read the answer.
//!
//! While a member is down ([`PeerProxy::set_listening`] false, set by the
//! cluster when it kills the member) its proxy address does not listen, so
//! peers get "connection refused" as they would from the dead member
//! itself. A proxy that accepted and then closed at once would turn every
//! attempt into an accepted-then-reset connection, which a member must
//! treat as a request that may have been delivered.

use std::collections::{BTreeMap, BTreeSet};
use std::net::SocketAddr;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

use parking_lot::Mutex;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::{mpsc, watch};
use tokio::task::JoinHandle;
use tokio::time::Instant;

/// The fault state of every link. Links are unordered pairs `(a, b)` with
/// `a < b`, by member index.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Faults {
    /// Links that carry nothing.
    pub cut: BTreeSet<(usize, usize)>,
    /// Links whose traffic is delayed (each chunk, each direction).
    pub delay: BTreeMap<(usize, usize), Duration>,
    /// `(opener, dst)`: the connections `opener` has open to `dst` at the
    /// time this is set go silent (and stay so).
    pub stall: BTreeSet<(usize, usize)>,
    /// `(opener, dst)`: what `opener`'s connections to `dst` carry toward
    /// `dst` is held back until the entry is removed, then delivered.
    pub hold_requests: BTreeSet<(usize, usize)>,
    /// `(opener, dst)`: what `opener`'s connections to `dst` carry back
    /// toward `opener` is held back until the entry is removed.
    pub hold_answers: BTreeSet<(usize, usize)>,
}

/// One proxied connection: who opened it (if known), to whom, in a
/// cluster of `n`, and whether it was opened while its link was stalled.
#[derive(Clone, Copy, Debug)]
struct Link {
    src: Option<usize>,
    dst: usize,
    n: usize,
    stall_exempt: bool,
}

/// Which way a pump copies: from the connection's opener to its
/// destination, or back.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Way {
    Request,
    Answer,
}

/// Normalises a link to `(min, max)`.
pub fn link(a: usize, b: usize) -> (usize, usize) {
    (a.min(b), a.max(b))
}

impl Faults {
    /// Whether traffic between `src` (if known) and `dst` is cut. A
    /// connection whose opener is unknown is cut if `dst` is cut from every
    /// other member.
    fn is_cut(&self, src: Option<usize>, dst: usize, n: usize) -> bool {
        match src {
            Some(s) => self.cut.contains(&link(s, dst)),
            None => (0..n).filter(|&o| o != dst).all(|o| self.cut.contains(&link(o, dst))),
        }
    }

    fn is_stalled(&self, src: Option<usize>, dst: usize) -> bool {
        src.is_some_and(|s| self.stall.contains(&(s, dst)))
    }

    fn is_held(&self, src: Option<usize>, dst: usize, n: usize, way: Way) -> bool {
        let set = match way {
            Way::Request => &self.hold_requests,
            Way::Answer => &self.hold_answers,
        };
        match src {
            Some(s) => set.contains(&(s, dst)),
            // Unattributed: held if every member's connections to `dst`
            // are (as `is_cut` does).
            None => (0..n).filter(|&o| o != dst).all(|o| set.contains(&(o, dst))),
        }
    }

    fn delay_of(&self, src: Option<usize>, dst: usize) -> Duration {
        src.and_then(|s| self.delay.get(&link(s, dst)).copied()).unwrap_or_default()
    }

    /// Cuts every link between `group` and the other members of `0..n`.
    pub fn isolate(&mut self, group: &[usize], n: usize) {
        for &a in group {
            for b in (0..n).filter(|b| !group.contains(b)) {
                self.cut.insert(link(a, b));
            }
        }
    }
}

/// The proxy for all members of one cluster.
pub struct PeerProxy {
    faults: watch::Sender<Faults>,
    listening: Vec<watch::Sender<bool>>,
    pids: Arc<Mutex<Vec<Option<u32>>>>,
    addrs: Vec<SocketAddr>,
    tasks: Vec<JoinHandle<()>>,
    stats: Arc<Stats>,
}

/// Connection counters, to show that links are attributed.
#[derive(Debug, Default)]
pub struct Stats {
    /// Connections whose opening member was found.
    pub identified: AtomicU64,
    /// Connections whose opener was not found (faults then apply by
    /// destination only).
    pub unidentified: AtomicU64,
}

impl PeerProxy {
    /// Binds one listener per member on `127.0.0.1:0`, forwarding to
    /// `targets[i]` (the member's real peer address).
    ///
    /// # Errors
    /// If a listener cannot be bound.
    pub async fn start(targets: Vec<SocketAddr>) -> std::io::Result<Self> {
        let n = targets.len();
        let (faults, _) = watch::channel(Faults::default());
        let pids = Arc::new(Mutex::new(vec![None; n]));
        let mut addrs = Vec::new();
        let mut tasks = Vec::new();
        let mut listening = Vec::new();
        let stats = Arc::new(Stats::default());
        for (dst, target) in targets.into_iter().enumerate() {
            let l = TcpListener::bind("127.0.0.1:0").await?;
            addrs.push(l.local_addr()?);
            let (rx, pids) = (faults.subscribe(), pids.clone());
            let (up, up_rx) = watch::channel(true);
            listening.push(up);
            tasks.push(tokio::spawn(accept_loop(l, up_rx, dst, n, target, rx, pids, stats.clone())));
        }
        Ok(Self { faults, listening, pids, addrs, tasks, stats })
    }

    /// The proxy address that stands for member `i` (its advertised peer URL).
    pub fn addr(&self, i: usize) -> SocketAddr {
        self.addrs[i]
    }

    /// Records member `i`'s process ID (after every start), so connections
    /// it opens can be attributed to it.
    pub fn set_pid(&self, i: usize, pid: Option<u32>) {
        self.pids.lock()[i] = pid;
    }

    /// Opens (`true`, the initial state) or closes member `i`'s proxy
    /// address. Closed, connections to it are refused, as by a member that
    /// is not running; open connections are left to end on their own.
    pub fn set_listening(&self, i: usize, on: bool) {
        self.listening[i].send_replace(on);
    }

    /// The current faults.
    pub fn faults(&self) -> Faults {
        self.faults.borrow().clone()
    }

    /// Replaces the faults; open connections on newly cut links close.
    pub fn set(&self, f: Faults) {
        self.faults.send_replace(f);
    }

    /// `(identified, unidentified)` connection counts so far.
    pub fn stats(&self) -> (u64, u64) {
        (self.stats.identified.load(Ordering::Relaxed), self.stats.unidentified.load(Ordering::Relaxed))
    }

    /// Removes every fault.
    pub fn heal(&self) {
        self.set(Faults::default());
    }
}

impl Drop for PeerProxy {
    fn drop(&mut self) {
        for t in &self.tasks {
            t.abort();
        }
    }
}

#[allow(clippy::too_many_arguments)]
async fn accept_loop(l: TcpListener, mut up: watch::Receiver<bool>, dst: usize, n: usize, target: SocketAddr, rx: watch::Receiver<Faults>, pids: Arc<Mutex<Vec<Option<u32>>>>, stats: Arc<Stats>) {
    let Ok(addr) = l.local_addr() else { return };
    let mut l = Some(l);
    loop {
        if !*up.borrow_and_update() {
            drop(l.take());
            if up.changed().await.is_err() {
                return;
            }
            continue;
        }
        if l.is_none() {
            match TcpListener::bind(addr).await {
                Ok(listener) => l = Some(listener),
                Err(_) => {
                    // Someone else holds the port for the moment.
                    tokio::time::sleep(Duration::from_millis(20)).await;
                    continue;
                }
            }
        }
        let Some(listener) = l.as_ref() else { continue };
        let (conn, peer) = tokio::select! {
            r = listener.accept() => match r {
                Ok(a) => a,
                Err(_) => {
                    tokio::time::sleep(Duration::from_millis(10)).await;
                    continue;
                }
            },
            c = up.changed() => {
                if c.is_err() {
                    return;
                }
                continue;
            }
        };
        let (rx, pids, stats) = (rx.clone(), pids.clone(), stats.clone());
        let local = Some(addr);
        tokio::spawn(async move {
            let src = identify(peer, local, &pids).await;
            let counter = if src.is_some() { &stats.identified } else { &stats.unidentified };
            counter.fetch_add(1, Ordering::Relaxed);
            serve(conn, src, dst, n, target, rx).await;
        });
    }
}

/// Finds which member opened the connection from `peer`.
async fn identify(peer: SocketAddr, local: Option<SocketAddr>, pids: &Mutex<Vec<Option<u32>>>) -> Option<usize> {
    let local = local?;
    for _ in 0..5 {
        let pids = pids.lock().clone();
        let found = tokio::task::spawn_blocking(move || find_owner(peer, local, &pids)).await.ok().flatten();
        if found.is_some() {
            return found;
        }
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    None
}

fn find_owner(peer: SocketAddr, local: SocketAddr, pids: &[Option<u32>]) -> Option<usize> {
    let hex = |a: SocketAddr| match a {
        SocketAddr::V4(v4) => format!("{:08X}:{:04X}", u32::from_le_bytes(v4.ip().octets()), v4.port()),
        SocketAddr::V6(v6) => format!(":{:04X}", v6.port()),
    };
    let (want_local, want_remote) = (hex(peer), hex(local));
    let table = std::fs::read_to_string("/proc/net/tcp").ok()?;
    let inode = table.lines().skip(1).find_map(|line| {
        let f: Vec<&str> = line.split_whitespace().collect();
        (f.len() > 9 && f[1] == want_local && f[2] == want_remote).then(|| f[9].to_string())
    })?;
    let needle = format!("socket:[{inode}]");
    pids.iter().enumerate().find_map(|(i, pid)| {
        let pid = (*pid)?;
        let dir = std::fs::read_dir(format!("/proc/{pid}/fd")).ok()?;
        dir.flatten().any(|e| std::fs::read_link(e.path()).is_ok_and(|p| p.to_string_lossy() == needle)).then_some(i)
    })
}

async fn serve(mut conn: TcpStream, src: Option<usize>, dst: usize, n: usize, target: SocketAddr, mut rx: watch::Receiver<Faults>) {
    // Black-hole while cut, then close so the member reconnects.
    if rx.borrow_and_update().is_cut(src, dst, n) {
        let mut buf = vec![0u8; 16 * 1024];
        loop {
            tokio::select! {
                r = conn.read(&mut buf) => if matches!(r, Ok(0) | Err(_)) { return },
                c = rx.changed() => if c.is_err() || !rx.borrow_and_update().is_cut(src, dst, n) { return },
            }
        }
    }
    let Ok(up) = TcpStream::connect(target).await else {
        return;
    };
    let _ = conn.set_nodelay(true);
    let _ = up.set_nodelay(true);
    let (cr, cw) = conn.into_split();
    let (ur, uw) = up.into_split();
    let f = rx.clone();
    // Opened while its link was stalled: this connection passes.
    let stall_exempt = rx.borrow().is_stalled(src, dst);
    let ends = Link { src, dst, n, stall_exempt };
    let a = tokio::spawn(pump(cr, uw, ends, Way::Request, f.clone()));
    let b = tokio::spawn(pump(ur, cw, ends, Way::Answer, f));
    let (a_abort, b_abort) = (a.abort_handle(), b.abort_handle());
    tokio::select! {
        _ = a => {}
        _ = b => {}
        _ = async {
            loop {
                if rx.changed().await.is_err() || rx.borrow_and_update().is_cut(src, dst, n) {
                    return;
                }
            }
        } => {}
    }
    a_abort.abort();
    b_abort.abort();
}

/// Copies one direction, delaying chunks by the link's current delay,
/// keeping them back while the direction is held, and discarding them once
/// the connection is stalled (unless `stall_exempt`).
async fn pump(mut r: tokio::net::tcp::OwnedReadHalf, mut w: tokio::net::tcp::OwnedWriteHalf, ends: Link, way: Way, mut rx: watch::Receiver<Faults>) {
    let Link { src, dst, n, stall_exempt } = ends;
    let mut stalled = false;
    let (tx, mut q) = mpsc::channel::<(Instant, Vec<u8>)>(1024);
    let mut writer = AbortOnDrop(tokio::spawn(async move {
        while let Some((at, chunk)) = q.recv().await {
            tokio::time::sleep_until(at).await;
            if w.write_all(&chunk).await.is_err() {
                return;
            }
        }
        let _ = w.shutdown().await;
    }));
    let mut held: Vec<u8> = Vec::new();
    let mut buf = vec![0u8; 64 * 1024];
    loop {
        let chunk = tokio::select! {
            r = r.read(&mut buf) => match r {
                Ok(0) | Err(_) => break,
                Ok(k) => buf[..k].to_vec(),
            },
            c = rx.changed() => {
                if c.is_err() {
                    break;
                }
                // A lifted hold delivers what it kept.
                if held.is_empty() || rx.borrow_and_update().is_held(src, dst, n, way) {
                    continue;
                }
                std::mem::take(&mut held)
            }
        };
        let faults = rx.borrow().clone();
        stalled = stalled || (!stall_exempt && faults.is_stalled(src, dst));
        if stalled {
            continue;
        }
        if faults.is_held(src, dst, n, way) {
            held.extend_from_slice(&chunk);
            continue;
        }
        let chunk = if held.is_empty() {
            chunk
        } else {
            let mut all = std::mem::take(&mut held);
            all.extend_from_slice(&chunk);
            all
        };
        let d = faults.delay_of(src, dst);
        if tx.send((Instant::now() + d, chunk)).await.is_err() {
            break;
        }
    }
    drop(tx);
    let _ = (&mut writer.0).await;
}

/// Aborts the task when dropped, so a cut link stops delivering delayed
/// bytes at once.
struct AbortOnDrop(JoinHandle<()>);

impl Drop for AbortOnDrop {
    fn drop(&mut self) {
        self.0.abort();
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::expect_used, clippy::unwrap_used)]

    use super::*;

    /// An echo server standing in for a member's peer port.
    async fn echo() -> SocketAddr {
        let l = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = l.local_addr().unwrap();
        tokio::spawn(async move {
            while let Ok((mut c, _)) = l.accept().await {
                tokio::spawn(async move {
                    let (mut r, mut w) = c.split();
                    let _ = tokio::io::copy(&mut r, &mut w).await;
                });
            }
        });
        addr
    }

    async fn roundtrip(c: &mut TcpStream) -> std::io::Result<Vec<u8>> {
        c.write_all(b"ping").await?;
        let mut buf = [0u8; 4];
        c.read_exact(&mut buf).await?;
        Ok(buf.to_vec())
    }

    #[tokio::test]
    async fn links_pass_cut_heal_and_delay_by_opener() {
        let targets = vec![echo().await, echo().await, echo().await];
        let p = PeerProxy::start(targets).await.unwrap();
        // This test process plays member 0: its connections are attributed to it.
        p.set_pid(0, Some(std::process::id()));
        let mut to1 = TcpStream::connect(p.addr(1)).await.unwrap();
        let mut to2 = TcpStream::connect(p.addr(2)).await.unwrap();
        assert_eq!(roundtrip(&mut to1).await.unwrap(), b"ping");
        assert_eq!(roundtrip(&mut to2).await.unwrap(), b"ping");
        assert_eq!(p.stats(), (2, 0), "both connections attributed to member 0");

        // Cut link 0-1 only: the open connection to 1 closes, the one to 2 still passes.
        let mut f = Faults::default();
        f.cut.insert(link(1, 0));
        p.set(f);
        let mut buf = [0u8; 4];
        let r = tokio::time::timeout(Duration::from_secs(5), to1.read(&mut buf)).await.expect("closed, not hung");
        assert!(matches!(r, Ok(0) | Err(_)), "the cut connection is closed: {r:?}");
        assert_eq!(roundtrip(&mut to2).await.unwrap(), b"ping");
        // A new connection on the cut link is black-holed: nothing comes back.
        let mut again = TcpStream::connect(p.addr(1)).await.unwrap();
        again.write_all(b"ping").await.unwrap();
        assert!(tokio::time::timeout(Duration::from_millis(300), again.read(&mut buf)).await.is_err(), "black-holed");

        // Heal: the black-holed connection is closed so the member reconnects; new ones pass.
        p.heal();
        let r = tokio::time::timeout(Duration::from_secs(5), again.read(&mut buf)).await.expect("closed on heal");
        assert!(matches!(r, Ok(0) | Err(_)));
        let mut fresh = TcpStream::connect(p.addr(1)).await.unwrap();
        assert_eq!(roundtrip(&mut fresh).await.unwrap(), b"ping");

        // Delay 0-2 by 200 ms each way: a round trip takes at least 400 ms.
        let mut f = Faults::default();
        f.delay.insert(link(0, 2), Duration::from_millis(200));
        p.set(f);
        let start = std::time::Instant::now();
        assert_eq!(roundtrip(&mut to2).await.unwrap(), b"ping");
        assert!(start.elapsed() >= Duration::from_millis(400), "delayed: {:?}", start.elapsed());
    }

    /// A stall silences the connections the opener has open to the
    /// destination without closing them; ones it opens later pass, and
    /// other destinations are untouched.
    #[tokio::test]
    async fn stall_silences_open_connections_only() {
        let p = PeerProxy::start(vec![echo().await, echo().await, echo().await]).await.unwrap();
        p.set_pid(0, Some(std::process::id()));
        let mut to1 = TcpStream::connect(p.addr(1)).await.unwrap();
        let mut to2 = TcpStream::connect(p.addr(2)).await.unwrap();
        assert_eq!(roundtrip(&mut to1).await.unwrap(), b"ping");
        assert_eq!(roundtrip(&mut to2).await.unwrap(), b"ping");

        let mut f = Faults::default();
        f.stall.insert((0, 1));
        p.set(f);
        to1.write_all(b"ping").await.unwrap();
        let mut buf = [0u8; 4];
        assert!(tokio::time::timeout(Duration::from_millis(300), to1.read(&mut buf)).await.is_err(), "silent, and not closed");
        assert_eq!(roundtrip(&mut to2).await.unwrap(), b"ping");
        let mut fresh = TcpStream::connect(p.addr(1)).await.unwrap();
        assert_eq!(roundtrip(&mut fresh).await.unwrap(), b"ping");
        // Healing does not revive the stalled connection.
        p.heal();
        to1.write_all(b"ping").await.unwrap();
        assert!(tokio::time::timeout(Duration::from_millis(300), to1.read(&mut buf)).await.is_err(), "still silent");
    }

    /// A hold keeps one direction of the opener's connections back, in
    /// order, and delivers it when lifted; the other direction and other
    /// destinations pass meanwhile.
    #[tokio::test]
    async fn hold_keeps_one_direction_back_until_lifted() {
        let p = PeerProxy::start(vec![echo().await, echo().await, echo().await]).await.unwrap();
        p.set_pid(0, Some(std::process::id()));
        let mut to1 = TcpStream::connect(p.addr(1)).await.unwrap();
        let mut to2 = TcpStream::connect(p.addr(2)).await.unwrap();
        assert_eq!(roundtrip(&mut to1).await.unwrap(), b"ping");

        // Answers from 1 held: the echo happens, its bytes wait here.
        let mut f = Faults::default();
        f.hold_answers.insert((0, 1));
        p.set(f.clone());
        to1.write_all(b"ab").await.unwrap();
        to1.write_all(b"cd").await.unwrap();
        let mut buf = [0u8; 4];
        assert!(tokio::time::timeout(Duration::from_millis(300), to1.read(&mut buf)).await.is_err(), "answers held");
        assert_eq!(roundtrip(&mut to2).await.unwrap(), b"ping");

        // Requests to 1 held as well, then answers released: only what was
        // echoed before the request hold arrives.
        f.hold_requests.insert((0, 1));
        p.set(f.clone());
        to1.write_all(b"ef").await.unwrap();
        tokio::time::sleep(Duration::from_millis(100)).await;
        f.hold_answers.clear();
        p.set(f.clone());
        tokio::time::timeout(Duration::from_secs(5), to1.read_exact(&mut buf)).await.expect("released").unwrap();
        assert_eq!(&buf, b"abcd", "held answers arrive in order");
        let mut two = [0u8; 2];
        assert!(tokio::time::timeout(Duration::from_millis(300), to1.read_exact(&mut two)).await.is_err(), "the held request has not reached the echo");
        p.heal();
        tokio::time::timeout(Duration::from_secs(5), to1.read_exact(&mut two)).await.expect("request released and echoed").unwrap();
        assert_eq!(&two, b"ef");
    }

    /// A member that is down is refused at connect time, as it would be
    /// without the proxy; reopened, its address accepts again.
    #[tokio::test]
    async fn a_down_member_refuses_connections() {
        let p = PeerProxy::start(vec![echo().await, echo().await]).await.unwrap();
        p.set_listening(1, false);
        let mut refused = false;
        for _ in 0..100 {
            match TcpStream::connect(p.addr(1)).await {
                Err(e) if e.kind() == std::io::ErrorKind::ConnectionRefused => {
                    refused = true;
                    break;
                }
                // The listener closes asynchronously.
                _ => tokio::time::sleep(Duration::from_millis(10)).await,
            }
        }
        assert!(refused, "connections to a down member are refused");
        let mut to0 = TcpStream::connect(p.addr(0)).await.unwrap();
        assert_eq!(roundtrip(&mut to0).await.unwrap(), b"ping");

        p.set_listening(1, true);
        let mut again = None;
        for _ in 0..100 {
            if let Ok(c) = TcpStream::connect(p.addr(1)).await {
                again = Some(c);
                break;
            }
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
        let mut again = again.expect("listening again on the same address");
        assert_eq!(roundtrip(&mut again).await.unwrap(), b"ping");
    }

    #[test]
    fn isolate_cuts_every_link_out_of_the_group() {
        let mut f = Faults::default();
        f.isolate(&[2], 3);
        assert_eq!(f.cut, BTreeSet::from([(0, 2), (1, 2)]));
        assert!(f.is_cut(Some(0), 2, 3) && f.is_cut(Some(2), 1, 3) && !f.is_cut(Some(0), 1, 3));
        // An unattributed connection is cut only when its destination is cut from everyone.
        assert!(f.is_cut(None, 2, 3) && !f.is_cut(None, 0, 3));
    }
}
