//! The one error type of the runtime.

use ollm_types::{ProviderError, TypesError};

/// What can go wrong in the runtime outside a running chat (a running chat reports errors
/// as [`crate::ChatEvent::Error`] events instead).
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum CoreError {
    /// No provider is registered under this name.
    #[error("no provider named {name:?} is registered (known: {known:?})")]
    UnknownProvider {
        /// The name asked for.
        name: String,
        /// The names that are registered.
        known: Vec<String>,
    },
    /// No default provider was set and none could be chosen.
    #[error("no default provider is set")]
    NoDefaultProvider,
    /// A tool mode's name was not one of `auto`, `native`, `react`, `constrained`.
    #[error("unknown tool mode {0:?} (expected auto, native, react or constrained)")]
    UnknownToolMode(String),
    /// A tool with this name is registered already.
    #[error("a tool named {0:?} is registered already")]
    DuplicateTool(String),
    /// A tool's parameter schema is not a valid JSON Schema.
    #[error("the parameter schema of tool {name:?} is invalid: {message}")]
    InvalidToolSchema {
        /// The tool.
        name: String,
        /// What the schema compiler said.
        message: String,
    },
    /// The request would not fit the model's context window; nothing was sent.
    #[error(
        "the request needs about {estimated} tokens but {model}'s context limit is {limit}; \
         nothing was sent"
    )]
    ContextOverflow {
        /// The model.
        model: String,
        /// The estimated prompt size in tokens.
        estimated: usize,
        /// The context limit in tokens.
        limit: usize,
    },
    /// A value broke an invariant of the types.
    #[error(transparent)]
    Types(#[from] TypesError),
    /// The provider failed.
    #[error(transparent)]
    Provider(#[from] ProviderError),
    /// A history could not be read or written as JSON (the raw text is kept).
    #[error("history is not valid JSON: {message}")]
    HistoryFormat {
        /// What the parser said.
        message: String,
        /// The text that failed to parse.
        raw: String,
    },
    /// An image could not be read.
    #[error("cannot read image {name}: {source}")]
    ImageUnreadable {
        /// What the image is called (its path).
        name: String,
        /// Why.
        source: std::io::Error,
    },
    /// An image is over the size limit ([`crate::image::MAX_IMAGE_BYTES`]).
    #[error("image {name} is {bytes} bytes; the limit is {max} bytes (20 MiB)")]
    ImageTooLarge {
        /// What the image is called (its path).
        name: String,
        /// Its size.
        bytes: u64,
        /// The limit.
        max: u64,
    },
    /// An image is not a PNG, JPEG, GIF or WebP (judged by its bytes, not its name).
    #[error("{name} is not a PNG, JPEG, GIF or WebP image")]
    ImageType {
        /// What the image is called (its path).
        name: String,
    },
    /// A coach rule's name was not one of [`crate::coach::Rule::ALL`]'s.
    #[error("unknown coach rule {name:?} (known: {known})")]
    UnknownRule {
        /// The name asked for.
        name: String,
        /// The known names, comma-separated.
        known: String,
    },
}
