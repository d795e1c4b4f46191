//! Debian's etcdctl 3.4 against the server. Every case that checks etcd
//! behaviour runs against real etcd first, then raftstore ([`for_each_kind`]);
//! raftstore-only facts (its version, its restore tool) are asserted only for
//! raftstore.

use std::collections::BTreeSet;
use std::time::Duration;

use serde_json::Value;

use crate::common::server::{free_port, raftstore_bin};
use crate::common::{block_on, etcdctl, etcdctl_stdin, for_each_kind, Background, Kind, Options, Server};

const WAIT: Duration = Duration::from_secs(10);

/// Puts each pair in order; on a fresh server they take revisions 2, 3, ...
fn put_all(ep: &str, pairs: &[(&str, &str)]) {
    for (k, v) in pairs {
        assert_eq!(etcdctl(ep, &["put", k, v]).ok(), "OK\n", "put {k}");
    }
}

/// Simple-format output for a list of key/value pairs: key, value, each on a line.
fn kv_lines(pairs: &[(&str, &str)]) -> String {
    pairs.iter().map(|(k, v)| format!("{k}\n{v}\n")).collect()
}

/// Decodes standard base64 (etcdctl's JSON encodes keys and values so).
pub fn b64(s: &str) -> String {
    const ALPHABET: &[u8] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    let mut bits = 0u32;
    let mut n = 0;
    let mut out = Vec::new();
    for c in s.bytes().filter(|&c| c != b'=') {
        let v = ALPHABET.iter().position(|&a| a == c).unwrap_or_else(|| panic!("bad base64 {s:?}")) as u32;
        bits = (bits << 6) | v;
        n += 6;
        if n >= 8 {
            n -= 8;
            out.push((bits >> n) as u8);
            bits &= (1 << n) - 1;
        }
    }
    String::from_utf8(out).expect("utf-8 in base64")
}

fn int(v: &Value) -> i64 {
    v.as_i64().or_else(|| v.as_u64().map(|u| u as i64)).or_else(|| v.as_str().and_then(|s| s.parse().ok())).unwrap_or(0)
    // etcdctl omits zero fields
}

/// (key, value, create, mod, version) of each kv in an etcdctl JSON range.
fn json_kvs(v: &Value) -> Vec<(String, String, i64, i64, i64)> {
    v["kvs"]
        .as_array()
        .map(|a| a.as_slice())
        .unwrap_or_default()
        .iter()
        .map(|kv| (b64(kv["key"].as_str().unwrap_or_default()), b64(kv["value"].as_str().unwrap_or_default()), int(&kv["create_revision"]), int(&kv["mod_revision"]), int(&kv["version"])))
        .collect()
}

/// The fixed history every get case below reads.
const HISTORY: &[(&str, &str)] = &[
    ("a", "1"),    // rev 2
    ("b/1", "x"),  // rev 3
    ("b/2", "yy"), // rev 4
    ("b/3", "z"),  // rev 5
    ("c", "3"),    // rev 6
    ("b/1", "x2"), // rev 7
    ("b/3", "a"),  // rev 8
];

/// etcdctl arguments and the (key, value) lines they must print.
type GetCase<'a> = (&'a [&'a str], &'a [(&'a str, &'a str)]);

#[test]
fn put_and_get_flags() {
    let cases: &[GetCase] = &[
        (&["get", "a"], &[("a", "1")]),
        (&["get", "nope"], &[]),
        (&["get", "b", "--prefix"], &[("b/1", "x2"), ("b/2", "yy"), ("b/3", "a")]),
        (&["get", "b/1", "--rev=3"], &[("b/1", "x")]),
        (&["get", "b/1", "--rev=2"], &[]),
        (&["get", "b", "--prefix", "--rev=4"], &[("b/1", "x"), ("b/2", "yy")]),
        (&["get", "b", "--prefix", "--limit=2"], &[("b/1", "x2"), ("b/2", "yy")]),
        (&["get", "b", "--prefix", "--keys-only"], &[("b/1", ""), ("b/2", ""), ("b/3", "")]),
        (&["get", "a", "c"], &[("a", "1"), ("b/1", "x2"), ("b/2", "yy"), ("b/3", "a")]),
        (&["get", "b/2", "--from-key"], &[("b/2", "yy"), ("b/3", "a"), ("c", "3")]),
        (&["get", "b", "--prefix", "--order=DESCEND"], &[("b/3", "a"), ("b/2", "yy"), ("b/1", "x2")]),
        (&["get", "b", "--prefix", "--sort-by=MODIFY", "--order=DESCEND"], &[("b/3", "a"), ("b/1", "x2"), ("b/2", "yy")]),
        (&["get", "b", "--prefix", "--sort-by=MODIFY"], &[("b/2", "yy"), ("b/1", "x2"), ("b/3", "a")]),
        (&["get", "b", "--prefix", "--sort-by=CREATE", "--order=DESCEND"], &[("b/3", "a"), ("b/2", "yy"), ("b/1", "x2")]),
        (&["get", "b", "--prefix", "--sort-by=VALUE"], &[("b/3", "a"), ("b/1", "x2"), ("b/2", "yy")]),
        (&["get", "b", "--prefix", "--sort-by=VALUE", "--order=DESCEND", "--limit=1"], &[("b/2", "yy")]),
        (
            &["get", "", "--prefix", "--sort-by=VERSION", "--order=DESCEND", "--limit=2", "--keys-only"],
            // b/1 and b/3 are the only keys at version 2; their order is not
            // defined, so the case below reads it as a set.
            &[("b/1", ""), ("b/3", "")],
        ),
    ];
    for_each_kind(|kind| {
        let s = Server::start(kind);
        let ep = s.endpoint();
        put_all(ep, HISTORY);
        for (args, want) in cases {
            let got = etcdctl(ep, args).ok().to_owned();
            if args.contains(&"--sort-by=VERSION") {
                let mut lines: Vec<&str> = got.lines().collect();
                let mut want_lines: Vec<String> = kv_lines(want).lines().map(str::to_owned).collect();
                lines.sort();
                want_lines.sort();
                assert_eq!(lines, want_lines, "{args:?}");
            } else {
                assert_eq!(got, kv_lines(want), "etcdctl {args:?}");
            }
        }
        assert_eq!(etcdctl(ep, &["get", "b", "--prefix", "--print-value-only"]).ok(), "x2\nyy\na\n");

        // Revisions through -w json.
        let j = etcdctl(ep, &["get", "b/1", "-w", "json"]).json();
        assert_eq!(int(&j["header"]["revision"]), 8, "{j}");
        assert_eq!(json_kvs(&j), vec![("b/1".into(), "x2".into(), 3, 7, 2)]);
        assert_eq!(int(&j["count"]), 1);

        let j = etcdctl(ep, &["get", "b", "--prefix", "--limit=1", "-w", "json"]).json();
        assert_eq!(json_kvs(&j), vec![("b/1".into(), "x2".into(), 3, 7, 2)]);
        assert_eq!(int(&j["count"]), 3, "count ignores limit: {j}");
        assert_eq!(j["more"], Value::Bool(true), "{j}");

        let j = etcdctl(ep, &["get", "b", "--prefix", "--rev=5", "-w", "json"]).json();
        assert_eq!(int(&j["header"]["revision"]), 8, "header is current: {j}");
        assert_eq!(json_kvs(&j), vec![("b/1".into(), "x".into(), 3, 3, 1), ("b/2".into(), "yy".into(), 4, 4, 1), ("b/3".into(), "z".into(), 5, 5, 1),]);

        let j = etcdctl(ep, &["put", "c", "4", "--prev-kv", "-w", "json"]).json();
        assert_eq!(int(&j["header"]["revision"]), 9, "{j}");
        assert_eq!(b64(j["prev_kv"]["value"].as_str().unwrap_or_default()), "3");
        assert_eq!(int(&j["prev_kv"]["mod_revision"]), 6);
    });
}

#[test]
fn count_only_through_etcd_client() {
    for_each_kind(|kind| {
        let s = Server::start(kind);
        put_all(s.endpoint(), HISTORY);
        block_on(async {
            let mut c = s.client().await;
            let cases = [
                (etcd_client::GetOptions::new().with_prefix().with_count_only(), "b", 3),
                (etcd_client::GetOptions::new().with_prefix().with_count_only().with_limit(1), "b", 3),
                (etcd_client::GetOptions::new().with_all_keys().with_count_only(), "", 5),
                (etcd_client::GetOptions::new().with_prefix().with_count_only().with_revision(4), "b", 2),
                (etcd_client::GetOptions::new().with_count_only(), "nope", 0),
            ];
            for (opts, key, want) in cases {
                let what = format!("{opts:?}");
                let r = c.get(key, Some(opts)).await.expect("count_only get");
                assert_eq!(r.count(), want, "{what}");
                assert!(r.kvs().is_empty(), "count_only returns no kvs: {what}");
                assert!(!r.more(), "count_only: more=false: {what}");
                assert_eq!(r.header().map(|h| h.revision()), Some(8));
            }
        });
    });
}

#[test]
fn del_prev_kv() {
    for_each_kind(|kind| {
        let s = Server::start(kind);
        let ep = s.endpoint();
        put_all(ep, HISTORY);
        assert_eq!(etcdctl(ep, &["del", "--prev-kv", "a"]).ok(), "1\na\n1\n");
        assert_eq!(etcdctl(ep, &["del", "nope"]).ok(), "0\n");
        assert_eq!(etcdctl(ep, &["del", "--prev-kv", "b", "--prefix"]).ok(), format!("3\n{}", kv_lines(&[("b/1", "x2"), ("b/2", "yy"), ("b/3", "a")])));
        assert_eq!(etcdctl(ep, &["get", "", "--prefix"]).ok(), "c\n3\n");
        // Two deletes that removed something: revisions 9 and 10.
        let j = etcdctl(ep, &["del", "c", "-w", "json", "--prev-kv"]).json();
        assert_eq!(int(&j["header"]["revision"]), 11, "{j}");
        assert_eq!(int(&j["deleted"]), 1);
        assert_eq!(int(&j["prev_kvs"][0]["create_revision"]), 6);
        // Deleting nothing does not move the revision.
        let j = etcdctl(ep, &["del", "c", "-w", "json"]).json();
        assert_eq!(int(&j["header"]["revision"]), 11, "{j}");
        assert_eq!(int(&j["deleted"]), 0);
    });
}

#[test]
fn txn_both_branches() {
    for_each_kind(|kind| {
        let s = Server::start(kind);
        let ep = s.endpoint();
        put_all(ep, &[("k", "v"), ("n", "1")]); // revs 2, 3

        // Success: every compare target holds.
        let success = "value(\"k\") = \"v\"\nmod(\"k\") < \"3\"\ncreate(\"k\") = \"2\"\nver(\"k\") = \"1\"\nver(\"absent\") = \"0\"\n\nput k v2\nget n\n\nput k wrong\n\n";
        assert_eq!(etcdctl_stdin(ep, &["txn"], success).ok(), "SUCCESS\n\nOK\n\nn\n1\n");
        // Failure: one compare fails, the else branch runs.
        let failure = "value(\"k\") = \"v\"\nmod(\"n\") > \"0\"\n\nput k wrong\n\nput other o\ndel n\n\n";
        assert_eq!(etcdctl_stdin(ep, &["txn"], failure).ok(), "FAILURE\n\nOK\n\n1\n");
        assert_eq!(etcdctl(ep, &["get", "", "--prefix"]).ok(), kv_lines(&[("k", "v2"), ("other", "o")]));
        // One revision per txn, whatever its size: rev 4, then rev 5.
        let j = etcdctl(ep, &["get", "other", "-w", "json"]).json();
        assert_eq!(json_kvs(&j), vec![("other".into(), "o".into(), 5, 5, 1)]);

        // JSON shows the branch and each response's header.
        let txn = "mod(\"k\") = \"4\"\n\nput k v3\ndel other\nget k\n\n\n";
        let j = etcdctl_stdin(ep, &["txn", "-w", "json"], txn).json();
        assert_eq!(j["succeeded"], Value::Bool(true), "{j}");
        assert_eq!(int(&j["header"]["revision"]), 6, "{j}");
        let r = &j["responses"];
        assert_eq!(int(&r[1]["Response"]["ResponseDeleteRange"]["deleted"]), 1, "{j}");
        let got = &r[2]["Response"]["ResponseRange"];
        assert_eq!(json_kvs(got), vec![("k".into(), "v3".into(), 2, 6, 3)], "a get after a put in one txn sees the put: {j}");

        // A read-only txn does not move the revision.
        let j = etcdctl_stdin(ep, &["txn", "-w", "json"], "\nget k\n\n\n").json();
        assert_eq!(int(&j["header"]["revision"]), 6, "{j}");
    });
}

fn parse_json_lines(lines: &[String]) -> Vec<Value> {
    lines.iter().map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("watch json {l:?}: {e}"))).collect()
}

#[test]
fn watch_history_prefix_prev_kv_and_compacted() {
    for_each_kind(|kind| {
        let s = Server::start(kind);
        let ep = s.endpoint();
        put_all(ep, &[("a/x", "1"), ("a/y", "2"), ("a/x", "3")]); // revs 2-4
        etcdctl(ep, &["del", "a/y"]).ok(); // rev 5
        put_all(ep, &[("b", "9")]); // rev 6

        let w = Background::spawn(ep, &["watch", "--rev=2", "--prefix", "a/"]);
        let want: Vec<&str> = vec!["PUT", "a/x", "1", "PUT", "a/y", "2", "PUT", "a/x", "3", "DELETE", "a/y", ""];
        assert_eq!(w.lines(want.len(), WAIT), want);
        // Live events follow history; `b` is outside the prefix.
        put_all(ep, &[("b", "10"), ("a/z", "5")]); // revs 7, 8
        assert_eq!(w.lines(3, WAIT), vec!["PUT", "a/z", "5"]);
        drop(w);

        let w = Background::spawn(ep, &["watch", "--rev=3", "--prev-kv", "--prefix", "a/"]);
        let want: Vec<&str> = vec![
            "PUT", "a/y", "2", // created at 3: no previous kv
            "PUT", "a/x", "1", "a/x", "3", // prev, then kv
            "DELETE", "a/y", "2", "a/y", "", "PUT", "a/z", "5",
        ];
        assert_eq!(w.lines(want.len(), WAIT), want);
        drop(w);

        // Single key, JSON: check revisions and event types.
        let w = Background::spawn(ep, &["watch", "--rev=1", "a/x", "-w", "json"]);
        let mut revs = Vec::new();
        while revs.len() < 2 {
            for resp in parse_json_lines(&w.lines(1, WAIT)) {
                for ev in resp["Events"].as_array().map(|a| a.as_slice()).unwrap_or_default() {
                    assert_eq!(b64(ev["kv"]["key"].as_str().unwrap_or_default()), "a/x");
                    assert!(ev.get("type").is_none_or(|t| t == "PUT" || int(t) == 0), "{ev}");
                    revs.push(int(&ev["kv"]["mod_revision"]));
                }
            }
        }
        assert_eq!(revs, vec![2, 4]);
        drop(w);

        // Watching from a compacted revision: etcd's error, and etcdctl exits.
        etcdctl(ep, &["compaction", "4"]).ok();
        let w = Background::spawn(ep, &["watch", "--rev=2", "a/x"]);
        let out = w.wait_exit(WAIT);
        assert_ne!(out.code, 0, "{out}");
        assert!(out.stderr.contains("watch was canceled (etcdserver: mvcc: required revision has been compacted)"), "{out}");
        assert_eq!(out.stdout, "", "{out}");

        // At the compact revision itself the watch works.
        let w = Background::spawn(ep, &["watch", "--rev=4", "--prefix", "a/"]);
        assert_eq!(w.lines(6, WAIT), vec!["PUT", "a/x", "3", "DELETE", "a/y", ""]);
    });
}

/// The hex lease ID in `lease 694d7d0d7a2f3a10 granted with TTL(300s)`.
fn lease_id(out: &str) -> String {
    let id = out.split_whitespace().nth(1).unwrap_or_default().to_owned();
    assert!(out.starts_with("lease ") && i64::from_str_radix(&id, 16).is_ok(), "not a lease line: {out:?}");
    id
}

#[test]
fn lease_grant_keepalive_timetolive_revoke() {
    for_each_kind(|kind| {
        let s = Server::start(kind);
        let ep = s.endpoint();
        let out = etcdctl(ep, &["lease", "grant", "300"]).ok().to_owned();
        let id = lease_id(&out);
        assert_eq!(out, format!("lease {id} granted with TTL(300s)\n"));
        let id_num = i64::from_str_radix(&id, 16).expect("hex lease id");
        assert_eq!(id.len(), 16, "etcdctl prints lease IDs as %016x: {out}");
        let lease_flag = format!("--lease={id}");
        etcdctl(ep, &["put", &lease_flag, "lk1", "v1"]).ok();
        etcdctl(ep, &["put", &lease_flag, "lk2", "v2"]).ok();
        put_all(ep, &[("free", "f")]);

        let j = etcdctl(ep, &["lease", "timetolive", "--keys", &id, "-w", "json"]).json();
        assert_eq!(int(&j["granted-ttl"]), 300, "{j}");
        let ttl = int(&j["ttl"]);
        assert!((290..=300).contains(&ttl), "remaining TTL {ttl}: {j}");
        assert_eq!(int(&j["id"]), id_num, "{j}");
        let keys: BTreeSet<String> = j["keys"].as_array().map(|a| a.as_slice()).unwrap_or_default().iter().map(|k| b64(k.as_str().unwrap_or_default())).collect();
        assert_eq!(keys, BTreeSet::from(["lk1".to_owned(), "lk2".to_owned()]));
        let text = etcdctl(ep, &["lease", "timetolive", "--keys", &id]).ok().to_owned();
        assert!(text.starts_with(&format!("lease {id} granted with TTL(300s), remaining(")) && (text.contains("attached keys([lk1 lk2])") || text.contains("attached keys([lk2 lk1])")), "{text}");

        let j = etcdctl(ep, &["get", "lk1", "-w", "json"]).json();
        assert_eq!(int(&j["kvs"][0]["lease"]), id_num, "kv carries its lease: {j}");

        assert_eq!(etcdctl(ep, &["lease", "keep-alive", "--once", &id]).ok(), format!("lease {id} keepalived with TTL(300)\n"));
        assert!(etcdctl(ep, &["lease", "list"]).ok().contains(&id));

        let before = int(&etcdctl(ep, &["get", "free", "-w", "json"]).json()["header"]["revision"]);
        assert_eq!(etcdctl(ep, &["lease", "revoke", &id]).ok(), format!("lease {id} revoked\n"));
        let j = etcdctl(ep, &["get", "lk", "--prefix", "-w", "json"]).json();
        assert_eq!(int(&j["count"]), 0, "attached keys vanish on revoke: {j}");
        assert_eq!(int(&j["header"]["revision"]), before + 1, "the revoke deletes both keys in one revision: {j}");
        assert_eq!(etcdctl(ep, &["get", "free"]).ok(), "free\nf\n");
        assert_eq!(etcdctl(ep, &["lease", "timetolive", &id]).ok(), format!("lease {id} already expired\n"));
        let out = etcdctl(ep, &["lease", "revoke", &id]);
        assert!(out.err().contains("etcdserver: requested lease not found"), "{out}");
        let out = etcdctl(ep, &["put", "--lease=1234abcd", "x", "y"]);
        assert!(out.err().contains("etcdserver: requested lease not found"), "{out}");
    });
}

#[test]
fn lease_expiry_deletes_keys() {
    for_each_kind(|kind| {
        let s = Server::start(kind);
        let ep = s.endpoint();
        let id = lease_id(etcdctl(ep, &["lease", "grant", "2"]).ok());
        etcdctl(ep, &["put", &format!("--lease={id}"), "ttl-key", "v"]).ok();
        assert_eq!(etcdctl(ep, &["get", "ttl-key"]).ok(), "ttl-key\nv\n");
        let deadline = std::time::Instant::now() + Duration::from_secs(15);
        loop {
            if etcdctl(ep, &["get", "ttl-key"]).ok().is_empty() {
                break;
            }
            assert!(std::time::Instant::now() < deadline, "key of a 2 s lease still present after 15 s");
            std::thread::sleep(Duration::from_millis(200));
        }
        assert_eq!(etcdctl(ep, &["lease", "timetolive", &id]).ok(), format!("lease {id} already expired\n"));
    });
}

#[test]
fn compaction() {
    for_each_kind(|kind| {
        let s = Server::start(kind);
        let ep = s.endpoint();
        put_all(ep, &[("k", "v1"), ("k", "v2"), ("k", "v3"), ("j", "w")]); // revs 2-5
        assert_eq!(etcdctl(ep, &["compaction", "3"]).ok(), "compacted revision 3\n");
        let cases: &[(&[&str], Result<&str, &str>)] = &[
            (&["get", "k", "--rev=2"], Err("Error: etcdserver: mvcc: required revision has been compacted")),
            (&["get", "k", "--rev=3"], Ok("k\nv2\n")),
            (&["get", "k", "--rev=4"], Ok("k\nv3\n")),
            (&["get", "k"], Ok("k\nv3\n")),
            (&["get", "j", "--rev=4"], Ok("")),
            (&["get", "k", "--rev=6"], Err("Error: etcdserver: mvcc: required revision is a future revision")),
            (&["compaction", "3"], Err("Error: etcdserver: mvcc: required revision has been compacted")),
            (&["compaction", "2"], Err("Error: etcdserver: mvcc: required revision has been compacted")),
            (&["compaction", "99"], Err("Error: etcdserver: mvcc: required revision is a future revision")),
            (&["compaction", "--physical", "4"], Ok("compacted revision 4\n")),
            (&["get", "k", "--rev=3"], Err("Error: etcdserver: mvcc: required revision has been compacted")),
            (&["get", "k", "--rev=4"], Ok("k\nv3\n")),
        ];
        for (args, want) in cases {
            let out = etcdctl(ep, args);
            match want {
                Ok(stdout) => assert_eq!(out.ok(), *stdout, "{args:?}"),
                Err(msg) => assert!(out.err().lines().any(|l| l == *msg), "{args:?}: want {msg:?}; {out}"),
            }
        }
        // Compaction does not consume a revision.
        let j = etcdctl(ep, &["get", "k", "-w", "json"]).json();
        assert_eq!(int(&j["header"]["revision"]), 5, "{j}");
    });
}

/// `3.5.13` → (3, 5, 13).
fn semver(v: &str) -> (u64, u64, u64) {
    let mut parts = v.split(['.', '-', '+']).map(|p| p.parse::<u64>());
    match (parts.next(), parts.next(), parts.next()) {
        (Some(Ok(a)), Some(Ok(b)), Some(Ok(c))) => (a, b, c),
        _ => panic!("not a semver version: {v:?}"),
    }
}

#[test]
fn endpoint_status() {
    for_each_kind(|kind| {
        let s = Server::start(kind);
        // etcdctl 3.4 dials maintenance calls as `passthrough:///<endpoint>`,
        // so with a scheme the HTTP/2 :authority becomes `http://host:port`,
        // which hyper's h2 server rejects (PROTOCOL_ERROR) and grpc-go
        // accepts. A known raftstore limitation: use host:port endpoints.
        let ep = s.endpoint().trim_start_matches("http://");
        put_all(ep, &[("k", "v"), ("k", "v2")]); // revs 2, 3
        let j = etcdctl(ep, &["endpoint", "status", "-w", "json"]).json();
        let st = &j[0]["Status"];
        assert_eq!(j[0]["Endpoint"].as_str(), Some(ep), "{j}");
        assert_eq!(int(&st["header"]["revision"]), 3, "{j}");
        let version = semver(st["version"].as_str().unwrap_or_default());
        if kind == Kind::Raftstore {
            assert!(version >= (3, 5, 13), "kube-apiserver enables watch progress requests only on >= 3.5.13: {j}");
        }
        assert!(int(&st["dbSize"]) > 0, "{j}");
        assert_ne!(int(&st["leader"]), 0, "a single member leads itself: {j}");
        assert_eq!(int(&st["leader"]), int(&st["header"]["member_id"]), "{j}");
        assert!(int(&st["raftTerm"]) >= 1, "{j}");
        assert!(int(&st["raftIndex"]) >= 3, "{j}");
        let table = etcdctl(ep, &["endpoint", "status"]).ok().to_owned();
        assert!(table.starts_with(&format!("{ep}, ")), "{table}");
    });
}

#[test]
fn endpoint_health() {
    for_each_kind(|kind| {
        let s = Server::start(kind);
        let ep = s.endpoint();
        let out = etcdctl(ep, &["endpoint", "health"]);
        out.ok();
        // etcdctl 3.4 prints the verdict on stderr.
        assert!(out.stderr.starts_with(&format!("{ep} is healthy: successfully committed proposal: took = ")), "{out}");
        let j = etcdctl(ep, &["endpoint", "health", "-w", "json"]).json();
        assert_eq!(j[0]["health"], Value::Bool(true), "{j}");
        assert_eq!(etcdctl(ep, &["alarm", "list"]).ok(), "", "no alarms on a fresh member");
    });
}

#[test]
fn member_list() {
    for_each_kind(|kind| {
        let s = Server::start_with(kind, Options { name: "node-a".into(), ..Options::default() });
        let ep = s.endpoint();
        let j = etcdctl(ep, &["member", "list", "-w", "json"]).json();
        let members = j["members"].as_array().cloned().unwrap_or_default();
        assert_eq!(members.len(), 1, "{j}");
        let m = &members[0];
        assert_eq!(m["name"], "node-a", "{j}");
        assert_eq!(m["clientURLs"], serde_json::json!([ep]), "{j}");
        assert_eq!(m["peerURLs"], serde_json::json!([s.peer_url()]), "{j}");
        assert_ne!(int(&m["ID"]), 0, "{j}");
        assert_eq!(int(&m["ID"]), int(&j["header"]["member_id"]), "{j}");
        let id = format!("{:x}", int(&m["ID"]));
        assert_eq!(etcdctl(ep, &["member", "list"]).ok(), format!("{id}, started, node-a, {}, {ep}, false\n", s.peer_url()));
    });
}

#[test]
fn snapshot_save_and_restore() {
    for_each_kind(|kind| {
        let s = Server::start(kind);
        let ep = s.endpoint();
        put_all(ep, &[("s/a", "1"), ("s/b", "2"), ("s/a", "3"), ("s/c", "4")]); // revs 2-5
        etcdctl(ep, &["del", "s/c"]).ok(); // rev 6
        let before = etcdctl(ep, &["get", "s/", "--prefix", "-w", "json"]).json();
        let file = s.scratch().join("snap.db");
        let file_arg = file.display().to_string();
        let out = etcdctl(ep, &["snapshot", "save", &file_arg]);
        assert!(out.ok().contains(&format!("Snapshot saved at {file_arg}")), "{out}");
        assert!(std::fs::metadata(&file).map(|m| m.len()).unwrap_or(0) > 0);

        // Restore into a new data dir with a new member.
        let restored = s.scratch().join("restored");
        let peer = format!("http://127.0.0.1:{}", free_port());
        let cluster = format!("--initial-cluster=restored={peer}");
        let peer_arg = format!("--initial-advertise-peer-urls={peer}");
        let dir_arg = format!("--data-dir={}", restored.display());
        let restore_args = ["snapshot", "restore", file_arg.as_str(), dir_arg.as_str(), "--name=restored", cluster.as_str(), peer_arg.as_str()];
        let (tool, status) = match kind {
            Kind::Etcd => {
                let out = etcdctl(ep, &restore_args);
                out.ok();
                ("etcdctl", out.code)
            }
            Kind::Raftstore => {
                let out = std::process::Command::new(raftstore_bin()).args(restore_args).output().expect("run raftstore snapshot restore");
                assert!(out.status.success(), "raftstore {restore_args:?} failed: {}\n{}", String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr));
                ("raftstore", 0)
            }
        };
        assert_eq!(status, 0, "{tool} snapshot restore");
        let r = Server::start_with(kind, Options { name: "restored".into(), data_dir: Some(restored), peer_url: Some(peer.clone()), args: vec![] });
        let after = etcdctl(r.endpoint(), &["get", "s/", "--prefix", "-w", "json"]).json();
        assert_eq!(json_kvs(&after), json_kvs(&before), "restored data: {after}");
        assert_eq!(json_kvs(&after), vec![("s/a".into(), "3".into(), 2, 4, 2), ("s/b".into(), "2".into(), 3, 3, 1)]);
        assert!(int(&after["header"]["revision"]) >= 6, "the revision never goes back: {after}");
        let j = etcdctl(r.endpoint(), &["put", "s/d", "5", "-w", "json"]).json();
        assert!(int(&j["header"]["revision"]) > 6, "{j}");
        let m = etcdctl(r.endpoint(), &["member", "list", "-w", "json"]).json();
        assert_eq!(m["members"][0]["name"], "restored", "{m}");
        assert_eq!(m["members"][0]["peerURLs"], serde_json::json!([peer]), "{m}");
    });
}

/// A user's path off a real etcd: `raftstore snapshot save` reads a running
/// etcd through its client API into a raftstore snapshot, which
/// `raftstore snapshot restore` turns into a data dir serving the same keys
/// with the same revisions, versions and leases, compacted at the revision
/// read (from the live server; `etcd_snapshots` covers etcd's own files).
#[test]
fn snapshot_save_from_a_running_etcd_restores_with_its_revisions() {
    let e = Server::start(Kind::Etcd);
    let ep = e.endpoint();
    put_all(ep, &[("m/a", "1"), ("m/b", "2"), ("m/a", "3"), ("m/c", "4")]);
    etcdctl(ep, &["del", "m/c"]).ok();
    let lease = etcdctl(ep, &["lease", "grant", "600"]).ok().split_whitespace().nth(1).unwrap_or("").to_string();
    etcdctl(ep, &["put", "m/leased", "x", "--lease", &lease]).ok();
    let before = etcdctl(ep, &["get", "m/", "--prefix", "-w", "json"]).json();
    let revision = int(&before["header"]["revision"]);

    let file = e.scratch().join("from-etcd.snap");
    let file_arg = file.display().to_string();
    let out = std::process::Command::new(raftstore_bin()).args(["snapshot", "save", &file_arg, "--endpoints", ep]).output().expect("run raftstore snapshot save");
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "snapshot save: {stdout}{}", String::from_utf8_lossy(&out.stderr));
    assert!(stdout.contains(&format!("at revision {revision}")) && stdout.contains("1 leases"), "{stdout}");
    let restored = e.scratch().join("restored");
    let out = std::process::Command::new(raftstore_bin()).args(["snapshot", "restore", &file_arg, "--data-dir", &restored.display().to_string()]).output().expect("run raftstore snapshot restore");
    assert!(out.status.success(), "snapshot restore: {}", String::from_utf8_lossy(&out.stderr));

    let r = Server::start_with(Kind::Raftstore, Options { data_dir: Some(restored), ..Options::default() });
    let after = etcdctl(r.endpoint(), &["get", "m/", "--prefix", "-w", "json"]).json();
    assert_eq!(json_kvs(&after), json_kvs(&before));
    assert_eq!(int(&after["header"]["revision"]), revision, "{after}");
    let leased = after["kvs"].as_array().and_then(|kvs| kvs.iter().find(|kv| kv["key"] == "bS9sZWFzZWQ=")).cloned().unwrap_or_default();
    // etcdctl prints lease IDs zero-padded to 16 hex digits (`%016x`).
    assert_eq!(format!("{:016x}", int(&leased["lease"])), lease, "the lease binding carries over: {after}");
    let ttl = etcdctl(r.endpoint(), &["lease", "timetolive", &lease]).ok().to_string();
    assert!(ttl.contains("granted with TTL(600s)"), "{ttl}");
    // History before the revision is compacted, not served empty.
    let old = etcdctl(r.endpoint(), &["get", "m/a", &format!("--rev={}", revision - 2)]);
    assert!(old.err().contains("required revision has been compacted"), "{old}");
    // Writes continue after it.
    let j = etcdctl(r.endpoint(), &["put", "m/d", "5", "-w", "json"]).json();
    assert_eq!(int(&j["header"]["revision"]), revision + 1, "{j}");
    // Saving an unreachable server fails with the reason.
    let out = std::process::Command::new(raftstore_bin()).args(["snapshot", "save", &format!("{file_arg}.2"), "--endpoints", "http://127.0.0.1:1"]).output().expect("run");
    assert!(!out.status.success() && String::from_utf8_lossy(&out.stderr).starts_with("Error: "), "{}", String::from_utf8_lossy(&out.stderr));
    assert!(!std::path::Path::new(&format!("{file_arg}.2")).exists());
}
