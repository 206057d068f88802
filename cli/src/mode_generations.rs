//! What deleting modes does to their generations: each mode's pointer (a GC root for its last
//! generation) and its generation history go; the store paths themselves are for `agentpack gc`.
//! Shared by `agentpack mode delete` and the mode editor (`agentpack mode tui`). Opens the store
//! once per call, and only when there is a mode to forget.

use agentpack_builders::generation::pointer::ModePointer;
use agentpack_lockfile::keys;
use anyhow::Result;

use crate::pipeline::history_name;
use crate::project::Project;
use crate::session;

/// After modes are deleted: each one's pointer would stay a GC root for its last generation, so
/// it and the mode's generation history go (the store paths themselves are for `agentpack gc`).
pub fn forget<'a>(project: &Project, names: impl IntoIterator<Item = &'a str>) -> Result<()> {
    let mut names = names.into_iter().peekable();
    if names.peek().is_none() {
        return Ok(());
    }
    let store = session::open_store(&project.home)?;
    for name in names {
        let mode_dir = keys::mode_dir_component(name);
        let pointer = ModePointer::new(&project.staging_root, &mode_dir);
        store.remove_generation_history(&history_name(project, &mode_dir))?;
        if std::fs::symlink_metadata(pointer.path()).is_ok_and(|m| m.is_symlink()) {
            store.remove_indirect_root(pointer.path())?;
            fs_err::remove_file(pointer.path())?;
        }
    }
    session::flush_store_warnings(&store);
    Ok(())
}
