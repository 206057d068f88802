//! The git smart-HTTP fallback, through gix: list refs (ls-refs) and fetch one commit (depth 1).
//!
//! Used when the REST API fails or is throttled. It works in a throw-away bare repository in a temp
//! directory (gix needs one to hold fetched objects) and hands the commit's tree to a
//! [`SafeTreeWriter`], which applies the same extraction rules (and limits) as a tarball. Every
//! connection has the configured connect and read timeouts, and a fetch stops once the scratch
//! repository outgrows the download size cap. It never runs the `git`
//! executable and never writes outside the temp repository and the writer's directory.

use std::collections::BTreeMap;
use std::num::NonZeroU32;
use std::sync::atomic::{AtomicBool, Ordering};

use gix::bstr::ByteSlice;
use gix::objs::tree::EntryKind;
use gix::protocol::handshake::Ref;
use gix::remote::Direction;

use super::{GitHubConfig, RepoId, SourceFailure};
use crate::extract::{ExtractError, SafeTreeWriter};
use crate::limits::{LimitExceeded, LimitKind, Limits};

/// The refs a remote advertises, peeled to commits.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct RemoteRefs {
    /// Branch name (without `refs/heads/`) -> commit.
    pub branches: BTreeMap<String, String>,
    /// Tag name (without `refs/tags/`) -> commit (annotated tags peeled).
    pub tags: BTreeMap<String, String>,
    /// The commit `HEAD` points at, when advertised.
    pub head: Option<String>,
}

impl RemoteRefs {
    /// Looks `reference` up as `HEAD`, a branch, a tag, or a full ref name.
    pub fn lookup(&self, reference: &str) -> Option<&String> {
        if reference == "HEAD" {
            return self.head.as_ref();
        }
        if let Some(branch) = reference.strip_prefix("refs/heads/") {
            return self.branches.get(branch);
        }
        if let Some(tag) = reference.strip_prefix("refs/tags/") {
            return self.tags.get(tag);
        }
        self.branches
            .get(reference)
            .or_else(|| self.tags.get(reference))
    }
}

fn unavailable(what: &str, repo: &RepoId, error: impl std::fmt::Display) -> SourceFailure {
    SourceFailure::Unavailable(format!("git protocol {what} for {repo}: {error}"))
}

/// The transport options of a connection to `url`: the repository's defaults with the configured
/// connect timeout, and a read timeout through the reqwest backend (gix's reqwest backend reads no
/// shared `http.*` timeout option, so the client itself gets them).
fn transport_options(
    repository: &gix::Repository,
    url: &str,
    repo: &RepoId,
    limits: &Limits,
) -> Result<Box<dyn std::any::Any>, SourceFailure> {
    use gix::protocol::transport::client::blocking_io::http;
    let defaults = repository
        .transport_options(url, None)
        .map_err(|error| unavailable("configuration", repo, error))?;
    let mut options: http::Options = defaults
        .and_then(|options| options.downcast::<http::Options>().ok())
        .map(|options| *options)
        .unwrap_or_default();
    options.connect_timeout = Some(limits.connect_timeout);
    options.low_speed_limit_bytes_per_second = 1;
    options.low_speed_time_seconds = limits.read_timeout.as_secs().max(1);
    let (connect, read) = (limits.connect_timeout, limits.read_timeout);
    let backend = http::reqwest::Options {
        // A blocking client applies `timeout` to the response head and to each read of the body.
        configure_client: Some(Box::new(move |builder| {
            Ok(builder.connect_timeout(connect).timeout(read))
        })),
        configure_request: None,
    };
    options.backend = Some(std::sync::Arc::new(std::sync::Mutex::new(backend)));
    Ok(Box::new(options))
}

fn scratch_repo(
    config: &GitHubConfig,
    repo: &RepoId,
) -> Result<(tempfile::TempDir, gix::Repository), SourceFailure> {
    let dir = tempfile::Builder::new()
        .prefix("agentpack-git-")
        .tempdir()
        .map_err(|error| unavailable("scratch repository", repo, error))?;
    let mut repository = gix::init_bare(dir.path())
        .map_err(|error| unavailable("scratch repository", repo, error))?;
    if let Some(token) = &config.token {
        let mut snapshot = repository.config_snapshot_mut();
        snapshot
            .append_config(
                [format!(
                    "http.extraHeader=Authorization: Basic {}",
                    basic_credentials(token)
                )
                .as_str()],
                gix::config::Source::Api,
            )
            .map_err(|error| unavailable("configuration", repo, error))?;
        snapshot
            .commit()
            .map_err(|error| unavailable("configuration", repo, error))?;
    }
    Ok((dir, repository))
}

/// `base64("x-access-token:" + token)`: how GitHub's git smart HTTP takes a token.
fn basic_credentials(token: &str) -> String {
    const ALPHABET: &[u8; 64] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    let input = format!("x-access-token:{token}");
    let mut out = String::with_capacity(input.len().div_ceil(3) * 4);
    for chunk in input.as_bytes().chunks(3) {
        let bytes = [
            chunk[0],
            chunk.get(1).copied().unwrap_or(0),
            chunk.get(2).copied().unwrap_or(0),
        ];
        let n = (u32::from(bytes[0]) << 16) | (u32::from(bytes[1]) << 8) | u32::from(bytes[2]);
        for (i, shift) in [18u32, 12, 6, 0].into_iter().enumerate() {
            if i <= chunk.len() {
                out.push(char::from(ALPHABET[((n >> shift) & 63) as usize]));
            } else {
                out.push('=');
            }
        }
    }
    out
}

fn refspec(text: &str) -> Result<gix::refspec::RefSpec, SourceFailure> {
    gix::refspec::parse(text.into(), gix::refspec::parse::Operation::Fetch)
        .map(|spec| spec.to_owned())
        .map_err(|error| SourceFailure::Unavailable(format!("invalid refspec {text}: {error}")))
}

/// Lists branches, tags and `HEAD` of `repo` over git smart HTTP (`ls-refs`).
pub fn ls_refs(config: &GitHubConfig, repo: &RepoId) -> Result<RemoteRefs, SourceFailure> {
    let (_dir, repository) = scratch_repo(config, repo)?;
    let url = config.git_repo_url(repo);
    let remote = repository
        .remote_at(url.as_str())
        .map_err(|error| unavailable("remote", repo, error))?
        .with_fetch_tags(gix::remote::fetch::Tags::None);
    let connection = remote
        .connect(Direction::Fetch)
        .map_err(|error| unavailable("connect", repo, error))?
        .with_transport_options(transport_options(&repository, &url, repo, &config.limits)?);
    let options = gix::remote::ref_map::Options {
        prefix_from_spec_as_filter_on_remote: true,
        extra_refspecs: vec![
            refspec("+refs/heads/*:refs/heads/*")?,
            refspec("+refs/tags/*:refs/tags/*")?,
            refspec("HEAD")?,
        ],
        ..Default::default()
    };
    let (ref_map, _handshake) = connection
        .ref_map(gix::progress::Discard, options)
        .map_err(|error| unavailable("ls-refs", repo, error))?;
    let mut refs = RemoteRefs::default();
    for remote_ref in &ref_map.remote_refs {
        let (name, commit) = match remote_ref {
            Ref::Peeled {
                full_ref_name,
                object,
                ..
            }
            | Ref::Direct {
                full_ref_name,
                object,
            }
            | Ref::Symbolic {
                full_ref_name,
                object,
                ..
            } => (full_ref_name, object),
            Ref::Unborn { .. } => continue,
        };
        let Ok(name) = name.to_str() else { continue };
        let commit = commit.to_string();
        if name == "HEAD" {
            refs.head = Some(commit);
        } else if let Some(branch) = name.strip_prefix("refs/heads/") {
            refs.branches.insert(branch.to_owned(), commit);
        } else if let Some(tag) = name.strip_prefix("refs/tags/") {
            // `refs/tags/v1^{}` style entries never reach here: gix reports them as `Peeled`.
            refs.tags.insert(tag.to_owned(), commit);
        }
    }
    Ok(refs)
}

/// Why fetching a commit over the git protocol failed.
#[derive(Debug, thiserror::Error)]
pub enum GitFetchError {
    /// The server could not be used.
    #[error(transparent)]
    Source(#[from] SourceFailure),
    /// The commit's tree broke an extraction rule.
    #[error(transparent)]
    Extract(#[from] ExtractError),
}

/// Fetches `commit` of `repo` with depth 1 and writes its tree through `writer`.
pub fn fetch_commit_tree(
    config: &GitHubConfig,
    repo: &RepoId,
    commit: &str,
    writer: &mut SafeTreeWriter,
) -> Result<(), GitFetchError> {
    let (dir, repository) = scratch_repo(config, repo)?;
    let url = config.git_repo_url(repo);
    let remote = repository
        .remote_at(url.as_str())
        .map_err(|error| unavailable("remote", repo, error))?
        .with_fetch_tags(gix::remote::fetch::Tags::None)
        .with_refspecs(
            Some(format!("+{commit}:refs/heads/agentpack-fetch").as_str()),
            Direction::Fetch,
        )
        .map_err(|error| unavailable("refspec", repo, error))?;
    let connection = remote
        .connect(Direction::Fetch)
        .map_err(|error| unavailable("connect", repo, error))?
        .with_transport_options(transport_options(&repository, &url, repo, &config.limits)?);
    let depth = NonZeroU32::MIN;
    let interrupt = AtomicBool::new(false);
    let done = AtomicBool::new(false);
    let max = config.limits.max_download_bytes;
    let (received, too_large) = std::thread::scope(|scope| {
        // gix writes the pack as it arrives: stop it once the scratch repository outgrows the
        // download size cap (an endless pack never fills the disk).
        let watcher = scope.spawn(|| {
            while !done.load(Ordering::SeqCst) {
                if tree_size(dir.path()) > max {
                    interrupt.store(true, Ordering::SeqCst);
                    return true;
                }
                std::thread::sleep(std::time::Duration::from_millis(50));
            }
            false
        });
        let received = connection
            .prepare_fetch(gix::progress::Discard, Default::default())
            .map_err(|error| unavailable("fetch", repo, error))
            .and_then(|prepared| {
                prepared
                    .with_shallow(gix::remote::fetch::Shallow::DepthAtRemote(depth))
                    .receive(gix::progress::Discard, &interrupt)
                    .map(|_| ())
                    .map_err(|error| unavailable("fetch", repo, error))
            });
        done.store(true, Ordering::SeqCst);
        (received, watcher.join().unwrap_or(false))
    });
    if too_large || tree_size(dir.path()) > max {
        return Err(GitFetchError::Source(SourceFailure::Limit(
            LimitExceeded::too_large(
                &config.limits,
                LimitKind::DownloadSize,
                format!("the git fetch of {url}"),
            ),
        )));
    }
    received?;
    let id = gix::ObjectId::from_hex(commit.as_bytes())
        .map_err(|error| unavailable("commit id", repo, error))?;
    let tree = repository
        .find_commit(id)
        .map_err(|error| unavailable("fetched commit", repo, error))?
        .tree()
        .map_err(|error| unavailable("fetched tree", repo, error))?;
    write_tree(repo, &tree, "", writer)
}

/// Bytes of the regular files below `root` (what a fetch has written so far).
fn tree_size(root: &std::path::Path) -> u64 {
    walkdir::WalkDir::new(root)
        .into_iter()
        .flatten()
        .filter(|entry| entry.file_type().is_file())
        .filter_map(|entry| entry.metadata().ok())
        .map(|meta| meta.len())
        .sum()
}

fn write_tree(
    repo: &RepoId,
    tree: &gix::Tree<'_>,
    prefix: &str,
    writer: &mut SafeTreeWriter,
) -> Result<(), GitFetchError> {
    for entry in tree.iter() {
        let entry = entry.map_err(|error| unavailable("tree entry", repo, error))?;
        let name = entry.filename();
        let name = name.to_str().map_err(|_| ExtractError::NonUtf8Name {
            name: format!("{prefix}{}", name.to_str_lossy()),
        })?;
        let path = format!("{prefix}{name}");
        match entry.mode().kind() {
            EntryKind::Tree => {
                let subtree = entry
                    .object()
                    .map_err(|error| unavailable("tree", repo, error))?
                    .try_into_tree()
                    .map_err(|error| unavailable("tree", repo, error))?;
                write_tree(repo, &subtree, &format!("{path}/"), writer)?;
            }
            kind @ (EntryKind::Blob | EntryKind::BlobExecutable) => {
                let blob = entry
                    .object()
                    .map_err(|error| unavailable("blob", repo, error))?;
                let executable = kind == EntryKind::BlobExecutable;
                writer.file_from_source(&path, &mut blob.data.as_slice(), executable)?;
            }
            EntryKind::Link => {
                let blob = entry
                    .object()
                    .map_err(|error| unavailable("link", repo, error))?;
                let target = blob
                    .data
                    .to_str()
                    .map_err(|_| ExtractError::NonUtf8Name { name: path.clone() })?;
                writer.symlink(&path, target)?;
            }
            // Submodules are not part of a snapshot (GitHub tarballs leave them empty too).
            EntryKind::Commit => writer.dir(&path)?,
        }
    }
    Ok(())
}
