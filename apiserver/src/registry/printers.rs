//! Helpers for Table cells (kube `pkg/printers/internalversion`).

use std::time::{Duration, SystemTime};

use serde_json::Value;

/// apimachinery `duration.HumanDuration`.
pub fn human_duration(d: Duration) -> String {
    let seconds = d.as_secs();
    if seconds < 60 * 2 {
        return format!("{seconds}s");
    }
    let minutes = seconds / 60;
    if minutes < 10 {
        let s = seconds % 60;
        return if s == 0 { format!("{minutes}m") } else { format!("{minutes}m{s}s") };
    } else if minutes < 60 * 3 {
        return format!("{minutes}m");
    }
    let hours = minutes / 60;
    if hours < 8 {
        let m = minutes % 60;
        return if m == 0 { format!("{hours}h") } else { format!("{hours}h{m}m") };
    } else if hours < 48 {
        return format!("{hours}h");
    } else if hours < 24 * 8 {
        let h = hours % 24;
        return if h == 0 { format!("{}d", hours / 24) } else { format!("{}d{}h", hours / 24, h) };
    } else if hours < 24 * 365 * 2 {
        return format!("{}d", hours / 24);
    } else if hours < 24 * 365 * 8 {
        let dy = (hours / 24) % 365;
        return if dy == 0 { format!("{}y", hours / 24 / 365) } else { format!("{}y{}d", hours / 24 / 365, dy) };
    }
    format!("{}y", hours / 24 / 365)
}

/// `translateTimestampSince` of a `metav1.Time` string.
pub fn since(ts: &Value) -> String {
    let Some(t) = ts.as_str().and_then(crate::meta::parse_time) else { return "<unknown>".into() };
    match SystemTime::now().duration_since(t) {
        Ok(d) => human_duration(d),
        // Up to a second in the future counts as now; more is clock skew.
        Err(e) if e.duration() <= Duration::from_secs(1) => "0s".into(),
        Err(_) => "<invalid>".into(),
    }
}

/// The AGE cell of an object.
pub fn age(obj: &Value) -> String {
    since(&obj["metadata"]["creationTimestamp"])
}

/// An integer cell from a JSON number (0 if missing).
pub fn int(v: &Value) -> Value {
    Value::from(v.as_i64().unwrap_or(0))
}

/// `s` or `<none>` when empty.
pub fn or_none(s: String) -> String {
    if s.is_empty() {
        "<none>".into()
    } else {
        s
    }
}

/// apimachinery `metav1.FormatLabelSelector` of a `LabelSelector` object:
/// `a=b,c in (d,e),!f`, `<none>` when empty or missing.
pub fn label_selector(sel: &Value) -> String {
    let mut parts: Vec<String> = Vec::new();
    if let Some(m) = sel["matchLabels"].as_object() {
        let mut kv: Vec<String> = m.iter().map(|(k, v)| format!("{k}={}", v.as_str().unwrap_or(""))).collect();
        kv.sort();
        parts.extend(kv);
    }
    for e in sel["matchExpressions"].as_array().into_iter().flatten() {
        let key = e["key"].as_str().unwrap_or("");
        let mut vals: Vec<&str> = e["values"].as_array().map(|a| a.iter().filter_map(Value::as_str).collect()).unwrap_or_default();
        vals.sort_unstable();
        parts.push(match e["operator"].as_str().unwrap_or("") {
            "In" => format!("{key} in ({})", vals.join(",")),
            "NotIn" => format!("{key} notin ({})", vals.join(",")),
            "Exists" => key.to_string(),
            "DoesNotExist" => format!("!{key}"),
            op => format!("{key} {op} ({})", vals.join(",")),
        });
    }
    or_none(parts.join(","))
}

/// A string cell from a JSON string (empty if missing).
pub fn str_cell(v: &Value) -> Value {
    Value::String(v.as_str().unwrap_or("").to_string())
}

/// The CREATED AT cell (kube prints `creationTimestamp` itself).
pub fn created_at(obj: &Value) -> Value {
    str_cell(&obj["metadata"]["creationTimestamp"])
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn durations_match_apimachinery() {
        let cases = [
            (0, "0s"),
            (119, "119s"),
            (120, "2m"),
            (125, "2m5s"),
            (600, "10m"),
            (3 * 3600, "3h"),
            (3 * 3600 + 60, "3h1m"),
            (9 * 3600, "9h"),
            (50 * 3600, "2d2h"),
            (10 * 86400, "10d"),
            (3 * 365 * 86400, "3y"),
        ];
        for (s, want) in cases {
            assert_eq!(human_duration(Duration::from_secs(s)), want, "{s}");
        }
    }
}
