//! `ollm mcp add` and `ollm mcp remove`: editing `[mcp_servers.NAME]` in the config file.
//!
//! # Decisions
//! - The file is edited, not re-serialised (`toml_edit`): the user's comments, order and
//!   layout outside the one table survive.
//! - The edited text is checked the way `ollm` will read it (the whole file parsed, the
//!   servers settled) before anything is written, so an edit never leaves a file `ollm`
//!   refuses.
//! - Writes are atomic: a temporary file in the same folder, given the old file's mode
//!   (owner-only for a new file: a config can name secrets), then renamed over it. A
//!   crash leaves the old file or the new one, never half of one.
//! - Adding a name that exists, or removing one that does not, is a usage error: neither
//!   silently replaces nor silently succeeds.

use std::io::Write;
use std::path::Path;

use toml_edit::{Array, DocumentMut, Item, Table, value};

use crate::args::AddArgs;
use crate::exit::CliError;
use crate::mcp::entry::server_configs;

/// Adds the server to the file at `path` (creating it if need be).
pub(crate) fn add(path: &Path, args: &AddArgs) -> Result<(), CliError> {
    ollm_mcp::check_server_name(&args.name).map_err(|e| CliError::Usage(e.to_string()))?;
    let mut doc = read(path)?;
    let servers = servers_table(&mut doc, path)?;
    if servers.contains_key(&args.name) {
        return Err(CliError::Usage(format!(
            "MCP server {:?} is already in {}; `ollm mcp remove {}` first",
            args.name,
            path.display(),
            args.name
        )));
    }
    let mut table = Table::new();
    match (&args.url, args.command.split_first()) {
        (Some(url), _) => {
            table.insert("url", value(url.as_str()));
        }
        (None, Some((program, rest))) => {
            table.insert("command", value(program.as_str()));
            table.insert("args", value(rest.iter().collect::<Array>()));
        }
        (None, None) => {
            return Err(CliError::Usage(
                "give `--url URL` or `-- COMMAND ARGS...`".into(),
            ));
        }
    }
    servers.insert(&args.name, Item::Table(table));
    write(path, &doc.to_string())
}

/// Removes the server from the file at `path`.
pub(crate) fn remove(path: &Path, name: &str) -> Result<(), CliError> {
    let mut doc = read(path)?;
    let servers = servers_table(&mut doc, path)?;
    if servers.remove(name).is_none() {
        return Err(CliError::Usage(format!(
            "no MCP server {name:?} in {}",
            path.display()
        )));
    }
    if servers.is_empty() {
        doc.remove("mcp_servers");
    }
    write(path, &doc.to_string())
}

fn read(path: &Path) -> Result<DocumentMut, CliError> {
    let text = match std::fs::read_to_string(path) {
        Ok(text) => text,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => String::new(),
        Err(e) => {
            return Err(CliError::Usage(format!(
                "cannot read config file {}: {e}",
                path.display()
            )));
        }
    };
    text.parse::<DocumentMut>()
        .map_err(|e| CliError::Usage(format!("config file {}: {e}", path.display())))
}

/// The `mcp_servers` table, created (without a header of its own) if missing.
fn servers_table<'d>(doc: &'d mut DocumentMut, path: &Path) -> Result<&'d mut Table, CliError> {
    let item = doc.entry("mcp_servers").or_insert_with(|| {
        let mut t = Table::new();
        t.set_implicit(true);
        Item::Table(t)
    });
    item.as_table_mut().ok_or_else(|| {
        CliError::Usage(format!(
            "config file {}: `mcp_servers` is not a table",
            path.display()
        ))
    })
}

/// Checks `text` as `ollm` will read it, then replaces the file with it atomically.
fn write(path: &Path, text: &str) -> Result<(), CliError> {
    let file = crate::config::parse_file(text)
        .map_err(|e| CliError::Usage(format!("the edit would break {}: {e}", path.display())))?;
    server_configs(&file.mcp_servers)?;
    let dir = match path.parent() {
        Some(d) if !d.as_os_str().is_empty() => d.to_owned(),
        _ => std::path::PathBuf::from("."),
    };
    std::fs::create_dir_all(&dir)?;
    let mut temp = tempfile::NamedTempFile::new_in(&dir)?;
    temp.write_all(text.as_bytes())?;
    temp.as_file().sync_all()?;
    let permissions = match std::fs::metadata(path) {
        Ok(meta) => Some(meta.permissions()),
        Err(_) => owner_only(),
    };
    if let Some(permissions) = permissions {
        std::fs::set_permissions(temp.path(), permissions)?;
    }
    temp.persist(path)
        .map_err(|e| CliError::Other(e.error.into()))?;
    Ok(())
}

#[cfg(unix)]
fn owner_only() -> Option<std::fs::Permissions> {
    use std::os::unix::fs::PermissionsExt;
    Some(std::fs::Permissions::from_mode(0o600))
}

/// Elsewhere the temporary file keeps the permissions it was created with.
#[cfg(not(unix))]
fn owner_only() -> Option<std::fs::Permissions> {
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    enum Op<'a> {
        Add(&'a [&'a str]),
        Remove(&'a str),
    }

    /// Applies `op` to a file holding `before` (none when `None`) and compares the result.
    fn check(before: Option<&str>, op: Op<'_>, expected: Result<&str, &str>) {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("config.toml");
        if let Some(text) = before {
            std::fs::write(&path, text).unwrap();
        }
        let result = match op {
            Op::Add(words) => {
                use clap::Parser;
                #[derive(clap::Parser)]
                struct P {
                    #[command(flatten)]
                    a: AddArgs,
                }
                let mut argv = vec!["add"];
                argv.extend_from_slice(words);
                add(&path, &P::try_parse_from(argv).unwrap().a)
            }
            Op::Remove(name) => remove(&path, name),
        };
        let after = std::fs::read_to_string(&path).ok();
        match (result, expected) {
            (Ok(()), Ok(text)) => assert_eq!(after.as_deref(), Some(text)),
            (Err(e), Err(message)) => {
                assert!(matches!(e, CliError::Usage(_)), "{e:?}");
                assert!(e.to_string().contains(message), "{e}");
                assert_eq!(after.as_deref(), before, "a refused edit changed the file");
            }
            (got, _) => panic!("unexpected {got:?}"),
        }
    }

    const COMMENTED: &str = "# my settings\ndefault_provider = \"ollama\" # local\n";

    #[test]
    fn add_keeps_comments_and_writes_a_table() {
        check(
            Some(COMMENTED),
            Op::Add(&["fs", "--", "npx", "-y", "server-filesystem", "/tmp"]),
            Ok("# my settings\ndefault_provider = \"ollama\" # local\n\n\
                [mcp_servers.fs]\ncommand = \"npx\"\nargs = [\"-y\", \"server-filesystem\", \"/tmp\"]\n"),
        );
        check(
            None,
            Op::Add(&["web", "--url", "http://127.0.0.1:8000/mcp"]),
            Ok("[mcp_servers.web]\nurl = \"http://127.0.0.1:8000/mcp\"\n"),
        );
    }

    #[test]
    fn remove_keeps_the_rest() {
        let two = "# top\n[mcp_servers.a]\ncommand = \"x\" # keep\n\n[mcp_servers.b]\nurl = \"http://h\"\n";
        check(
            Some(two),
            Op::Remove("b"),
            Ok("# top\n[mcp_servers.a]\ncommand = \"x\" # keep\n"),
        );
        check(
            Some("default_provider = \"ollama\"\n[mcp_servers.a]\ncommand = \"x\"\n"),
            Op::Remove("a"),
            Ok("default_provider = \"ollama\"\n"),
        );
    }

    #[test]
    fn refused_edits_leave_the_file_alone() {
        let one = "[mcp_servers.a]\ncommand = \"x\"\n";
        check(Some(one), Op::Add(&["a", "--", "y"]), Err("already in"));
        check(Some(one), Op::Remove("b"), Err("no MCP server \"b\""));
        check(
            Some(one),
            Op::Add(&["a__b", "--", "y"]),
            Err("invalid MCP server name"),
        );
        check(Some("x = ["), Op::Remove("a"), Err("config file"));
        check(
            Some("mcp_servers = 3\n"),
            Op::Add(&["a", "--", "y"]),
            Err("not a table"),
        );
        // The result would not load: an unknown top-level key is refused by `ollm`.
        check(
            Some("bogus_key = 1\n"),
            Op::Add(&["a", "--", "y"]),
            Err("the edit would break"),
        );
    }

    #[cfg(unix)]
    #[test]
    fn the_mode_is_kept_and_a_new_file_is_owner_only() {
        use std::os::unix::fs::PermissionsExt;
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("config.toml");
        let args = AddArgs {
            name: "a".into(),
            url: None,
            command: vec!["x".into()],
        };
        add(&path, &args).unwrap();
        let mode = |p: &Path| std::fs::metadata(p).unwrap().permissions().mode() & 0o777;
        assert_eq!(mode(&path), 0o600);
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o640)).unwrap();
        remove(&path, "a").unwrap();
        assert_eq!(mode(&path), 0o640);
        let left: Vec<_> = std::fs::read_dir(dir.path()).unwrap().collect();
        assert_eq!(left.len(), 1, "no temporary file left behind");
    }
}
