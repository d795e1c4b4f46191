//! First-start certificates and the admin kubeconfig.
//!
//! On first start the data dir gets `pki/ca.{crt,key}` (the cluster CA,
//! which also verifies client certificates), `pki/apiserver.{crt,key}`
//! (serving, SANs `localhost`, `127.0.0.1` and the bind address) and
//! `pki/admin.{crt,key}` (CN `kubernetes-admin`, O `system:masters`). Later
//! starts reuse them (the CA key is not needed then: a `--pki-dir` filled
//! from an outside CA may lack it); a directory with only some of them is
//! an error, never overwritten. `admin.kubeconfig` is rewritten on every start, since
//! the port may differ (`--secure-port 0`).

use std::path::{Path, PathBuf};

use base64::Engine as _;
use rcgen::{BasicConstraints, CertificateParams, DnType, ExtendedKeyUsagePurpose, IsCa, Issuer, KeyPair, KeyUsagePurpose};

/// Paths of the files a server needs.
#[derive(Debug, Clone)]
pub struct Pki {
    /// CA certificate (PEM); also the client CA.
    pub ca_cert: PathBuf,
    /// Serving certificate (PEM).
    pub serving_cert: PathBuf,
    /// Serving key (PEM).
    pub serving_key: PathBuf,
    /// Admin client certificate (PEM).
    pub admin_cert: PathBuf,
    /// Admin client key (PEM).
    pub admin_key: PathBuf,
}

fn write_private(path: &Path, data: &str) -> anyhow::Result<()> {
    use std::io::Write;
    let mut opts = std::fs::OpenOptions::new();
    opts.write(true).create(true).truncate(true);
    #[cfg(unix)]
    {
        use std::os::unix::fs::OpenOptionsExt;
        opts.mode(0o600);
    }
    let mut f = opts.open(path).map_err(|e| anyhow::anyhow!("write {}: {e}", path.display()))?;
    f.write_all(data.as_bytes())?;
    Ok(())
}

/// Creates the CA and certificates in `<data_dir>/pki` unless they exist.
///
/// `extra_sans` are added to the serving certificate (the bind address).
///
/// # Errors
/// I/O or certificate generation errors.
pub fn ensure(data_dir: &Path, extra_sans: &[String]) -> anyhow::Result<Pki> {
    ensure_in(&data_dir.join("pki"), extra_sans)
}

/// [`ensure`] with the certificates in `dir` itself (`--pki-dir`).
///
/// # Errors
/// As [`ensure`].
pub fn ensure_in(dir: &Path, extra_sans: &[String]) -> anyhow::Result<Pki> {
    let dir = dir.to_path_buf();
    std::fs::create_dir_all(&dir)?;
    let pki = Pki { ca_cert: dir.join("ca.crt"), serving_cert: dir.join("apiserver.crt"), serving_key: dir.join("apiserver.key"), admin_cert: dir.join("admin.crt"), admin_key: dir.join("admin.key") };
    // What the server reads. The CA key is not among them: a directory
    // filled from an outside CA (deploy/cluster.sh gives each node one
    // without the key) is complete without it.
    let needed = [pki.serving_key.clone(), pki.admin_key.clone(), pki.serving_cert.clone(), pki.admin_cert.clone(), pki.ca_cert.clone()];
    // Nodes that share a directory and start together (a three-node start
    // by hand) must not each make a CA: one generates, the others wait and
    // then find the set complete.
    // A read-only directory (a mounted secret) cannot hold the lock file;
    // it cannot be written to either, so nothing races there.
    let lock_path = dir.join(".lock");
    let lock = std::fs::OpenOptions::new().create(true).truncate(false).write(true).open(&lock_path).ok();
    if let Some(lock) = &lock {
        lock.lock().map_err(|e| anyhow::anyhow!("lock {}: {e}", lock_path.display()))?;
    }
    if needed.iter().all(|f| f.exists()) {
        // The server reads the serving pair and CA itself and says which
        // is wrong; the admin pair is only copied into admin.kubeconfig.
        check_pem(&pki.admin_cert, "CERTIFICATE")?;
        check_pem(&pki.admin_key, "PRIVATE KEY")?;
        return Ok(pki);
    }
    let present: Vec<PathBuf> = needed.iter().chain([&dir.join("ca.key")]).filter(|f| f.exists()).cloned().collect();
    if let Some(missing) = needed.iter().find(|f| !f.exists()).filter(|_| !present.is_empty()) {
        // Generating would overwrite the keys that are there (a CA key
        // other certificates were signed with, say).
        anyhow::bail!(
            "incomplete certificate directory {}: {} exists but {} is missing; put the missing file back, or empty the directory to generate a new CA and certificates",
            dir.display(),
            present[0].display(),
            missing.display()
        );
    }

    let ca_key = KeyPair::generate()?;
    let mut ca = CertificateParams::new(Vec::<String>::new())?;
    ca.distinguished_name.push(DnType::CommonName, "kubernetes");
    ca.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
    ca.key_usages = vec![KeyUsagePurpose::KeyCertSign, KeyUsagePurpose::CrlSign, KeyUsagePurpose::DigitalSignature];
    ca.not_after = rcgen::date_time_ymd(2036, 1, 1);
    let ca_cert = ca.self_signed(&ca_key)?;
    let ca_key_pem = ca_key.serialize_pem();
    let issuer = Issuer::new(ca, ca_key);

    let mut sans = vec!["localhost".to_string(), "127.0.0.1".to_string(), "kubernetes".to_string(), "kubernetes.default".to_string()];
    for s in extra_sans {
        if !sans.contains(s) && s != "0.0.0.0" && s != "::" {
            sans.push(s.clone());
        }
    }
    let serving_key = KeyPair::generate()?;
    let mut serving = CertificateParams::new(sans)?;
    serving.distinguished_name.push(DnType::CommonName, "kube-apiserver");
    serving.extended_key_usages = vec![ExtendedKeyUsagePurpose::ServerAuth];
    serving.key_usages = vec![KeyUsagePurpose::DigitalSignature, KeyUsagePurpose::KeyEncipherment];
    serving.not_after = rcgen::date_time_ymd(2035, 1, 1);
    let serving_cert = serving.signed_by(&serving_key, &issuer)?;

    let admin_key = KeyPair::generate()?;
    let mut admin = CertificateParams::new(Vec::<String>::new())?;
    admin.distinguished_name.push(DnType::CommonName, "kubernetes-admin");
    admin.distinguished_name.push(DnType::OrganizationName, "system:masters");
    admin.extended_key_usages = vec![ExtendedKeyUsagePurpose::ClientAuth];
    admin.key_usages = vec![KeyUsagePurpose::DigitalSignature, KeyUsagePurpose::KeyEncipherment];
    admin.not_after = rcgen::date_time_ymd(2035, 1, 1);
    let admin_cert = admin.signed_by(&admin_key, &issuer)?;

    write_private(&dir.join("ca.key"), &ca_key_pem)?;
    write_private(&pki.serving_key, &serving_key.serialize_pem())?;
    write_private(&pki.admin_key, &admin_key.serialize_pem())?;
    std::fs::write(&pki.serving_cert, serving_cert.pem())?;
    std::fs::write(&pki.admin_cert, admin_cert.pem())?;
    // The CA goes last: its presence marks the set as complete.
    std::fs::write(&pki.ca_cert, ca_cert.pem())?;
    Ok(pki)
}

/// Fails unless `path` holds a PEM block whose label ends with `label`
/// (`CERTIFICATE`; `PRIVATE KEY` also matches `RSA PRIVATE KEY` and
/// `EC PRIVATE KEY`), so a damaged file is refused at start rather than
/// copied into a kubeconfig that kubectl cannot use.
fn check_pem(path: &Path, label: &str) -> anyhow::Result<()> {
    let text = std::fs::read_to_string(path).unwrap_or_default();
    let ok = text.lines().any(|l| l.strip_prefix("-----BEGIN ").and_then(|l| l.strip_suffix("-----")).is_some_and(|l| l.ends_with(label)));
    if !ok {
        anyhow::bail!("{}: no PEM {label} in it; replace the file, or empty the directory to generate a new CA and certificates", path.display());
    }
    Ok(())
}

/// Writes a kubeconfig for the admin user at `path`, pointing at `server`
/// (`https://127.0.0.1:6443`), with the certificates embedded.
///
/// # Errors
/// I/O errors.
pub fn write_kubeconfig(path: &Path, server: &str, ca_cert: &Path, client_cert: &Path, client_key: &Path) -> anyhow::Result<()> {
    let b64 = |p: &Path| -> anyhow::Result<String> {
        let data = std::fs::read(p).map_err(|e| anyhow::anyhow!("read {}: {e}", p.display()))?;
        Ok(base64::engine::general_purpose::STANDARD.encode(data))
    };
    let cfg = format!(
        "apiVersion: v1\nkind: Config\nclusters:\n- name: kubers\n  cluster:\n    server: {server}\n    certificate-authority-data: {ca}\nusers:\n- name: kubernetes-admin\n  user:\n    client-certificate-data: {cert}\n    client-key-data: {key}\ncontexts:\n- name: kubernetes-admin@kubers\n  context:\n    cluster: kubers\n    user: kubernetes-admin\n    namespace: default\ncurrent-context: kubernetes-admin@kubers\npreferences: {{}}\n",
        ca = b64(ca_cert)?,
        cert = b64(client_cert)?,
        key = b64(client_key)?,
    );
    write_private(path, &cfg)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A complete set is reused; a partial one is refused and left as it
    /// is (generating would replace the CA key).
    #[test]
    fn a_partial_directory_is_refused_not_overwritten() {
        let tmp = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
        let dir = tmp.path().join("pki");
        let first = ensure_in(&dir, &[]).unwrap_or_else(|e| panic!("{e}"));
        let ca_key = std::fs::read(dir.join("ca.key")).unwrap_or_default();
        let again = ensure_in(&dir, &[]).unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(std::fs::read(&again.ca_cert).ok(), std::fs::read(&first.ca_cert).ok());
        std::fs::remove_file(&first.admin_cert).unwrap_or_else(|e| panic!("{e}"));
        let err = ensure_in(&dir, &[]).err().map(|e| e.to_string()).unwrap_or_default();
        assert!(err.starts_with("incomplete certificate directory") && err.contains("admin.crt is missing"), "{err}");
        assert_eq!(std::fs::read(dir.join("ca.key")).unwrap_or_default(), ca_key, "the CA key is untouched");
        assert!(!first.admin_cert.exists());
    }

    /// Servers that start together on one empty directory end up with
    /// one CA, not one each (the review found three CAs when three nodes
    /// started at once); a damaged admin certificate is refused.
    #[test]
    fn concurrent_first_starts_share_one_ca_and_a_damaged_admin_cert_is_refused() {
        let tmp = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
        let dir = tmp.path().join("pki");
        let cas: Vec<Vec<u8>> = std::thread::scope(|s| {
            let handles: Vec<_> = (0..4).map(|_| s.spawn(|| ensure_in(&dir, &[]).map(|p| std::fs::read(p.ca_cert).unwrap_or_default()))).collect();
            handles.into_iter().map(|h| h.join().unwrap_or_else(|_| panic!("thread panicked")).unwrap_or_else(|e| panic!("{e}"))).collect()
        });
        assert!(cas.iter().all(|c| c == &cas[0] && !c.is_empty()), "each start made its own CA");
        std::fs::write(dir.join("admin.crt"), "junk\n").unwrap_or_else(|e| panic!("{e}"));
        let err = ensure_in(&dir, &[]).err().map(|e| e.to_string()).unwrap_or_default();
        assert!(err.contains("admin.crt: no PEM CERTIFICATE"), "{err}");
    }

    /// A directory with every file the server reads but no CA key (a node
    /// of deploy/cluster.sh, whose CA key stays with the operator) is
    /// reused as it is; a CA key alone is kept, never overwritten.
    #[test]
    fn a_directory_without_the_ca_key_is_complete() {
        let tmp = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
        let dir = tmp.path().join("pki");
        let first = ensure_in(&dir, &[]).unwrap_or_else(|e| panic!("{e}"));
        let serving = std::fs::read(&first.serving_cert).unwrap_or_default();
        std::fs::remove_file(dir.join("ca.key")).unwrap_or_else(|e| panic!("{e}"));
        ensure_in(&dir, &[]).unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(std::fs::read(&first.serving_cert).unwrap_or_default(), serving, "the certificates were replaced");
        assert!(!dir.join("ca.key").exists());

        let only_key = tmp.path().join("only-key");
        std::fs::create_dir_all(&only_key).unwrap_or_else(|e| panic!("{e}"));
        std::fs::write(only_key.join("ca.key"), "key").unwrap_or_else(|e| panic!("{e}"));
        let err = ensure_in(&only_key, &[]).err().map(|e| e.to_string()).unwrap_or_default();
        assert!(err.starts_with("incomplete certificate directory"), "{err}");
        assert_eq!(std::fs::read_to_string(only_key.join("ca.key")).unwrap_or_default(), "key");
    }
}
