//! The authentication filter (kube `filters/authentication.go`).
//!
//! Authenticators are tried in order; the first that recognises the
//! request's credentials sets the [`UserInfo`]. Today there is one: x509
//! client certificates, verified against `--client-ca-file` once the TLS
//! handshake is done; CN is the user name and each O a group (kube
//! `x509.CommonNameUserConversion`). A certificate the client CA did not
//! sign fails authentication (401), as in kube, rather than the handshake. A request with no credentials gets 401,
//! except the public info paths that kube's `system:public-info-viewer` role
//! opens to everyone (`/healthz`, `/livez`, `/readyz`, `/version`).

use std::sync::Arc;

use rustls::pki_types::CertificateDer;

use super::super::{responses, BoxFuture, Handler, Request, Response};
use crate::errors::Status;

/// The verified certificate chain of the TLS connection, leaf first.
#[derive(Debug, Clone, Default)]
pub struct PeerCertificates(pub Arc<Vec<CertificateDer<'static>>>);

/// Marks a connection whose client certificate failed verification against
/// the client CA; the reason is logged, the request gets 401.
#[derive(Debug, Clone)]
pub struct UnverifiedCertificate(pub Arc<str>);

/// Who made the request (`user.Info`).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct UserInfo {
    /// User name.
    pub name: String,
    /// Groups, including `system:authenticated`.
    pub groups: Vec<String>,
}

/// One way of authenticating a request.
pub trait Authenticator: Send + Sync {
    /// `Ok(Some(user))` when the request carries credentials this
    /// authenticator accepts, `Ok(None)` when it carries none it knows.
    ///
    /// # Errors
    /// Credentials that are present but invalid.
    fn authenticate(&self, req: &Request) -> Result<Option<UserInfo>, String>;
}

/// x509 client certificates: CN → user, O → groups.
pub struct X509Authenticator;

impl X509Authenticator {
    /// The user of a DER certificate.
    ///
    /// # Errors
    /// Unparseable certificates or an empty CN.
    pub fn user_of(der: &[u8]) -> Result<UserInfo, String> {
        let (_, cert) = x509_parser::parse_x509_certificate(der).map_err(|e| format!("bad client certificate: {e}"))?;
        let subject = cert.subject();
        let name = subject.iter_common_name().next().and_then(|cn| cn.as_str().ok()).unwrap_or("").to_string();
        if name.is_empty() {
            return Err("client certificate has no common name".into());
        }
        let mut groups: Vec<String> = subject.iter_organization().filter_map(|o| o.as_str().ok().map(String::from)).collect();
        groups.push("system:authenticated".into());
        Ok(UserInfo { name, groups })
    }
}

impl Authenticator for X509Authenticator {
    fn authenticate(&self, req: &Request) -> Result<Option<UserInfo>, String> {
        if let Some(UnverifiedCertificate(why)) = req.extensions().get::<UnverifiedCertificate>() {
            return Err(format!("verifying certificate failed: {why}"));
        }
        let Some(PeerCertificates(chain)) = req.extensions().get::<PeerCertificates>() else { return Ok(None) };
        let Some(leaf) = chain.first() else { return Ok(None) };
        Self::user_of(leaf.as_ref()).map(Some)
    }
}

const PUBLIC_PATHS: &[&str] = &["/healthz", "/livez", "/readyz", "/version"];

fn is_public(path: &str) -> bool {
    PUBLIC_PATHS.iter().any(|p| path == *p || path.strip_prefix(p).is_some_and(|rest| rest.starts_with('/')))
}

/// The filter.
pub struct WithAuthentication {
    next: Arc<dyn Handler>,
    authenticators: Vec<Box<dyn Authenticator>>,
}

impl WithAuthentication {
    /// Wraps `next`, trying `authenticators` in order.
    pub fn wrap(next: Arc<dyn Handler>, authenticators: Vec<Box<dyn Authenticator>>) -> Arc<dyn Handler> {
        Arc::new(WithAuthentication { next, authenticators })
    }
}

impl Handler for WithAuthentication {
    fn call(&self, mut req: Request) -> BoxFuture<'_, Response> {
        let mut user = None;
        for a in &self.authenticators {
            match a.authenticate(&req) {
                Ok(Some(u)) => {
                    user = Some(u);
                    break;
                }
                Ok(None) => {}
                Err(e) => {
                    tracing::debug!("authentication failed: {e}");
                    return Box::pin(async { responses::status(&Status::unauthorized()) });
                }
            }
        }
        match user {
            Some(u) => {
                req.extensions_mut().insert(u);
                self.next.call(req)
            }
            None if is_public(req.uri().path()) => {
                req.extensions_mut().insert(UserInfo { name: "system:anonymous".into(), groups: vec!["system:unauthenticated".into()] });
                self.next.call(req)
            }
            None => Box::pin(async { responses::status(&Status::unauthorized()) }),
        }
    }
}
