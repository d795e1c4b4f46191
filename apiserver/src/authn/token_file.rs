//! Static bearer tokens from `--token-auth-file` (kube
//! `authentication/token/tokenfile`).
//!
//! The file is CSV, one token a line: `token,user,uid` and optionally a
//! fourth column of groups, comma-separated and therefore quoted:
//!
//! ```text
//! 31ada4fd-adec-460c-809a-9e56ceb75269,alice,1001,"dev,ops"
//! ```
//!
//! A line with fewer than three columns makes the file invalid (the server
//! refuses to start, as kube-apiserver does); a line with an empty token is
//! skipped and a token given twice keeps its last line. The file is read
//! once, at start.

use std::collections::HashMap;
use std::path::Path;

use async_trait::async_trait;

use super::{bearer_token, Authenticator, Credentials, Error, Result, UserInfo, ALL_AUTHENTICATED};

/// The users of a token file, by token.
#[derive(Debug, Default)]
pub struct TokenFile {
    users: HashMap<String, UserInfo>,
}

impl TokenFile {
    /// Reads `path`.
    ///
    /// # Errors
    /// The file cannot be read, is not CSV, or has a line with fewer than
    /// three columns (kube's message).
    pub fn read(path: &Path) -> std::result::Result<Self, String> {
        let text = std::fs::read(path).map_err(|e| format!("open token file {}: {e}", path.display()))?;
        Self::parse(&text).map_err(|e| format!("token file '{}' {e}", path.display()))
    }

    /// Parses the file's contents.
    ///
    /// # Errors
    /// As [`TokenFile::read`], without the path.
    pub fn parse(text: &[u8]) -> std::result::Result<Self, String> {
        let mut reader = csv::ReaderBuilder::new().has_headers(false).flexible(true).from_reader(text);
        let mut users = HashMap::new();
        for (i, record) in reader.records().enumerate() {
            let record = record.map_err(|e| format!("is not valid CSV: {e}"))?;
            if record.len() < 3 {
                return Err(format!("must have at least 3 columns (token, user name, user uid), found {}", record.len()));
            }
            let token = &record[0];
            if token.is_empty() {
                tracing::warn!("empty token in token file, record number {}", i + 1);
                continue;
            }
            let mut groups: Vec<String> = record.get(3).map(|g| g.split(',').map(String::from).collect()).unwrap_or_default();
            // kube adds system:authenticated to every authenticated user
            // (authenticatedgroup.NewAuthenticatedGroupAdder).
            if !groups.iter().any(|g| g == ALL_AUTHENTICATED) {
                groups.push(ALL_AUTHENTICATED.into());
            }
            let user = UserInfo { name: record[1].to_string(), uid: record[2].to_string(), groups, ..Default::default() };
            if users.insert(token.to_string(), user).is_some() {
                tracing::warn!("duplicate token in token file, record number {}", i + 1);
            }
        }
        Ok(TokenFile { users })
    }
}

#[async_trait]
impl Authenticator for TokenFile {
    async fn authenticate(&self, req: &Credentials<'_>) -> Result<Option<UserInfo>> {
        let Some(token) = bearer_token(req.headers) else { return Ok(None) };
        match self.users.get(token) {
            Some(u) => Ok(Some(u.clone())),
            None => Err(Error::InvalidToken),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_kube_csv() {
        let f = TokenFile::parse(b"t1,alice,1001,\"dev,ops\"\nt2,bob,1002\n,empty,3\nt1,alice2,1003,\"system:authenticated\"\n").unwrap_or_default();
        assert_eq!(f.users.len(), 2);
        let alice = &f.users["t1"];
        assert_eq!((alice.name.as_str(), alice.uid.as_str(), alice.groups.clone()), ("alice2", "1003", vec![ALL_AUTHENTICATED.to_string()]));
        assert_eq!(f.users["t2"].groups, vec![ALL_AUTHENTICATED.to_string()]);
        let bad = TokenFile::parse(b"t1,alice\n").err().unwrap_or_default();
        assert_eq!(bad, "must have at least 3 columns (token, user name, user uid), found 2");
    }

    #[tokio::test]
    async fn bearer_tokens() {
        let f = TokenFile::parse(b"secret,alice,1,\"a,b\"\n").unwrap_or_default();
        // (Authorization header, user name, or an error)
        type Case = (Option<&'static str>, std::result::Result<Option<&'static str>, ()>);
        let cases: &[Case] = &[
            (None, Ok(None)),
            (Some("Bearer secret"), Ok(Some("alice"))),
            (Some("bearer secret"), Ok(Some("alice"))),
            (Some("  Bearer secret  "), Ok(Some("alice"))),
            (Some("Basic secret"), Ok(None)),
            (Some("Bearer "), Ok(None)),
            (Some("Bearer other"), Err(())),
        ];
        for (header, want) in cases {
            let mut req = http::Request::new(());
            if let Some(h) = header {
                req.headers_mut().insert(http::header::AUTHORIZATION, http::HeaderValue::from_static(h));
            }
            let got = f.authenticate(&Credentials::of(&req)).await.map(|u| u.map(|u| u.name)).map_err(|_| ());
            assert_eq!(got, want.map(|o| o.map(String::from)), "{header:?}");
        }
    }
}
