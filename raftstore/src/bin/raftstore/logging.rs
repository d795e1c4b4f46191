//! `--logger`, `--log-outputs` and `--log-level` (etcd
//! `embed/config_logging.go`).
//!
//! - `--logger`: `zap` (etcd 3.5's default and only logger) or `capnslog`,
//!   which etcd 3.4 (Debian's) still takes with a deprecation warning on
//!   stderr; raftstore prints the same warning. Either way the log lines
//!   are raftstore's (tracing's text format), not zap's JSON or capnslog's.
//! - `--log-outputs`: comma-separated `default` (stderr, as etcd when not
//!   under systemd), `stderr`, `stdout` or file paths (appended to,
//!   created if missing); every line goes to each. `default` cannot be
//!   combined with others (etcd: `multi logoutput for "default" is not
//!   supported yet`).
//! - `--log-level`: etcd's `debug`, `info`, `warn`, `error`, `panic` or
//!   `fatal` (the last two log errors only), or a tracing filter such as
//!   `info,raftstore::raft=debug`.
//!
//! The two lines that name the bound client and peer URLs, and start-up
//! errors, are written to stderr whatever the outputs: scripts and the
//! tests read them there.

use std::io::IsTerminal;
use std::path::PathBuf;
use std::sync::Arc;

use tracing_subscriber::fmt::writer::{BoxMakeWriter, MakeWriterExt};

/// What etcd 3.4 prints to stderr for `--logger=capnslog`.
pub const CAPNSLOG_WARNING: &str = "[WARNING] Deprecated '--logger=capnslog' flag is set; use '--logger=zap' flag instead";

/// One `--log-outputs` target.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Output {
    /// `default` or `stderr`.
    Stderr,
    /// `stdout`.
    Stdout,
    /// A file path.
    File(PathBuf),
}

/// Parses `--log-outputs`; an empty value is `default`. A target named
/// twice is written once (zap merges them).
///
/// # Errors
/// etcd's message when `default` is combined with other targets.
pub fn parse_outputs(value: &str) -> Result<Vec<Output>, String> {
    let names: Vec<&str> = value.split(',').map(str::trim).filter(|s| !s.is_empty()).collect();
    if names.len() > 1 && names.contains(&"default") {
        return Err("multi logoutput for \"default\" is not supported yet".into());
    }
    let mut out = Vec::new();
    for name in names {
        let o = match name {
            "default" | "stderr" => Output::Stderr,
            "stdout" => Output::Stdout,
            path => Output::File(PathBuf::from(path)),
        };
        if !out.contains(&o) {
            out.push(o);
        }
    }
    if out.is_empty() {
        out.push(Output::Stderr);
    }
    Ok(out)
}

/// The tracing filter for `--log-level`: etcd's level names, or a tracing
/// filter as it is. openraft logs its internals at info; they are kept at
/// warn unless the filter names openraft. Its heartbeat worker warns on
/// every failed heartbeat, ten a second per member that is down; the
/// replication stream's warning (once a second under its backoff) already
/// reports the member.
pub fn filter_spec(level: &str) -> String {
    let level = match level {
        "panic" | "dpanic" | "fatal" => "error",
        other => other,
    };
    if level.contains("openraft") {
        level.to_string()
    } else {
        format!("{level},openraft=warn,openraft::core::heartbeat=error")
    }
}

/// Checks the three flags and installs the global subscriber.
///
/// # Errors
/// The message for a bad flag, or a log file that cannot be opened.
pub fn init(logger: &str, outputs: &str, level: &str) -> Result<(), String> {
    match logger {
        "zap" => {}
        "capnslog" => eprintln!("{CAPNSLOG_WARNING}"),
        other => return Err(format!("unknown logger option {other:?}")),
    }
    let outputs = parse_outputs(outputs)?;
    let filter = tracing_subscriber::EnvFilter::try_new(filter_spec(level)).map_err(|e| format!("invalid --log-level {level:?}: {e}"))?;
    let mut writer: Option<BoxMakeWriter> = None;
    for o in &outputs {
        let w = match o {
            Output::Stderr => BoxMakeWriter::new(std::io::stderr),
            Output::Stdout => BoxMakeWriter::new(std::io::stdout),
            Output::File(path) => {
                let f = std::fs::OpenOptions::new().create(true).append(true).open(path).map_err(|e| format!("open sink {:?}: open {}: {e}", path.display().to_string(), path.display()))?;
                BoxMakeWriter::new(Arc::new(f))
            }
        };
        writer = Some(match writer {
            None => w,
            Some(prev) => BoxMakeWriter::new(prev.and(w)),
        });
    }
    let writer = writer.unwrap_or_else(|| BoxMakeWriter::new(std::io::stderr));
    let ansi = outputs == [Output::Stderr] && std::io::stderr().is_terminal();
    tracing_subscriber::fmt().with_env_filter(filter).with_ansi(ansi).with_writer(writer).init();
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn outputs_parse_as_etcd_reads_them() {
        let f = |p: &str| Output::File(PathBuf::from(p));
        let cases: Vec<(&str, Result<Vec<Output>, String>)> = vec![
            ("", Ok(vec![Output::Stderr])),
            ("default", Ok(vec![Output::Stderr])),
            ("stdout", Ok(vec![Output::Stdout])),
            ("stderr,stdout", Ok(vec![Output::Stderr, Output::Stdout])),
            ("/var/log/x.log, stderr,/var/log/x.log", Ok(vec![f("/var/log/x.log"), Output::Stderr])),
            ("default,stderr", Err("multi logoutput for \"default\" is not supported yet".into())),
        ];
        for (input, want) in cases {
            assert_eq!(parse_outputs(input), want, "{input:?}");
        }
    }

    #[test]
    fn etcd_levels_become_tracing_filters() {
        assert_eq!(filter_spec("info"), "info,openraft=warn,openraft::core::heartbeat=error");
        assert_eq!(filter_spec("fatal"), "error,openraft=warn,openraft::core::heartbeat=error");
        assert_eq!(filter_spec("debug,openraft=info"), "debug,openraft=info");
        for level in ["debug", "info", "warn", "error", "panic", "fatal"] {
            assert!(tracing_subscriber::EnvFilter::try_new(filter_spec(level)).is_ok(), "{level}");
        }
    }
}
