//! `agentpack probe diff` and `agentpack support export` through the real binary, on receipts the
//! real `agentpack probe` wrote against a stand-in Claude Code (a shell script that prints the
//! init event of the validated version, listing the skills it finds in the `--plugin-dir`).

#![allow(clippy::unwrap_used, clippy::expect_used)] // test code

use std::os::unix::fs::PermissionsExt as _;
use std::path::PathBuf;
use std::process::Output;

use agentpack_test_support::{write, IsolatedHome};
use serde_json::{json, Value};

const SENTINEL: &str = "zq-private-sentinel-91c";

struct Fixture {
    home: IsolatedHome,
    package: PathBuf,
    envs: Vec<(String, String)>,
}

/// A stand-in Claude Code `version` that lists every skill with a SKILL.md under its
/// `--plugin-dir` as a bundle skill, and a `SessionStart` hook that failed.
fn claude_stand_in(version: &str) -> String {
    format!(
        r#"#!/bin/sh
mode=session
dir=""
pdir=""
while [ $# -gt 0 ]; do
  if [ "$1" = plugin ]; then mode=validate; fi
  if [ "$1" = details ]; then mode=details; fi
  if [ "$1" = "--plugin-dir" ]; then dir="$2"; pdir="$2"; fi
  # `plugin validate --json BUNDLE`: the bundle is the last argument.
  if [ "$mode" = validate ]; then dir="$1"; fi
  shift
done
[ "$mode" = details ] && dir="$pdir"
skills=""
names=""
count=0
for f in $(find -L "$dir" -name SKILL.md | sort); do
  n=$(basename "$(dirname "$f")")
  skills="$skills\"agentpack-bundle:$n\","
  names="$names, $n"
  count=$((count + 1))
done
# `--plugin-dir BUNDLE plugin details agentpack-bundle`: the loader's inventory, as 2.1.328 prints it.
if [ "$mode" = details ]; then
  echo "agentpack-bundle 0.0.0"
  echo ""
  echo "Component inventory"
  if [ "$count" = 0 ]; then echo "  Skills (0)"; else echo "  Skills ($count)  ${{names#, }}"; fi
  printf '  Agents (0)\n  Hooks (0)\n  MCP servers (0)\n  LSP servers (0)\n'
  exit 0
fi
# The controlled projection beside the session.
if [ "$mode" = validate ]; then
  echo "{{\"success\":true,\"provides\":{{\"skills\":[${{skills%,}}],\"commands\":[],\"agents\":[]}}}}"
  exit 0
fi
echo '{{"type":"system","subtype":"hook_response","hook_event":"SessionStart","hook_name":"SessionStart:{SENTINEL}","exit_code":7,"outcome":"error {SENTINEL} /etc/secret"}}'
echo "{{\"type\":\"system\",\"subtype\":\"init\",\"claude_code_version\":\"{version}\",\"skills\":[$skills\"builtin\"],\"slash_commands\":[\"compact\"],\"agents\":[\"Explore\"]}}"
sleep 30
"#
    )
}

impl Fixture {
    /// A project named after the sentinel with one path package (in a directory named after the
    /// sentinel): the sentinel skill and a second one; synced.
    fn synced() -> Self {
        let home = IsolatedHome::new();
        let package = home
            .project
            .parent()
            .unwrap()
            .join(format!("{SENTINEL}-pkg"));
        write(
            &package.join(format!("skills/{SENTINEL}/SKILL.md")),
            &format!("---\nname: {SENTINEL}\ndescription: The sentinel skill.\n---\n\nSentinel.\n"),
        );
        write(
            &package.join("skills/steady/SKILL.md"),
            "---\nname: steady\ndescription: A skill that stays.\n---\n\nSteady.\n",
        );
        let fixture = Fixture {
            home,
            package,
            envs: Vec::new(),
        };
        fixture.ok(&["init", "--name", &format!("{SENTINEL}-project")]);
        fixture.ok(&["add", fixture.package.to_str().unwrap(), "--no-sync"]);
        fixture.ok(&["sync"]);
        fixture
    }

    fn run(&self, args: &[&str]) -> Output {
        let envs = self.envs.iter().map(|(key, value)| (key, value));
        self.home.agentpack(args).envs(envs).output().unwrap()
    }

    fn ok(&self, args: &[&str]) -> Output {
        let output = self.run(args);
        assert!(
            output.status.success(),
            "{args:?}: {}{}",
            String::from_utf8_lossy(&output.stdout),
            String::from_utf8_lossy(&output.stderr)
        );
        output
    }

    /// Installs the stand-in Claude Code of `version` (in a directory named after the sentinel).
    fn stand_in(&mut self, version: &str) {
        let path = self
            .home
            .home
            .join(format!("{SENTINEL}-bin/claude-{version}"));
        write(&path, &claude_stand_in(version));
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o755)).unwrap();
        self.envs.retain(|(k, _)| k != "CLAUDE_PATH");
        self.envs
            .push(("CLAUDE_PATH".to_owned(), path.display().to_string()));
    }

    /// `probe --agent claude --json`: the exit code and the receipt.
    fn probe(&self) -> (i32, Value) {
        let output = self.run(&["--json", "probe", "--agent", "claude"]);
        let receipt = serde_json::from_slice(&output.stdout).unwrap_or_else(|e| {
            panic!(
                "probe printed no JSON ({e}):\n{}\n{}",
                String::from_utf8_lossy(&output.stdout),
                String::from_utf8_lossy(&output.stderr)
            )
        });
        (output.status.code().unwrap(), receipt)
    }

    /// `probe diff A B --json`: the exit code and the diff.
    fn diff(&self, a: &str, b: &str) -> (i32, Value) {
        let output = self.run(&["--json", "probe", "diff", a, b]);
        let body: Value = serde_json::from_slice(&output.stdout).unwrap_or_else(|e| {
            panic!(
                "probe diff printed no JSON ({e}):\n{}",
                String::from_utf8_lossy(&output.stderr)
            )
        });
        assert!(body["schema_version"].is_number(), "{body:#}");
        (output.status.code().unwrap(), body["diff"].clone())
    }
}

#[test]
fn a_diff_after_a_skill_is_removed_names_it() {
    let mut fixture = Fixture::synced();
    fixture.stand_in("2.1.328");
    let (code, before) = fixture.probe();
    assert_eq!(code, 0, "{before:#}");
    let names: Vec<&str> = before["catalog"]["artifacts"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|a| a["name"].as_str())
        .collect();
    assert!(names.contains(&SENTINEL), "{before:#}");

    // Unchanged: equal, exit 0.
    let (code, second) = fixture.probe();
    assert_eq!(code, 0);
    let (code, diff) = fixture.diff(
        before["id"].as_str().unwrap(),
        second["id"].as_str().unwrap(),
    );
    assert_eq!(code, 0, "{diff:#}");
    assert_eq!(diff["compatible"], true);
    assert_eq!(diff["artifacts"], json!([]), "{diff:#}");

    std::fs::remove_dir_all(fixture.package.join(format!("skills/{SENTINEL}"))).unwrap();
    fixture.ok(&["sync"]);
    let (code, after) = fixture.probe();
    assert_eq!(code, 0, "{after:#}");

    let (code, diff) = fixture.diff(before["id"].as_str().unwrap(), "latest");
    assert_eq!(code, 3, "{diff:#}");
    assert_eq!(diff["compatible"], true, "{diff:#}");
    // In both scopes the receipt observes: the session and the controlled projection
    // (`plugin validate` and `plugin details` of the bundle).
    let artifacts = diff["artifacts"].as_array().unwrap();
    assert_eq!(artifacts.len(), 2, "{diff:#}");
    let mut scopes = Vec::new();
    for artifact in artifacts {
        assert_eq!(artifact["name"], SENTINEL);
        assert_eq!(artifact["change"], "only_in_a");
        assert_eq!(artifact["category"], "skill");
        scopes.push(artifact["scope"].as_str().unwrap());
    }
    scopes.sort_unstable();
    assert_eq!(scopes, ["controlled_projection", "workspace_session"]);
    let identities: Vec<&str> = diff["identities"]
        .as_array()
        .unwrap()
        .iter()
        .map(|d| d["identity"].as_str().unwrap())
        .collect();
    assert!(identities.contains(&"source"), "{diff:#}");

    // The human form names it too.
    let output = fixture.run(&[
        "probe",
        "diff",
        before["id"].as_str().unwrap(),
        after["path"].as_str().unwrap(),
    ]);
    assert_eq!(output.status.code(), Some(3));
    let text = String::from_utf8_lossy(&output.stdout);
    assert!(
        text.contains(&format!("only_in_a skill:{SENTINEL}")),
        "{text}"
    );
}

#[test]
fn other_client_versions_are_incompatible_and_values_are_not_coerced() {
    let mut fixture = Fixture::synced();
    fixture.stand_in("2.1.328");
    let (code, validated) = fixture.probe();
    assert_eq!(code, 0, "{validated:#}");
    fixture.stand_in("2.1.999");
    let (code, other) = fixture.probe();
    assert_eq!(code, 4, "{other:#}");
    let (code, diff) = fixture.diff(
        validated["id"].as_str().unwrap(),
        other["id"].as_str().unwrap(),
    );
    assert_eq!(code, 4, "{diff:#}");
    assert_eq!(diff["compatible"], false);
    let reasons = diff["incompatible"].to_string();
    assert!(reasons.contains("client versions differ"), "{reasons}");
    assert!(reasons.contains("2.1.999"), "{reasons}");

    // A property recorded as "1" in one receipt and 1 in another differs.
    let path = PathBuf::from(validated["path"].as_str().unwrap());
    let mut value: Value = serde_json::from_slice(&std::fs::read(&path).unwrap()).unwrap();
    let mut copy = |name: &str, weight: Value| {
        value["catalog"]["artifacts"][0]["weight"] = weight;
        let file = fixture.home.home.join(name);
        std::fs::write(&file, serde_json::to_vec(&value).unwrap()).unwrap();
        file
    };
    let string = copy("string.json", json!("1"));
    let number = copy("number.json", json!(1));
    let (code, diff) = fixture.diff(string.to_str().unwrap(), number.to_str().unwrap());
    assert_eq!(code, 3, "{diff:#}");
    let property = &diff["artifacts"][0]["properties"][0];
    assert_eq!(property["property"], "weight");
    assert_eq!(property["a"], json!("1"));
    assert_eq!(property["b"], json!(1));
}

/// Every string in `value`.
fn strings<'v>(value: &'v Value, out: &mut Vec<&'v str>) {
    match value {
        Value::String(s) => out.push(s),
        Value::Array(items) => items.iter().for_each(|v| strings(v, out)),
        Value::Object(map) => map.iter().for_each(|(k, v)| {
            out.push(k);
            strings(v, out);
        }),
        _ => {}
    }
}

#[test]
fn a_support_capsule_holds_no_private_name_nor_path_and_is_never_overwritten() {
    let mut fixture = Fixture::synced();
    fixture.stand_in("2.1.328");
    let (code, receipt) = fixture.probe();
    assert_eq!(code, 0, "{receipt:#}");
    let raw = std::fs::read_to_string(receipt["path"].as_str().unwrap()).unwrap();
    assert!(
        raw.contains(SENTINEL),
        "the receipt itself names the sentinel"
    );

    let capsule_path = fixture.home.project.join("support-capsule.json");
    let output = fixture.ok(&[
        "support",
        "export",
        receipt["id"].as_str().unwrap(),
        "--output",
        "support-capsule.json",
    ]);
    let printed = String::from_utf8_lossy(&output.stdout);
    assert!(printed.contains("left out"), "{printed}");
    assert!(printed.contains("artifact names"), "{printed}");
    assert!(
        printed.contains("native messages") || printed.contains("paths"),
        "{printed}"
    );

    let bytes = std::fs::read(&capsule_path).unwrap();
    let text = String::from_utf8_lossy(&bytes);
    assert!(!text.contains(SENTINEL), "{text}");
    assert!(!text.contains("sha256"), "{text}");
    let capsule: Value = serde_json::from_slice(&bytes).unwrap();
    let mut all = Vec::new();
    strings(&capsule, &mut all);
    assert!(
        all.iter().all(|s| !s.starts_with('/')),
        "an absolute path in {capsule:#}"
    );
    assert_eq!(capsule["client_version"], "2.1.328");
    assert_eq!(capsule["status"], "complete");
    assert_eq!(capsule["evidence_grade"], "observed");
    let codes = capsule["diagnostic_codes"].to_string();
    assert!(codes.contains("PROBE_COMPLETE"), "{codes}");
    assert!(codes.contains("HOOK_FAILED"), "{codes}");
    assert_eq!(capsule["hooks"][0]["exit_code"], 7);
    let skills = capsule["coverage"]
        .as_array()
        .unwrap()
        .iter()
        .find(|c| c["category"] == "skill")
        .unwrap();
    assert_eq!(skills["from_package"], 2, "{capsule:#}");

    // A second export to the same file is refused and changes nothing.
    let output = fixture.run(&[
        "support",
        "export",
        "latest",
        "--output",
        capsule_path.to_str().unwrap(),
    ]);
    assert!(!output.status.success());
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(stderr.contains("exists"), "{stderr}");
    assert_eq!(std::fs::read(&capsule_path).unwrap(), bytes);
    let leftovers: Vec<_> = std::fs::read_dir(&fixture.home.project)
        .unwrap()
        .filter_map(Result::ok)
        .filter(|e| {
            e.file_name()
                .to_string_lossy()
                .starts_with(".support-capsule-")
        })
        .collect();
    assert!(leftovers.is_empty());

    // `--json`: the envelope on stdout, the left-out list on stderr, before writing.
    let output = fixture.ok(&[
        "--json",
        "support",
        "export",
        "latest",
        "--output",
        "second.json",
    ]);
    let body: Value = serde_json::from_slice(&output.stdout).unwrap();
    assert!(body["schema_version"].is_number(), "{body:#}");
    assert!(
        body["omitted"]["artifact names"].as_u64().unwrap() >= 2,
        "{body:#}"
    );
    assert!(String::from_utf8_lossy(&output.stderr).contains("left out"));
    assert_eq!(
        std::fs::read(fixture.home.project.join("second.json")).unwrap(),
        bytes,
        "the same receipt gives the same capsule"
    );
}
