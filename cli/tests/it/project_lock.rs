//! Commands that write a project run one at a time: parallel `add`s all land (a reviewer found
//! that four of five were lost, each reporting success).

#![allow(clippy::unwrap_used)]

use agentpack_test_support::IsolatedHome;

#[test]
fn parallel_adds_in_one_project_all_land() {
    let home = IsolatedHome::new();
    let bin = assert_cmd::cargo::cargo_bin("agentpack");
    let init = home
        .command(&bin, None)
        .args(["init", "--name", "parallel"])
        .output()
        .unwrap();
    assert!(init.status.success());
    let packages = home.home.join("packages");
    let names: Vec<String> = (1..=5).map(|i| format!("skill{i}")).collect();
    for name in &names {
        let dir = packages.join(name);
        std::fs::create_dir_all(&dir).unwrap();
        std::fs::write(
            dir.join("SKILL.md"),
            format!("---\nname: {name}\ndescription: Skill {name}.\n---\nBody.\n"),
        )
        .unwrap();
    }
    let children: Vec<_> = names
        .iter()
        .map(|name| {
            home.command(&bin, None)
                .args(["add", packages.join(name).to_str().unwrap(), "--no-sync"])
                .stdout(std::process::Stdio::null())
                .stderr(std::process::Stdio::piped())
                .spawn()
                .unwrap()
        })
        .collect();
    for child in children {
        let output = child.wait_with_output().unwrap();
        assert!(
            output.status.success(),
            "{}",
            String::from_utf8_lossy(&output.stderr)
        );
    }
    let manifest = std::fs::read_to_string(home.project.join("agentpack.toml")).unwrap();
    let lock = std::fs::read_to_string(home.project.join("pack.lock")).unwrap();
    for name in &names {
        assert!(
            manifest.contains(name.as_str()),
            "{name} lost from agentpack.toml:\n{manifest}"
        );
        assert!(
            lock.contains(name.as_str()),
            "{name} lost from pack.lock:\n{lock}"
        );
    }
}
