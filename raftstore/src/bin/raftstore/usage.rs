//! etcd's command line conventions, which come from Go's `flag` package:
//! a flag may be written with one dash (`-name x`), and a bad flag is
//! refused with Go's wording, then the usage, on stderr, with exit code 2:
//!
//! ```text
//! flag provided but not defined: -no-such-flag
//! flag needs an argument: -name
//! invalid value "abc" for flag -max-txn-ops: parse error
//! ```
//!
//! The usage text is etcd's short one with `raftstore` for `etcd`. A word
//! that is not a flag is refused as etcd refuses it, with exit code 1:
//! `error verifying flags, 'x' is not a valid flag. See 'raftstore --help'.`;
//! so are a bad `--config-file`, `--logger` or `--log-outputs`
//! ([`verify_failed`]). Other errors keep clap's wording, with exit code 2.

use std::ffi::OsString;
use std::process::ExitCode;

use clap::error::{ContextKind, ContextValue, ErrorKind};

/// The usage printed after a bad flag (etcd's `usageline`).
pub const USAGE: &str = "Usage:

  raftstore [flags]
    Start a raftstore server.

  raftstore --version
    Show the version of raftstore.

  raftstore -h | --help
    Show the help information about raftstore.

  raftstore --config-file
    Path to the server configuration file. Note that if a configuration file is provided, other command line flags and environment variables will be ignored.

  raftstore snapshot save | restore
    Save a snapshot of a running server, or restore a data dir from one.
";

/// The arguments with Go's one-dash flags (`-name`) written with two
/// dashes, which clap needs; `-h`, values that start with a digit (`-1`)
/// and everything after `--` are left as they are.
pub fn go_style_args(args: impl IntoIterator<Item = OsString>) -> Vec<OsString> {
    let mut out = Vec::new();
    let mut rest = false;
    for arg in args {
        let converted = match arg.to_str() {
            Some("--") => {
                rest = true;
                None
            }
            Some(s) if !rest && s.len() > 2 && s.starts_with('-') && s.as_bytes().get(1).is_some_and(u8::is_ascii_alphabetic) => Some(OsString::from(format!("-{s}"))),
            _ => None,
        };
        out.push(converted.unwrap_or(arg));
    }
    out
}

fn context(e: &clap::Error, kind: ContextKind) -> Option<String> {
    match e.get(kind)? {
        ContextValue::String(s) => Some(s.clone()),
        ContextValue::Strings(v) => v.first().cloned(),
        _ => None,
    }
}

/// The flag's name with one dash, as Go prints it: `--max-txn-ops
/// <MAX_TXN_OPS>` and `--name=x` are `-max-txn-ops` and `-name`.
fn go_flag(arg: &str) -> String {
    let name = arg.split([' ', '=', '[']).next().unwrap_or(arg);
    format!("-{}", name.trim_start_matches('-'))
}

/// What Go's `flag` package (or etcd) says for this clap error, and the exit
/// code; `None` for errors worded as clap words them.
pub fn go_message(e: &clap::Error) -> Option<(String, u8)> {
    let arg = context(e, ContextKind::InvalidArg);
    match e.kind() {
        ErrorKind::UnknownArgument => Some((format!("flag provided but not defined: {}\n{USAGE}", go_flag(&arg?)), 2)),
        ErrorKind::InvalidValue | ErrorKind::ValueValidation => {
            let flag = go_flag(&arg?);
            let value = context(e, ContextKind::InvalidValue).unwrap_or_default();
            if value.is_empty() {
                Some((format!("flag needs an argument: {flag}\n{USAGE}"), 2))
            } else {
                Some((format!("invalid value {value:?} for flag {flag}: parse error\n{USAGE}"), 2))
            }
        }
        ErrorKind::InvalidSubcommand => {
            let word = context(e, ContextKind::InvalidSubcommand)?;
            Some((verifying_flags(&format!("'{word}' is not a valid flag")), 1))
        }
        _ => None,
    }
}

/// etcd's line for flags that parsed but do not make a configuration (a
/// word that is not a flag, a bad `--config-file`, logger or log output).
fn verifying_flags(problem: &str) -> String {
    format!("error verifying flags, {problem}. See 'raftstore --help'.")
}

/// Reports flags that parsed but do not make a configuration as etcd does:
/// [`verifying_flags`]'s line on stderr, exit code 1.
pub fn verify_failed(problem: &str) -> ExitCode {
    eprintln!("{}", verifying_flags(problem));
    ExitCode::from(1)
}

/// Reports a failed parse: help and version go to stdout with success;
/// errors to stderr in Go's wording where [`go_message`] has one.
pub fn report(e: clap::Error) -> ExitCode {
    if matches!(e.kind(), ErrorKind::DisplayHelp | ErrorKind::DisplayVersion | ErrorKind::DisplayHelpOnMissingArgumentOrSubcommand) {
        let _ = e.print();
        return if e.kind() == ErrorKind::DisplayHelpOnMissingArgumentOrSubcommand { ExitCode::from(2) } else { ExitCode::SUCCESS };
    }
    match go_message(&e) {
        Some((text, code)) => {
            eprintln!("{text}");
            ExitCode::from(code)
        }
        None => {
            let _ = e.print();
            ExitCode::from(2)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn one_dash_flags_get_two() {
        let args = ["raftstore", "-name", "x", "--data-dir", "d", "-h", "--quota-backend-bytes", "-1", "-", "--", "-after"];
        let got = go_style_args(args.iter().map(OsString::from));
        let want = ["raftstore", "--name", "x", "--data-dir", "d", "-h", "--quota-backend-bytes", "-1", "-", "--", "-after"];
        assert_eq!(got, want.iter().map(OsString::from).collect::<Vec<_>>());
    }

    #[test]
    fn flag_names_are_printed_with_one_dash() {
        for (arg, want) in
            [("--no-such-flag", "-no-such-flag"), ("--no-such-flag=3", "-no-such-flag"), ("--max-txn-ops <MAX_TXN_OPS>", "-max-txn-ops"), ("-x", "-x"), ("--auto-tls[=<AUTO_TLS>]", "-auto-tls")]
        {
            assert_eq!(go_flag(arg), want);
        }
    }
}
