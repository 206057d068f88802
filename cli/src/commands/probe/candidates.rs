//! Whether OpenCode has a choice between same-named skills in a probe's controlled projection,
//! which decides how many `debug skill` samples the probe takes: with at most one candidate per
//! skill name, one listing is the complete answer; with more, OpenCode's choice varies from run
//! to run and the listing is sampled.
//!
//! The candidates are counted from the files OpenCode 1.18.33 reads skills from (the staged
//! copy in `OPENCODE_CONFIG_DIR`, `.opencode/skill(s)`, `.claude/skills` and `.agents/skills` in
//! the run's directory and each directory above it, the same under the disposable home, and its
//! built-in skills) and cross-checked against the first listing: a skill listed from any other
//! place, a staged configuration that adds skill paths, or a tree too large to count all make
//! the probe sample, never guess that there is no choice. Reads files; runs nothing.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

/// The skills OpenCode 1.18.33 has built in (listed with the location `<built-in>`).
pub const OPENCODE_BUILT_IN_SKILLS: [&str; 1] = ["customize-opencode"];

/// The location OpenCode lists a built-in skill at.
pub const BUILT_IN: &str = "<built-in>";

/// At most this many files are looked at: beyond it the candidates are not counted.
const SCAN_LIMIT: usize = 20_000;
/// How deep below a skill directory a `SKILL.md` is looked for.
const SCAN_DEPTH: usize = 8;

/// Whether the probe samples OpenCode's listing repeatedly, and why.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Choice {
    pub repeated: bool,
    pub reason: String,
}

impl Choice {
    fn sample(reason: String) -> Self {
        Choice {
            repeated: true,
            reason,
        }
    }
}

/// Where one run of OpenCode reads skills from.
#[derive(Debug, Clone)]
pub struct Places {
    /// `OPENCODE_CONFIG_DIR`: the staged copy.
    pub config_dir: PathBuf,
    /// The run's working directory (each directory above it is read too).
    pub cwd: PathBuf,
    /// The run's `HOME` (and `XDG_CONFIG_HOME` below it, `.config`).
    pub home: PathBuf,
}

impl Places {
    /// Every skill directory OpenCode reads, the staged ones first.
    fn skill_dirs(&self) -> Vec<PathBuf> {
        let mut dirs = vec![
            self.config_dir.join("skill"),
            self.config_dir.join("skills"),
        ];
        let project = |dir: &Path| {
            [
                dir.join(".opencode/skill"),
                dir.join(".opencode/skills"),
                dir.join(".claude/skills"),
                dir.join(".agents/skills"),
            ]
        };
        for forms in [self.cwd.clone(), canonical(&self.cwd)] {
            for ancestor in forms.ancestors() {
                dirs.extend(project(ancestor));
            }
        }
        let config = self.home.join(".config/opencode");
        dirs.extend([config.join("skill"), config.join("skills")]);
        dirs.extend(project(&self.home));
        let mut unique = Vec::new();
        for dir in dirs {
            if !unique.contains(&dir) {
                unique.push(dir);
            }
        }
        unique
    }
}

/// Decides from `places` and the first listing (`listed`: each skill's name and location, as
/// OpenCode printed them) whether one listing is the complete answer.
pub fn choice(places: &Places, listed: &[(String, String)]) -> Choice {
    if let Some(file) = staged_config_naming(&places.config_dir, &["\"skills\""]) {
        return Choice::sample(format!(
            "the staged configuration {} names skill paths or URLs, whose skills the probe does not count",
            file.display()
        ));
    }
    let dirs = places.skill_dirs();
    let mut counted: BTreeMap<String, usize> = BTreeMap::new();
    for name in OPENCODE_BUILT_IN_SKILLS {
        counted.insert(name.to_owned(), 1);
    }
    let mut budget = SCAN_LIMIT;
    let mut files = Vec::new();
    for dir in &dirs {
        if !skill_files(dir, SCAN_DEPTH, &mut budget, &mut files) {
            return Choice::sample(format!(
                "more than {SCAN_LIMIT} files in the places OpenCode reads skills from: the candidates were not counted"
            ));
        }
    }
    for file in &files {
        *counted.entry(skill_name(file)).or_default() += 1;
    }
    for (name, location) in listed {
        let inside = location == BUILT_IN
            || dirs.iter().any(|dir| {
                Path::new(location).starts_with(dir)
                    || Path::new(location).starts_with(canonical(dir))
            });
        if !inside {
            return Choice::sample(format!(
                "OpenCode listed the skill `{name}` from {location}, a place the probe does not count"
            ));
        }
        if location == BUILT_IN {
            counted.entry(name.clone()).or_insert(1);
        }
    }
    match counted.iter().find(|(_, count)| **count > 1) {
        Some((name, count)) => Choice::sample(format!(
            "the skill `{name}` has {count} candidates OpenCode chooses between"
        )),
        None => Choice {
            repeated: false,
            reason: "no skill name has more than one candidate".to_owned(),
        },
    }
}

/// The staged OpenCode configuration file (`opencode.json`, then `opencode.jsonc`, in
/// `config_dir`) whose text holds any of `keys` (read as text: in doubt, the probe asks more).
pub fn staged_config_naming(config_dir: &Path, keys: &[&str]) -> Option<PathBuf> {
    ["opencode.json", "opencode.jsonc"]
        .iter()
        .map(|name| config_dir.join(name))
        .find(|file| {
            fs_err::read_to_string(file).is_ok_and(|text| keys.iter().any(|key| text.contains(key)))
        })
}

/// Collects the `SKILL.md` files under `dir` (at most `depth` levels down) into `files`; false
/// when `budget` ran out first.
fn skill_files(dir: &Path, depth: usize, budget: &mut usize, files: &mut Vec<PathBuf>) -> bool {
    let Ok(entries) = fs_err::read_dir(dir) else {
        return true;
    };
    for entry in entries.flatten() {
        if *budget == 0 {
            return false;
        }
        *budget -= 1;
        let path = entry.path();
        // Links followed, as OpenCode's scan follows them (the staged copy has none).
        if path.is_dir() {
            if depth > 0 && !skill_files(&path, depth - 1, budget, files) {
                return false;
            }
        } else if entry.file_name() == "SKILL.md" {
            files.push(path);
        }
    }
    true
}

/// The name a `SKILL.md` declares in its front matter, else its directory's name.
fn skill_name(file: &Path) -> String {
    let declared = fs_err::read_to_string(file)
        .ok()
        .and_then(|text| agentpack_harness::render::frontmatter::parse(&text).text("name"));
    declared.unwrap_or_else(|| {
        file.parent()
            .and_then(Path::file_name)
            .map(|name| name.to_string_lossy().into_owned())
            .unwrap_or_default()
    })
}

fn canonical(path: &Path) -> PathBuf {
    std::fs::canonicalize(path).unwrap_or_else(|_| path.to_path_buf())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn skill(dir: &Path, folder: &str, name: &str) {
        std::fs::create_dir_all(dir.join(folder)).unwrap();
        std::fs::write(
            dir.join(folder).join("SKILL.md"),
            format!("---\nname: {name}\ndescription: A skill.\n---\nBody\n"),
        )
        .unwrap();
    }

    #[test]
    fn a_second_candidate_anywhere_opencode_reads_makes_the_probe_sample() {
        let root = tempfile::tempdir().unwrap();
        let places = Places {
            config_dir: root.path().join("probe/opencode"),
            cwd: root.path().join("probe/work"),
            home: root.path().join("probe/home"),
        };
        std::fs::create_dir_all(&places.cwd).unwrap();
        skill(&places.config_dir.join("skills"), "mine", "mine");
        let listed = |location: &str| vec![("mine".to_owned(), location.to_owned())];
        let staged = places
            .config_dir
            .join("skills/mine/SKILL.md")
            .display()
            .to_string();
        let alone = choice(&places, &listed(&staged));
        assert!(!alone.repeated, "{alone:?}");
        assert_eq!(alone.reason, "no skill name has more than one candidate");

        // A copy in a directory above the run's, which the listing does not show (the staged
        // copy won this time): still a choice.
        skill(&root.path().join(".agents/skills"), "other-folder", "mine");
        let above = choice(&places, &listed(&staged));
        assert!(above.repeated, "{above:?}");
        assert!(
            above.reason.contains("`mine` has 2 candidates"),
            "{above:?}"
        );
        std::fs::remove_dir_all(root.path().join(".agents")).unwrap();

        // A staged skill named like a built-in one.
        skill(
            &places.config_dir.join("skill"),
            "custom",
            "customize-opencode",
        );
        assert!(choice(&places, &listed(&staged)).repeated);
        std::fs::remove_dir_all(places.config_dir.join("skill")).unwrap();

        // Listed from a place the probe does not count: sampled, never assumed alone.
        let elsewhere = choice(&places, &listed("/opt/elsewhere/mine/SKILL.md"));
        assert!(elsewhere.repeated);
        assert!(elsewhere.reason.contains("/opt/elsewhere"), "{elsewhere:?}");
        assert!(!choice(&places, &[("b".to_owned(), BUILT_IN.to_owned())]).repeated);

        // Skill paths in the staged configuration are not counted: sampled.
        std::fs::write(
            places.config_dir.join("opencode.json"),
            r#"{"skills": {"paths": ["/x"]}}"#,
        )
        .unwrap();
        assert!(choice(&places, &listed(&staged)).repeated);
    }
}
