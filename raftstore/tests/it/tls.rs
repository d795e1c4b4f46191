//! TLS on both sides (issue 4): three members whose peer and client URLs
//! are https, each side requiring client certificates from one CA, driven
//! with etcdctl's `--cacert/--cert/--key`.

use std::time::{Duration, Instant};

use crate::common::cluster::start_new_with;
use crate::common::etcdctl;
use crate::common::pki::write_pki;

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
