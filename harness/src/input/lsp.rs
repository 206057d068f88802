//! Reading a package's language servers: `.lsp.json`, then `lspServers` of
//! `.claude-plugin/plugin.json`. Rendering them per agent is [`crate::render::lsp`].

use indexmap::IndexMap;
use serde_json::Value;

use crate::input::tree::{Node, PackageTree};
use crate::HarnessError;

/// Reads a package's language servers: `.lsp.json`, then `lspServers` of
/// `.claude-plugin/plugin.json` (a path or an inline map). Later names win.
pub fn read_lsp(
    tree: &PackageTree,
    label: &str,
    warnings: &mut Vec<String>,
) -> Result<IndexMap<String, Value>, HarnessError> {
    let mut servers = IndexMap::new();
    let read_path = |path: &str,
                     servers: &mut IndexMap<String, Value>,
                     warnings: &mut Vec<String>|
     -> Result<(), HarnessError> {
        let clean = path.trim_start_matches("./");
        match tree.resolve(clean) {
            Ok(Node::File(resolved)) => {
                match serde_json::from_str::<Value>(&tree.read_text(&resolved)?) {
                    Ok(Value::Object(map)) => {
                        let map = match map.get("lspServers") {
                            Some(Value::Object(inner)) => inner.clone(),
                            _ => map,
                        };
                        servers.extend(map);
                    }
                    Ok(_) | Err(_) => warnings.push(format!(
                        "{label}: language server file `{clean}` does not parse; skipped"
                    )),
                }
            }
            Ok(Node::Dir(_)) => {}
            Err(problem) => {
                if clean != ".lsp.json" {
                    warnings.push(format!(
                        "{label}: skipped language servers: {}",
                        problem.describe(clean)
                    ));
                }
            }
        }
        Ok(())
    };
    read_path(".lsp.json", &mut servers, warnings)?;
    if let Ok(Node::File(resolved)) = tree.resolve(".claude-plugin/plugin.json") {
        if let Ok(manifest) = serde_json::from_str::<Value>(&tree.read_text(&resolved)?) {
            match manifest.get("lspServers") {
                Some(Value::String(path)) => read_path(path, &mut servers, warnings)?,
                Some(Value::Object(map)) => servers.extend(map.clone()),
                Some(_) => warnings.push(format!("{label}: `lspServers` in .claude-plugin/plugin.json is neither a path nor an object; skipped")),
                None => {}
            }
        }
    }
    Ok(servers)
}
