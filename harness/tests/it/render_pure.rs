//! The renderer is a pure function of its inputs: for any subset and order of the fixture packages,
//! any agents and any render options, reading the inputs once ([`input::load`]) and rendering them
//! ([`render::render`]) gives the same plan twice, the same plan as [`render_generation`], the same
//! plan from another working directory, and the renderer reads no file but through the
//! [`render::ReadSource`] it is given, and only files of the input trees.

#![allow(clippy::unwrap_used)] // tests may unwrap (HELPERS.md)

use std::cell::RefCell;
use std::collections::BTreeSet;
use std::path::{Path, PathBuf};

use agentpack_harness::{
    input, render, render_generation, Agent, McpServer, ModeBase, ModeFilter, OverlayInput,
    PackageInput, RenderOptions, StageInputs,
};
use indexmap::IndexMap;
use proptest::prelude::*;

const FIXTURES: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/fixtures");

/// (directory, module, kind) of each fixture package.
const PACKAGES: [(&str, &str, &str); 6] = [
    ("plugin-a", "github.com/acme/tools/plugins/a", "plugin"),
    ("cursor-b", "github.com/beta/cursor-rules", "plugin"),
    (
        "skill-c",
        "github.com/acme/tools/plugins/a/skills/review",
        "skill",
    ),
    ("skill-d", "github.com/gamma/skills/skills/writer", "skill"),
    ("codex-e", "github.com/delta/codex-plugin", "plugin"),
    ("disabled-f", "github.com/zeta/disabled", "plugin"),
];

fn package(index: usize, mode: &ModeFilter) -> PackageInput {
    let (dir, module, kind) = PACKAGES[index];
    let parts: Vec<&str> = module.split('/').collect();
    PackageInput {
        module: module.to_string(),
        cache_key: char::from(b'a' + index as u8).to_string().repeat(64),
        owner: parts[1].to_string(),
        repo: parts[2].to_string(),
        path: parts[3..].join("/"),
        commit: "1".repeat(40),
        kind: kind.to_string(),
        root: Path::new(FIXTURES).join("packages").join(dir),
        filter: mode.package_filter(module),
        executables: BTreeSet::new(),
    }
}

#[derive(Debug, Clone)]
struct Case {
    packages: Vec<usize>,
    agents: Vec<Agent>,
    keep_attribution: bool,
    dot_agents: bool,
    yolo: bool,
    base_none: bool,
    generation: String,
}

fn case() -> impl Strategy<Value = Case> {
    (
        Just((0..PACKAGES.len()).collect::<Vec<_>>()).prop_shuffle(),
        0..=PACKAGES.len(),
        proptest::sample::subsequence(Agent::ALL.to_vec(), 1..=Agent::ALL.len()),
        any::<(bool, bool, bool, bool)>(),
        "[a-z0-9]{1,12}",
    )
        .prop_map(
            |(
                order,
                count,
                agents,
                (keep_attribution, dot_agents, yolo, base_none),
                generation,
            )| {
                Case {
                    packages: order.into_iter().take(count).collect(),
                    agents,
                    keep_attribution,
                    dot_agents,
                    yolo,
                    base_none,
                    generation,
                }
            },
        )
}

fn inputs(case: &Case) -> StageInputs {
    let base = if case.base_none {
        ModeBase::None
    } else {
        ModeBase::All
    };
    let enable = if case.base_none {
        vec![
            format!("package:{}", PACKAGES[0].1),
            "mcp:filesystem".to_string(),
        ]
    } else {
        Vec::new()
    };
    let mode =
        ModeFilter::new(base, &enable, &["package:github.com/zeta/disabled".into()]).unwrap();
    let mut servers = IndexMap::new();
    servers.insert(
        "filesystem".to_string(),
        McpServer {
            command: Some("npx".into()),
            args: vec!["${WORKSPACE}".into()],
            ..Default::default()
        },
    );
    StageInputs {
        packages: case.packages.iter().map(|i| package(*i, &mode)).collect(),
        overlay: Some(OverlayInput {
            root: Path::new(FIXTURES).join("overlay"),
            filter: mode.overlay_filter(),
        }),
        mcp_servers: servers,
        mcp_launch: Default::default(),
        listings: Default::default(),
        options: RenderOptions {
            keep_attribution: case.keep_attribution,
            dot_agents_enabled: case.dot_agents,
            yolo: case.yolo,
            agentpack_exe: PathBuf::from("/opt/agentpack/bin/agentpack"),
            generation_root: PathBuf::from(format!("/store/{}-gen", case.generation)),
            plugin_data_root: PathBuf::from("/home/u/.agentpack/projects/p/plugin-data"),
        },
        mode,
    }
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 24, ..ProptestConfig::default() })]

    #[test]
    fn rendering_is_a_pure_function_of_the_inputs(case in case()) {
        let inputs = inputs(&case);
        let loaded = input::load(&inputs).unwrap();
        let read = RefCell::new(Vec::new());
        let recording = |path: &Path| {
            read.borrow_mut().push(path.to_path_buf());
            input::read_source(path)
        };
        let first = render::render(&loaded, &inputs, &case.agents, &recording);
        let second = render::render(&loaded, &inputs, &case.agents, &recording);
        prop_assert_eq!(&first, &second);
        prop_assert_eq!(&first, &render_generation(&inputs, &case.agents).unwrap());
        for path in read.borrow().iter() {
            prop_assert!(path.starts_with(FIXTURES), "read {} outside the inputs", path.display());
        }
        // A reader that answers nothing changes only collision decisions, never panics.
        let _ = render::render(&loaded, &inputs, &case.agents, &|_: &Path| None);
    }
}

/// The working directory is not an input: rendering from another one gives the same plan.
#[test]
fn the_working_directory_is_not_an_input() {
    let case = Case {
        packages: (0..PACKAGES.len()).collect(),
        agents: Agent::ALL.to_vec(),
        keep_attribution: false,
        dot_agents: true,
        yolo: true,
        base_none: false,
        generation: "g".into(),
    };
    let inputs = inputs(&case);
    let here = render_generation(&inputs, &case.agents).unwrap();
    let elsewhere = tempfile::tempdir().unwrap();
    let previous = std::env::current_dir().unwrap();
    std::env::set_current_dir(elsewhere.path()).unwrap();
    let there = render_generation(&inputs, &case.agents);
    std::env::set_current_dir(previous).unwrap();
    assert_eq!(here, there.unwrap());
}
