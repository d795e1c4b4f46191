//! Issue 16: a node of a three-node cluster that starts without a quorum
//! keeps waiting for its peers instead of exiting, as kube-apiserver waits
//! for etcd. Meanwhile it serves HTTPS: `/livez` ok, `/readyz` and
//! `/healthz` failing on their `etcd` check, and API requests a 429
//! `storage is (re)initializing` that clients retry. Once its peers come,
//! in any order and after long gaps, every node becomes ready and serves
//! kubectl.

use std::time::{Duration, Instant};

use crate::common::{body_of, ClusterPlan, Server};

/// Starts the nodes of `order`, each `gap` after the one before; returns
/// them in node order, once `serving on` (not ready yet).
fn start_in_order(plan: &ClusterPlan, order: [usize; 3], gap: Duration) -> Vec<Server> {
    let mut started: Vec<(usize, Server)> = Vec::new();
    for (k, i) in order.into_iter().enumerate() {
        if k > 0 {
            std::thread::sleep(gap);
        }
        started.push((i, plan.spawn(i).wait_serving()));
    }
    started.sort_by_key(|(i, _)| *i);
    started.into_iter().map(|(_, s)| s).collect()
}

/// Every node becomes ready and serves kubectl; a write through one node
/// is read through each.
fn assert_cluster_works(nodes: &[Server], name: &str) {
    for n in nodes {
        n.wait_ready(Duration::from_secs(60));
    }
    nodes[0].kubectl(33, &["create", "configmap", name, "--from-literal=a=b"]).ok();
    for n in nodes {
        assert!(n.kubectl(33, &["get", "ns", "default", "-o", "name"]).ok().contains("namespace/default"));
        assert_eq!(n.kubectl(33, &["get", "cm", name, "-o", "name"]).ok().trim(), format!("configmap/{name}"));
        let verbose = n.get_admin("/readyz?verbose");
        assert_eq!(body_of(&verbose), "[+]ping ok\n[+]etcd ok\n[+]informer-sync ok\n[+]shutdown ok\nreadyz check passed\n", "{verbose}");
    }
}

#[test]
fn a_node_without_quorum_serves_not_ready_until_its_peers_come() {
    let plan = ClusterPlan::new();
    let began = Instant::now();
    let alone = plan.spawn(0).wait_serving();

    // Alive, not ready, and it says why, in kube's format.
    let livez = alone.get_anonymous("/livez");
    assert!(livez.starts_with("HTTP/1.1 200") && body_of(&livez) == "ok", "{livez}");
    for (path, tail) in [("/readyz", "readyz check failed\n"), ("/readyz?verbose", "readyz check failed\n"), ("/healthz", "healthz check failed\n")] {
        let r = alone.get_anonymous(path);
        assert!(r.starts_with("HTTP/1.1 500"), "{path}: {r}");
        let body = body_of(&r);
        assert!(body.starts_with("[+]ping ok\n") && body.contains("[-]etcd failed: reason withheld\n") && body.ends_with(tail), "{path}: {r}");
    }
    let single = alone.get_anonymous("/readyz/etcd");
    assert!(single.starts_with("HTTP/1.1 500") && body_of(&single) == "internal server error: etcd check failed", "{single}");

    // The API answers at once with kube's not-ready Status and a
    // Retry-After, never hanging.
    let t = Instant::now();
    let r = alone.get_admin("/api/v1/namespaces/default");
    assert!(t.elapsed() < Duration::from_secs(5), "took {:?}", t.elapsed());
    assert!(r.starts_with("HTTP/1.1 429"), "{r}");
    assert!(r.to_ascii_lowercase().contains("retry-after: 1\r\n"), "{r}");
    assert!(r.contains(r#""reason":"TooManyRequests""#) && r.contains(r#""message":"storage is (re)initializing""#) && r.contains(r#""code":429"#), "{r}");
    // kubectl retries as told, then fails cleanly with the Status.
    let out = alone.kubectl(33, &["get", "ns", "default"]);
    assert_ne!(out.code, 0, "{out:?}");
    assert!(out.stderr.contains("storage is (re)initializing"), "{out:?}");
    // Discovery does not need the store.
    assert!(alone.kubectl(33, &["api-resources", "-o", "name"]).ok().contains("configmaps"));

    // Still waiting, still serving, 60 s in (the longest gap the issue
    // names between two starts).
    std::thread::sleep(Duration::from_secs(60).saturating_sub(began.elapsed()));
    assert!(alone.get_anonymous("/livez").starts_with("HTTP/1.1 200"));
    assert!(!alone.is_ready());

    // Two of three make a quorum: both become ready; the third comes 60 s
    // after the second and joins.
    let second_at = Instant::now();
    let second = plan.spawn(1).wait_serving();
    alone.wait_ready(Duration::from_secs(60));
    second.wait_ready(Duration::from_secs(60));
    std::thread::sleep(Duration::from_secs(60).saturating_sub(second_at.elapsed()));
    let third = plan.spawn(2).wait_serving();
    assert_cluster_works(&[alone, second, third], "late-peers");
}

#[test]
fn any_start_order_gives_a_working_cluster() {
    let cases: [([usize; 3], Duration); 2] = [([2, 0, 1], Duration::from_secs(8)), ([1, 2, 0], Duration::from_secs(3))];
    for (order, gap) in cases {
        let plan = ClusterPlan::new();
        let nodes = start_in_order(&plan, order, gap);
        assert_cluster_works(&nodes, &format!("order-{}{}{}", order[0], order[1], order[2]));
    }
}
