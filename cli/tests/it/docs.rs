//! The user documentation (an mdBook under docs/): every page is in SUMMARY.md and every relative link
//! points at a page that exists, so `mdbook build` has nothing to complain about.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::print_stdout)] // test code: a panic is a failure; skips are printed

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};

fn docs_src() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../docs/src")
}

fn links(markdown: &str) -> Vec<String> {
    let mut found = Vec::new();
    let mut rest = markdown;
    while let Some(start) = rest.find("](") {
        rest = &rest[start + 2..];
        if let Some(end) = rest.find(')') {
            found.push(rest[..end].to_owned());
            rest = &rest[end..];
        }
    }
    found
}

#[test]
fn every_page_is_in_the_summary_and_every_link_resolves() {
    let src = docs_src();
    let summary = std::fs::read_to_string(src.join("SUMMARY.md")).unwrap();
    let listed: BTreeSet<String> = links(&summary).into_iter().collect();
    let pages: BTreeSet<String> = std::fs::read_dir(&src)
        .unwrap()
        .map(|entry| entry.unwrap().file_name().to_string_lossy().into_owned())
        .filter(|name| name.ends_with(".md") && name != "SUMMARY.md")
        .collect();
    let missing: Vec<_> = pages.difference(&listed).collect();
    assert!(
        missing.is_empty(),
        "pages not linked from SUMMARY.md: {missing:?}"
    );
    for page in pages
        .iter()
        .chain(std::iter::once(&"SUMMARY.md".to_owned()))
    {
        let text = std::fs::read_to_string(src.join(page)).unwrap();
        for link in links(&text) {
            if link.contains("://") || link.starts_with('#') || link.starts_with("mailto:") {
                continue;
            }
            let target = link.split('#').next().unwrap();
            assert!(
                src.join(target).is_file(),
                "{page} links to {link}, which does not exist"
            );
        }
    }
}
