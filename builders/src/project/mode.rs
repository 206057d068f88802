//! The mode a command stages: `[modes.<name>]` of the manifest as a filter, with its name, its
//! directory component and its selectors as written (what a generation's digest records).
//!
//! Pure: reads nothing but the manifest value it is given.

use agentpack_harness::ModeFilter;
use agentpack_lockfile::{keys, Manifest, Mode, DEFAULT_MODE};

use super::PipelineError;

/// The mode to stage, as a filter plus its name, directory and selectors.
#[derive(Debug, Clone)]
pub struct ResolvedMode {
    pub name: String,
    /// `lockfile::keys::mode_dir_component(name)`.
    pub dir: String,
    pub filter: ModeFilter,
    pub selectors: Vec<String>,
    /// `[modes.<name>]` as declared (the filter is built from it).
    pub declared: Mode,
}

impl ResolvedMode {
    /// Mode `name` of `manifest`; a mode the manifest does not declare is refused with the
    /// documented message.
    pub fn of(manifest: &Manifest, name: &str) -> Result<ResolvedMode, PipelineError> {
        let Some(mode) = manifest.mode(name) else {
            return Err(PipelineError::ModeNotDeclared {
                name: name.to_owned(),
                declared: manifest
                    .mode_names()
                    .into_iter()
                    .map(str::to_owned)
                    .collect(),
            });
        };
        let filter = ModeFilter::from_mode(&mode);
        let mut selectors = vec![format!("base={}", mode.base.as_str())];
        selectors.extend(mode.enable.iter().map(|s| format!("enable={s}")));
        selectors.extend(mode.disable.iter().map(|s| format!("disable={s}")));
        Ok(ResolvedMode {
            dir: keys::mode_dir_component(name),
            name: name.to_owned(),
            filter,
            selectors,
            declared: mode,
        })
    }

    /// The mode that selects everything: what `lock` records MCP servers for.
    pub fn all() -> ResolvedMode {
        ResolvedMode {
            name: DEFAULT_MODE.to_owned(),
            dir: DEFAULT_MODE.to_owned(),
            filter: ModeFilter::all(),
            selectors: Vec::new(),
            declared: Mode::default(),
        }
    }
}
