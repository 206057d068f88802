//! Reading a tree's hook definitions: `hooks/hooks.json` and the `hooks` field of each plugin
//! manifest (a path, an inline object, or an array of them). Parsing is
//! [`crate::render::hooks::parse_hook_value`]; rendering them for an agent is
//! [`crate::render::hooks`].

use serde_json::Value;

use crate::input::tree::{Node, PackageTree};
use crate::render::hooks::{parse_hook_value, HookFile};
use crate::HarnessError;

/// Reads every hook definition of a tree: `hooks/hooks.json`, then the `hooks` field of each
/// plugin manifest (a path, an inline object, or an array of them).
pub fn read_hooks(
    tree: &PackageTree,
    label: &str,
    warnings: &mut Vec<String>,
) -> Result<Vec<HookFile>, HarnessError> {
    let mut files = Vec::new();
    let mut read_paths: Vec<String> = Vec::new();
    let mut read_file = |path: &str,
                         declared_codex: bool,
                         files: &mut Vec<HookFile>,
                         warnings: &mut Vec<String>|
     -> Result<(), HarnessError> {
        let clean = path.trim_start_matches("./").to_string();
        let resolved = match tree.resolve(&clean) {
            Ok(Node::File(resolved)) => resolved,
            Ok(Node::Dir(_)) => return Ok(()),
            Err(problem) => {
                if path != "hooks/hooks.json" {
                    warnings.push(format!(
                        "{label}: skipped hook file: {}",
                        problem.describe(path)
                    ));
                }
                return Ok(());
            }
        };
        if read_paths.contains(&resolved) {
            return Ok(());
        }
        read_paths.push(resolved.clone());
        let text = tree.read_text(&resolved)?;
        let source = format!("{label} {clean}");
        match serde_json::from_str::<Value>(&text) {
            Ok(value) => files.extend(parse_hook_value(&value, &source, declared_codex, warnings)),
            Err(error) => warnings.push(format!(
                "hook file {source} does not parse ({error}); skipped"
            )),
        }
        Ok(())
    };
    read_file("hooks/hooks.json", false, &mut files, warnings)?;
    for manifest in crate::render::mcp::PLUGIN_MANIFESTS {
        let Ok(Node::File(resolved)) = tree.resolve(manifest) else {
            continue;
        };
        let Ok(value) = serde_json::from_str::<Value>(&tree.read_text(&resolved)?) else {
            continue;
        };
        let codex = manifest.starts_with(".codex-plugin");
        for item in super::manifest_entries(&value, "hooks") {
            match item {
                Value::String(path) => {
                    if path.starts_with('/') {
                        warnings.push(format!("{label}: skipped hook file `{path}` declared in {manifest}: it leaves the package"));
                    } else {
                        read_file(&path, codex, &mut files, warnings)?;
                    }
                }
                Value::Object(_) => {
                    let source = format!("{label} {manifest}#hooks");
                    files.extend(parse_hook_value(&item, &source, codex, warnings));
                }
                _ => warnings.push(format!(
                    "{label}: `hooks` in {manifest} is neither a path nor an object; skipped"
                )),
            }
        }
    }
    Ok(files)
}
