//! Watch behaviour that kube-apiserver's watch cache depends on: periodic
//! progress notifications, progress requests (consistent reads from the
//! cache, KEP-2340), and delivery to a watcher that reads slowly.

use std::time::Duration;

use etcd_client::{EventType, WatchOptions};

use crate::common::{block_on, for_each_kind, within, Kind, Options, Server};

#[test]
fn progress_notify_and_progress_request() {
    for_each_kind(|kind| {
        let opts = Options { args: vec!["--experimental-watch-progress-notify-interval=500ms".into()], ..Default::default() };
        let s = Server::start_with(kind, opts);
        block_on(async {
            let mut c = s.client().await;
            let mut stream = c.watch("p/", Some(WatchOptions::new().with_prefix().with_progress_notify())).await.expect("watch");
            let created = within(Duration::from_secs(5), "created", stream.message()).await.expect("stream").expect("created");
            assert!(created.created());
            let put = c.put("p/a", "1", None).await.expect("put");
            let rev = put.header().expect("header").revision();
            let ev = within(Duration::from_secs(5), "event", stream.message()).await.expect("stream").expect("event");
            assert_eq!(ev.events().len(), 1);
            assert_eq!(ev.events()[0].event_type(), EventType::Put);

            // No events for a while: a progress notification at the current
            // revision, with no events.
            let note = within(Duration::from_secs(5), "progress notify", stream.message()).await.expect("stream").expect("notify");
            assert!(note.events().is_empty(), "{note:?}");
            assert_eq!(note.header().expect("header").revision(), rev, "{note:?}");

            // A progress request is answered after every pending event.
            c.put("other", "x", None).await.expect("put");
            stream.request_progress().await.expect("progress request");
            let mut seen = None;
            for _ in 0..5 {
                let r = within(Duration::from_secs(5), "progress reply", stream.message()).await.expect("stream").expect("reply");
                if r.events().is_empty() && r.header().map(|h| h.revision()) == Some(rev + 1) {
                    seen = Some(r);
                    break;
                }
            }
            let reply = seen.unwrap_or_else(|| panic!("no progress reply at revision {}", rev + 1));
            if kind == Kind::Raftstore {
                // etcd >= 3.4.31 / 3.5.13 answer with watch ID -1 (clientv3's
                // InvalidWatchID), which kube-apiserver broadcasts.
                assert_eq!(reply.watch_id(), -1, "{reply:?}");
            }
        });
    });
}

#[test]
fn slow_watcher_gets_every_event_in_order() {
    for_each_kind(|kind| {
        let s = Server::start(kind);
        block_on(async {
            let mut c = s.client().await;
            let mut stream = c.watch("s/", Some(WatchOptions::new().with_prefix().with_prev_key())).await.expect("watch");
            within(Duration::from_secs(5), "created", stream.message()).await.expect("stream");
            // Far more revisions than the server buffers per watcher, written
            // while the watcher does not read.
            let n = 6000;
            let mut first = 0;
            for i in 0..n {
                let r = c.put(format!("s/{}", i % 50), format!("{i}"), None).await.expect("put");
                if i == 0 {
                    first = r.header().expect("header").revision();
                }
            }
            let mut next = first;
            let mut got = 0;
            while got < n {
                let msg = within(Duration::from_secs(10), "events", stream.message()).await.expect("stream").expect("message");
                for e in msg.events() {
                    let kv = e.kv().expect("kv");
                    assert_eq!(kv.mod_revision(), next, "ordered, unique, no gap");
                    assert_eq!(kv.value_str().expect("utf8"), format!("{got}"));
                    if got >= 50 {
                        let prev = e.prev_kv().expect("prev_kv");
                        assert_eq!(prev.value_str().expect("utf8"), format!("{}", got - 50));
                    }
                    next += 1;
                    got += 1;
                }
            }
        });
    });
}
