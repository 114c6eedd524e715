//! The turn loop: a [`Run`] value holding what every step needs (what the run shares
//! with its client, its settled settings, its sink, what its calls did so far, its cancel
//! token), whose methods are the steps of a turn: [`Run::build_request`],
//! [`Run::check_budget`], [`Run::stream_reply`], then [`Run::conclude`], which reads the
//! reply, runs the calls and records the turn through the strategy.
//!
//! # Decisions
//! - No step branches on the strategy: it offers the tools, filters the display, reads
//!   the reply, says what to record, what it falls back to when the server refuses it
//!   and what a reply teaches about the model ([`crate::strategy`]). `cargo xtask tidy`
//!   keeps it so: no file of the chat module may name a `Strategy` variant.
//! - Fallbacks (ReAct for refused native tools, no `think` for refused thinking) are
//!   decided and applied by the settings (`settle.rs`), which settled what they undo;
//!   each removes its own cause, so the same turn is retried at most twice.
//! - Every small-model rule is the coach's ([`crate::coach`]): the loop asks it before a
//!   request, while a reply streams, after a reply and on calls, and does what it says;
//!   no step here decides for a small model on its own.
//! - A strategy may answer some of a turn's calls itself (a text call to a tool not on
//!   offer, a malformed one): those never run, get their `ToolResult` like the others,
//!   and are recorded in call order, so calls and results stay 1:1.

use std::sync::Arc;

use futures::StreamExt;
use ollm_types::{
    FinishReason, Message, ProviderError, ProviderErrorKind, ProviderEvent, ProviderRequest,
    ToolCall, ToolChoice, Usage, WarningKind,
};
use serde_json::Value;
use tokio_util::sync::CancellationToken;
use tracing::Instrument;

use super::calls::{Toolbox, answer_unfinished, execute_all};
use super::compact::{Fitted, Room, bound_results, fit};
use super::config::{CallMode, ChatOptions};
use super::event::{CANCELLED_RESULT, ChatEvent, STOPPED_RESULT};
use super::settle::{Fallback, Offer, RunSettings};
use super::shared::{Shared, Sink, lock};
use crate::coach::{
    CallPlan, Coach, Cut, MAX_CALLS_PER_REPLY, REPEAT_LIMIT, Route, Rule, Said, Source, Watch,
    canonical, cut_reply,
};
use crate::context::settle_window;
use crate::recover::{self, OfferedTools};
use crate::strategy::{Strategy, TextFilter, Turn, TurnOutcome};
use crate::tool::ToolOutcome;

/// How a turn ended.
enum TurnEnd {
    Continue,
    Finish(FinishReason),
    /// The run is stuck (`repeat-limit`) and the coach asks for one more reply, to answer
    /// (`answer-at-repeat-limit`); the run ends after it.
    LastWord,
}

/// Why a turn did not end.
enum TurnFailure {
    /// An `Error` event has been sent.
    Reported,
    /// The server refused something the run can do without; retry the turn without it.
    Fallback(Fallback),
    /// The turn is played again as it is: the server refused the constrained call of
    /// `routed-call`, which the run does without from then on.
    Again,
}

/// One run: waits for the client's earlier runs, records the prompt (none when the run
/// resumes the history as it is), settles the run's settings and runs turns until one
/// ends the run; `Finish` is always sent last.
pub(super) async fn run_chat(
    shared: Arc<Shared>,
    prompt: Option<String>,
    options: ChatOptions,
    cancel: CancellationToken,
    sink: Sink,
) {
    let _guard = tokio::select! {
        biased;
        _ = cancel.cancelled() => return sink.finish(&shared, FinishReason::Cancelled, Usage::default()),
        guard = shared.run_lock.lock() => guard,
    };
    let mut config = lock(&shared.config).clone();
    if let Some(model) = &options.model {
        config.model.clone_from(model);
    }
    if let Some(prompt) = prompt {
        let prompt = if options.images.is_empty() {
            Message::user(prompt)
        } else {
            Message::user_with_images(prompt, options.images.clone())
        };
        sink.record(&shared, vec![prompt]);
    }
    let info = tokio::select! {
        biased;
        _ = cancel.cancelled() => return sink.finish(&shared, FinishReason::Cancelled, Usage::default()),
        info = shared.model_info(&config.model) => info,
    };
    let Some(settings) = RunSettings::settle(&shared, &config, &options, info, &sink) else {
        sink.unrecord(&shared);
        return sink.finish(&shared, FinishReason::Error, Usage::default());
    };
    let coach = {
        let history = lock(&shared.history);
        Coach::seeded(config.coach.clone(), history.messages(), &settings.tools)
    }
    .for_requests(settings.tools_context.clone(), settings.tool_temperature);
    let mut run = Run {
        shared: Arc::clone(&shared),
        settings,
        sink,
        coach,
        cancel,
        turn: 1,
        total: Usage::default(),
        routed: false,
        last_word: None,
        given_route: options.route.clone(),
    };
    let reason = run.run_turns().await;
    run.finish(reason);
}

/// The result of a call made in the reply `answer-at-limit` asks for past the turn
/// limit: it never runs.
const PAST_LIMIT: &str = "not run: the run reached its turn limit; answer from the results above";

/// The result of a call made in the reply `answer-at-repeat-limit` asks for: it never runs.
const PAST_REPEAT_LIMIT: &str =
    "not run: the run repeated a call too often; answer from the results above";

/// One run past its settling: everything its steps read and change.
struct Run {
    shared: Arc<Shared>,
    settings: RunSettings,
    sink: Sink,
    /// The run's coach: what its calls did so far, what it asked of the model.
    coach: Coach,
    cancel: CancellationToken,
    /// The turn being played, from 1.
    turn: u32,
    /// Usage summed over the turns so far.
    total: Usage,
    /// Whether the turn being played is to call the tool the model chose (`routed-call`).
    routed: bool,
    /// The result every call of the reply being played gets instead of running: the
    /// run's last reply, which is to answer (`answer-at-limit`, `answer-at-repeat-limit`).
    last_word: Option<&'static str>,
    /// The `tool-or-none` choice made for this prompt before ([`ChatOptions::route`]),
    /// until the run plays it.
    given_route: Option<Route>,
}

impl Run {
    /// Runs turns until one ends the run; says why it ended.
    async fn run_turns(&mut self) -> FinishReason {
        while self.turn <= self.settings.max_turns {
            if let Some(reason) = self.route().await {
                return reason;
            }
            let span = tracing::info_span!("turn", n = self.turn);
            match self.play_turn().instrument(span).await {
                Ok(TurnEnd::Continue) => self.turn += 1,
                Ok(TurnEnd::Finish(reason)) => return reason,
                Ok(TurnEnd::LastWord) => {
                    self.turn += 1;
                    let (unrun, otherwise) = (PAST_REPEAT_LIMIT, FinishReason::Repetition);
                    return self.last_word(unrun, otherwise).await;
                }
                Err(TurnFailure::Fallback(fallback)) => {
                    self.settings.fall_back(&self.shared, &self.sink, fallback);
                }
                Err(TurnFailure::Again) => {}
                Err(TurnFailure::Reported) => return FinishReason::Error,
            }
        }
        self.answer_at_limit().await
    }

    /// Past the turn limit: one more reply to answer from the run's results, with no
    /// tools and no call run, when the coach asks for it (`answer-at-limit`); the run
    /// ends as that reply ends it, or at `MaxTurns`.
    async fn answer_at_limit(&mut self) -> FinishReason {
        let Some(said) = self.coach.at_limit() else {
            return FinishReason::MaxTurns;
        };
        if let Some(said) = said {
            self.say(said);
        }
        self.last_word(PAST_LIMIT, FinishReason::MaxTurns).await
    }

    /// The run's last reply, asked for by the coach to answer from the run's results (it
    /// withholds the tools): each of its calls is answered `unrun` and never runs; the
    /// run ends as the reply ends it, or with `otherwise`.
    async fn last_word(&mut self, unrun: &'static str, otherwise: FinishReason) -> FinishReason {
        self.last_word = Some(unrun);
        let span = tracing::info_span!("turn", n = self.turn);
        match self.play_turn().instrument(span).await {
            Ok(TurnEnd::Finish(reason)) => reason,
            Err(TurnFailure::Reported) => FinishReason::Error,
            _ => otherwise,
        }
    }

    /// Before a turn: the coach's `tool-or-none` choice, when it is due (before the
    /// first turn of a run that offers tools and may answer without them), and the read
    /// of a file the message names that may follow it (`read-named`); the reason the run
    /// ends when that read does. A failed or cancelled choice offers the tools.
    async fn route(&mut self) -> Option<FinishReason> {
        if self.settings.offer(&self.coach).choice.requires_call() {
            return None;
        }
        let tools = self.settings.choice_tools(&self.coach);
        if let Some(given) = self.given_route.take() {
            if self.coach.replay(&given, &tools) {
                self.tell_route(&given, "the choice made for this prompt before holds: ");
            }
            return None;
        }
        let prompt = lock(&self.shared.history).messages().last().cloned();
        let model = self.settings.model.clone();
        let request =
            (prompt.as_ref()).and_then(|prompt| self.coach.route_request(&model, prompt, &tools));
        let request = request?;
        let text = self.choose_unless_cancelled(request).await;
        let second = (prompt.as_ref()).and_then(|prompt| {
            self.coach
                .second_route_request(&model, prompt, &tools, text.as_deref())
        });
        let route = match second {
            Some((request, rule)) => {
                self.choose_again(request, rule, text.as_deref(), &tools)
                    .await
            }
            None => self.coach.routed(text.as_deref(), &tools),
        };
        if !self.settings.strategy.takes_routed_calls() {
            self.coach.routed_call_played(false);
        }
        tracing::debug!(reply = ?text, "coach: tool-or-none: the reply to the choice");
        self.tell_route(&route, "");
        let named = (prompt.as_ref()).and_then(|p| self.coach.overrule_none(&p.text(), &tools));
        if let Some(file) = named {
            let detail = format!("the message names {file}: the tools that only read are offered");
            self.sink.coached(Rule::NamedFile, None, detail, false);
        }
        let offered = self.settings.offer(&self.coach).tools.to_vec();
        let (read, rule) = prompt.and_then(|p| self.coach.named_read(&p.text(), &offered))?;
        self.read_named(read, rule).await
    }

    /// Runs `call`, the read `rule` (`read-named`, `read-source`) asked for, as if the
    /// model had made it before the first reply (its result cut to the room the first
    /// request leaves, as a reply's calls are to theirs); the reason the run ends when
    /// it does.
    async fn read_named(&mut self, mut call: ToolCall, rule: Rule) -> Option<FinishReason> {
        call.id = self.shared.mint_id();
        let offer = self.settings.offer(&self.coach);
        let room = match self.check_budget(&offer).await {
            Fitted::Send(_, room) => room,
            Fitted::Cancelled => return Some(FinishReason::Cancelled),
            Fitted::Refused => return Some(FinishReason::Error),
        };
        let path = call
            .arguments
            .values()
            .next()
            .and_then(Value::as_str)
            .unwrap_or_default();
        let detail = format!("the message names {path}: it is read before the first reply");
        self.sink.coached(rule, Some(&call.id), detail, false);
        let planned = Planned {
            text: "",
            calls: std::slice::from_ref(&call),
            answered: vec![None],
            room: &room,
        };
        match self.run_calls(planned, &[]).await {
            TurnEnd::Finish(reason) => Some(reason),
            TurnEnd::LastWord => Some(FinishReason::Repetition),
            TurnEnd::Continue => None,
        }
    }

    /// Keeps `route` as the client's latest choice ([`super::ChatClient::route`]) and
    /// tells the caller, the detail after `lead`.
    fn tell_route(&self, route: &Route, lead: &str) {
        *lock(&self.shared.route) = Some(route.clone());
        if let Some((rule, tool)) = self.coach.overruled().filter(|_| lead.is_empty()) {
            let detail = match (rule, route) {
                (Rule::AskedCommand, Route::Tools(Some(command))) => format!(
                    "the model chose {tool}; the message names a program {command} runs, \
                     so {command} is the choice"
                ),
                (Rule::NamedCommand, _) => format!(
                    "the model chose {tool}, the message names none of the programs it \
                     runs: no tool is offered this run"
                ),
                _ => format!(
                    "the model chose {tool}, a tool that writes a file, and the message \
                     names none: no tool is offered this run"
                ),
            };
            tracing::debug!("coach: {rule}: {detail}");
            self.sink.coached(rule, None, detail, false);
            return;
        }
        let detail = match route {
            Route::None => "the model chose no tool; none are offered this run".to_owned(),
            Route::Tools(Some(name)) if self.coach.routed_call().is_some() => {
                format!("the model chose {name}; its call is constrained to it")
            }
            Route::Tools(Some(name)) => format!("the model chose {name}"),
            Route::Tools(None) => "no clean choice; the tools are offered".to_owned(),
        };
        tracing::debug!("coach: tool-or-none: {lead}{detail}");
        self.sink
            .coached(Rule::ToolOrNone, None, format!("{lead}{detail}"), false);
    }

    /// The second question of `rule` (`general-check`, or the choice asked again with
    /// the tools in reverse order by `choice-both-orders` or `changes-both-orders`), read
    /// with the `first`; the caller is told when the second's `none` won.
    async fn choose_again(
        &mut self,
        request: ProviderRequest,
        rule: Rule,
        first: Option<&str>,
        tools: &[ollm_types::ToolSchema],
    ) -> Route {
        let second = self.choose_unless_cancelled(request).await;
        tracing::debug!(reply = ?second, %rule, "coach: the reply to the second choice");
        let route = self
            .coach
            .routed_twice(rule, first, second.as_deref(), tools);
        if route == Route::None {
            let detail = match rule {
                Rule::GeneralCheck => "asked what the message needs, the model said general",
                _ => "asked again with the tools in reverse order, the model chose no tool",
            };
            self.sink.coached(rule, None, detail.to_owned(), false);
        }
        route
    }

    /// [`Self::choose`], or `None` when the run is cancelled first.
    async fn choose_unless_cancelled(&mut self, request: ProviderRequest) -> Option<String> {
        let cancel = self.cancel.clone();
        tokio::select! {
            biased;
            _ = cancel.cancelled() => None,
            text = self.choose(request) => text,
        }
    }

    /// The text of the reply to the `tool-or-none` request, `None` when it failed.
    async fn choose(&mut self, request: ProviderRequest) -> Option<String> {
        let mut stream = self.shared.provider.chat(request);
        let mut text = String::new();
        while let Some(event) = stream.next().await {
            match event {
                ProviderEvent::TextDelta { text: delta } => text.push_str(&delta),
                ProviderEvent::Usage { usage } => self.total.accumulate(&usage),
                ProviderEvent::Finish { .. } => return Some(text),
                ProviderEvent::Error { error } => {
                    tracing::debug!(%error, "coach: tool-or-none: the request failed");
                    return None;
                }
                _ => {}
            }
        }
        None
    }

    /// Sends `Finish`; a failed run that recorded no turn takes the prompt back too.
    fn finish(&self, reason: FinishReason) {
        let recorded_turns = self.turn - 1;
        if reason == FinishReason::Error && recorded_turns == 0 {
            self.sink.unrecord(&self.shared);
        }
        let total = &self.total;
        tracing::info!(
            ?reason,
            prompt_tokens = total.prompt_tokens.unwrap_or_default(),
            completion_tokens = total.completion_tokens.unwrap_or_default(),
            "run finished"
        );
        self.sink.finish(&self.shared, reason, self.total);
    }

    /// One turn. The turn that is to call the tool the model chose (`routed-call`) is
    /// played under the constrained strategy, with that tool alone; whatever it leads
    /// to, later turns are the run's own.
    async fn play_turn(&mut self) -> Result<TurnEnd, TurnFailure> {
        if self.coach.routed_call().is_none() {
            return self.play_one().await;
        }
        let own = std::mem::replace(&mut self.settings.strategy, Strategy::routed_call());
        let calls = self.coach.call_count();
        self.routed = true;
        let played = self.play_one().await;
        self.settings.strategy = own;
        self.routed = false;
        let made = self.coach.call_count() > calls;
        if let Some(said) = self.coach.routed_call_played(made) {
            self.say(said);
        }
        match played {
            Err(TurnFailure::Fallback(_)) => {
                tracing::debug!("coach: routed-call: the server refused the constrained call");
                Err(TurnFailure::Again)
            }
            played => played,
        }
    }

    /// One turn: build the request, check its size, stream the reply, then conclude.
    async fn play_one(&mut self) -> Result<TurnEnd, TurnFailure> {
        let offer = self.settings.offer(&self.coach);
        let (request, mut room) = match self.check_budget(&offer).await {
            Fitted::Send(request, room) => (request, room),
            Fitted::Cancelled => return Ok(TurnEnd::Finish(FinishReason::Cancelled)),
            Fitted::Refused => return Err(TurnFailure::Reported),
        };
        let choice = offer.choice;
        let mut filter = self.settings.strategy.text_filter();
        let mut reply = match self.stream_reply(*request, filter.as_mut()).await? {
            Streamed::Done(reply) => reply,
            Streamed::Cancelled(partial) => {
                self.record_unfinished(&partial, CANCELLED_RESULT);
                return Ok(TurnEnd::Finish(FinishReason::Cancelled));
            }
        };
        // The server's count of this request is the truth: the results of its calls are
        // cut to the room it really left (compact.rs), and later requests learn from it.
        let reported = reply.usage.prompt_tokens;
        lock(&self.shared.calibration).learn(&self.settings.model, &room.counted, reported);
        room.used = room.used.max(reported.map_or(0, |n| n as usize));
        if reply.finish == Some(FinishReason::Repetition) {
            return Ok(self.stopped(&reply));
        }
        self.coach.read_reply(&mut reply.raw);
        let end = self.conclude(&reply, &room, &choice, filter.as_mut()).await;
        self.complete(reply.usage);
        Ok(end)
    }

    /// Sends `TurnComplete` for the turn.
    fn complete(&self, usage: Usage) {
        self.sink.send(ChatEvent::TurnComplete {
            turn: self.turn,
            usage,
        });
    }

    /// A reply stopped for repeating itself: when the coach asks for the answer, it is
    /// not recorded and the nudge follows; otherwise it is recorded as far as it went and
    /// ends the run.
    fn stopped(&mut self, reply: &Reply) -> TurnEnd {
        let end = match self.coach.after_stopped(!reply.calls.is_empty()) {
            Some(said) => {
                self.say(said);
                TurnEnd::Continue
            }
            None => {
                self.record_unfinished(reply, STOPPED_RESULT);
                TurnEnd::Finish(FinishReason::Repetition)
            }
        };
        self.complete(reply.usage);
        end
    }

    /// Says what the coach says, for the rest of the run (see `shared.rs`).
    fn say(&self, said: Said) {
        let message = self.coach.message(said.nudge);
        self.sink.coach(&self.shared, message, said.rule);
    }

    /// The request for the next reply: the history, the options, `think` as settled, and
    /// the tools as the strategy offers them under the turn's `offer`.
    fn build_request(&self, offer: &Offer<'_>) -> ProviderRequest {
        let settings = &self.settings;
        let history = lock(&self.shared.history);
        let mut request = ProviderRequest::new(&settings.model, history.messages().to_vec());
        request.system = (settings.system.clone()).or_else(|| history.system_text());
        request.options = settings.options.clone();
        request.think = settings.think;
        request.parallel_tool_calls = settings.parallel_tool_calls;
        request.keep_alive.clone_from(&settings.keep_alive);
        self.coach
            .before_request(&mut request, !offer.tools.is_empty());
        settings
            .strategy
            .prepare(&mut request, &offer.tools, &offer.choice);
        request
    }

    /// Makes the request fit the model's window before anything is sent: the window is
    /// settled here and sent as `options.context_length`; past the threshold the history
    /// is compacted ([`super::compact`]); over the window the request is refused.
    async fn check_budget(&self, offer: &Offer<'_>) -> Fitted {
        let settings = &self.settings;
        let window = settle_window(
            &settings.limits,
            &settings.model,
            settings.options.context_length,
            settings.info.as_ref(),
        );
        let build = || {
            let mut request = self.build_request(offer);
            request.options.context_length = u32::try_from(window.tokens).ok();
            request
        };
        let (shared, cancel, sink) = (&self.shared, &self.cancel, &self.sink);
        fit(shared, settings, window, &build, cancel, sink).await
    }

    /// Streams the reply to `request`, showing text through `filter` and announcing
    /// native calls as they arrive. The reply's usage is added to the run's total however
    /// it ends.
    async fn stream_reply(
        &mut self,
        request: ProviderRequest,
        filter: &mut dyn TextFilter,
    ) -> Result<Streamed, TurnFailure> {
        let started = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
            self.shared.provider.chat(request)
        }));
        let Ok(stream) = started else {
            self.sink
                .error(ProviderErrorKind::Other, "the provider panicked");
            return Err(TurnFailure::Reported);
        };
        let mut stream = std::panic::AssertUnwindSafe(stream).catch_unwind();
        let mut reply = Reply::default();
        let mut watch = self.coach.watch();
        let offered = OfferedTools::new(
            (self.settings.offered.iter()).map(|t| (t.name.clone(), t.parameters.clone())),
        )
        .coached(self.coach.config());
        let flow = loop {
            let next = tokio::select! {
                biased;
                _ = self.cancel.cancelled() => {
                    self.total.accumulate(&reply.usage);
                    return Ok(Streamed::Cancelled(reply));
                }
                next = stream.next() => next,
            };
            let flow = self.take(&mut reply, next, &mut watch, filter, &offered);
            if !matches!(flow, Flow::More) {
                break flow;
            }
        };
        self.total.accumulate(&reply.usage);
        match flow {
            Flow::Failed(error) => Err(self.failed(error, &reply)),
            Flow::Finished(reason) => {
                reply.finish = Some(reason);
                Ok(Streamed::Done(reply))
            }
            Flow::More => Ok(Streamed::Done(reply)),
        }
    }

    /// Takes in what the provider's stream gave next (an event, a panic, or its end),
    /// stopping a reply that keeps repeating itself and cutting one that keeps writing
    /// calls where it began to repeat them.
    fn take(
        &self,
        reply: &mut Reply,
        next: Option<Result<ProviderEvent, Box<dyn std::any::Any + Send>>>,
        watch: &mut Watch,
        filter: &mut dyn TextFilter,
        offered: &OfferedTools,
    ) -> Flow {
        let (shared, sink): (&Shared, &Sink) = (&self.shared, &self.sink);
        match next {
            Some(Ok(ProviderEvent::TextDelta { text })) if watch.text(&text) => {
                let to = (shared, sink);
                reply.take(ProviderEvent::TextDelta { text }, filter, to, offered);
                stopped_repeating(reply, sink);
                Flow::Finished(FinishReason::Repetition)
            }
            Some(Ok(event)) => match reply.take(event, filter, (shared, sink), offered) {
                Flow::More => match watch.reply(&reply.raw) {
                    Some(cut) => stopped_calling(reply, cut, sink),
                    None => Flow::More,
                },
                flow => flow,
            },
            Some(Err(_panic)) => Flow::Failed(ProviderError::new(
                ProviderErrorKind::Other,
                "the provider panicked",
            )),
            None => Flow::Failed(ProviderError::new(
                ProviderErrorKind::IncompleteStream,
                "the provider's stream ended without a finish",
            )),
        }
    }

    /// What a failed reply means: a fallback when the server refused something before
    /// any output and the run can do without it, else an `Error` event.
    fn failed(&self, error: ProviderError, reply: &Reply) -> TurnFailure {
        let silent = reply.is_empty();
        match self.settings.fallback_for(&error).filter(|_| silent) {
            Some(fallback) => TurnFailure::Fallback(fallback),
            None => {
                self.sink.send(ChatEvent::Error { error });
                TurnFailure::Reported
            }
        }
    }

    /// Reads the finished reply, shows what is left to show, runs its calls and records
    /// the turn as the strategy says.
    async fn conclude(
        &mut self,
        reply: &Reply,
        room: &Room,
        choice: &ToolChoice,
        filter: &mut dyn TextFilter,
    ) -> TurnEnd {
        let settings = &self.settings;
        let shared = &self.shared;
        let outcome = settings.strategy.interpret(
            &reply.raw,
            reply.calls.clone(),
            &settings.tools.schemas(),
            &mut || shared.mint_id(),
            choice,
            self.coach.config(),
        );
        self.sink.shown(filter.finish(outcome.shown()));
        if reply.finish == Some(FinishReason::Length) {
            self.warn_cut();
        }
        let raw = reply.raw.as_str();
        match outcome {
            TurnOutcome::Answer(answer) => self.answer(raw, &answer, reply.finish),
            TurnOutcome::Retry {
                correction,
                problem,
            } => self.retry(raw, &correction, problem),
            TurnOutcome::Calls(calls) => {
                let answered = vec![None; calls.len()];
                let structured = !reply.calls.is_empty();
                self.calls(raw, calls, answered, structured, reply, room)
                    .await
            }
            TurnOutcome::TextCalls {
                calls,
                answered,
                prose,
                repaired,
            } => {
                for r in repaired {
                    self.sink.coached(r.rule, Some(&r.call_id), r.detail, false);
                }
                // Native calls come back here too (the strategy answers some of them
                // itself): they count as structured, text read as calls does not.
                let structured = !reply.calls.is_empty();
                self.calls(&prose, calls, answered, structured, reply, room)
                    .await
            }
        }
    }

    /// A reply the strategy could not read: recorded with its correction, and the run
    /// goes on. After a turn that was to call the chosen tool (`routed-call`) nothing
    /// is recorded: the run's own strategy takes the next turn afresh.
    fn retry(&mut self, raw: &str, correction: &str, problem: String) -> TurnEnd {
        if self.routed {
            tracing::debug!(%problem, "coach: routed-call: the reply was not the call");
            return TurnEnd::Continue;
        }
        self.sink.warn(WarningKind::MalformedOutput, problem);
        let record = self
            .settings
            .strategy
            .record(Turn::Retry { raw, correction });
        self.sink.record(&self.shared, record);
        TurnEnd::Continue
    }

    /// Records an answer; one the coach answers with a nudge continues the run (the
    /// nudge follows it, or replaces it when it was empty), any other ends it.
    fn answer(&mut self, raw: &str, answer: &str, finish: Option<FinishReason>) -> TurnEnd {
        let settings = &self.settings;
        let shows_call = !answer.trim().is_empty()
            && (settings.strategy).shows_call(answer, &settings.offered, self.coach.config());
        let offers = !settings.offered.is_empty();
        let said = self.coach.after_answer(answer, shows_call, offers);
        let mut record = self.settings.strategy.record(Turn::Answer { raw, answer });
        if said.is_some_and(|s| s.drops_reply) {
            record.clear();
        }
        self.sink.record(&self.shared, record);
        if let Some(said) = said {
            self.say(said);
            return TurnEnd::Continue;
        }
        TurnEnd::Finish(match finish {
            Some(FinishReason::Length) => FinishReason::Length,
            _ => FinishReason::Stop,
        })
    }

    /// A reply's calls: learns how they came (`structured`: as the server's calls),
    /// keeps the first [`MAX_CALLS_PER_REPLY`] and runs them, with `text` as the
    /// assistant message's text.
    async fn calls(
        &mut self,
        text: &str,
        mut calls: Vec<ToolCall>,
        mut answered: Vec<Option<ToolOutcome>>,
        structured: bool,
        reply: &Reply,
        room: &Room,
    ) -> TurnEnd {
        {
            let mut learned = lock(&self.shared.learned);
            let model = &self.settings.model;
            self.settings
                .strategy
                .learn(&mut learned, model, structured);
        }
        let made = calls.len();
        let dropped = self.coach.bound(&mut calls);
        drop_calls(made, &dropped, &reply.calls, &self.sink);
        answered.truncate(calls.len());
        for call in &mut calls {
            if let Some(detail) = self.coach.dotted_path(call) {
                (self.sink).coached(Rule::DottedPath, Some(&call.id), detail, false);
            }
        }
        for (call, answer) in calls.iter().zip(answered.iter_mut()) {
            if answer.is_none() {
                *answer = match self.last_word {
                    Some(unrun) => Some(ToolOutcome::error(unrun)),
                    None => (self.coach).withheld_answer(call, &self.settings.offered),
                };
                if answer.is_none() {
                    *answer = self.coach.unnamed_overwrite(call);
                    if answer.is_some() {
                        let detail =
                            format!("{} of a file the message does not name: not run", call.name);
                        (self.sink).coached(
                            Rule::OverwriteNeedsName,
                            Some(&call.id),
                            detail,
                            false,
                        );
                    }
                }
                let unnamed = self.coach.unnamed().contains(&call.name);
                if answer.is_some() && unnamed {
                    let detail =
                        format!("the message names no program {} runs: not run", call.name);
                    (self.sink).coached(Rule::NamedCommand, Some(&call.id), detail, false);
                }
            }
        }
        let planned = Planned {
            text,
            calls: &calls,
            answered,
            room,
        };
        self.run_calls(planned, &reply.calls).await
    }

    /// Warns that the reply was cut at the generation cap.
    fn warn_cut(&self) {
        let cap = match self.settings.options.max_tokens {
            Some(n) => format!("the cap of {n} tokens per reply"),
            None => "the room the context window left".to_owned(),
        };
        self.sink.warn(
            WarningKind::TokenLimit,
            format!(
                "the reply was cut at {cap} (raise it with max_tokens, `ollm run --max-tokens`)"
            ),
        );
    }

    /// Announces the calls that were not announced while streaming (those read from
    /// text), runs the calls of `planned` the coach says to run, answers the repeated
    /// ones from earlier results and the decided ones as decided, and records the turn
    /// as the coach says. Ends the run when cancelled meanwhile (what was produced is
    /// recorded too) or when a call was asked for the [`REPEAT_LIMIT`]th time.
    async fn run_calls(&mut self, planned: Planned<'_>, announced: &[ToolCall]) -> TurnEnd {
        let calls = planned.calls;
        // By id: a call the coach changed after it was announced (`dotted-path`) is the
        // same call, told by a `Coached` event.
        for call in calls
            .iter()
            .filter(|c| !announced.iter().any(|a| a.id == c.id))
        {
            self.sink
                .send(ChatEvent::ToolCallStarted { call: call.clone() });
        }
        let handed = planned.answered.iter().any(Option::is_none);
        if self.settings.calls == CallMode::HandBack && handed {
            return self.hand_back(&planned);
        }
        let plan = self.coach.plan(&self.settings.tools, calls);
        let sources = plan.sources();
        let runs = |i: usize| planned.answered[i].is_none() && sources[i] == Source::Run;
        let fresh: Vec<ToolCall> = (0..calls.len())
            .filter(|&i| runs(i))
            .map(|i| calls[i].clone())
            .collect();
        let toolbox = Toolbox {
            tools: &self.settings.tools,
            coach: self.coach.config(),
            timeout: self.settings.tool_timeout,
        };
        let (ran, cancelled) = execute_all(toolbox, &fresh, &self.cancel, &self.sink).await;
        let mut ran = ran.into_iter();
        let mut results: Vec<Option<ToolOutcome>> = Vec::with_capacity(calls.len());
        for (i, call) in calls.iter().enumerate() {
            let result = match (&planned.answered[i], &sources[i]) {
                (Some(decided), _) => Some(decided.clone()),
                (None, Source::Run) => ran.next().flatten(),
                (None, Source::Earlier) => self.coach.earlier(&plan, i),
                (None, Source::Twin(j)) => results[*j].as_ref().map(|r| Coach::twin(&call.name, r)),
            };
            if !runs(i) && !cancelled {
                if let Some(r) = &result {
                    let repeat = planned.answered[i].is_none();
                    answer_unrun(&self.sink, call, r, repeat);
                }
            }
            results.push(result);
        }
        if cancelled {
            let partial = (planned.text, calls);
            self.record_calls_unfinished(partial, &results, CANCELLED_RESULT);
            return TurnEnd::Finish(FinishReason::Cancelled);
        }
        self.check_change(calls, &plan).await;
        self.record_calls(&planned, &plan, results)
    }

    /// Asks what the message needs when `change-after-idle` may oblige a change after
    /// these calls (see [`Coach::change_check`]), and tells the coach the reply.
    async fn check_change(&mut self, calls: &[ToolCall], plan: &CallPlan) {
        let model = self.settings.model.clone();
        let tools = &self.settings.tools;
        let Some(request) = self.coach.change_check(&model, tools, calls, plan) else {
            return;
        };
        let text = self.choose_unless_cancelled(request).await;
        self.coach.confirm_change(text.as_deref());
        let detail = format!(
            "asked what the message needs: {}",
            text.as_deref().unwrap_or("no reply")
        );
        self.sink
            .coached(Rule::ChangeAfterIdle, None, detail, false);
    }

    /// Hands the calls of `planned` that would run back to the caller ([`CallMode::HandBack`]):
    /// answers the ones the strategy answered itself (events only), records the assistant
    /// message with the others, and ends the run.
    fn hand_back(&self, planned: &Planned<'_>) -> TurnEnd {
        let mut handed = Vec::new();
        for (call, answer) in planned.calls.iter().zip(&planned.answered) {
            match answer {
                Some(answer) => answer_unrun(&self.sink, call, answer, false),
                None => handed.push(call.clone()),
            }
        }
        let message = Message::assistant_with_calls(planned.text, handed);
        self.sink.record(&self.shared, vec![message]);
        TurnEnd::Finish(FinishReason::ToolCalls)
    }

    /// Records a turn whose calls all have their results: cuts the results to the room
    /// left, lets the coach learn from them, and records the turn and the nudge as the
    /// coach says; ends the run when a call was asked for too often.
    fn record_calls(
        &mut self,
        planned: &Planned<'_>,
        plan: &CallPlan,
        results: Vec<Option<ToolOutcome>>,
    ) -> TurnEnd {
        let calls = planned.calls;
        let mut results: Vec<ToolOutcome> = results
            .into_iter()
            .map(|r| r.unwrap_or_else(|| ToolOutcome::error("the tool did not run")))
            .collect();
        let names: Vec<&str> = calls.iter().map(|c| c.name.as_str()).collect();
        let compaction = &self.settings.compaction;
        bound_results(&mut results, &names, planned.room, compaction, &self.sink);
        let tools = &self.settings.tools;
        let after = self.coach.after_calls(tools, calls, plan, &results);
        if after.recorded.contains(&true) {
            let kept = |i: &usize| after.recorded[*i];
            let indices: Vec<usize> = (0..calls.len()).filter(kept).collect();
            let kept_calls: Vec<ToolCall> = indices.iter().map(|&i| calls[i].clone()).collect();
            let kept_results: Vec<ToolOutcome> =
                indices.iter().map(|&i| results[i].clone()).collect();
            let turn = Turn::Calls {
                raw: planned.text,
                calls: &kept_calls,
                results: &kept_results,
            };
            let record = self.settings.strategy.record(turn);
            self.sink.record(&self.shared, record);
        }
        if let Some(i) = after.stuck {
            warn_stuck(&self.sink, &calls[i], after.last_word);
        }
        if let Some(said) = after.nudge {
            // `change-after-idle` obliges its call as `routed-call` does: on a strategy
            // that takes none, its nudge alone asks for the change.
            if said.rule == Rule::ChangeAfterIdle && !self.settings.strategy.takes_routed_calls() {
                self.coach.routed_call_played(false);
            }
            self.say(said);
        }
        match after.stuck {
            Some(_) if after.last_word => TurnEnd::LastWord,
            Some(_) => TurnEnd::Finish(FinishReason::Repetition),
            None => TurnEnd::Continue,
        }
    }

    /// Records what an unfinished reply produced (cancelled, or stopped for repeating
    /// itself; see the module docs of [`crate::chat`]), answering each of its calls with
    /// `placeholder`.
    fn record_unfinished(&self, reply: &Reply, placeholder: &str) {
        let partial = (reply.raw.as_str(), &reply.calls[..]);
        self.record_calls_unfinished(partial, &[], placeholder);
    }

    /// Records the text and calls of an unfinished turn, answering every call without a
    /// result with `placeholder`.
    fn record_calls_unfinished(
        &self,
        (raw, calls): (&str, &[ToolCall]),
        results: &[Option<ToolOutcome>],
        placeholder: &str,
    ) {
        let results = answer_unfinished(calls, results, &self.sink, placeholder);
        let turn = if calls.is_empty() {
            Turn::Cut { raw }
        } else {
            Turn::Calls {
                raw,
                calls,
                results: &results,
            }
        };
        let record = self.settings.strategy.record(turn);
        self.sink.record(&self.shared, record);
    }
}

/// A reply as it streamed in.
#[derive(Default)]
struct Reply {
    /// Its whole text.
    raw: String,
    /// The native calls, in order, each with an id unique in the reply.
    calls: Vec<ToolCall>,
    usage: Usage,
    /// Why the provider ended it.
    finish: Option<FinishReason>,
}

/// How streaming a reply ended.
enum Streamed {
    /// The provider finished it.
    Done(Reply),
    /// The run was cancelled; what had arrived.
    Cancelled(Reply),
}

/// What one provider event means for the reply.
enum Flow {
    More,
    Finished(FinishReason),
    Failed(ProviderError),
}

impl Reply {
    /// Takes in one provider event, forwarding what is to be shown.
    fn take(
        &mut self,
        event: ProviderEvent,
        filter: &mut dyn TextFilter,
        (shared, sink): (&Shared, &Sink),
        offered: &OfferedTools,
    ) -> Flow {
        match event {
            ProviderEvent::TextDelta { text } => {
                sink.shown(filter.feed(&text));
                self.raw.push_str(&text);
            }
            ProviderEvent::ThinkingDelta { text } => sink.send(ChatEvent::ThinkingDelta { text }),
            ProviderEvent::ToolCall { mut call } => {
                // Results are matched to calls by id: an id that is missing or used twice
                // in one reply gets a fresh one.
                if call.id.is_empty() || self.calls.iter().any(|c| c.id == call.id) {
                    call.id = shared.mint_id();
                }
                if let Some((repaired, rule)) = recover::repair_native(&call, offered) {
                    let detail = format!(
                        "the server's call to \"{}\" read as {} {}",
                        call.name,
                        repaired.name,
                        Value::Object(repaired.arguments.clone())
                    );
                    sink.coached(rule, Some(&call.id), detail, false);
                    call = repaired;
                }
                sink.send(ChatEvent::ToolCallStarted { call: call.clone() });
                self.calls.push(call);
            }
            ProviderEvent::Usage { usage } => self.usage.accumulate(&usage),
            ProviderEvent::Warning { warning } => sink.send(ChatEvent::Warning { warning }),
            ProviderEvent::Finish { reason } => return Flow::Finished(reason),
            ProviderEvent::Error { error } => return Flow::Failed(error),
            // Event kinds added later are not understood by this loop; skip them.
            #[allow(unreachable_patterns, reason = "ProviderEvent is non_exhaustive")]
            _ => {}
        }
        Flow::More
    }

    /// Whether nothing of the reply arrived (no text, no call).
    fn is_empty(&self) -> bool {
        self.raw.is_empty() && self.calls.is_empty()
    }
}

/// Warns that the reply was stopped because it kept repeating itself; the caller drops
/// the stream, which cancels the request.
fn stopped_repeating(reply: &Reply, sink: &Sink) {
    let tail: String = {
        let chars: Vec<char> = reply.raw.chars().rev().take(60).collect();
        chars.into_iter().rev().collect()
    };
    let detail = format!(
        "the reply kept repeating itself and was stopped after {} characters (it ended \
         \"{}\")",
        reply.raw.chars().count(),
        tail.escape_debug()
    );
    sink.coached(Rule::RunawayStop, None, detail, true);
}

/// Cuts a reply that kept writing calls where the coach said (`call-loop-cut`,
/// `listed-tools-cut`), and warns; the caller drops the stream, which cancels the
/// request, and reads what is left as the whole reply.
fn stopped_calling(reply: &mut Reply, cut: Cut, sink: &Sink) -> Flow {
    let made = reply.raw.len();
    reply.raw = cut_reply(&reply.raw, cut.at);
    let kept = reply.raw.len();
    let detail = format!("{} (after {kept} of its {made} bytes so far)", cut.why);
    sink.coached(cut.rule, None, detail, true);
    Flow::Finished(FinishReason::Stop)
}

/// Drops the calls past the coach's bound (`made` in all) from the conversation, with a
/// warning; each dropped call that was announced while streaming is answered by an event
/// (not in the history, which no longer holds it).
fn drop_calls(made: usize, dropped: &[ToolCall], announced: &[ToolCall], sink: &Sink) {
    if dropped.is_empty() {
        return;
    }
    let why = format!(
        "the reply made {made} tool calls; the first {MAX_CALLS_PER_REPLY} run and the \
         other {} were dropped from the conversation",
        dropped.len()
    );
    for call in dropped.iter().filter(|c| announced.contains(c)) {
        sink.send(ChatEvent::ToolResult {
            call_id: call.id.clone(),
            name: call.name.clone(),
            content: format!("Error: not run: {why}"),
            is_error: true,
        });
    }
    sink.coached(Rule::CallsPerReply, None, why, true);
}

/// A turn's calls: the text its assistant message keeps, the calls, and per call the
/// result decided without running it (`None`: run it, unless the guard answers it).
struct Planned<'a> {
    text: &'a str,
    calls: &'a [ToolCall],
    answered: Vec<Option<ToolOutcome>>,
    /// How full the request was (bounds the results).
    room: &'a Room,
}

/// Sends the `ToolResult` of a call answered without running; a `repeat` answered from
/// an earlier result is the coach's (`repeat-guard`), and a `Coached` event says so first.
fn answer_unrun(sink: &Sink, call: &ToolCall, result: &ToolOutcome, repeat: bool) {
    if repeat {
        let mut args = String::new();
        canonical(&call.arguments_value(), &mut args);
        let detail = format!(
            "{} {args} repeats a call of this run; answered from its earlier result, not run",
            call.name
        );
        sink.coached(Rule::RepeatGuard, Some(&call.id), detail, false);
    }
    sink.send(ChatEvent::ToolResult {
        call_id: call.id.clone(),
        name: call.name.clone(),
        content: result.content.clone(),
        is_error: result.is_error,
    });
}

/// Warns that the run ends because the model kept asking for `call`, after a `last_word`
/// to answer when the coach asks for one (`answer-at-repeat-limit`).
fn warn_stuck(sink: &Sink, call: &ToolCall, last_word: bool) {
    let mut args = String::new();
    canonical(&call.arguments_value(), &mut args);
    let end = if last_word {
        "its calls were stopped and it is asked to answer"
    } else {
        "the run was stopped"
    };
    let detail = format!(
        "the model asked for the same call {REPEAT_LIMIT} times ({} {args}) instead of \
         answering from its result; {end}",
        call.name
    );
    sink.coached(Rule::RepeatLimit, None, detail, true);
}
