//! Request routing of the fake: matching a request to an endpoint, the token check, injected
//! failures, counters, and the small response helpers.
//!
//! Must never answer from anything but the test's repositories and knobs.

use std::path::Path;

use tiny_http::{Header, Request, Response};

use super::endpoints::{commits, git_http_backend, tags, tarball};
use super::*;
use crate::git_repo::TestRepo;

pub(super) fn header(name: &str, value: &str) -> Header {
    Header::from_bytes(name.as_bytes(), value.as_bytes()).unwrap()
}

pub(super) fn json(status: u16, body: &serde_json::Value) -> Response<std::io::Cursor<Vec<u8>>> {
    Response::from_data(serde_json::to_vec(body).unwrap())
        .with_status_code(status)
        .with_header(header("Content-Type", "application/json"))
}

pub(super) fn message(status: u16, text: &str) -> Response<std::io::Cursor<Vec<u8>>> {
    json(status, &serde_json::json!({ "message": text }))
}

pub(super) fn header_value(request: &Request, name: &str) -> Option<String> {
    request
        .headers()
        .iter()
        .find(|h| h.field.as_str().as_str().eq_ignore_ascii_case(name))
        .map(|h| h.value.as_str().to_owned())
}

pub(super) fn decode(segment: &str) -> String {
    percent_encoding::percent_decode_str(segment)
        .decode_utf8_lossy()
        .into_owned()
}

pub(super) fn query_param(query: &str, name: &str) -> Option<String> {
    query.split('&').find_map(|pair| {
        let (k, v) = pair.split_once('=')?;
        (k == name).then(|| decode(v))
    })
}

pub(super) fn authorized(expected: &str, authorization: Option<&str>) -> bool {
    let Some(value) = authorization else {
        return false;
    };
    if let Some(token) = value
        .strip_prefix("Bearer ")
        .or_else(|| value.strip_prefix("token "))
    {
        return token == expected;
    }
    // git clients send basic auth; accept the token as password.
    if let Some(encoded) = value.strip_prefix("Basic ") {
        return base64_decode(encoded)
            .and_then(|raw| String::from_utf8(raw).ok())
            .is_some_and(|pair| pair.rsplit(':').next() == Some(expected));
    }
    false
}

pub(super) fn base64_decode(text: &str) -> Option<Vec<u8>> {
    const ALPHABET: &[u8] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    let mut bits = 0u32;
    let mut count = 0;
    let mut out = Vec::new();
    for byte in text.trim_end_matches('=').bytes() {
        let value = ALPHABET.iter().position(|&c| c == byte)? as u32;
        bits = (bits << 6) | value;
        count += 6;
        if count >= 8 {
            count -= 8;
            out.push((bits >> count) as u8);
            bits &= (1 << count) - 1;
        }
    }
    Some(out)
}

pub(super) fn handle(shared: &Shared, port: u16, request: Request) {
    let url = request.url().to_owned();
    let (path, query) = url.split_once('?').unwrap_or((url.as_str(), ""));
    let path = path.to_owned();
    let query = query.to_owned();
    let authorization = header_value(&request, "Authorization");
    {
        let mut state = shared.lock();
        state.log.push(format!("{} {url}", request.method()));
        state.authorizations.push(authorization.clone());
        if let Some(token) = &state.token {
            if !authorized(token, authorization.as_deref()) {
                drop(state);
                let response = message(401, "Requires authentication")
                    .with_header(header("WWW-Authenticate", "Basic realm=\"GitHub\""));
                let _ = request.respond(response);
                return;
            }
        }
    }
    let segments: Vec<&str> = path.trim_start_matches('/').split('/').collect();
    match segments.as_slice() {
        ["repos", owner, repo, "commits", rest @ ..] if !rest.is_empty() => {
            let reference = rest.iter().map(|s| decode(s)).collect::<Vec<_>>().join("/");
            rest_call(
                shared,
                request,
                Endpoint::Commits,
                owner,
                repo,
                |repo_dir| commits(repo_dir, &reference),
            );
        }
        ["repos", owner, repo, "tags"] => {
            let (owner, repo) = (owner.to_string(), repo.to_string());
            rest_call(shared, request, Endpoint::Tags, &owner, &repo, |repo_dir| {
                tags(repo_dir, &query, port, &owner, &repo)
            });
        }
        ["repos", owner, repo, "tarball", sha] => {
            let redirect = shared.lock().redirect_tarballs;
            if redirect {
                // The redirect itself is not a download; the codeload request counts.
                let location =
                    format!("http://127.0.0.1:{port}/codeload/{owner}/{repo}/legacy.tar.gz/{sha}");
                if let Some(failure) = take_failure(shared, Endpoint::Tarball) {
                    let _ = request.respond(message(failure, "injected failure"));
                    return;
                }
                let response = Response::from_data(Vec::new())
                    .with_status_code(302)
                    .with_header(header("Location", &location));
                let _ = request.respond(response);
            } else {
                let (owner, repo, sha) = (owner.to_string(), repo.to_string(), sha.to_string());
                rest_call(
                    shared,
                    request,
                    Endpoint::Tarball,
                    &owner,
                    &repo,
                    |repo_dir| tarball(shared, repo_dir, &owner, &repo, &sha),
                );
            }
        }
        ["codeload", owner, repo, "legacy.tar.gz", sha] => {
            let (owner, repo, sha) = (owner.to_string(), repo.to_string(), sha.to_string());
            count(shared, Endpoint::Tarball, &owner, &repo);
            let response = match find_repo(shared, &owner, &repo) {
                Some(found) => tarball(shared, &found.dir, &owner, &repo, &sha),
                None => message(404, "Not Found"),
            };
            let _ = request.respond(response);
        }
        [owner, repo_git, ..] if repo_git.ends_with(".git") => {
            let repo = repo_git.trim_end_matches(".git").to_owned();
            let owner = owner.to_string();
            count(shared, Endpoint::GitHttp, &owner, &repo);
            let disabled = shared.lock().git_http_disabled;
            let found = find_repo(shared, &owner, &repo);
            match (disabled, found) {
                (false, Some(found)) => {
                    let rest = segments[2..].join("/");
                    git_http_backend(shared, request, &found, &rest, &query);
                }
                _ => {
                    let _ =
                        request.respond(Response::from_string("Not Found").with_status_code(404));
                }
            }
        }
        _ => {
            let _ = request.respond(message(404, "Not Found"));
        }
    }
}

pub(super) fn count(shared: &Shared, endpoint: Endpoint, owner: &str, repo: &str) {
    *shared
        .lock()
        .counters
        .entry((endpoint, key(owner, repo)))
        .or_insert(0) += 1;
}

pub(super) fn find_repo(shared: &Shared, owner: &str, repo: &str) -> Option<TestRepo> {
    shared.lock().repos.get(&key(owner, repo)).cloned()
}

pub(super) fn take_failure(shared: &Shared, endpoint: Endpoint) -> Option<u16> {
    let mut state = shared.lock();
    if let Some(status) = state.rest_down.filter(|_| endpoint.is_rest()) {
        return Some(status);
    }
    let rule = state.fail_rules.iter_mut().find(|rule| {
        rule.remaining > 0 && rule.endpoint.map_or(endpoint.is_rest(), |e| e == endpoint)
    })?;
    rule.remaining -= 1;
    Some(rule.status)
}

pub(super) fn rest_call(
    shared: &Shared,
    request: Request,
    endpoint: Endpoint,
    owner: &str,
    repo: &str,
    answer: impl FnOnce(&Path) -> Response<std::io::Cursor<Vec<u8>>>,
) {
    count(shared, endpoint, owner, repo);
    if let Some(status) = take_failure(shared, endpoint) {
        let mut response = message(status, "injected failure");
        if status == 429 {
            response = response.with_header(header("Retry-After", "0"));
        }
        let _ = request.respond(response);
        return;
    }
    let response = match find_repo(shared, owner, repo) {
        Some(found) => answer(&found.dir),
        None => message(404, "Not Found"),
    };
    let _ = request.respond(response);
}
