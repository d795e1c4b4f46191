//! A user's key permissions, merged from all their roles into sorted,
//! disjoint ranges per kind (etcd `auth/range_perm_cache.go`).
//!
//! A permission is a range `[start, end)` of keys, where `end = None`
//! means "no upper bound". A permission on one key `k` is the range
//! `[k, k\0)`, which holds exactly `k`. A permission whose `range_end` is
//! `"\0"` is open-ended (etcd's `--from-key`).
//!
//! A request on one key is allowed when some range holds the key. A
//! request on `[key, range_end)` is allowed only when the ranges together
//! cover all of it: with `[a, c)` and `[c, e)` granted, `[b, d)` is
//! allowed, while with `[a, c)` and `[d, e)` it is not, since `c` is in no
//! range (etcd's interval tree `Contains`).

use super::{perm_type, Role, User};

/// One merged range; `None` end is unbounded.
type Span = (Vec<u8>, Option<Vec<u8>>);

/// Merged read and write ranges of one user.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct UserPerms {
    read: Vec<Span>,
    write: Vec<Span>,
}

/// Which kind of access a request needs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Access {
    /// Range, Watch, compares, `prev_kv`.
    Read,
    /// Put, DeleteRange, LeaseRevoke.
    Write,
}

/// Whether `[key, range_end)` is a permission etcd accepts
/// (`isValidPermissionRange`): a non-empty key, and a range end that is
/// empty (one key), `"\0"` (open-ended), or above the key.
pub fn is_valid_range(key: &[u8], range_end: &[u8]) -> bool {
    if key.is_empty() {
        return false;
    }
    range_end.is_empty() || range_end == [0] || key < range_end
}

/// The span of a permission or request: one key, `[key, end)`, or open.
fn span(key: &[u8], range_end: &[u8]) -> Span {
    if range_end.is_empty() {
        let mut next = key.to_vec();
        next.push(0);
        (key.to_vec(), Some(next))
    } else if range_end == [0] {
        (key.to_vec(), None)
    } else {
        (key.to_vec(), Some(range_end.to_vec()))
    }
}

/// Sorts and joins overlapping or touching spans.
fn merge(mut spans: Vec<Span>) -> Vec<Span> {
    spans.retain(|(s, e)| e.as_ref().is_none_or(|e| s < e));
    spans.sort_by(|a, b| a.0.cmp(&b.0));
    let mut out: Vec<Span> = Vec::with_capacity(spans.len());
    for (s, e) in spans {
        if let Some((_, last_end)) = out.last_mut() {
            let touches = match last_end {
                None => true,
                Some(le) => s <= *le,
            };
            if touches {
                let longer = match (&*last_end, &e) {
                    (None, _) | (_, None) => None,
                    (Some(a), Some(b)) => Some(a.max(b).clone()),
                };
                *last_end = longer;
                continue;
            }
        }
        out.push((s, e));
    }
    out
}

fn covers(spans: &[Span], want: &Span) -> bool {
    let (start, end) = want;
    // Spans are disjoint and sorted: the one that starts at or before
    // `start` and goes past it must cover the whole request.
    let idx = spans.partition_point(|(s, _)| s <= start);
    let Some((_, e)) = idx.checked_sub(1).and_then(|i| spans.get(i)) else { return false };
    match (e, end) {
        (None, _) => true,
        (Some(_), None) => false,
        (Some(e), Some(end)) => e.as_slice() > start.as_slice() && e >= end,
    }
}

impl UserPerms {
    /// Merges the permissions of every role of `user` that exists in
    /// `roles`.
    pub fn build<'a>(user: &User, role: impl Fn(&str) -> Option<&'a Role>) -> Self {
        let (mut read, mut write) = (Vec::new(), Vec::new());
        for name in &user.roles {
            let Some(r) = role(name) else { continue };
            for p in &r.key_permission {
                let s = span(&p.key, &p.range_end);
                match p.perm_type {
                    perm_type::READ => read.push(s),
                    perm_type::WRITE => write.push(s),
                    _ => {
                        read.push(s.clone());
                        write.push(s);
                    }
                }
            }
        }
        UserPerms { read: merge(read), write: merge(write) }
    }

    /// Whether the user may access `key` (`range_end` empty) or
    /// `[key, range_end)` (`"\0"`: every key from `key` on).
    pub fn allows(&self, access: Access, key: &[u8], range_end: &[u8]) -> bool {
        let spans = match access {
            Access::Read => &self.read,
            Access::Write => &self.write,
        };
        if range_end.is_empty() {
            let idx = spans.partition_point(|(s, _)| s.as_slice() <= key);
            return idx.checked_sub(1).and_then(|i| spans.get(i)).is_some_and(|(_, e)| e.as_ref().is_none_or(|e| key < e.as_slice()));
        }
        covers(spans, &span(key, range_end))
    }
}

#[cfg(test)]
mod tests {
    use super::super::Permission;
    use super::*;

    fn perms(list: &[(i32, &str, &str)]) -> UserPerms {
        let role = Role { name: b"r".to_vec(), key_permission: list.iter().map(|(t, k, e)| Permission { perm_type: *t, key: k.as_bytes().to_vec(), range_end: e.as_bytes().to_vec() }).collect() };
        let user = User { name: b"u".to_vec(), roles: vec!["r".into(), "missing".into()], ..Default::default() };
        UserPerms::build(&user, |n| (n == "r").then_some(&role))
    }

    #[test]
    fn keys_ranges_and_open_ends_follow_etcd() {
        let p = perms(&[(perm_type::READWRITE, "a", "c"), (perm_type::READ, "c", "e"), (perm_type::WRITE, "k", ""), (perm_type::READ, "x", "\0")]);
        let cases: Vec<(Access, &str, &str, bool)> = vec![
            (Access::Read, "a", "", true),
            (Access::Read, "b", "", true),
            (Access::Read, "e", "", false),
            (Access::Read, "b", "d", true),
            (Access::Read, "a", "e", true),
            (Access::Read, "a", "f", false),
            (Access::Write, "b", "d", false),
            (Access::Write, "k", "", true),
            (Access::Write, "k0", "", false),
            (Access::Write, "k", "k\0", true),
            (Access::Read, "k", "", false),
            (Access::Read, "xyz", "", true),
            (Access::Read, "x", "\0", true),
            (Access::Read, "w", "\0", false),
            (Access::Read, "\0", "\0", false),
        ];
        for (access, key, end, want) in cases {
            assert_eq!(p.allows(access, key.as_bytes(), end.as_bytes()), want, "{access:?} [{key:?}, {end:?})");
        }
    }

    #[test]
    fn gaps_between_ranges_are_refused() {
        let p = perms(&[(perm_type::READ, "a", "c"), (perm_type::READ, "d", "e")]);
        assert!(!p.allows(Access::Read, b"b", b"d"));
        assert!(p.allows(Access::Read, b"d", b"e"));
    }

    #[test]
    fn valid_ranges_are_etcds() {
        assert!(is_valid_range(b"a", b""));
        assert!(is_valid_range(b"a", b"\0"));
        assert!(is_valid_range(b"a", b"b"));
        assert!(!is_valid_range(b"b", b"a"));
        assert!(!is_valid_range(b"a", b"a"));
        assert!(!is_valid_range(b"", b"a"));
    }
}
