//! `admission-webhook`: a local HTTPS admission webhook that admits every
//! request, for measuring what a webhook call adds to a write
//! (`bench/admission-latency.sh`).
//!
//! ```text
//! admission-webhook --port 9443 --ca-out /tmp/webhook-ca.pem
//! ```
//!
//! It makes a self-signed certificate for `127.0.0.1` (written, PEM, to
//! `--ca-out` for the configuration's `caBundle`), then answers every
//! `POST` carrying an `admission.k8s.io/v1` AdmissionReview with
//! `allowed: true` and the request's uid. Prints `listening` once ready.

use std::sync::Arc;

use anyhow::Context as _;
use bytes::Bytes;
use clap::Parser;
use http_body_util::{BodyExt, Full};
use hyper::service::service_fn;
use hyper_util::rt::{TokioExecutor, TokioIo};
use rustls::pki_types::{CertificateDer, PrivateKeyDer, PrivatePkcs8KeyDer};
use serde_json::{json, Value};

/// Command line.
#[derive(Debug, Parser)]
#[command(about = "A local HTTPS admission webhook that allows everything")]
struct Cli {
    /// Port on 127.0.0.1.
    #[arg(long)]
    port: u16,
    /// Where to write the (self-signed) serving certificate, PEM.
    #[arg(long)]
    ca_out: std::path::PathBuf,
}

/// The AdmissionReview answering `body`: allowed, with its uid.
fn review(body: &[u8]) -> Value {
    let req: Value = serde_json::from_slice(body).unwrap_or(Value::Null);
    json!({
        "apiVersion": "admission.k8s.io/v1",
        "kind": "AdmissionReview",
        "response": {"uid": req["request"]["uid"], "allowed": true},
    })
}

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    let cli = Cli::parse();
    let _ = rustls::crypto::aws_lc_rs::default_provider().install_default();
    let key = rcgen::KeyPair::generate().context("generate a key")?;
    let params = rcgen::CertificateParams::new(vec!["127.0.0.1".to_string()]).context("certificate parameters")?;
    let cert = params.self_signed(&key).context("self-sign")?;
    std::fs::write(&cli.ca_out, cert.pem()).with_context(|| format!("write {}", cli.ca_out.display()))?;
    let tls = rustls::ServerConfig::builder()
        .with_no_client_auth()
        .with_single_cert(vec![CertificateDer::from(cert.der().to_vec())], PrivateKeyDer::Pkcs8(PrivatePkcs8KeyDer::from(key.serialize_der())))
        .context("TLS configuration")?;
    let acceptor = tokio_rustls::TlsAcceptor::from(Arc::new(tls));
    let listener = tokio::net::TcpListener::bind(("127.0.0.1", cli.port)).await.with_context(|| format!("bind 127.0.0.1:{}", cli.port))?;
    println!("listening");
    loop {
        let (tcp, _) = listener.accept().await?;
        let acceptor = acceptor.clone();
        tokio::spawn(async move {
            let Ok(tls) = acceptor.accept(tcp).await else { return };
            let svc = service_fn(|req: hyper::Request<hyper::body::Incoming>| async move {
                let body = req.into_body().collect().await.map(|b| b.to_bytes()).unwrap_or_default();
                let out = serde_json::to_vec(&review(&body)).unwrap_or_default();
                hyper::Response::builder().header("content-type", "application/json").body(Full::new(Bytes::from(out)))
            });
            let _ = hyper_util::server::conn::auto::Builder::new(TokioExecutor::new()).serve_connection(TokioIo::new(tls), svc).await;
        });
    }
}
