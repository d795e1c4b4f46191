//! Server-side apply (`PATCH` with `application/apply-patch+yaml`): the
//! merge of an apply configuration into the live object and the ownership
//! bookkeeping of `metadata.managedFields`, as kube's field manager runs
//! structured-merge-diff's `Updater.Apply`.
//!
//! ```text
//! config set  = ToFieldSet(config)                   (what the applier declares)
//! merged      = Merge(live, config)
//! merged     -= last ∖ (everyone's sets ∪ config set) (fields the applier stopped declaring)
//! changed     = Compare(live, merged).{added, modified}
//! conflicts   = other's set ∩ changed, per other manager (409 unless force)
//! others      = others − conflicts (force) − removed  (dropped when empty)
//! applier     = Apply entry with exactly the config set, time now
//! ```
//!
//! Worked example. Manager `a` applied `replicas: 3` and a container
//! `nginx` with image `nginx:1`; `kubectl scale` (an Update entry) later set
//! `replicas: 5`. Manager `a` applies again with `image: nginx:2` and no
//! `replicas`:
//!
//! - merged: `replicas: 5` (the live value), image `nginx:2`;
//! - the scale took `replicas` away from `a` (a changed field leaves its
//!   other owners), so `a`'s last set lacks it and nothing is removed;
//! - changed: the image, which only `a` owns: no conflict;
//! - result: `a` owns the container and its image, `kubectl` `replicas`.
//!
//! Had `a` sent `replicas: 3`, `replicas` would be modified and owned by
//! `kubectl`'s Update entry: `Apply failed with 1 conflict: conflict with
//! "kubectl" using apps/v1: .spec.replicas`, unless forced, which moves it
//! to `a`.

use std::collections::BTreeMap;

use serde_json::{Map, Value};

use super::conflict::{print_manager, ApplyError, Conflict};
use super::typed::{print_path, Typer};
use super::{compare_from_zero, decode_entries, lastapplied, managed_fields, restrict, without_managed_fields, write_entries, Entry, FieldSet, InVersions, Scope, Versions, STRIPPED};
use crate::schema::Schema;

/// One apply request, as the PATCH handler knows it.
#[derive(Debug, Clone)]
pub struct ApplyRequest<'a> {
    /// The `fieldManager` (required for apply; the caller checks presence).
    pub manager: &'a str,
    /// The served apiVersion (`apps/v1`, `v1`); the config's must equal it.
    pub api_version: &'a str,
    /// The served kind (`Deployment`); the config's must equal it.
    pub kind: &'a str,
    /// `""` or `status`.
    pub subresource: &'a str,
    /// The part of the object the request may own, as for [`super::update`].
    pub scope: Scope,
    /// `force=true`: take conflicting fields over instead of failing.
    pub force: bool,
    /// The time to record (RFC 3339).
    pub now: &'a str,
    /// The resource's other versions: the conflicts with and removals from
    /// a manager whose entry is in another apiVersion are computed on the
    /// objects converted to it.
    pub versions: Option<Versions<'a>>,
}

/// Applies the apply configuration `config` (the decoded body: apiVersion,
/// kind, metadata, …) to `live` (`None`: the object does not exist yet, and
/// apply starts from an empty object; the caller creates it) and returns
/// the object to write, `metadata.managedFields` set. The caller does not
/// run Update tracking on it; it fills uid, creationTimestamp, defaults,
/// validation and admission afterwards. The config's
/// `metadata.resourceVersion` (the client's precondition) is kept.
///
/// An apply that changes no field and no owned set returns `live` as it
/// was, managedFields and their times included, so nothing is written.
/// (The last-applied annotation may still be rewritten for `kubectl`.)
///
/// # Errors
///
/// - [`ApplyError::BadRequest`]: the config's apiVersion or kind is not the
///   served one (`invalid object type: apps/v1, Kind=Deployment`, Go's
///   GroupVersionKind string of the config's), or it carries
///   `metadata.managedFields` (`metadata.managedFields must be nil`), or
///   it is not an object.
/// - [`ApplyError::TypedPatch`]: the config does not fit the schema.
/// - [`ApplyError::Conflicts`]: without `force`, fields other managers own
///   would change (for `kubectl`, less those the last-applied annotation
///   accounts for).
pub fn apply(schema: Option<&Schema>, live: Option<&Value>, config: &Value, req: &ApplyRequest<'_>) -> Result<Value, ApplyError> {
    let Some(cm) = config.as_object() else {
        return Err(ApplyError::BadRequest("error decoding YAML: the apply configuration is not an object".into()));
    };
    let s = |k: &str| cm.get(k).and_then(Value::as_str).unwrap_or("");
    if s("apiVersion") != req.api_version || s("kind") != req.kind {
        return Err(ApplyError::BadRequest(format!("invalid object type: {}", gvk_string(s("apiVersion"), s("kind")))));
    }
    if managed_fields(Some(config)).is_some_and(Value::is_array) {
        return Err(ApplyError::BadRequest("metadata.managedFields must be nil".into()));
    }
    let typer = Typer::new(schema);
    let live_obj = live.map_or_else(|| Value::Object(Map::new()), without_managed_fields);
    let mut former = decode_entries(managed_fields(live)).ok_or_else(|| ApplyError::Undecodable("failed to decode managed fields: a managedFields entry is malformed".into()))?;
    if live.is_some() && former.is_empty() {
        // An object nobody tracks (created before tracking, or reset):
        // what it holds is first given to one Update manager, as kube's
        // `skipNonAppliedManager` does, so an apply that changes it
        // conflicts instead of silently taking it over.
        former.extend(before_first_apply(schema, &live_obj, req));
    }

    let scoped = scope_config(config, req.scope);
    let config_set = typer.field_set_of(&scoped).map_err(|e| {
        let meta = |k: &str| config.get("metadata").and_then(|m| m.get(k)).and_then(Value::as_str).unwrap_or("").to_string();
        ApplyError::TypedPatch(format!("failed to create typed patch object ({}/{}; {}): {e}", meta("namespace"), meta("name"), gvk_string(s("apiVersion"), s("kind"))))
    })?;
    let mut applier_set = config_set.clone();
    restrict(&mut applier_set, req.scope);

    let mut merged = typer.merge(&live_obj, &scoped).map_err(|e| ApplyError::TypedPatch(format!("failed to merge config: {e}")))?;

    let is_mine = |e: &Entry| e.operation == "Apply" && e.manager == req.manager && e.subresource == req.subresource;
    let last = former.iter().find(|e| is_mine(e));
    let others: Vec<Entry> = former.iter().filter(|e| !is_mine(e)).cloned().collect();

    // Fields the applier owned and no longer declares go, unless someone
    // (the applier included) still owns them. A last set recorded in
    // another apiVersion is pruned there, as structured-merge-diff's
    // `prune` converts the merged object to the last set's version.
    let pruned_elsewhere = match (last.filter(|l| !l.set.is_empty() && l.api_version != req.api_version), req.versions) {
        (Some(last), Some(v)) => prune_in_version(&typer, v, &merged, last, &config_set, &others, req.api_version),
        _ => None,
    };
    if let Some(m) = pruned_elsewhere {
        merged = m;
    } else if let Some(last) = last.filter(|l| !l.set.is_empty()) {
        let mut managed = config_set.clone();
        // Sets of managers of another apiVersion are in its paths: they
        // keep a field when its removal would take away one they own there.
        let mut elsewhere: BTreeMap<&str, FieldSet> = BTreeMap::new();
        for e in &others {
            match req.versions.filter(|v| e.api_version != req.api_version && (v.convert)(&merged, &e.api_version).is_some()) {
                Some(_) => elsewhere.entry(e.api_version.as_str()).or_default().union(&e.set),
                None => managed.union(&e.set),
            }
        }
        for p in STRIPPED {
            managed.insert(&p.iter().map(|x| x.to_string()).collect::<Vec<_>>());
        }
        let mut removal = removal_set(&typer.ensure_named(&last.set), &typer.ensure_named(&managed));
        if let (Some(v), false) = (req.versions, removal.is_empty() || elsewhere.is_empty()) {
            removal = kept_elsewhere(&typer, v, &merged, removal, &elsewhere);
        }
        if !removal.is_empty() {
            merged = typer.remove(&merged, &removal);
        }
    }

    let mut cmp = typer.compare(&live_obj, &merged);
    for s in [&mut cmp.added, &mut cmp.modified, &mut cmp.removed] {
        restrict(s, req.scope);
    }
    let mut changed = cmp.modified.clone();
    changed.union(&cmp.added);

    // A manager of another apiVersion sees the change in its own paths.
    let mut elsewhere = InVersions::new(req.versions, req.api_version, Some(&live_obj), &merged, req.scope, typed_compare);
    let mut removed_of: Vec<FieldSet> = Vec::with_capacity(others.len());
    let mut conflicts: Vec<(usize, FieldSet)> = Vec::new();
    for (i, e) in others.iter().enumerate() {
        let c = match elsewhere.of(&e.api_version) {
            Some([added, modified, removed]) => {
                removed_of.push(removed.clone());
                let mut changed = added.clone();
                changed.union(modified);
                e.set.intersection(&changed)
            }
            None => {
                removed_of.push(cmp.removed.clone());
                e.set.intersection(&changed)
            }
        };
        if !c.is_empty() {
            conflicts.push((i, c));
        }
    }
    if !conflicts.is_empty() && !req.force {
        let mut reported = conflicts.clone();
        if req.manager == lastapplied::KUBECTL {
            if let Some(allowed) = lastapplied::allowed_conflicts(&typer, &live_obj, req.api_version) {
                for (_, c) in &mut reported {
                    c.difference(&allowed);
                }
                reported.retain(|(_, c)| !c.is_empty());
            }
        }
        if !reported.is_empty() {
            return Err(ApplyError::Conflicts(describe(&others, &reported)));
        }
    }

    let mut entries = others;
    for (i, c) in conflicts.drain(..) {
        entries[i].set.difference(&c);
    }
    for (e, removed) in entries.iter_mut().zip(&removed_of) {
        e.set.difference(removed);
    }
    entries.retain(|e| !e.set.is_empty());
    // The time says when the manager last changed the object: an apply
    // that only changes ownership keeps the entry's time (none for a new
    // entry), as kube's `managedFieldsUpdater` does.
    let time = if merged == live_obj { last.map(|l| l.time.clone()).unwrap_or_default() } else { req.now.to_string() };
    let mine = Entry { manager: req.manager.to_string(), operation: "Apply".into(), api_version: req.api_version.to_string(), time, subresource: req.subresource.to_string(), set: applier_set };

    let unchanged_sets = {
        let mut before: Vec<(&str, &str, &str, &str, &FieldSet)> = former.iter().map(|e| (e.manager.as_str(), e.operation.as_str(), e.api_version.as_str(), e.subresource.as_str(), &e.set)).collect();
        let mut after: Vec<(&str, &str, &str, &str, &FieldSet)> = entries.iter().map(|e| (e.manager.as_str(), e.operation.as_str(), e.api_version.as_str(), e.subresource.as_str(), &e.set)).collect();
        if !mine.set.is_empty() {
            after.push((mine.manager.as_str(), "Apply", mine.api_version.as_str(), mine.subresource.as_str(), &mine.set));
        }
        before.sort_by(|a, b| (a.0, a.1, a.2, a.3).cmp(&(b.0, b.1, b.2, b.3)));
        after.sort_by(|a, b| (a.0, a.1, a.2, a.3).cmp(&(b.0, b.1, b.2, b.3)));
        before == after
    };
    let noop = merged == live_obj && unchanged_sets;
    let mut out = match live {
        Some(live) if noop => live.clone(),
        _ => {
            if !mine.set.is_empty() {
                entries.push(mine);
            }
            write_entries(&mut merged, entries);
            merged
        }
    };
    if req.manager == lastapplied::KUBECTL {
        lastapplied::rewrite(&mut out, config);
    }
    Ok(out)
}

/// The manager that [`apply`] gives the fields of an untracked object:
/// an Update entry named `before-first-apply`, in the request's version,
/// owning what the object holds (compared with the kind's zero value, as
/// a create), within the request's scope; `None` when that is nothing.
fn before_first_apply(schema: Option<&Schema>, live: &Value, req: &ApplyRequest<'_>) -> Option<Entry> {
    let [mut added, modified, _] = compare_from_zero(schema, None, live);
    added.union(&modified);
    restrict(&mut added, req.scope);
    (!added.is_empty()).then(|| Entry {
        manager: BEFORE_FIRST_APPLY.into(),
        operation: "Update".into(),
        api_version: req.api_version.to_string(),
        time: req.now.to_string(),
        subresource: req.subresource.to_string(),
        set: added,
    })
}

/// kube's name for the manager of an untracked object's fields.
pub const BEFORE_FIRST_APPLY: &str = "before-first-apply";

/// The applier's stale fields removed from `merged` when its last set is
/// of another apiVersion: `merged` is converted to that version, the last
/// set's members that nobody owns there go (each unless its removal,
/// converted back, takes away a field owned in the request's version,
/// the config's included, or in a third version), and the result comes
/// back in the request's version. `None` when the objects do not convert:
/// the caller prunes in the request's version instead.
fn prune_in_version(typer: &Typer<'_>, v: Versions<'_>, merged: &Value, last: &Entry, config_set: &FieldSet, others: &[Entry], own: &str) -> Option<Value> {
    let there = last.api_version.as_str();
    let merged_there = (v.convert)(merged, there)?;
    let schema_there = (v.schema_of)(there);
    let typer_there = Typer::new(schema_there.as_ref());
    let mut managed_there = FieldSet::default();
    let mut owned_here = config_set.clone();
    let mut owned_third: BTreeMap<&str, FieldSet> = BTreeMap::new();
    for e in others {
        match e.api_version.as_str() {
            a if a == there => managed_there.union(&e.set),
            a if a == own || a.is_empty() => owned_here.union(&e.set),
            a => owned_third.entry(a).or_default().union(&e.set),
        }
    }
    for p in STRIPPED {
        managed_there.insert(&p.iter().map(|x| x.to_string()).collect::<Vec<_>>());
    }
    let last_named = typer_there.ensure_named(&last.set);
    let removal = removal_set(&last_named, &typer_there.ensure_named(&managed_there));
    if removal.is_empty() {
        return Some(merged.clone());
    }
    // Whether removing `p` (in `there`'s paths) takes away or changes a
    // field owned in the request's version or a third one.
    let takes_owned = |p: &[String]| -> Option<bool> {
        let mut one = FieldSet::default();
        one.insert(p);
        let back = (v.convert_back)(&typer_there.remove(&merged_there, &one), there)?;
        Some(takes(&typer.compare(merged, &back), &owned_here) || takes_owned_in_versions(v, merged, &back, &owned_third))
    };
    // The owners' sets are of other versions, so an unowned node of the
    // last set (`spec`) may hold owned fields: a removal that would take
    // them is tried again one level down, field by field.
    let mut kept = FieldSet::default();
    let mut work = removal.paths();
    while let Some(p) = work.pop() {
        if !takes_owned(&p)? {
            kept.insert(&p);
        } else if let Some(below) = subset_at(&last_named, &p) {
            work.extend(below.children.keys().map(|k| p.iter().cloned().chain(std::iter::once(k.clone())).collect()));
        }
    }
    if kept.is_empty() {
        return Some(merged.clone());
    }
    (v.convert_back)(&typer_there.remove(&merged_there, &kept), there)
}

/// The part of `set` at `path`.
fn subset_at<'s>(set: &'s FieldSet, path: &[String]) -> Option<&'s FieldSet> {
    path.iter().try_fold(set, |s, k| s.children.get(k))
}

/// The paths of `removal` whose removal from `merged` takes away (or
/// changes) no field owned in another apiVersion (`owned`, by version),
/// checked on the objects converted to each; a path whose effect cannot
/// be converted stays (is not removed).
fn kept_elsewhere(typer: &Typer<'_>, v: Versions<'_>, merged: &Value, removal: FieldSet, owned: &BTreeMap<&str, FieldSet>) -> FieldSet {
    let mut out = FieldSet::default();
    for p in removal.paths() {
        let mut one = FieldSet::default();
        one.insert(&p);
        if !takes_owned_in_versions(v, merged, &typer.remove(merged, &one), owned) {
            out.insert(&p);
        }
    }
    out
}

/// Whether a change takes away or changes a field in `owned`.
fn takes(c: &super::typed::Comparison, owned: &FieldSet) -> bool {
    !c.removed.intersection(owned).is_empty() || !c.modified.intersection(owned).is_empty()
}

/// Whether going from `before` to `after` (request-version objects) takes
/// away or changes a field owned in another version (`owned`, by
/// apiVersion), compared on the objects converted to each; a version the
/// objects do not convert to counts as taken, so the field stays.
fn takes_owned_in_versions(v: Versions<'_>, before: &Value, after: &Value, owned: &BTreeMap<&str, FieldSet>) -> bool {
    owned.iter().any(|(api_version, set)| {
        let (Some(b), Some(a)) = ((v.convert)(before, api_version), (v.convert)(after, api_version)) else { return true };
        let schema = (v.schema_of)(api_version);
        takes(&Typer::new(schema.as_ref()).compare(&b, &a), set)
    })
}

/// [`Typer::compare`] for [`InVersions`] (`lhs` `None`: an empty object).
fn typed_compare(schema: Option<&Schema>, lhs: Option<&Value>, rhs: &Value) -> [FieldSet; 3] {
    let empty = Value::Object(Map::new());
    let c = Typer::new(schema).compare(lhs.unwrap_or(&empty), rhs);
    [c.added, c.modified, c.removed]
}

/// Go's `GroupVersionKind.String()` of an apiVersion and kind:
/// `apps/v1, Kind=Deployment`, `/v1, Kind=ConfigMap` for the core group.
fn gvk_string(api_version: &str, kind: &str) -> String {
    let (group, version) = match api_version.split_once('/') {
        Some((g, v)) => (g, v),
        None => ("", api_version),
    };
    format!("{group}/{version}, Kind={kind}")
}

/// The part of the config a request may change: without `status` on the
/// main resource of a kind with a status subresource; only `status` (and
/// the identifying metadata) on `/status`.
fn scope_config(config: &Value, scope: Scope) -> Value {
    let mut c = config.clone();
    let Some(m) = c.as_object_mut() else { return c };
    match scope {
        Scope::All => {}
        Scope::NoStatus => {
            m.remove("status");
        }
        Scope::StatusOnly => {
            m.retain(|k, _| matches!(k.as_str(), "apiVersion" | "kind" | "metadata" | "status"));
            if let Some(meta) = m.get_mut("metadata").and_then(Value::as_object_mut) {
                meta.retain(|k, _| matches!(k.as_str(), "name" | "namespace" | "uid" | "resourceVersion"));
            }
        }
    }
    c
}

/// The paths to remove: members of the applier's last set (named fields
/// made members) that are present in no manager's set, or below such a
/// path; each with everything under it.
fn removal_set(last: &FieldSet, managed: &FieldSet) -> FieldSet {
    fn walk(last: &FieldSet, managed: Option<&FieldSet>, unowned_above: bool, path: &mut Vec<String>, out: &mut FieldSet) {
        for (k, c) in &last.children {
            let m = managed.and_then(|m| m.children.get(k));
            let unowned = unowned_above || !m.is_some_and(|m| m.member);
            path.push(k.clone());
            if c.member && unowned {
                out.insert(path);
            } else {
                walk(c, m, unowned, path, out);
            }
            path.pop();
        }
    }
    let mut out = FieldSet::default();
    walk(last, Some(managed), false, &mut Vec::new(), &mut out);
    out
}

/// The conflicts as kube reports them: grouped by manager (sorted by its
/// identifier, which starts with the name), each group's paths in field-set
/// order.
fn describe(entries: &[Entry], conflicts: &[(usize, FieldSet)]) -> Vec<Conflict> {
    let mut groups: Vec<(&Entry, &FieldSet)> = conflicts.iter().map(|(i, c)| (&entries[*i], c)).collect();
    groups.sort_by(|a, b| (&a.0.manager, &a.0.operation, &a.0.api_version, &a.0.subresource).cmp(&(&b.0.manager, &b.0.operation, &b.0.api_version, &b.0.subresource)));
    let mut out = Vec::new();
    for (e, c) in groups {
        let manager = print_manager(&e.manager, &e.operation, &e.api_version, &e.subresource);
        for p in c.paths() {
            out.push(Conflict { manager: manager.clone(), path: print_path(&p) });
        }
    }
    out
}
