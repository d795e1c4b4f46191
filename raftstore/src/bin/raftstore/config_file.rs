//! `--config-file`: etcd's YAML configuration file, turned into flags.
//!
//! etcd (`embed.ConfigFromFile`) reads the file into its config with the
//! flag names as keys (`name`, `data-dir`, `listen-client-urls`,
//! `quota-backend-bytes`, ...), starting from the defaults; the command
//! line's other flags and the `ETCD_*` environment are then ignored. TLS
//! settings are nested:
//!
//! ```yaml
//! client-transport-security:
//!   cert-file: /etc/etcd/server.crt   # --cert-file
//!   key-file: /etc/etcd/server.key    # --key-file
//!   client-cert-auth: true            # --client-cert-auth
//!   trusted-ca-file: /etc/etcd/ca.crt # --trusted-ca-file
//!   auto-tls: false                   # --auto-tls
//! peer-transport-security:            # the same with --peer-
//!   auto-tls: true                    # --peer-auto-tls
//! ```
//!
//! [`to_args`] turns each key into `--key=value` for raftstore's own flag
//! parser, so a value means in the file what it means on the command line.
//! Values are YAML scalars; a list (etcd's `log-outputs` is one) is joined
//! with commas; `null` leaves the default. A duration given as a number is
//! nanoseconds, as Go's `time.Duration` reads it.
//!
//! etcd ignores keys it does not know (its YAML decoder is not strict), and
//! so does raftstore, which also ignores etcd keys it has no flag for
//! (`enable-v2`, `cors`, ...); [`Args::ignored`] lists them so that the
//! caller can warn.

use serde_json::Value;

/// The flags read from a file (each key is one flag, so their order does
/// not matter).
#[derive(Debug, Default, PartialEq, Eq)]
pub struct Args {
    /// `--flag=value` arguments.
    pub flags: Vec<String>,
    /// Keys that name no flag (`parent.key` inside a transport-security
    /// block).
    pub ignored: Vec<String>,
}

/// The TLS keys of etcd's `client-transport-security` and
/// `peer-transport-security` blocks that have a flag, which is the key
/// itself (with `peer-` in the peer block).
const SECURITY_KEYS: [&str; 5] = ["cert-file", "key-file", "client-cert-auth", "trusted-ca-file", "auto-tls"];

/// Flags whose file value may be a Go duration in nanoseconds.
const DURATION_KEYS: [&str; 1] = ["experimental-watch-progress-notify-interval"];

/// Turns the YAML `text` into flag arguments. `known` says whether a name
/// is a flag the server takes.
///
/// # Errors
/// The YAML does not parse, is not a mapping, or a key holds a mapping
/// where a value belongs.
pub fn to_args(text: &str, known: impl Fn(&str) -> bool) -> Result<Args, String> {
    // go-yaml v2, which etcd's sigs.k8s.io/yaml uses, reads YAML 1.1
    // scalars (`yes`/`no` are booleans, `010` is octal).
    let options = serde_saphyr::options! { legacy_octal_numbers: true };
    let doc: Value = serde_saphyr::from_str_with_options(text, options).map_err(|e| format!("error converting YAML to JSON: {e}"))?;
    let map = match doc {
        Value::Object(m) => m,
        Value::Null => return Ok(Args::default()),
        other => return Err(format!("error unmarshaling JSON: the configuration must be a mapping of flag names to values, not {other}")),
    };
    let mut out = Args::default();
    for (key, value) in map {
        let prefix = match key.as_str() {
            "client-transport-security" => Some(""),
            "peer-transport-security" => Some("peer-"),
            _ => None,
        };
        match (prefix, value) {
            (Some(prefix), Value::Object(block)) => {
                for (k, v) in block {
                    let flag = format!("{prefix}{k}");
                    if SECURITY_KEYS.contains(&k.as_str()) && known(&flag) {
                        push(&mut out.flags, &flag, v)?;
                    } else {
                        out.ignored.push(format!("{key}.{k}"));
                    }
                }
            }
            (Some(_), Value::Null) => {}
            (Some(_), other) => return Err(format!("{key}: want a mapping, got {other}")),
            (None, _) if key == "config-file" || !known(&key) => out.ignored.push(key),
            (None, v) if DURATION_KEYS.contains(&key.as_str()) && v.is_u64() => out.flags.push(format!("--{key}={v}ns")),
            (None, v) => push(&mut out.flags, &key, v)?,
        }
    }
    Ok(out)
}

/// Appends `--flag=value` for a scalar or a list of scalars.
fn push(flags: &mut Vec<String>, flag: &str, value: Value) -> Result<(), String> {
    let scalar = |v: &Value| -> Result<String, String> {
        match v {
            Value::String(s) => Ok(s.clone()),
            Value::Bool(b) => Ok(b.to_string()),
            Value::Number(n) => Ok(n.to_string()),
            other => Err(format!("{flag}: want a value, got {other}")),
        }
    };
    let text = match &value {
        Value::Null => return Ok(()),
        Value::Array(items) => items.iter().map(scalar).collect::<Result<Vec<_>, _>>()?.join(","),
        v => scalar(v)?,
    };
    flags.push(format!("--{flag}={text}"));
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn known(name: &str) -> bool {
        [
            "name",
            "data-dir",
            "listen-client-urls",
            "log-outputs",
            "quota-backend-bytes",
            "cert-file",
            "key-file",
            "client-cert-auth",
            "auto-tls",
            "peer-auto-tls",
            "experimental-watch-progress-notify-interval",
        ]
        .contains(&name)
    }

    #[test]
    fn keys_become_flags() {
        let text = "
name: infra1
data-dir: /var/lib/etcd
listen-client-urls: http://127.0.0.1:2379,unix://localhost:1
quota-backend-bytes: 8589934592
log-outputs: [stderr, /var/log/etcd.log]
initial-cluster-token: ~
enable-v2: true
no-such-key: 3
experimental-watch-progress-notify-interval: 600000000000
client-transport-security:
  cert-file: /c.pem
  key-file: /k.pem
  client-cert-auth: yes
  allowed-cn: x
peer-transport-security:
  auto-tls: true
  cert-file: ''
";
        let got = to_args(text, known).unwrap_or_else(|e| panic!("{e}"));
        let mut want = [
            "--name=infra1",
            "--data-dir=/var/lib/etcd",
            "--listen-client-urls=http://127.0.0.1:2379,unix://localhost:1",
            "--quota-backend-bytes=8589934592",
            "--log-outputs=stderr,/var/log/etcd.log",
            "--experimental-watch-progress-notify-interval=600000000000ns",
            "--cert-file=/c.pem",
            "--key-file=/k.pem",
            "--client-cert-auth=true",
            "--peer-auto-tls=true",
        ];
        // Keys come in no particular order (each is one flag).
        let (mut flags, mut ignored) = (got.flags, got.ignored);
        flags.sort();
        want.sort();
        assert_eq!(flags, want);
        ignored.sort();
        assert_eq!(ignored, ["client-transport-security.allowed-cn", "enable-v2", "initial-cluster-token", "no-such-key", "peer-transport-security.cert-file"]);
    }

    #[test]
    fn bad_files_are_refused() {
        for text in ["name: [foo", "- a\n- b", "name: {a: 1}", "client-transport-security: 3"] {
            assert!(to_args(text, known).is_err(), "{text:?}");
        }
        assert_eq!(to_args("", known), Ok(Args::default()));
    }
}
