//! HTTPS servers the tests start as the other side of the apiserver's
//! outgoing calls (OIDC issuers, authentication, authorization, audit and
//! admission webhooks): tokio, hyper and rustls in-process, certificates
//! from rcgen.

use std::future::Future;
use std::path::PathBuf;
use std::pin::Pin;
use std::sync::Arc;

use bytes::Bytes;
use http_body_util::{BodyExt as _, Full};
use serde_json::Value;

/// What a test server answers: (method, path, Authorization header, body)
/// → (status, JSON).
pub(crate) type Handler = Arc<dyn Fn(&str, &str, &str, &[u8]) -> (u16, Value) + Send + Sync>;

/// A request as an [`AsyncHandler`] sees it.
pub(crate) struct Request {
    pub(crate) method: String,
    pub(crate) path: String,
    /// The Authorization header (empty when absent).
    pub(crate) auth: String,
    pub(crate) body: Bytes,
}

/// A handler that may wait before it answers (a webhook that is too slow).
pub(crate) type AsyncHandler = Arc<dyn Fn(Request) -> Pin<Box<dyn Future<Output = (u16, Value)> + Send>> + Send + Sync>;

/// A CA and a serving certificate it signed, for 127.0.0.1, localhost and
/// any extra DNS names; the CA's PEM is also in `ca_file`.
pub(crate) struct Pki {
    pub(crate) ca_pem: String,
    pub(crate) ca_file: PathBuf,
    cert: rustls::pki_types::CertificateDer<'static>,
    key: Vec<u8>,
    _dir: tempfile::TempDir,
}

impl Pki {
    pub(crate) fn new() -> Pki {
        Pki::with_names(&[])
    }

    /// A serving certificate also valid for `names` (a Service's
    /// `<name>.<namespace>.svc`).
    pub(crate) fn with_names(names: &[&str]) -> Pki {
        use rcgen::{BasicConstraints, CertificateParams, CertifiedIssuer, DnType, IsCa, KeyPair};
        let mut ca_params = CertificateParams::new(Vec::<String>::new()).unwrap();
        ca_params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
        ca_params.distinguished_name.push(DnType::CommonName, "test CA");
        let ca = CertifiedIssuer::self_signed(ca_params, KeyPair::generate().unwrap()).unwrap();
        let leaf_key = KeyPair::generate().unwrap();
        let mut sans = vec!["127.0.0.1".to_string(), "localhost".to_string()];
        sans.extend(names.iter().map(|n| n.to_string()));
        let leaf = CertificateParams::new(sans).unwrap().signed_by(&leaf_key, &ca).unwrap();
        let dir = tempfile::tempdir().unwrap();
        let ca_file = dir.path().join("ca.crt");
        std::fs::write(&ca_file, ca.pem()).unwrap();
        Pki { ca_pem: ca.pem(), ca_file, cert: leaf.der().clone(), key: leaf_key.serialize_der(), _dir: dir }
    }
}

/// An HTTPS server on 127.0.0.1 serving a handler on a tokio runtime of
/// its own; stopped on drop.
pub(crate) struct HttpsServer {
    pub(crate) url: String,
    pub(crate) pki: Arc<Pki>,
    _rt: tokio::runtime::Runtime,
}

impl HttpsServer {
    /// Starts on `port` (0: any) with the certificate of `pki`.
    pub(crate) fn start(port: u16, pki: Arc<Pki>, handler: Handler) -> HttpsServer {
        let handler: AsyncHandler = Arc::new(move |req: Request| {
            let handler = handler.clone();
            Box::pin(async move { handler(&req.method, &req.path, &req.auth, &req.body) })
        });
        Self::serve(port, pki, handler)
    }

    /// Starts with a handler that may wait before answering.
    pub(crate) fn start_async(port: u16, pki: Arc<Pki>, handler: AsyncHandler) -> HttpsServer {
        Self::serve(port, pki, handler)
    }

    fn serve(port: u16, pki: Arc<Pki>, handler: AsyncHandler) -> HttpsServer {
        let key = rustls::pki_types::PrivateKeyDer::Pkcs8(pki.key.clone().into());
        let mut tls = rustls::ServerConfig::builder_with_provider(Arc::new(rustls::crypto::aws_lc_rs::default_provider()))
            .with_safe_default_protocol_versions()
            .unwrap()
            .with_no_client_auth()
            .with_single_cert(vec![pki.cert.clone()], key)
            .unwrap();
        tls.alpn_protocols = vec![b"http/1.1".to_vec()];
        let acceptor = tokio_rustls::TlsAcceptor::from(Arc::new(tls));

        let rt = tokio::runtime::Builder::new_multi_thread().worker_threads(2).enable_all().build().unwrap();
        let listener = rt.block_on(tokio::net::TcpListener::bind(("127.0.0.1", port))).unwrap();
        let url = format!("https://127.0.0.1:{}", listener.local_addr().unwrap().port());
        rt.spawn(async move {
            loop {
                let Ok((tcp, _)) = listener.accept().await else { continue };
                let acceptor = acceptor.clone();
                let handler = handler.clone();
                tokio::spawn(async move {
                    let Ok(tls) = acceptor.accept(tcp).await else { return };
                    let service = hyper::service::service_fn(move |req: hyper::Request<hyper::body::Incoming>| {
                        let handler = handler.clone();
                        async move {
                            let (method, path) = (req.method().to_string(), req.uri().path().to_string());
                            let auth = req.headers().get("authorization").and_then(|v| v.to_str().ok()).unwrap_or_default().to_string();
                            let body = req.into_body().collect().await.map(|b| b.to_bytes()).unwrap_or_default();
                            let (code, value) = handler(Request { method, path, auth, body }).await;
                            let resp = hyper::Response::builder().status(code).header("content-type", "application/json").body(Full::new(Bytes::from(value.to_string()))).unwrap();
                            Ok::<_, std::convert::Infallible>(resp)
                        }
                    });
                    let _ = hyper_util::server::conn::auto::Builder::new(hyper_util::rt::TokioExecutor::new()).serve_connection(hyper_util::rt::TokioIo::new(tls), service).await;
                });
            }
        });
        HttpsServer { url, pki, _rt: rt }
    }
}
