//! `apiserver`: run with no flags for a single-node cluster in
//! `./apiserver-data`.

use clap::Parser;

/// mimalloc, as in `raftstore` (whose store this binary embeds): glibc's
/// `malloc`/`free` were ~15% of the Raft thread under a write load.
#[global_allocator]
static GLOBAL: mimalloc::MiMalloc = mimalloc::MiMalloc;

#[tokio::main]
async fn main() {
    tracing_subscriber::fmt().with_env_filter(tracing_subscriber::EnvFilter::try_from_default_env().unwrap_or_else(|_| "warn,openraft=error".into())).with_writer(std::io::stderr).init();
    let opts = apiserver::options::Options::parse();
    if let Err(e) = apiserver::server::run(opts).await {
        eprintln!("apiserver: {e:#}");
        std::process::exit(1);
    }
}
