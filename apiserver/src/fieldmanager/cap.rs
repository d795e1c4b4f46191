//! Kube's cap on Update entries (`capmanagers.go`,
//! `DefaultMaxUpdateManagers`): when an object has more than ten Update
//! entries, the oldest are folded, per apiVersion, into one Update entry
//! named `ancient-changes`.
//!
//! Entries are taken oldest first (by time in whole seconds, then by
//! manager). The first of each apiVersion is only remembered; the second
//! one of that apiVersion turns the first into the bucket (its fields kept)
//! and is folded into it, as is every later one, until ten Update entries
//! are left. The bucket takes the time of the entry folded in last. Apply
//! entries are never folded, and kube caps only on Update, never on Apply.

use std::collections::HashMap;

use super::Entry;

/// `DefaultMaxUpdateManagers`.
pub(crate) const MAX_UPDATE_MANAGERS: usize = 10;

/// The manager name of the bucket (kube's `oldUpdatesManagerName`).
pub(crate) const BUCKET: &str = "ancient-changes";

/// Folds the oldest Update entries of `entries` into `ancient-changes`
/// buckets until at most `max` Update entries are left.
pub(crate) fn cap_update_managers(entries: &mut Vec<Entry>, max: usize) {
    let secs = |t: &str| crate::meta::parse_time(t).and_then(|t| t.duration_since(std::time::UNIX_EPOCH).ok()).map_or(0, |d| d.as_secs());
    let mut updaters: Vec<(u64, String, String, String)> =
        entries.iter().filter(|e| e.operation != "Apply").map(|e| (secs(&e.time), e.manager.clone(), e.api_version.clone(), e.subresource.clone())).collect();
    if updaters.len() <= max {
        return;
    }
    updaters.sort();
    let find = |entries: &[Entry], manager: &str, api_version: &str, subresource: &str| {
        entries.iter().position(|e| e.operation != "Apply" && e.manager == manager && e.api_version == api_version && e.subresource == subresource)
    };
    let mut first_of_version: HashMap<String, (String, String)> = HashMap::new();
    let mut length = updaters.len();
    for (_, manager, version, subresource) in &updaters {
        if length <= max {
            break;
        }
        let Some(first) = first_of_version.get(version).cloned() else {
            first_of_version.insert(version.clone(), (manager.clone(), subresource.clone()));
            continue;
        };
        let Some(mi) = find(entries, manager, version, subresource) else { continue };
        let folded = entries[mi].clone();
        if find(entries, BUCKET, version, "").is_none() {
            if let Some(fi) = find(entries, &first.0, version, &first.1) {
                let e = &mut entries[fi];
                e.manager = BUCKET.to_string();
                e.subresource = String::new();
            }
        }
        if let Some(bi) = find(entries, BUCKET, version, "") {
            entries[bi].set.union(&folded.set);
            entries[bi].time = folded.time.clone();
        }
        if let Some(mi) = find(entries, manager, version, subresource) {
            entries.remove(mi);
        }
        length -= 1;
    }
}
