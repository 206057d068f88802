//! Tests of the keychain item's manifest, key and the `security` CLI round trip (with a fake CLI).

#![allow(clippy::unwrap_used)]

use super::*;

const KEY: &str = "cli|0123456789abcdef";

fn manifest(has_key: bool, has_tokens: bool, has_account: bool, refresh: &str) -> String {
    serde_json::json!({
        "auth_mode": "chatgpt",
        "has_openai_api_key": has_key,
        "has_tokens": has_tokens,
        "has_account_id": has_account,
        "last_refresh": refresh,
    })
    .to_string()
}

#[test]
fn store_key_is_codex_s_hash_of_the_canonical_path() {
    let dir = tempfile::tempdir().unwrap();
    let canonical = dir.path().canonicalize().unwrap();
    let digest = hex::encode(Sha256::digest(canonical.to_string_lossy().as_bytes()));
    assert_eq!(store_key(dir.path()), format!("cli|{}", &digest[..16]));
    // A path that does not exist is hashed as given.
    let missing = Path::new("/nonexistent/agentpack/.codex");
    let digest = hex::encode(Sha256::digest(b"/nonexistent/agentpack/.codex"));
    assert_eq!(store_key(missing), format!("cli|{}", &digest[..16]));
    assert_eq!(store_key(missing).len(), "cli|".len() + 16);
}

#[test]
fn legacy_entry_is_written_unchanged() {
    let text = r#"{"OPENAI_API_KEY":null,"tokens":{"id_token":"a.b.c","access_token":"at","refresh_token":"rt","account_id":null},"last_refresh":"2025-01-02T03:04:05.123456Z"}"#;
    let login = KeychainLogin::legacy(KEY, text).unwrap();
    assert_eq!(login.last_refresh(), Some("2025-01-02T03:04:05.123456Z"));
    assert_eq!(login.entry(), KEY);
    assert!(login.required_fields().is_empty());
    assert_eq!(login.assemble(&BTreeMap::new()).unwrap(), text.as_bytes());
}

#[test]
fn legacy_entry_printed_as_hex_is_decoded() {
    let text = r#"{"OPENAI_API_KEY":"sk-x"}"#;
    let login = KeychainLogin::legacy(KEY, &hex::encode(text)).unwrap();
    assert_eq!(login.assemble(&BTreeMap::new()).unwrap(), text.as_bytes());
}

#[test]
fn legacy_entry_that_is_not_json_is_malformed_without_quoting_it() {
    let error = KeychainLogin::legacy(KEY, "sk-SECRET-not-json").unwrap_err();
    let message = error.to_string();
    assert!(matches!(error, KeychainError::Malformed { .. }));
    assert!(message.contains(KEY), "{message}");
    assert!(!message.contains("SECRET"), "{message}");
    let error = KeychainLogin::legacy(KEY, r#"["sk-SECRET"]"#).unwrap_err();
    assert!(!error.to_string().contains("SECRET"));
}

#[test]
fn v2_login_assembles_codex_s_auth_json() {
    let login = KeychainLogin::v2(
        KEY,
        "1700000000000000000",
        &manifest(true, true, true, "2025-01-02T03:04:05Z"),
    )
    .unwrap();
    assert_eq!(
        login.entry(),
        format!("{KEY}|v2|1700000000000000000|manifest")
    );
    assert_eq!(
        login.field_account(V2Field::RefreshToken).unwrap(),
        format!("{KEY}|v2|1700000000000000000|tokens.refresh_token")
    );
    let fields = login.required_fields();
    assert_eq!(fields.len(), 5);
    let secrets: BTreeMap<V2Field, String> = fields
        .iter()
        .map(|f| (*f, format!("value-{}", f.suffix())))
        .collect();
    let bytes = login.assemble(&secrets).unwrap();
    let parsed: Value = serde_json::from_slice(&bytes).unwrap();
    assert_eq!(
        parsed,
        serde_json::json!({
            "auth_mode": "chatgpt",
            "OPENAI_API_KEY": "value-OPENAI_API_KEY",
            "tokens": {
                "id_token": "value-tokens.id_token",
                "access_token": "value-tokens.access_token",
                "refresh_token": "value-tokens.refresh_token",
                "account_id": "value-tokens.account_id",
            },
            "last_refresh": "2025-01-02T03:04:05Z",
        })
    );
    // Codex's field order.
    let text = String::from_utf8(bytes).unwrap();
    let order: Vec<usize> = ["auth_mode", "OPENAI_API_KEY", "tokens", "last_refresh"]
        .iter()
        .map(|k| text.find(&format!("\"{k}\"")).unwrap())
        .collect();
    assert!(order.windows(2).all(|w| w[0] < w[1]), "{text}");
}

#[test]
fn v2_login_leaves_out_what_the_manifest_does_not_have() {
    let text = serde_json::json!({
        "auth_mode": null,
        "has_openai_api_key": true,
        "has_tokens": false,
        "has_account_id": false,
        "last_refresh": null,
    })
    .to_string();
    let login = KeychainLogin::v2(KEY, "7", &text).unwrap();
    assert_eq!(login.required_fields(), vec![V2Field::OpenaiApiKey]);
    assert_eq!(login.last_refresh(), None);
    let secrets = BTreeMap::from([(V2Field::OpenaiApiKey, "sk-1".to_string())]);
    let parsed: Value = serde_json::from_slice(&login.assemble(&secrets).unwrap()).unwrap();
    assert_eq!(parsed, serde_json::json!({"OPENAI_API_KEY": "sk-1"}));

    // Tokens without an account id: `account_id` is null, as Codex writes it.
    let login = KeychainLogin::v2(KEY, "7", &manifest(false, true, false, "x")).unwrap();
    let secrets: BTreeMap<V2Field, String> = login
        .required_fields()
        .into_iter()
        .map(|f| (f, "v".to_string()))
        .collect();
    let parsed: Value = serde_json::from_slice(&login.assemble(&secrets).unwrap()).unwrap();
    assert_eq!(parsed["OPENAI_API_KEY"], Value::Null);
    assert_eq!(parsed["tokens"]["account_id"], Value::Null);
}

#[test]
fn v2_field_the_manifest_lists_but_the_keychain_lacks_is_a_typed_error() {
    let login = KeychainLogin::v2(KEY, "7", &manifest(false, true, false, "x")).unwrap();
    let secrets = BTreeMap::from([
        (V2Field::IdToken, "SECRET-id".to_string()),
        (V2Field::AccessToken, "SECRET-access".to_string()),
    ]);
    let error = login.assemble(&secrets).unwrap_err();
    match &error {
        KeychainError::MissingEntry { account, field, .. } => {
            assert_eq!(account, &format!("{KEY}|v2|7|tokens.refresh_token"));
            assert_eq!(*field, "refresh token");
        }
        other => panic!("{other:?}"),
    }
    assert!(!error.to_string().contains("SECRET"));
}

#[test]
fn v2_manifest_that_is_not_codex_s_is_malformed() {
    let error = KeychainLogin::v2(KEY, "7", r#"{"has_tokens": "SECRET"}"#).unwrap_err();
    assert!(matches!(error, KeychainError::Malformed { .. }));
    let message = error.to_string();
    assert!(
        message.contains(&format!("{KEY}|v2|7|manifest")),
        "{message}"
    );
    assert!(!message.contains("SECRET"), "{message}");
}

#[test]
fn rfc3339_times_order_like_instants() {
    assert_eq!(parse_rfc3339("1970-01-01T00:00:00Z"), Some((0, 0)));
    assert_eq!(
        parse_rfc3339("2000-03-01T00:00:00Z"),
        Some((951_868_800, 0))
    );
    assert_eq!(
        parse_rfc3339("2025-01-02T03:04:05.5Z"),
        Some((1_735_787_045, 500_000_000))
    );
    assert_eq!(
        parse_rfc3339("2025-01-02T04:04:05+01:00"),
        parse_rfc3339("2025-01-02T03:04:05Z")
    );
    assert!(parse_rfc3339("2025-01-02T03:04:05Z") < parse_rfc3339("2025-01-02T03:04:05.1Z"));
    assert!(
        parse_rfc3339("2024-12-31T23:59:59.999999999Z") < parse_rfc3339("2025-01-01T00:00:00Z")
    );
    for bad in [
        "",
        "yesterday",
        "2025-13-01T00:00:00Z",
        "2025-01-02 03:04:05",
        "2025-01-02T03:04:05.Z",
    ] {
        assert_eq!(parse_rfc3339(bad), None, "{bad}");
    }
}

#[test]
fn keychain_wins_only_when_strictly_newer_or_the_file_is_unusable() {
    let file = |refresh: &str| format!(r#"{{"OPENAI_API_KEY":null,"last_refresh":"{refresh}"}}"#);
    let old = "2025-01-01T00:00:00Z";
    let new = "2025-06-01T00:00:00.000001Z";
    assert!(keychain_is_newer(Some(new), None));
    assert!(keychain_is_newer(None, None));
    assert!(keychain_is_newer(Some(new), Some(&file(old))));
    assert!(!keychain_is_newer(Some(old), Some(&file(new))));
    assert!(!keychain_is_newer(Some(old), Some(&file(old))));
    assert!(!keychain_is_newer(None, Some(&file(old))));
    assert!(!keychain_is_newer(
        Some(new),
        Some(r#"{"OPENAI_API_KEY":"sk"}"#)
    ));
    assert!(keychain_is_newer(Some(old), Some("")));
    assert!(keychain_is_newer(Some(old), Some("[]")));
}
