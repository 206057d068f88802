//! The endpoints' answers from real git repositories: commits, paginated tags, `git archive`
//! tarballs (tampered or replaced on request) and git smart HTTP through `git http-backend`.
//!
//! Must never reach beyond the repositories under the fake's root.

use std::io::Write;
use std::path::Path;
use std::process::{Command, Stdio};

use tiny_http::{Request, Response};

use super::routing::{find_repo, header, header_value, json, message, query_param};
use super::*;
use crate::git_repo::TestRepo;

pub(super) fn git_output(dir: &Path, args: &[&str]) -> Option<Vec<u8>> {
    let output = Command::new("git")
        .args(args)
        .current_dir(dir)
        .env("GIT_CONFIG_NOSYSTEM", "1")
        .env("GIT_CONFIG_GLOBAL", "/dev/null")
        .stderr(Stdio::null())
        .output()
        .ok()?;
    output.status.success().then_some(output.stdout)
}

pub(super) fn commits(repo_dir: &Path, reference: &str) -> Response<std::io::Cursor<Vec<u8>>> {
    if reference.starts_with('-') {
        return message(422, "No commit found for SHA");
    }
    match git_output(
        repo_dir,
        &[
            "rev-parse",
            "--verify",
            "--quiet",
            &format!("{reference}^{{commit}}"),
        ],
    ) {
        Some(out) => {
            let sha = String::from_utf8_lossy(&out).trim().to_owned();
            json(
                200,
                &serde_json::json!({ "sha": sha, "commit": { "message": "" } }),
            )
        }
        None => message(422, &format!("No commit found for SHA: {reference}")),
    }
}

pub(super) fn tags(
    repo_dir: &Path,
    query: &str,
    port: u16,
    owner: &str,
    repo: &str,
) -> Response<std::io::Cursor<Vec<u8>>> {
    let per_page = query_param(query, "per_page")
        .and_then(|v| v.parse::<usize>().ok())
        .unwrap_or(30)
        .clamp(1, 100);
    let page = query_param(query, "page")
        .and_then(|v| v.parse::<usize>().ok())
        .unwrap_or(1)
        .max(1);
    let listing = git_output(
        repo_dir,
        &[
            "for-each-ref",
            "--sort=-refname",
            "--format=%(refname:strip=2)%09%(*objectname)%09%(objectname)",
            "refs/tags",
        ],
    )
    .unwrap_or_default();
    let all: Vec<serde_json::Value> = String::from_utf8_lossy(&listing)
        .lines()
        .filter_map(|line| {
            let mut parts = line.split('\t');
            let name = parts.next()?;
            let peeled = parts.next().unwrap_or("");
            let direct = parts.next().unwrap_or("");
            let sha = if peeled.is_empty() { direct } else { peeled };
            Some(serde_json::json!({ "name": name, "commit": { "sha": sha } }))
        })
        .collect();
    let start = (page - 1) * per_page;
    let slice: Vec<_> = all.iter().skip(start).take(per_page).cloned().collect();
    let mut response = json(200, &serde_json::Value::Array(slice));
    if start + per_page < all.len() {
        let next = format!(
            "<http://127.0.0.1:{port}/repos/{owner}/{repo}/tags?per_page={per_page}&page={}>; rel=\"next\"",
            page + 1
        );
        response = response.with_header(header("Link", &next));
    }
    response
}

pub(super) fn tarball(
    shared: &Shared,
    repo_dir: &Path,
    owner: &str,
    repo: &str,
    sha: &str,
) -> Response<std::io::Cursor<Vec<u8>>> {
    let override_bytes = shared
        .lock()
        .overrides
        .get(&(key(owner, repo), sha.to_owned()))
        .cloned();
    if let Some(bytes) = override_bytes {
        return Response::from_data(bytes)
            .with_header(header("Content-Type", "application/x-gzip"));
    }
    let full = match git_output(
        repo_dir,
        &[
            "rev-parse",
            "--verify",
            "--quiet",
            &format!("{sha}^{{commit}}"),
        ],
    ) {
        Some(out) => String::from_utf8_lossy(&out).trim().to_owned(),
        None => return message(404, "Not Found"),
    };
    let short: String = full.chars().take(7).collect();
    let canonical = find_repo(shared, owner, repo);
    let (owner_name, repo_name) = canonical
        .map(|r| (r.owner, r.name))
        .unwrap_or((owner.to_owned(), repo.to_owned()));
    let prefix = format!("--prefix={owner_name}-{repo_name}-{short}/");
    let tampered = shared
        .lock()
        .tampered
        .contains(&(key(owner, repo), sha.to_owned()));
    // `--add-virtual-file` paths are not prefixed by `--prefix`: name the top-level directory.
    let virtual_file =
        format!("--add-virtual-file={owner_name}-{repo_name}-{short}/TAMPERED:tampered\n");
    let mut args = vec!["archive", "--format=tar.gz", prefix.as_str()];
    if tampered {
        args.push(virtual_file.as_str());
    }
    args.push(full.as_str());
    match git_output(repo_dir, &args) {
        Some(bytes) => {
            Response::from_data(bytes).with_header(header("Content-Type", "application/x-gzip"))
        }
        None => message(500, "git archive failed"),
    }
}

pub(super) fn git_http_backend(
    shared: &Shared,
    mut request: Request,
    repo: &TestRepo,
    rest: &str,
    query: &str,
) {
    let mut body = Vec::new();
    if request.as_reader().read_to_end(&mut body).is_err() {
        let _ = request.respond(Response::from_string("bad request").with_status_code(400));
        return;
    }
    let path_info = format!("/{}/{}.git/{rest}", repo.owner, repo.name);
    let mut command = Command::new("git");
    command
        .arg("http-backend")
        .env("GIT_PROJECT_ROOT", &shared.root)
        .env("GIT_HTTP_EXPORT_ALL", "1")
        .env("GIT_CONFIG_NOSYSTEM", "1")
        .env("GIT_CONFIG_GLOBAL", "/dev/null")
        .env("PATH_INFO", path_info)
        .env("QUERY_STRING", query)
        .env("REQUEST_METHOD", request.method().as_str())
        .env("REMOTE_ADDR", "127.0.0.1")
        .env("CONTENT_LENGTH", body.len().to_string())
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::null());
    if let Some(content_type) = header_value(&request, "Content-Type") {
        command.env("CONTENT_TYPE", content_type);
    }
    if let Some(protocol) = header_value(&request, "Git-Protocol") {
        command.env("GIT_PROTOCOL", protocol);
    }
    if let Some(encoding) = header_value(&request, "Content-Encoding") {
        command.env("HTTP_CONTENT_ENCODING", encoding);
    }
    let Ok(mut child) = command.spawn() else {
        let _ = request
            .respond(Response::from_string("cannot run git http-backend").with_status_code(500));
        return;
    };
    let mut stdin = child.stdin.take();
    let writer = std::thread::spawn(move || {
        if let Some(stdin) = stdin.as_mut() {
            let _ = stdin.write_all(&body);
        }
    });
    let output = child.wait_with_output();
    let _ = writer.join();
    let Ok(output) = output else {
        let _ =
            request.respond(Response::from_string("git http-backend failed").with_status_code(500));
        return;
    };
    let raw = output.stdout;
    let (head_end, body_start) = match find(&raw, b"\r\n\r\n") {
        Some(i) => (i, i + 4),
        None => match find(&raw, b"\n\n") {
            Some(i) => (i, i + 2),
            None => (raw.len(), raw.len()),
        },
    };
    let head = String::from_utf8_lossy(&raw[..head_end]).into_owned();
    let mut status = 200;
    let mut headers = Vec::new();
    for line in head.lines() {
        let Some((name, value)) = line.split_once(':') else {
            continue;
        };
        let value = value.trim();
        if name.eq_ignore_ascii_case("Status") {
            status = value
                .split_whitespace()
                .next()
                .and_then(|s| s.parse().ok())
                .unwrap_or(500);
        } else {
            headers.push(header(name.trim(), value));
        }
    }
    let mut response = Response::from_data(raw[body_start..].to_vec()).with_status_code(status);
    for h in headers {
        response = response.with_header(h);
    }
    let _ = request.respond(response);
}

pub(super) fn find(haystack: &[u8], needle: &[u8]) -> Option<usize> {
    haystack
        .windows(needle.len())
        .position(|window| window == needle)
}
