//! What Codex records about the user's decisions in its `config.toml`, kept across launches.
//!
//! A launch writes the layer's `config.toml` afresh (the user's config, the generation's fragment,
//! the secret layer), so anything Codex wrote into it during the previous session would be lost:
//! the directories the user trusted (`[projects."<path>"] trust_level`), the hooks the user
//! reviewed and trusted (`[hooks.state."<hooks.json path>:<event>:<i>:<j>"] trusted_hash`), and the
//! notices they dismissed (`[notice]`). After the agent exits, those tables' changes are saved to
//! `$AGENTPACK_HOME/projects/<hash>/codex-state.toml` (0600) and merged into the next layer's
//! config. A hook key that names the layer's own `hooks.json` is stored relative to the home
//! (`${CODEX_HOME}/hooks.json:…`) and re-rooted in the next home; Codex itself honours a trust
//! entry only while the hook's hash still matches.
//!
//! Only these decision tables are kept; preferences (`model`, profiles…) stay the user's real
//! config's, and everything agentpack renders (`mcp_servers`, credential stores) is never touched.
//! The functions here are pure; the caller reads and writes the files.

use toml::{Table, Value};

/// The top-level tables whose changes are the user's decisions.
const DECISION_TABLES: [&str; 3] = ["projects", "hooks", "notice"];

/// Inside `hooks`, the only sub-table kept (trust records).
const HOOK_STATE: &str = "state";

/// How a key under `hooks.state` names the layer's home in the saved state.
const HOME_PLACEHOLDER: &str = "${CODEX_HOME}";

/// The decision entries Codex added or changed in `after` compared with the `written` config,
/// merged over the `previous` saved state, with hook keys made home-relative.
pub fn record_decisions(previous: &Table, written: &Table, after: &Table, home: &str) -> Table {
    let mut state = previous.clone();
    for name in DECISION_TABLES {
        let Some(Value::Table(now)) = after.get(name) else {
            continue;
        };
        let before = match written.get(name) {
            Some(Value::Table(table)) => table.clone(),
            _ => Table::new(),
        };
        let mut changed = changed_entries(&before, now);
        if name == "hooks" {
            changed.retain(|key, _| key == HOOK_STATE);
            if let Some(Value::Table(hook_state)) = changed.get_mut(HOOK_STATE) {
                *hook_state = rekey(hook_state, home, HOME_PLACEHOLDER);
            }
        }
        if changed.is_empty() {
            continue;
        }
        let slot = state
            .entry(name.to_owned())
            .or_insert_with(|| Value::Table(Table::new()));
        if let Value::Table(slot) = slot {
            deep_merge(slot, &changed);
        } else {
            *slot = Value::Table(changed);
        }
    }
    state
}

/// Merges the saved decisions into a freshly rendered config, re-rooting hook keys in `home`.
/// Rendered values win where both have one (agentpack's own settings are not decisions).
pub fn apply_decisions(config: &mut Table, state: &Table, home: &str) {
    for name in DECISION_TABLES {
        let Some(Value::Table(saved)) = state.get(name) else {
            continue;
        };
        let mut saved = saved.clone();
        if name == "hooks" {
            saved.retain(|key, _| key == HOOK_STATE);
            if let Some(Value::Table(hook_state)) = saved.get_mut(HOOK_STATE) {
                *hook_state = rekey(hook_state, HOME_PLACEHOLDER, home);
            }
        }
        let slot = config
            .entry(name.to_owned())
            .or_insert_with(|| Value::Table(Table::new()));
        if let Value::Table(slot) = slot {
            let rendered = slot.clone();
            deep_merge(slot, &saved);
            deep_merge(slot, &rendered);
        }
    }
}

/// The entries of `after` that are absent from or different in `before`, recursively.
fn changed_entries(before: &Table, after: &Table) -> Table {
    let mut out = Table::new();
    for (key, value) in after {
        match (before.get(key), value) {
            (Some(Value::Table(old)), Value::Table(new)) => {
                let inner = changed_entries(old, new);
                if !inner.is_empty() {
                    out.insert(key.clone(), Value::Table(inner));
                }
            }
            (Some(old), new) if old == new => {}
            _ => {
                out.insert(key.clone(), value.clone());
            }
        }
    }
    out
}

/// `from` merged into `into`, recursively; `from` wins on leaves.
fn deep_merge(into: &mut Table, from: &Table) {
    for (key, value) in from {
        match (into.get_mut(key), value) {
            (Some(Value::Table(existing)), Value::Table(incoming)) => {
                deep_merge(existing, incoming);
            }
            _ => {
                into.insert(key.clone(), value.clone());
            }
        }
    }
}

/// The same table with keys that start with `from` + `/` starting with `to` + `/` instead.
fn rekey(table: &Table, from: &str, to: &str) -> Table {
    let prefix = format!("{from}/");
    table
        .iter()
        .map(|(key, value)| {
            let key = match key.strip_prefix(&prefix) {
                Some(rest) => format!("{to}/{rest}"),
                None => key.clone(),
            };
            (key, value.clone())
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn table(text: &str) -> Table {
        text.parse().unwrap()
    }

    #[test]
    fn codex_decisions_are_recorded_and_preferences_are_not() {
        let written = table(
            "model = \"o3\"\n[projects.\"/work/a\"]\ntrust_level = \"trusted\"\n[mcp_servers.fs]\ncommand = \"npx\"\n",
        );
        let after = table(concat!(
            "model = \"gpt-5\"\n",
            "[projects.\"/work/a\"]\ntrust_level = \"trusted\"\n",
            "[projects.\"/work/b\"]\ntrust_level = \"trusted\"\n",
            "[hooks.state.\"/h/g-1/hooks.json:stop:0:0\"]\ntrusted_hash = \"sha256:aa\"\n",
            "[hooks.state.\"/work/b/.codex/hooks.json:stop:0:0\"]\ntrusted_hash = \"sha256:bb\"\n",
            "[hooks.other]\nx = 1\n",
            "[notice]\nhide_full_access_warning = true\n",
            "[mcp_servers.fs]\ncommand = \"evil\"\n",
        ));
        let state = record_decisions(&Table::new(), &written, &after, "/h/g-1");
        let expected = table(concat!(
            "[projects.\"/work/b\"]\ntrust_level = \"trusted\"\n",
            "[hooks.state.\"${CODEX_HOME}/hooks.json:stop:0:0\"]\ntrusted_hash = \"sha256:aa\"\n",
            "[hooks.state.\"/work/b/.codex/hooks.json:stop:0:0\"]\ntrusted_hash = \"sha256:bb\"\n",
            "[notice]\nhide_full_access_warning = true\n",
        ));
        assert_eq!(state, expected);
    }

    #[test]
    fn saved_decisions_reach_the_next_home_and_rendered_values_win() {
        let state = table(concat!(
            "[projects.\"/work/b\"]\ntrust_level = \"trusted\"\n",
            "[projects.\"/work/c\"]\ntrust_level = \"trusted\"\n",
            "[hooks.state.\"${CODEX_HOME}/hooks.json:stop:0:0\"]\ntrusted_hash = \"sha256:aa\"\n",
        ));
        let mut config = table(
            "[projects.\"/work/c\"]\ntrust_level = \"untrusted\"\n[mcp_servers.fs]\ncommand = \"npx\"\n",
        );
        apply_decisions(&mut config, &state, "/h/g-2");
        assert_eq!(
            config["projects"]["/work/b"]["trust_level"].as_str(),
            Some("trusted")
        );
        assert_eq!(
            config["projects"]["/work/c"]["trust_level"].as_str(),
            Some("untrusted"),
            "the user's own config wins"
        );
        assert_eq!(
            config["hooks"]["state"]["/h/g-2/hooks.json:stop:0:0"]["trusted_hash"].as_str(),
            Some("sha256:aa")
        );
        assert_eq!(config["mcp_servers"]["fs"]["command"].as_str(), Some("npx"));
    }

    #[test]
    fn a_later_session_adds_to_what_earlier_ones_recorded() {
        let first = record_decisions(
            &Table::new(),
            &Table::new(),
            &table("[projects.\"/a\"]\ntrust_level = \"trusted\"\n"),
            "/h",
        );
        let second = record_decisions(
            &first,
            &Table::new(),
            &table("[projects.\"/b\"]\ntrust_level = \"trusted\"\n"),
            "/h",
        );
        assert_eq!(
            second,
            table("[projects.\"/a\"]\ntrust_level = \"trusted\"\n[projects.\"/b\"]\ntrust_level = \"trusted\"\n")
        );
        assert_eq!(
            record_decisions(&second, &second, &second, "/h"),
            second,
            "nothing changed, nothing added"
        );
    }
}
