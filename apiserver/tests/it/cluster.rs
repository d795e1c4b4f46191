//! Three apiserver processes forming one embedded-store cluster: each node
//! serves the API from its own replica and cache; a write through one node
//! is visible to a consistent LIST on another, and `kubectl get -w` on one
//! node sees writes made through another, each once.

use std::time::Duration;

use crate::common::Cluster;

const CM: &str = "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: NAME\ndata:\n  a: \"1\"\n";

#[test]
fn three_node_cluster_consistent_reads_and_watch() {
    let c = Cluster::start();
    let (a, b, n3) = (&c.nodes[0], &c.nodes[1], &c.nodes[2]);
    // One kubeconfig identity works on every node (shared --pki-dir).
    for n in &c.nodes {
        assert!(n.kubectl(33, &["get", "ns", "default", "-o", "name"]).ok().contains("namespace/default"));
    }
    let w = n3.kubectl_spawn(33, &["get", "cm", "-w", "--output-watch-events", "-l", "app=x"]);
    std::thread::sleep(Duration::from_millis(1500));
    // Write through A, then a consistent LIST (no resourceVersion) on C
    // must see it, every time.
    for i in 0..5 {
        let name = format!("c{i}");
        a.kubectl_stdin(33, &["create", "--validate=false", "-f", "-"], Some(&CM.replace("NAME", &name))).ok();
        let got = n3.kubectl(33, &["get", "cm", &name, "-o", "name"]);
        assert_eq!(got.ok().trim(), format!("configmap/{name}"));
        let list = n3.kubectl(33, &["get", "cm", "-o", "name"]);
        assert!(list.ok().lines().any(|l| l == format!("configmap/{name}")), "{list:?}");
    }
    // Label through B (starts matching the watch's selector), modify, delete
    // through A.
    b.kubectl(33, &["label", "cm", "c1", "app=x"]).ok();
    a.kubectl(33, &["annotate", "cm", "c1", "k=v"]).ok();
    b.kubectl(33, &["delete", "cm", "c1"]).ok();
    std::thread::sleep(Duration::from_millis(1500));
    let (events, out) = crate::common::stop_watch(w);
    let want: Vec<(String, String)> = ["ADDED", "MODIFIED", "DELETED"].iter().map(|e| (e.to_string(), "c1".to_string())).collect();
    assert_eq!(events, want, "{out}");
}
