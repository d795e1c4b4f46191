//! The `--audit-*` flags (kube `server/options/audit.go`), flattened into
//! the server's options, and what they build: an [`Auditor`], or none when
//! auditing is off.

use std::path::PathBuf;
use std::sync::Arc;

use super::backend::{Backend, Buffered, Mode, Union, MODES};
use super::log::{Format, LogWriter, Rotation, FORMATS};
use super::policy::{self, Evaluator};
use super::webhook::WebhookWriter;
use super::Auditor;

/// kube's default queue size in batch mode (`--audit-log-batch-buffer-size`).
pub const DEFAULT_BUFFER_SIZE: i64 = 10_000;

/// Events written at once in the blocking modes.
const BLOCKING_MAX_BATCH: usize = 1024;

/// The audit flags.
#[derive(Debug, Clone, Default, clap::Args)]
pub struct AuditOptions {
    /// Path to the file that defines the audit policy configuration
    /// (`audit.k8s.io/v1` `Policy`). Without it nothing is audited.
    #[arg(long)]
    pub audit_policy_file: Option<PathBuf>,
    /// If set, all requests coming to the apiserver will be logged to this
    /// file. '-' means standard out.
    #[arg(long)]
    pub audit_log_path: Option<String>,
    /// The maximum number of days to retain old audit log files based on
    /// the timestamp encoded in their filename.
    #[arg(long, default_value_t = 0, allow_negative_numbers = true)]
    pub audit_log_maxage: i64,
    /// The maximum number of old audit log files to retain. Setting a value
    /// of 0 will mean there's no restriction on the number of files.
    #[arg(long, default_value_t = 0, allow_negative_numbers = true)]
    pub audit_log_maxbackup: i64,
    /// The maximum size in megabytes of the audit log file before it gets
    /// rotated.
    #[arg(long, default_value_t = 0, allow_negative_numbers = true)]
    pub audit_log_maxsize: i64,
    /// Format of saved audits. "legacy" indicates 1-line text format for
    /// each event. "json" indicates structured json format.
    #[arg(long, default_value = "json")]
    pub audit_log_format: String,
    /// Strategy for sending audit events: blocking (requests wait for room
    /// in the queue), blocking-strict (requests wait for the write; a
    /// failed write at RequestReceived fails the request) or batch (events
    /// are dropped when the queue is full).
    #[arg(long, default_value = "blocking")]
    pub audit_log_mode: String,
    /// The size of the queue of events waiting to be written.
    #[arg(long, default_value_t = DEFAULT_BUFFER_SIZE, allow_negative_numbers = true)]
    pub audit_log_batch_buffer_size: i64,
    /// The maximum number of events written at once.
    #[arg(long, default_value_t = 1, allow_negative_numbers = true)]
    pub audit_log_batch_max_size: i64,
    /// API group and version used for serializing audit events written to
    /// log.
    #[arg(long, default_value = "audit.k8s.io/v1")]
    pub audit_log_version: String,
    /// Path to a kubeconfig formatted file that defines the audit webhook
    /// configuration: events are POSTed in batches as `EventList`s to its
    /// server.
    #[arg(long)]
    pub audit_webhook_config_file: Option<PathBuf>,
    /// Strategy for sending audit events to the webhook: blocking,
    /// blocking-strict or batch (as `--audit-log-mode`).
    #[arg(long, default_value = "batch")]
    pub audit_webhook_mode: String,
    /// The size of the queue of events waiting to be sent to the webhook.
    #[arg(long, default_value_t = DEFAULT_BUFFER_SIZE, allow_negative_numbers = true)]
    pub audit_webhook_batch_buffer_size: i64,
    /// The maximum number of events sent in one request.
    #[arg(long, default_value_t = 400, allow_negative_numbers = true)]
    pub audit_webhook_batch_max_size: i64,
    /// The time to wait before retrying the first failed request; it
    /// doubles for the next try.
    #[arg(long, default_value = "10s", value_parser = humantime::parse_duration)]
    pub audit_webhook_initial_backoff: std::time::Duration,
    /// API group and version used for serializing audit events sent to the
    /// webhook.
    #[arg(long, default_value = "audit.k8s.io/v1")]
    pub audit_webhook_version: String,
}

impl AuditOptions {
    /// Checks the flags as kube's `AuditOptions.Validate`.
    ///
    /// # Errors
    /// kube's messages for a bad format, mode, version, size or count.
    pub fn validate(&self) -> anyhow::Result<()> {
        if self.audit_webhook_config_file.is_some() {
            if Mode::parse(&self.audit_webhook_mode).is_none() {
                anyhow::bail!("invalid audit webhook mode {}, allowed modes are {:?}", self.audit_webhook_mode, MODES.join(","));
            }
            anyhow::ensure!(self.audit_webhook_batch_buffer_size > 0, "invalid audit batch webhook buffer size {}, must be a positive number", self.audit_webhook_batch_buffer_size);
            anyhow::ensure!(self.audit_webhook_batch_max_size > 0, "invalid audit batch webhook max batch size {}, must be a positive number", self.audit_webhook_batch_max_size);
            anyhow::ensure!(
                super::policy::API_VERSIONS.contains(&self.audit_webhook_version.as_str()),
                "invalid audit webhook version {}, version {} is not registered",
                self.audit_webhook_version,
                self.audit_webhook_version
            );
        }
        if self.audit_log_path.as_deref().unwrap_or("").is_empty() {
            return Ok(());
        }
        if !FORMATS.contains(&self.audit_log_format.as_str()) {
            anyhow::bail!("invalid audit log format {}, allowed formats are {:?}", self.audit_log_format, FORMATS.join(","));
        }
        for (flag, v) in [("--audit-log-maxage", self.audit_log_maxage), ("--audit-log-maxbackup", self.audit_log_maxbackup), ("--audit-log-maxsize", self.audit_log_maxsize)] {
            anyhow::ensure!(v >= 0, "{flag} {v} can't be a negative number");
        }
        if Mode::parse(&self.audit_log_mode).is_none() {
            anyhow::bail!("invalid audit log mode {}, allowed modes are {:?}", self.audit_log_mode, MODES.join(","));
        }
        anyhow::ensure!(self.audit_log_batch_buffer_size > 0, "invalid audit batch log buffer size {}, must be a positive number", self.audit_log_batch_buffer_size);
        anyhow::ensure!(self.audit_log_batch_max_size > 0, "invalid audit batch log max batch size {}, must be a positive number", self.audit_log_batch_max_size);
        anyhow::ensure!(
            super::policy::API_VERSIONS.contains(&self.audit_log_version.as_str()),
            "invalid audit log version {}, version {} is not registered",
            self.audit_log_version,
            self.audit_log_version
        );
        Ok(())
    }

    /// The auditor of the flags: `None` without a policy file or without
    /// a backend (a log path or a webhook config file); then nothing is
    /// audited, at no cost. With both backends, each gets every event.
    ///
    /// # Errors
    /// Bad flags ([`AuditOptions::validate`]), a policy file kube would
    /// refuse (`loading audit policy file: …`), a log file that cannot be
    /// created, or the writer thread not starting.
    pub fn build(&self) -> anyhow::Result<Option<Arc<Auditor>>> {
        self.validate()?;
        let policy = match &self.audit_policy_file {
            Some(p) => Some(policy::load(p).map_err(|e| anyhow::anyhow!("loading audit policy file: {e}"))?),
            None => None,
        };
        let path = self.audit_log_path.as_deref().filter(|p| !p.is_empty());
        let Some(policy) = policy else {
            if path.is_some() || self.audit_webhook_config_file.is_some() {
                tracing::info!("no audit policy file provided, no events will be recorded");
            }
            return Ok(None);
        };
        let mut backends: Vec<Arc<dyn Backend>> = Vec::new();
        if let Some(path) = path {
            let format = if self.audit_log_format == "legacy" { Format::Legacy } else { Format::Json };
            let writer = if path == "-" {
                LogWriter::stdout(format)
            } else {
                let rotation = Rotation { max_size_mb: self.audit_log_maxsize as u64, max_backups: self.audit_log_maxbackup as usize, max_age_days: self.audit_log_maxage as u64 };
                LogWriter::file(format, std::path::Path::new(path), rotation).map_err(|e| anyhow::anyhow!("ensureLogFile: {e}"))?
            };
            let mode = Mode::parse(&self.audit_log_mode).unwrap_or(Mode::Blocking);
            // Batch sizes bound batch mode's writes, as in kube; the
            // blocking modes write whatever is queued at once.
            let max_batch = if mode == Mode::Batch { self.audit_log_batch_max_size as usize } else { BLOCKING_MAX_BATCH };
            backends.push(Buffered::start("log", mode, self.audit_log_batch_buffer_size as usize, max_batch, Box::new(writer))?);
        }
        if let Some(config) = &self.audit_webhook_config_file {
            let writer = WebhookWriter::new(config, self.audit_webhook_initial_backoff).map_err(|e| anyhow::anyhow!(e))?;
            let mode = Mode::parse(&self.audit_webhook_mode).unwrap_or(Mode::Batch);
            let max_batch = if mode == Mode::Batch { self.audit_webhook_batch_max_size as usize } else { BLOCKING_MAX_BATCH };
            backends.push(Buffered::start("webhook", mode, self.audit_webhook_batch_buffer_size as usize, max_batch, Box::new(writer))?);
        }
        let backend: Arc<dyn Backend> = match backends.len() {
            0 => {
                tracing::info!("an audit policy but no audit backend (--audit-log-path, --audit-webhook-config-file): nothing is audited");
                return Ok(None);
            }
            1 => backends.remove(0),
            _ => Arc::new(Union(backends)),
        };
        Ok(Some(Arc::new(Auditor { policy: Arc::new(Evaluator::new(policy)), backend })))
    }
}
