//! The standard `process_*` metrics of Prometheus clients (memory, CPU, open files, start time),
//! read from `/proc` at each scrape with the `procfs` crate, as the `prometheus` crate's
//! process collector does. Linux only: elsewhere the families are left out.

/// One reading of this process.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct ProcessMetrics {
    /// Resident set size, in bytes.
    pub resident_memory_bytes: u64,
    /// Virtual memory size, in bytes.
    pub virtual_memory_bytes: u64,
    /// User and system CPU time, in seconds.
    pub cpu_seconds: f64,
    /// Open file descriptors.
    pub open_fds: u64,
    /// The open-file limit (soft; `ulimit -n`); absent when unlimited.
    pub max_fds: Option<u64>,
    /// Start time since the Unix epoch, in seconds.
    pub start_time_seconds: f64,
}

impl ProcessMetrics {
    /// This process now; `None` where `/proc` cannot be read (not Linux, or a sandbox).
    #[cfg(target_os = "linux")]
    pub fn read() -> Option<Self> {
        use procfs::process::{LimitValue, Process};
        let process = Process::myself().ok()?;
        let stat = process.stat().ok()?;
        let ticks = procfs::ticks_per_second() as f64;
        let boot_time_s = procfs::boot_time_secs().ok()? as f64;
        let max_fds = match process.limits().ok()?.max_open_files.soft_limit {
            LimitValue::Value(limit) => Some(limit),
            LimitValue::Unlimited => None,
        };
        Some(Self {
            resident_memory_bytes: stat.rss.saturating_mul(procfs::page_size()),
            virtual_memory_bytes: stat.vsize,
            cpu_seconds: (stat.utime + stat.stime) as f64 / ticks,
            open_fds: process.fd_count().ok()? as u64,
            max_fds,
            start_time_seconds: boot_time_s + stat.starttime as f64 / ticks,
        })
    }

    /// This process now; `None` where `/proc` cannot be read (not Linux, or a sandbox).
    #[cfg(not(target_os = "linux"))]
    pub fn read() -> Option<Self> {
        None
    }
}

#[cfg(all(test, target_os = "linux"))]
mod tests {
    use super::*;

    #[test]
    fn this_process_reads_as_itself() {
        let during = ProcessMetrics::read().expect("/proc is readable");
        // At least stdin, stdout and stderr.
        assert!(during.open_fds >= 3, "{during:?}");
        assert!(during.resident_memory_bytes > 1 << 20, "{during:?}");
        assert!(during.virtual_memory_bytes >= during.resident_memory_bytes);
        let now_s = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .unwrap()
            .as_secs_f64();
        assert!(
            during.start_time_seconds <= now_s + 1.0 && during.start_time_seconds > now_s - 3_600.0,
            "{during:?} (now {now_s})"
        );
        assert!(during.max_fds.is_none_or(|max| max >= during.open_fds));
    }
}
