//! Generations: everything one project stages for one mode, for every agent, as one store path.
//!
//! A generation is a pure function of its inputs: the locked packages (by store path, which names
//! their content), the mode, the `./.agents/` overlay content, the manifest's MCP servers (secret
//! values by their staged form only), the lock's MCP launches, the toggles that change rendering
//! and the renderer's version. [`GenerationInputs::digest`] encodes exactly those; the store path
//! is named by its hash, so a sync whose inputs did not change finds the generation already
//! published and renders nothing ([`build_generation`] returns `reused`).
//!
//! Two inputs name this machine rather than the definition: the agentpack executable and the
//! per-project plugin-data directory under `AGENTPACK_HOME`. They are part of the name only when
//! what the generation stages mentions them (a hook spec, a `${CLAUDE_PLUGIN_DATA}` value, a
//! dispatch command), so the same definition restored from a bundle on a fresh home and checkout
//! builds the same store path name when nothing staged depends on where it runs ([`Machine`]).
//!
//! The generation's final path is known before it is built, so rendered content (hooks, plugin-root
//! rewrites) may name it. Building ([`build`]'s functions, re-exported here) is
//! `harness::render_generation` then `Store::publish_files`: unchanged
//! package files are linked from their blobs, so identical bytes across agents, modes and projects are
//! stored once.
//!
//! This module never switches a project's pointer (see [`pointer`]) and never prints.

mod build;
pub mod pointer;
mod share;
pub mod staged;

pub use build::{
    build_generation, build_generation_for, merged_mcp_servers, publish_rendered, render_for,
    render_secrets, resolve_source_executables, reuse_published, RenderedGeneration,
};

use std::collections::BTreeMap;
use std::path::PathBuf;

use agentpack_harness::{Agent, McpLaunch, McpServer, ModeFilter};
use agentpack_lockfile::LockedPackage;
use agentpack_store::{PlannedFile, Source, StoreError, StorePath, StorePathName};
use indexmap::IndexMap;

/// Bumped whenever rendering changes in a way the crate versions do not capture.
// v2: Codex hook specs in codex-home; v3: MCP values by their staged form, secret templates;
// v4: source execute bits, plugin-root references in artifacts, collisions keep both.
const GENERATION_FORMAT: &str = "agentpack-generation-v4";

/// The file inside every generation that records what rendering reported, so a reused generation
/// can say it again.
pub const REPORT_FILE: &str = "agentpack-generation.json";

/// One locked package, already in the store and verified: what rendering stages it from
/// (`input`, rooted at the store path, every path selected: the mode's filter is applied when
/// rendering) and the store path itself.
#[derive(Debug, Clone)]
pub struct LockedPackageInput {
    /// `input.executables`: regular files executable in the package's source, as the store
    /// recorded them (filled by [`build_generation`] from the store when empty).
    pub input: agentpack_harness::PackageInput,
    pub store_path: StorePath,
}

impl LockedPackageInput {
    /// A locked package staged from the store path holding its verified content.
    pub fn new(package: &LockedPackage, store_path: StorePath) -> Self {
        Self {
            input: agentpack_harness::PackageInput::locked(
                package,
                store_path.path().to_path_buf(),
            ),
            store_path,
        }
    }
}

/// Everything a generation is a function of.
#[derive(Debug, Clone)]
pub struct GenerationInputs {
    /// The mode's name as the user wrote it (`default` when none).
    pub mode_name: String,
    /// The mode's directory component (`lockfile::keys::mode_dir_component`).
    pub mode_dir: String,
    pub mode: ModeFilter,
    /// The mode's selectors as written, for the digest.
    pub mode_selectors: Vec<String>,
    pub packages: Vec<LockedPackageInput>,
    /// The project's `./.agents/` directory and its tree hash, when it exists and is enabled.
    pub overlay: Option<(PathBuf, String)>,
    pub mcp_servers: IndexMap<String, McpServer>,
    pub mcp_launch: BTreeMap<String, McpLaunch>,
    pub keep_attribution: bool,
    pub yolo: bool,
    pub agentpack_exe: PathBuf,
    pub plugin_data_root: PathBuf,
    /// Store paths the generation uses besides its packages (MCP exec specs and their npm trees):
    /// referenced, so GC keeps them while the generation lives.
    pub extra_references: Vec<StorePath>,
    /// The packages' listings, shared by every render and MCP read of these inputs and their
    /// clones (each package walked once). Not an input: never in the digest.
    pub listings: agentpack_harness::PackageListings,
}

/// What [`build_generation`] did.
#[derive(Debug)]
pub struct GenerationBuild {
    pub path: StorePath,
    /// True when the generation was already published and nothing was rendered.
    pub reused: bool,
    pub warnings: Vec<String>,
    pub info: Vec<String>,
    /// Collisions between packages and how both sides were kept (see `harness::Collision`).
    pub collisions: Vec<agentpack_harness::Collision>,
    /// Secret-bearing values per agent, for the launcher's home layer (empty when reused: the
    /// launcher renders them from the manifest when it needs them).
    pub secrets: BTreeMap<Agent, agentpack_harness::SecretLayer>,
}

/// Failures building a generation.
#[derive(Debug, thiserror::Error)]
pub enum GenerationError {
    #[error(transparent)]
    Store(#[from] StoreError),
    #[error("cannot render the staged trees")]
    Render(#[from] agentpack_harness::HarnessError),
    #[error("cannot encode the generation report")]
    Report(#[from] serde_json::Error),
}

impl GenerationInputs {
    /// The canonical encoding of every input, one JSON value per line. A manifest server is encoded
    /// as what rendering writes of it (`harness::mcp::staged_form`): each `env` value, header value
    /// and OAuth client secret in its staged form (a reference's name, a store-safe template's text,
    /// or only the fact that it is a secret: never a secret's bytes nor a hash of them, so a
    /// generation's name cannot be used to test guesses of a secret).
    /// The agentpack executable and the plugin-data root are not in it: see
    /// [`GenerationInputs::store_path_name_with`].
    pub fn digest(&self) -> Vec<u8> {
        let mut lines: Vec<serde_json::Value> = vec![
            serde_json::json!([
                GENERATION_FORMAT,
                env!("CARGO_PKG_VERSION"),
                self.keep_attribution,
                self.yolo
            ]),
            serde_json::json!(["mode", self.mode_name, self.mode_selectors]),
        ];
        for package in &self.packages {
            let input = &package.input;
            lines.push(serde_json::json!([
                "package",
                input.module,
                input.cache_key,
                input.owner,
                input.repo,
                input.path,
                input.commit,
                input.kind,
                package.store_path.name().as_str(),
                input.executables
            ]));
        }
        if let Some((_, hash)) = &self.overlay {
            lines.push(serde_json::json!(["overlay", hash]));
        }
        for (name, server) in &self.mcp_servers {
            lines.push(serde_json::json!([
                "mcp",
                name,
                agentpack_harness::render::mcp::staged_form(server, &self.plugin_data_root)
            ]));
        }
        // A launch names its exec spec by its path in this store: by name here, like packages, so
        // the name does not depend on where the store is.
        let by_name = |text: &str| -> String {
            self.extra_references
                .iter()
                .fold(text.to_owned(), |text, reference| {
                    text.replace(
                        reference.path().to_string_lossy().as_ref(),
                        &format!("<store>/{}", reference.name().as_str()),
                    )
                })
        };
        for (name, launch) in &self.mcp_launch {
            let args: Vec<String> = launch.args.iter().map(|arg| by_name(arg)).collect();
            lines.push(serde_json::json!([
                "launch",
                name,
                by_name(&launch.command),
                // A credential argument is given at launch, never part of a store path's name.
                agentpack_harness::render::mcp::staged_args(&args)
            ]));
        }
        let mut bytes = Vec::new();
        for line in lines {
            bytes.extend_from_slice(line.to_string().as_bytes());
            bytes.push(b'\n');
        }
        bytes
    }

    /// The generation's store path name when what it stages names nothing of this machine.
    pub fn store_path_name(&self) -> StorePathName {
        self.store_path_name_with(Machine::NONE, None)
    }

    /// The store path name of the generation of these inputs for `agents` only (sorted, fewer than
    /// all): the digest with the agents as one more line, the label naming them.
    pub fn store_path_name_for(&self, agents: &[Agent]) -> StorePathName {
        self.store_path_name_with(Machine::NONE, Some(agents))
    }

    /// The store path name of the generation of these inputs (for `agents` only when given) whose
    /// staged files mention the machine inputs `machine` selects: those inputs' values are one more
    /// line of the digest, so two homes whose generations name their own paths never share one.
    pub fn store_path_name_with(
        &self,
        machine: Machine,
        agents: Option<&[Agent]>,
    ) -> StorePathName {
        let mut digest = self.digest();
        let mentioned: Vec<(&str, Option<String>)> = self
            .machine_values()
            .into_iter()
            .zip(machine.selected())
            .filter(|(_, selected)| *selected)
            .map(|(value, _)| value)
            .collect();
        if !mentioned.is_empty() {
            digest.extend_from_slice(
                serde_json::json!(["machine", mentioned])
                    .to_string()
                    .as_bytes(),
            );
            digest.push(b'\n');
        }
        let Some(agents) = agents else {
            return StorePathName::from_inputs(&digest, &format!("generation-{}", self.mode_dir));
        };
        let names: Vec<&str> = agents.iter().map(|agent| agent.as_str()).collect();
        digest.extend_from_slice(serde_json::json!(["agents", names]).to_string().as_bytes());
        digest.push(b'\n');
        StorePathName::from_inputs(
            &digest,
            &format!("generation-{}-{}", self.mode_dir, names.join("+")),
        )
    }

    /// The machine inputs by name, in [`Machine`]'s order (the overlay's directory only when
    /// there is an overlay).
    fn machine_values(&self) -> [(&'static str, Option<String>); 3] {
        let text = |path: &std::path::Path| path.to_string_lossy().trim_end_matches('/').to_owned();
        [
            ("agentpack_exe", Some(text(&self.agentpack_exe))),
            ("plugin_data_root", Some(text(&self.plugin_data_root))),
            (
                "overlay_root",
                self.overlay.as_ref().map(|(root, _)| text(root)),
            ),
        ]
    }

    /// Which machine inputs the staged files of `files` mention. A value that a staged format
    /// could escape (quotes, backslashes, control or non-ASCII characters) counts as mentioned, so
    /// a mention is never missed.
    fn machine_mentioned(&self, files: &BTreeMap<String, PlannedFile>) -> Machine {
        let [exe, data, overlay] = self.machine_values().map(|(_, value)| {
            let Some(value) = value else {
                return false;
            };
            let escapable = value
                .chars()
                .any(|c| c == '"' || c == '\\' || c.is_control() || !c.is_ascii());
            escapable
                || value.is_empty()
                || files.values().any(|file| match &file.source {
                    Source::Bytes(bytes) => contains(bytes, value.as_bytes()),
                    Source::Symlink(target) => target.contains(value.as_str()),
                    _ => false,
                })
        });
        Machine { exe, data, overlay }
    }
}

/// Which inputs that name this machine (the agentpack executable, the per-project plugin-data
/// root, the checkout's `./.agents/` directory, which overlay hooks run in) a generation's staged
/// files mention, and so its name includes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Machine {
    pub exe: bool,
    pub data: bool,
    pub overlay: bool,
}

impl Machine {
    /// Mentions none: the name is the definition's alone.
    pub const NONE: Machine = Machine {
        exe: false,
        data: false,
        overlay: false,
    };

    /// Every combination, the portable one first.
    fn all() -> impl Iterator<Item = Machine> {
        (0u8..8).map(|bits| Machine {
            exe: bits & 1 != 0,
            data: bits & 2 != 0,
            overlay: bits & 4 != 0,
        })
    }

    fn selected(self) -> [bool; 3] {
        [self.exe, self.data, self.overlay]
    }
}

fn contains(haystack: &[u8], needle: &[u8]) -> bool {
    !needle.is_empty()
        && haystack
            .windows(needle.len())
            .any(|window| window == needle)
}

#[cfg(test)]
mod tests {
    use super::*;
    use agentpack_harness::ModeBase;

    fn inputs(env: &[(&str, &str)], headers: &[(&str, &str)]) -> GenerationInputs {
        let server = McpServer {
            command: Some("node".into()),
            args: vec!["s.js".into()],
            env: env
                .iter()
                .map(|(k, v)| (k.to_string(), v.to_string()))
                .collect(),
            headers: headers
                .iter()
                .map(|(k, v)| (k.to_string(), v.to_string()))
                .collect(),
            ..Default::default()
        };
        GenerationInputs {
            mode_name: "default".into(),
            mode_dir: "default".into(),
            mode: ModeFilter::new(ModeBase::All, &[], &[]).unwrap(),
            mode_selectors: Vec::new(),
            packages: Vec::new(),
            overlay: None,
            mcp_servers: [("svc".to_string(), server)].into_iter().collect(),
            mcp_launch: BTreeMap::new(),
            keep_attribution: false,
            yolo: false,
            agentpack_exe: PathBuf::from("/bin/agentpack"),
            plugin_data_root: PathBuf::from("/home/u/.agentpack/projects/p/plugin-data"),
            extra_references: Vec::new(),
            listings: Default::default(),
        }
    }

    fn name(env: &[(&str, &str)], headers: &[(&str, &str)]) -> String {
        inputs(env, headers).store_path_name().as_str().to_owned()
    }

    #[test]
    fn machine_paths_name_a_generation_only_when_it_mentions_them() {
        let here = inputs(&[], &[]);
        let mut elsewhere = inputs(&[], &[]);
        elsewhere.plugin_data_root = PathBuf::from("/other/home/projects/q/plugin-data");
        elsewhere.agentpack_exe = PathBuf::from("/usr/local/bin/agentpack");
        assert_eq!(here.store_path_name(), elsewhere.store_path_name());
        for machine in [
            Machine {
                exe: false,
                data: true,
                overlay: false,
            },
            Machine {
                exe: true,
                data: false,
                overlay: false,
            },
        ] {
            assert_ne!(
                here.store_path_name_with(machine, None),
                elsewhere.store_path_name_with(machine, None)
            );
            assert_ne!(
                here.store_path_name_with(machine, None),
                here.store_path_name()
            );
        }
        let mention = |text: &str| {
            let files: BTreeMap<String, PlannedFile> = [(
                "x.json".to_owned(),
                PlannedFile::new("x.json", Source::Bytes(text.as_bytes().to_vec()), false),
            )]
            .into_iter()
            .collect();
            here.machine_mentioned(&files)
        };
        assert_eq!(mention("{}"), Machine::NONE);
        assert_eq!(
            mention("\"/home/u/.agentpack/projects/p/plugin-data/m\""),
            Machine {
                exe: false,
                data: true,
                overlay: false
            }
        );
        assert_eq!(
            mention("/bin/agentpack hook-exec"),
            Machine {
                exe: true,
                data: false,
                overlay: false
            }
        );
    }

    #[test]
    fn the_digest_follows_what_is_staged_and_holds_no_secret() {
        // What rendering writes differs, so the generation differs.
        assert_ne!(
            name(&[("TOKEN", "${MY_TOKEN}")], &[]),
            name(&[("TOKEN", "sk-live-123")], &[])
        );
        assert_ne!(
            name(&[("TOKEN", "${MY_TOKEN}")], &[]),
            name(&[("TOKEN", "${OTHER_TOKEN}")], &[])
        );
        assert_ne!(
            name(&[], &[("Authorization", "Bearer ${TOK}")]),
            name(&[], &[("Authorization", "Token ${TOK}")])
        );
        assert_ne!(
            name(&[], &[("Authorization", "Bearer A_${TOK}")]),
            name(&[], &[("Authorization", "Bearer ${TOK}")])
        );
        // A secret (a literal, or a template whose text may hold one) is staged as a reference to
        // the launcher's variable whatever its bytes: its bytes never reach the name.
        assert_eq!(
            name(&[("TOKEN", "sk-live-123")], &[]),
            name(&[("TOKEN", "sk-live-456")], &[])
        );
        assert_eq!(
            name(&[], &[("Authorization", "Bearer A_${TOK}")]),
            name(&[], &[("Authorization", "Bearer B_${TOK}")])
        );
        let digest = inputs(
            &[("URL", "postgres://app:pw-SENTINEL@${DB_HOST}/app")],
            &[("Authorization", "Bearer SENTINEL2_${TOK}")],
        )
        .digest();
        let text = String::from_utf8(digest).unwrap();
        assert!(!text.contains("SENTINEL"), "{text}");
    }
}
