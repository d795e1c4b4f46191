//! x509 client certificates (kube `authentication/request/x509`): the
//! certificate's CN is the user name and each O a group
//! (`CommonNameUserConversion`).
//!
//! The TLS handshake accepts any client certificate; the server verifies
//! the chain against `--client-ca-file` once the handshake is done and puts
//! the outcome in the request's extensions: [`PeerCertificates`] for a
//! verified chain, [`UnverifiedCertificate`] for one the CA did not sign. A
//! certificate that failed is then an authentication error (401), as in
//! kube, rather than a TLS alert.

use std::sync::Arc;

use async_trait::async_trait;
use rustls::pki_types::CertificateDer;

use super::{Authenticator, Credentials, Error, Result, UserInfo, ALL_AUTHENTICATED};

/// The verified certificate chain of the TLS connection, leaf first.
#[derive(Debug, Clone, Default)]
pub struct PeerCertificates(pub Arc<Vec<CertificateDer<'static>>>);

/// Marks a connection whose client certificate failed verification against
/// the client CA, with the reason.
#[derive(Debug, Clone)]
pub struct UnverifiedCertificate(pub Arc<str>);

/// The x509 authenticator.
pub struct X509;

impl X509 {
    /// The user of a DER certificate: CN → name, each O → a group, plus
    /// [`ALL_AUTHENTICATED`].
    ///
    /// # Errors
    /// [`Error::Certificate`] for an unparseable certificate or an empty CN.
    pub fn user_of(der: &[u8]) -> Result<UserInfo> {
        let (_, cert) = x509_parser::parse_x509_certificate(der).map_err(|e| Error::Certificate(format!("bad client certificate: {e}")))?;
        let subject = cert.subject();
        let name = subject.iter_common_name().next().and_then(|cn| cn.as_str().ok()).unwrap_or("").to_string();
        if name.is_empty() {
            return Err(Error::Certificate("client certificate has no common name".into()));
        }
        let mut groups: Vec<String> = subject.iter_organization().filter_map(|o| o.as_str().ok().map(String::from)).collect();
        groups.push(ALL_AUTHENTICATED.into());
        Ok(UserInfo { name, groups, ..Default::default() })
    }
}

#[async_trait]
impl Authenticator for X509 {
    async fn authenticate(&self, req: &Credentials<'_>) -> Result<Option<UserInfo>> {
        if let Some(UnverifiedCertificate(why)) = req.extensions.get::<UnverifiedCertificate>() {
            return Err(Error::Certificate(why.to_string()));
        }
        let Some(PeerCertificates(chain)) = req.extensions.get::<PeerCertificates>() else { return Ok(None) };
        let Some(leaf) = chain.first() else { return Ok(None) };
        Self::user_of(leaf.as_ref()).map(Some)
    }
}
