//! `kill -9` under a concurrent write load loses no acknowledged write.
//! Run against etcd too, which proves the checker on a store known to be
//! durable; [`checker_catches_planted_violations`] proves it can fail.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use etcd_client::GetOptions;

use crate::common::{block_on, for_each_kind, within, Server};

const WRITERS: usize = 8;
/// How long the load runs before the kill.
const LOAD_FOR: Duration = Duration::from_millis(1500);

/// An acknowledged put: the key, its value and the revision the server returned.
#[derive(Clone, Debug, PartialEq, Eq)]
struct Acked {
    key: String,
    value: String,
    revision: i64,
}

/// What a key reads as after the restart: (value, create_revision, mod_revision).
type Observed = HashMap<String, (String, i64, i64)>;

/// Every acknowledged write must be present with its revision (keys are
/// written once, so create and mod revision both equal it), no two writes
/// may share a revision, and the first write after the restart must get a
/// revision above all of them.
fn check_durability(acked: &[Acked], observed: &Observed, next_revision: i64) -> Result<(), String> {
    let mut problems = Vec::new();
    let mut by_rev = HashMap::new();
    for a in acked {
        if let Some(other) = by_rev.insert(a.revision, &a.key) {
            problems.push(format!("{} and {other} were both acknowledged at revision {}", a.key, a.revision));
        }
        match observed.get(&a.key) {
            None => problems.push(format!("acknowledged {a:?} is missing")),
            Some((v, create, modr)) if *v != a.value || *create != a.revision || *modr != a.revision => {
                problems.push(format!("acknowledged {a:?} reads as value {v:?}, create_revision {create}, mod_revision {modr}"))
            }
            Some(_) => {}
        }
    }
    let max = acked.iter().map(|a| a.revision).max().unwrap_or(0);
    if next_revision <= max {
        problems.push(format!("the first write after the restart got revision {next_revision}, not above the acknowledged {max}"));
    }
    if problems.is_empty() {
        Ok(())
    } else {
        let n = problems.len();
        problems.truncate(20);
        Err(format!("{n} problems, first ones:\n{}", problems.join("\n")))
    }
}

#[test]
fn checker_catches_planted_violations() {
    let acked = vec![Acked { key: "a".into(), value: "1".into(), revision: 2 }, Acked { key: "b".into(), value: "2".into(), revision: 3 }];
    let good: Observed = [("a".into(), ("1".into(), 2, 2)), ("b".into(), ("2".into(), 3, 3))].into();
    assert_eq!(check_durability(&acked, &good, 4), Ok(()));

    let mut lost = good.clone();
    lost.remove("b");
    let mut wrong_rev = good.clone();
    wrong_rev.insert("a".into(), ("1".into(), 2, 5));
    let mut wrong_value = good.clone();
    wrong_value.insert("a".into(), ("x".into(), 2, 2));
    let mut dup = acked.clone();
    dup[1].revision = 2;
    let planted: [(&str, &[Acked], &Observed, i64); 5] = [
        ("lost write", &acked, &lost, 4),
        ("wrong revision", &acked, &wrong_rev, 4),
        ("wrong value", &acked, &wrong_value, 4),
        ("revision went back", &acked, &good, 3),
        ("shared revision", &dup, &good, 4),
    ];
    for (name, acked, observed, next) in planted {
        assert!(check_durability(acked, observed, next).is_err(), "checker missed: {name}");
    }
}

#[test]
fn kill9_mid_load_loses_no_acknowledged_write() {
    for_each_kind(|kind| {
        let mut s = Server::start(kind);
        let acked = Arc::new(Mutex::new(Vec::<Acked>::new()));
        block_on(async {
            let mut tasks = Vec::new();
            for w in 0..WRITERS {
                let client = s.client().await;
                let acked = acked.clone();
                tasks.push(tokio::spawn(async move {
                    let mut client = client;
                    for i in 0.. {
                        let key = format!("crash/{w}/{i:06}");
                        let value = format!("v-{w}-{i}");
                        let put = client.put(key.clone(), value.clone(), None);
                        match tokio::time::timeout(Duration::from_secs(3), put).await {
                            Ok(Ok(r)) => {
                                let revision = r.header().map(|h| h.revision()).unwrap_or(0);
                                acked.lock().unwrap().push(Acked { key, value, revision });
                            }
                            // The server is gone: stop.
                            Ok(Err(_)) | Err(_) => return,
                        }
                    }
                }));
            }
            let start = Instant::now();
            while start.elapsed() < LOAD_FOR {
                tokio::time::sleep(Duration::from_millis(50)).await;
            }
            s.kill9();
            for t in tasks {
                let _ = within(Duration::from_secs(10), "writer to stop after the kill", t).await;
            }
        });
        let acked = acked.lock().unwrap().clone();
        assert!(acked.len() >= 50, "only {} writes were acknowledged before the kill: the load was too light to test anything", acked.len());

        s.restart();
        block_on(async {
            let mut c = s.client().await;
            let r = within(Duration::from_secs(20), "range over crash/ after restart", c.get("crash/", Some(GetOptions::new().with_prefix()))).await.expect("range after restart");
            let observed: Observed =
                r.kvs().iter().map(|kv| (String::from_utf8_lossy(kv.key()).into_owned(), (String::from_utf8_lossy(kv.value()).into_owned(), kv.create_revision(), kv.mod_revision()))).collect();
            let next = c.put("crash-next", "x", None).await.expect("put after restart");
            let next = next.header().map(|h| h.revision()).unwrap_or(0);
            let verdict = check_durability(&acked, &observed, next);
            assert!(verdict.is_ok(), "{kind}: {} acknowledged writes, {} keys after restart: {}", acked.len(), observed.len(), verdict.unwrap_err());
            eprintln!("{kind}: {} acknowledged, {} present after kill -9 (unacknowledged ones may or may not survive)", acked.len(), observed.len());
            // Every survivor, acknowledged or not, must be a write a client sent.
            for (k, (v, _, _)) in &observed {
                let (w, i) = k["crash/".len()..].split_once('/').expect("key shape");
                let i: usize = i.parse().expect("index");
                assert_eq!(*v, format!("v-{w}-{i}"), "{k} has a value no client wrote");
            }
        });
    });
}
