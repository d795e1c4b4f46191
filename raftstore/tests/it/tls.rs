//! TLS on both sides (issue 4): three members whose peer and client URLs
//! are https, each side requiring client certificates from one CA, driven
//! with etcdctl's `--cacert/--cert/--key`.

use std::path::Path;
use std::time::{Duration, Instant};

use rcgen::{BasicConstraints, CertificateParams, IsCa, Issuer, KeyPair, SanType};

use crate::common::cluster::start_new_with;
use crate::common::etcdctl;

/// Writes `ca.pem`, `member.pem`/`member.key` (for 127.0.0.1, used as
/// server and peer client certificate) and `client.pem`/`client.key` into
/// `dir`.
fn write_pki(dir: &Path) {
    let ca_key = KeyPair::generate().expect("CA key");
    let mut ca = CertificateParams::new(Vec::<String>::new()).expect("CA params");
    ca.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
    ca.distinguished_name.push(rcgen::DnType::CommonName, "raftstore test CA");
    let ca_cert = ca.self_signed(&ca_key).expect("CA cert");
    let issuer = Issuer::new(ca, &ca_key);
    std::fs::write(dir.join("ca.pem"), ca_cert.pem()).expect("write CA");
    for (name, cn) in [("member", "member"), ("client", "root")] {
        let key = KeyPair::generate().expect("key");
        let mut p = CertificateParams::new(vec!["localhost".to_string()]).expect("params");
        p.subject_alt_names.push(SanType::IpAddress("127.0.0.1".parse().expect("ip")));
        p.distinguished_name.push(rcgen::DnType::CommonName, cn);
        let cert = p.signed_by(&key, &issuer).expect("sign");
        std::fs::write(dir.join(format!("{name}.pem")), cert.pem()).expect("write cert");
        std::fs::write(dir.join(format!("{name}.key")), key.serialize_pem()).expect("write key");
    }
}

#[test]
fn https_peers_and_clients_with_client_certs() {
    let dir = tempfile::tempdir().expect("tempdir");
    write_pki(dir.path());
    let f = |n: &str| dir.path().join(n).display().to_string();
    let (ca, member, member_key) = (f("ca.pem"), f("member.pem"), f("member.key"));
    let flags = [
        "--cert-file",
        &member,
        "--key-file",
        &member_key,
        "--trusted-ca-file",
        &ca,
        "--client-cert-auth",
        "--peer-cert-file",
        &member,
        "--peer-key-file",
        &member_key,
        "--peer-trusted-ca-file",
        &ca,
        "--peer-client-cert-auth",
    ];
    let procs = start_new_with(dir.path(), 3, &flags, "https");
    let (client, client_key) = (f("client.pem"), f("client.key"));
    let tls = ["--cacert", ca.as_str(), "--cert", client.as_str(), "--key", client_key.as_str(), "--dial-timeout=2s", "--command-timeout=4s"];
    let with = |args: &[&str]| -> Vec<String> { tls.iter().chain(args).map(|s| s.to_string()).collect() };
    let run = |ep: &str, args: &[&str]| {
        let a = with(args);
        etcdctl(ep, &a.iter().map(String::as_str).collect::<Vec<_>>())
    };

    // The members can only elect a leader over TLS peer links.
    let start = Instant::now();
    loop {
        let out = run(&procs[1].client_url(), &["put", "tls-key", "v1"]);
        if out.code == 0 {
            break;
        }
        assert!(start.elapsed() < Duration::from_secs(30), "no write over https: {out}\n{}", procs[1].log());
        std::thread::sleep(Duration::from_millis(300));
    }
    let got = run(&procs[2].client_url(), &["get", "tls-key", "--print-value-only"]);
    assert_eq!(got.ok().trim(), "v1");
    // Each member publishes its client URLs through the log once it has
    // started; under load the last publish may still be on its way.
    let has_all = |text: &str| procs.iter().all(|p| text.contains(&p.peer_url()) && text.contains(&p.client_url()));
    let mut list = run(&procs[0].client_url(), &["member", "list"]);
    for _ in 0..50 {
        if has_all(list.ok()) {
            break;
        }
        std::thread::sleep(Duration::from_millis(200));
        list = run(&procs[0].client_url(), &["member", "list"]);
    }
    for p in &procs {
        assert!(list.ok().contains(&p.peer_url()), "{list}");
        assert!(list.ok().contains(&p.client_url()), "{list}");
    }

    // Without a client certificate the member refuses the connection.
    let out = etcdctl(&procs[0].client_url(), &["--cacert", &ca, "--dial-timeout=2s", "--command-timeout=3s", "get", "tls-key"]);
    out.err();
    // Plain http to an https port gets nowhere either.
    let out = etcdctl(&format!("http://{}", procs[0].ep()), &["--dial-timeout=2s", "--command-timeout=3s", "get", "tls-key"]);
    out.err();
}
