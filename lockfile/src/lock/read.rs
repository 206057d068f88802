//! The strict `pack.lock` reader behind [`Lockfile::parse`](super::Lockfile::parse).
//!
//! Owns: table walking, the version rule, field-level validation and the "unknown field" refusal.
//! Must never write, fetch or guess: a value it cannot validate is a [`LockError`].

use std::path::Path;

use toml::{Table, Value};

use super::*;
use crate::manifest::key_segment;
use crate::module_id::ModuleId;
use crate::validate::{CacheKey, CommitSha, ContentHash};

pub(super) struct Reader<'a> {
    pub(super) path: &'a Path,
}

/// Removes and returns fields of one table, and reports what is left as unknown.
struct Fields<'t> {
    table: &'t Table,
    used: Vec<String>,
    at: String,
}

impl<'a> Reader<'a> {
    fn invalid(&self, key: &str, message: impl Into<String>) -> LockError {
        LockError::Invalid {
            path: self.path.to_path_buf(),
            key: key.to_owned(),
            message: message.into(),
        }
    }

    pub(super) fn read(&self, text: &str) -> Result<Lockfile, LockError> {
        let table: Table = text
            .parse()
            .map_err(|e: toml::de::Error| LockError::Syntax {
                path: self.path.to_path_buf(),
                message: e.to_string().trim_end().to_owned(),
            })?;
        if table.contains_key("skills") || table.contains_key("plugins") {
            return Err(LockError::OldLayout {
                path: self.path.to_path_buf(),
            });
        }
        let version_of = |key: &str| -> Result<Option<i64>, LockError> {
            match table.get(key) {
                None => Ok(None),
                Some(Value::Integer(n)) => Ok(Some(*n)),
                Some(other) => Err(LockError::UnsupportedVersion {
                    path: self.path.to_path_buf(),
                    found: other.to_string(),
                }),
            }
        };
        let snake = version_of("lockfile_version")?;
        let kebab = version_of("lockfile-version")?;
        let version = match (snake, kebab) {
            (Some(s), Some(k)) if s != k => {
                return Err(LockError::VersionKeysDisagree {
                    path: self.path.to_path_buf(),
                    snake: s,
                    kebab: k,
                })
            }
            (Some(v), _) | (None, Some(v)) => v,
            (None, None) => {
                return Err(self.invalid(
                    "lockfile_version",
                    "missing; a pack.lock starts with `lockfile_version = 3`",
                ))
            }
        };
        if !SUPPORTED_VERSIONS.contains(&version) {
            return Err(LockError::UnsupportedVersion {
                path: self.path.to_path_buf(),
                found: version.to_string(),
            });
        }

        let mut top = Fields::new(&table, String::new());
        top.take("lockfile_version");
        top.take("lockfile-version");
        let mut lock = Lockfile::default();
        let meta = top
            .take("meta")
            .ok_or_else(|| self.invalid("meta", "missing [meta] table with name and version"))?;
        let mut meta = self.fields(meta, "meta")?;
        lock.meta.name = self.req_string(&mut meta, "name")?;
        lock.meta.version = self.req_string(&mut meta, "version")?;
        self.finish(&meta, "[meta] holds name and version")?;

        if let Some(config) = top.take("config") {
            let mut config = self.fields(config, "config")?;
            if let Some(v) = config.take("disabled_plugins") {
                lock.config.disabled_plugins = self.strings(v, "config.disabled_plugins")?;
            }
            self.finish(&config, "[config] holds disabled_plugins")?;
        }

        lock.packages = self.records(
            top.take("packages"),
            "packages",
            |item, i| self.package(item, i),
            |package| package.module.to_string(),
            |module| format!("a second entry for {module}"),
        )?;
        lock.mcp_servers = self.records(
            top.take("mcp_servers"),
            "mcp_servers",
            |item, i| self.mcp(item, i),
            |server| server.name.clone(),
            |name| format!("a second record for server {name:?}"),
        )?;
        self.finish(
            &top,
            "a pack.lock holds lockfile_version, [meta], [config], [[packages]] and [[mcp_servers]]; upgrade agentpack if a newer version wrote it",
        )?;
        lock.check_integrity()?;
        Ok(lock)
    }

    fn fields<'t>(&self, value: &'t Value, at: &str) -> Result<Fields<'t>, LockError> {
        match value {
            Value::Table(t) => Ok(Fields::new(t, at.to_owned())),
            other => Err(self.invalid(at, format!("expected a table, found {}", other.type_str()))),
        }
    }

    /// The records of the `[[key]]` array (none when it is absent), in file order, each read by
    /// `read` with its index; a second record of the same `identity` is refused with the text
    /// `second` gives.
    fn records<T>(
        &self,
        array: Option<&Value>,
        key: &str,
        read: impl Fn(&Value, usize) -> Result<T, LockError>,
        identity: impl Fn(&T) -> String,
        second: impl Fn(&str) -> String,
    ) -> Result<Vec<T>, LockError> {
        let mut records = Vec::new();
        let Some(array) = array else {
            return Ok(records);
        };
        let mut seen = std::collections::BTreeSet::new();
        for (i, item) in self.array_of_tables(array, key)?.iter().enumerate() {
            let record = read(item, i)?;
            let id = identity(&record);
            if seen.contains(&id) {
                return Err(self.invalid(&format!("{key}[{i}]"), second(&id)));
            }
            seen.insert(id);
            records.push(record);
        }
        Ok(records)
    }

    fn array_of_tables<'t>(&self, value: &'t Value, at: &str) -> Result<&'t Vec<Value>, LockError> {
        match value {
            Value::Array(items) if items.iter().all(Value::is_table) => Ok(items),
            other => Err(self.invalid(
                at,
                format!(
                    "expected an array of tables ([[{at}]]), found {}",
                    other.type_str()
                ),
            )),
        }
    }

    fn finish(&self, fields: &Fields<'_>, allowed: &str) -> Result<(), LockError> {
        match fields.unknown() {
            Some(key) => {
                let at = if fields.at.is_empty() {
                    key_segment(key)
                } else {
                    format!("{}.{}", fields.at, key_segment(key))
                };
                Err(self.invalid(&at, format!("unknown field `{key}`; {allowed}")))
            }
            None => Ok(()),
        }
    }

    fn string(&self, value: &Value, at: &str) -> Result<String, LockError> {
        value.as_str().map(str::to_owned).ok_or_else(|| {
            self.invalid(at, format!("expected a string, found {}", value.type_str()))
        })
    }

    fn strings(&self, value: &Value, at: &str) -> Result<Vec<String>, LockError> {
        match value {
            Value::Array(items) => items.iter().map(|v| self.string(v, at)).collect(),
            other => Err(self.invalid(
                at,
                format!("expected an array of strings, found {}", other.type_str()),
            )),
        }
    }

    fn boolean(&self, value: &Value, at: &str) -> Result<bool, LockError> {
        value.as_bool().ok_or_else(|| {
            self.invalid(
                at,
                format!("expected true or false, found {}", value.type_str()),
            )
        })
    }

    fn req_string(&self, fields: &mut Fields<'_>, key: &str) -> Result<String, LockError> {
        let at = fields.key(key);
        match fields.take(key) {
            Some(v) => self.string(v, &at),
            None => Err(self.invalid(&at, "missing required field")),
        }
    }

    fn opt_string(&self, fields: &mut Fields<'_>, key: &str) -> Result<Option<String>, LockError> {
        let at = fields.key(key);
        fields.take(key).map(|v| self.string(v, &at)).transpose()
    }

    fn package(&self, item: &Value, i: usize) -> Result<LockedPackage, LockError> {
        let mut f = self.fields(item, &format!("packages[{i}]"))?;
        let module_text = self.req_string(&mut f, "module")?;
        let module = ModuleId::parse(&module_text)
            .map_err(|e| self.invalid(&f.key("module"), e.to_string()))?;
        f.at = format!("packages[{i}] ({module})");
        let direct = match f.take("direct") {
            Some(v) => self.boolean(v, &f.key("direct"))?,
            None => false,
        };
        let kind = self.req_string(&mut f, "kind")?;
        let url = self.req_string(&mut f, "url")?;
        let owner = self.req_string(&mut f, "owner")?;
        let repo = self.req_string(&mut f, "repo")?;
        let path = self.opt_string(&mut f, "path")?.unwrap_or_default();
        let commit_text = self.req_string(&mut f, "commit")?;
        let commit = CommitSha::parse(&commit_text)
            .map_err(|e| self.invalid(&f.key("commit"), e.to_string()))?;
        let key_text = self.req_string(&mut f, "cache_key")?;
        let cache_key = CacheKey::parse(&key_text)
            .map_err(|e| self.invalid(&f.key("cache_key"), e.to_string()))?;
        let content_hash = match f.take("content_hash") {
            None => None,
            Some(v) => {
                let found = match v.as_str() {
                    Some(s) => s.to_owned(),
                    None => v.to_string(),
                };
                Some(ContentHash::parse(&found).map_err(|_| {
                    IntegrityError::InvalidContentHash {
                        module: module.to_string(),
                        found,
                        lockfile: self.path.to_path_buf(),
                    }
                })?)
            }
        };
        let name = self.opt_string(&mut f, "name")?;
        self.finish(
            &f,
            "a package holds module, direct, kind, url, owner, repo, path, commit, cache_key, content_hash and name; upgrade agentpack if a newer version wrote it",
        )?;
        let package = LockedPackage {
            module,
            direct,
            kind,
            url,
            owner,
            repo,
            path,
            commit,
            cache_key,
            content_hash,
            name,
        };
        if package.is_oci() {
            if package.oci_pin().is_none() {
                return Err(self.invalid(
                    &f.key("url"),
                    format!("{:?} is not oci://<registry>/<repository>[:<tag>]@sha256:<64 hex> of this module", package.url),
                ));
            }
            if package.content_hash.is_none() {
                return Err(self.invalid(
                    &f.key("content_hash"),
                    "missing; an oci:// package is always locked with its content hash",
                ));
            }
        }
        Ok(package)
    }

    fn mcp(&self, item: &Value, i: usize) -> Result<McpRecord, LockError> {
        let mut f = self.fields(item, &format!("mcp_servers[{i}]"))?;
        let name = self.req_string(&mut f, "name")?;
        f.at = format!("mcp_servers[{i}] ({name})");
        let source = self.req_string(&mut f, "source")?;
        let launcher = self.req_string(&mut f, "launcher")?;
        let status_text = self.req_string(&mut f, "status")?;
        let status = McpStatus::parse(&status_text).ok_or_else(|| {
            self.invalid(
                &f.key("status"),
                format!("{status_text:?} is not a status; expected pinned, unpinned or unpinnable"),
            )
        })?;
        let definition = self.req_string(&mut f, "definition")?;
        let def_ok = definition.strip_prefix("sha256:").is_some_and(|h| {
            h.len() == 64
                && h.bytes()
                    .all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b))
        });
        if !def_ok {
            return Err(self.invalid(
                &f.key("definition"),
                format!("{definition:?} is not sha256:<64 lowercase hex digits>"),
            ));
        }
        let mut record = McpRecord::new(&name, &source, &launcher, status, &definition);
        record.requested = self.opt_string(&mut f, "requested")?;
        record.package = self.opt_string(&mut f, "package")?;
        record.version = self.opt_string(&mut f, "version")?;
        record.integrity = self.opt_string(&mut f, "integrity")?;
        record.registry = self.opt_string(&mut f, "registry")?;
        record.host = self.opt_string(&mut f, "host")?;
        record.command = self.opt_string(&mut f, "command")?;
        if let Some(v) = f.take("allow_unpinned") {
            record.allow_unpinned = self.boolean(v, &f.key("allow_unpinned"))?;
        }
        record.reason = self.opt_string(&mut f, "reason")?;
        record.bin = self.opt_string(&mut f, "bin")?;
        record.tree_digest = self.opt_string(&mut f, "tree_digest")?;
        if let Some(tree) = f.take("tree") {
            let at = f.key("tree");
            for (j, entry) in self.array_of_tables(tree, &at)?.iter().enumerate() {
                let mut t = self.fields(entry, &format!("{at}[{j}]"))?;
                let mut rec = TreeEntry {
                    path: self.req_string(&mut t, "path")?,
                    version: self.req_string(&mut t, "version")?,
                    integrity: self.req_string(&mut t, "integrity")?,
                    ..TreeEntry::default()
                };
                if let Some(v) = t.take("os") {
                    rec.os = self.strings(v, &t.key("os"))?;
                }
                if let Some(v) = t.take("cpu") {
                    rec.cpu = self.strings(v, &t.key("cpu"))?;
                }
                if let Some(v) = t.take("optional") {
                    rec.optional = self.boolean(v, &t.key("optional"))?;
                }
                self.finish(
                    &t,
                    "a tree record holds path, version, integrity, os, cpu and optional",
                )?;
                record.tree.push(rec);
            }
        }
        self.finish(
            &f,
            "an MCP record holds name, source, launcher, status, definition, requested, package, version, integrity, registry, host, command, allow_unpinned, reason, bin, tree_digest and [[mcp_servers.tree]]; upgrade agentpack if a newer version wrote it",
        )?;
        Ok(record)
    }
}

impl<'t> Fields<'t> {
    fn new(table: &'t Table, at: String) -> Self {
        Self {
            table,
            used: Vec::new(),
            at,
        }
    }

    fn take(&mut self, key: &str) -> Option<&'t Value> {
        let v = self.table.get(key)?;
        self.used.push(key.to_owned());
        Some(v)
    }

    fn key(&self, key: &str) -> String {
        if self.at.is_empty() {
            key.to_owned()
        } else {
            format!("{}.{key}", self.at)
        }
    }

    fn unknown(&self) -> Option<&'t str> {
        self.table
            .keys()
            .map(String::as_str)
            .find(|k| !self.used.iter().any(|u| u == k))
    }
}
