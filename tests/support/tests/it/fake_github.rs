//! The fake GitHub answers like the real one for the calls agentpack makes.
#![allow(clippy::unwrap_used)]

use agentpack_test_support::{git, Endpoint, FakeGitHub};

fn get(url: &str) -> reqwest::blocking::Response {
    reqwest::blocking::Client::builder()
        .redirect(reqwest::redirect::Policy::none())
        .build()
        .unwrap()
        .get(url)
        .send()
        .unwrap()
}

#[test]
fn commits_tags_and_tarballs_come_from_the_real_repository() {
    let gh = FakeGitHub::start();
    let repo = gh.repo("Acme", "skills");
    repo.write("a/SKILL.md", "hello");
    let first = repo.commit("one");
    repo.tag("v1.0.0");
    repo.write("a/SKILL.md", "hello again");
    let second = repo.commit("two");
    repo.annotated_tag("v1.1.0");

    let body: serde_json::Value = get(&format!("{}/repos/acme/skills/commits/main", gh.api_url()))
        .json()
        .unwrap();
    assert_eq!(body["sha"], second);
    let body: serde_json::Value = get(&format!(
        "{}/repos/acme/skills/commits/v1.0.0",
        gh.api_url()
    ))
    .json()
    .unwrap();
    assert_eq!(body["sha"], first);
    assert_eq!(
        get(&format!("{}/repos/acme/skills/commits/nope", gh.api_url())).status(),
        422
    );
    assert_eq!(
        get(&format!("{}/repos/acme/other/commits/main", gh.api_url())).status(),
        404
    );

    let tags: serde_json::Value = get(&format!(
        "{}/repos/acme/skills/tags?per_page=1&page=1",
        gh.api_url()
    ))
    .json()
    .unwrap();
    assert_eq!(tags[0]["name"], "v1.1.0");
    assert_eq!(
        tags[0]["commit"]["sha"], second,
        "annotated tags are peeled"
    );
    let page2 = get(&format!(
        "{}/repos/acme/skills/tags?per_page=1&page=2",
        gh.api_url()
    ));
    assert!(page2.headers().get("link").is_none());
    let tags: serde_json::Value = page2.json().unwrap();
    assert_eq!(tags[0]["commit"]["sha"], first);

    let tarball = get(&format!(
        "{}/repos/acme/skills/tarball/{first}",
        gh.api_url()
    ))
    .bytes()
    .unwrap();
    let mut archive = tar::Archive::new(flate2::read::GzDecoder::new(&tarball[..]));
    let names: Vec<String> = archive
        .entries()
        .unwrap()
        .map(|e| e.unwrap().path().unwrap().display().to_string())
        .collect();
    let short = &first[..7];
    assert!(
        names.contains(&format!("Acme-skills-{short}/a/SKILL.md")),
        "{names:?}"
    );
    assert_eq!(gh.count(Endpoint::Tarball, "acme", "skills"), 1);

    gh.set_tarball_redirect(true);
    let redirect = get(&format!(
        "{}/repos/acme/skills/tarball/{first}",
        gh.api_url()
    ));
    assert_eq!(redirect.status(), 302);
}

#[test]
fn failure_knobs_and_tokens() {
    let gh = FakeGitHub::start();
    let repo = gh.repo("acme", "x");
    repo.commit("init");
    gh.fail_next(None, 500, 1);
    assert_eq!(
        get(&format!("{}/repos/acme/x/commits/main", gh.api_url())).status(),
        500
    );
    assert_eq!(
        get(&format!("{}/repos/acme/x/commits/main", gh.api_url())).status(),
        200
    );
    gh.require_token(Some("secret"));
    assert_eq!(
        get(&format!("{}/repos/acme/x/commits/main", gh.api_url())).status(),
        401
    );
    let ok = reqwest::blocking::Client::new()
        .get(format!("{}/repos/acme/x/commits/main", gh.api_url()))
        .bearer_auth("secret")
        .send()
        .unwrap();
    assert_eq!(ok.status(), 200);
}

#[test]
fn git_smart_http_serves_clones_and_protocol_v2() {
    let gh = FakeGitHub::start();
    let repo = gh.repo("acme", "skills");
    repo.write("README.md", "x");
    let sha = repo.commit("init");
    repo.tag("v0.1.0");
    let work = tempfile::tempdir().unwrap();
    let url = format!("{}/acme/skills.git", gh.git_url());
    let refs = git(
        work.path(),
        &["-c", "protocol.version=2", "ls-remote", &url],
    );
    assert!(refs.contains(&format!("{sha}\trefs/tags/v0.1.0")), "{refs}");
    git(work.path(), &["clone", "-q", "--depth", "1", &url, "clone"]);
    assert_eq!(
        std::fs::read_to_string(work.path().join("clone/README.md")).unwrap(),
        "x"
    );
    assert!(gh.count(Endpoint::GitHttp, "acme", "skills") >= 2);
    gh.set_git_http_enabled(false);
    let failed = std::process::Command::new("git")
        .args(["ls-remote", &url])
        .output()
        .unwrap();
    assert!(!failed.status.success());
}
