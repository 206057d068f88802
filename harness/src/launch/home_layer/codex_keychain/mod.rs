//! Codex's login as the OS keychain holds it, read back as the `auth.json` Codex's file store parses.
//!
//! Codex keeps its login in the keychain (service `Codex Auth`) under an account derived from its
//! canonical `CODEX_HOME` ([`store_key`]), so a staged home would miss it. The Codex layer
//! materializes `$AGENTPACK_HOME/shared/codex/auth.json` from the entry of the real `~/.codex`
//! with [`auth_json_to_write`]. Two layouts exist, both read:
//!
//! ```text
//! <key>                                 legacy: the whole auth.json as one secret
//! <key>|v2|active                       v2: the active revision
//! <key>|v2|<rev>|manifest               {auth_mode, has_openai_api_key, has_tokens, has_account_id, last_refresh}
//! <key>|v2|<rev>|OPENAI_API_KEY         one entry per secret the manifest says is present
//! <key>|v2|<rev>|tokens.id_token        (also tokens.access_token, tokens.refresh_token, tokens.account_id)
//! ```
//!
//! The keychain is reached through [`Keychain`]; [`SecurityCli`] runs macOS's `security` tool.
//! This module never writes a file (the layer does), never prints, and never puts a secret value
//! into an error: errors name the keychain entry and say what is wrong with it.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

use serde::{Deserialize, Serialize};
use serde_json::Value;
use sha2::{Digest, Sha256};

/// The keychain service Codex stores its login under.
pub const KEYCHAIN_SERVICE: &str = "Codex Auth";

/// The exit status of `security` when the item does not exist (`errSecItemNotFound`).
const SECURITY_NOT_FOUND: i32 = 44;

/// Failures reading Codex's login from the keychain. None carries a secret value.
#[derive(Debug, thiserror::Error)]
pub enum KeychainError {
    #[error("cannot run {program}: {cause}")]
    Spawn {
        program: PathBuf,
        cause: std::io::Error,
    },
    #[error(
        "{program} cannot read the keychain entry {account:?} of {service:?} ({status}){detail}"
    )]
    Lookup {
        program: PathBuf,
        service: String,
        account: String,
        status: String,
        /// `: <first line of stderr>`, or nothing.
        detail: String,
    },
    #[error("the keychain entry {account:?} of {service:?} is not UTF-8 text")]
    NotText { service: String, account: String },
    #[error("the keychain entry {account:?} of \"Codex Auth\" is not what Codex writes: {reason}")]
    Malformed { account: String, reason: String },
    #[error(
        "the keychain entry {account:?} of \"Codex Auth\" is missing, though the manifest {manifest:?} says the login has its {field}"
    )]
    MissingEntry {
        account: String,
        manifest: String,
        field: &'static str,
    },
}

/// The keychain's generic passwords, looked up by service and account.
pub trait Keychain {
    /// The secret of the generic password `service`/`account` as text; `None` when there is none.
    fn find_generic_password(
        &self,
        service: &str,
        account: &str,
    ) -> Result<Option<String>, KeychainError>;
}

/// The macOS keychain through `security find-generic-password -s <service> -a <account> -w`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SecurityCli {
    /// The `security` program (`/usr/bin/security`).
    pub program: PathBuf,
}

impl Keychain for SecurityCli {
    fn find_generic_password(
        &self,
        service: &str,
        account: &str,
    ) -> Result<Option<String>, KeychainError> {
        let output = Command::new(&self.program)
            .args(["find-generic-password", "-s", service, "-a", account, "-w"])
            .stdin(Stdio::null())
            .output()
            .map_err(|source| KeychainError::Spawn {
                program: self.program.clone(),
                cause: source,
            })?;
        if output.status.code() == Some(SECURITY_NOT_FOUND) {
            return Ok(None);
        }
        if !output.status.success() {
            let stderr = String::from_utf8_lossy(&output.stderr);
            let detail = stderr
                .lines()
                .map(str::trim)
                .find(|line| !line.is_empty())
                .map(|line| format!(": {line}"))
                .unwrap_or_default();
            return Err(KeychainError::Lookup {
                program: self.program.clone(),
                service: service.to_string(),
                account: account.to_string(),
                status: output.status.to_string(),
                detail,
            });
        }
        let mut text = String::from_utf8(output.stdout).map_err(|_| KeychainError::NotText {
            service: service.to_string(),
            account: account.to_string(),
        })?;
        if text.ends_with('\n') {
            text.pop();
        }
        Ok(Some(text))
    }
}

/// Codex's keychain account for a `CODEX_HOME`: `cli|` and the first 16 hex digits of the SHA-256
/// of the canonical path (the path as given when it cannot be canonicalized).
pub fn store_key(codex_home: &Path) -> String {
    let canonical = codex_home
        .canonicalize()
        .unwrap_or_else(|_| codex_home.to_path_buf());
    let digest = Sha256::digest(canonical.to_string_lossy().as_bytes());
    let hex = hex::encode(digest);
    format!("cli|{}", &hex[..16])
}

/// The v2 manifest, as Codex serializes it.
#[derive(Debug, Clone, PartialEq, Deserialize)]
struct Manifest {
    #[serde(default)]
    auth_mode: Option<Value>,
    has_openai_api_key: bool,
    has_tokens: bool,
    has_account_id: bool,
    #[serde(default)]
    last_refresh: Option<String>,
}

/// The entries of a v2 revision a manifest says the login has.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum V2Field {
    OpenaiApiKey,
    IdToken,
    AccessToken,
    RefreshToken,
    AccountId,
}

impl V2Field {
    /// The last part of the field's account name (`<key>|v2|<rev>|<suffix>`).
    pub fn suffix(self) -> &'static str {
        match self {
            V2Field::OpenaiApiKey => "OPENAI_API_KEY",
            V2Field::IdToken => "tokens.id_token",
            V2Field::AccessToken => "tokens.access_token",
            V2Field::RefreshToken => "tokens.refresh_token",
            V2Field::AccountId => "tokens.account_id",
        }
    }

    fn description(self) -> &'static str {
        match self {
            V2Field::OpenaiApiKey => "OpenAI API key",
            V2Field::IdToken => "ID token",
            V2Field::AccessToken => "access token",
            V2Field::RefreshToken => "refresh token",
            V2Field::AccountId => "account ID",
        }
    }
}

/// The `auth.json` Codex's file store reads (`AuthDotJson`): absent optional fields are left out,
/// the API key is `null` when there is none, as Codex writes it.
#[derive(Debug, Serialize)]
struct AuthDotJson {
    #[serde(skip_serializing_if = "Option::is_none")]
    auth_mode: Option<Value>,
    #[serde(rename = "OPENAI_API_KEY")]
    openai_api_key: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    tokens: Option<TokenData>,
    #[serde(skip_serializing_if = "Option::is_none")]
    last_refresh: Option<String>,
}

/// Codex's `TokenData`: the ID token is the raw JWT string.
#[derive(Debug, Serialize)]
struct TokenData {
    id_token: String,
    access_token: String,
    refresh_token: String,
    account_id: Option<String>,
}

/// A Codex login found in the keychain, before the secrets of a v2 revision are read.
#[derive(Debug, Clone, PartialEq)]
pub struct KeychainLogin {
    layout: Layout,
}

#[derive(Debug, Clone, PartialEq)]
enum Layout {
    Legacy {
        account: String,
        auth_json: String,
        last_refresh: Option<String>,
    },
    V2 {
        base_key: String,
        revision: String,
        manifest: Manifest,
    },
}

impl KeychainLogin {
    /// The login of the legacy layout: `auth_json` is the secret of the entry `account`.
    pub fn legacy(account: &str, auth_json: &str) -> Result<Self, KeychainError> {
        let auth_json = decode_json_secret(auth_json);
        let value: Value =
            serde_json::from_str(&auth_json).map_err(|e| KeychainError::Malformed {
                account: account.to_string(),
                reason: json_problem(&e),
            })?;
        let Value::Object(fields) = value else {
            return Err(KeychainError::Malformed {
                account: account.to_string(),
                reason: "not a JSON object".to_string(),
            });
        };
        let last_refresh = fields
            .get("last_refresh")
            .and_then(Value::as_str)
            .map(str::to_string);
        Ok(Self {
            layout: Layout::Legacy {
                account: account.to_string(),
                auth_json,
                last_refresh,
            },
        })
    }

    /// The login of the v2 layout: revision `revision` of `base_key`, whose manifest is `manifest`.
    pub fn v2(base_key: &str, revision: &str, manifest: &str) -> Result<Self, KeychainError> {
        let account = v2_account(base_key, revision, "manifest");
        let manifest: Manifest =
            serde_json::from_str(&decode_json_secret(manifest)).map_err(|e| {
                KeychainError::Malformed {
                    account,
                    reason: format!("the manifest is {}", json_problem(&e)),
                }
            })?;
        Ok(Self {
            layout: Layout::V2 {
                base_key: base_key.to_string(),
                revision: revision.to_string(),
                manifest,
            },
        })
    }

    /// When Codex last refreshed the login (RFC 3339), if it recorded it.
    pub fn last_refresh(&self) -> Option<&str> {
        match &self.layout {
            Layout::Legacy { last_refresh, .. } => last_refresh.as_deref(),
            Layout::V2 { manifest, .. } => manifest.last_refresh.as_deref(),
        }
    }

    /// The keychain entry that describes the login (the legacy entry or the v2 manifest).
    pub fn entry(&self) -> String {
        match &self.layout {
            Layout::Legacy { account, .. } => account.clone(),
            Layout::V2 {
                base_key, revision, ..
            } => v2_account(base_key, revision, "manifest"),
        }
    }

    /// The v2 fields the manifest says are present (nothing for the legacy layout).
    pub fn required_fields(&self) -> Vec<V2Field> {
        let Layout::V2 { manifest, .. } = &self.layout else {
            return Vec::new();
        };
        let mut fields = Vec::new();
        if manifest.has_openai_api_key {
            fields.push(V2Field::OpenaiApiKey);
        }
        if manifest.has_tokens {
            fields.extend([
                V2Field::IdToken,
                V2Field::AccessToken,
                V2Field::RefreshToken,
            ]);
            if manifest.has_account_id {
                fields.push(V2Field::AccountId);
            }
        }
        fields
    }

    /// The keychain account of a v2 field of this login (`None` for the legacy layout).
    pub fn field_account(&self, field: V2Field) -> Option<String> {
        match &self.layout {
            Layout::Legacy { .. } => None,
            Layout::V2 {
                base_key, revision, ..
            } => Some(v2_account(base_key, revision, field.suffix())),
        }
    }

    /// The `auth.json` of this login, from the secrets of [`Self::required_fields`] as looked up
    /// (pure). The legacy layout is its entry unchanged; a v2 field the manifest lists but
    /// `secrets` lacks is [`KeychainError::MissingEntry`].
    pub fn assemble(&self, secrets: &BTreeMap<V2Field, String>) -> Result<Vec<u8>, KeychainError> {
        let (base_key, revision, manifest) = match &self.layout {
            Layout::Legacy { auth_json, .. } => return Ok(auth_json.clone().into_bytes()),
            Layout::V2 {
                base_key,
                revision,
                manifest,
            } => (base_key, revision, manifest),
        };
        let take = |field: V2Field| -> Result<String, KeychainError> {
            secrets
                .get(&field)
                .cloned()
                .ok_or_else(|| KeychainError::MissingEntry {
                    account: v2_account(base_key, revision, field.suffix()),
                    manifest: v2_account(base_key, revision, "manifest"),
                    field: field.description(),
                })
        };
        let openai_api_key = if manifest.has_openai_api_key {
            Some(take(V2Field::OpenaiApiKey)?)
        } else {
            None
        };
        let tokens = if manifest.has_tokens {
            Some(TokenData {
                id_token: take(V2Field::IdToken)?,
                access_token: take(V2Field::AccessToken)?,
                refresh_token: take(V2Field::RefreshToken)?,
                account_id: if manifest.has_account_id {
                    Some(take(V2Field::AccountId)?)
                } else {
                    None
                },
            })
        } else {
            None
        };
        let auth = AuthDotJson {
            auth_mode: manifest.auth_mode.clone().filter(|mode| !mode.is_null()),
            openai_api_key,
            tokens,
            last_refresh: manifest.last_refresh.clone(),
        };
        let mut text =
            serde_json::to_string_pretty(&auth).map_err(|e| KeychainError::Malformed {
                account: v2_account(base_key, revision, "manifest"),
                reason: json_problem(&e),
            })?;
        text.push('\n');
        Ok(text.into_bytes())
    }
}

fn v2_account(base_key: &str, revision: &str, suffix: &str) -> String {
    format!("{base_key}|v2|{revision}|{suffix}")
}

/// Where a JSON text is wrong, without quoting it (serde's messages may quote a value).
fn json_problem(error: &serde_json::Error) -> String {
    use serde_json::error::Category;
    let what = match error.classify() {
        Category::Io => "unreadable",
        Category::Syntax | Category::Eof => "not valid JSON",
        Category::Data => "JSON of an unexpected shape",
    };
    format!("{what} (line {}, column {})", error.line(), error.column())
}

/// `security -w` prints a secret that is not printable text as hex; a JSON entry never starts
/// with a hex digit, so one that is all hex and decodes to text starting with `{` is decoded.
fn decode_json_secret(secret: &str) -> String {
    let trimmed = secret.trim();
    if !trimmed.starts_with('{') && trimmed.len() % 2 == 0 && !trimmed.is_empty() {
        if let Ok(bytes) = hex::decode(trimmed) {
            if let Ok(text) = String::from_utf8(bytes) {
                if text.trim_start().starts_with('{') {
                    return text;
                }
            }
        }
    }
    secret.to_string()
}

/// Finds the Codex login of `codex_home` in the keychain: the v2 layout when an active revision
/// is recorded, else the legacy entry. `None` when Codex has no login there.
pub fn find_login(
    keychain: &dyn Keychain,
    codex_home: &Path,
) -> Result<Option<KeychainLogin>, KeychainError> {
    let key = store_key(codex_home);
    let active = format!("{key}|v2|active");
    if let Some(revision) = keychain.find_generic_password(KEYCHAIN_SERVICE, &active)? {
        let revision = revision.trim();
        let manifest_account = v2_account(&key, revision, "manifest");
        let manifest = keychain
            .find_generic_password(KEYCHAIN_SERVICE, &manifest_account)?
            .ok_or_else(|| KeychainError::MissingEntry {
                account: manifest_account.clone(),
                manifest: manifest_account.clone(),
                field: "manifest",
            })?;
        return KeychainLogin::v2(&key, revision, &manifest).map(Some);
    }
    match keychain.find_generic_password(KEYCHAIN_SERVICE, &key)? {
        Some(auth_json) => KeychainLogin::legacy(&key, &auth_json).map(Some),
        None => Ok(None),
    }
}

/// Reads the secrets `login` needs from the keychain and assembles its `auth.json`.
pub fn read_auth_json(
    keychain: &dyn Keychain,
    login: &KeychainLogin,
) -> Result<Vec<u8>, KeychainError> {
    let mut secrets = BTreeMap::new();
    for field in login.required_fields() {
        let Some(account) = login.field_account(field) else {
            continue;
        };
        if let Some(secret) = keychain.find_generic_password(KEYCHAIN_SERVICE, &account)? {
            secrets.insert(field, secret);
        }
    }
    login.assemble(&secrets)
}

/// Whether a keychain login refreshed at `keychain_last_refresh` replaces the shared `auth.json`
/// whose text is `shared` (`None`: there is none). It does when the file is missing or is not a
/// JSON object Codex could use, and when both record a refresh and the keychain's is strictly
/// newer (a new login in native Codex wins; a refresh Codex wrote into the file is kept).
pub fn keychain_is_newer(keychain_last_refresh: Option<&str>, shared: Option<&str>) -> bool {
    let Some(Value::Object(fields)) = shared.and_then(|text| serde_json::from_str(text).ok())
    else {
        return true;
    };
    let shared_refresh = fields
        .get("last_refresh")
        .and_then(Value::as_str)
        .and_then(parse_rfc3339);
    match (
        keychain_last_refresh.and_then(parse_rfc3339),
        shared_refresh,
    ) {
        (Some(keychain), Some(shared)) => keychain > shared,
        _ => false,
    }
}

/// Whether `auth_json` (`None`: no file) is a JSON object, which Codex may log in with.
pub fn is_usable_auth_json(auth_json: Option<&str>) -> bool {
    auth_json
        .and_then(|text| serde_json::from_str::<Value>(text).ok())
        .is_some_and(|value| value.is_object())
}

/// The `auth.json` to write to the shared file, whose current text is `shared` (`None`: missing):
/// the keychain login of `codex_home` when there is one and [`keychain_is_newer`]; `None` when
/// there is no login or the file is as new. Secrets are read only when they will be written.
pub fn auth_json_to_write(
    keychain: &dyn Keychain,
    codex_home: &Path,
    shared: Option<&str>,
) -> Result<Option<Vec<u8>>, KeychainError> {
    let Some(login) = find_login(keychain, codex_home)? else {
        return Ok(None);
    };
    if !keychain_is_newer(login.last_refresh(), shared) {
        return Ok(None);
    }
    read_auth_json(keychain, &login).map(Some)
}

/// An RFC 3339 time as (seconds since the epoch, nanoseconds), for ordering. `None` when malformed.
pub fn parse_rfc3339(text: &str) -> Option<(i64, u32)> {
    let bytes = text.trim().as_bytes();
    let number = |range: std::ops::Range<usize>| -> Option<i64> {
        let part = bytes.get(range)?;
        if part.is_empty() || !part.iter().all(u8::is_ascii_digit) {
            return None;
        }
        std::str::from_utf8(part).ok()?.parse().ok()
    };
    let separator = |at: usize, allowed: &[u8]| bytes.get(at).is_some_and(|b| allowed.contains(b));
    if !(separator(4, b"-")
        && separator(7, b"-")
        && separator(10, b"Tt ")
        && separator(13, b":")
        && separator(16, b":"))
    {
        return None;
    }
    let (year, month, day) = (number(0..4)?, number(5..7)?, number(8..10)?);
    let (hour, minute, second) = (number(11..13)?, number(14..16)?, number(17..19)?);
    if !(1..=12).contains(&month) || !(1..=31).contains(&day) || hour > 23 || minute > 59 {
        return None;
    }
    if second > 60 {
        return None;
    }
    let mut at = 19;
    let mut nanos: u32 = 0;
    if bytes.get(at) == Some(&b'.') {
        at += 1;
        let start = at;
        while bytes.get(at).is_some_and(u8::is_ascii_digit) {
            at += 1;
        }
        if at == start {
            return None;
        }
        let mut scale = 100_000_000u32;
        for digit in &bytes[start..at.min(start + 9)] {
            nanos += u32::from(digit - b'0') * scale;
            scale /= 10;
        }
    }
    let offset = match bytes.get(at) {
        Some(b'Z' | b'z') if at + 1 == bytes.len() => 0,
        Some(sign @ (b'+' | b'-')) if at + 6 == bytes.len() && separator(at + 3, b":") => {
            let minutes = number(at + 1..at + 3)? * 60 + number(at + 4..at + 6)?;
            if *sign == b'+' {
                minutes * 60
            } else {
                -minutes * 60
            }
        }
        _ => return None,
    };
    let days = days_from_civil(year, month, day);
    Some((
        days * 86_400 + hour * 3_600 + minute * 60 + second - offset,
        nanos,
    ))
}

/// Days from 1970-01-01 to a proleptic Gregorian date (Howard Hinnant's algorithm).
fn days_from_civil(year: i64, month: i64, day: i64) -> i64 {
    let year = if month <= 2 { year - 1 } else { year };
    let era = year.div_euclid(400);
    let year_of_era = year - era * 400;
    let shifted_month = (month + 9) % 12;
    let day_of_year = (153 * shifted_month + 2) / 5 + day - 1;
    let day_of_era = year_of_era * 365 + year_of_era / 4 - year_of_era / 100 + day_of_year;
    era * 146_097 + day_of_era - 719_468
}

#[cfg(test)]
mod tests;
