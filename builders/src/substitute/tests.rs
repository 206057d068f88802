#![allow(clippy::unwrap_used)] // test code: a panic is a failure

use std::collections::BTreeMap;

use super::*;

/// A cache in memory: identity -> file contents, or a failure.
#[derive(Debug)]
struct Memory {
    name: &'static str,
    trees: BTreeMap<String, Result<String, SourceFailure>>,
    asked: Arc<Mutex<Vec<String>>>,
}

impl SubstituteSource for Memory {
    fn describe(&self) -> String {
        format!("oci://127.0.0.1/{}", self.name)
    }
    fn pull(&self, identity: &str, dest: &Path) -> Result<Option<Pulled>, SourceFailure> {
        self.asked
            .lock()
            .unwrap()
            .push(format!("{}:{identity}", self.name));
        match self.trees.get(identity) {
            None => Ok(None),
            Some(Err(failure)) => Err(failure.clone()),
            Some(Ok(content)) => {
                fs_err::create_dir_all(dest).unwrap();
                fs_err::write(dest.join("SKILL.md"), content).unwrap();
                Ok(Some(Pulled {
                    executables: BTreeSet::new(),
                    served_by: self.describe(),
                }))
            }
        }
    }
}

fn memory(
    name: &'static str,
    trees: &[(&str, Result<&str, SourceFailure>)],
    asked: &Arc<Mutex<Vec<String>>>,
) -> Box<dyn SubstituteSource> {
    Box::new(Memory {
        name,
        trees: trees
            .iter()
            .map(|(k, v)| ((*k).to_owned(), v.clone().map(str::to_owned)))
            .collect(),
        asked: Arc::clone(asked),
    })
}

fn verify_good(dir: &Path) -> Result<Verified, String> {
    let text = fs_err::read_to_string(dir.join("SKILL.md")).map_err(|e| e.to_string())?;
    Ok(if text == "good" {
        Verified::Matches
    } else {
        Verified::Mismatch(format!("hash-of-{text}"))
    })
}

#[test]
fn the_first_verified_tree_wins_and_a_mismatch_or_an_outage_falls_through_with_one_warning() {
    let dir = tempfile::tempdir().unwrap();
    let asked = Arc::new(Mutex::new(Vec::new()));
    let subs = Substituters::from_sources(vec![
        memory(
            "down",
            &[(
                "a",
                Err(SourceFailure::Unreachable("connection refused".into())),
            )],
            &asked,
        ),
        memory("bad", &[("a", Ok("evil")), ("b", Ok("evil"))], &asked),
        memory("good", &[("a", Ok("good"))], &asked),
    ]);
    let dest = dir.path().join("0");
    let got = subs
        .substitute("github.com/acme/x", "a", &dest, &verify_good)
        .unwrap();
    assert_eq!(got.served_by, "oci://127.0.0.1/good");
    assert_eq!(
        fs_err::read_to_string(dest.join("SKILL.md")).unwrap(),
        "good"
    );
    // Nothing of the refused tree is left beside it.
    let left: Vec<_> = fs_err::read_dir(dir.path()).unwrap().collect();
    assert_eq!(left.len(), 1);

    // b: the unreachable one is not asked again; the mismatch is refused; nobody has it.
    let dest_b = dir.path().join("1");
    assert!(subs
        .substitute("github.com/acme/y", "b", &dest_b, &verify_good)
        .is_none());
    assert!(!dest_b.exists());
    // Not asked again in this command once nobody served it.
    assert!(subs
        .substitute("github.com/acme/y", "b", &dest_b, &verify_good)
        .is_none());
    assert_eq!(
        *asked.lock().unwrap(),
        ["down:a", "bad:a", "good:a", "bad:b", "good:b"]
    );
    let warnings = subs.take_warnings();
    assert_eq!(warnings.len(), 4, "{warnings:#?}");
    assert!(
        warnings[0].contains("oci://127.0.0.1/down is unavailable"),
        "{}",
        warnings[0]
    );
    assert!(
        warnings[1].contains("refused github.com/acme/x from substituter oci://127.0.0.1/bad"),
        "{}",
        warnings[1]
    );
    assert!(warnings[1].contains("hash-of-evil") && warnings[1].contains("nothing was published"));
    assert!(warnings[2].contains("github.com/acme/y"));
    // good lacked b: one warning for its first miss, naming the tree and its tag.
    assert!(
        warnings[3]
            .contains("substituter oci://127.0.0.1/good has no copy of github.com/acme/y (tag b)"),
        "{}",
        warnings[3]
    );
    assert!(subs.take_warnings().is_empty());
}

#[test]
fn a_miss_warns_once_per_substituter_and_command() {
    let dir = tempfile::tempdir().unwrap();
    let asked = Arc::new(Mutex::new(Vec::new()));
    let subs = Substituters::from_sources(vec![
        memory("partial", &[("a", Ok("good"))], &asked),
        memory("empty", &[], &asked),
    ]);
    for (index, identity) in ["a", "b", "c"].iter().enumerate() {
        let _ = subs.substitute(
            &format!("module-{identity}"),
            identity,
            &dir.path().join(index.to_string()),
            &verify_good,
        );
    }
    let warnings = subs.take_warnings();
    assert_eq!(warnings.len(), 2, "{warnings:#?}");
    assert!(
        warnings[0].contains("oci://127.0.0.1/partial has no copy of module-b"),
        "{}",
        warnings[0]
    );
    assert!(
        warnings[1].contains("oci://127.0.0.1/empty has no copy of module-b")
            && warnings[1].contains("agentpack store push oci://127.0.0.1/empty"),
        "{}",
        warnings[1]
    );
    assert_eq!(
        *asked.lock().unwrap(),
        ["partial:a", "partial:b", "empty:b", "partial:c", "empty:c"]
    );
}

#[test]
fn a_refusal_names_the_tree_and_the_next_source_is_tried() {
    let dir = tempfile::tempdir().unwrap();
    let asked = Arc::new(Mutex::new(Vec::new()));
    let subs = Substituters::from_sources(vec![
        memory(
            "odd",
            &[(
                "a",
                Err(SourceFailure::Refused("media type \"x/y\"".into())),
            )],
            &asked,
        ),
        memory("good", &[("a", Ok("good"))], &asked),
    ]);
    let got = subs.substitute("mcp server fs", "a", &dir.path().join("t"), &verify_good);
    assert!(got.is_some());
    let warnings = subs.take_warnings();
    assert_eq!(warnings.len(), 1);
    assert!(
        warnings[0].contains("could not serve mcp server fs: media type"),
        "{}",
        warnings[0]
    );
}

#[test]
fn an_entry_that_is_not_an_oci_repository_names_where_it_was_written() {
    let entries = split_list("https://ghcr.io/acme/cache", "AGENTPACK_SUBSTITUTERS");
    let error = Substituters::from_entries(&entries, OciTransport::default()).unwrap_err();
    let text = error.to_string();
    assert!(
        text.contains("\"https://ghcr.io/acme/cache\" (from AGENTPACK_SUBSTITUTERS)"),
        "{text}"
    );
    let twice = split_list("oci://127.0.0.1:9/a oci://127.0.0.1:9/a", "x");
    let subs = Substituters::from_entries(&twice, OciTransport::default()).unwrap();
    assert_eq!(subs.describe(), ["oci://127.0.0.1:9/a"]);
}

#[test]
fn the_list_splits_on_commas_and_spaces() {
    let entries = split_list(
        " oci://a/b, oci://c/d  oci://e/f,,",
        "AGENTPACK_SUBSTITUTERS",
    );
    let addresses: Vec<&str> = entries.iter().map(|e| e.address.as_str()).collect();
    assert_eq!(addresses, ["oci://a/b", "oci://c/d", "oci://e/f"]);
    assert!(Substituters::none().is_empty());
}
