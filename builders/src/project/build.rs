//! Steps 3 and 4: `build(&Plan) -> Generation` publishes the planned generation (or finds it
//! already published, restoring staged files that changed since) and `select(mode, &Generation)`
//! points `<staging-root>/modes/<mode>` at it.
//!
//! [`ProjectSession::reuse`] comes first: a published generation is used without a plan, rendering
//! only the secret-bearing values of the agent asked for (a launcher's).
//!
//! A read-only session builds, reuses and selects nothing ([`super::PipelineError::ReadOnly`]).
//!
//! Roots first, then the switch: GC must never see a selected generation without a root. Never
//! resolves, never renders except the secret-bearing values of a reused generation (under its own
//! name, which may differ from the plan's: a launch of one agent reusing every agent's).

use std::collections::BTreeMap;
use std::path::PathBuf;

use agentpack_harness::{Agent, SecretLayer};
use agentpack_store::StorePath;

use crate::generation::pointer::ModePointer;
use crate::generation::{self, staged, GenerationBuild};
use crate::mcp_lock;

use super::{PipelineError, Plan, ProjectSession};

/// A built (or reused) generation: what the generation module's build gives (its store path,
/// whether it was reused, what rendering reported, the secret-bearing values that never enter the
/// store).
pub type Generation = GenerationBuild;

/// What [`ProjectSession::select`] switched.
#[derive(Debug, Clone)]
pub struct Selected {
    /// `<staging-root>/modes/<mode-dir>`.
    pub pointer: PathBuf,
    /// The resolved store path of the generation.
    pub generation: PathBuf,
}

impl ProjectSession {
    /// The pointer of mode directory `mode_dir`.
    pub fn pointer(&self, mode_dir: &str) -> ModePointer {
        ModePointer::new(&self.roots().staging_root, mode_dir)
    }

    /// Step 3 (see the module doc). A reused generation whose staged files changed since it was
    /// published is restored from the store (a warning names the files); when nothing good is
    /// left to restore it from it is removed and published again from the plan.
    pub fn build(&self, plan: &Plan) -> Result<Generation, PipelineError> {
        self.refuse_if_read_only("build a generation")?;
        let store = self.store().as_ref();
        mcp_lock::publish_planned_exec_specs(store, &plan.exec_specs)?;
        let agents = plan.agent_list();
        if let Some(reused) = generation::reuse_published(store, &plan.inputs, agents) {
            let pointer = self.pointer(&plan.mode_dir);
            if !self.restore_if_changed(&reused.path, &pointer)? {
                let mut built = reused;
                built.secrets = self.secrets_of(plan, &built.path)?;
                return Ok(built);
            }
            // Repair removed what it could not restore: publish it again from the plan.
        }
        let built = generation::publish_rendered(store, &plan.inputs, plan.rendered.clone())?;
        Ok(built)
    }

    /// Step 3 without step 2, when nothing needs rendering: the published generation that serves
    /// `agents` for `planned` (see [`generation::reuse_published`]), restored when its staged files
    /// changed, with the secret-bearing values of each of `secrets_of` rendered under its name
    /// (those agents only). `None` when nothing published serves them, or when restoring had to
    /// remove it: plan and build it then.
    pub fn reuse(
        &self,
        planned: &super::PlannedInputs,
        mode_dir: &str,
        agents: &[Agent],
        secrets_of: &[Agent],
    ) -> Result<Option<Generation>, PipelineError> {
        self.refuse_if_read_only("reuse a generation")?;
        let store = self.store().as_ref();
        let Some(reused) = generation::reuse_published(store, &planned.inputs, agents) else {
            return Ok(None);
        };
        // As a build does: a spec the generation references that went missing is published again.
        mcp_lock::publish_planned_exec_specs(store, &planned.exec_specs)?;
        if self.restore_if_changed(&reused.path, &self.pointer(mode_dir))? {
            return Ok(None);
        }
        let mut built = reused;
        for &agent in secrets_of {
            let layer = generation::render_secrets(store, &planned.inputs, agent)?;
            if !layer.is_empty() {
                built.secrets.insert(agent, layer);
            }
        }
        Ok(Some(built))
    }

    /// Step 4: records `generation` in the mode's history (a GC root), switches the pointer to
    /// it and registers the pointer as an indirect root.
    pub fn select(
        &self,
        mode_dir: &str,
        generation: &Generation,
    ) -> Result<Selected, PipelineError> {
        self.refuse_if_read_only("select a generation")?;
        let store = self.store();
        let pointer = self.pointer(mode_dir);
        store.add_generation_root(&self.roots().history_name(mode_dir), &generation.path)?;
        pointer.switch_to(generation.path.path())?;
        store.add_indirect_root(pointer.path())?;
        Ok(Selected {
            pointer: pointer.path().to_path_buf(),
            generation: generation.path.path().to_path_buf(),
        })
    }

    /// The secret-bearing values of the plan's agents for the published generation `path`: the
    /// plan's own when it was rendered under that name, else rendered again under it.
    fn secrets_of(
        &self,
        plan: &Plan,
        path: &StorePath,
    ) -> Result<BTreeMap<Agent, SecretLayer>, PipelineError> {
        if path.name() == &plan.rendered.name {
            return Ok(plan.rendered.secrets.clone());
        }
        let mut secrets = BTreeMap::new();
        for agent in plan.agent_list() {
            let layer = generation::render_secrets(self.store(), &plan.inputs, *agent)?;
            if !layer.is_empty() {
                secrets.insert(*agent, layer);
            }
        }
        Ok(secrets)
    }

    /// A reused generation whose files changed since it was published is restored from the
    /// store, and the files are named, as the docs' sync report does. Returns true when the
    /// generation had to be removed (nothing good was left to restore it from) and must be
    /// published again.
    fn restore_if_changed(
        &self,
        generation: &StorePath,
        pointer: &ModePointer,
    ) -> Result<bool, PipelineError> {
        let store = self.store();
        let diff = staged::quick_check(store, generation, pointer.path())?;
        // Same-size edits through a hard link: each file against its blob's identity stamp
        // (cheap), hashed when the stamp differs (see docs/src/store.md, "Integrity").
        let edited = store.changed_files(generation)?;
        if diff.is_clean() && edited.is_empty() {
            return Ok(false);
        }
        let report =
            agentpack_store::verify(store, agentpack_store::VerifyOptions { repair: true })?;
        let mut named: Vec<String> = diff
            .lines()
            .into_iter()
            .map(|(kind, path)| format!("{kind} {}", path.display()))
            .collect();
        for relative in edited {
            let line = format!("modified {}", pointer.path().join(&relative).display());
            if !named.contains(&line) {
                named.push(line);
            }
        }
        self.warn(format!(
            "{} staged file(s) changed since the last sync and were replaced from the verified cache: {}",
            named.len(),
            named.join("; ")
        ));
        Ok(store.get(generation.name()).is_none() || !report.unrepairable.is_empty())
    }
}
