//! The file of `--admission-control-config-file` (kube's
//! `AdmissionConfiguration`, `k8s.io/apiserver/pkg/admission/config.go`):
//! one configuration object per plugin, given inline or in a file of its
//! own.
//!
//! ```yaml
//! apiVersion: apiserver.config.k8s.io/v1
//! kind: AdmissionConfiguration
//! plugins:
//! - name: PodSecurity
//!   configuration:            # inline, or
//!     apiVersion: pod-security.admission.config.k8s.io/v1
//!     kind: PodSecurityConfiguration
//!     defaults: {enforce: baseline}
//! - name: EventRateLimit
//!   path: eventconfig.yaml    # relative to this file's folder
//! ```
//!
//! The file and the plugin files are YAML or JSON. Each plugin reads its
//! own object ([`AdmissionConfig::plugin`]) and checks it when it is built.

use std::path::Path;

use serde_json::Value;

/// The `apiVersion`s of `AdmissionConfiguration` kube reads.
const API_VERSIONS: &[&str] = &["apiserver.config.k8s.io/v1", "apiserver.config.k8s.io/v1alpha1", "apiserver.k8s.io/v1alpha1"];

/// The plugins' configuration objects, by plugin name. Empty without a
/// file.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct AdmissionConfig {
    plugins: Vec<(String, Value)>,
}

fn decode(bytes: &[u8]) -> Result<Value, String> {
    if bytes.iter().all(u8::is_ascii_whitespace) {
        return Ok(Value::Null);
    }
    serde_saphyr::from_slice(bytes).map_err(|e| format!("error converting YAML to JSON: {e}"))
}

impl AdmissionConfig {
    /// Reads the file at `path`, and the plugin files it names.
    ///
    /// # Errors
    /// A file that cannot be read or decoded; a document that is not an
    /// `AdmissionConfiguration`; a plugin entry without a name.
    pub fn load(path: &Path) -> Result<Self, String> {
        let bytes = std::fs::read(path).map_err(|e| format!("unable to read admission control configuration from {:?} [{e}]", path.display().to_string()))?;
        Self::parse(&bytes, path.parent().unwrap_or(Path::new(".")))
    }

    /// Parses an `AdmissionConfiguration` document; plugin `path`s are
    /// read relative to `base_dir`.
    ///
    /// # Errors
    /// As [`AdmissionConfig::load`].
    pub fn parse(bytes: &[u8], base_dir: &Path) -> Result<Self, String> {
        let doc = decode(bytes)?;
        let kind = doc.get("kind").and_then(Value::as_str).unwrap_or("");
        let api_version = doc.get("apiVersion").and_then(Value::as_str).unwrap_or("");
        if kind != "AdmissionConfiguration" || !API_VERSIONS.contains(&api_version) {
            return Err(format!("no kind {kind:?} is registered for version {api_version:?}: expected an AdmissionConfiguration of {}", API_VERSIONS.join(", ")));
        }
        let mut plugins = Vec::new();
        for (i, p) in doc.get("plugins").and_then(Value::as_array).into_iter().flatten().enumerate() {
            let name = p.get("name").and_then(Value::as_str).filter(|n| !n.is_empty()).ok_or_else(|| format!("plugins[{i}].name: Required value"))?;
            let config = match p.get("path").and_then(Value::as_str).filter(|p| !p.is_empty()) {
                Some(file) => {
                    let file = base_dir.join(file);
                    let bytes = std::fs::read(&file).map_err(|e| format!("couldn't open admission plugin configuration {:?}: {e}", file.display().to_string()))?;
                    decode(&bytes)?
                }
                None => p.get("configuration").cloned().unwrap_or(Value::Null),
            };
            plugins.push((name.to_string(), config));
        }
        Ok(AdmissionConfig { plugins })
    }

    /// The configuration object of plugin `name` (kube's plugin name), if
    /// the file has one; the first entry wins.
    pub fn plugin(&self, name: &str) -> Option<&Value> {
        self.plugins.iter().find(|(n, _)| n == name).map(|(_, v)| v).filter(|v| !v.is_null())
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn plugins_inline_and_in_files() {
        let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
        std::fs::write(dir.path().join("psa.yaml"), "apiVersion: pod-security.admission.config.k8s.io/v1\nkind: PodSecurityConfiguration\ndefaults:\n  enforce: baseline\n")
            .unwrap_or_else(|e| panic!("{e}"));
        let file = dir.path().join("admission.yaml");
        std::fs::write(
            &file,
            "apiVersion: apiserver.config.k8s.io/v1\nkind: AdmissionConfiguration\nplugins:\n- name: PodSecurity\n  path: psa.yaml\n- name: EventRateLimit\n  configuration:\n    kind: Configuration\n    limits: []\n",
        )
        .unwrap_or_else(|e| panic!("{e}"));
        let c = AdmissionConfig::load(&file).unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(c.plugin("PodSecurity").map(|v| v["defaults"]["enforce"].clone()), Some(json!("baseline")));
        assert_eq!(c.plugin("EventRateLimit").map(|v| v["kind"].clone()), Some(json!("Configuration")));
        assert_eq!(c.plugin("ResourceQuota"), None);

        let json_doc = br#"{"apiVersion": "apiserver.k8s.io/v1alpha1", "kind": "AdmissionConfiguration", "plugins": [{"name": "PodSecurity", "configuration": {"defaults": {}}}]}"#;
        assert!(AdmissionConfig::parse(json_doc, dir.path()).is_ok_and(|c| c.plugin("PodSecurity").is_some()));
        assert!(AdmissionConfig::parse(b"apiVersion: v1\nkind: ConfigMap\n", dir.path()).is_err_and(|e| e.starts_with(r#"no kind "ConfigMap" is registered for version "v1""#)));
        assert!(
            AdmissionConfig::parse(b"apiVersion: apiserver.config.k8s.io/v1\nkind: AdmissionConfiguration\nplugins:\n- path: x\n", dir.path()).is_err_and(|e| e == "plugins[0].name: Required value")
        );
        assert!(AdmissionConfig::parse(b"apiVersion: apiserver.config.k8s.io/v1\nkind: AdmissionConfiguration\nplugins:\n- name: X\n  path: missing.yaml\n", dir.path())
            .is_err_and(|e| e.starts_with("couldn't open admission plugin configuration")));
        assert!(AdmissionConfig::load(&dir.path().join("nope.yaml")).is_err_and(|e| e.starts_with("unable to read admission control configuration from")));
    }
}
