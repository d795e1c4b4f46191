//! Test certificates: one CA, a member certificate and a client
//! certificate, written as PEM files.

use std::path::Path;

use rcgen::{BasicConstraints, CertificateParams, IsCa, Issuer, KeyPair, SanType};

/// Writes `ca.pem`, `member.pem`/`member.key` (for 127.0.0.1, used as
/// server and peer client certificate) and `client.pem`/`client.key` into
/// `dir`.
pub fn write_pki(dir: &Path) {
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
