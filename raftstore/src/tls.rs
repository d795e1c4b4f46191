//! etcd's `--auto-tls` and `--peer-auto-tls`: a self-signed certificate
//! made at start, and dialling peers that present one.
//!
//! etcd (`transport.SelfCert`) writes `cert.pem` and `key.pem` into
//! `<data-dir>/fixtures/client` or `<data-dir>/fixtures/peer`, and reuses
//! them when both exist. The certificate names the hosts of the listen URLs
//! (IP addresses as IP SANs, other hosts as DNS names), is valid for
//! `--self-signed-cert-validity` years, and is for server authentication,
//! and for client authentication too on the peer side (a member shows it
//! when it dials another). Because nobody can verify it, etcd's peers skip
//! verifying each other's certificates in this mode
//! (`InsecureSkipVerify`): the link is encrypted, not authenticated.
//! [`SelfSignedConnector`] dials the same way.
//!
//! Differences from etcd: the key is ECDSA P-256 (etcd's is P-521), and it
//! is written as PKCS#8 (etcd writes SEC1); a fixtures directory that etcd
//! wrote is read as it is.

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::task::{Context, Poll};

use hyper_util::rt::TokioIo;
use rustls::client::danger::{HandshakeSignatureValid, ServerCertVerified, ServerCertVerifier};
use rustls::pki_types::{CertificateDer, ServerName, UnixTime};
use rustls::{DigitallySignedStruct, SignatureScheme};

use crate::error::{Error, Result};

/// The certificate and key [`self_cert`] made or found.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SelfCert {
    /// `<dir>/cert.pem`.
    pub cert_file: PathBuf,
    /// `<dir>/key.pem`.
    pub key_file: PathBuf,
}

/// Returns the self-signed certificate in `dir`, making it first if
/// `cert.pem` or `key.pem` is missing (etcd `transport.SelfCert`). `hosts`
/// are the `host:port` (or bare host) parts of the listen URLs; `peer` adds
/// client authentication to the certificate's uses.
///
/// # Errors
/// [`Error::InvalidArgument`] if `validity_years` is 0 (etcd: "should be
/// greater than 0") or the directory or files cannot be written.
pub fn self_cert(dir: &Path, hosts: &[String], validity_years: u32, peer: bool) -> Result<SelfCert> {
    if validity_years == 0 {
        return Err(Error::InvalidArgument("--self-signed-cert-validity is invalid, it should be greater than 0".into()));
    }
    let cannot = |what: &Path, e: &dyn std::fmt::Display| Error::InvalidArgument(format!("cannot create self-signed certificate in {}: {}: {e}", dir.display(), what.display()));
    std::fs::create_dir_all(dir).map_err(|e| cannot(dir, &e))?;
    let out = SelfCert { cert_file: dir.join("cert.pem"), key_file: dir.join("key.pem") };
    if out.cert_file.exists() && out.key_file.exists() {
        return Ok(out);
    }
    let mut params = rcgen::CertificateParams::new(Vec::<String>::new()).map_err(|e| cannot(dir, &e))?;
    params.distinguished_name = rcgen::DistinguishedName::new();
    params.distinguished_name.push(rcgen::DnType::OrganizationName, "etcd");
    let since_epoch = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap_or_default();
    params.not_before = rcgen::date_time_ymd(1970, 1, 1) + since_epoch;
    params.not_after = params.not_before + std::time::Duration::from_secs(u64::from(validity_years) * 365 * 24 * 3600);
    params.key_usages = vec![rcgen::KeyUsagePurpose::KeyEncipherment, rcgen::KeyUsagePurpose::DigitalSignature];
    params.extended_key_usages = vec![rcgen::ExtendedKeyUsagePurpose::ServerAuth];
    if peer {
        params.extended_key_usages.push(rcgen::ExtendedKeyUsagePurpose::ClientAuth);
    }
    for host in hosts {
        let h = split_host(host);
        let san = match h.parse::<std::net::IpAddr>() {
            Ok(ip) => rcgen::SanType::IpAddress(ip),
            Err(_) => rcgen::SanType::DnsName(h.to_string().try_into().map_err(|e| cannot(dir, &e))?),
        };
        if !params.subject_alt_names.contains(&san) {
            params.subject_alt_names.push(san);
        }
    }
    let key = rcgen::KeyPair::generate_for(&rcgen::PKCS_ECDSA_P256_SHA256).map_err(|e| cannot(dir, &e))?;
    let cert = params.self_signed(&key).map_err(|e| cannot(dir, &e))?;
    write_private(&out.key_file, key.serialize_pem().as_bytes()).map_err(|e| cannot(&out.key_file, &e))?;
    std::fs::write(&out.cert_file, cert.pem()).map_err(|e| cannot(&out.cert_file, &e))?;
    Ok(out)
}

/// The host of `host:port`, `[v6]:port`, or a bare host.
fn split_host(host_port: &str) -> &str {
    if let Some(rest) = host_port.strip_prefix('[') {
        return rest.split(']').next().unwrap_or(rest);
    }
    match host_port.rsplit_once(':') {
        Some((h, p)) if !h.contains(':') && p.chars().all(|c| c.is_ascii_digit()) => h,
        _ => host_port,
    }
}

/// Writes a key file readable by its owner only (etcd: 0600).
fn write_private(path: &Path, data: &[u8]) -> std::io::Result<()> {
    use std::io::Write;
    use std::os::unix::fs::OpenOptionsExt;
    let mut f = std::fs::OpenOptions::new().write(true).create(true).truncate(true).mode(0o600).open(path)?;
    f.write_all(data)?;
    f.sync_all()
}

/// A rustls client configuration that accepts any server certificate (its
/// handshake signature is still checked), shows `cert_file`/`key_file` as
/// the client certificate, and speaks HTTP/2: how a member dials the others
/// under `--peer-auto-tls`.
///
/// # Errors
/// [`Error::InvalidArgument`] for unreadable or malformed files.
pub fn insecure_client_config(cert_file: &Path, key_file: &Path) -> Result<rustls::ClientConfig> {
    use rustls::pki_types::pem::PemObject;
    use rustls::pki_types::PrivateKeyDer;
    let bad = |p: &Path, e: &dyn std::fmt::Display| Error::InvalidArgument(format!("{}: {e}", p.display()));
    let chain: Vec<CertificateDer<'static>> = CertificateDer::pem_file_iter(cert_file).map_err(|e| bad(cert_file, &e))?.collect::<std::result::Result<_, _>>().map_err(|e| bad(cert_file, &e))?;
    let key = PrivateKeyDer::from_pem_file(key_file).map_err(|e| bad(key_file, &e))?;
    let provider = Arc::new(rustls::crypto::aws_lc_rs::default_provider());
    let verifier = Arc::new(AcceptAnyServerCert(provider.clone()));
    let mut cfg = rustls::ClientConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .map_err(|e| bad(cert_file, &e))?
        .dangerous()
        .with_custom_certificate_verifier(verifier)
        .with_client_auth_cert(chain, key)
        .map_err(|e| bad(key_file, &e))?;
    cfg.alpn_protocols = vec![b"h2".to_vec()];
    Ok(cfg)
}

/// Accepts every server certificate, as Go's `InsecureSkipVerify`, but
/// checks that the server holds the certificate's key.
#[derive(Debug)]
struct AcceptAnyServerCert(Arc<rustls::crypto::CryptoProvider>);

impl ServerCertVerifier for AcceptAnyServerCert {
    fn verify_server_cert(&self, _: &CertificateDer<'_>, _: &[CertificateDer<'_>], _: &ServerName<'_>, _: &[u8], _: UnixTime) -> std::result::Result<ServerCertVerified, rustls::Error> {
        Ok(ServerCertVerified::assertion())
    }

    fn verify_tls12_signature(&self, message: &[u8], cert: &CertificateDer<'_>, dss: &DigitallySignedStruct) -> std::result::Result<HandshakeSignatureValid, rustls::Error> {
        rustls::crypto::verify_tls12_signature(message, cert, dss, &self.0.signature_verification_algorithms)
    }

    fn verify_tls13_signature(&self, message: &[u8], cert: &CertificateDer<'_>, dss: &DigitallySignedStruct) -> std::result::Result<HandshakeSignatureValid, rustls::Error> {
        rustls::crypto::verify_tls13_signature(message, cert, dss, &self.0.signature_verification_algorithms)
    }

    fn supported_verify_schemes(&self) -> Vec<SignatureScheme> {
        self.0.signature_verification_algorithms.supported_schemes()
    }
}

/// A connector for tonic that dials TCP and does the TLS handshake with a
/// fixed rustls configuration ([`insecure_client_config`]). tonic's own
/// TLS cannot skip verification, so the channel is given the peer URL with
/// `http://` and this connector adds the TLS.
#[derive(Clone)]
pub struct SelfSignedConnector {
    config: Arc<rustls::ClientConfig>,
}

impl SelfSignedConnector {
    /// A connector that uses `config` for every connection.
    pub fn new(config: Arc<rustls::ClientConfig>) -> Self {
        SelfSignedConnector { config }
    }
}

impl tower::Service<http::Uri> for SelfSignedConnector {
    type Response = TokioIo<tokio_rustls::client::TlsStream<tokio::net::TcpStream>>;
    type Error = std::io::Error;
    type Future = std::pin::Pin<Box<dyn std::future::Future<Output = std::io::Result<Self::Response>> + Send>>;

    fn poll_ready(&mut self, _: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        Poll::Ready(Ok(()))
    }

    fn call(&mut self, uri: http::Uri) -> Self::Future {
        let connector = tokio_rustls::TlsConnector::from(self.config.clone());
        Box::pin(async move {
            let invalid = |what: &str| std::io::Error::new(std::io::ErrorKind::InvalidInput, format!("{what} in {uri}"));
            let host = uri.host().ok_or_else(|| invalid("no host"))?.trim_start_matches('[').trim_end_matches(']').to_string();
            let port = uri.port_u16().ok_or_else(|| invalid("no port"))?;
            let tcp = tokio::net::TcpStream::connect((host.as_str(), port)).await?;
            tcp.set_nodelay(true)?;
            let name = ServerName::try_from(host).map_err(|_| invalid("bad host"))?;
            Ok(TokioIo::new(connector.connect(name, tcp).await?))
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hosts_are_split_from_ports() {
        for (input, want) in [("127.0.0.1:2379", "127.0.0.1"), ("localhost:2379", "localhost"), ("[::1]:2379", "::1"), ("example.com", "example.com"), ("::1", "::1")] {
            assert_eq!(split_host(input), want, "{input}");
        }
    }

    #[test]
    fn a_self_cert_is_made_once_and_reused() {
        let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
        let fixtures = dir.path().join("fixtures").join("peer");
        let first = self_cert(&fixtures, &["127.0.0.1:2380".into(), "localhost:2380".into()], 1, true).unwrap_or_else(|e| panic!("{e}"));
        let pem = std::fs::read(&first.cert_file).unwrap_or_else(|e| panic!("{e}"));
        let again = self_cert(&fixtures, &[], 1, true).unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(first, again);
        assert_eq!(std::fs::read(&again.cert_file).unwrap_or_else(|e| panic!("{e}")), pem, "an existing certificate is kept");
        insecure_client_config(&first.cert_file, &first.key_file).unwrap_or_else(|e| panic!("{e}"));
        assert!(matches!(self_cert(&dir.path().join("x"), &[], 0, false), Err(Error::InvalidArgument(_))));
    }
}
