//! The byte-stable `pack.lock` writer: [`Lockfile::to_toml_string`] and the canonical layout the
//! parent module documents.
//!
//! Owns: the line-by-line rendering and TOML basic-string quoting. Must never read files, sort
//! records on its own or accept anything but an already valid [`Lockfile`].

use std::fmt::Write as _;

use super::Lockfile;
use crate::validate::ContentHash;

impl Lockfile {
    /// The canonical text (see the module docs).
    pub fn to_toml_string(&self) -> String {
        let mut w = Writer::default();
        w.int("lockfile_version", i64::from(self.lockfile_version()));
        w.header("[meta]");
        w.string("name", &self.meta.name);
        w.string("version", &self.meta.version);
        if !self.config.is_empty() {
            w.header("[config]");
            w.array("disabled_plugins", &self.config.disabled_plugins);
        }
        for p in sorted_by(&self.packages, |p| &p.module) {
            w.header("[[packages]]");
            w.string("module", p.module.as_str());
            w.flag("direct", p.direct);
            w.string("kind", &p.kind);
            w.string("url", &p.url);
            w.string("owner", &p.owner);
            w.string("repo", &p.repo);
            if !p.path.is_empty() {
                w.string("path", &p.path);
            }
            w.string("commit", p.commit.as_str());
            w.string("cache_key", p.cache_key.as_str());
            w.opt(
                "content_hash",
                p.content_hash.as_ref().map(ContentHash::as_str),
            );
            w.opt("name", p.name.as_deref());
        }
        for s in sorted_by(&self.mcp_servers, |s| &s.name) {
            w.header("[[mcp_servers]]");
            w.string("name", &s.name);
            w.string("source", &s.source);
            w.string("launcher", &s.launcher);
            w.string("status", s.status.as_str());
            w.string("definition", &s.definition);
            w.opt("requested", s.requested.as_deref());
            w.opt("package", s.package.as_deref());
            w.opt("version", s.version.as_deref());
            w.opt("integrity", s.integrity.as_deref());
            w.opt("registry", s.registry.as_deref());
            w.opt("host", s.host.as_deref());
            w.opt("command", s.command.as_deref());
            w.flag("allow_unpinned", s.allow_unpinned);
            w.opt("reason", s.reason.as_deref());
            w.opt("bin", s.bin.as_deref());
            w.opt("tree_digest", s.tree_digest.as_deref());
            for t in sorted_by(&s.tree, |t| &t.path) {
                w.header("[[mcp_servers.tree]]");
                w.string("path", &t.path);
                w.string("version", &t.version);
                w.string("integrity", &t.integrity);
                if !t.os.is_empty() {
                    w.array("os", &t.os);
                }
                if !t.cpu.is_empty() {
                    w.array("cpu", &t.cpu);
                }
                w.flag("optional", t.optional);
            }
        }
        w.out
    }
}

/// `records` in the order of `key`, as the canonical layout lists them.
fn sorted_by<T, K: Ord + ?Sized>(records: &[T], key: fn(&T) -> &K) -> Vec<&T> {
    let mut sorted: Vec<&T> = records.iter().collect();
    sorted.sort_by(|a, b| key(a).cmp(key(b)));
    sorted
}

/// Quotes `s` as a TOML basic string, escaping `"`, `\` and control characters.
pub(crate) fn toml_basic_string(s: &str) -> String {
    let mut out = String::with_capacity(s.len() + 2);
    out.push('"');
    for c in s.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            '\u{8}' => out.push_str("\\b"),
            '\t' => out.push_str("\\t"),
            '\n' => out.push_str("\\n"),
            '\u{c}' => out.push_str("\\f"),
            '\r' => out.push_str("\\r"),
            c if c.is_control() && (c as u32) < 0x80 => {
                let _ = write!(out, "\\u{:04X}", c as u32);
            }
            c => out.push(c),
        }
    }
    out.push('"');
    out
}

#[derive(Default)]
struct Writer {
    out: String,
}

impl Writer {
    fn line(&mut self, text: &str) {
        self.out.push_str(text);
        self.out.push('\n');
    }
    fn header(&mut self, header: &str) {
        self.out.push('\n');
        self.line(header);
    }
    fn int(&mut self, key: &str, value: i64) {
        let _ = writeln!(self.out, "{key} = {value}");
    }
    fn string(&mut self, key: &str, value: &str) {
        let _ = writeln!(self.out, "{key} = {}", toml_basic_string(value));
    }
    fn opt(&mut self, key: &str, value: Option<&str>) {
        if let Some(v) = value {
            self.string(key, v);
        }
    }
    /// `key = true`, written only when it is.
    fn flag(&mut self, key: &str, value: bool) {
        if value {
            let _ = writeln!(self.out, "{key} = true");
        }
    }
    fn array(&mut self, key: &str, values: &[String]) {
        let items: Vec<String> = values.iter().map(|v| toml_basic_string(v)).collect();
        let _ = writeln!(self.out, "{key} = [{}]", items.join(", "));
    }
}
