//! `flood`: holds many connections to a TLS server that never make
//! progress, the way a slowloris attack or a crowd of broken clients does,
//! and reports how the server deals with them.
//!
//! ```text
//! flood --target 127.0.0.1:6443 --silent 1000 --slow 500 --seconds 120
//! ```
//!
//! Kinds of connection, each reopened as soon as the server closes it so
//! the pressure stays constant:
//! - `silent`: a TCP connection that never starts the TLS handshake;
//! - `slow`: a finished TLS handshake, then an HTTP/1 request head sent one
//!   header line every `--drip-ms` and never finished.
//!
//! At the end it prints one JSON line per kind: connection attempts, how
//! many the server closed, and the seconds each stayed open before the
//! server closed it (min, median, max). A server with kube's serving
//! defaults closes both kinds after about 32 s (its TLS handshake and
//! read-header timeouts); one without timeouts closes none.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use clap::Parser;
use rustls::client::danger::{HandshakeSignatureValid, ServerCertVerified, ServerCertVerifier};
use rustls::pki_types::{CertificateDer, ServerName, UnixTime};
use rustls::{DigitallySignedStruct, SignatureScheme};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

/// Command line.
#[derive(Debug, Parser)]
#[command(about = "Hold connections that never make progress against a TLS server")]
struct Cli {
    /// `host:port` of the server.
    #[arg(long)]
    target: String,
    /// Connections that never start the TLS handshake.
    #[arg(long, default_value_t = 0)]
    silent: usize,
    /// Connections that send a request head one line at a time.
    #[arg(long, default_value_t = 0)]
    slow: usize,
    /// Milliseconds between two header lines of a `slow` connection.
    #[arg(long, default_value_t = 2000)]
    drip_ms: u64,
    /// How long to keep the flood up.
    #[arg(long, default_value_t = 60)]
    seconds: u64,
}

/// What one kind of connection saw.
#[derive(Default)]
struct Tally {
    attempts: AtomicU64,
    /// Milliseconds each connection the server closed had been open.
    closed_after_ms: parking_lot::Mutex<Vec<u64>>,
}

/// Accepts any server certificate: the flood measures connection handling,
/// not trust.
#[derive(Debug)]
struct AnyServer(Arc<rustls::crypto::CryptoProvider>);

impl ServerCertVerifier for AnyServer {
    fn verify_server_cert(&self, _: &CertificateDer<'_>, _: &[CertificateDer<'_>], _: &ServerName<'_>, _: &[u8], _: UnixTime) -> Result<ServerCertVerified, rustls::Error> {
        Ok(ServerCertVerified::assertion())
    }
    fn verify_tls12_signature(&self, message: &[u8], cert: &CertificateDer<'_>, dss: &DigitallySignedStruct) -> Result<HandshakeSignatureValid, rustls::Error> {
        rustls::crypto::verify_tls12_signature(message, cert, dss, &self.0.signature_verification_algorithms)
    }
    fn verify_tls13_signature(&self, message: &[u8], cert: &CertificateDer<'_>, dss: &DigitallySignedStruct) -> Result<HandshakeSignatureValid, rustls::Error> {
        rustls::crypto::verify_tls13_signature(message, cert, dss, &self.0.signature_verification_algorithms)
    }
    fn supported_verify_schemes(&self) -> Vec<SignatureScheme> {
        self.0.signature_verification_algorithms.supported_schemes()
    }
}

/// Holds one silent connection until the server closes it; its lifetime,
/// or `None` when the flood ended first or the connect failed.
async fn silent(target: &str, until: Instant) -> Option<Duration> {
    let mut tcp = TcpStream::connect(target).await.ok()?;
    let opened = Instant::now();
    let mut buf = [0u8; 64];
    match tokio::time::timeout(until.saturating_duration_since(Instant::now()), tcp.read(&mut buf)).await {
        Ok(_) => Some(opened.elapsed()),
        Err(_) => None,
    }
}

/// Holds one slow connection: TLS, then a request head that never ends.
async fn slow(target: &str, tls: &tokio_rustls::TlsConnector, drip: Duration, until: Instant) -> Option<Duration> {
    let tcp = TcpStream::connect(target).await.ok()?;
    let opened = Instant::now();
    let name = ServerName::try_from("localhost").ok()?.to_owned();
    let mut s = match tls.connect(name, tcp).await {
        Ok(s) => s,
        Err(_) => return Some(opened.elapsed()),
    };
    if s.write_all(b"GET /version HTTP/1.1\r\nHost: localhost\r\n").await.is_err() {
        return Some(opened.elapsed());
    }
    let mut i = 0u64;
    let mut buf = [0u8; 1024];
    while Instant::now() < until {
        // Any answer, or the end of the stream, means the server gave up on
        // the request; the flood counts the connection as closed then.
        match tokio::time::timeout(drip.min(until.saturating_duration_since(Instant::now())), s.read(&mut buf)).await {
            Ok(_) => return Some(opened.elapsed()),
            Err(_) => {
                i += 1;
                if s.write_all(format!("X-Drip-{i}: x\r\n").as_bytes()).await.is_err() {
                    return Some(opened.elapsed());
                }
            }
        }
    }
    None
}

fn summary(kind: &str, t: &Tally) -> serde_json::Value {
    let mut v = t.closed_after_ms.lock().clone();
    v.sort_unstable();
    let secs = |ms: Option<&u64>| ms.map(|m| *m as f64 / 1000.0);
    serde_json::json!({
        "kind": kind,
        "attempts": t.attempts.load(Ordering::Relaxed),
        "closed_by_server": v.len(),
        "open_seconds_min": secs(v.first()),
        "open_seconds_median": secs(v.get(v.len() / 2)),
        "open_seconds_max": secs(v.last()),
    })
}

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    let cli = Cli::parse();
    let provider = Arc::new(rustls::crypto::aws_lc_rs::default_provider());
    let cfg = rustls::ClientConfig::builder_with_provider(provider.clone())
        .with_safe_default_protocol_versions()?
        .dangerous()
        .with_custom_certificate_verifier(Arc::new(AnyServer(provider)))
        .with_no_client_auth();
    let tls = tokio_rustls::TlsConnector::from(Arc::new(cfg));
    let until = Instant::now() + Duration::from_secs(cli.seconds);
    let drip = Duration::from_millis(cli.drip_ms.max(1));
    let (silent_tally, slow_tally) = (Arc::new(Tally::default()), Arc::new(Tally::default()));
    let mut tasks = Vec::new();
    for k in 0..cli.silent + cli.slow {
        let is_silent = k < cli.silent;
        let tally = if is_silent { silent_tally.clone() } else { slow_tally.clone() };
        let (target, tls) = (cli.target.clone(), tls.clone());
        tasks.push(tokio::spawn(async move {
            while Instant::now() < until {
                tally.attempts.fetch_add(1, Ordering::Relaxed);
                let lived = if is_silent { silent(&target, until).await } else { slow(&target, &tls, drip, until).await };
                match lived {
                    Some(d) => tally.closed_after_ms.lock().push(d.as_millis().try_into().unwrap_or(u64::MAX)),
                    // Refused or out of time: do not spin on a dead server.
                    None => tokio::time::sleep(Duration::from_millis(100)).await,
                }
            }
        }));
    }
    for t in tasks {
        t.await?;
    }
    println!("{}", summary("silent", &silent_tally));
    println!("{}", summary("slow", &slow_tally));
    Ok(())
}
