//! Issue 16, `deploy/cluster.sh`: the PKI it creates, the files it writes
//! for real hosts, and a three-node cluster behind haproxy that loses its
//! raft leader to `kill -9` and loses nothing else: no request after the
//! kill fails, watchers resume without a gap, every acknowledged write
//! survives, and the node rejoins. Then a node replaced through
//! `etcdctl member remove / add --learner / promote`, and a rolling
//! restart of all three nodes under a write load.
//!
//! What `kubectl get -w` does when its connection drops (found here, with
//! kubectl 1.27 and 1.33): it ends at once with exit status 0 and prints
//! nothing on stderr (at `-v=6` client-go logs `Unexpected EOF during watch
//! stream event decoding`); it does not re-watch. A user runs it again,
//! which lists the current objects (as ADDED) before watching, so every
//! object that exists is shown again; an object created and deleted while
//! no watch ran would not be. The `kube` crate's watcher, like client-go's
//! reflector, re-watches from the last resourceVersion it saw and misses
//! nothing.

use std::collections::BTreeSet;
use std::path::Path;
use std::process::Command;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use futures::StreamExt;
use k8s_openapi::api::core::v1::ConfigMap;
use kube::runtime::watcher::{self, Event};
use kube::runtime::WatchStreamExt;

use crate::common::deploy::{run_script, Deployed, KubectlWatch, NAMES};

/// A ConfigMap of the failover suite, as YAML.
fn cm(name: &str) -> String {
    cm_in(name, "failover")
}

/// A ConfigMap labelled `suite=<suite>`, as YAML.
fn cm_in(name: &str, suite: &str) -> String {
    format!("apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: {name}\n  labels:\n    suite: {suite}\ndata:\n  a: \"1\"\n")
}

/// `openssl x509 -text` of a certificate.
fn x509_text(path: &Path) -> String {
    let out = Command::new("openssl").args(["x509", "-noout", "-text", "-in"]).arg(path).output().expect("openssl");
    assert!(out.status.success(), "openssl x509 {}: {out:?}", path.display());
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// The value line under an extension heading (`X509v3 Subject Alternative
/// Name:`), split at commas.
fn extension(text: &str, heading: &str) -> BTreeSet<String> {
    let mut lines = text.lines().skip_while(|l| !l.trim_start().starts_with(heading));
    lines.next();
    lines.next().unwrap_or_default().split(',').map(|s| s.trim().to_string()).filter(|s| !s.is_empty()).collect()
}

fn set(items: &[&str]) -> BTreeSet<String> {
    items.iter().map(|s| s.to_string()).collect()
}

/// Every file under `dir` with its bytes.
fn snapshot(dir: &Path) -> Vec<(std::path::PathBuf, Vec<u8>)> {
    let mut out = Vec::new();
    let mut stack = vec![dir.to_path_buf()];
    while let Some(d) = stack.pop() {
        for e in std::fs::read_dir(&d).unwrap() {
            let p = e.unwrap().path();
            if p.is_dir() {
                stack.push(p);
            } else {
                out.push((p.clone(), std::fs::read(&p).unwrap()));
            }
        }
    }
    out.sort();
    out
}

/// `cluster.sh pki`: each certificate names what it must (SANs, EKUs,
/// subject), chains to the CA, and a second run keeps every file.
#[test]
fn deploy_pki_names_and_usages() {
    let dir = tempfile::tempdir().unwrap();
    let args = ["pki", "--node", "a=10.0.0.1,a.example.test", "--node", "b=10.0.0.2,b.example.test", "--lb-name", "api.example.test"];
    let out = run_script(dir.path(), &[], &args);
    assert_eq!(out.code, 0, "{out:?}");
    let pki = dir.path().join("pki");
    let serving_common =
        ["DNS:api.example.test", "DNS:localhost", "IP Address:127.0.0.1", "DNS:kubernetes", "DNS:kubernetes.default", "DNS:kubernetes.default.svc", "DNS:kubernetes.default.svc.cluster.local"];
    let serving = |own: &[&str]| own.iter().chain(&serving_common).map(|s| s.to_string()).collect::<BTreeSet<String>>();
    let server = set(&["TLS Web Server Authentication"]);
    let both = set(&["TLS Web Server Authentication", "TLS Web Client Authentication"]);
    let client = set(&["TLS Web Client Authentication"]);
    // (file, subject, SANs, extended key usages)
    let cases: Vec<(&str, &str, BTreeSet<String>, BTreeSet<String>)> = vec![
        ("nodes/a/apiserver.crt", "CN = kube-apiserver", serving(&["IP Address:10.0.0.1", "DNS:a.example.test"]), server.clone()),
        ("nodes/b/apiserver.crt", "CN = kube-apiserver", serving(&["IP Address:10.0.0.2", "DNS:b.example.test"]), server),
        ("nodes/a/peer.crt", "CN = a", set(&["IP Address:10.0.0.1", "DNS:a.example.test"]), both.clone()),
        ("nodes/b/peer.crt", "CN = b", set(&["IP Address:10.0.0.2", "DNS:b.example.test"]), both),
        ("admin.crt", "O = system:masters, CN = kubernetes-admin", BTreeSet::new(), client),
    ];
    for (file, subject, sans, ekus) in &cases {
        let path = pki.join(file);
        let text = x509_text(&path);
        assert!(text.contains(&format!("Subject: {subject}\n")), "{file}: {text}");
        assert_eq!(&extension(&text, "X509v3 Subject Alternative Name:"), sans, "{file}");
        assert_eq!(&extension(&text, "X509v3 Extended Key Usage:"), ekus, "{file}");
        assert!(text.contains("CA:FALSE"), "{file}: {text}");
        let verify = Command::new("openssl").arg("verify").arg("-CAfile").arg(pki.join("ca.crt")).arg(&path).output().unwrap();
        assert!(verify.status.success(), "{file} does not chain to the CA: {verify:?}");
    }
    let ca = x509_text(&pki.join("ca.crt"));
    assert!(ca.contains("CA:TRUE") && ca.contains("Certificate Sign"), "{ca}");
    // Each node's --pki-dir has what the apiserver reads there.
    for node in ["a", "b"] {
        for f in ["ca.crt", "apiserver.crt", "apiserver.key", "peer.crt", "peer.key", "admin.crt", "admin.key", "sa.key", "sa.pub"] {
            assert!(pki.join("nodes").join(node).join(f).exists(), "nodes/{node}/{f}");
        }
    }
    // The ServiceAccount key pair: sa.pub is sa.key's public half.
    let derived = Command::new("openssl").args(["pkey", "-pubout", "-in"]).arg(pki.join("sa.key")).output().unwrap();
    assert!(derived.status.success(), "{derived:?}");
    assert_eq!(String::from_utf8_lossy(&derived.stdout), std::fs::read_to_string(pki.join("sa.pub")).unwrap());
    // Keys are private.
    use std::os::unix::fs::PermissionsExt as _;
    for key in ["ca.key", "admin.key", "sa.key", "nodes/a/apiserver.key", "nodes/a/peer.key"] {
        assert_eq!(std::fs::metadata(pki.join(key)).unwrap().permissions().mode() & 0o077, 0, "{key} is readable by others");
    }
    // Idempotent: a second run keeps every file as it was.
    let before = snapshot(&pki);
    let again = run_script(dir.path(), &[], &args);
    assert_eq!(again.code, 0, "{again:?}");
    assert!(!again.stdout.contains("created") && !again.stderr.contains("warning"), "{again:?}");
    assert_eq!(snapshot(&pki), before, "a second run changed files");
}

/// `cluster.sh hosts`: per-host env files that define every variable the
/// systemd unit uses, a haproxy.cfg that haproxy accepts, and an admin
/// kubeconfig pointing at the load balancer.
#[test]
fn deploy_hosts_files() {
    let dir = tempfile::tempdir().unwrap();
    let out = run_script(dir.path(), &[], &["hosts", "--node", "n1=10.0.0.1,cp1.example.test", "--node", "n2=10.0.0.2", "--node", "n3=cp3.example.test", "--lb-name", "api.example.test"]);
    assert_eq!(out.code, 0, "{out:?}");
    let hosts = dir.path().join("hosts");
    let unit = std::fs::read_to_string(Path::new(env!("CARGO_MANIFEST_DIR")).join("../deploy/systemd/kubers-apiserver.service")).unwrap();
    let used: BTreeSet<String> = regex::Regex::new(r"\$\{?([A-Z_]+)\}?").unwrap().captures_iter(&unit).map(|c| c[1].to_string()).collect();
    assert!(used.contains("INITIAL_CLUSTER"), "{used:?}");
    let initial = "n1=https://10.0.0.1:2380,n2=https://10.0.0.2:2380,n3=https://cp3.example.test:2380";
    for (name, host) in [("n1", "10.0.0.1"), ("n2", "10.0.0.2"), ("n3", "cp3.example.test")] {
        let env = std::fs::read_to_string(hosts.join(name).join("apiserver.env")).unwrap();
        let vars: BTreeSet<String> = env.lines().filter(|l| !l.starts_with('#')).filter_map(|l| l.split_once('=')).map(|(k, _)| k.to_string()).collect();
        assert!(used.is_subset(&vars), "{name}: the unit uses {:?} that the env file does not set", used.difference(&vars).collect::<Vec<_>>());
        assert!(env.contains(&format!("\nNAME={name}\n")), "{env}");
        assert!(env.contains(&format!("\nINITIAL_CLUSTER={initial}\n")), "{env}");
        assert!(env.contains(&format!("\nINITIAL_ADVERTISE_PEER_URLS=https://{host}:2380\n")), "{env}");
        let serving = x509_text(&hosts.join(name).join("pki/apiserver.crt"));
        let sans = extension(&serving, "X509v3 Subject Alternative Name:");
        assert!(sans.contains(&format!("{}:{host}", if host.starts_with("10.") { "IP Address" } else { "DNS" })) && sans.contains("DNS:api.example.test"), "{name}: {sans:?}");
        assert!(out.stdout.contains(&format!("# {name} ({host})")), "{}", out.stdout);
    }
    // haproxy accepts the load balancer's config (with its CA where the
    // config expects it on the load balancer).
    let cfg = std::fs::read_to_string(hosts.join("lb/haproxy.cfg")).unwrap();
    assert!(cfg.contains("server n3 cp3.example.test:6443"), "{cfg}");
    let local = dir.path().join("haproxy-check.cfg");
    std::fs::write(&local, cfg.replace("/etc/haproxy/kubers-ca.crt", hosts.join("lb/kubers-ca.crt").to_str().unwrap()).replace("/dev/log", "stdout format raw")).unwrap();
    let check = Command::new("haproxy").arg("-c").arg("-f").arg(&local).output().expect("haproxy (install Debian's haproxy; .ci/setup does)");
    assert!(check.status.success(), "{check:?}\n{cfg}");
    // systemd accepts the unit (with a binary that exists here).
    let local_unit = dir.path().join("kubers-apiserver.service");
    std::fs::write(&local_unit, unit.replace("/usr/local/bin/apiserver", "/bin/true")).unwrap();
    let verify = Command::new("systemd-analyze").arg("verify").arg(&local_unit).output().expect("systemd-analyze (Debian's systemd; .ci/setup installs it)");
    assert!(verify.status.success() && verify.stderr.is_empty(), "{verify:?}");
    let kubeconfig = std::fs::read_to_string(hosts.join("admin.kubeconfig")).unwrap();
    assert!(kubeconfig.contains("server: https://api.example.test:6443\n"), "{kubeconfig}");
    // A loopback cluster's dir is refused, so its certificates are not
    // taken for the real hosts'.
    std::fs::write(dir.path().join("cluster.env"), "").unwrap();
    let refused = run_script(dir.path(), &[], &["hosts", "--node", "n1=10.0.0.1", "--node", "n2=10.0.0.2", "--node", "n3=10.0.0.3", "--lb-name", "x"]);
    assert_eq!(refused.code, 1, "{refused:?}");
    assert!(refused.stderr.contains("holds a loopback cluster"), "{refused:?}");
}

/// Pairs of (name, value) for `run_script`'s environment.
fn env(pairs: &[(&str, &str)]) -> Vec<(String, String)> {
    pairs.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect()
}

/// The entries of `dir`, sorted (empty if it does not exist).
fn entries(dir: &Path) -> Vec<String> {
    let mut names: Vec<String> = std::fs::read_dir(dir).map(|rd| rd.map(|e| e.unwrap().file_name().to_string_lossy().into_owned()).collect()).unwrap_or_default();
    names.sort();
    names
}

/// The pids of processes whose command line mentions `needle`.
fn processes_mentioning(needle: &str) -> Vec<String> {
    let mut pids = Vec::new();
    for e in std::fs::read_dir("/proc").unwrap().map_while(Result::ok) {
        let pid = e.file_name().to_string_lossy().into_owned();
        if !pid.bytes().all(|b| b.is_ascii_digit()) || pid == std::process::id().to_string() {
            continue;
        }
        if let Ok(cmdline) = std::fs::read(e.path().join("cmdline")) {
            if String::from_utf8_lossy(&cmdline).contains(needle) {
                pids.push(pid);
            }
        }
    }
    pids
}

/// Runs `cluster.sh ARGS`, expected to be refused; should it start a
/// cluster after all (cluster.env written), takes that down again so the
/// failing test leaves no processes behind.
fn run_refused(dir: &Path, env: &[(String, String)], args: &[&str]) -> crate::common::Out {
    let out = run_script(dir, env, args);
    if dir.join("cluster.env").exists() {
        let _ = run_script(dir, env, &["down"]);
    }
    out
}

/// Nodes, ports and LB port of a loopback cluster that `up` would refuse
/// before it starts anything: free ports (bound at once, then released)
/// except for `lb`.
fn loopback_env(lb: u16) -> Vec<(String, String)> {
    let held: Vec<std::net::TcpListener> = (0..9).map(|_| std::net::TcpListener::bind("127.0.0.1:0").unwrap()).collect();
    let p: Vec<String> = held.iter().map(|l| l.local_addr().unwrap().port().to_string()).collect();
    env(&[("SECURE_PORTS", &p[0..3].join(",")), ("CLIENT_PORTS", &p[3..6].join(",")), ("PEER_PORTS", &p[6..9].join(",")), ("LB_PORT", &lb.to_string())])
}

/// Arguments `cluster.sh` has no use for are refused with the usage (exit
/// status 2) before anything happens, instead of being ignored.
#[test]
fn deploy_refuses_unknown_arguments() {
    let dir = tempfile::tempdir().unwrap();
    let cluster = dir.path().join("c");
    let cases: &[(&[&str], &str)] = &[
        (&["up", "--bogus"], "up takes no arguments, got: --bogus"),
        (&["status", "junk"], "status takes no arguments, got: junk"),
        (&["down", "x"], "down takes no arguments"),
        (&["rolling-restart", "now"], "rolling-restart takes no arguments"),
        (&["start"], "start wants one node name"),
        (&["stop", "n1", "n2"], "stop wants one node name, got: n1 n2"),
        (&["replace"], "replace wants one node name"),
        (&["clean", "--yes"], "clean: unknown argument --yes"),
        (&["pki", "--bogus"], "pki: unknown argument --bogus"),
        (&["hosts", "--node", "n1=10.0.0.1", "--bogus"], "hosts: unknown argument --bogus"),
        (&["frob"], "unknown command frob"),
        (&[], ""),
    ];
    for (args, message) in cases {
        let out = run_refused(&cluster, &loopback_env(1), args);
        assert_eq!(out.code, 2, "{args:?}: {out:?}");
        assert!(out.stderr.contains(message) && out.stderr.contains("usage: deploy/cluster.sh COMMAND"), "{args:?}: {out:?}");
        assert!(!cluster.exists(), "{args:?} created the cluster dir");
    }
}

/// `clean` deletes only a dir that cluster.sh made, and one holding the
/// PKI of real hosts (`hosts/`, the CA key) only with `--delete-hosts-pki`;
/// `up` and `pki` do not take over a dir holding anything else (which would
/// let a later `clean` delete it).
#[test]
fn deploy_clean_deletes_only_its_own_dirs() {
    let dir = tempfile::tempdir().unwrap();
    // A dir cluster.sh did not make.
    let foreign = dir.path().join("foreign");
    std::fs::create_dir(&foreign).unwrap();
    std::fs::write(foreign.join("precious"), "data").unwrap();
    let out = run_script(&foreign, &[], &["clean"]);
    assert_eq!(out.code, 1, "{out:?}");
    assert!(out.stderr.contains("refusing to delete") && out.stderr.contains("cluster.sh did not make it"), "{out:?}");
    for args in [&["pki"][..], &["up"][..]] {
        let out = run_refused(&foreign, &loopback_env(1), args);
        assert_eq!(out.code, 1, "{args:?}: {out:?}");
        assert!(out.stderr.contains("is not empty and not a cluster dir"), "{args:?}: {out:?}");
    }
    assert_eq!(entries(&foreign), ["precious"], "the foreign dir was written to");
    assert_eq!(run_script(&foreign, &[], &["clean"]).code, 1);
    assert_eq!(std::fs::read_to_string(foreign.join("precious")).unwrap(), "data");
    // A dir that does not exist: nothing to do.
    let missing = dir.path().join("missing");
    let out = run_script(&missing, &[], &["clean"]);
    assert_eq!(out.code, 0, "{out:?}");
    assert!(out.stdout.contains("nothing to clean"), "{out:?}");
    // A dir `pki` made is cluster.sh's.
    let made = dir.path().join("made");
    assert_eq!(run_script(&made, &[], &["pki"]).code, 0);
    assert!(made.join(".kubers-cluster").exists());
    let out = run_script(&made, &[], &["clean"]);
    assert_eq!(out.code, 0, "{out:?}");
    assert!(!made.exists(), "{out:?}");
    // The files of real hosts: only with the flag.
    let prod = dir.path().join("prod");
    let hosts = ["hosts", "--node", "n1=10.0.0.1", "--node", "n2=10.0.0.2", "--node", "n3=10.0.0.3", "--lb-name", "api.example.test"];
    assert_eq!(run_script(&prod, &[], &hosts).code, 0);
    let out = run_script(&prod, &[], &["clean"]);
    assert_eq!(out.code, 1, "{out:?}");
    assert!(out.stderr.contains("holds the PKI of real hosts") && out.stderr.contains("clean --delete-hosts-pki"), "{out:?}");
    assert!(prod.join("pki/ca.key").exists() && prod.join("hosts/n1/apiserver.env").exists());
    // ... nor is a loopback cluster started in it.
    let out = run_refused(&prod, &loopback_env(1), &["up"]);
    assert_eq!(out.code, 1, "{out:?}");
    assert!(out.stderr.contains("holds the PKI and files of real hosts"), "{out:?}");
    assert!(!prod.join("cluster.env").exists());
    let out = run_script(&prod, &[], &["clean", "--delete-hosts-pki"]);
    assert_eq!(out.code, 0, "{out:?}");
    assert!(!prod.exists());
}

/// `hosts` refuses node lists that cannot make a working cluster, before it
/// writes anything; and a second run whose hosts differ from the ones the
/// existing certificates name, saying which certificates to delete (the CA
/// is kept when they are issued again).
#[test]
fn deploy_hosts_refuses_unworkable_nodes() {
    let dir = tempfile::tempdir().unwrap();
    let prod = dir.path().join("prod");
    let node = |spec: &str| ["--node".to_string(), spec.to_string()];
    let run = |specs: &[&str], extra: &[&str]| {
        let mut args = vec!["hosts".to_string()];
        args.extend(specs.iter().flat_map(|s| node(s)));
        args.extend(["--lb-name".to_string(), "api.example.test".to_string()]);
        args.extend(extra.iter().map(|s| s.to_string()));
        run_script(&prod, &[], &args.iter().map(String::as_str).collect::<Vec<_>>())
    };
    // (nodes, more arguments, what the refusal says)
    let cases: &[(&[&str], &[&str], &str)] = &[
        (&["n1=10.0.0.1", "n2=10.0.0.2"], &[], "2 node(s); give an odd number of at least 3"),
        (&["n1=10.0.0.1"], &[], "1 node(s)"),
        (&["n1=10.0.0.1", "n2=10.0.0.2", "n3=10.0.0.3", "n4=10.0.0.4"], &[], "4 node(s)"),
        (&["n1=10.0.0.1", "n1=10.0.0.2", "n3=10.0.0.3"], &[], "node n1 is given twice"),
        (&["n1=10.0.0.1", "n2=10.0.0.1", "n3=10.0.0.3"], &[], "10.0.0.1 is a host of both n1 and n2"),
        (&["n1=10.0.0.1,cp.example.test", "n2=10.0.0.2", "n3=10.0.0.3,cp.example.test"], &[], "cp.example.test is a host of both n1 and n3"),
        (&["n1=10.0.0.1,", "n2=10.0.0.2", "n3=10.0.0.3"], &[], "is not a host name or address"),
        (&["../n1=10.0.0.1", "n2=10.0.0.2", "n3=10.0.0.3"], &[], "a node name is letters"),
        (&["n1=10.0.0.1,api.example.test", "n2=10.0.0.2", "n3=10.0.0.3"], &[], "also a host of node n1, where the apiserver has :6443"),
        (&["n1=10.0.0.1", "n2=10.0.0.2", "n3=10.0.0.3"], &["--lb-port", "70000"], "--lb-port 70000 is not a port"),
    ];
    for (specs, extra, message) in cases {
        let out = run(specs, extra);
        assert_eq!(out.code, 1, "{specs:?}: {out:?}");
        assert!(out.stderr.contains(message), "{specs:?}: {out:?}");
        assert!(!prod.exists(), "{specs:?}: refused, but wrote {:?}", entries(&prod));
    }
    // haproxy beside a node works on another port.
    let out = run(&["n1=10.0.0.1,api.example.test", "n2=10.0.0.2", "n3=10.0.0.3"], &["--lb-port", "7443", "--lb-host", "lb1.example.test"]);
    assert_eq!(out.code, 0, "{out:?}");
    assert!(out.stdout.contains("root@lb1.example.test:/etc/haproxy/kubers.cfg"), "{}", out.stdout);
    assert!(std::fs::read_to_string(prod.join("hosts/lb/haproxy.cfg")).unwrap().contains("bind *:7443"));
    let out = run_script(&prod, &[], &["clean", "--delete-hosts-pki"]);
    assert_eq!(out.code, 0, "{out:?}");

    // n2 moves from 10.0.0.2 to 10.0.0.9.
    let first = ["n1=10.0.0.1", "n2=10.0.0.2", "n3=10.0.0.3"];
    let moved = ["n1=10.0.0.1", "n2=10.0.0.9", "n3=10.0.0.3"];
    let out = run(&first, &[]);
    assert_eq!(out.code, 0, "{out:?}");
    assert!(out.stdout.contains("root@LB_HOST:") && out.stdout.contains("LB_HOST: substitute"), "{}", out.stdout);
    let ca = std::fs::read(prod.join("pki/ca.crt")).unwrap();
    let before = snapshot(&prod);
    let out = run(&moved, &[]);
    assert_eq!(out.code, 1, "{out:?}");
    let n2 = prod.join("pki/nodes/n2");
    let rm = format!("rm {0}/apiserver.crt {0}/apiserver.key {0}/peer.crt {0}/peer.key", n2.display());
    assert!(out.stderr.contains(&rm) && out.stderr.contains("member update"), "{out:?}");
    assert_eq!(snapshot(&prod), before, "a refused run changed files");
    for f in ["apiserver.crt", "apiserver.key", "peer.crt", "peer.key"] {
        std::fs::remove_file(n2.join(f)).unwrap();
    }
    let out = run(&moved, &[]);
    assert_eq!(out.code, 0, "{out:?}");
    assert_eq!(std::fs::read(prod.join("pki/ca.crt")).unwrap(), ca, "the CA was replaced");
    assert_eq!(extension(&x509_text(&prod.join("hosts/n2/pki/peer.crt")), "X509v3 Subject Alternative Name:"), set(&["IP Address:10.0.0.9"]));
    let env = std::fs::read_to_string(prod.join("hosts/n2/apiserver.env")).unwrap();
    assert!(env.contains("\nINITIAL_ADVERTISE_PEER_URLS=https://10.0.0.9:2380\n"), "{env}");
}

/// `pki` issues a certificate again when its key is gone, or is not its
/// key (it said "kept" and left the node unable to start), and brings the
/// nodes' copies of the admin pair and sa.pub up to date; the CA stays.
#[test]
fn deploy_pki_reissues_certificates_without_their_key() {
    let dir = tempfile::tempdir().unwrap();
    assert_eq!(run_script(dir.path(), &[], &["pki"]).code, 0);
    let pki = dir.path().join("pki");
    let n3 = pki.join("nodes/n3");
    let ca = std::fs::read(pki.join("ca.crt")).unwrap();
    let pubkey = |args: &[&str], f: &Path| {
        let o = Command::new("openssl").args(args).arg(f).output().unwrap();
        assert!(o.status.success(), "{o:?}");
        o.stdout
    };
    let matches = |base: &Path| pubkey(&["x509", "-noout", "-pubkey", "-in"], &base.with_extension("crt")) == pubkey(&["pkey", "-pubout", "-in"], &base.with_extension("key"));
    let old_peer = std::fs::read(n3.join("peer.crt")).unwrap();
    std::fs::remove_file(n3.join("peer.key")).unwrap();
    // The wrong key: n1's.
    std::fs::copy(pki.join("nodes/n1/apiserver.key"), n3.join("apiserver.key")).unwrap();
    std::fs::remove_file(pki.join("admin.key")).unwrap();
    std::fs::remove_file(pki.join("sa.key")).unwrap();
    let out = run_script(dir.path(), &[], &["pki"]);
    assert_eq!(out.code, 0, "{out:?}");
    assert!(out.stdout.contains(&format!("{}/peer.key is missing: issuing", n3.display())), "{out:?}");
    assert!(out.stdout.contains(&format!("{}/apiserver.key is not the key of", n3.display())), "{out:?}");
    assert_ne!(std::fs::read(n3.join("peer.crt")).unwrap(), old_peer);
    assert_ne!(std::fs::read(n3.join("apiserver.key")).unwrap(), std::fs::read(pki.join("nodes/n1/apiserver.key")).unwrap());
    for base in [n3.join("peer"), n3.join("apiserver"), pki.join("admin"), pki.join("nodes/n1/admin")] {
        assert!(matches(&base), "{} does not match its key", base.display());
        let verify = Command::new("openssl").arg("verify").arg("-CAfile").arg(pki.join("ca.crt")).arg(base.with_extension("crt")).output().unwrap();
        assert!(verify.status.success(), "{verify:?}");
    }
    for f in ["admin.crt", "admin.key", "sa.key", "sa.pub"] {
        assert_eq!(std::fs::read(pki.join(f)).unwrap(), std::fs::read(n3.join(f)).unwrap(), "nodes/n3/{f} is stale");
    }
    assert_eq!(pubkey(&["pkey", "-pubout", "-in"], &pki.join("sa.key")), std::fs::read(pki.join("sa.pub")).unwrap(), "sa.pub is not sa.key's");
    assert_eq!(std::fs::read(pki.join("ca.crt")).unwrap(), ca, "the CA was replaced");
    // Without the CA key nothing can be issued: said so, the CA kept.
    std::fs::remove_file(pki.join("ca.key")).unwrap();
    std::fs::remove_file(n3.join("peer.key")).unwrap();
    let out = run_script(dir.path(), &[], &["pki"]);
    assert_eq!(out.code, 1, "{out:?}");
    assert!(out.stderr.contains("ca.key is missing"), "{out:?}");
    assert_eq!(std::fs::read(pki.join("ca.crt")).unwrap(), ca);
}

/// `up` checks its settings before it saves them in cluster.env (which
/// would keep them for every later `up`) or starts anything.
#[test]
fn deploy_up_refuses_bad_settings() {
    let dir = tempfile::tempdir().unwrap();
    let cluster = dir.path().join("c");
    let base = loopback_env(1);
    let with = |k: &str, v: &str| {
        let mut e: Vec<(String, String)> = base.iter().filter(|(n, _)| n != k).cloned().collect();
        e.push((k.to_string(), v.to_string()));
        e
    };
    // (variable, value, what the refusal says)
    let cases = [
        ("SHUTDOWN_DELAY", "5", "SHUTDOWN_DELAY=5 (from the environment) is not a duration"),
        ("SHUTDOWN_DELAY", "5 s", "is not a duration"),
        ("SHUTDOWN_DELAY", "-1s", "is not a duration"),
        ("SHUTDOWN_DELAY", "soon", "is not a duration"),
        ("NODE_NAMES", "n1,n1,n3", "NODE_NAMES: n1 twice"),
        ("LB_PORT", "http", "'http' (from the environment) is not a port"),
        ("LB_PORT", "0", "is not a port"),
    ];
    for (k, v, message) in cases {
        let out = run_refused(&cluster, &with(k, v), &["up"]);
        assert_eq!(out.code, 1, "{k}={v}: {out:?}");
        assert!(out.stderr.contains(message), "{k}={v}: {out:?}");
        assert!(!cluster.exists(), "{k}={v}: refused, but wrote {:?}", entries(&cluster));
    }
    // A bad value saved by an older cluster.sh is named where it is.
    std::fs::create_dir(&cluster).unwrap();
    let saved: String = base.iter().map(|(k, v)| format!("{k}={v}\n")).collect();
    std::fs::write(cluster.join("cluster.env"), format!("{saved}SHUTDOWN_DELAY=5\n")).unwrap();
    let out = run_refused(&cluster, &base, &["up"]);
    assert_eq!(out.code, 1, "{out:?}");
    assert!(out.stderr.contains(&format!("SHUTDOWN_DELAY=5 (from {}/cluster.env)", cluster.display())), "{out:?}");
    assert_eq!(entries(&cluster), ["cluster.env"]);
}

/// A second cluster's `up` on an LB_PORT that is taken fails, saying so,
/// and leaves nothing running (haproxy would otherwise share the port
/// through SO_REUSEPORT and take the other cluster's connections).
#[test]
fn deploy_up_refuses_lb_port_in_use() {
    let dir = tempfile::tempdir().unwrap();
    let taken = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let port = taken.local_addr().unwrap().port();
    let out = run_refused(dir.path(), &loopback_env(port), &["up"]);
    assert_eq!(out.code, 1, "{out:?}");
    assert!(out.stderr.contains(&format!("port in use on 127.0.0.1: {port} (LB_PORT, haproxy)")), "{out:?}");
    assert!(processes_mentioning(dir.path().to_str().unwrap()).is_empty(), "processes of the refused cluster run");
    assert!(!dir.path().join("cluster.env").exists() && !dir.path().join("run").exists(), "{:?}", entries(dir.path()));
    drop(taken);
}

/// The peer port speaks TLS only, to clients with a certificate of the
/// cluster CA; the members list https peer URLs and elected a leader over
/// them.
fn assert_peer_traffic_is_tls(d: &Deployed) {
    let members = d.etcdctl(0, &["member", "list", "-w", "simple"]);
    let lines: Vec<&str> = members.ok().lines().collect();
    assert_eq!(lines.len(), 3, "{members:?}");
    for (i, name) in NAMES.iter().enumerate() {
        let line = lines.iter().find(|l| l.split(", ").nth(2) == Some(name)).unwrap_or_else(|| panic!("{name} not in {members:?}"));
        let f: Vec<&str> = line.split(", ").collect();
        assert_eq!((f[1], f[3], f[5]), ("started", format!("https://127.0.0.1:{}", d.peer[i]).as_str(), "false"), "{line}");
    }
    d.leader();
    let pki = d.dir.path().join("pki");
    let ca = d.ca();
    let curl = |url: String, extra: &[&str]| Command::new("curl").args(["-s", "-o", "/dev/null", "--max-time", "5", "--cacert"]).arg(&ca).args(extra).arg(url).status().expect("curl").code();
    for (i, name) in NAMES.iter().enumerate() {
        let port = d.peer[i];
        // Plaintext HTTP gets a TLS alert record (content type 21) or a
        // closed connection, never an HTTP answer.
        let mut tcp = std::net::TcpStream::connect(("127.0.0.1", port)).unwrap();
        tcp.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
        std::io::Write::write_all(&mut tcp, b"GET / HTTP/1.1\r\nHost: x\r\n\r\n").unwrap();
        let mut answer = Vec::new();
        let _ = std::io::Read::read_to_end(&mut tcp, &mut answer);
        assert!(answer.first().is_none_or(|b| *b == 21), "{name}: plaintext to the peer port got {:?}", String::from_utf8_lossy(&answer));
        // TLS without a client certificate is refused; with a peer
        // certificate of the cluster CA the exchange works.
        let url = format!("https://127.0.0.1:{port}/");
        let anonymous = curl(url.clone(), &[]);
        assert_ne!(anonymous, Some(0), "{name}: TLS without a client certificate was served");
        let peer = pki.join("nodes").join(NAMES[(i + 1) % 3]);
        let mutual = curl(url, &["--cert", peer.join("peer.crt").to_str().unwrap(), "--key", peer.join("peer.key").to_str().unwrap()]);
        assert_eq!(mutual, Some(0), "{name}: TLS with a peer certificate");
    }
}

/// Create, get, list, apply and delete through haproxy.
fn kubectl_suite(d: &Deployed, minor: u32) {
    let name = format!("suite-{minor}");
    let created = d.kubectl_at(minor, None, &["create", "--validate=false", "-f", "-"], Some(&cm(&name)));
    assert_eq!(created.ok().trim(), format!("configmap/{name} created"));
    let json: serde_json::Value = serde_json::from_str(d.kubectl(minor, &["get", "cm", &name, "-o", "json"]).ok()).unwrap();
    assert_eq!(json["data"]["a"], "1");
    let listed = d.kubectl(minor, &["get", "cm", "-l", "suite=failover", "-o", "name"]);
    assert!(listed.ok().lines().any(|l| l == format!("configmap/{name}")), "{listed:?}");
    let applied = format!("applied-{minor}");
    let manifest = cm(&applied);
    assert_eq!(d.kubectl_at(minor, None, &["apply", "--validate=false", "-f", "-"], Some(&manifest)).ok().trim(), format!("configmap/{applied} created"));
    let changed = manifest.replace("a: \"1\"", "a: \"2\"");
    assert_eq!(d.kubectl_at(minor, None, &["apply", "--validate=false", "-f", "-"], Some(&changed)).ok().trim(), format!("configmap/{applied} configured"));
    assert_eq!(d.kubectl(minor, &["get", "cm", &applied, "-o", "jsonpath={.data.a}"]).ok(), "2");
    for n in [&name, &applied] {
        assert_eq!(d.kubectl(minor, &["delete", "cm", n]).ok().trim(), format!("configmap \"{n}\" deleted"));
    }
    let gone = d.kubectl(minor, &["get", "cm", &name]);
    assert!(gone.code == 1 && gone.stderr.contains(&format!("configmaps \"{name}\" not found")), "{gone:?}");
}

/// What a `kube::runtime::watcher` saw.
#[derive(Default, Debug)]
struct Seen {
    names: BTreeSet<String>,
    /// Initial lists started (1 = never re-listed).
    inits: usize,
    init_done: bool,
    errors: Vec<String>,
}

/// Runs a `kube::runtime::watcher` (bookmarks on, as by default) on the
/// ConfigMaps matching `labels`, through the kubeconfig, recording into
/// `seen`.
async fn kube_watch(kubeconfig: std::path::PathBuf, labels: &'static str, seen: Arc<Mutex<Seen>>) {
    let kc = kube::config::Kubeconfig::read_from(kubeconfig).expect("kubeconfig");
    let cfg = kube::Config::from_custom_kubeconfig(kc, &kube::config::KubeConfigOptions::default()).await.expect("config");
    let api: kube::Api<ConfigMap> = kube::Api::namespaced(kube::Client::try_from(cfg).expect("client"), "default");
    let mut stream = watcher::watcher(api, watcher::Config::default().labels(labels)).default_backoff().boxed();
    while let Some(ev) = stream.next().await {
        let mut s = seen.lock().unwrap();
        match ev {
            Ok(Event::Init) => s.inits += 1,
            Ok(Event::InitApply(c) | Event::Apply(c)) => {
                s.names.insert(c.metadata.name.unwrap_or_default());
            }
            Ok(Event::InitDone) => s.init_done = true,
            Ok(Event::Delete(_)) => {}
            Err(e) => s.errors.push(e.to_string()),
        }
    }
}

/// Watchers per node: creates `probe` (which every watcher gets) and
/// waits until the nodes have sent it `total` times in all (once per
/// watcher), counting from `before` (the nodes' sent events before).
#[track_caller]
fn watchers_per_node(d: &Deployed, probe: &str, total: u64, before: &[u64]) -> Vec<u64> {
    d.kubectl_at(33, None, &["create", "--validate=false", "-f", "-"], Some(&cm(probe))).ok();
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        let now = d.configmap_events_dispatched();
        let per: Vec<u64> = now.iter().zip(before).map(|(n, b)| n - b).collect();
        if per.iter().sum::<u64>() == total {
            return per;
        }
        assert!(Instant::now() < deadline, "{probe}: sent {per:?} times, expected {total} in all");
        std::thread::sleep(Duration::from_millis(100));
    }
}

/// The node of a watcher just added to those of `tally` (watchers per
/// node), found with probe object `probe`; updates the tally.
#[track_caller]
fn place(d: &Deployed, probe: &str, tally: &mut Vec<u64>, before: &[u64]) -> usize {
    let per = watchers_per_node(d, probe, tally.iter().sum::<u64>() + 1, before);
    let node = (0..3).find(|&i| per[i] == tally[i] + 1).unwrap_or_else(|| panic!("watchers per node went from {tally:?} to {per:?}"));
    *tally = per;
    node
}

#[track_caller]
fn wait_until(what: &str, timeout: Duration, mut f: impl FnMut() -> bool) {
    let deadline = Instant::now() + timeout;
    while !f() {
        assert!(Instant::now() < deadline, "{what}");
        std::thread::sleep(Duration::from_millis(100));
    }
}

/// Steers new connections through haproxy's round robin to one node. A
/// loop that opens the same number of connections each round (a watcher,
/// then a kubectl call or two) lands on the same node every round; from
/// where the last two rounds landed this learns how far the robin moves
/// in a round, and shifts it on by what is missing to reach `target`.
struct Steer {
    target: usize,
    last: Option<usize>,
    shifted: usize,
    step: usize,
}

impl Steer {
    fn new(target: usize) -> Steer {
        Steer { target, last: None, shifted: 0, step: 0 }
    }

    /// Call before opening the next connection to be steered.
    fn before_next(&mut self, d: &Deployed) {
        let Some(last) = self.last else { return };
        self.shifted = (3 + 3 + self.target - last - self.step % 3) % 3;
        for _ in 0..self.shifted {
            d.shift_round_robin();
        }
    }

    /// Call with the node the steered connection landed on.
    fn landed(&mut self, node: usize) {
        if let Some(last) = self.last {
            self.step = (3 + 3 + node - last - self.shifted) % 3;
        }
        self.last = Some(node);
    }
}

/// The failover-suite objects node `i` lists (a consistent list, straight
/// from that node).
fn names_on(d: &Deployed, i: usize) -> BTreeSet<String> {
    labelled_on(d, i, "suite=failover")
}

/// The ConfigMaps matching `labels` that node `i` lists (a consistent
/// list, straight from that node).
fn labelled_on(d: &Deployed, i: usize, labels: &str) -> BTreeSet<String> {
    let out = d.kubectl_at(33, Some(i), &["get", "cm", "-l", labels, "-o", "name"], None);
    out.ok().lines().map(|l| l.trim_start_matches("configmap/").to_string()).collect()
}

/// Issue 16 "Three-node failover": the deploy command's cluster, used
/// through its haproxy kubeconfig, loses its raft leader to `kill -9`.
#[test]
fn deploy_three_node_failover() {
    let d = Deployed::up();
    assert_peer_traffic_is_tls(&d);
    for minor in [33, 27] {
        kubectl_suite(&d, minor);
    }
    // The admin identity works on every node directly too.
    for i in 0..3 {
        assert_eq!(d.kubectl_at(27, Some(i), &["get", "ns", "default", "-o", "name"], None).ok().trim(), "namespace/default");
    }
    // The root CA ConfigMaps of every namespace are published before the
    // watchers start: the probes below count every ConfigMap event.
    wait_until("kube-root-ca.crt in every namespace", Duration::from_secs(30), || {
        let ns = d.kubectl_at(33, None, &["get", "ns", "--field-selector", "status.phase=Active", "-o", "name"], None).stdout.lines().count();
        let cms = d.kubectl_at(33, None, &["get", "cm", "-A", "--field-selector", "metadata.name=kube-root-ca.crt", "-o", "name"], None).stdout.lines().count();
        ns > 0 && cms >= ns
    });
    d.kubectl_at(33, None, &["create", "--validate=false", "-f", "-"], Some(&cm("pre"))).ok();

    // Watchers through haproxy, at least one of each kind on the leader.
    // Each new one is located by a probe object, which every watcher gets
    // from its node's watch cache.
    let leader = d.leader();
    let mut acked: BTreeSet<String> = ["pre".to_string()].into();
    // Every node's own informers watch ConfigMaps too (the ServiceAccount
    // controllers' root CA publisher): a first probe, before any test
    // watcher, counts them.
    let before = d.configmap_events_dispatched();
    d.kubectl_at(33, None, &["create", "--validate=false", "-f", "-"], Some(&cm("probe-0"))).ok();
    acked.insert("probe-0".to_string());
    std::thread::sleep(Duration::from_secs(2));
    let mut tally: Vec<u64> = d.configmap_events_dispatched().iter().zip(&before).map(|(n, b)| n - b).collect();
    let mut probe = 0;
    let mut kubectl_watches: Vec<(KubectlWatch, usize)> = Vec::new();
    let mut steer = Steer::new(leader);
    while !kubectl_watches.iter().any(|(_, n)| *n == leader) {
        steer.before_next(&d);
        assert!(kubectl_watches.len() < 9, "haproxy never placed a kubectl watch on the leader: {:?}", kubectl_watches.iter().map(|(_, n)| n).collect::<Vec<_>>());
        let minor = if kubectl_watches.len().is_multiple_of(2) { 33 } else { 27 };
        let before = d.configmap_events_dispatched();
        let w = KubectlWatch::spawn(&d, minor, &["cm", "-l", "suite=failover"]);
        w.wait_for("pre", Duration::from_secs(30));
        probe += 1;
        let name = format!("probe-{probe}");
        let node = place(&d, &name, &mut tally, &before);
        steer.landed(node);
        acked.insert(name);
        kubectl_watches.push((w, node));
    }
    let rt = tokio::runtime::Builder::new_multi_thread().worker_threads(2).enable_all().build().unwrap();
    let mut kube_watches: Vec<(Arc<Mutex<Seen>>, usize)> = Vec::new();
    let mut steer = Steer::new(leader);
    while !kube_watches.iter().any(|(_, n)| *n == leader) {
        steer.before_next(&d);
        assert!(kube_watches.len() < 9, "haproxy never placed a kube watcher on the leader: {:?}", kube_watches.iter().map(|(_, n)| n).collect::<Vec<_>>());
        let before = d.configmap_events_dispatched();
        let seen = Arc::new(Mutex::new(Seen::default()));
        rt.spawn(kube_watch(d.kubeconfig(), "suite=failover", seen.clone()));
        wait_until("kube watcher listed", Duration::from_secs(30), || seen.lock().unwrap().init_done);
        probe += 1;
        let name = format!("probe-{probe}");
        let node = place(&d, &name, &mut tally, &before);
        steer.landed(node);
        acked.insert(name);
        kube_watches.push((seen, node));
    }

    for i in 0..3 {
        let name = format!("before-{i}");
        d.kubectl_at(33, None, &["create", "--validate=false", "-f", "-"], Some(&cm(&name))).ok();
        acked.insert(name);
    }

    // A writer that keeps creating objects through haproxy while the
    // leader dies.
    let stop = Arc::new(AtomicBool::new(false));
    let writes: Arc<Mutex<Vec<(String, crate::common::Out)>>> = Arc::default();
    let writer = {
        let (stop, writes, kubeconfig, cache) = (stop.clone(), writes.clone(), d.kubeconfig(), d.dir.path().join("kubectl-cache-writer"));
        std::thread::spawn(move || {
            for k in 0.. {
                if stop.load(Ordering::Relaxed) {
                    break;
                }
                let name = format!("during-{k}");
                let mut child = Command::new(crate::common::kubectl_path(33))
                    .arg("--kubeconfig")
                    .arg(&kubeconfig)
                    .arg("--cache-dir")
                    .arg(&cache)
                    .args(["create", "--validate=false", "-f", "-"])
                    .stdin(std::process::Stdio::piped())
                    .stdout(std::process::Stdio::piped())
                    .stderr(std::process::Stdio::piped())
                    .spawn()
                    .unwrap();
                std::io::Write::write_all(&mut child.stdin.take().unwrap(), cm(&name).as_bytes()).unwrap();
                let o = child.wait_with_output().unwrap();
                let out = crate::common::Out { code: o.status.code().unwrap_or(-1), stdout: String::from_utf8_lossy(&o.stdout).into(), stderr: String::from_utf8_lossy(&o.stderr).into() };
                writes.lock().unwrap().push((name, out));
            }
        })
    };
    wait_until("the writer makes progress", Duration::from_secs(30), || writes.lock().unwrap().iter().filter(|(_, o)| o.code == 0).count() >= 3);

    d.kill9(leader);

    // Right after the kill: every write and read through haproxy succeeds,
    // with either kubectl.
    for i in 0..10u32 {
        let minor = if i.is_multiple_of(2) { 33 } else { 27 };
        let name = format!("after-{i}");
        let created = d.kubectl_at(minor, None, &["create", "--validate=false", "-f", "-"], Some(&cm(&name)));
        assert_eq!(created.ok().trim(), format!("configmap/{name} created"), "{}", d.logs());
        acked.insert(name.clone());
        assert_eq!(d.kubectl(minor, &["get", "cm", &name, "-o", "name"]).ok().trim(), format!("configmap/{name}"));
        let listed = d.kubectl(minor, &["get", "cm", "-l", "suite=failover", "-o", "name"]);
        assert!(listed.ok().lines().any(|l| l == format!("configmap/{name}")), "{listed:?}");
    }
    stop.store(true, Ordering::Relaxed);
    writer.join().unwrap();
    // Of the writer's requests only the one in flight at the kill may have
    // failed (its outcome is unknown); the rest succeeded.
    let writes = std::mem::take(&mut *writes.lock().unwrap());
    let failed: Vec<_> = writes.iter().filter(|(_, o)| o.code != 0).collect();
    assert!(failed.len() <= 1, "more than the request in flight at the kill failed: {failed:?}");
    acked.extend(writes.iter().filter(|(_, o)| o.code == 0).map(|(n, _)| n.clone()));

    // No acknowledged write is lost: each survivor lists every one, and
    // they list the same objects.
    let survivors: Vec<usize> = (0..3).filter(|&i| i != leader).collect();
    let existing = names_on(&d, survivors[0]);
    assert!(acked.is_subset(&existing), "lost acknowledged writes: {:?}", acked.difference(&existing).collect::<Vec<_>>());
    assert_eq!(names_on(&d, survivors[1]), existing);

    // The kube watchers resumed without a gap: each saw every object,
    // without listing again. Those on the leader saw the objects written
    // after it died, so they watched on from another node: their stream
    // ended, which kube's watcher does not report as an error, and it
    // watched again from its last resourceVersion. That new connection can
    // race the kill: the kernel may accept it on the dying process's
    // listening socket and then reset it (haproxy logs `SD`, and cannot
    // retry a connection that was established), so the watcher may report
    // one failed start before its backoff retries; nothing is missed.
    // Watchers on survivors kept their connection.
    for (seen, node) in &kube_watches {
        wait_until(&format!("kube watcher on {} saw every object: {seen:?}", NAMES[*node]), Duration::from_secs(60), || existing.is_subset(&seen.lock().unwrap().names));
        let s = seen.lock().unwrap();
        assert_eq!(s.inits, 1, "the watcher on {} listed again instead of resuming: {s:?}", NAMES[*node]);
        if *node != leader {
            assert!(s.errors.is_empty(), "the watcher on surviving {} failed: {:?}", NAMES[*node], s.errors);
        }
    }
    // kubectl get -w on a survivor saw everything; on the leader it ended
    // (exit 0), and run again it shows every object.
    for (w, node) in &mut kubectl_watches {
        if *node == leader {
            let (status, stderr) = w.wait_exit(Duration::from_secs(30)).expect("kubectl get -w on the killed leader still runs");
            assert!(status.success(), "kubectl get -w ended with {status}: {stderr}");
            let again = KubectlWatch::spawn(&d, 33, &["cm", "-l", "suite=failover"]);
            wait_until("kubectl get -w run again shows every object", Duration::from_secs(30), || existing.is_subset(&(&w.names() | &again.names())));
        } else {
            wait_until(&format!("kubectl get -w on {} saw every object: {:?}", NAMES[*node], w.events()), Duration::from_secs(60), || existing.is_subset(&w.names()));
            assert!(w.exited().is_none(), "kubectl get -w on surviving {} ended", NAMES[*node]);
        }
    }

    // The killed node rejoins: ready, and it serves what was written while
    // it was down.
    let started = d.script(&["start", NAMES[leader]]);
    assert_eq!(started.code, 0, "{started:?}\n{}", d.logs());
    assert_eq!(d.kubectl_at(33, Some(leader), &["get", "--raw", "/readyz"], None).ok().trim(), "ok");
    assert_eq!(names_on(&d, leader), existing);
    let last = cm("after-rejoin");
    d.kubectl_at(27, None, &["create", "--validate=false", "-f", "-"], Some(&last)).ok();
    for (i, name) in NAMES.iter().enumerate() {
        assert!(names_on(&d, i).contains("after-rejoin"), "{name} misses after-rejoin");
    }
    drop(rt);
}

/// `cluster.sh replace`: the node's member is removed, its data wiped, it
/// joins again as a learner and is promoted; it then serves every object
/// and the cluster has three voting members.
#[test]
fn deploy_replace_node() {
    let d = Deployed::up();
    for i in 0..5 {
        d.kubectl_at(33, None, &["create", "--validate=false", "-f", "-"], Some(&cm(&format!("r{i}")))).ok();
    }
    let victim = d.leader();
    let old_id = d.etcdctl(victim, &["endpoint", "status", "-w", "simple"]).ok().split(", ").nth(1).unwrap().to_string();
    let out = d.script(&["replace", NAMES[victim]]);
    assert_eq!(out.code, 0, "{out:?}\n{}", d.logs());
    let members = d.etcdctl(victim, &["member", "list", "-w", "simple"]);
    let lines: Vec<Vec<&str>> = members.ok().lines().map(|l| l.split(", ").collect()).collect();
    assert_eq!(lines.len(), 3, "{members:?}");
    for l in &lines {
        assert_eq!((l[1], l[5]), ("started", "false"), "{members:?}");
    }
    let new = lines.iter().find(|l| l[2] == NAMES[victim]).unwrap_or_else(|| panic!("{members:?}"));
    assert_ne!(new[0], old_id, "the replaced node kept its member ID: {members:?}");
    let want: BTreeSet<String> = (0..5).map(|i| format!("r{i}")).collect();
    assert_eq!(names_on(&d, victim), want);
    d.kubectl_at(27, Some(victim), &["create", "--validate=false", "-f", "-"], Some(&cm("after-replace"))).ok();
    for (i, name) in NAMES.iter().enumerate() {
        assert!(names_on(&d, i).contains("after-replace"), "{name} misses after-replace");
    }
    // down signals every node, then waits for each: a node that exited
    // meanwhile was stopped all the same (it used to say "was not running").
    let down = d.script(&["down"]);
    assert_eq!(down.code, 0, "{down:?}");
    for name in NAMES {
        assert!(down.stdout.contains(&format!("stopped {name} (pid ")), "{down:?}");
    }
    assert!(!down.stdout.contains("was not running"), "{down:?}");
    // status with every node down answers at once, without etcdctl's
    // retries (JSON on stderr) against stores that are not there.
    let started = Instant::now();
    let status = d.script(&["status"]);
    assert_eq!(status.code, 0, "{status:?}");
    assert!(started.elapsed() < Duration::from_secs(2), "status took {:?}", started.elapsed());
    assert!(status.stderr.is_empty() && status.stdout.contains("member list: no node runs"), "{status:?}");
}

// ------------------------------------------------------- rolling restart

/// The label of the rolling-restart test's objects.
const ROLLING: &str = "suite=rolling";

/// Attempts per write before a writer gives up (client-go retries a
/// Retry-After answer 10 times, kube's `RetryPolicy::server_retry` 15).
const MAX_ATTEMPTS: usize = 20;

/// How long a writer waits for an answer before it calls the request hung
/// (not a retriable kind: a graceful shutdown answers or closes).
const ANSWER_TIMEOUT: Duration = Duration::from_secs(30);

/// One failed attempt of a write, as its client saw it.
#[derive(Debug, Clone)]
struct Failure {
    /// What went wrong, coarse enough to count: `connection reset`,
    /// `HTTP/2 GOAWAY`, `503 ServiceUnavailable, Retry-After`, ...
    kind: String,
    /// Whether clients retry this kind: connection errors (nothing or
    /// only part of an answer came back), HTTP/2 GOAWAY and refused
    /// streams, 429 and 5xx with `Retry-After` (client-go's `checkWait`).
    retriable: bool,
    /// The server's `Retry-After`, in seconds.
    retry_after: Option<u64>,
    /// The error as the client reported it.
    detail: String,
    /// When the attempt ended, UTC, as the nodes' logs print it.
    at: String,
}

impl Failure {
    fn new(kind: impl Into<String>, retriable: bool, detail: impl Into<String>) -> Failure {
        Failure { kind: kind.into(), retriable, retry_after: None, detail: detail.into(), at: utc_now() }
    }
}

/// The time of day, UTC, to the millisecond (`02:57:54.191`), to find an
/// error's moment in the nodes' logs.
fn utc_now() -> String {
    let t = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap_or_default();
    let s = t.as_secs() % 86_400;
    format!("{:02}:{:02}:{:02}.{:03}", s / 3600, s / 60 % 60, s % 60, t.subsec_millis())
}

/// What one attempt of a create got.
enum Attempt {
    /// 201 Created.
    Created,
    /// 409 AlreadyExists.
    AlreadyExists,
    /// Anything else.
    Failed(Failure),
}

/// How a write ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Outcome {
    /// Created by one of its attempts.
    Created,
    /// 409 AlreadyExists on a retry: an attempt that failed had landed.
    /// Acknowledged; the test checks the object is there.
    ExistedOnRetry,
    /// A non-retriable error, or the attempts ran out.
    GaveUp,
}

/// One write (a create of a uniquely named ConfigMap) and its attempts.
#[derive(Debug, Clone)]
struct Write {
    writer: String,
    name: String,
    failures: Vec<Failure>,
    outcome: Outcome,
}

/// The retry rule the writers share: the outcome once `a` settles the
/// write, or `None` to try again. `failures` are the earlier attempts';
/// a failed `a` joins them.
fn settle(failures: &mut Vec<Failure>, a: Attempt) -> Option<Outcome> {
    match a {
        Attempt::Created => Some(Outcome::Created),
        // Names are unique: only an attempt of this write can have made it.
        Attempt::AlreadyExists if !failures.is_empty() => Some(Outcome::ExistedOnRetry),
        Attempt::AlreadyExists => {
            failures.push(Failure::new("409 AlreadyExists on a first attempt", false, ""));
            Some(Outcome::GaveUp)
        }
        Attempt::Failed(f) => {
            let retriable = f.retriable;
            failures.push(f);
            (!retriable || failures.len() >= MAX_ATTEMPTS).then_some(Outcome::GaveUp)
        }
    }
}

/// The pause before the next attempt: the server's `Retry-After`, else
/// 50 ms doubling up to 1 s (client-go's and kube's backoffs are alike).
fn backoff(failures: &[Failure]) -> Duration {
    match failures.last().and_then(|f| f.retry_after) {
        Some(s) => Duration::from_secs(s.min(5)),
        None => Duration::from_millis(50 << failures.len().min(5)).min(Duration::from_secs(1)),
    }
}

/// A transport error (no HTTP answer, or part of one) by its kind, from
/// the error's chain of sources.
fn transport_failure(e: &(dyn std::error::Error + 'static)) -> Failure {
    let mut kinds = Vec::new();
    let mut chain = Vec::new();
    let mut cur = Some(e);
    while let Some(err) = cur {
        chain.push(err.to_string());
        let kind = if let Some(c) = err.downcast_ref::<hyper_util::client::legacy::Error>() {
            c.is_connect().then_some("connect")
        } else if let Some(h) = err.downcast_ref::<hyper::Error>() {
            if h.is_incomplete_message() {
                Some("connection closed before the answer")
            } else if h.is_canceled() {
                Some("connection closed before the request was sent")
            } else if h.is_closed() || h.is_body_write_aborted() {
                Some("connection closed")
            } else {
                None
            }
        } else if let Some(io) = err.downcast_ref::<std::io::Error>() {
            match io.kind() {
                std::io::ErrorKind::ConnectionRefused => Some("connection refused"),
                std::io::ErrorKind::ConnectionReset => Some("connection reset"),
                std::io::ErrorKind::ConnectionAborted => Some("connection aborted"),
                std::io::ErrorKind::BrokenPipe => Some("broken pipe"),
                std::io::ErrorKind::UnexpectedEof => Some("connection closed (EOF)"),
                _ => None,
            }
        } else {
            None
        };
        kinds.extend(kind);
        cur = err.source();
    }
    let detail = chain.join(": ");
    if kinds.is_empty() {
        Failure::new(format!("transport: {detail}"), false, detail)
    } else {
        Failure::new(kinds.join(": "), true, detail)
    }
}

/// One create through the kube client: POST, with the answer read to its
/// end (a connection that breaks in the body is a transport error).
async fn kube_create(client: &kube::Client, body: &[u8]) -> Attempt {
    use http_body_util::BodyExt as _;
    let req = http::Request::post("/api/v1/namespaces/default/configmaps")
        .header(http::header::CONTENT_TYPE, "application/json")
        .header(http::header::ACCEPT, "application/json")
        .body(kube::client::Body::from(body.to_vec()))
        .expect("request");
    let answer = async {
        let resp = client.send(req).await.map_err(|e| transport_failure(&e))?;
        let (parts, body) = resp.into_parts();
        let body = body.collect().await.map_err(|e| transport_failure(&e))?.to_bytes();
        Ok::<_, Failure>((parts, body))
    };
    let (parts, body) = match tokio::time::timeout(ANSWER_TIMEOUT, answer).await {
        Err(_) => return Attempt::Failed(Failure::new(format!("no answer within {ANSWER_TIMEOUT:?}"), false, "")),
        Ok(Err(f)) => return Attempt::Failed(f),
        Ok(Ok(a)) => a,
    };
    let code = parts.status.as_u16();
    if code == 201 {
        return Attempt::Created;
    }
    let status: serde_json::Value = serde_json::from_slice(&body).unwrap_or_default();
    let reason = status["reason"].as_str().unwrap_or_default();
    if code == 409 && reason == "AlreadyExists" {
        return Attempt::AlreadyExists;
    }
    let retry_after = parts.headers.get(http::header::RETRY_AFTER).and_then(|v| v.to_str().ok()).and_then(|v| v.parse().ok());
    let retriable = code == 429 || (code >= 500 && retry_after.is_some());
    let kind = format!("{code} {reason}{}", if retry_after.is_some() { ", Retry-After" } else { "" });
    Attempt::Failed(Failure { kind, retriable, retry_after, detail: String::from_utf8_lossy(&body).into_owned(), at: utc_now() })
}

/// A writer through the kube crate's client (HTTP/1.1, a pool of
/// keep-alive connections), its own retries instead of kube's so that it
/// sees every error: creates `<id>-0`, `<id>-1`, ... until `stop`.
async fn kube_writer(kubeconfig: std::path::PathBuf, id: String, stop: Arc<AtomicBool>, log: Arc<Mutex<Vec<Write>>>) {
    let kc = kube::config::Kubeconfig::read_from(kubeconfig).expect("kubeconfig");
    let mut cfg = kube::Config::from_custom_kubeconfig(kc, &kube::config::KubeConfigOptions::default()).await.expect("config");
    cfg.default_retry = false;
    let client = kube::Client::try_from(cfg).expect("client");
    for k in 0.. {
        if stop.load(Ordering::Relaxed) {
            break;
        }
        let name = format!("{id}-{k}");
        let body = serde_json::to_vec(&serde_json::json!({
            "apiVersion": "v1", "kind": "ConfigMap",
            "metadata": {"name": name, "labels": {"suite": "rolling"}},
            "data": {"writer": id},
        }))
        .expect("json");
        let mut failures = Vec::new();
        let outcome = loop {
            if let Some(o) = settle(&mut failures, kube_create(&client, &body).await) {
                break o;
            }
            tokio::time::sleep(backoff(&failures)).await;
        };
        log.lock().unwrap().push(Write { writer: id.clone(), name, failures, outcome });
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

/// What `kubectl create` got, from its exit status and stderr. kubectl
/// (client-go) has already retried what client-go retries (429 and 5xx
/// with `Retry-After`, HTTP/2 refused streams): an `Error from server`
/// that it prints is not retriable here; a connection error is.
fn kubectl_attempt(out: &crate::common::Out) -> Attempt {
    if out.code == 0 {
        return Attempt::Created;
    }
    let e = out.stderr.trim();
    if e.contains("(AlreadyExists)") {
        return Attempt::AlreadyExists;
    }
    if let Some(rest) = e.strip_prefix("Error from server (") {
        let reason = rest.split(')').next().unwrap_or_default();
        return Attempt::Failed(Failure::new(format!("kubectl: Error from server ({reason})"), false, e));
    }
    // Go's wording for the connection errors kubectl reports.
    let kinds = [
        ("GOAWAY", "HTTP/2 GOAWAY"),
        ("REFUSED_STREAM", "HTTP/2 refused stream"),
        ("http2: client connection lost", "HTTP/2 connection lost"),
        ("connection refused", "connection refused"),
        ("connection reset by peer", "connection reset"),
        ("broken pipe", "broken pipe"),
        ("TLS handshake timeout", "TLS handshake timeout"),
        ("EOF", "connection closed (EOF)"),
    ];
    match kinds.iter().find(|(needle, _)| e.contains(needle)) {
        Some((_, kind)) => Attempt::Failed(Failure::new(format!("kubectl: {kind}"), true, e)),
        None => Attempt::Failed(Failure::new("kubectl: other", false, e)),
    }
}

/// A writer looping `kubectl.1.33 create` through haproxy, retrying the
/// same object on a retriable error as a script would: creates
/// `kubectl-0`, `kubectl-1`, ... until `stop`.
fn kubectl_writer(kubeconfig: std::path::PathBuf, cache: std::path::PathBuf, stop: Arc<AtomicBool>, log: Arc<Mutex<Vec<Write>>>) {
    for k in 0.. {
        if stop.load(Ordering::Relaxed) {
            break;
        }
        let name = format!("kubectl-{k}");
        let mut failures = Vec::new();
        let outcome = loop {
            let mut child = Command::new(crate::common::kubectl_path(33))
                .arg("--kubeconfig")
                .arg(&kubeconfig)
                .arg("--cache-dir")
                .arg(&cache)
                .arg(format!("--request-timeout={}s", ANSWER_TIMEOUT.as_secs()))
                .args(["create", "--validate=false", "-f", "-"])
                .stdin(std::process::Stdio::piped())
                .stdout(std::process::Stdio::piped())
                .stderr(std::process::Stdio::piped())
                .spawn()
                .expect("spawn kubectl");
            std::io::Write::write_all(&mut child.stdin.take().expect("stdin"), cm_in(&name, "rolling").as_bytes()).expect("write stdin");
            let o = child.wait_with_output().expect("kubectl");
            let out = crate::common::Out { code: o.status.code().unwrap_or(-1), stdout: String::from_utf8_lossy(&o.stdout).into(), stderr: String::from_utf8_lossy(&o.stderr).into() };
            if let Some(o) = settle(&mut failures, kubectl_attempt(&out)) {
                break o;
            }
            std::thread::sleep(backoff(&failures));
        };
        log.lock().unwrap().push(Write { writer: "kubectl".into(), name, failures, outcome });
    }
}

/// Acknowledged writes per writer so far.
fn acked_per_writer(log: &Mutex<Vec<Write>>) -> std::collections::BTreeMap<String, usize> {
    let mut m = std::collections::BTreeMap::new();
    for w in log.lock().unwrap().iter().filter(|w| w.outcome != Outcome::GaveUp) {
        *m.entry(w.writer.clone()).or_default() += 1;
    }
    m
}

/// Issue 16 "Rolling restart": `cluster.sh rolling-restart` restarts the
/// three nodes one at a time (the leader last) while writers create
/// ConfigMaps through haproxy: three through the kube crate's client
/// (HTTP/1.1) and a kubectl 1.33 loop (HTTP/2), each retrying as
/// client-go and kube do. Every error a writer sees is of a kind clients
/// retry, and every write is acknowledged in the end; each node then holds
/// exactly the acknowledged objects; a kube watcher through haproxy sees
/// them all without listing again; the cluster has three voting members
/// and a leader, and every node is ready.
#[test]
fn deploy_rolling_restart_under_write_load() {
    let d = Deployed::up();
    let rt = tokio::runtime::Builder::new_multi_thread().worker_threads(2).enable_all().build().unwrap();
    let seen = Arc::new(Mutex::new(Seen::default()));
    rt.spawn(kube_watch(d.kubeconfig(), ROLLING, seen.clone()));
    wait_until("the kube watcher listed", Duration::from_secs(30), || seen.lock().unwrap().init_done);

    let stop = Arc::new(AtomicBool::new(false));
    let log: Arc<Mutex<Vec<Write>>> = Arc::default();
    let writers: Vec<String> = (0..3).map(|i| format!("kube{i}")).chain(["kubectl".to_string()]).collect();
    let kube_tasks: Vec<_> = writers[..3].iter().map(|id| rt.spawn(kube_writer(d.kubeconfig(), id.clone(), stop.clone(), log.clone()))).collect();
    let kubectl_task = {
        let (kubeconfig, cache, stop, log) = (d.kubeconfig(), d.dir.path().join("kubectl-cache-writer"), stop.clone(), log.clone());
        std::thread::spawn(move || kubectl_writer(kubeconfig, cache, stop, log))
    };
    let progressed = |since: &std::collections::BTreeMap<String, usize>| {
        let now = acked_per_writer(&log);
        writers.iter().all(|w| now.get(w).copied().unwrap_or(0) > since.get(w).copied().unwrap_or(0))
    };
    wait_until("every writer had a write acknowledged", Duration::from_secs(60), || progressed(&Default::default()));

    let before = acked_per_writer(&log);
    let restart = d.script(&["rolling-restart"]);
    let after = acked_per_writer(&log);
    assert_eq!(restart.code, 0, "rolling-restart failed: {restart:?}\n{}", d.logs());
    // The writers go on against the restarted cluster, then stop.
    wait_until("every writer had a write acknowledged after the restart", Duration::from_secs(60), || progressed(&after));
    stop.store(true, Ordering::Relaxed);
    for t in kube_tasks {
        rt.block_on(t).unwrap();
    }
    kubectl_task.join().unwrap();
    let writes = std::mem::take(&mut *log.lock().unwrap());

    // Errors by kind, each with its count and one example.
    let mut kinds: std::collections::BTreeMap<&str, (usize, &str)> = std::collections::BTreeMap::new();
    for f in writes.iter().flat_map(|w| &w.failures) {
        kinds.entry(&f.kind).or_insert((0, &f.detail)).0 += 1;
    }
    let retried = writes.iter().filter(|w| !w.failures.is_empty()).count();
    let on_retry = writes.iter().filter(|w| w.outcome == Outcome::ExistedOnRetry).count();
    eprintln!("rolling restart: {} writes ({before:?} acknowledged before it, {after:?} by its end), {retried} retried, {on_retry} found created on a retry (409)", writes.len());
    for (kind, (n, example)) in &kinds {
        eprintln!("  {n:>4} x {kind}    e.g. {example}");
    }

    // Every error was of a retriable kind, and a later attempt succeeded.
    let bad: Vec<String> = writes.iter().flat_map(|w| w.failures.iter().filter(|f| !f.retriable).map(move |f| format!("{} at {}: {}: {}", w.name, f.at, f.kind, f.detail))).collect();
    assert!(bad.is_empty(), "errors clients do not retry:\n{}\n{}", bad.join("\n"), d.logs());
    let gave_up: Vec<&Write> = writes.iter().filter(|w| w.outcome == Outcome::GaveUp).collect();
    assert!(gave_up.is_empty(), "writes never acknowledged: {gave_up:#?}");
    // The load ran through the restart: each writer had writes
    // acknowledged while it ran.
    for w in &writers {
        assert!(after.get(w) > before.get(w), "{w} had no write acknowledged during the rolling restart: {before:?} -> {after:?}");
    }

    // Each node, read directly, holds exactly the acknowledged writes.
    let acked: BTreeSet<String> = writes.iter().map(|w| w.name.clone()).collect();
    for (i, name) in NAMES.iter().enumerate() {
        let on = labelled_on(&d, i, ROLLING);
        assert!(acked.is_subset(&on), "{name} lost acknowledged writes: {:?}", acked.difference(&on).collect::<Vec<_>>());
        assert_eq!(on.len(), acked.len(), "{name} has objects no writer wrote: {:?}", on.difference(&acked).collect::<Vec<_>>());
    }

    // The watcher saw every acknowledged object, resuming on another node
    // after each of its nodes stopped (their last BOOKMARK gave it a
    // resourceVersion to resume from) instead of listing again. Its watch
    // again may go out on an idle keep-alive connection to the node that
    // is closing it (`failed to start watching ... (SendRequest)`); it
    // retries after its backoff.
    wait_until("the kube watcher saw every acknowledged write", Duration::from_secs(60), || acked.is_subset(&seen.lock().unwrap().names));
    {
        let s = seen.lock().unwrap();
        eprintln!("rolling restart: the kube watcher listed {} time(s) and reported {} error(s): {:?}", s.inits, s.errors.len(), s.errors);
        assert_eq!(s.inits, 1, "the kube watcher listed again instead of resuming: {:?}", s.errors);
    }

    // Three voting members, as every node sees them, and one leader; every
    // node ready.
    for (i, name) in NAMES.iter().enumerate() {
        let members = d.etcdctl(i, &["member", "list", "-w", "simple"]);
        let lines: Vec<Vec<&str>> = members.ok().lines().map(|l| l.split(", ").collect()).collect();
        assert_eq!(lines.len(), 3, "{name}: {members:?}");
        for l in &lines {
            assert_eq!((l[1], l[5]), ("started", "false"), "{name}: {members:?}");
        }
        assert_eq!(d.kubectl_at(33, Some(i), &["get", "--raw", "/readyz"], None).ok().trim(), "ok", "{name}");
    }
    d.leader();
    let leaders = (0..3).filter(|&i| d.etcdctl(i, &["endpoint", "status", "-w", "simple"]).ok().split(", ").nth(4) == Some("true")).count();
    assert_eq!(leaders, 1, "leaders among the nodes");
    drop(rt);
}

/// The systemd unit passes `systemd-analyze verify` without a warning (an
/// unknown key is only a warning there, so stderr must be empty), with its
/// `ExecStart` pointed at the built binary; and every flag it passes is one
/// the apiserver knows. (No systemd runs in CI, so the unit is not started.)
#[test]
fn deploy_systemd_unit_verifies_and_names_known_flags() {
    let unit_path = Path::new(env!("CARGO_MANIFEST_DIR")).join("../deploy/systemd/kubers-apiserver.service");
    let unit = std::fs::read_to_string(&unit_path).unwrap();
    let dir = tempfile::tempdir().unwrap();
    let copy = dir.path().join("kubers-apiserver.service");
    std::fs::write(&copy, unit.replace("/usr/local/bin/apiserver", env!("CARGO_BIN_EXE_apiserver"))).unwrap();
    let out = std::process::Command::new("systemd-analyze").arg("verify").arg(&copy).output().expect("run systemd-analyze (systemd is installed by .ci/setup)");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success() && stderr.trim().is_empty(), "systemd-analyze verify: {:?}\n{stderr}", out.status);

    let help = std::process::Command::new(env!("CARGO_BIN_EXE_apiserver")).arg("--help").output().unwrap();
    let help = String::from_utf8_lossy(&help.stdout);
    let known: BTreeSet<String> = regex::Regex::new(r"--[a-z0-9-]+").unwrap().find_iter(&help).map(|m| m.as_str().to_string()).collect();
    let exec = unit.split("ExecStart=").nth(1).unwrap().split("\nKillSignal").next().unwrap();
    let passed: BTreeSet<String> = regex::Regex::new(r"--[a-z0-9-]+").unwrap().find_iter(exec).map(|m| m.as_str().to_string()).collect();
    assert!(passed.len() > 10, "{passed:?}");
    let unknown: Vec<&String> = passed.difference(&known).collect();
    assert!(unknown.is_empty(), "the unit passes flags the apiserver does not list in --help: {unknown:?}");
}
