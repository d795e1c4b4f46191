//! Graceful shutdown on SIGTERM (issue 16), as kube-apiserver does it:
//! `/readyz` fails first while requests are still served for
//! `--shutdown-delay-duration`; then open watches end cleanly, a watch that
//! allows bookmarks with a last BOOKMARK to resume from, and the process
//! exits 0.

use std::io::{BufRead, BufReader};
use std::process::{Child, Stdio};
use std::sync::mpsc;
use std::time::{Duration, Instant};

use crate::common::Server;

/// A `curl -N` watch as the admin user; its lines arrive on the receiver.
fn watch(s: &Server, path: &str) -> (Child, mpsc::Receiver<String>) {
    let mut child = crate::common::curl_as_admin(s).arg("-sSN").arg(format!("https://{}{path}", s.host_port())).stdout(Stdio::piped()).stderr(Stdio::piped()).spawn().expect("spawn curl");
    let out = child.stdout.take().expect("stdout");
    let (tx, rx) = mpsc::channel();
    std::thread::spawn(move || {
        for line in BufReader::new(out).lines().map_while(Result::ok) {
            if tx.send(line).is_err() {
                return;
            }
        }
    });
    (child, rx)
}

/// The next watch event `(type, resourceVersion, name)`, within 30 s.
fn next_event(rx: &mpsc::Receiver<String>) -> Option<(String, i64, String)> {
    let line = rx.recv_timeout(Duration::from_secs(30)).ok()?;
    let v: serde_json::Value = serde_json::from_str(&line).unwrap_or_else(|e| panic!("watch line {line:?}: {e}"));
    let meta = &v["object"]["metadata"];
    Some((v["type"].as_str().unwrap_or("").to_string(), meta["resourceVersion"].as_str().and_then(|r| r.parse().ok()).unwrap_or(0), meta["name"].as_str().unwrap_or("").to_string()))
}

fn create_configmap(s: &Server, name: &str) -> i64 {
    let out = s.kubectl(33, &["create", "configmap", name, "--from-literal=k=v", "-o", "jsonpath={.metadata.resourceVersion}"]);
    out.ok().trim().parse().unwrap_or_else(|_| panic!("resourceVersion of {name}: {out:?}"))
}

#[test]
fn sigterm_fails_readyz_first_then_ends_watches_with_a_bookmark_and_exits_cleanly() {
    let mut s = Server::start_with(&["--shutdown-delay-duration".into(), "8s".into()]);
    let first = create_configmap(&s, "before");
    let path = format!("/api/v1/namespaces/default/configmaps?watch=1&resourceVersion={first}");
    let (mut with_bookmarks, bookmarked) = watch(&s, &format!("{path}&allowWatchBookmarks=true"));
    let (mut plain, unbookmarked) = watch(&s, &path);
    let second = create_configmap(&s, "during");
    for rx in [&bookmarked, &unbookmarked] {
        assert_eq!(next_event(rx), Some(("ADDED".into(), second, "during".into())));
    }

    s.terminate();
    // `/readyz` fails first, naming the shutdown; `/livez` stays ok.
    let deadline = Instant::now() + Duration::from_secs(5);
    let readyz = loop {
        let r = s.get_admin("/readyz");
        if !r.starts_with("HTTP/1.1 200") || Instant::now() > deadline {
            break r;
        }
        std::thread::sleep(Duration::from_millis(50));
    };
    assert!(readyz.starts_with("HTTP/1.1 500"), "{readyz}");
    assert!(readyz.contains("[-]shutdown failed: reason withheld"), "{readyz}");
    assert!(readyz.contains("[+]etcd ok"), "{readyz}");
    assert!(s.get_admin("/livez").starts_with("HTTP/1.1 200"), "livez during the shutdown delay");
    // Requests are still served during the delay, and watches still
    // follow them.
    let third = create_configmap(&s, "after-sigterm");
    for rx in [&bookmarked, &unbookmarked] {
        assert_eq!(next_event(rx), Some(("ADDED".into(), third, "after-sigterm".into())));
    }

    // After the delay: the watch that allows bookmarks gets a last one, at
    // least as new as everything it saw, then both streams end cleanly.
    let (kind, rv, _) = next_event(&bookmarked).expect("a last BOOKMARK before the watch ends");
    assert_eq!(kind, "BOOKMARK");
    assert!(rv >= third, "last bookmark at {rv}, before the last event at {third}");
    assert_eq!(next_event(&bookmarked), None, "nothing after the last bookmark");
    assert_eq!(next_event(&unbookmarked), None, "a watch without bookmarks gets none");
    for (name, w) in [("with bookmarks", &mut with_bookmarks), ("plain", &mut plain)] {
        let out = w.wait_with_output_ref();
        assert_eq!(out.0, Some(0), "curl watch ({name}) did not end cleanly: {}", out.1);
    }
    let status = s.wait_exit(Duration::from_secs(60)).expect("the server exits after SIGTERM");
    assert!(status.success(), "exit status {status}");
}

/// `Child::wait` plus its stderr, without consuming the child.
trait WaitRef {
    fn wait_with_output_ref(&mut self) -> (Option<i32>, String);
}

impl WaitRef for Child {
    fn wait_with_output_ref(&mut self) -> (Option<i32>, String) {
        use std::io::Read as _;
        let code = self.wait().ok().and_then(|s| s.code());
        let mut err = String::new();
        if let Some(mut e) = self.stderr.take() {
            let _ = e.read_to_string(&mut err);
        }
        (code, err)
    }
}

/// A second SIGTERM ends the delay at once with status 1, as in
/// kube-apiserver; a delay too long for the clock (the review's
/// `18446744073709551615s`) serves until then instead of panicking at the
/// first signal.
#[test]
fn a_second_sigterm_exits_at_once_even_with_a_delay_too_long_for_the_clock() {
    let mut s = Server::start_with(&["--shutdown-delay-duration".into(), "18446744073709551615s".into()]);
    s.terminate();
    let deadline = Instant::now() + Duration::from_secs(5);
    loop {
        let r = s.get_admin("/readyz");
        if !r.starts_with("HTTP/1.1 200") {
            assert!(r.contains("[-]shutdown failed"), "{r}");
            break;
        }
        assert!(Instant::now() < deadline, "/readyz still ok after SIGTERM: {r}");
        std::thread::sleep(Duration::from_millis(100));
    }
    assert!(s.wait_exit(Duration::from_secs(1)).is_none(), "the server stopped during its delay");
    assert!(s.get_admin("/livez").starts_with("HTTP/1.1 200"), "still serving during the delay");
    s.terminate();
    let status = s.wait_exit(Duration::from_secs(5)).expect("the second SIGTERM did not end the server");
    assert_eq!(status.code(), Some(1), "{status:?}");
}
