//! Snapshots in etcd's format, moved between real etcd (Debian's 3.4) and
//! raftstore with the real tools: `etcdctl snapshot save` against either,
//! `etcdctl snapshot status` and `snapshot restore` (etcd's), `raftstore
//! snapshot restore`. Each restored server must serve what its source
//! served at the snapshot's revision: the same keys, values, create and mod
//! revisions, versions and leases, the same history since the compaction,
//! the same compacted revision, and new writes right after it.

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

use etcd_client::{Client, CompactionOptions, DeleteOptions, EventType, GetOptions, LeaseTimeToLiveOptions, PutOptions, Txn, TxnOp, WatchOptions};
use serde_json::Value;

use crate::common::server::{free_port, raftstore_bin};
use crate::common::{block_on, etcdctl, status_of, within, Kind, Options, Server};

/// One key-value as a client sees it: key, value, create, mod, version, lease.
type Kv = (String, String, i64, i64, i64, i64);

fn kv_of(kv: &etcd_client::KeyValue) -> Kv {
    (String::from_utf8_lossy(kv.key()).into_owned(), String::from_utf8_lossy(kv.value()).into_owned(), kv.create_revision(), kv.mod_revision(), kv.version(), kv.lease())
}

/// Every key at `revision` (0: current) and the header's revision.
async fn all_at(c: &mut Client, revision: i64) -> (i64, Vec<Kv>) {
    let resp = c.get(vec![0u8], Some(GetOptions::new().with_from_key().with_revision(revision))).await.unwrap_or_else(|e| panic!("get all at {revision}: {e}"));
    (resp.header().map(|h| h.revision()).unwrap_or(0), resp.kvs().iter().map(kv_of).collect())
}

/// Every event of revisions `from..=to`, in order: (put?, key-value).
async fn history(c: &mut Client, from: i64, to: i64) -> Vec<(bool, Kv)> {
    let mut stream = c.watch(vec![0u8], Some(WatchOptions::new().with_from_key().with_start_revision(from))).await.unwrap_or_else(|e| panic!("watch from {from}: {e}"));
    let mut out: Vec<(bool, Kv)> = Vec::new();
    within(Duration::from_secs(20), "the history up to the snapshot's revision", async {
        while out.last().map(|(_, kv)| kv.3) != Some(to) {
            let resp = stream.message().await.unwrap_or_else(|e| panic!("watch: {e}")).unwrap_or_else(|| panic!("watch ended after {} events", out.len()));
            assert!(!resp.canceled(), "watch from {from} cancelled: {}", resp.cancel_reason());
            for ev in resp.events() {
                let kv = ev.kv().map(kv_of).unwrap_or_default();
                if kv.3 <= to {
                    out.push((ev.event_type() == EventType::Put, kv));
                }
            }
        }
    })
    .await;
    out
}

/// (ID, granted TTL, attached keys) of every lease.
async fn leases(c: &mut Client) -> Vec<(i64, i64, Vec<String>)> {
    let mut out = Vec::new();
    for l in c.leases().await.unwrap_or_else(|e| panic!("lease list: {e}")).leases().to_vec() {
        let t = c.lease_time_to_live(l.id(), Some(LeaseTimeToLiveOptions::new().with_keys())).await.unwrap_or_else(|e| panic!("lease {:x}: {e}", l.id()));
        let mut keys: Vec<String> = t.keys().iter().map(|k| String::from_utf8_lossy(k).into_owned()).collect();
        keys.sort();
        out.push((l.id(), t.granted_ttl(), keys));
    }
    out.sort();
    out
}

/// The compacted revision a server reports in HashKV.
async fn compacted(c: &mut Client) -> i64 {
    c.hash_kv(0).await.unwrap_or_else(|e| panic!("hash_kv: {e}")).compact_version()
}

/// A history with everything a snapshot must carry: a lease with keys,
/// overwrites (versions), a prefix deletion (tombstones), a txn of several
/// changes (sub-revisions), a compaction with history on both sides of it,
/// and values of several pages' worth. Returns the compacted revision.
async fn seed(c: &mut Client) -> i64 {
    let lease = c.lease_grant(600, None).await.expect("grant").id();
    for k in ["lease/a", "lease/b"] {
        c.put(k, "leased", Some(PutOptions::new().with_lease(lease))).await.expect("put leased");
    }
    for i in 0..300 {
        c.put(format!("seed/{i:04}"), format!("{i:0>120}"), None).await.expect("put");
    }
    for i in (0..300).step_by(7) {
        c.put(format!("seed/{i:04}"), format!("again-{i}"), None).await.expect("overwrite");
    }
    c.delete("seed/01", Some(DeleteOptions::new().with_prefix())).await.expect("delete prefix");
    let txn = Txn::new().and_then(vec![TxnOp::put("t/1", "one", None), TxnOp::put("t/2", "two", None), TxnOp::delete("seed/0002", None)]);
    let rev = c.txn(txn).await.expect("txn").header().map(|h| h.revision()).unwrap_or(0);
    let at = rev - 40;
    c.compact(at, Some(CompactionOptions::new().with_physical())).await.expect("compact");
    for i in 0..50 {
        c.put(format!("after/{i:02}"), format!("v{i}"), None).await.expect("put after");
        if i % 5 == 0 {
            c.delete(format!("seed/{:04}", i * 3), None).await.expect("delete after");
        }
    }
    at
}

/// Writes until `stop`: overwrites, new keys and deletions. Returns the
/// number of writes.
async fn load(mut c: Client, stop: Arc<AtomicBool>) -> u64 {
    let mut n = 0u64;
    while !stop.load(Ordering::Relaxed) {
        let key = format!("load/{:03}", n % 150);
        if n % 11 == 10 {
            c.delete(key, None).await.expect("load delete");
        } else {
            c.put(key, format!("write-{n}"), None).await.expect("load put");
        }
        n += 1;
    }
    n
}

fn file_len(p: &Path) -> u64 {
    std::fs::metadata(p).map(|m| m.len()).unwrap_or_else(|e| panic!("{}: {e}", p.display()))
}

fn int(v: &Value) -> i64 {
    v.as_i64().unwrap_or_else(|| panic!("not an integer: {v}"))
}

/// `etcdctl snapshot save` against `ep` while `c` is written to; returns
/// the file and the number of writes during the save.
async fn save_under_load(c: &Client, ep: &str, file: &Path) -> u64 {
    let stop = Arc::new(AtomicBool::new(false));
    let writer = tokio::spawn(load(c.clone(), stop.clone()));
    tokio::time::sleep(Duration::from_millis(300)).await;
    let (ep, arg) = (ep.to_owned(), file.display().to_string());
    let out = tokio::task::spawn_blocking(move || etcdctl(&ep, &["snapshot", "save", &arg])).await.expect("etcdctl");
    assert!(out.ok().contains("Snapshot saved at"), "{out}");
    tokio::time::sleep(Duration::from_millis(300)).await;
    stop.store(true, Ordering::Relaxed);
    writer.await.expect("load task")
}

/// `etcdctl snapshot status -w json`: (revision, total size), checked
/// against the file: the db is the file less its 32-byte digest.
fn status(file: &Path) -> (i64, u64) {
    let j = etcdctl("http://127.0.0.1:1", &["snapshot", "status", &file.display().to_string(), "-w", "json"]).json();
    let size = int(&j["totalSize"]) as u64;
    assert_eq!(size + 32, file_len(file), "the file is the db and its digest, nothing more: {j}");
    assert!(int(&j["totalKey"]) > 0, "{j}");
    (int(&j["revision"]), size)
}

/// A fresh data dir path and peer URL for a restored member.
fn restore_target(scratch: &Path, name: &str) -> (PathBuf, String) {
    (scratch.join(name), format!("http://127.0.0.1:{}", free_port()))
}

/// `etcdctl snapshot restore` into a new etcd data dir, then etcd on it.
fn etcd_from(file: &Path, scratch: &Path, name: &str) -> Server {
    let (dir, peer) = restore_target(scratch, name);
    let args = [
        "snapshot".to_owned(),
        "restore".to_owned(),
        file.display().to_string(),
        format!("--data-dir={}", dir.display()),
        format!("--name={name}"),
        format!("--initial-cluster={name}={peer}"),
        format!("--initial-advertise-peer-urls={peer}"),
    ];
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    etcdctl("http://127.0.0.1:1", &args).ok();
    Server::start_with(Kind::Etcd, Options { name: name.into(), data_dir: Some(dir), peer_url: Some(peer), args: vec![] })
}

/// `raftstore snapshot restore` into a new data dir (with etcdutl's flags),
/// then raftstore on it; `extra` goes to the restore command.
fn raftstore_from(file: &Path, scratch: &Path, name: &str, extra: &[&str]) -> Server {
    let (dir, peer) = restore_target(scratch, name);
    let out = raftstore_restore(file, &dir, name, &peer, extra);
    assert!(out.status.success(), "raftstore snapshot restore: {}{}", String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr));
    assert!(String::from_utf8_lossy(&out.stdout).contains("restored etcd snapshot"), "{}", String::from_utf8_lossy(&out.stdout));
    Server::start_with(Kind::Raftstore, Options { name: name.into(), data_dir: Some(dir), peer_url: Some(peer), args: vec![] })
}

fn raftstore_restore(file: &Path, dir: &Path, name: &str, peer: &str, extra: &[&str]) -> std::process::Output {
    std::process::Command::new(raftstore_bin())
        .args(["snapshot", "restore", &file.display().to_string(), "--data-dir", &dir.display().to_string(), "--name", name])
        .arg(format!("--initial-cluster={name}={peer}"))
        .arg(format!("--initial-advertise-peer-urls={peer}"))
        .args(extra)
        .output()
        .expect("run raftstore snapshot restore")
}

/// The restored server `to` serves what `from` served at `revision`: every
/// key, the history from just after the compaction at `compact` up to
/// `revision`, the keys at the compaction itself, the compaction, and the
/// leases; then a write on `to` takes `revision + 1`.
async fn assert_same(from: &mut Client, to: &mut Client, revision: i64, compact: i64) {
    let (_, want) = all_at(from, revision).await;
    let (header, got) = all_at(to, 0).await;
    assert_eq!(header, revision, "the restored server's revision");
    assert_eq!(got.len(), want.len(), "number of keys");
    assert_eq!(got, want, "keys at revision {revision}");
    assert_eq!(all_at(to, compact).await.1, all_at(from, compact).await.1, "keys at the compacted revision {compact}");
    let want = history(from, compact + 1, revision).await;
    assert_eq!(history(to, compact + 1, revision).await, want, "history {}..={revision}", compact + 1);
    assert!(want.len() as i64 >= revision - compact, "every revision has an event");
    let err = to.get("seed/0000", Some(GetOptions::new().with_revision(compact - 1))).await.expect_err("read before the compaction");
    assert!(status_of(&err).1.contains("required revision has been compacted"), "{err}");
    assert_eq!(compacted(to).await, compact);
    let want = leases(from).await;
    assert_eq!(want.len(), 1, "{want:?}");
    assert_eq!(want[0].1, 600);
    assert_eq!(want[0].2, vec!["lease/a".to_owned(), "lease/b".to_owned()]);
    assert_eq!(leases(to).await, want);
}

/// raftstore under a write load → `etcdctl snapshot save` → etcd's own
/// `snapshot status` and `snapshot restore` → a real etcd serves what
/// raftstore served at the snapshot's revision.
#[test]
fn raftstore_snapshot_under_load_restores_into_real_etcd() {
    let r = Server::start(Kind::Raftstore);
    let file = r.scratch().join("raftstore.db");
    block_on(async {
        let mut rc = r.client().await;
        let compact = seed(&mut rc).await;
        let seeded = all_at(&mut rc, 0).await.0;
        let writes = save_under_load(&rc, r.endpoint(), &file).await;
        let (revision, _) = status(&file);
        let end = all_at(&mut rc, 0).await.0;
        assert!(seeded < revision && revision < end, "the snapshot was taken under load: seeded at {seeded}, snapshot at {revision}, {writes} writes up to {end}");

        let e = tokio::task::spawn_blocking({
            let (file, scratch) = (file.clone(), r.scratch().to_owned());
            move || etcd_from(&file, &scratch, "from-raftstore")
        })
        .await
        .expect("restore into etcd");
        let mut ec = e.client().await;
        assert_same(&mut rc, &mut ec, revision, compact).await;
        let put = ec.put("after/restore", "x", None).await.expect("put on the restored etcd");
        assert_eq!(put.header().map(|h| h.revision()), Some(revision + 1));
    });
}

/// A real etcd → `etcdctl snapshot save` → `raftstore snapshot restore` →
/// raftstore serves what etcd served; and back: `etcdctl snapshot save`
/// against that raftstore → `etcdctl snapshot restore` → a second etcd
/// serves the same again. raftstore's file is no larger than etcd's for
/// the same data. A db copied out of a data dir (no digest) needs
/// `--skip-hash-check`, and a corrupt file is refused with nothing left.
#[test]
fn real_etcd_snapshot_restores_into_raftstore_and_back() {
    let e = Server::start(Kind::Etcd);
    let scratch = e.scratch().to_owned();
    let from_etcd = scratch.join("etcd.db");
    block_on(async {
        let mut ec = e.client().await;
        let compact = seed(&mut ec).await;
        save_under_load(&ec, e.endpoint(), &from_etcd).await;
        let (revision, etcd_size) = status(&from_etcd);

        let r = tokio::task::spawn_blocking({
            let (file, scratch) = (from_etcd.clone(), scratch.clone());
            move || raftstore_from(&file, &scratch, "from-etcd", &[])
        })
        .await
        .expect("restore into raftstore");
        let mut rc = r.client().await;
        assert_same(&mut ec, &mut rc, revision, compact).await;

        // And back, before anything else is written to raftstore.
        let back = scratch.join("back.db");
        let (ep, arg) = (r.endpoint().to_owned(), back.display().to_string());
        tokio::task::spawn_blocking(move || etcdctl(&ep, &["snapshot", "save", &arg]).ok().to_owned()).await.expect("etcdctl");
        let (back_revision, back_size) = status(&back);
        assert_eq!(back_revision, revision);
        assert!(back_size <= etcd_size, "raftstore's db ({back_size} bytes) is no larger than etcd's for the same data ({etcd_size})");
        let e2 = tokio::task::spawn_blocking({
            let (file, scratch) = (back.clone(), scratch.clone());
            move || etcd_from(&file, &scratch, "back-in-etcd")
        })
        .await
        .expect("restore into etcd");
        let mut e2c = e2.client().await;
        assert_same(&mut ec, &mut e2c, revision, compact).await;

        let put = rc.put("after/restore", "x", None).await.expect("put on the restored raftstore");
        assert_eq!(put.header().map(|h| h.revision()), Some(revision + 1));
    });

    // A corrupt snapshot is refused and leaves no data dir.
    let mut bytes = std::fs::read(&from_etcd).expect("read snapshot");
    let at = bytes.len() / 2;
    bytes[at] ^= 0x40;
    let corrupt = scratch.join("corrupt.db");
    std::fs::write(&corrupt, &bytes).expect("write corrupt copy");
    let (dir, peer) = restore_target(&scratch, "corrupt");
    let out = raftstore_restore(&corrupt, &dir, "corrupt", &peer, &[]);
    assert!(!out.status.success() && String::from_utf8_lossy(&out.stderr).contains("checksum mismatch"), "{}", String::from_utf8_lossy(&out.stderr));
    assert!(!dir.exists());

    // etcd's own db file (no digest): only with --skip-hash-check.
    let mut e = e;
    e.kill9();
    let db = scratch.join("data").join("member").join("snap").join("db");
    let (dir, peer) = restore_target(&scratch, "bare");
    let out = raftstore_restore(&db, &dir, "bare", &peer, &[]);
    assert!(!out.status.success() && String::from_utf8_lossy(&out.stderr).contains("--skip-hash-check"), "{}", String::from_utf8_lossy(&out.stderr));
    assert!(!dir.exists());
    let r = raftstore_from(&db, &scratch, "bare", &["--skip-hash-check"]);
    block_on(async {
        let (_, kvs) = all_at(&mut r.client().await, 0).await;
        assert!(kvs.iter().any(|kv| kv.0 == "lease/a" && kv.5 != 0), "{kvs:?}");
    });
}

/// Users, roles and an enabled auth on `ep` (as root when auth is on):
/// what a restored member must serve the same way.
fn auth_view(ep: &str) -> Vec<String> {
    let root = ["--user", "root:rootpw"];
    let mut out = Vec::new();
    for args in [&["user", "list"][..], &["role", "list"], &["user", "get", "alice"], &["role", "get", "reader"]] {
        let cmd: Vec<&str> = root.iter().chain(args).copied().collect();
        out.push(etcdctl(ep, &cmd).ok().to_owned());
    }
    // Alice's permissions hold, and a request without a user is refused.
    out.push(etcdctl(ep, &["--user", "alice:apw", "get", "/a/x", "--print-value-only"]).ok().to_owned());
    let error_line = |stderr: &str| stderr.lines().filter(|l| l.starts_with("Error:")).collect::<Vec<_>>().join("\n");
    out.push(error_line(etcdctl(ep, &["--user", "alice:apw", "put", "/b", "1"]).err()));
    out.push(error_line(etcdctl(ep, &["get", "/a/x"]).err()));
    out
}

/// Auth moves with the data: a real etcd with users, roles and auth on →
/// `etcdctl snapshot save` → `raftstore snapshot restore` serves the same
/// users, roles and permissions with auth on; and back into a second etcd
/// through raftstore's own snapshot.
#[test]
fn users_roles_and_auth_move_with_snapshots_both_ways() {
    let e = Server::start(Kind::Etcd);
    let ep = e.endpoint().to_owned();
    let scratch = e.scratch().to_owned();
    for args in [
        &["user", "add", "root:rootpw"][..],
        &["role", "add", "root"],
        &["user", "grant-role", "root", "root"],
        &["user", "add", "alice:apw"],
        &["role", "add", "reader"],
        &["role", "grant-permission", "reader", "readwrite", "/a/", "--prefix=true"],
        &["user", "grant-role", "alice", "reader"],
        &["put", "/a/x", "kept"],
        &["auth", "enable"],
    ] {
        etcdctl(&ep, args).ok();
    }
    let want = auth_view(&ep);
    // etcdctl 3.4 has no `auth status`: a request without a user being
    // refused shows that auth is on.
    assert_eq!(want.last().map(String::as_str), Some("Error: etcdserver: user name is empty"), "{want:?}");

    let from_etcd = scratch.join("etcd-auth.db");
    etcdctl(&ep, &["--user", "root:rootpw", "snapshot", "save", &from_etcd.display().to_string()]).ok();
    let r = raftstore_from(&from_etcd, &scratch, "auth-from-etcd", &[]);
    assert_eq!(auth_view(r.endpoint()), want, "raftstore restored from etcd's snapshot");

    let back = scratch.join("auth-back.db");
    etcdctl(r.endpoint(), &["--user", "root:rootpw", "snapshot", "save", &back.display().to_string()]).ok();
    let e2 = etcd_from(&back, &scratch, "auth-back-in-etcd");
    assert_eq!(auth_view(e2.endpoint()), want, "etcd restored from raftstore's snapshot");
}
