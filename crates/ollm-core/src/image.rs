//! Images for a prompt: read a file, check what it is, encode it for
//! [`crate::ChatOptions::images`], and the rule for which models may be sent one.
//!
//! # Decisions
//! - **The type is sniffed, never taken from the name**: PNG, JPEG, GIF and WebP by their
//!   magic bytes, the formats every vision server in reach (Ollama, llama.cpp's `mtmd`,
//!   vLLM) decodes. Anything else is [`CoreError::ImageType`], so a renamed PDF is refused
//!   here instead of failing inside the server's image decoder.
//! - **Bounded**: at most [`MAX_IMAGE_BYTES`] (20 MiB, the limit the hosted APIs use and
//!   far above what a local vision encoder resizes to anyway). The file's size is checked
//!   before reading and the read itself stops one byte past the cap, so a file that grows,
//!   a FIFO or `/dev/zero` can never be read whole.
//! - **Base64 through the `base64` crate** (standard alphabet, padded): what both wire
//!   formats carry (Ollama's `images`, OpenAI's `data:` URLs).
//! - **Which models may be sent images** is decided once, by [`accepts_images`]: a model
//!   whose capabilities the server reported must list `vision`; a model the server
//!   describes without capabilities (an older Ollama) or not at all (vLLM, Ollama's `/v1`,
//!   any server without `/api/show` or `/props`) is sent the image and the server judges.
//!   The chat refuses a run with images for a model that fails the rule
//!   (`VisionUnsupported`, before anything is sent); a front end may ask the same
//!   question earlier (the CLI's `/image` does).

use std::io::Read;
use std::path::Path;

use base64::Engine;
use ollm_types::{Capability, ModelInfo};

use crate::CoreError;

/// The largest image accepted, in bytes (20 MiB).
pub const MAX_IMAGE_BYTES: u64 = 20 * 1024 * 1024;

/// An image format the servers decode.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum ImageFormat {
    /// PNG.
    Png,
    /// JPEG.
    Jpeg,
    /// GIF (87a or 89a).
    Gif,
    /// WebP.
    WebP,
}

impl ImageFormat {
    /// The format of `bytes`, by their magic bytes; `None` for anything else.
    pub fn sniff(bytes: &[u8]) -> Option<Self> {
        if bytes.starts_with(b"\x89PNG\r\n\x1a\n") {
            Some(ImageFormat::Png)
        } else if bytes.starts_with(&[0xFF, 0xD8, 0xFF]) {
            Some(ImageFormat::Jpeg)
        } else if bytes.starts_with(b"GIF87a") || bytes.starts_with(b"GIF89a") {
            Some(ImageFormat::Gif)
        } else if bytes.len() >= 12 && bytes.starts_with(b"RIFF") && &bytes[8..12] == b"WEBP" {
            Some(ImageFormat::WebP)
        } else {
            None
        }
    }

    /// Its MIME type, for example `image/png`.
    pub fn mime_type(self) -> &'static str {
        match self {
            ImageFormat::Png => "image/png",
            ImageFormat::Jpeg => "image/jpeg",
            ImageFormat::Gif => "image/gif",
            ImageFormat::WebP => "image/webp",
        }
    }
}

/// A checked image, base64-encoded for the wire.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Image {
    format: ImageFormat,
    data: String,
    bytes: u64,
}

impl Image {
    /// Checks and encodes `bytes`; `name` is what errors call it (a path, say).
    pub fn from_bytes(name: &str, bytes: &[u8]) -> Result<Self, CoreError> {
        let size = bytes.len() as u64;
        if size > MAX_IMAGE_BYTES {
            return Err(too_large(name, size));
        }
        let format = ImageFormat::sniff(bytes).ok_or_else(|| CoreError::ImageType {
            name: name.to_owned(),
        })?;
        Ok(Image {
            format,
            data: base64::engine::general_purpose::STANDARD.encode(bytes),
            bytes: size,
        })
    }

    /// Reads, checks and encodes the image at `path`, reading at most
    /// [`MAX_IMAGE_BYTES`] + 1 bytes whatever the file claims.
    pub fn read(path: &Path) -> Result<Self, CoreError> {
        let name = path.display().to_string();
        let unreadable = |source| CoreError::ImageUnreadable {
            name: name.clone(),
            source,
        };
        let file = std::fs::File::open(path).map_err(unreadable)?;
        let meta = file.metadata().map_err(unreadable)?;
        if meta.is_dir() {
            return Err(unreadable(std::io::Error::other("it is a directory")));
        }
        if meta.len() > MAX_IMAGE_BYTES {
            return Err(too_large(&name, meta.len()));
        }
        let mut bytes = Vec::new();
        file.take(MAX_IMAGE_BYTES + 1)
            .read_to_end(&mut bytes)
            .map_err(unreadable)?;
        Image::from_bytes(&name, &bytes)
    }

    /// Its format.
    pub fn format(&self) -> ImageFormat {
        self.format
    }

    /// Its size before encoding, in bytes.
    pub fn bytes(&self) -> u64 {
        self.bytes
    }

    /// The `(base64 data, MIME type)` pair [`crate::ChatOptions::images`] takes.
    pub fn into_attachment(self) -> (String, String) {
        (self.data, self.format.mime_type().to_owned())
    }
}

fn too_large(name: &str, bytes: u64) -> CoreError {
    CoreError::ImageTooLarge {
        name: name.to_owned(),
        bytes,
        max: MAX_IMAGE_BYTES,
    }
}

/// Whether a model the server describes as `info` may be sent images (see the module
/// docs): yes unless its capabilities are known and lack `vision`.
pub fn accepts_images(info: Option<&ModelInfo>) -> bool {
    match info {
        Some(i) if !i.capabilities.is_empty() => i.has(&Capability::Vision),
        _ => true,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The smallest PNG header the sniffer accepts, then some bytes.
    const PNG: &[u8] = b"\x89PNG\r\n\x1a\n\0\0\0\rIHDR";

    #[test]
    fn formats_are_sniffed_from_magic_bytes() {
        let check = |bytes: &[u8], expected: Option<ImageFormat>| {
            assert_eq!(ImageFormat::sniff(bytes), expected, "{bytes:?}");
        };
        check(PNG, Some(ImageFormat::Png));
        check(b"\xFF\xD8\xFF\xE0\0\x10JFIF", Some(ImageFormat::Jpeg));
        check(b"GIF89a\x01\0", Some(ImageFormat::Gif));
        check(b"GIF87a\x01\0", Some(ImageFormat::Gif));
        check(b"RIFF\x24\0\0\0WEBPVP8 ", Some(ImageFormat::WebP));
        check(b"RIFF\x24\0\0\0WAVEfmt ", None);
        check(b"%PDF-1.7", None);
        check(b"\x89PNG", None);
        check(b"", None);
    }

    #[test]
    fn encoding_and_refusals() {
        let img = Image::from_bytes("a.png", PNG).unwrap();
        assert_eq!(img.bytes(), PNG.len() as u64);
        let (data, mime) = img.into_attachment();
        assert_eq!(mime, "image/png");
        assert_eq!(data, "iVBORw0KGgoAAAANSUhEUg==");
        let err = Image::from_bytes("notes.png", b"hello").unwrap_err();
        assert!(matches!(err, CoreError::ImageType { ref name } if name == "notes.png"));
    }

    #[test]
    fn files_are_read_bounded() {
        let dir = tempfile::tempdir().unwrap();
        let ok = dir.path().join("ok.bin");
        std::fs::write(&ok, PNG).unwrap();
        assert_eq!(Image::read(&ok).unwrap().format(), ImageFormat::Png);
        let big = dir.path().join("big.png");
        let f = std::fs::File::create(&big).unwrap();
        f.set_len(MAX_IMAGE_BYTES + 1).unwrap();
        let err = Image::read(&big).unwrap_err();
        assert!(
            matches!(err, CoreError::ImageTooLarge { bytes, max, .. }
                if bytes == MAX_IMAGE_BYTES + 1 && max == MAX_IMAGE_BYTES),
            "{err}"
        );
        let missing = Image::read(&dir.path().join("none.png")).unwrap_err();
        assert!(matches!(missing, CoreError::ImageUnreadable { .. }));
        let folder = Image::read(dir.path()).unwrap_err();
        assert!(matches!(folder, CoreError::ImageUnreadable { .. }));
    }

    #[test]
    fn only_models_known_to_lack_vision_are_refused() {
        let info = |caps: &[&str]| ModelInfo {
            capabilities: caps
                .iter()
                .map(|c| Capability::from((*c).to_owned()))
                .collect(),
            ..ModelInfo::default()
        };
        assert!(accepts_images(None));
        assert!(accepts_images(Some(&info(&[]))));
        assert!(accepts_images(Some(&info(&["completion", "vision"]))));
        assert!(!accepts_images(Some(&info(&["completion", "tools"]))));
    }
}
