//! [`Transfers`]: the bytes and artifacts an [`super::OciClient`] has moved, for a caller that
//! shows progress on a terminal. The client only counts; it never prints.

use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};

/// Counters of one client, updated while it pushes and pulls (see the module docs).
#[derive(Debug, Default)]
pub struct Transfers {
    uploaded: AtomicU64,
    to_upload: AtomicU64,
    downloaded: AtomicU64,
    artifacts_done: AtomicUsize,
}

/// What [`Transfers::snapshot`] read.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct TransferSnapshot {
    /// Bytes of blobs sent so far (taken by the connection; a failed attempt is taken back).
    pub uploaded_bytes: u64,
    /// Bytes of the blobs the registry lacked, known so far (grows as artifacts are packed).
    pub upload_total_bytes: u64,
    /// Bytes of layers received so far.
    pub downloaded_bytes: u64,
    /// Artifacts of a push finished (pushed, found present, or failed).
    pub artifacts_done: usize,
}

impl Transfers {
    /// The counters now.
    pub fn snapshot(&self) -> TransferSnapshot {
        TransferSnapshot {
            uploaded_bytes: self.uploaded.load(Ordering::Relaxed),
            upload_total_bytes: self.to_upload.load(Ordering::Relaxed),
            downloaded_bytes: self.downloaded.load(Ordering::Relaxed),
            artifacts_done: self.artifacts_done.load(Ordering::Relaxed),
        }
    }

    pub(super) fn will_upload(&self, bytes: u64) {
        self.to_upload.fetch_add(bytes, Ordering::Relaxed);
    }

    pub(super) fn uploaded(&self, bytes: u64) {
        self.uploaded.fetch_add(bytes, Ordering::Relaxed);
    }

    pub(super) fn take_back_upload(&self, bytes: u64) {
        self.uploaded.fetch_sub(bytes, Ordering::Relaxed);
    }

    pub(super) fn downloaded(&self, bytes: u64) {
        self.downloaded.fetch_add(bytes, Ordering::Relaxed);
    }

    pub(super) fn artifact_done(&self) {
        self.artifacts_done.fetch_add(1, Ordering::Relaxed);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn counts_add_up_and_a_failed_attempt_is_taken_back() {
        let transfers = Transfers::default();
        transfers.will_upload(300);
        transfers.uploaded(200);
        transfers.take_back_upload(200);
        transfers.uploaded(300);
        transfers.downloaded(7);
        transfers.artifact_done();
        assert_eq!(
            transfers.snapshot(),
            TransferSnapshot {
                uploaded_bytes: 300,
                upload_total_bytes: 300,
                downloaded_bytes: 7,
                artifacts_done: 1,
            }
        );
    }
}
