//! Who we are: the host id written into leases, temp roots and lock files, and a process's start time
//! (so a reused pid is not mistaken for the process that took a lease).
//!
//! The host id comes from the caller (`AGENTPACK_HOST_ID`, read by the cli), else `/etc/machine-id`, else
//! the hostname. Never writes anything.

/// Characters kept in a host id (others become `-`), so it is safe in file names.
pub(crate) fn sanitize_host_id(raw: &str) -> String {
    let cleaned: String = raw
        .trim()
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || matches!(c, '.' | '_' | '-') {
                c
            } else {
                '-'
            }
        })
        .take(64)
        .collect();
    if cleaned.is_empty() {
        "unknown-host".to_owned()
    } else {
        cleaned
    }
}

/// This machine's id: the override, else `/etc/machine-id`, else the hostname.
pub(crate) fn host_id(override_id: Option<&str>) -> String {
    if let Some(id) = override_id.filter(|id| !id.trim().is_empty()) {
        return sanitize_host_id(id);
    }
    if let Ok(id) = std::fs::read_to_string("/etc/machine-id") {
        if !id.trim().is_empty() {
            return sanitize_host_id(&id);
        }
    }
    match nix::unistd::gethostname() {
        Ok(name) => sanitize_host_id(&name.to_string_lossy()),
        Err(_) => "unknown-host".to_owned(),
    }
}

/// The start time of process `pid` in clock ticks since boot (`/proc/<pid>/stat` field 22), or `None`
/// when the process does not exist.
pub fn process_start_time(pid: u32) -> Option<u64> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    let after_comm = &stat[stat.rfind(')')? + 1..];
    // After the command come field 3 (state) onwards; the start time is field 22.
    after_comm.split_whitespace().nth(19)?.parse().ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn own_start_time_is_known() {
        assert!(process_start_time(std::process::id()).is_some());
        assert_eq!(sanitize_host_id("a b/c"), "a-b-c");
        assert_eq!(host_id(Some("host-a")), "host-a");
    }
}
