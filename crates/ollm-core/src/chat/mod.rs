//! The chat client and its turn loop.
//!
//! [`ChatClient::chat`] spawns one task per run that feeds a channel; the [`ChatRun`] the
//! caller holds is that channel as a stream plus a cancellation token. The code is laid
//! out as the run is: `client` (the [`ChatClient`]), `run` (the [`ChatRun`] stream and
//! the task that supervises a run), `settle` (one run's settings: the strategy and
//! `think`, decided here once, and the fallbacks that undo them), `turn` (the loop: a
//! `Run` value whose methods are one turn's steps) and `calls` (running the calls).
//! Below them, leaves that import none of them: `event` ([`ChatEvent`]), `config`
//! ([`ChatConfig`], [`ChatOptions`], [`CallMode`]), `reply` ([`ChatReply`], the one fold
//! of a run's events, which [`ChatClient::reply`] returns), `shared` (what a run shares
//! with its client, and the sink its events and records go through); the cost calibration is
//! `crate::context::calibrate`. This file only declares
//! and re-exports, so no module of the chat module imports another in a circle (`cargo
//! xtask tidy` checks it). A turn is:
//! 1. build the request from the history (system prompt, messages, tools as the
//!    `Strategy` offers them, options; `think` only when the model can think, or when
//!    its capabilities are unknown);
//! 2. check its size against the window ([`crate::context`] says where the window comes
//!    from): the provider's `count_tokens` when it answers, else `ceil(chars / 4)`; past
//!    the compaction threshold (80%) older turns are summarised (or, failing that,
//!    dropped) and a `Compacted` event says so; a warning at 90% or more, and a refusal
//!    (an `Error` event of kind `ContextOverflow`) over the window, before anything is
//!    sent;
//! 3. stream the reply, forwarding text (through the strategy's display filter), thinking
//!    and warnings as they arrive and queuing tool calls (`ToolCallStarted` as each
//!    arrives; calls read from text when the reply ends);
//! 4. after the stream ends, run all calls **concurrently** (one task each), emitting one
//!    `ToolResult` per call as each finishes;
//! 5. record the turn as the strategy says (natively: the assistant message with its
//!    calls, then one tool message per call in call order), emit `TurnComplete`, and
//!    start the next turn.
//!
//! The run ends when a reply has no calls (`Finish` with `stop` or `length`), at the turn
//! limit (`max_turns`), on an error (`Error`, then `Finish` with `error`) or on
//! cancellation (`Finish` with `cancelled`). `Finish` is always the last event and carries
//! the usage summed over the turns and the messages the run added to the history (the
//! prompt first), so a caller that saves a conversation never compares snapshots.
//!
//! # Decisions
//! - **History on cancel**: the unfinished turn is recorded if anything of it arrived:
//!   the partial text and the calls, each call answered by its real result when its tool
//!   had finished and by the placeholder [`CANCELLED_RESULT`] otherwise (and a
//!   `ToolResult` event says so), so calls and results stay 1:1. Running tools are
//!   aborted and no tool starts after the cancel.
//! - **How turns are recorded** is the strategy's decision ([`crate::strategy`]); this
//!   loop only appends what it returns. Native and constrained calls as an assistant message
//!   carrying the calls followed by one tool message per call (native replies keep only
//!   their prose, without call markup; constrained replies keep no text, since their JSON
//!   is a protocol, not an answer); ReAct turns as the model's
//!   own text followed by a user message of `Observation: <json>` lines, which is what a
//!   model without tool support can read. A ReAct or constrained reply that could not be
//!   read is recorded with the correction message that answers it.
//! - **A cut tool result** (one that would take more than its share of the window
//!   left, [`crate::context::bound`]): the `ToolResult` event carries the tool's whole
//!   output, sent as the tool finished (the user sees what the tool did, and results show
//!   as they arrive, before every call is done); the model reads the cut text, and the
//!   history (so `Finish`'s `added` and anything saved from it) holds exactly that, never
//!   the whole output. A `ToolOutputCut` warning says a result was cut.
//! - **History on error**: the failed turn records nothing; if no turn of the run was
//!   recorded, the prompt is removed too, so the client is as before and the same prompt
//!   can be sent again.
//! - **Capabilities**: `show_model` is asked once per model and cached per client; any
//!   error (including `Unsupported`) means "unknown": native tools are allowed and `think`
//!   is sent as asked. Only answers and `Unsupported` are cached; after a passing failure
//!   (connection, busy) the next run asks again.
//! - **Think** is decided here and nowhere else: known capabilities without `thinking`
//!   drop `think` with a warning; otherwise it is sent as asked, and adapters send what
//!   they are given.
//! - **Fallbacks**: when the server refuses native tools (`ToolsUnsupported`) in
//!   [`ToolMode::Auto`](crate::ToolMode::Auto), or refuses `think`
//!   (`ThinkingUnsupported`), before any output, the turn is retried with ReAct or
//!   without `think`, with a warning, and the client remembers it for that model
//!   (`settle.rs` applies both; the strategy says what it falls back to). The warning carries the server's hint, or names the
//!   server flags native tools need (`--jinja` for llama-server,
//!   `--enable-auto-tool-choice --tool-call-parser <name>` for vLLM).
//! - **Choosing the strategy** is explained: a [`ChatEvent::StrategyChosen`] says which
//!   strategy a run uses and why (asked for; the server reports tools, reports none, or
//!   cannot say; refused before; native calls keep coming back as text). The client
//!   learns per model ([`crate::strategy::Learned`]: refusals, native replies with
//!   structured calls and with text calls), and [`AutoRules`](crate::AutoRules) say how
//!   `Auto` weighs it.
//! - **Tool choice** ([`ChatConfig::tool_choice`]): native sends it as the request's
//!   `tool_choice`; ReAct and constrained offer no tools for `none`, only the named tool
//!   for a name, and for `required` or a name ask for a call (constrained by dropping the
//!   `final_answer` branch of its schema) and answer a first reply that answers instead
//!   with a correction. `required` and a name bind a run's replies only until its first
//!   call: afterwards the model must be able to answer, so later turns are `auto`. With
//!   `none`, calls the model makes anyway meet an empty registry (`Unknown tool`). A
//!   named tool that is not offered ends the run at once with a `BadRequest` error.
//! - **Small-model rules** (the repeat guard and its limit, the runaway and call-loop
//!   cuts, the calls per reply, the nudges, the tools context, greedy tool turns) are the
//!   coach's ([`crate::coach`]): each named, switched on its own in
//!   [`ChatConfig::coach`], asked at fixed points of a turn. Its nudges belong to the run
//!   that needed them: recorded while it runs, taken out of the history when it ends, so
//!   `Finish`'s `added` never holds one.
//! - **Generation cap**: every request carries `max_tokens` (the call's
//!   [`ChatOptions::max_tokens`], else the sampling options', else
//!   [`ChatConfig::max_tokens`], [`DEFAULT_MAX_TOKENS`] by default: about five minutes
//!   at 13 tokens/s, room for a long answer or a thinking model's reasoning), never more
//!   than the window leaves after the prompt's estimate (`compact.rs`; with no cap
//!   configured, exactly that); a reply cut there finishes as `length` with a
//!   `TokenLimit` warning. A reply the coach stops
//!   (`runaway-stop`) is recorded as far as it went, and ends the run with `Repetition`
//!   and a warning; its calls, if any, are answered [`STOPPED_RESULT`].
//! - **Per-call settings**: [`ChatOptions`] may set the model, the system prompt and the
//!   tools of one call; the client's settings stay for later calls, and a per-call system
//!   prompt is sent, never recorded.
//! - **Handing calls back** ([`CallMode::HandBack`]): the first reply with calls to run
//!   ends the run (`Finish` with `tool_calls`) instead of running them; the history keeps
//!   the prompt and the assistant message with those calls, and the caller owes one tool
//!   result per call before [`ChatClient::resume`]. This is the one case where calls and
//!   results are not 1:1 at the end of a run, by the caller's choice. Calls the strategy
//!   answers itself (unknown tool, unreadable) are answered and sent back to the model as
//!   in `Run` mode.
//! - **Tool timeouts**: each call ends at its tool's [`Tool::timeout`](crate::Tool::timeout),
//!   else [`ChatConfig::tool_timeout`] ([`DEFAULT_TOOL_TIMEOUT`], ten minutes), with an
//!   `Error: ...` result ([`ToolError::TimedOut`](crate::ToolError::TimedOut)); still
//!   exactly one result per call.
//! - Runs of one client are serialised: a second `chat` waits for the first to end.
//! - A panic anywhere in a run (provider, tool, this loop) becomes an `Error` event and a
//!   `Finish`; the client stays usable.

mod calls;
mod client;
mod compact;
mod config;
mod event;
mod reply;
mod run;
mod settle;
mod shared;
mod turn;

pub use crate::coach::MAX_CALLS_PER_REPLY;
pub use client::ChatClient;
pub use config::{CallMode, ChatConfig, ChatOptions, DEFAULT_MAX_TOKENS, DEFAULT_TOOL_TIMEOUT};
pub use event::{CANCELLED_RESULT, ChatEvent, STOPPED_RESULT};
pub use reply::{CallRecord, ChatReply};
pub use run::ChatRun;
