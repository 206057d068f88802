//! The one detector of credentials written into text that is not meant to hold them: URL userinfo
//! (`https://user:pass@host`) and credential-looking command-line arguments (`--api-key X`,
//! `--token=X`, `sk-...`), plus the redaction of URL userinfo for messages.
//!
//! Used by MCP rendering (a server's `url` and `args` that hold a credential are given at launch,
//! never staged), by eject (which refuses to write them) and by `env export` (which refuses to
//! share them). Pure; never prints. The rule is conservative and documented in `docs/src/mcp.md`:
//! it cannot find every secret an arbitrary string may hold, and it may call a harmless argument a
//! credential (which then only travels through the launcher instead of the staged file).
//!
//! A `${VAR}` reference is never a credential: `https://${USER}:${PASS}@host` and
//! `--token ${TOKEN}` hold none.

/// Lower-case words whose presence in a flag's or a key's name makes its value a credential.
pub const CREDENTIAL_WORDS: &[&str] = &[
    "token",
    "secret",
    "password",
    "passwd",
    "apikey",
    "api-key",
    "api_key",
    "access-key",
    "access_key",
    "private-key",
    "private_key",
    "credential",
    "auth",
];

/// Prefixes of well-known token formats; a word starting with one and at least 8 characters longer
/// than it is a credential.
pub const TOKEN_PREFIXES: &[&str] = &[
    "ghp_",
    "gho_",
    "ghs_",
    "ghu_",
    "ghr_",
    "github_pat_",
    "glpat-",
    "sk-",
    "sk_live_",
    "rk_live_",
    "xoxb-",
    "xoxp-",
    "xoxa-",
    "AKIA",
    "AIza",
    "npm_",
];

/// `value` is made of `${...}` references and whitespace only (and has at least one).
pub fn is_reference_only(value: &str) -> bool {
    let rest = strip_references(value);
    rest.trim().is_empty() && value.contains("${")
}

/// `value` without its `${...}` references.
pub fn strip_references(value: &str) -> String {
    crate::render::mcp::map_references(value, |_| Some(String::new()))
}

/// A flag whose name contains a [`CREDENTIAL_WORDS`] word: `--token`, `--api-key`, `-password`
/// (a `=value` part is ignored).
pub fn is_credential_flag(arg: &str) -> bool {
    let Some(name) = arg.strip_prefix('-') else {
        return false;
    };
    let name = name.trim_start_matches('-').to_ascii_lowercase();
    let name = name.split('=').next().unwrap_or_default();
    !name.is_empty() && CREDENTIAL_WORDS.iter().any(|word| name.contains(word))
}

/// A text that holds a credential by its own shape: `--token=abc` or `API_KEY=abc` (a credential
/// flag or key with a value that is not only references), `Bearer abc` (no reference), or a word
/// (split at `=`, `:` and whitespace) with a [`TOKEN_PREFIXES`] prefix and 8 more characters.
pub fn looks_like_credential(text: &str) -> bool {
    if let Some((key, value)) = text.split_once('=') {
        let key_is_credential = is_credential_flag(key)
            || (!key.starts_with('-')
                && CREDENTIAL_WORDS
                    .iter()
                    .any(|word| key.to_ascii_lowercase().contains(word)));
        if key_is_credential && !value.is_empty() && !is_reference_only(value) {
            return true;
        }
    }
    let lower = text.to_ascii_lowercase();
    if let Some(rest) = lower
        .strip_prefix("bearer ")
        .or_else(|| lower.strip_prefix("authorization: bearer "))
    {
        return !rest.trim().is_empty() && !text.contains("${");
    }
    text.split(|c: char| c == '=' || c == ':' || c.is_whitespace())
        .any(|word| {
            TOKEN_PREFIXES
                .iter()
                .any(|prefix| word.starts_with(prefix) && word.len() >= prefix.len() + 8)
        })
}

/// The authorities of every `scheme://authority` in `text`, as byte ranges of `text`.
fn authorities(text: &str) -> Vec<(usize, usize)> {
    let mut found = Vec::new();
    let mut offset = 0;
    while let Some(at) = text[offset..].find("://") {
        let start = offset + at + 3;
        let after = &text[start..];
        let end = start
            + after
                .find(|c: char| matches!(c, '/' | '?' | '#') || c.is_whitespace())
                .unwrap_or(after.len());
        found.push((start, end));
        offset = end;
    }
    found
}

/// `scheme://user:password@host` or `scheme://token@host` anywhere in `text`, with userinfo that
/// holds more than `${...}` references and the `:` between them.
pub fn has_url_credentials(text: &str) -> bool {
    authorities(text).into_iter().any(|(start, end)| {
        text[start..end]
            .rsplit_once('@')
            .is_some_and(|(userinfo, _)| {
                !strip_references(userinfo)
                    .trim_matches(|c: char| c == ':' || c.is_whitespace())
                    .is_empty()
            })
    })
}

/// `text` with the userinfo of every URL replaced by `***` (`https://***@host/x`), for messages.
/// References are redacted too: a message names no part of what precedes `@`.
pub fn redact_url_userinfo(text: &str) -> String {
    let mut out = String::new();
    let mut copied = 0;
    for (start, end) in authorities(text) {
        if let Some(at) = text[start..end].rfind('@') {
            out.push_str(&text[copied..start]);
            out.push_str("***");
            copied = start + at;
        }
    }
    out.push_str(&text[copied..]);
    out
}

/// The indexes of `args` that hold a credential: an argument with URL credentials or one that
/// [`looks_like_credential`], and the argument after a bare credential flag (`--token X`: `X`,
/// unless it starts with `-` or is only references).
pub fn credential_args(args: &[String]) -> Vec<usize> {
    let mut found = Vec::new();
    for (index, arg) in args.iter().enumerate() {
        let after_flag = index > 0 && {
            let flag = &args[index - 1];
            is_credential_flag(flag)
                && !flag.contains('=')
                && !arg.starts_with('-')
                && !is_reference_only(arg)
        };
        if after_flag || has_url_credentials(arg) || looks_like_credential(arg) {
            found.push(index);
        }
    }
    found
}

#[cfg(test)]
mod tests {
    use super::*;

    fn args(list: &[&str]) -> Vec<String> {
        list.iter().map(|s| s.to_string()).collect()
    }

    #[test]
    fn credentials_are_recognized() {
        assert!(looks_like_credential("--token=abc123"));
        assert!(looks_like_credential("GITHUB_TOKEN=abc"));
        assert!(looks_like_credential("ghp_abcdefghijklmnop"));
        assert!(looks_like_credential("sk-live-12345678"));
        assert!(looks_like_credential("Bearer abc.def"));
        assert!(!looks_like_credential("--token=${TOKEN}"));
        assert!(!looks_like_credential("-y"));
        assert!(!looks_like_credential(
            "@modelcontextprotocol/server-memory"
        ));
        assert!(!looks_like_credential("--port=8080"));
        assert!(!looks_like_credential("sk-short"));
        assert!(is_credential_flag("--api-key"));
        assert!(!is_credential_flag("--verbose"));
    }

    #[test]
    fn url_credentials_are_recognized_and_redacted() {
        assert!(has_url_credentials("https://user:token@example.com/x"));
        assert!(has_url_credentials("see https://tok@example.com"));
        assert!(!has_url_credentials("https://example.com/a@b"));
        assert!(!has_url_credentials("https://${USER}@example.com"));
        assert!(!has_url_credentials("npx pkg@1.2.3"));
        assert_eq!(
            redact_url_userinfo("x https://u:p@h.io/a@b and ftp://t@f/ https://plain/"),
            "x https://***@h.io/a@b and ftp://***@f/ https://plain/"
        );
        assert_eq!(
            redact_url_userinfo("https://a@b@host:1?q"),
            "https://***@host:1?q"
        );
        assert_eq!(redact_url_userinfo("no url"), "no url");
    }

    #[test]
    fn credential_arguments_by_index() {
        let list = args(&[
            "-y",
            "pkg@1.2.3",
            "--api-key",
            "SENTINEL",
            "--token=abc",
            "--password",
            "${PW}",
            "--auth",
            "--verbose",
            "sk-abcdefgh12",
            "https://u:p@h/x",
            "--secret=x",
            "next",
        ]);
        assert_eq!(credential_args(&list), vec![3, 4, 9, 10, 11]);
        assert!(credential_args(&args(&["--port", "8080", "server.js"])).is_empty());
    }

    #[test]
    fn references_are_not_inline_values() {
        assert!(is_reference_only("${TOKEN}"));
        assert!(is_reference_only("${A} ${B}"));
        assert!(!has_url_credentials("https://${USER}:${PASS}@example.com"));
        assert!(has_url_credentials("https://${USER}:pw@example.com"));
        assert!(!is_reference_only("abc"));
        assert!(!is_reference_only(""));
    }
}
