//! [`WarningList`]: the one de-duplicating collector of warnings in builders, for whatever hands
//! its warnings back through a `take_warnings` (the substituters, the snapshot fetcher, the project
//! session).
//!
//! A list is shared by concurrent workers and says each message once, in the order first given;
//! its [`Once`] says for how long. The substituters and the snapshot fetcher are taken from by
//! every operation that uses them, so they forget what was taken ([`Once::UntilTaken`]): each
//! operation's result carries the warnings of that operation, and a substituter that is down
//! again in a later operation is said again there. A project session remembers everything it
//! collected ([`Once::ForLife`]): two steps of one session that read the same input say what they
//! found once. Nothing is de-duplicated across lists. Never prints; the caller returns what it
//! takes, and the cli prints it.

use std::collections::HashSet;
use std::sync::{Mutex, MutexGuard, PoisonError};

/// How long a [`WarningList`] keeps a message from being added again.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum Once {
    /// Until it is taken: a message given again after [`WarningList::take`] is collected again.
    #[default]
    UntilTaken,
    /// For the life of the list: a message once collected is never collected again, taken or not.
    ForLife,
}

/// Warnings in the order they were first given, each once (see [`Once`]).
#[derive(Debug, Default)]
pub struct WarningList {
    once: Once,
    state: Mutex<State>,
}

#[derive(Debug, Default)]
struct State {
    /// Collected and not yet taken, in order.
    pending: Vec<String>,
    /// What the list will not collect again: the pending ones, and with [`Once::ForLife`] every
    /// one taken before.
    said: HashSet<String>,
}

impl WarningList {
    /// An empty list that keeps each message once for `once`.
    pub fn new(once: Once) -> WarningList {
        WarningList {
            once,
            state: Mutex::default(),
        }
    }

    /// Adds `message`, unless the list keeps it out (see [`Once`]).
    pub fn push(&self, message: String) {
        self.extend(std::iter::once(message));
    }

    /// Adds each of `messages` in order (one lock), as [`WarningList::push`] does.
    pub fn extend(&self, messages: impl IntoIterator<Item = String>) {
        let mut state = self.state();
        for message in messages {
            if !state.said.contains(&message) {
                state.said.insert(message.clone());
                state.pending.push(message);
            }
        }
    }

    /// The warnings collected since the last take, emptied.
    pub fn take(&self) -> Vec<String> {
        let mut state = self.state();
        if self.once == Once::UntilTaken {
            state.said.clear();
        }
        std::mem::take(&mut state.pending)
    }

    fn state(&self) -> MutexGuard<'_, State> {
        // A worker that panicked while pushing leaves a whole list: a poisoned lock is still usable.
        self.state.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn strings(messages: &[&str]) -> Vec<String> {
        messages
            .iter()
            .map(|message| (*message).to_owned())
            .collect()
    }

    #[test]
    fn until_taken_says_each_message_once_per_take_and_again_after_it() {
        let list = WarningList::default();
        list.extend(strings(&["down", "slow", "down"]));
        list.push("slow".into());
        assert_eq!(list.take(), strings(&["down", "slow"]));
        assert!(list.take().is_empty());
        // A later operation that hits the same problem reports it in its own result.
        list.push("down".into());
        assert_eq!(list.take(), strings(&["down"]));
    }

    #[test]
    fn for_life_never_says_a_message_again_even_after_it_was_taken() {
        let list = WarningList::new(Once::ForLife);
        list.extend(strings(&["mcp", "mcp", "other"]));
        assert_eq!(list.take(), strings(&["mcp", "other"]));
        list.extend(strings(&["other", "mcp", "new"]));
        assert_eq!(list.take(), strings(&["new"]));
    }

    #[test]
    fn concurrent_workers_say_a_shared_problem_once() {
        let list = WarningList::default();
        std::thread::scope(|scope| {
            for worker in 0..4 {
                let list = &list;
                scope.spawn(move || {
                    list.push("substituter down".into());
                    list.push(format!("worker {worker}"));
                });
            }
        });
        let mut taken = list.take();
        assert_eq!(taken.len(), 5, "{taken:?}");
        taken.sort();
        assert_eq!(taken[0], "substituter down");
    }
}
