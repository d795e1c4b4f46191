//! Endpoints and the pool of gRPC connections.
//!
//! Each [`Client`] built by [`Client::connect`] owns its own tonic channel,
//! which is one HTTP/2 connection per endpoint it knows. A pool of `n`
//! clients, each given a single endpoint, is therefore `n` connections;
//! connection `i` goes to endpoint `i % endpoints.len()` so a multi-endpoint
//! run spreads evenly and deterministically.

use std::time::{Duration, Instant};

use etcd_client::{Client, ConnectOptions, GetOptions};

use crate::error::{Error, Result};

/// Key read by the connection probe; it need not exist.
const PROBE_KEY: &[u8] = b"/bench/probe";

/// Turns `host:port` into `http://host:port`; URLs with a scheme pass through.
/// Blank entries (e.g. from a trailing comma) are dropped.
pub fn normalize_endpoints(raw: &[String]) -> Vec<String> {
    raw.iter().map(|e| e.trim()).filter(|e| !e.is_empty()).map(|e| if e.contains("://") { e.to_owned() } else { format!("http://{e}") }).collect()
}

/// Opens `conns` connections over `endpoints` and waits until each answers
/// a serializable Get, retrying for up to `connect_timeout`.
///
/// # Errors
/// [`Error::InvalidArgs`] when `endpoints` is empty, [`Error::Connect`] when a
/// client cannot be built, [`Error::Unreachable`] when an endpoint does not
/// answer in time.
pub async fn connect_pool(endpoints: &[String], conns: usize, connect_timeout: Duration) -> Result<Vec<Client>> {
    if endpoints.is_empty() {
        return Err(Error::InvalidArgs("no endpoints".into()));
    }
    let deadline = Instant::now() + connect_timeout;
    let mut pool = Vec::with_capacity(conns);
    for i in 0..conns {
        let endpoint = &endpoints[i % endpoints.len()];
        let client = connect_one(endpoint, deadline).await?;
        pool.push(client);
    }
    Ok(pool)
}

/// Connects one client to `endpoint` and probes it until `deadline`.
async fn connect_one(endpoint: &str, deadline: Instant) -> Result<Client> {
    let started = Instant::now();
    let mut last_error = String::from("no attempt made");
    // Bounded by the deadline; the attempt count bound is a second guard.
    for _attempt in 0..10_000u32 {
        let left = deadline.saturating_duration_since(Instant::now());
        if left.is_zero() {
            break;
        }
        let options = ConnectOptions::new().with_connect_timeout(left).with_keep_alive(Duration::from_secs(10), Duration::from_secs(10));
        let attempt = async {
            let mut client = Client::connect([endpoint], Some(options)).await.map_err(|source| Error::Connect { endpoint: endpoint.to_owned(), source })?;
            client.get(PROBE_KEY, Some(GetOptions::new().with_serializable())).await?;
            Ok::<_, Error>(client)
        };
        match tokio::time::timeout(left, attempt).await {
            Ok(Ok(client)) => return Ok(client),
            // A bad URL will not get better by retrying.
            Ok(Err(e @ Error::Connect { .. })) => return Err(e),
            Ok(Err(e)) => last_error = e.to_string(),
            Err(_) => last_error = "probe timed out".into(),
        }
        tokio::time::sleep(Duration::from_millis(200).min(left)).await;
    }
    Err(Error::Unreachable { endpoint: endpoint.to_owned(), seconds: started.elapsed().as_secs_f64(), last_error })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn normalize_adds_scheme_and_drops_blanks() {
        let raw = vec!["127.0.0.1:2379".to_owned(), " http://h:1 ".to_owned(), String::new(), "https://s:2".to_owned()];
        assert_eq!(normalize_endpoints(&raw), vec!["http://127.0.0.1:2379", "http://h:1", "https://s:2"]);
    }
}
