//! A command's one filesystem transaction ([`agentpack_fs::Transaction`]) from start to end:
//! committed when every step succeeds; when one fails, every step done before it is put back, a
//! file that cannot be put back is named in a warning, and the step's error is returned.
//!
//! Owns only that life cycle; the steps (what is written, moved or removed) are the caller's.

use agentpack_fs::Transaction;
use anyhow::Result;

use crate::output;

/// Runs `steps` in a new transaction (see the module docs).
pub fn run<T>(steps: impl FnOnce(&mut Transaction) -> Result<T>) -> Result<T> {
    let mut tx = Transaction::new();
    match steps(&mut tx) {
        Ok(value) => {
            tx.commit();
            Ok(value)
        }
        Err(error) => {
            for failed in tx.rollback() {
                output::warn(&format!(
                    "could not put back {}: {}",
                    failed.path.display(),
                    failed.source
                ));
            }
            Err(error)
        }
    }
}
