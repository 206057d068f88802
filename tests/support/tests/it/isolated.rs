//! The isolated environment hides the user's home, tokens and the real GitHub.
#![allow(clippy::unwrap_used)]

use agentpack_test_support::{FakeGitHub, IsolatedHome};

#[test]
fn commands_run_with_private_directories_and_no_tokens() {
    let gh = FakeGitHub::start();
    let home = IsolatedHome::new();
    let output = home
        .command(std::path::Path::new("/usr/bin/env"), Some(&gh))
        .env("UNRELATED", "1")
        .output()
        .unwrap();
    let text = String::from_utf8(output.stdout).unwrap();
    assert!(
        text.contains(&format!("HOME={}", home.home.display())),
        "{text}"
    );
    assert!(
        text.contains(&format!("AGENTPACK_HOME={}", home.agentpack_home.display())),
        "{text}"
    );
    assert!(
        text.contains(&format!(
            "AGENTPACK_STAGING_ROOT={}",
            home.staging_root.display()
        )),
        "{text}"
    );
    assert!(
        text.contains(&format!("AGENTPACK_GITHUB_API_URL={}", gh.api_url())),
        "{text}"
    );
    assert!(
        !text.contains("GITHUB_TOKEN") && !text.contains("GH_TOKEN"),
        "{text}"
    );
    let without = home
        .command(std::path::Path::new("/usr/bin/env"), None)
        .output()
        .unwrap();
    assert!(String::from_utf8(without.stdout)
        .unwrap()
        .contains("AGENTPACK_GITHUB_URL=http://127.0.0.1:9"));
}
