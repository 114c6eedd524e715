//! `--image PATH` and the chat's `/image PATH`: files read and checked through
//! `ollm_core::Image` (type sniffed, at most 20 MiB, bounded read) into the `(base64, MIME
//! type)` pairs `ChatOptions::images` carries.
//!
//! Decisions:
//! - A bad `--image` (missing, not an image, too large) is a usage error (exit 2) before
//!   anything starts: the command line named it.
//! - Whether the model may be sent images is core's rule (`ollm_core::image::accepts_images`);
//!   a one-shot run relies on core's refusal (`VisionUnsupported`, exit 1), and `/image`
//!   asks the same rule at once, so the chat refuses the attachment instead of the prompt.
//! - A chat path may be quoted or have escaped blanks (what a terminal's drag and drop
//!   types), and `~/` is the home folder.

use std::path::{Path, PathBuf};

use ollm_core::Image;

use crate::exit::CliError;

/// Reads every `--image`, in order.
pub(crate) fn load(paths: &[PathBuf]) -> Result<Vec<(String, String)>, CliError> {
    paths
        .iter()
        .map(|p| {
            Image::read(p)
                .map(Image::into_attachment)
                .map_err(|e| CliError::Usage(e.to_string()))
        })
        .collect()
}

/// What the chat says about an attached image: `photo.png (image/png, 34.0 KB)`.
pub(crate) fn describe(path: &Path, image: &Image) -> String {
    format!(
        "{} ({}, {})",
        path.display(),
        image.format().mime_type(),
        crate::models::human_bytes(image.bytes())
    )
}

/// The path a chat's `/image` argument names: quotes and `\ ` escapes removed, `~/`
/// expanded.
pub(crate) fn chat_path(arg: &str) -> PathBuf {
    let arg = arg.trim();
    let unquoted = ['"', '\'']
        .iter()
        .find_map(|q| arg.strip_prefix(*q).and_then(|a| a.strip_suffix(*q)))
        .map_or_else(|| arg.replace("\\ ", " "), str::to_owned);
    match (unquoted.strip_prefix("~/"), dirs::home_dir()) {
        (Some(rest), Some(home)) => home.join(rest),
        _ => PathBuf::from(unquoted),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn chat_paths_as_terminals_type_them() {
        let check = |arg: &str, expected: &str| assert_eq!(chat_path(arg), PathBuf::from(expected));
        check(" photo.png ", "photo.png");
        check("'my photo.png'", "my photo.png");
        check("\"my photo.png\"", "my photo.png");
        check("my\\ photo.png", "my photo.png");
        check("/abs/p.png", "/abs/p.png");
        if let Some(home) = dirs::home_dir() {
            assert_eq!(chat_path("~/p.png"), home.join("p.png"));
        }
    }

    #[test]
    fn bad_images_are_usage_errors() {
        let dir = tempfile::tempdir().unwrap();
        let text = dir.path().join("notes.png");
        std::fs::write(&text, "not an image").unwrap();
        for bad in [text, dir.path().join("missing.png")] {
            let err = load(std::slice::from_ref(&bad)).unwrap_err();
            assert_eq!(err.exit_code(), 2, "{bad:?}: {err}");
        }
        let png = dir.path().join("ok");
        std::fs::write(&png, b"\x89PNG\r\n\x1a\n....").unwrap();
        let loaded = load(&[png]).unwrap();
        assert_eq!(loaded[0].1, "image/png");
    }
}
