//! Tests of the release steps that are pure text and data: manifest bumps, the changelog
//! move, the publishing order, version rules and dates.

use super::*;

fn names(list: &[&str]) -> BTreeSet<String> {
    list.iter().map(|s| (*s).to_owned()).collect()
}

fn check_bump(before: &str, expected: &str) {
    let bumped = bump_manifest(before, &names(&["ollm-core", "ollm-types"]), "0.2.0");
    assert_eq!(bumped, expected);
}

#[test]
fn bumps_the_package_version_and_requirements_on_workspace_crates_only() {
    check_bump(
        "[workspace.package]\nversion = \"0.1.0\"\nedition = \"2024\"\n\n\
         [workspace.dependencies]\n\
         ollm-types = { path = \"crates/ollm-types\", version = \"0.1.0\" }\n\
         serde = { version = \"1\", features = [\"derive\"] }\n\
         ollm-core={path=\"crates/ollm-core\",version=\"0.1.0\"}\n",
        "[workspace.package]\nversion = \"0.2.0\"\nedition = \"2024\"\n\n\
         [workspace.dependencies]\n\
         ollm-types = { path = \"crates/ollm-types\", version = \"0.2.0\" }\n\
         serde = { version = \"1\", features = [\"derive\"] }\n\
         ollm-core={path=\"crates/ollm-core\",version=\"0.2.0\"}\n",
    );
}

#[test]
fn bumps_a_crates_own_version_and_table_style_requirements() {
    check_bump(
        "[package]\nname = \"ollm-mcp\"\nversion = \"0.1.0\"\nrust-version = \"1.85\"\n\
         [dependencies.ollm-core]\npath = \"../ollm-core\"\nversion = \"0.1.0\"\n\
         [dependencies.tokio]\nversion = \"1\"\n\
         [target.'cfg(unix)'.dependencies]\nollm-types = { version = \"0.1.0\", path = \"x\" }\n",
        "[package]\nname = \"ollm-mcp\"\nversion = \"0.2.0\"\nrust-version = \"1.85\"\n\
         [dependencies.ollm-core]\npath = \"../ollm-core\"\nversion = \"0.2.0\"\n\
         [dependencies.tokio]\nversion = \"1\"\n\
         [target.'cfg(unix)'.dependencies]\nollm-types = { version = \"0.2.0\", path = \"x\" }\n",
    );
}

#[test]
fn leaves_inherited_versions_path_only_deps_and_comments_alone() {
    let text = "[package]\nversion.workspace = true\n# version = \"0.1.0\"\n\
                [dev-dependencies]\nollm-core = { path = \"../x\" }\nollm-types.workspace = true\n\
                [features]\nversion = []\n";
    check_bump(text, text);
}

fn check_changelog(before: &str, expected: Result<&str, &str>) {
    check_changelog_with(before, Entries::Required, expected);
}

fn check_changelog_with(before: &str, entries: Entries, expected: Result<&str, &str>) {
    let got = release_changelog(before, "0.2.0", "2026-11-22", entries).map_err(|e| e.to_string());
    match expected {
        Ok(text) => assert_eq!(got.as_deref(), Ok(text)),
        Err(part) => {
            let err = got.expect_err("the changelog should be refused");
            assert!(err.contains(part), "{err}");
        }
    }
}

#[test]
fn the_unreleased_entries_move_under_the_version() {
    check_changelog(
        "# Changelog\n\n## [Unreleased]\n\n### Added\n- a thing\n\n## [0.1.0] - 2026-01-01\n\n- old\n",
        Ok(
            "# Changelog\n\n## [Unreleased]\n\n## [0.2.0] - 2026-11-22\n\n### Added\n- a thing\n\n\
            ## [0.1.0] - 2026-01-01\n\n- old\n",
        ),
    );
    check_changelog(
        "# Changelog\n\n## [Unreleased]\n### Fixed\n- b\n",
        Ok("# Changelog\n\n## [Unreleased]\n\n## [0.2.0] - 2026-11-22\n\n### Fixed\n- b\n"),
    );
}

#[test]
fn the_rehearsal_moves_an_empty_section_too() {
    check_changelog_with(
        "## [Unreleased]\n\n## [0.1.0] - 2026-01-01\n- old\n",
        Entries::MayBeEmpty,
        Ok("## [Unreleased]\n\n## [0.2.0] - 2026-11-22\n\n## [0.1.0] - 2026-01-01\n- old\n"),
    );
    check_changelog_with(
        "## [Unreleased]\n- old\n## [0.2.0] - x\n",
        Entries::MayBeEmpty,
        Err("already has"),
    );
}

#[test]
fn a_changelog_with_nothing_to_release_is_refused() {
    check_changelog("# Changelog\n", Err("no `## [Unreleased]`"));
    check_changelog(
        "## [Unreleased]\n\n## [0.1.0] - 2026-01-01\n- old\n",
        Err("empty"),
    );
    check_changelog("## [Unreleased]\n## [0.1.0] - x\n- old\n", Err("empty"));
    check_changelog(
        "## [Unreleased]\n- new\n## [0.2.0] - x\n- old\n",
        Err("already has"),
    );
}

fn member(name: &str, publish: bool, needs: &[&str]) -> Member {
    Member {
        name: name.into(),
        version: "0.1.0".into(),
        manifest: PathBuf::from(format!("{name}/Cargo.toml")),
        publish,
        needs: needs.iter().map(|s| (*s).to_owned()).collect(),
    }
}

#[test]
fn crates_are_published_after_what_they_need_and_unpublished_ones_are_left_out() {
    let members = [
        member("cli", true, &["core", "types"]),
        member("core", true, &["types"]),
        member("test-utils", false, &["core"]),
        member("types", true, &[]),
    ];
    assert_eq!(publish_order(&members).unwrap(), ["types", "core", "cli"]);
}

#[test]
fn a_published_crate_needing_an_unpublished_one_or_a_cycle_is_refused() {
    let err = publish_order(&[member("a", true, &["b"]), member("b", false, &[])]).unwrap_err();
    assert!(err.to_string().contains("publish = false"), "{err}");
    let err = publish_order(&[member("a", true, &["b"]), member("b", true, &["a"])]).unwrap_err();
    assert!(err.to_string().contains("cycle"), "{err}");
}

#[test]
fn versions_must_be_well_formed_and_move_forward() {
    for (current, next, ok) in [
        ("0.1.0", "0.2.0", true),
        ("0.1.0", "0.1.1", true),
        ("0.1.0", "1.0.0-rc.1", true),
        ("1.0.0-rc.1", "1.0.0", true),
        ("0.1.0", "0.1.0", false),
        ("0.2.0", "0.1.9", false),
        ("1.0.0", "1.0.0-rc.1", false),
        ("0.1.0", "0.2", false),
        ("0.1.0", "v0.2.0", false),
        ("0.1.0", "0.02.0", false),
        ("0.1.0", "0.2.0-", false),
    ] {
        assert_eq!(
            check_newer(current, next).is_ok(),
            ok,
            "{current} -> {next}"
        );
    }
    assert_eq!(next_patch("0.1.9").unwrap(), "0.1.10");
}

#[test]
fn arguments_name_the_version_and_the_modes() {
    let args =
        |list: &[&str]| parse_args(&list.iter().map(|s| (*s).to_owned()).collect::<Vec<_>>());
    assert_eq!(
        args(&["0.2.0", "--no-tag"]).unwrap(),
        Options {
            version: Some("0.2.0".into()),
            tag: false,
            dry_run: false
        }
    );
    assert!(args(&["--dry-run"]).unwrap().dry_run);
    assert!(args(&[]).is_err());
    assert!(args(&["0.2.0", "0.3.0"]).is_err());
    assert!(args(&["--yes"]).is_err());
    assert!(args(&["two"]).is_err());
}

#[test]
fn days_since_the_epoch_become_calendar_dates() {
    for (days, date) in [
        (0, (1970, 1, 1)),
        (-1, (1969, 12, 31)),
        (11_016, (2000, 2, 29)),
        (20_779, (2026, 11, 22)),
    ] {
        assert_eq!(civil_date(days), date, "{days}");
    }
}
