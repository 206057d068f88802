//! MCP servers that only an `mcp:<name>` enable selects: `mcp:<name>` selects one server "whatever
//! its source", so a `base = "none"` mode that enables it by name gets it from a plugin the mode
//! stages nothing of (or whose definition file it does not select) and from `./.agents/mcp.json`
//! outside the overlay paths it selects, not only from the manifest.
//!
//! Owns only that rule; it reads definition files and never stages anything else of those
//! sources. A server found here that uses `${CLAUDE_PLUGIN_ROOT}` runs from the package's
//! verified store path (the package itself is not staged).

use crate::input::read_plugin_servers;
use crate::input::tree::{Node, PackageTree};
use crate::mode::PathFilter;
use crate::render::mcp::{McpSource, MergedServer};
use crate::{path_text, HarnessError, StageInputs};

/// A plugin server selected by name only, with where its plugin variables point.
#[derive(Debug, Clone)]
pub struct NamedPluginServer {
    pub server: MergedServer,
    /// The package's verified store path, for `${CLAUDE_PLUGIN_ROOT}`.
    pub plugin_root: String,
    /// `<plugin-data-root>/<module>`, for `${CLAUDE_PLUGIN_DATA}`.
    pub plugin_data: String,
}

/// Plugin servers that an `mcp:<name>` enable selects and the package's filtered tree did not
/// yield (`found` holds the names it did), in layering order (plugins by cache key, then skills).
pub(crate) fn plugin_servers_enabled_by_name(
    inputs: &StageInputs,
    found: &[&str],
) -> Result<Vec<NamedPluginServer>, HarnessError> {
    let mode = &inputs.mode;
    if !mode.enables_mcp_by_name() {
        return Ok(Vec::new());
    }
    let mut ordered: Vec<_> = inputs.packages.iter().collect();
    ordered
        .sort_by(|a, b| (a.kind == "skill", &a.cache_key).cmp(&(b.kind == "skill", &b.cache_key)));
    let mut named = Vec::new();
    for input in ordered {
        let tree = inputs.listings.read(&input.root, &PathFilter::all())?;
        // Warnings about these files belong to the staging that reads them; none is repeated.
        let servers = read_plugin_servers(&tree, &input.module, &mut Vec::new())?;
        for server in servers {
            if found.contains(&server.name.as_str()) || !mode.mcp_selected(&server.name, false) {
                continue;
            }
            named.push(NamedPluginServer {
                server,
                plugin_root: path_text(&input.root),
                plugin_data: format!(
                    "{}/{}",
                    path_text(&inputs.options.plugin_data_root),
                    input.module
                ),
            });
        }
    }
    Ok(named)
}

/// `./.agents/mcp.json` servers that an `mcp:<name>` enable selects when the overlay paths the
/// mode selects leave the file out (`found` holds the names read through the mode's filter).
pub(crate) fn overlay_servers_enabled_by_name(
    inputs: &StageInputs,
    found: &[&str],
) -> Result<Vec<MergedServer>, HarnessError> {
    let mode = &inputs.mode;
    let Some(overlay) = inputs
        .overlay
        .as_ref()
        .filter(|_| inputs.options.dot_agents_enabled && mode.enables_mcp_by_name())
    else {
        return Ok(Vec::new());
    };
    if !overlay.root.is_dir() {
        return Ok(Vec::new());
    }
    let tree = PackageTree::read(&overlay.root, &PathFilter::all())?;
    let Ok(Node::File(resolved)) = tree.resolve("mcp.json") else {
        return Ok(Vec::new());
    };
    let Ok(value) = serde_json::from_str::<serde_json::Value>(&tree.read_text(&resolved)?) else {
        // The overlay reader reports a file that does not parse.
        return Ok(Vec::new());
    };
    Ok(
        crate::render::mcp::parse_servers(&value, ".agents/mcp.json", &mut Vec::new())
            .into_iter()
            .filter(|(name, _)| !found.contains(&name.as_str()) && mode.mcp_selected(name, false))
            .map(|(name, server)| MergedServer {
                name,
                server,
                source: McpSource::DotAgents,
            })
            .collect(),
    )
}
