//! `[[mcp_servers]]` records for pack.lock, and what a staged config runs instead of a server's
//! written command.
//!
//! [`record`] turns the merged servers into records: npm servers (`npx`, `bunx`, `pnpm dlx`,
//! `yarn dlx`) with an exact version or a dist-tag are resolved against their registry and pinned;
//! an npx server's dependency tree is locked with npm; ranges, Git and tarball specs and
//! `npx --package` are unpinned; PyPI and docker servers are recorded, not resolved; remote servers
//! and other commands are unpinnable. A record applies only while its `definition` digest matches.
//! [`launches_for`] / [`prepare_launches`] give the generation builder what to write instead
//! ([`launch`]: the mcp-exec spec store paths of tree-locked servers and the launches).
//!
//! It must never put an env value, a header or an OAuth setting into a record, never move a pin
//! without `update`, and never accept a refreshed version whose integrity changed.

// Errors carry the paths, packages and digests a message needs; they are returned once per
// command on a cold path, so their size does not matter.
#![allow(clippy::result_large_err)]

use std::path::PathBuf;

use agentpack_harness::render::mcp::McpSource;
use agentpack_harness::{McpServer, MergedServer};
use agentpack_lockfile::keys::{mcp_definition_digest, DefinitionInput};
use agentpack_lockfile::{Lockfile, McpRecord, McpStatus};

use crate::npm::registry::{registry_for, RegistryClient, RegistryError};
use crate::npm::spec::{classify, Launch, NpmInvocation, NpmRunner};
use crate::npm::tree::{lock_tree, tree_digest};

mod launch;

pub use launch::{
    launches_for, plan_exec_specs, prepare_launches, publish_exec_specs,
    publish_planned_exec_specs, ExecSpecs, PlannedExecSpec, PlannedExecSpecs, PreparedLaunches,
};

/// How [`record`] may behave.
#[derive(Debug, Clone, Default)]
pub struct McpLockOptions {
    /// Resolve dist-tags again (`lock --update`); otherwise recorded versions are kept.
    pub update: bool,
    /// Record a server whose registry cannot be reached as unpinned (`--allow-unpinned-mcp`,
    /// `mcp add --allow-unpinned`) instead of failing.
    pub allow_unpinned: bool,
    /// Leave a server that cannot be pinned (registry unreachable or refusing) without a record, with
    /// a warning, instead of failing (`add`: a package's server never makes adding it fail).
    pub tolerate_unreachable: bool,
    /// The npm program to lock npx trees with (`None`: npm is not on PATH; trees are not locked).
    pub npm: Option<PathBuf>,
    /// The environment's `npm_config_registry` (the caller reads the environment).
    pub environment_registry: Option<String>,
    /// Timeouts and size caps of registry requests.
    pub limits: crate::limits::Limits,
}

/// What [`record`] produced.
#[derive(Debug, Clone, Default)]
pub struct McpLockOutcome {
    /// One record per server that has one, sorted by name.
    pub records: Vec<McpRecord>,
    /// Trees not locked, servers left without a record, ...
    pub warnings: Vec<String>,
}

/// Why the servers could not be recorded; nothing should be written.
#[derive(Debug, thiserror::Error)]
pub enum McpLockError {
    /// The registry could not be reached.
    #[error("cannot pin MCP server `{server}`: {cause}\n  fix  check the network or npm_config_registry, or record it unpinned with `agentpack lock --allow-unpinned-mcp` (`agentpack mcp add ... --allow-unpinned`)")]
    Unreachable {
        /// The server.
        server: String,
        /// The cause.
        cause: RegistryError,
    },
    /// The registry answered, but not with the package or version.
    #[error("cannot pin MCP server `{server}`: {cause}\n  fix  correct the package name or version in the server's definition")]
    Registry {
        /// The server.
        server: String,
        /// The cause.
        cause: RegistryError,
    },
    /// A refresh found the locked version with another integrity.
    #[error("MCP server `{server}`: the registry {registry} now reports integrity {new} for {package}@{version}, but pack.lock records {old}; pack.lock was not written\n  fix  find out why the registry changed a published version before trusting it")]
    IntegrityChanged {
        /// The server.
        server: String,
        /// The package.
        package: String,
        /// The version.
        version: String,
        /// The registry.
        registry: String,
        /// The recorded integrity.
        old: String,
        /// The integrity the registry reports now.
        new: String,
    },
    /// The HTTP client could not be built.
    #[error("cannot set up an HTTP client")]
    Client(#[from] reqwest::Error),
}

/// What stands for a credential in the definition a digest is taken over.
const CREDENTIAL_MARK: &str = "${credential}";

/// The `definition` digest of a server (type, command, url, args, cwd; never env, headers, OAuth),
/// over its credential-free form: a `url`'s userinfo is `***` (as messages show it) and each
/// argument that holds a credential ([`agentpack_harness::render::credentials::credential_args`])
/// is `${credential}`. pack.lock never depends on a secret's value (a digest of a short token is
/// a fingerprint anyone can guess offline), and rotating a credential keeps the record current.
/// A definition without credentials digests exactly as the ADDENDUM formula says.
pub fn definition_digest(server: &McpServer) -> String {
    use agentpack_harness::render::credentials;
    let url = server.url.as_deref().map(|url| {
        if credentials::has_url_credentials(url) {
            credentials::redact_url_userinfo(url)
        } else {
            url.to_owned()
        }
    });
    let marked = credentials::credential_args(&server.args);
    let args: Vec<String> = server
        .args
        .iter()
        .enumerate()
        .map(|(index, arg)| {
            if marked.contains(&index) {
                CREDENTIAL_MARK.to_owned()
            } else {
                arg.clone()
            }
        })
        .collect();
    mcp_definition_digest(&DefinitionInput {
        server_type: server.server_type.as_deref(),
        command: server.command.as_deref(),
        url: url.as_deref(),
        args: &args,
        cwd: server.cwd.as_deref(),
    })
}

/// The digest older versions recorded: over the definition as written, credentials included.
fn legacy_definition_digest(server: &McpServer) -> String {
    mcp_definition_digest(&DefinitionInput {
        server_type: server.server_type.as_deref(),
        command: server.command.as_deref(),
        url: server.url.as_deref(),
        args: &server.args,
        cwd: server.cwd.as_deref(),
    })
}

/// Whether a record's `definition` is `server`'s: its [`definition_digest`], or the digest an
/// older version recorded over the credentials themselves (such a record stays current, and the
/// next command that writes pack.lock records it with the credential-free digest).
pub fn definition_matches(recorded: &str, server: &McpServer) -> bool {
    recorded == definition_digest(server) || recorded == legacy_definition_digest(server)
}

/// The `source` field: `plugin`, `manifest` or `.agents`.
pub fn source_label(source: &McpSource) -> &'static str {
    match source {
        McpSource::Plugin { .. } => "plugin",
        McpSource::Manifest => "manifest",
        McpSource::DotAgents => ".agents",
    }
}

/// The record of `server` in `lock`, if there is one and its digest matches the definition.
pub fn current_record<'l>(lock: &'l Lockfile, server: &MergedServer) -> Option<&'l McpRecord> {
    lock.mcp_server(&server.name)
        .filter(|r| definition_matches(&r.definition, &server.server))
}

/// Records every server (see the module docs). `old` supplies the versions to keep.
pub fn record(
    servers: &[MergedServer],
    old: &Lockfile,
    options: &McpLockOptions,
) -> Result<McpLockOutcome, McpLockError> {
    let mut recorder = McpRecorder::new(options);
    let mut records = Vec::new();
    for server in servers {
        if let Some(record) = recorder.record_server(server, old.mcp_server(&server.name))? {
            records.push(record);
        }
    }
    records.sort_by(|a, b| a.name.cmp(&b.name));
    Ok(McpLockOutcome {
        records,
        warnings: recorder.warnings,
    })
}

/// Records servers one at a time with one set of options, sharing the registry client (made when
/// a server first needs it) and collecting the warnings.
#[derive(Debug)]
pub struct McpRecorder<'o> {
    options: &'o McpLockOptions,
    client: Option<RegistryClient>,
    /// Warnings so far (a tree left unlocked, a record kept because the registry failed...), for
    /// the cli to print.
    pub warnings: Vec<String>,
}

impl<'o> McpRecorder<'o> {
    /// A recorder with no client yet and no warnings.
    pub fn new(options: &'o McpLockOptions) -> Self {
        McpRecorder {
            options,
            client: None,
            warnings: Vec::new(),
        }
    }

    fn client(&mut self) -> Result<&RegistryClient, McpLockError> {
        let client = match self.client.take() {
            Some(client) => client,
            None => RegistryClient::with_limits(self.options.limits)?,
        };
        Ok(self.client.insert(client))
    }

    /// Records one server; `None` when it is left without a record (unreachable registry under
    /// `tolerate_unreachable`). `previous` is its record in the old lock.
    pub fn record_server(
        &mut self,
        server: &MergedServer,
        previous: Option<&McpRecord>,
    ) -> Result<Option<McpRecord>, McpLockError> {
        let definition = &server.server;
        let digest = definition_digest(definition);
        let launch = classify(
            definition.command.as_deref(),
            &definition.args,
            definition.url.as_deref(),
        );
        let source = source_label(&server.source);
        let new = |status| McpRecord::new(&server.name, source, launch.launcher(), status, &digest);
        let record = match &launch {
            Launch::Remote { host } => {
                let mut r = new(McpStatus::Unpinnable);
                r.host.clone_from(host);
                r.reason = Some("a remote server: what it runs is decided by its host".into());
                r
            }
            Launch::Command { command } => {
                let mut r = new(McpStatus::Unpinnable);
                r.command = Some(command.clone());
                r.reason = Some("a local command agentpack cannot pin".into());
                r
            }
            Launch::Pypi { requested } => {
                let exact = requested.as_deref().and_then(|s| s.split_once("=="));
                let mut r = new(if exact.is_some() {
                    McpStatus::Pinned
                } else {
                    McpStatus::Unpinned
                });
                r.requested.clone_from(requested);
                if let Some((package, version)) = exact {
                    r.package = Some(package.to_owned());
                    r.version = Some(version.to_owned());
                } else {
                    r.reason = Some(
                    "PyPI servers are recorded, not resolved; write pkg==1.2.3 to fix what runs"
                        .into(),
                );
                }
                r
            }
            Launch::Docker { image } => {
                let pinned = image.as_deref().is_some_and(|i| i.contains("@sha256:"));
                let mut r = new(if pinned {
                    McpStatus::Pinned
                } else {
                    McpStatus::Unpinned
                });
                r.requested.clone_from(image);
                if !pinned {
                    r.reason = Some(
                    "docker servers are recorded, not resolved; write image@sha256:... to fix what runs"
                        .into(),
                );
                }
                r
            }
            Launch::Npm(invocation) => {
                return self.record_npm(server, invocation, &digest, previous)
            }
        };
        Ok(Some(record))
    }

    fn record_npm(
        &mut self,
        server: &MergedServer,
        invocation: &NpmInvocation,
        digest: &str,
        previous: Option<&McpRecord>,
    ) -> Result<Option<McpRecord>, McpLockError> {
        let options = self.options;
        let source = source_label(&server.source);
        let mut record = McpRecord::new(&server.name, source, "npm", McpStatus::Unpinned, digest);
        record.requested.clone_from(&invocation.requested);
        let request = match &invocation.request {
            Ok(request) => request,
            Err(reason) => {
                record.reason = Some(reason.clone());
                return Ok(Some(record));
            }
        };
        let registry = registry_for(&server.server.env, options.environment_registry.as_deref());
        // A registry the server's own env names is part of what it asks for; one the environment
        // names is where this machine looks, and does not unpin what the lock already has (a plain
        // `lock` needs no registry for pinned servers; `lock --update` re-resolves against it).
        let registry_from_server = server
            .server
            .env
            .iter()
            .any(|(k, v)| k.eq_ignore_ascii_case("npm_config_registry") && !v.contains("${"));
        // A pinned record of this very definition and package, which a lock without `update`
        // keeps; carried over with this definition's source and digest.
        let keepable = previous.filter(|p| {
            !options.update
                && definition_matches(&p.definition, &server.server)
                && p.status == McpStatus::Pinned
                && p.package.as_deref() == Some(request.name.as_str())
                && p.version.is_some()
                && p.integrity.is_some()
        });
        let carried = |kept: &McpRecord| {
            let mut kept = kept.clone();
            source.clone_into(&mut kept.source);
            digest.clone_into(&mut kept.definition);
            kept
        };
        let reusable = keepable.filter(|p| {
            (p.registry.as_deref() == Some(registry.as_str()) || !registry_from_server)
                && p.registry.is_some()
        });
        if let Some(kept) = reusable {
            let mut kept = carried(kept);
            let registry = kept.registry.clone().unwrap_or(registry);
            let needs_tree = invocation.runner == NpmRunner::Npx && kept.tree.is_empty();
            if needs_tree && options.npm.is_some() {
                // Locks made before trees were recorded get them at the version they already pin.
                let exact = crate::npm::spec::PackageRequest {
                    name: request.name.clone(),
                    version: crate::npm::spec::VersionRequest::Exact(
                        kept.version.clone().unwrap_or_default(),
                    ),
                };
                match self.client()?.resolve(&registry, &exact) {
                Ok(resolved) => {
                    self.add_tree(&mut kept, resolved.bin, &registry);
                }
                Err(error) => self.warnings.push(format!(
                    "MCP server `{}`: the dependency tree of {}@{} was not locked ({error}); it keeps its top-level pin and starts through npx",
                    server.name,
                    request.name,
                    kept.version.as_deref().unwrap_or_default()
                )),
            }
            }
            return Ok(Some(kept));
        }
        let resolved = match self.client()?.resolve(&registry, request) {
            Ok(resolved) => resolved,
            Err(source) => {
                // A lock record is never lost: without `update`, a pinned record of this very
                // definition stays as it was (tree included) when the registry cannot be used.
                if let Some(kept) = keepable {
                    self.warnings.push(format!(
                        "MCP server `{}`: {source}; its record is kept as it was ({}@{}{}{})",
                        server.name,
                        request.name,
                        kept.version.as_deref().unwrap_or_default(),
                        kept.registry
                            .as_deref()
                            .map(|r| format!(" from {r}"))
                            .unwrap_or_default(),
                        if kept.tree.is_empty() {
                            String::new()
                        } else {
                            format!(", {} locked packages", kept.tree.len())
                        }
                    ));
                    return Ok(Some(carried(kept)));
                }
                let unreachable = source.is_unreachable();
                if options.allow_unpinned {
                    record.allow_unpinned = true;
                    record.package = Some(request.name.clone());
                    record.registry = Some(registry);
                    record.reason = Some(format!("not pinned: {source}"));
                    return Ok(Some(record));
                }
                if options.tolerate_unreachable {
                    // `add`: a package's server never makes adding the package fail.
                    self.warnings.push(format!(
                    "MCP server `{}` was not pinned ({source}); it has no record and runs as written until `agentpack lock` can pin it",
                    server.name
                ));
                    return Ok(None);
                }
                let server = server.name.clone();
                return Err(if unreachable {
                    McpLockError::Unreachable {
                        server,
                        cause: source,
                    }
                } else {
                    McpLockError::Registry {
                        server,
                        cause: source,
                    }
                });
            }
        };
        if let Some(p) = previous.filter(|p| {
            p.status == McpStatus::Pinned
                && p.package.as_deref() == Some(resolved.name.as_str())
                && p.version.as_deref() == Some(resolved.version.as_str())
                && p.registry.as_deref() == Some(registry.as_str())
        }) {
            if let Some(old) = p
                .integrity
                .as_deref()
                .filter(|old| *old != resolved.integrity)
            {
                return Err(McpLockError::IntegrityChanged {
                    server: server.name.clone(),
                    package: resolved.name,
                    version: resolved.version,
                    registry,
                    old: old.to_owned(),
                    new: resolved.integrity,
                });
            }
        }
        record.status = McpStatus::Pinned;
        record.package = Some(resolved.name.clone());
        record.version = Some(resolved.version.clone());
        record.integrity = Some(resolved.integrity.clone());
        record.registry = Some(registry.clone());
        if invocation.runner == NpmRunner::Npx {
            self.add_tree(&mut record, resolved.bin, &registry);
        }
        Ok(Some(record))
    }

    /// Locks the npx tree of a pinned record with npm; on any failure the record keeps its top-level
    /// pin and a warning says so.
    fn add_tree(&mut self, record: &mut McpRecord, bin: Option<String>, registry: &str) {
        let options = self.options;
        let warnings = &mut self.warnings;
        let package = record.package.clone().unwrap_or_default();
        let version = record.version.clone().unwrap_or_default();
        let keep = |why: String| {
            format!(
            "MCP server `{}`: the dependency tree of {package}@{version} was not locked ({why}); it keeps its top-level pin and starts through npx",
            record.name
        )
        };
        let Some(npm) = &options.npm else {
            warnings.push(keep("npm is not on PATH".into()));
            return;
        };
        let Some(bin) = bin else {
            warnings.push(keep("the package names no executable".into()));
            return;
        };
        match lock_tree(npm, registry, &package, &version) {
            Ok(tree) => {
                let top = format!("node_modules/{package}");
                let Some(top_entry) = tree.iter().find(|e| e.path == top) else {
                    warnings.push(keep(format!("npm's tree has no {top}")));
                    return;
                };
                if top_entry.version != version
                    || record.integrity.as_deref() != Some(top_entry.integrity.as_str())
                {
                    warnings.push(keep(format!(
                        "npm resolved {top} to {} with another integrity",
                        top_entry.version
                    )));
                    return;
                }
                record.tree_digest = Some(tree_digest(&tree));
                record.bin = Some(bin);
                record.tree = tree;
            }
            Err(error) => warnings.push(keep(error.to_string())),
        }
    }
}

/// One warning naming every server that runs unlocked because it has no current record (never
/// locked, or edited since): `agentpack lock` records them. Servers recorded unpinned are named
/// only when `lock` can still pin them (recorded with `allow_unpinned` because the registry was
/// unreachable: the next `lock` tries again). A server recorded unpinned by what its definition
/// says (a version range, a PyPI or docker server without an exact pin, `npx --package`) and an
/// unpinnable one are not named: `lock` cannot change them (`agentpack mcp list` shows them).
pub fn unlocked_warning(lock: &Lockfile, servers: &[MergedServer]) -> Option<String> {
    let warnings = unlocked_warnings(lock, servers);
    (!warnings.is_empty()).then(|| warnings.join("\n"))
}

/// [`unlocked_warning`], one message per kind (at most two).
pub fn unlocked_warnings(lock: &Lockfile, servers: &[MergedServer]) -> Vec<String> {
    let mut without = Vec::new();
    let mut retry = Vec::new();
    for server in servers {
        match lock.mcp_server(&server.name) {
            None => without.push(format!("{} (no record)", server.name)),
            Some(r) if !definition_matches(&r.definition, &server.server) => {
                without.push(format!("{} (edited since it was locked)", server.name));
            }
            Some(r) if r.status == McpStatus::Unpinned && r.allow_unpinned => {
                retry.push(server.name.clone());
            }
            Some(_) => {}
        }
    }
    let mut warnings = Vec::new();
    if !without.is_empty() {
        warnings.push(format!(
            "MCP servers without a current record in pack.lock run as written: {}; run `agentpack lock` to record them",
            without.join(", ")
        ));
    }
    if !retry.is_empty() {
        warnings.push(format!(
            "MCP servers recorded unpinned because their registry could not be reached run as written: {}; `agentpack lock` tries to pin them again",
            retry.join(", ")
        ));
    }
    warnings
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;
    use std::path::Path;

    use super::*;

    fn merged(name: &str, command: &str, args: &[&str]) -> MergedServer {
        MergedServer {
            name: name.into(),
            server: McpServer {
                command: Some(command.into()),
                args: args.iter().map(|s| (*s).to_owned()).collect(),
                ..McpServer::default()
            },
            source: McpSource::Manifest,
        }
    }

    #[test]
    fn offline_classes_need_no_registry() {
        let servers = vec![
            merged("range", "npx", &["-y", "pkg@^1.2"]),
            merged("py", "uvx", &["mcp-x==1.0"]),
            merged("local", "node", &["server.js"]),
        ];
        let out = record(&servers, &Lockfile::default(), &McpLockOptions::default()).unwrap();
        let by = |n: &str| out.records.iter().find(|r| r.name == n).unwrap();
        assert_eq!(by("range").status, McpStatus::Unpinned);
        assert!(by("range").reason.as_deref().unwrap().contains("range"));
        assert_eq!(by("py").status, McpStatus::Pinned);
        assert_eq!(by("py").version.as_deref(), Some("1.0"));
        assert_eq!(by("local").status, McpStatus::Unpinnable);
        assert_eq!(by("local").launcher, "command");
    }

    #[test]
    fn only_servers_lock_can_change_are_named_as_unlocked() {
        let servers = vec![
            merged("py", "uvx", &["mcp-x"]),
            merged("range", "npx", &["-y", "pkg@^1.2"]),
            merged("local", "node", &["server.js"]),
        ];
        let out = record(&servers, &Lockfile::default(), &McpLockOptions::default()).unwrap();
        let mut lock = Lockfile {
            mcp_servers: out.records,
            ..Lockfile::default()
        };
        assert_eq!(lock.mcp_server("py").unwrap().status, McpStatus::Unpinned);
        assert_eq!(unlocked_warnings(&lock, &servers), Vec::<String>::new());

        let mut all = servers.clone();
        all.push(merged("new", "npx", &["-y", "pkg@latest"]));
        all.push(merged("down", "npx", &["-y", "other@latest"]));
        let mut down = McpRecord::new(
            "down",
            "manifest",
            "npm",
            McpStatus::Unpinned,
            &definition_digest(&all[4].server),
        );
        down.allow_unpinned = true;
        lock.mcp_servers.push(down);
        let warnings = unlocked_warnings(&lock, &all);
        assert_eq!(warnings.len(), 2, "{warnings:?}");
        assert!(warnings[0].contains("new (no record)"), "{warnings:?}");
        assert!(warnings[0].contains("agentpack lock"), "{warnings:?}");
        assert!(!warnings[0].contains("py") && !warnings[0].contains("range"));
        assert!(warnings[1].contains("down") && warnings[1].contains("tries to pin them again"));
    }

    #[test]
    fn the_digest_never_depends_on_a_credential_and_old_digests_still_match() {
        let a = merged(
            "a",
            "npx",
            &["-y", "pkg@1.0.0", "--api-key", "k-one-AAAA", "--port", "1"],
        );
        let b = merged(
            "a",
            "npx",
            &["-y", "pkg@1.0.0", "--api-key", "k-two-BBBB", "--port", "1"],
        );
        assert_eq!(definition_digest(&a.server), definition_digest(&b.server));
        // What is not a credential still counts.
        let moved = merged(
            "a",
            "npx",
            &["-y", "pkg@1.0.0", "--api-key", "k-one-AAAA", "--port", "2"],
        );
        assert_ne!(
            definition_digest(&a.server),
            definition_digest(&moved.server)
        );
        // The digest is the one of the credential-free form, not of the definition as written.
        let legacy = a.server.definition_digest();
        assert_ne!(definition_digest(&a.server), legacy);
        assert!(definition_matches(&legacy, &a.server));
        assert!(!definition_matches(&legacy, &b.server));
        // URL userinfo: the same rule.
        let url = |u: &str| McpServer {
            server_type: Some("http".into()),
            url: Some(u.into()),
            ..McpServer::default()
        };
        let one = url("https://bot:pw-one@mcp.example.com/x");
        let two = url("https://bot:pw-two@mcp.example.com/x");
        assert_eq!(definition_digest(&one), definition_digest(&two));
        assert_ne!(
            definition_digest(&one),
            definition_digest(&url("https://bot:pw-one@other.example.com/x"))
        );
        // Without credentials nothing changed: old locks stay current as they are.
        let plain = merged("p", "npx", &["-y", "pkg@1.0.0"]);
        assert_eq!(
            definition_digest(&plain.server),
            plain.server.definition_digest()
        );
    }

    #[test]
    fn a_record_of_an_older_lock_is_kept_and_rewritten_with_the_credential_free_digest() {
        let server = merged(
            "p",
            "npx",
            &["-y", "pkg@1.2.3", "--api-key", "k-secret-AAAA"],
        );
        let legacy = server.server.definition_digest();
        let mut old = Lockfile::default();
        let mut r = McpRecord::new("p", "manifest", "npm", McpStatus::Pinned, &legacy);
        r.package = Some("pkg".into());
        r.version = Some("1.2.3".into());
        r.integrity = Some("sha512-x".into());
        r.registry = Some(crate::npm::registry::PUBLIC_REGISTRY.to_owned());
        old.mcp_servers.push(r);
        assert!(current_record(&old, &server).is_some(), "still current");
        assert!(unlocked_warnings(&old, std::slice::from_ref(&server)).is_empty());
        // No registry is asked: the pin is kept, under the new digest.
        let outcome = record(
            std::slice::from_ref(&server),
            &old,
            &McpLockOptions::default(),
        )
        .unwrap();
        assert_eq!(outcome.records.len(), 1);
        assert_eq!(
            outcome.records[0].definition,
            definition_digest(&server.server)
        );
        assert_eq!(outcome.records[0].version.as_deref(), Some("1.2.3"));
    }

    #[test]
    fn env_never_changes_the_digest() {
        let a = merged("a", "npx", &["x"]);
        let mut b = a.clone();
        b.server.env.insert("TOKEN".into(), "secret".into());
        b.server
            .headers
            .insert("Authorization".into(), "Bearer s".into());
        assert_eq!(definition_digest(&a.server), definition_digest(&b.server));
    }

    #[test]
    fn pinned_launch_replaces_only_the_spec() {
        let server = merged("p", "npx", &["-y", "pkg@latest", "--flag"]);
        let mut lock = Lockfile::default();
        let mut r = McpRecord::new(
            "p",
            "manifest",
            "npm",
            McpStatus::Pinned,
            &definition_digest(&server.server),
        );
        r.package = Some("pkg".into());
        r.version = Some("1.2.3".into());
        lock.mcp_servers.push(r);
        let launches = launches_for(
            &lock,
            std::slice::from_ref(&server),
            Path::new("/ap"),
            &BTreeMap::new(),
        );
        assert_eq!(launches["p"].args, vec!["-y", "pkg@1.2.3", "--flag"]);
        let mut specs = BTreeMap::new();
        specs.insert("p".to_owned(), PathBuf::from("/s/mcp-exec.json"));
        let launches = launches_for(&lock, &[server], Path::new("/ap"), &specs);
        assert_eq!(launches["p"].command, "/ap");
        assert_eq!(
            launches["p"].args,
            vec!["mcp-exec", "--spec", "/s/mcp-exec.json", "--", "--flag"]
        );
    }
}
