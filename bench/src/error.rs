//! The one error type of the load generator library.
//!
//! Per-request failures are not errors of a run: they are counted in the
//! report. These variants are the failures that stop a run (bad flags, an
//! endpoint that never answers, a failed pre-population).

/// Why a run could not be carried out.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// A flag value is out of range or inconsistent with another.
    #[error("invalid arguments: {0}")]
    InvalidArgs(String),

    /// The client could not be built for an endpoint.
    #[error("connecting to {endpoint}: {source}")]
    Connect {
        /// The endpoint URL, e.g. `http://127.0.0.1:2379`.
        endpoint: String,
        /// The client error.
        #[source]
        source: etcd_client::Error,
    },

    /// An endpoint did not answer a probe read within the connect timeout.
    #[error("endpoint {endpoint} did not answer within {seconds:.1} s: {last_error}")]
    Unreachable {
        /// The endpoint URL.
        endpoint: String,
        /// How long we tried, in seconds.
        seconds: f64,
        /// The last error seen while probing.
        last_error: String,
    },

    /// Setting up a workload (pre-populating keys, creating watches) failed.
    #[error("setup failed: {0}")]
    Setup(String),

    /// One CAS gave up after too many conflicting attempts.
    #[error("txn-cas: gave up after {0} conflicting attempts")]
    TooManyConflicts(u32),

    /// An etcd request failed.
    #[error(transparent)]
    Etcd(#[from] etcd_client::Error),

    /// A request did not complete within the request timeout.
    #[error("request timed out after {0:.1} s")]
    Timeout(f64),

    /// A response did not have the shape the etcd v3 API promises.
    #[error("malformed response: {0}")]
    Malformed(String),
}

/// Result alias for the load generator library.
pub type Result<T> = std::result::Result<T, Error>;
