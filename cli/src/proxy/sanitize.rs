//! What may reach the proxy log: header maps without credential headers, and payload snippets
//! with key-looking strings replaced and cut at a byte limit.
//!
//! Pure functions only. The rule of this module is that nothing that authenticates a request
//! (a header named like a credential, a bearer token, an `sk-` key, a JSON field named like a
//! secret, or a value the request itself carried as a credential) ever comes out of it.

use hyper::HeaderMap;
use serde_json::{Map, Value};

/// What replaces a removed secret.
pub const REDACTED: &str = "[REDACTED]";

/// Whether a header carries credentials (by name). Matches `authorization`, `x-api-key`, `cookie`,
/// `set-cookie` and any name containing `auth`, `key`, `token`, `secret`, `password`, `session`,
/// `credential`, `cookie` or `signature`, except Claude Code's session id (an identifier that
/// authenticates nothing and ties log lines to a conversation).
pub fn is_credential_header(name: &str) -> bool {
    let name = name.to_ascii_lowercase();
    if name == "x-claude-code-session-id" {
        return false;
    }
    [
        "auth",
        "key",
        "token",
        "secret",
        "password",
        "passwd",
        "session",
        "credential",
        "cookie",
        "signature",
    ]
    .iter()
    .any(|word| name.contains(word))
}

/// The headers as a JSON object (name to value; repeated names joined with `, `), without
/// credential headers; remaining values are passed through [`redact`] as well.
pub fn sanitized_headers(headers: &HeaderMap) -> Map<String, Value> {
    let mut out = Map::new();
    for name in headers.keys() {
        if is_credential_header(name.as_str()) {
            continue;
        }
        let joined = headers
            .get_all(name)
            .iter()
            .map(|v| String::from_utf8_lossy(v.as_bytes()).into_owned())
            .collect::<Vec<_>>()
            .join(", ");
        out.insert(
            name.as_str().to_string(),
            Value::String(redact(&joined, &[])),
        );
    }
    out
}

/// The credential values a request carried (header values of credential headers, and the token
/// after `Bearer `), so that a snippet echoing them can be cleaned exactly.
pub fn credential_values(headers: &HeaderMap) -> Vec<String> {
    let mut values = Vec::new();
    for (name, value) in headers {
        if !is_credential_header(name.as_str()) {
            continue;
        }
        let text = String::from_utf8_lossy(value.as_bytes()).trim().to_string();
        if let Some((_, token)) = text.split_once(' ') {
            if token.len() >= 8 {
                values.push(token.trim().to_string());
            }
        }
        if text.len() >= 8 {
            values.push(text);
        }
    }
    // Longest first, so a value containing another is replaced whole.
    values.sort_by_key(|v| std::cmp::Reverse(v.len()));
    values.dedup();
    values
}

/// JSON field names whose string values are secrets.
fn is_secret_field(name: &str) -> bool {
    let name = name.to_ascii_lowercase().replace(['-', '_'], "");
    [
        "apikey",
        "authorization",
        "token",
        "accesstoken",
        "refreshtoken",
        "idtoken",
        "secret",
        "clientsecret",
        "password",
        "xapikey",
        "cookie",
    ]
    .contains(&name.as_str())
}

/// `text` with every known credential value, every `sk-…` key, every `Bearer …` token and the
/// string value of every JSON field named like a secret replaced by [`REDACTED`].
pub fn redact(text: &str, known: &[String]) -> String {
    let mut out = text.to_string();
    for value in known {
        if !value.is_empty() {
            out = out.replace(value.as_str(), REDACTED);
        }
    }
    let out = redact_prefixed_tokens(&out, "sk-", 8);
    let out = redact_after_word(&out, "bearer ");
    redact_secret_fields(&out)
}

fn is_token_char(c: char) -> bool {
    c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.' | '~' | '+' | '/' | '=')
}

/// Replaces `prefix` followed by at least `min` token characters (an API key such as
/// `sk-ant-api03-…`), keeping the prefix so the reader sees what kind of value was there.
fn redact_prefixed_tokens(text: &str, prefix: &str, min: usize) -> String {
    let mut out = String::with_capacity(text.len());
    let mut rest = text;
    while let Some(at) = rest.find(prefix) {
        let before_ok = rest[..at]
            .chars()
            .next_back()
            .is_none_or(|c| !c.is_ascii_alphanumeric());
        let after = &rest[at + prefix.len()..];
        let len = after
            .char_indices()
            .find(|(_, c)| !is_token_char(*c))
            .map_or(after.len(), |(i, _)| i);
        out.push_str(&rest[..at + prefix.len()]);
        if before_ok && len >= min {
            out.push_str(REDACTED);
            rest = &after[len..];
        } else {
            rest = after;
        }
    }
    out.push_str(rest);
    out
}

/// Replaces the token after `word` (case-insensitive), as in `Authorization: Bearer abc…`.
fn redact_after_word(text: &str, word: &str) -> String {
    let lower = text.to_ascii_lowercase();
    let mut out = String::with_capacity(text.len());
    let mut from = 0;
    while let Some(found) = lower[from..].find(word) {
        let start = from + found + word.len();
        let len = text[start..]
            .char_indices()
            .find(|(_, c)| !is_token_char(*c))
            .map_or(text.len() - start, |(i, _)| i);
        out.push_str(&text[from..start]);
        if len > 0 {
            out.push_str(REDACTED);
        }
        from = start + len;
    }
    out.push_str(&text[from..]);
    out
}

/// Replaces the string value of `"<secret-name>": "…"` pairs, in JSON text that may be cut short.
fn redact_secret_fields(text: &str) -> String {
    let bytes = text.as_bytes();
    let mut out = String::with_capacity(text.len());
    let mut copied = 0;
    let mut i = 0;
    while i < bytes.len() {
        if bytes[i] != b'"' {
            i += 1;
            continue;
        }
        // A JSON string starting at i: find its end.
        let Some(end) = string_end(bytes, i + 1) else {
            break;
        };
        let name = &text[i + 1..end];
        let mut j = end + 1;
        while j < bytes.len() && bytes[j].is_ascii_whitespace() {
            j += 1;
        }
        if j < bytes.len() && bytes[j] == b':' && is_secret_field(name) {
            j += 1;
            while j < bytes.len() && bytes[j].is_ascii_whitespace() {
                j += 1;
            }
            if j < bytes.len() && bytes[j] == b'"' {
                let value_end = string_end(bytes, j + 1).unwrap_or(bytes.len());
                out.push_str(&text[copied..=j]);
                out.push_str(REDACTED);
                copied = value_end;
                i = value_end + 1;
                continue;
            }
        }
        i = end + 1;
    }
    if copied < text.len() {
        out.push_str(&text[copied..]);
    }
    out
}

/// The index of the closing quote of a JSON string whose content starts at `from`.
fn string_end(bytes: &[u8], from: usize) -> Option<usize> {
    let mut k = from;
    while k < bytes.len() {
        match bytes[k] {
            b'\\' => k += 2,
            b'"' => return Some(k),
            _ => k += 1,
        }
    }
    None
}

/// A payload snippet for the log: at most `max` bytes (cut at a character boundary) of `bytes`
/// read as UTF-8 (invalid sequences replaced), redacted. Returns the snippet and whether it was
/// cut. Redaction runs on a window a little longer than `max`, before the cut, so a key that
/// straddles the limit is not left half visible.
pub fn snippet(bytes: &[u8], max: usize, known: &[String]) -> (String, bool) {
    let window = &bytes[..bytes.len().min(max.saturating_mul(2).saturating_add(512))];
    let redacted = redact(&String::from_utf8_lossy(window), known);
    let truncated = bytes.len() > window.len() || redacted.len() > max;
    if redacted.len() <= max {
        return (redacted, truncated);
    }
    let mut cut = max;
    while !redacted.is_char_boundary(cut) {
        cut -= 1;
    }
    (redacted[..cut].to_string(), true)
}

#[cfg(test)]
mod tests {
    use super::*;
    use hyper::header::HeaderValue;

    #[test]
    fn credential_headers_never_come_out() {
        let mut headers = HeaderMap::new();
        for (name, value) in [
            ("authorization", "Bearer sk-ant-oat01-SENTINEL-abcdef"),
            ("x-api-key", "sk-ant-api03-SENTINEL-abcdef"),
            ("cookie", "session=SENTINEL"),
            ("proxy-authorization", "Basic SENTINEL"),
            ("x-goog-api-key", "SENTINEL"),
            ("anthropic-version", "2023-06-01"),
            ("anthropic-beta", "a"),
            ("user-agent", "claude-cli/2.1"),
            ("x-claude-code-session-id", "c779cc1b"),
            ("x-session-token", "SENTINEL-abcdefgh"),
        ] {
            headers.append(name, HeaderValue::from_static(value));
        }
        headers.append("anthropic-beta", HeaderValue::from_static("b"));
        let clean = Value::Object(sanitized_headers(&headers)).to_string();
        assert!(!clean.contains("SENTINEL"), "{clean}");
        assert_eq!(
            clean,
            r#"{"anthropic-version":"2023-06-01","anthropic-beta":"a, b","user-agent":"claude-cli/2.1","x-claude-code-session-id":"c779cc1b"}"#
        );
        let known = credential_values(&headers);
        assert!(known.contains(&"sk-ant-oat01-SENTINEL-abcdef".to_string()));
        assert!(known.contains(&"sk-ant-api03-SENTINEL-abcdef".to_string()));
    }

    #[test]
    fn key_looking_strings_are_redacted() {
        let text = r#"{"api_key": "plain-secret", "note": "use sk-ant-api03-AbC_123-xyz please", "h": "Authorization: Bearer eyJhbGciOi.x.y", "password":"p\"w", "ok": "task-list", "model":"claude"}"#;
        let clean = redact(text, &["my-exact-value".to_string()]);
        assert_eq!(
            clean,
            r#"{"api_key": "[REDACTED]", "note": "use sk-[REDACTED] please", "h": "Authorization: Bearer [REDACTED]", "password":"[REDACTED]", "ok": "task-list", "model":"claude"}"#
        );
        assert_eq!(
            redact("x my-exact-value y", &["my-exact-value".to_string()]),
            "x [REDACTED] y"
        );
        // A JSON text cut in the middle of a secret value is still cleaned.
        assert_eq!(redact(r#"{"token": "abc"#, &[]), r#"{"token": "[REDACTED]"#);
    }

    #[test]
    fn snippets_stop_at_the_limit_on_a_character_boundary() {
        let (s, cut) = snippet("ééééé".as_bytes(), 5, &[]);
        assert_eq!((s.as_str(), cut), ("éé", true));
        let (s, cut) = snippet(b"short", 64, &[]);
        assert_eq!((s.as_str(), cut), ("short", false));
        let long = format!("{}sk-ant-api03-SENTINELSENTINEL", "a ".repeat(10));
        let (s, cut) = snippet(long.as_bytes(), 26, &[]);
        assert!(cut);
        assert!(!s.contains("SENTINEL"), "{s}");
        assert!(s.len() <= 26);
    }
}
