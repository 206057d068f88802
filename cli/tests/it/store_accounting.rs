//! `store info` and `gc` count what the filesystem allocates, through the binary: after syncing a few
//! projects in several modes, `store info --json`'s `allocated.total` is exactly what
//! `du -s --block-size=1` prints for the store directory (`cache/store/v1`, its own directory entry
//! included on both sides), and what a GC frees is what `store info` stops counting.
//!
//! That GC's `bytes_freed` equals the drop `du` sees is tested by
//! `shared_store.rs::gc_as_a_regular_user_frees_what_du_sees_go` (not repeated here).

#![allow(clippy::unwrap_used, clippy::expect_used)] // test code: a panic is a failure

use std::path::Path;

use agentpack_test_support::IsolatedHome;

fn ok(home: &IsolatedHome, dir: &Path, args: &[&str]) -> String {
    let bin = assert_cmd::cargo::cargo_bin("agentpack");
    // One staging root per project.
    let staging = home.staging_root.join(dir.file_name().unwrap_or_default());
    let output = home
        .command(&bin, None)
        .current_dir(dir)
        .env("AGENTPACK_STAGING_ROOT", staging)
        .args(args)
        .output()
        .unwrap();
    assert!(
        output.status.success(),
        "{args:?}: {}{}",
        String::from_utf8_lossy(&output.stdout),
        String::from_utf8_lossy(&output.stderr)
    );
    String::from_utf8(output.stdout).unwrap()
}

fn du_bytes(path: &Path) -> u64 {
    let output = std::process::Command::new("du")
        .args(["-s", "--block-size=1"])
        .arg(path)
        .output()
        .unwrap();
    assert!(output.status.success());
    String::from_utf8(output.stdout)
        .unwrap()
        .split_whitespace()
        .next()
        .unwrap()
        .parse()
        .unwrap()
}

fn store_info(home: &IsolatedHome) -> serde_json::Value {
    let text = ok(home, &home.project, &["store", "info", "--json"]);
    serde_json::from_str(&text).unwrap()
}

fn write_package(dir: &Path, name: &str, body_lines: usize) {
    let skill = dir.join(name);
    std::fs::create_dir_all(skill.join("references")).unwrap();
    std::fs::write(
        skill.join("SKILL.md"),
        format!(
            "---\nname: {name}\ndescription: the {name} skill\n---\n\n{}",
            "A line of the body.\n".repeat(body_lines)
        ),
    )
    .unwrap();
    std::fs::write(
        skill.join("references/notes.md"),
        format!("notes of {name}\n"),
    )
    .unwrap();
}

fn write_manifest(project: &Path, packages: &Path, names: &[&str]) {
    let mut text = String::from("name = \"demo\"\nversion = \"0.1.0\"\n\n[dependencies]\n");
    for name in names {
        text.push_str(&format!(
            "{name} = {{ path = \"{}\" }}\n",
            packages.join(name).display()
        ));
    }
    text.push_str(&format!(
        "\n[modes.lean]\nbase = \"none\"\nenable = [\"package:{}\"]\n",
        names[0]
    ));
    std::fs::create_dir_all(project).unwrap();
    std::fs::write(project.join("agentpack.toml"), text).unwrap();
}

#[test]
fn store_info_allocated_bytes_are_what_du_counts_and_gc_frees_them() {
    let home = IsolatedHome::new();
    let packages = home.home.join("packages");
    for (index, name) in ["alpha", "beta", "gamma"].iter().enumerate() {
        write_package(&packages, name, 200 * (index + 1));
    }
    let projects: Vec<_> = (0..3)
        .map(|index| home.home.join(format!("p{index}")))
        .collect();
    for project in &projects {
        write_manifest(project, &packages, &["alpha", "beta", "gamma"]);
        for mode in ["default", "lean"] {
            ok(&home, project, &["--quiet", "--mode", mode, "sync"]);
        }
    }
    let store_dir = home.agentpack_home.join("cache/store/v1");
    let info = store_info(&home);
    let du = du_bytes(&store_dir);
    let allocated = &info["allocated"];
    let total = allocated["total"].as_u64().unwrap();
    // Both sides count the store directory's own entry and every inode under it once.
    assert_eq!(
        total, du,
        "store info says {total} allocated, du says {du}: {info}"
    );
    let parts: u64 = [
        "blobs",
        "store_paths",
        "metadata",
        "index",
        "stamps",
        "other",
    ]
    .iter()
    .map(|part| allocated[part].as_u64().unwrap())
    .sum();
    assert_eq!(parts, total, "{info}");
    // Directories are counted: every store path has at least its own directory block.
    assert!(
        allocated["store_paths"].as_u64().unwrap() >= 4096 * info["store_paths"].as_u64().unwrap(),
        "{info}"
    );
    // The store paths' own inodes, each once, are fewer bytes than their copies would be (the
    // generations link the packages' files) and never more than blobs and trees together.
    let disk = info["disk_bytes"].as_u64().unwrap();
    assert!(
        disk <= allocated["blobs"].as_u64().unwrap() + allocated["store_paths"].as_u64().unwrap(),
        "{info}"
    );
    assert!(info["copies_disk_bytes"].as_u64().unwrap() > disk, "{info}");
    // The logical content: the three skills' files once each, however many generations link them.
    let content: u64 = walk_sizes(&packages);
    let unique = info["unique_content_bytes"].as_u64().unwrap();
    assert!(
        unique >= content,
        "unique {unique} < package content {content}: {info}"
    );
    assert!(
        info["apparent_bytes"].as_u64().unwrap() > unique,
        "copies are bigger than the distinct files: {info}"
    );
    assert!(info.get("schema_version").is_some(), "the envelope: {info}");

    // The human output names both kinds of bytes.
    let text = ok(&home, &home.project, &["store", "info"]);
    for label in [
        "allocated",
        "as `du -s` counts",
        "unique content",
        "apparent",
    ] {
        assert!(text.contains(label), "{label}: {text}");
    }

    // Make the first project's other packages unused, delete the others, then GC (keeping no history:
    // what the remaining project selects is kept by its pointer): what GC says it freed is what `store info`
    // stops counting, and `store info` still equals `du` afterwards.
    write_manifest(&projects[0], &packages, &["alpha"]);
    ok(&home, &projects[0], &["--quiet", "sync"]);
    // Deleted projects: their staging (where the pointers GC follows live) goes with them.
    for project in &projects[1..] {
        std::fs::remove_dir_all(project).unwrap();
        std::fs::remove_dir_all(home.staging_root.join(project.file_name().unwrap())).unwrap();
    }
    let before = store_info(&home)["allocated"]["total"].as_u64().unwrap();
    let report: serde_json::Value = serde_json::from_str(&ok(
        &home,
        &home.project,
        &["gc", "--json", "--keep-generations", "0"],
    ))
    .unwrap();
    let freed = report["bytes_freed"].as_u64().unwrap();
    assert!(
        !report["store_paths_removed"].as_array().unwrap().is_empty(),
        "{report}"
    );
    let after_info = store_info(&home);
    let after = after_info["allocated"]["total"].as_u64().unwrap();
    assert_eq!(
        after,
        du_bytes(&store_dir),
        "after gc, store info and du differ: {after_info}"
    );
    println!(
        "store info {before} -> {after}, gc says {freed} freed, removed {}",
        report["store_paths_removed"]
    );
    // GC also writes (its host record) while it removes: allow one filesystem block of change.
    assert!(
        (before - after).abs_diff(freed) <= 4096,
        "gc said {freed} freed, store info dropped by {}: {report}",
        before - after
    );
}

fn walk_sizes(dir: &Path) -> u64 {
    let mut total = 0;
    for entry in std::fs::read_dir(dir).unwrap() {
        let entry = entry.unwrap();
        let meta = entry.metadata().unwrap();
        if meta.is_dir() {
            total += walk_sizes(&entry.path());
        } else {
            total += meta.len();
        }
    }
    total
}
