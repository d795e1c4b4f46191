//! The log writer of `--audit-log-path` (kube `plugin/pkg/audit/log`): one
//! event per line, as JSON or kube's legacy text, to standard output
//! (`-`) or to a file rotated as kube's lumberjack rotates it:
//!
//! - a line that would take the file over `--audit-log-maxsize` MB (100
//!   when 0) first moves the file to `<name>-<UTC time>.<ext>`, the time
//!   as `2006-01-02T15-04-05.000` (`audit.log` becomes
//!   `audit-2024-05-01T10-00-00.123.log`), and starts a new one;
//! - after a rotation, backups beyond the newest `--audit-log-maxbackup`
//!   (0: all kept) and those older than `--audit-log-maxage` days (0: no
//!   limit) are deleted;
//! - a single line larger than the maximum is refused (`write length N
//!   exceeds maximum file size M`).

use std::fs::{File, OpenOptions};
use std::io::Write;
use std::path::{Path, PathBuf};
use std::time::{Duration, SystemTime};

use super::backend::{Error, Writer};
use super::event::Event;

/// `--audit-log-format`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Format {
    /// JSON lines.
    Json,
    /// kube's legacy text lines.
    Legacy,
}

/// kube's format names.
pub const FORMATS: &[&str] = &["legacy", "json"];

/// One megabyte as lumberjack counts it.
const MEGABYTE: u64 = 1024 * 1024;
/// lumberjack's maximum size when none is set, in MB.
const DEFAULT_MAX_SIZE_MB: u64 = 100;
/// The time in backup names (Go layout `2006-01-02T15-04-05.000`).
const BACKUP_TIME_LEN: usize = "2006-01-02T15-04-05.000".len();

/// Where lines go.
enum Output {
    Stdout,
    File(RotatingFile),
}

/// The writer.
pub struct LogWriter {
    format: Format,
    out: Output,
}

impl LogWriter {
    /// Lines to standard output.
    pub fn stdout(format: Format) -> Self {
        LogWriter { format, out: Output::Stdout }
    }

    /// Lines to `path`, rotated; the directory and the file (mode 0600)
    /// are created now, as kube's `ensureLogFile`.
    ///
    /// # Errors
    /// The directory or file cannot be created.
    pub fn file(format: Format, path: &Path, rotation: Rotation) -> std::io::Result<Self> {
        Ok(LogWriter { format, out: Output::File(RotatingFile::open(path, rotation)?) })
    }
}

impl Writer for LogWriter {
    fn write(&mut self, events: &[Event]) -> Result<(), Error> {
        let mut first_error = None;
        match &mut self.out {
            Output::Stdout => {
                let mut buf = String::new();
                for e in events {
                    buf.push_str(&line(self.format, e));
                }
                let mut out = std::io::stdout().lock();
                out.write_all(buf.as_bytes())?;
                out.flush()?;
            }
            Output::File(f) => {
                for e in events {
                    if let Err(err) = f.write_line(line(self.format, e).as_bytes()) {
                        first_error.get_or_insert(err);
                    }
                }
                f.flush()?;
            }
        }
        first_error.map_or(Ok(()), |e| Err(e.into()))
    }
}

fn line(format: Format, e: &Event) -> String {
    let mut l = match format {
        Format::Json => e.to_json_line(),
        Format::Legacy => e.to_legacy_line(),
    };
    l.push('\n');
    l
}

/// Rotation limits (lumberjack's `MaxSize`, `MaxBackups`, `MaxAge`).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Rotation {
    /// Megabytes a file may reach; 0 is 100.
    pub max_size_mb: u64,
    /// Backups kept; 0 keeps all.
    pub max_backups: usize,
    /// Days a backup is kept; 0 keeps them.
    pub max_age_days: u64,
}

/// A file rotated by size.
struct RotatingFile {
    path: PathBuf,
    file: Option<std::io::BufWriter<File>>,
    size: u64,
    rotation: Rotation,
}

impl RotatingFile {
    fn open(path: &Path, rotation: Rotation) -> std::io::Result<Self> {
        if let Some(dir) = path.parent().filter(|d| !d.as_os_str().is_empty()) {
            use std::os::unix::fs::DirBuilderExt as _;
            std::fs::DirBuilder::new().recursive(true).mode(0o700).create(dir)?;
        }
        let f = open_append(path)?;
        let size = f.metadata()?.len();
        Ok(RotatingFile { path: path.to_path_buf(), file: Some(std::io::BufWriter::new(f)), size, rotation })
    }

    fn max(&self) -> u64 {
        (if self.rotation.max_size_mb == 0 { DEFAULT_MAX_SIZE_MB } else { self.rotation.max_size_mb }) * MEGABYTE
    }

    fn write_line(&mut self, line: &[u8]) -> std::io::Result<()> {
        let n = line.len() as u64;
        if n > self.max() {
            return Err(std::io::Error::other(format!("write length {n} exceeds maximum file size {}", self.max())));
        }
        if self.file.is_none() || self.size + n > self.max() {
            self.rotate()?;
        }
        let Some(f) = self.file.as_mut() else { return Err(std::io::Error::other("audit log file is not open")) };
        f.write_all(line)?;
        self.size += n;
        Ok(())
    }

    fn flush(&mut self) -> std::io::Result<()> {
        match self.file.as_mut() {
            Some(f) => f.flush(),
            None => Ok(()),
        }
    }

    /// Moves the file aside, starts a new one and removes old backups.
    fn rotate(&mut self) -> std::io::Result<()> {
        if let Some(mut f) = self.file.take() {
            f.flush()?;
        }
        if self.path.exists() {
            std::fs::rename(&self.path, backup_name(&self.path, SystemTime::now()))?;
        }
        self.file = Some(std::io::BufWriter::new(open_append(&self.path)?));
        self.size = 0;
        if let Err(e) = self.remove_old_backups() {
            tracing::warn!("audit log: removing old backups of {}: {e}", self.path.display());
        }
        Ok(())
    }

    /// Deletes backups over the count and age limits (lumberjack `millRunOnce`).
    fn remove_old_backups(&self) -> std::io::Result<()> {
        if self.rotation.max_backups == 0 && self.rotation.max_age_days == 0 {
            return Ok(());
        }
        let mut backups = backups(&self.path)?;
        // Newest first.
        backups.sort_by(|a, b| b.0.cmp(&a.0));
        let mut remove = Vec::new();
        if self.rotation.max_backups > 0 && backups.len() > self.rotation.max_backups {
            remove.extend(backups.split_off(self.rotation.max_backups));
        }
        if self.rotation.max_age_days > 0 {
            let cutoff = SystemTime::now() - Duration::from_secs(self.rotation.max_age_days * 24 * 3600);
            let cutoff = format_backup_time(cutoff);
            remove.extend(backups.into_iter().filter(|(t, _)| *t < cutoff));
        }
        for (_, p) in remove {
            std::fs::remove_file(&p)?;
        }
        Ok(())
    }
}

fn open_append(path: &Path) -> std::io::Result<File> {
    use std::os::unix::fs::OpenOptionsExt as _;
    OpenOptions::new().create(true).append(true).mode(0o600).open(path)
}

/// `2006-01-02T15-04-05.000` in UTC.
fn format_backup_time(t: SystemTime) -> String {
    // `2006-01-02T15:04:05.000Z` → `2006-01-02T15-04-05.000`.
    humantime::format_rfc3339_millis(t).to_string().trim_end_matches('Z').replace(':', "-")
}

/// The name a file is moved to when it is rotated at `t`.
fn backup_name(path: &Path, t: SystemTime) -> PathBuf {
    let (stem, ext) = split_name(path);
    path.with_file_name(format!("{stem}-{}{ext}", format_backup_time(t)))
}

/// The file name without and with its extension (`audit`, `.log`).
fn split_name(path: &Path) -> (String, String) {
    let name = path.file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_default();
    match name.rfind('.') {
        Some(i) if i > 0 => (name[..i].to_string(), name[i..].to_string()),
        _ => (name, String::new()),
    }
}

/// The backups of `path` beside it: (time in the name, path).
fn backups(path: &Path) -> std::io::Result<Vec<(String, PathBuf)>> {
    let (stem, ext) = split_name(path);
    let prefix = format!("{stem}-");
    let dir = path.parent().filter(|d| !d.as_os_str().is_empty()).unwrap_or(Path::new("."));
    let mut out = Vec::new();
    for entry in std::fs::read_dir(dir)? {
        let entry = entry?;
        let name = entry.file_name().to_string_lossy().into_owned();
        let Some(t) = name.strip_prefix(&prefix).and_then(|r| r.strip_suffix(ext.as_str())) else { continue };
        if t.len() == BACKUP_TIME_LEN && t.as_bytes()[10] == b'T' {
            out.push((t.to_string(), entry.path()));
        }
    }
    Ok(out)
}

#[cfg(test)]
#[allow(clippy::expect_used)]
mod tests {
    use super::*;

    #[test]
    fn backup_names_as_lumberjack() {
        let t = SystemTime::UNIX_EPOCH + Duration::from_millis(1_700_000_000_123);
        assert_eq!(backup_name(Path::new("/var/log/audit.log"), t), PathBuf::from("/var/log/audit-2023-11-14T22-13-20.123.log"));
        assert_eq!(backup_name(Path::new("audit"), t), PathBuf::from("audit-2023-11-14T22-13-20.123"));
    }

    #[test]
    fn rotates_by_size_and_keeps_max_backups() {
        let dir = tempfile::tempdir().expect("tempdir");
        let path = dir.path().join("sub/audit.log");
        let mut f = RotatingFile::open(&path, Rotation { max_size_mb: 1, max_backups: 2, max_age_days: 0 }).expect("open");
        let line = vec![b'x'; 400 * 1024];
        for _ in 0..9 {
            f.write_line(&line).expect("write");
            f.flush().expect("flush");
            // Backup names have millisecond times.
            std::thread::sleep(Duration::from_millis(3));
        }
        // 2 lines per MB: the ninth line is in the fifth file.
        assert_eq!(std::fs::metadata(&path).expect("current").len(), 400 * 1024);
        assert_eq!(backups(&path).expect("backups").len(), 2);
        let big = vec![b'x'; 2 * 1024 * 1024];
        assert_eq!(f.write_line(&big).err().map(|e| e.to_string()).unwrap_or_default(), "write length 2097152 exceeds maximum file size 1048576");
    }
}
