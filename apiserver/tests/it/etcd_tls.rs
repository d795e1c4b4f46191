//! The API server on an existing etcd with client TLS (issue 16), with
//! kube-apiserver's flags: `--etcd-cafile`, `--etcd-certfile`,
//! `--etcd-keyfile`, `--etcd-prefix`, `--etcd-servers-overrides` and
//! `--etcd-compaction-interval`. Real etcd members (Debian's `etcd`), real
//! kubectl, and `etcdctl` over TLS to look at the keys.

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::Duration;

use rcgen::{BasicConstraints, CertificateParams, DnType, ExtendedKeyUsagePurpose, IsCa, Issuer, KeyPair, KeyUsagePurpose};

use crate::common::{free_port, stop_watch, Server};

/// A CA, an etcd serving certificate for 127.0.0.1 and a client
/// certificate, as PEM files.
struct Pki {
    ca: PathBuf,
    server_cert: PathBuf,
    server_key: PathBuf,
    client_cert: PathBuf,
    client_key: PathBuf,
}

impl Pki {
    fn generate(dir: &Path) -> Pki {
        let ca_key = KeyPair::generate().unwrap();
        let mut ca = CertificateParams::new(Vec::<String>::new()).unwrap();
        ca.distinguished_name.push(DnType::CommonName, "etcd-ca");
        ca.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
        ca.key_usages = vec![KeyUsagePurpose::KeyCertSign, KeyUsagePurpose::DigitalSignature];
        let ca_cert = ca.self_signed(&ca_key).unwrap();
        let issuer = Issuer::new(ca, ca_key);
        let leaf = |cn: &str, sans: Vec<String>, usages: Vec<ExtendedKeyUsagePurpose>| {
            let key = KeyPair::generate().unwrap();
            let mut p = CertificateParams::new(sans).unwrap();
            p.distinguished_name.push(DnType::CommonName, cn);
            p.extended_key_usages = usages;
            p.key_usages = vec![KeyUsagePurpose::DigitalSignature, KeyUsagePurpose::KeyEncipherment];
            (p.signed_by(&key, &issuer).unwrap().pem(), key.serialize_pem())
        };
        // etcd's gateway dials its own client port with the serving
        // certificate, so it is a client certificate too.
        let server = leaf("etcd", vec!["127.0.0.1".into(), "localhost".into()], vec![ExtendedKeyUsagePurpose::ServerAuth, ExtendedKeyUsagePurpose::ClientAuth]);
        let client = leaf("kube-apiserver-etcd-client", Vec::new(), vec![ExtendedKeyUsagePurpose::ClientAuth]);
        let pki = Pki { ca: dir.join("ca.crt"), server_cert: dir.join("etcd.crt"), server_key: dir.join("etcd.key"), client_cert: dir.join("client.crt"), client_key: dir.join("client.key") };
        std::fs::write(&pki.ca, ca_cert.pem()).unwrap();
        std::fs::write(&pki.server_cert, server.0).unwrap();
        std::fs::write(&pki.server_key, server.1).unwrap();
        std::fs::write(&pki.client_cert, client.0).unwrap();
        std::fs::write(&pki.client_key, client.1).unwrap();
        pki
    }

    /// The apiserver's TLS flags.
    fn flags(&self) -> Vec<String> {
        vec!["--etcd-cafile".into(), self.ca.display().to_string(), "--etcd-certfile".into(), self.client_cert.display().to_string(), "--etcd-keyfile".into(), self.client_key.display().to_string()]
    }
}

/// A real etcd cluster whose client URLs are https and ask for client
/// certificates (`--client-cert-auth`); peers talk plain http on loopback.
struct TlsEtcd {
    /// Client URLs, one per member.
    urls: Vec<String>,
    members: Vec<Option<Child>>,
    pki: Pki,
    _dir: tempfile::TempDir,
}

impl TlsEtcd {
    fn start(size: usize) -> TlsEtcd {
        Self::start_with(size, None)
    }

    /// Starts `size` members with the certificates of `pki` (new ones when
    /// `None`).
    fn start_with(size: usize, pki: Option<&Pki>) -> TlsEtcd {
        let etcd = ["/usr/bin/etcd", "/usr/local/bin/etcd"].into_iter().find(|p| Path::new(p).exists()).expect("etcd not found: install Debian's etcd-server package (.ci/setup does)");
        let dir = tempfile::tempdir().unwrap();
        let pki = match pki {
            Some(p) => Pki { ca: p.ca.clone(), server_cert: p.server_cert.clone(), server_key: p.server_key.clone(), client_cert: p.client_cert.clone(), client_key: p.client_key.clone() },
            None => Pki::generate(dir.path()),
        };
        let urls: Vec<String> = (0..size).map(|_| format!("https://127.0.0.1:{}", free_port())).collect();
        let peers: Vec<String> = (0..size).map(|_| format!("http://127.0.0.1:{}", free_port())).collect();
        let initial = peers.iter().enumerate().map(|(i, p)| format!("m{i}={p}")).collect::<Vec<_>>().join(",");
        let members = (0..size)
            .map(|i| {
                let child = Command::new(etcd)
                    .args(["--name", &format!("m{i}"), "--data-dir"])
                    .arg(dir.path().join(format!("m{i}")))
                    .args(["--listen-client-urls", &urls[i], "--advertise-client-urls", &urls[i]])
                    .args(["--listen-peer-urls", &peers[i], "--initial-advertise-peer-urls", &peers[i]])
                    .args(["--initial-cluster", &initial, "--initial-cluster-state", "new", "--initial-cluster-token", "tls-test"])
                    .arg("--client-cert-auth")
                    .arg("--trusted-ca-file")
                    .arg(&pki.ca)
                    .arg("--cert-file")
                    .arg(&pki.server_cert)
                    .arg("--key-file")
                    .arg(&pki.server_key)
                    .stdout(Stdio::null())
                    .stderr(Stdio::null())
                    .spawn()
                    .expect("start etcd");
                Some(child)
            })
            .collect();
        let cluster = TlsEtcd { urls, members, pki, _dir: dir };
        for _ in 0..100 {
            if cluster.etcdctl(&["endpoint", "health"]).status.success() {
                return cluster;
            }
            std::thread::sleep(Duration::from_millis(200));
        }
        panic!("TLS etcd did not become healthy: {:?}", cluster.etcdctl(&["endpoint", "health"]));
    }

    /// `etcdctl` over TLS with the client certificate, on the members that
    /// are up.
    fn etcdctl(&self, args: &[&str]) -> std::process::Output {
        let endpoints: Vec<&str> = self.urls.iter().zip(&self.members).filter(|(_, m)| m.is_some()).map(|(u, _)| u.as_str()).collect();
        Command::new("etcdctl")
            .env("ETCDCTL_API", "3")
            .arg(format!("--endpoints={}", endpoints.join(",")))
            .arg("--cacert")
            .arg(&self.pki.ca)
            .arg("--cert")
            .arg(&self.pki.client_cert)
            .arg("--key")
            .arg(&self.pki.client_key)
            .args(args)
            .output()
            .expect("run etcdctl")
    }

    /// The keys under `prefix`.
    fn keys(&self, prefix: &str) -> Vec<String> {
        let out = self.etcdctl(&["get", "--prefix", "--keys-only", prefix]);
        assert!(out.status.success(), "{out:?}");
        String::from_utf8_lossy(&out.stdout).lines().filter(|l| !l.is_empty()).map(String::from).collect()
    }

    /// `kill -9` of member `i`.
    fn kill(&mut self, i: usize) {
        if let Some(mut c) = self.members[i].take() {
            let _ = c.kill();
            let _ = c.wait();
        }
    }
}

impl Drop for TlsEtcd {
    fn drop(&mut self) {
        for i in 0..self.members.len() {
            self.kill(i);
        }
    }
}

fn args(parts: &[&[String]]) -> Vec<String> {
    parts.iter().flat_map(|p| p.iter().cloned()).collect()
}

const CM: &str = r#"{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"NAME"},"data":{"a":"1"}}"#;

fn create_cm(s: &Server, name: &str) {
    let out = s.kubectl_stdin(33, &["create", "-f", "-"], Some(&CM.replace("NAME", name)));
    assert_eq!(out.ok().trim(), format!("configmap/{name} created"));
}

/// The acceptance test of issue 16's "A TLS etcd": a three-member etcd with
/// client TLS, all three https URLs in `--etcd-servers`, a non-default
/// `--etcd-prefix`; kubectl creates, gets, lists, watches and deletes; the
/// keys are under the prefix; losing a member costs nothing, not even a
/// watch.
#[test]
fn apiserver_on_three_member_tls_etcd() {
    let mut etcd = TlsEtcd::start(3);
    let s = Server::start_with(&args(&[&["--etcd-servers".into(), etcd.urls.join(","), "--etcd-prefix".into(), "/kube-a".into()], &etcd.pki.flags()]));

    let w = s.kubectl_spawn(33, &["get", "cm", "-w", "--output-watch-events"]);
    std::thread::sleep(Duration::from_millis(1500));
    create_cm(&s, "one");
    assert_eq!(s.kubectl(33, &["get", "cm", "one", "-o", "jsonpath={.data.a}"]).ok(), "1");
    assert_eq!(s.kubectl(33, &["label", "cm", "one", "x=y"]).ok().trim(), "configmap/one labeled");
    let nginx = crate::common::fixtures().join("nginx-deployment.yaml");
    assert_eq!(s.kubectl(33, &["apply", "--validate=false", "-f", nginx.to_str().unwrap()]).ok().trim(), "deployment.apps/nginx created");
    let listed = s.kubectl(33, &["get", "cm", "-o", "name"]);
    assert!(listed.ok().lines().any(|l| l == "configmap/one"), "{listed:?}");
    assert_eq!(s.kubectl(33, &["delete", "cm", "one"]).ok().trim(), "configmap \"one\" deleted");
    std::thread::sleep(Duration::from_millis(1000));
    let (mut events, out) = stop_watch(w);
    // The root CA ConfigMap every namespace gets (as kube-controller-manager publishes it).
    events.retain(|(_, name)| name != "kube-root-ca.crt");
    let want: Vec<(String, String)> = ["ADDED", "MODIFIED", "DELETED"].iter().map(|e| (e.to_string(), "one".to_string())).collect();
    assert_eq!(events, want, "{out}");

    // Every key is under the prefix, none under kube's default one.
    let keys = etcd.keys("/kube-a/");
    for k in ["/kube-a/namespaces/default", "/kube-a/apps/deployments/default/nginx"] {
        assert!(keys.iter().any(|x| x == k), "{k} not in {keys:?}");
    }
    assert!(!keys.iter().any(|k| k.starts_with("/kube-a/configmaps/default/one")), "deleted object still stored: {keys:?}");
    assert_eq!(etcd.keys("/registry/"), Vec::<String>::new());

    // Kill the member of the first URL: every request still succeeds, and a
    // watch opened before the loss goes on (the watch cache watches the
    // store again from where it was instead of closing its watchers).
    let w = s.kubectl_spawn(33, &["get", "cm", "-w", "--output-watch-events"]);
    std::thread::sleep(Duration::from_millis(1500));
    etcd.kill(0);
    std::thread::sleep(Duration::from_millis(500));
    for i in 0..5 {
        create_cm(&s, &format!("after-{i}"));
        assert_eq!(s.kubectl(33, &["get", "cm", &format!("after-{i}"), "-o", "jsonpath={.metadata.name}"]).ok(), format!("after-{i}"));
    }
    let listed = s.kubectl(33, &["get", "cm", "-o", "name"]);
    assert_eq!(listed.ok().lines().filter(|l| l.starts_with("configmap/after-")).count(), 5, "{listed:?}");
    assert_eq!(s.kubectl(33, &["delete", "cm", "after-0"]).ok().trim(), "configmap \"after-0\" deleted");
    std::thread::sleep(Duration::from_millis(1000));
    let (mut events, out) = stop_watch(w);
    // The root CA ConfigMap every namespace gets (as kube-controller-manager publishes it).
    events.retain(|(_, name)| name != "kube-root-ca.crt");
    let mut want: Vec<(String, String)> = (0..5).map(|i| ("ADDED".to_string(), format!("after-{i}"))).collect();
    want.push(("DELETED".into(), "after-0".into()));
    assert_eq!(events, want, "{out}");
    let keys = etcd.keys("/kube-a/configmaps/default/");
    assert_eq!(keys.len(), 4 + keys.iter().filter(|k| !k.contains("/after-")).count(), "{keys:?}");
    assert!(s.kubectl(33, &["get", "--raw", "/readyz"]).ok().contains("ok"));
}

/// `--etcd-servers-overrides` puts configmaps on a second etcd, with the
/// same prefix and TLS flags; everything else stays on the first. Both are
/// compacted every `--etcd-compaction-interval`, as kube-apiserver does.
#[test]
fn etcd_servers_overrides_route_a_resource_to_other_servers() {
    let main = TlsEtcd::start(1);
    // The second etcd has the first one's CA and certificates: one set of
    // TLS flags serves both, as kube's flags do.
    let other = TlsEtcd::start_with(1, Some(&main.pki));
    let s = Server::start_with(&args(&[
        &["--etcd-servers".into(), main.urls.join(","), "--etcd-prefix".into(), "/kube-b/".into()],
        &["--etcd-servers-overrides".into(), format!("/configmaps#{}", other.urls.join(";"))],
        &["--etcd-compaction-interval".into(), "2s".into()],
        &main.pki.flags(),
    ]));

    let w = s.kubectl_spawn(33, &["get", "cm", "-w", "--output-watch-events"]);
    std::thread::sleep(Duration::from_millis(1500));
    for i in 0..3 {
        create_cm(&s, &format!("cm-{i}"));
    }
    s.kubectl_stdin(33, &["create", "-f", "-"], Some(r#"{"apiVersion":"v1","kind":"Secret","metadata":{"name":"s1"},"data":{"a":"MQ=="}}"#)).ok();
    let listed = s.kubectl(33, &["get", "cm", "-o", "name"]);
    assert_eq!(listed.ok().lines().filter(|l| l.starts_with("configmap/cm-")).count(), 3, "{listed:?}");
    assert_eq!(s.kubectl(33, &["get", "secret", "s1", "-o", "jsonpath={.metadata.name}"]).ok(), "s1");
    assert_eq!(s.kubectl(33, &["delete", "cm", "cm-2"]).ok().trim(), "configmap \"cm-2\" deleted");
    std::thread::sleep(Duration::from_millis(1000));
    let (mut events, out) = stop_watch(w);
    // The root CA ConfigMap every namespace gets (as kube-controller-manager publishes it).
    events.retain(|(_, name)| name != "kube-root-ca.crt");
    let mut want: Vec<(String, String)> = (0..3).map(|i| ("ADDED".to_string(), format!("cm-{i}"))).collect();
    want.push(("DELETED".into(), "cm-2".into()));
    assert_eq!(events, want, "{out}");

    // Configmaps on the override's etcd only, the rest on the main one.
    let on_other = other.keys("/kube-b/");
    let on_main = main.keys("/kube-b/");
    assert!(on_other.iter().any(|k| k == "/kube-b/configmaps/default/cm-0"), "{on_other:?}");
    assert!(on_other.iter().all(|k| k.starts_with("/kube-b/configmaps/")), "{on_other:?}");
    assert!(on_main.iter().any(|k| k == "/kube-b/secrets/default/s1"), "{on_main:?}");
    assert!(on_main.iter().any(|k| k == "/kube-b/namespaces/default"), "{on_main:?}");
    assert!(!on_main.iter().any(|k| k.starts_with("/kube-b/configmaps/")), "{on_main:?}");

    // Both etcds get compacted through kube's compact_rev_key protocol:
    // after a few intervals the first revision is gone on each.
    for etcd in [&main, &other] {
        let mut compacted = false;
        for _ in 0..50 {
            let out = etcd.etcdctl(&["get", "--rev=1", "/kube-b/"]);
            if String::from_utf8_lossy(&out.stderr).contains("required revision has been compacted") {
                compacted = true;
                break;
            }
            std::thread::sleep(Duration::from_millis(200));
        }
        assert!(compacted, "etcd {:?} not compacted", etcd.urls);
        assert!(!etcd.keys("compact_rev_key").is_empty());
    }
    // The API still serves after compaction.
    assert_eq!(s.kubectl(33, &["get", "cm", "cm-0", "-o", "jsonpath={.data.a}"]).ok(), "1");
}

/// Bad etcd flags fail the start at once, naming the flag.
#[test]
fn bad_etcd_flags_fail_the_start() {
    let dir = tempfile::tempdir().unwrap();
    let pki = Pki::generate(dir.path());
    let (ca, cert, key) = (pki.ca.display().to_string(), pki.client_cert.display().to_string(), pki.client_key.display().to_string());
    let https = "https://127.0.0.1:1";
    let cases: &[(&[&str], &str)] = &[
        (&["--etcd-servers", https, "--etcd-cafile", "/nonexistent/ca.crt"], "--etcd-cafile /nonexistent/ca.crt: No such file"),
        (&["--etcd-servers", https, "--etcd-cafile", &ca, "--etcd-certfile", &cert], "--etcd-certfile needs --etcd-keyfile"),
        (&["--etcd-servers", https, "--etcd-cafile", &ca, "--etcd-certfile", &cert, "--etcd-keyfile", &ca], "--etcd-keyfile"),
        (&["--etcd-servers", https, "--etcd-cafile", &key], "--etcd-cafile"),
        (&["--etcd-servers", https], "https:// etcd servers need --etcd-cafile"),
        (&["--etcd-servers", "http://127.0.0.1:1", "--etcd-servers-overrides", "events#http://127.0.0.1:2"], "--etcd-servers-overrides invalid, must be of format: group/resource#servers"),
        (&["--etcd-servers", "http://127.0.0.1:1", "--etcd-servers-overrides", "/events#127.0.0.1:2"], "is not an http:// or https:// URL"),
    ];
    for (flags, want) in cases {
        let out = Command::new(env!("CARGO_BIN_EXE_apiserver")).args(["--secure-port", "0", "--data-dir"]).arg(dir.path().join("data")).args(*flags).output().unwrap();
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(!out.status.success(), "{flags:?} started");
        assert!(stderr.contains(want), "{flags:?}: {stderr}");
    }
}
