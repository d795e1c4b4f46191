//! `range`: closed-loop single-key Gets over a pre-populated key space.

use std::sync::Arc;
use std::time::Instant;

use etcd_client::GetOptions;
use rand::{rngs::SmallRng, SeedableRng};

use crate::cli::{secs, CommonArgs, Consistency, RangeArgs};
use crate::conn::connect_pool;
use crate::driver::{run_closed_loop, Outcome};
use crate::error::Result;
use crate::keys::KeySpace;
use crate::report::Report;
use crate::stats::Tickets;

use super::populate::populate;

/// Runs the `range` workload: pre-populates `<prefix>range/` (untimed),
/// then Gets random keys with the chosen consistency. A Get that finds no
/// key counts as a miss, not an error.
///
/// # Errors
/// Unreachable endpoints or a failed pre-population.
pub async fn run(args: &CommonArgs, range: &RangeArgs, endpoints: &[String]) -> Result<Report> {
    let conns = args.conns_for(args.clients);
    let pool = connect_pool(endpoints, conns, secs(args.connect_timeout)).await?;
    let keys = KeySpace::new(format!("{}range/", args.prefix), args.key_size, args.key_space);
    if !range.no_populate {
        populate(&pool, &keys, args.val_size, args.request_timeout()).await?;
    }
    let options = match range.consistency {
        Consistency::Linearizable => GetOptions::new(),
        Consistency::Serializable => GetOptions::new().with_serializable(),
    };
    let tickets = Arc::new(Tickets::new(args.op_limit(), Instant::now() + args.time_limit()));
    let run = run_closed_loop(args.clients, tickets, args.request_timeout(), |i| {
        let kv = pool[i % pool.len()].kv_client();
        let keys = keys.clone();
        let options = options.clone();
        let mut rng = SmallRng::from_rng(&mut rand::rng());
        move || {
            let key = keys.random(&mut rng);
            let options = options.clone();
            let mut kv = kv.clone();
            async move {
                let resp = kv.get(key, Some(options)).await?;
                Ok(Outcome { conflicts: 0, miss: resp.kvs().is_empty() })
            }
        }
    })
    .await;
    let mut report = Report::new("range", endpoints, args.clients, conns, &run.stats, run.elapsed);
    report.consistency = Some(
        match range.consistency {
            Consistency::Linearizable => "l",
            Consistency::Serializable => "s",
        }
        .to_owned(),
    );
    report.misses = Some(run.stats.misses);
    Ok(report)
}
