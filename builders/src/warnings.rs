//! [`WarningList`]: the warnings a helper shared by concurrent workers (the substituters, the
//! snapshot fetcher) collects until its caller takes them.
//!
//! Each message is kept once: workers that hit the same problem (a substituter that is down) report
//! it once. Never prints; the caller returns what it takes, and the cli prints it.

use std::sync::{Mutex, MutexGuard, PoisonError};

/// Warnings in the order they were first given, each once.
#[derive(Debug, Default)]
pub struct WarningList {
    messages: Mutex<Vec<String>>,
}

impl WarningList {
    /// Adds `message`, unless the list already holds it.
    pub fn push(&self, message: String) {
        let mut messages = self.messages();
        if !messages.contains(&message) {
            messages.push(message);
        }
    }

    /// The warnings collected so far, emptied.
    pub fn take(&self) -> Vec<String> {
        std::mem::take(&mut *self.messages())
    }

    fn messages(&self) -> MutexGuard<'_, Vec<String>> {
        // A worker that panicked while pushing leaves a whole list: a poisoned lock is still usable.
        self.messages.lock().unwrap_or_else(PoisonError::into_inner)
    }
}
