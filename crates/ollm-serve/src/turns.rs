//! One client request as runs of the runtime's turn loop ([`Turns`]): a
//! [`ollm_core::ChatClient`] over the client's conversation whose tools are the client's
//! schemas, declared and never run ([`ToolRegistry::declared`]), each run handing the
//! calls back ([`CallMode::HandBack`]); and what one run's reply came to ([`Attempt`],
//! with core's fold of it, [`ChatReply`]).
//!
//! # Decisions
//! - **Repair reuses the runtime, not a copy of it.** The turn loop does what it does
//!   for `ollm run`: calls written as text are recovered (every format of core's
//!   `recover`), names normalised, `<think>` text moved to reasoning, and a model without
//!   native tools gets the ReAct strategy; every call comes out as a `ToolCallStarted`
//!   event. A run hands the calls to declared tools back (`Finish` with `tool_calls`,
//!   [`ChatReply::unanswered`]): those are what the client receives; `serve` never runs
//!   a tool. Each run is one turn (`max_turns` 1) over the conversation as it stands
//!   ([`ollm_core::ChatClient::resume`]: no prompt is added, the client's messages go
//!   upstream as sent), so `serve` decides between turns (`repair.rs`).
//! - The loop's own limits are set to the client's: its token cap is the client's
//!   `max_tokens` (none: the server's), compaction is off (a proxy does not rewrite a
//!   conversation it does not own), and the client's sampling passes as sent (`ollm
//!   run`'s greedy tool turns are its own default, not the proxy's) unless serve's config
//!   turns `greedy-tool-turns` on (`[serve] greedy_tool_turns`, per model too): then a
//!   request that offers tools and sets no temperature goes at 0, as in `ollm run`.
//! - **A call to a tool the client never declared never reaches it**: the client cannot
//!   run it. A call written as text is answered by the run itself, as `ollm run` does
//!   (`Error: Unknown tool "say_hello"; available: ...`, then the runtime's nudge to
//!   answer); one the server sent as a structured call is handed back with the others
//!   and answered here the same way (the registry's own answer to an unknown tool). The
//!   next run carries those answers to the model ([`Turns::conclude`]).
//!   Qwen2.5-Coder-1.5B called `say_hello` and `count` through serve (issue 37). When
//!   the retries are spent the last calls are answered too, so a nudge turn after them
//!   ([`Turns::nudge`]) pairs every call with its result.
//! - **A prompt's `tool-or-none` choice holds for all its requests** (`routes.rs`):
//!   the first run's choice is kept, and the runs of the prompt's later requests play it
//!   ([`ChatOptions::route`]) instead of offering every tool again, so what
//!   `changes-on-request` withheld stays withheld until the next prompt, as in one `ollm
//!   run`.
//! - **A nudge turn is another run** over the same client's conversation, with the nudge
//!   appended, as the loop appends it in `ollm run` (for the rest of the request, never
//!   sent to the client). The run's own nudge is read from its `Coached` event
//!   ([`Nudge::said_by`]); the run after the answer nudge offers no tools
//!   ([`ChatOptions::no_tools`]), as the loop's coach withholds them.

use std::collections::HashSet;
use std::sync::{Arc, Mutex};

use futures::StreamExt;
use futures::stream::BoxStream;
use ollm_bridge::ProviderPool;
use ollm_core::coach::{Coach, Route};
use ollm_core::{
    CallMode, ChatClient, ChatConfig, ChatEvent, ChatOptions, ChatReply, CoachConfig,
    CompactionConfig, Learned, Nudge, Rule, ToolMode, ToolRegistry,
};
use ollm_types::{
    FinishReason, Message, ProviderError, ProviderErrorKind, ProviderRequest, Role, ToolCall,
    ToolSchema, Usage,
};
use tokio::sync::mpsc::UnboundedSender;

use super::clock::Clock;
use super::metrics::Metrics;
use super::provenance::{Provenance, Status, format_of};
use super::routes::Routes;
use super::through::{InfoCache, Seen, Through, lock};
use super::wire_out::Piece;

/// Runs after the first whose calls were all to undeclared tools, at most.
pub(crate) const INVENTED_RETRIES: u32 = 2;

/// What a repair needs of the server: the pool, what it said about models, the
/// `tool-or-none` choices made per prompt, the metrics,
/// how a `tool_choice` that obliges a call is enforced on a retry (`Constrained` where
/// the upstream takes a JSON schema, else `React`), the coach's switches and words, and
/// the request's clock.
#[derive(Clone)]
pub(crate) struct Upstream {
    pub(crate) pool: ProviderPool,
    pub(crate) cache: Arc<InfoCache>,
    pub(crate) routes: Arc<Routes>,
    pub(crate) metrics: Arc<Metrics>,
    pub(crate) constraint: ToolMode,
    pub(crate) coach: Arc<CoachConfig>,
    pub(crate) clock: Arc<Clock>,
}

/// One client request on its way through a repair.
#[derive(Clone)]
pub(crate) struct Ask {
    pub(crate) up: Upstream,
    pub(crate) request: ProviderRequest,
    pub(crate) session: Option<String>,
    /// The client takes the reply whole (not streamed): nothing reaches it before the
    /// reply ends.
    pub(crate) whole: bool,
}

/// A client request as runs of the turn loop (see the module docs).
pub(crate) struct Turns {
    client: ChatClient,
    up: Upstream,
    model: String,
    system: Option<String>,
    /// The client's tools, declared.
    tools: Arc<ToolRegistry>,
    declared: HashSet<String>,
    /// Whether the client's `tool_choice` obliges a call (`contract.rs` keeps that).
    obliged: bool,
    /// The last upstream reply as it came.
    seen: Arc<Mutex<Seen>>,
    /// The last run, folded as its events passed.
    reply: Arc<Mutex<ChatReply>>,
    /// The rule whose nudge the last run's coach said, with no turn left to play it.
    said: Arc<Mutex<Option<Rule>>>,
    /// The last run's native calls the coach renamed (`name-repair`, `path-in-name`,
    /// `file-as-name`): each call's id and the rule, for their mark.
    renamed: Arc<Mutex<Vec<(String, Rule)>>>,
    /// Whether the runs offer the client's tools (not after the answer nudge).
    offers_tools: bool,
    /// The nudges this request has played ([`Turns::nudge`]).
    played: Vec<Nudge>,
    /// The rule whose nudge asked for the runs since, for their calls' mark.
    nudged: Option<&'static str>,
    /// The key of the request's prompt among the choices kept (`tool-or-none` on), and
    /// the choice kept for it, which the runs play instead of asking.
    prompt: Option<(u64, Option<Route>)>,
}

impl Turns {
    /// The runs for `ask` under `mode`; with `raw`, the upstream's replies also go there
    /// as they came.
    pub(crate) fn new(
        ask: &Ask,
        mode: ToolMode,
        raw: Option<UnboundedSender<Piece>>,
    ) -> Result<Self, ProviderError> {
        let request = &ask.request;
        let tools = Arc::new(registry(&request.tools)?);
        let mut config = config(request, mode);
        config.coach = CoachConfig::clone(&ask.up.coach);
        // A run here is one turn, and what follows it is serve's to decide (a nudge
        // turn, or the client's own): never the loop's `answer-at-limit`.
        config.coach.off.insert(Rule::AnswerAtLimit);
        config.tool_temperature = greedy(&config.coach).then_some(0.0);
        let seen = Arc::default();
        let through = Through {
            pool: ask.up.pool.clone(),
            session: ask.session.clone(),
            cache: Arc::clone(&ask.up.cache),
            limits: config.context_limits.clone(),
            seen: Arc::clone(&seen),
            raw,
            clock: Arc::clone(&ask.up.clock),
            headers: request.headers.clone(),
        };
        let client = ChatClient::new(Arc::new(through), ToolRegistry::new(), config)
            .with_history(request.messages.clone());
        if ask.up.cache.native_refused(&request.model) {
            let learned = Learned {
                native_refused: true,
                ..Learned::default()
            };
            client.remember(request.model.clone(), learned);
        }
        Ok(Turns {
            client,
            up: ask.up.clone(),
            model: request.model.clone(),
            system: request.system.clone(),
            tools,
            declared: request.tools.iter().map(|t| t.name.clone()).collect(),
            obliged: request.tool_choice.requires_call(),
            seen,
            reply: Arc::default(),
            said: Arc::default(),
            renamed: Arc::default(),
            offers_tools: true,
            played: Vec::new(),
            nudged: None,
            prompt: prompt_of(ask),
        })
    }

    /// One run (one turn) over the conversation so far, as pieces; it ends after its
    /// `Finish`, or its `Error`. Dropping it cancels the run and its upstream request.
    pub(crate) fn run(&self) -> BoxStream<'static, Piece> {
        *lock(&self.reply) = ChatReply::default();
        *lock(&self.said) = None;
        lock(&self.renamed).clear();
        let options = ChatOptions {
            model: Some(self.model.clone()),
            system: self.system.clone(),
            tools: Some(Arc::clone(&self.tools)),
            calls: CallMode::HandBack,
            no_tools: !self.offers_tools,
            route: self.kept_route(),
            ..ChatOptions::default()
        };
        let run = self.client.resume(options);
        let keep = self.prompt.as_ref().filter(|(_, kept)| kept.is_none());
        let keep = keep.map(|(key, _)| (*key, Arc::clone(&self.up.routes)));
        let (client, cache) = (self.client.clone(), Arc::clone(&self.up.cache));
        let (model, reply) = (self.model.clone(), Arc::clone(&self.reply));
        let (said, renamed) = (Arc::clone(&self.said), Arc::clone(&self.renamed));
        run.filter_map(move |event| {
            lock(&reply).push(&event);
            if let ChatEvent::Coached { rule, call_id, .. } = &event {
                if Nudge::said_by(*rule).is_some() {
                    *lock(&said) = Some(*rule);
                }
                if let Some(id) = call_id.as_ref().filter(|_| RENAMING.contains(rule)) {
                    lock(&renamed).push((id.clone(), *rule));
                }
            }
            if matches!(event, ChatEvent::Finish { .. }) {
                // A refusal of native tools is remembered for the server's life.
                if client.learned(&model).native_refused {
                    cache.refuse_native(&model);
                }
                if let (Some((key, routes)), Some(route)) = (&keep, client.route()) {
                    routes.keep(*key, route);
                }
            }
            std::future::ready(from_chat(event))
        })
        .boxed()
    }

    /// The choice kept for the request's prompt: the one found when the request came, or
    /// the one an earlier run of this request made, so that a later run (after a nudge)
    /// plays it rather than asking again.
    fn kept_route(&self) -> Option<Route> {
        let (key, kept) = self.prompt.as_ref()?;
        kept.clone().or_else(|| self.up.routes.get(*key))
    }

    /// What follows a run that ended as `attempt` says: `None` to run again (its calls
    /// were all to tools the client never declared, and `tries` allows another; those
    /// handed back are answered first), else the reply's last pieces: where its calls
    /// came from, the declared calls, the finish.
    pub(crate) async fn conclude(
        &self,
        attempt: &mut Attempt,
        tries: &mut u32,
    ) -> Option<Vec<Piece>> {
        attempt.calls.clear();
        let reply = lock(&self.reply).clone();
        let handed: Vec<ToolCall> = if reply.finish_reason == Some(FinishReason::ToolCalls) {
            reply.unanswered().cloned().collect()
        } else {
            Vec::new()
        };
        let invented: Vec<&str> = (reply.tool_calls.iter())
            .map(|r| r.call.name.as_str())
            .filter(|name| !self.declared.contains(*name))
            .collect();
        let (kept, unknown): (Vec<ToolCall>, Vec<ToolCall>) = handed
            .into_iter()
            .partition(|c| self.declared.contains(&c.name));
        if !invented.is_empty() {
            self.up.metrics.undeclared(invented.len());
            if kept.is_empty() && *tries < INVENTED_RETRIES {
                *tries += 1;
                tracing::info!(model = %self.model, names = ?invented, try_ = *tries,
                    "serve: calls to undeclared tools, answered as unknown; asking the model again");
                self.answer_unknown(&unknown).await;
                return None;
            }
            tracing::warn!(model = %self.model, names = ?invented,
                "serve: calls to undeclared tools left out of the reply");
            // Answered all the same, so a request made from the conversation after it
            // (`answer-after-nothing`) pairs every call with a result.
            self.answer_unknown(&unknown).await;
            attempt.left_out = (reply.tool_calls.iter())
                .map(|r| r.call.clone())
                .filter(|c| !self.declared.contains(&c.name))
                .collect();
        }
        let mut out = Vec::new();
        if let Some(p) = self.provenance(Status::Recovered, &kept) {
            out.push(Piece::Repair(p));
        }
        out.extend(kept.into_iter().map(Piece::Call));
        out.push(Piece::Usage(attempt.usage));
        out.push(Piece::Finish(attempt.finish.unwrap_or(FinishReason::Stop)));
        Some(out)
    }

    /// Whether the reply that `attempt` and its `last` pieces make gets a nudge turn
    /// (see `repair.rs`): the one decision. When it does, the conversation is made ready
    /// for the next run (trailing empty answers off, the nudge on, the tools withheld
    /// after the answer nudge) and the mark the client's reply carries is returned.
    pub(crate) fn nudge(&mut self, attempt: &Attempt, last: &[Piece]) -> Option<Provenance> {
        let (rule, nudge) = self.due(attempt, last)?;
        self.played.push(nudge);
        self.nudged = Some(rule.name());
        self.offers_tools &= !nudge.withholds_tools();
        let mut history = self.client.history();
        // An empty answer the run recorded says nothing either.
        let said_nothing = |m: &Message| {
            m.role() == Role::Assistant
                && m.text().trim().is_empty()
                && m.tool_calls().next().is_none()
        };
        while history.last().is_some_and(said_nothing) {
            history.truncate(history.len() - 1);
        }
        let config = CoachConfig::clone(&self.up.coach);
        let coach = Coach::seeded(config, history.messages(), &self.tools);
        history.push(coach.message(nudge));
        self.client.set_history(history);
        Some(Provenance {
            status: Status::Coached,
            format: rule.name(),
            calls: attempt.left_out.clone(),
            nudged: None,
        })
    }

    /// The rule and nudge due after the reply, if any: none under a `tool_choice` that
    /// obliges a call (`contract.rs`'s) or when the client gets a declared call; else
    /// the nudge the last run's coach said, when none of the reply reached the client,
    /// else the answer nudge when the reply has nothing in it (`answer-after-nothing`);
    /// each nudge once per request, the act and can nudges counting as one (the coach
    /// asks to act once per run).
    fn due(&self, attempt: &Attempt, last: &[Piece]) -> Option<(Rule, Nudge)> {
        let calls = last.iter().filter(|p| matches!(p, Piece::Call(_))).count();
        if self.obliged || calls > 0 {
            return None;
        }
        let config = CoachConfig::clone(&self.up.coach);
        let coach = Coach::seeded(config, self.client.history().messages(), &self.tools);
        let said = (*lock(&self.said))
            .filter(|_| !attempt.reached())
            .and_then(|r| coach.says(r).map(|n| (r, n)));
        let nothing =
            (coach.after_nothing(attempt.has_text(), calls)).map(|n| (Rule::AnswerAfterNothing, n));
        let answers = Nudge::withholds_tools;
        let fresh = |n: Nudge| !self.played.iter().any(|p| answers(*p) == answers(n));
        [said, nothing]
            .into_iter()
            .flatten()
            .find(|(_, n)| fresh(*n))
    }

    /// Answers `calls` to undeclared tools that a run handed back, as the registry
    /// answers a call to a tool it does not hold, so the next run carries the answers.
    async fn answer_unknown(&self, calls: &[ToolCall]) {
        let mut results = Vec::with_capacity(calls.len());
        for call in calls {
            let outcome = self.tools.execute_coached(call, &self.up.coach).await;
            results.push(Message::tool_result(&call.id, &call.name, outcome.content));
        }
        self.client.extend_history(results);
    }

    /// The declared calls of `calls`.
    pub(crate) fn declared(&self, calls: Vec<ToolCall>) -> Vec<ToolCall> {
        calls
            .into_iter()
            .filter(|c| self.declared.contains(&c.name))
            .collect()
    }

    /// Where `calls` came from, when it was the upstream's text (none: they were the
    /// server's own calls, or there are none).
    pub(crate) fn provenance(&self, status: Status, calls: &[ToolCall]) -> Option<Provenance> {
        let seen = lock(&self.seen).clone();
        if calls.is_empty() {
            return None;
        }
        if seen.native_calls > 0 {
            return self.renamed(status, calls);
        }
        let format = match lock(&self.reply).strategy {
            Some(ToolMode::React) => "react",
            Some(ToolMode::Constrained) => "json-schema",
            _ => format_of(&seen.text, &self.tools.schemas()),
        };
        Some(Provenance {
            status,
            format,
            calls: calls.to_vec(),
            nudged: self.nudged.filter(|_| status != Status::Coached),
        })
    }
}

/// Where `ask`'s prompt is among the `tool-or-none` choices kept, and the choice kept
/// for it: `None` when the rule is off for the request or it declares no tools.
fn prompt_of(ask: &Ask) -> Option<(u64, Option<Route>)> {
    let request = &ask.request;
    if !ask.up.coach.is_on(Rule::ToolOrNone) || request.tools.is_empty() {
        return None;
    }
    let key = ask.up.routes.key(request)?;
    Some((key, ask.up.routes.get(key)))
}

/// The coach's rules that rename a native call to an undeclared tool.
const RENAMING: [Rule; 3] = [Rule::NameRepair, Rule::PathInName, Rule::FileAsName];

impl Turns {
    /// The mark of a reply whose calls the server parsed itself: only those of `calls`
    /// the coach renamed are repaired (`recovered; format=native; calls=N; rule=RULE`,
    /// the first rule that acted); the rest are the server's own.
    fn renamed(&self, status: Status, calls: &[ToolCall]) -> Option<Provenance> {
        let renamed = lock(&self.renamed).clone();
        let rule = |c: &ToolCall| renamed.iter().find(|(id, _)| *id == c.id).map(|(_, r)| *r);
        let repaired: Vec<ToolCall> = calls
            .iter()
            .filter(|c| rule(c).is_some())
            .cloned()
            .collect();
        let first = repaired.first().and_then(rule)?;
        Some(Provenance {
            status,
            format: "native",
            calls: repaired,
            nudged: Some(first.name()),
        })
    }
}

/// The client's tools, declared ([`ToolRegistry::declared`]), for the turn loop and the
/// coach; a schema the registry refuses is the client's bad request.
pub(crate) fn registry(schemas: &[ToolSchema]) -> Result<ToolRegistry, ProviderError> {
    ToolRegistry::declared(schemas.iter().cloned())
        .map_err(|e| ProviderError::new(ProviderErrorKind::BadRequest, e.to_string()))
}

/// Whether requests that offer tools and set no temperature go at temperature 0
/// (`greedy-tool-turns`): only when serve's config turns the rule on, since the client's
/// sampling is otherwise passed as sent.
fn greedy(coach: &CoachConfig) -> bool {
    coach.on.contains(&Rule::GreedyToolTurns) && coach.is_on(Rule::GreedyToolTurns)
}

/// The loop's settings for one run of `request` under `mode` (see the module docs).
fn config(request: &ProviderRequest, mode: ToolMode) -> ChatConfig {
    ChatConfig {
        model: request.model.clone(),
        system: request.system.clone(),
        max_turns: 1,
        tool_mode: mode,
        tool_choice: request.tool_choice.clone(),
        parallel_tool_calls: request.parallel_tool_calls,
        max_tokens: request.options.max_tokens,
        options: request.options.clone(),
        tool_temperature: None,
        think: request.think,
        compaction: CompactionConfig {
            enabled: false,
            ..CompactionConfig::default()
        },
        ..ChatConfig::default()
    }
}

/// What one run's reply came to, as its pieces passed.
#[derive(Debug, Default)]
pub(crate) struct Attempt {
    pub(crate) calls: Vec<ToolCall>,
    /// The usage of this run and the ones before it, sent at the end (a stream reports
    /// it last anyway), so a reply that is only a call begins with the call's mark.
    usage: Usage,
    pub(crate) finish: Option<FinishReason>,
    pub(crate) failed: bool,
    /// The calls to undeclared tools left out of the reply (its last run's).
    left_out: Vec<ToolCall>,
    /// An earlier run showed text: this one's starts a new paragraph.
    after_text: bool,
    shown: bool,
    /// The client takes the reply whole: what the runs show is held until it ends, so a
    /// nudge turn can take its place.
    hold: bool,
    held: Vec<Piece>,
}

impl Attempt {
    /// The first run's attempt; with `hold`, what it shows is held until
    /// [`Attempt::release`].
    pub(crate) fn new(hold: bool) -> Attempt {
        Attempt {
            hold,
            ..Attempt::default()
        }
    }

    /// The next run's attempt.
    pub(crate) fn again(self) -> Attempt {
        Attempt {
            after_text: self.after_text || self.shown,
            usage: self.usage,
            hold: self.hold,
            held: self.held,
            ..Attempt::default()
        }
    }

    /// The attempt of the run that answers a nudge: what the reply held so far is
    /// dropped (the client sees only what follows the nudge); its usage counts.
    pub(crate) fn nudged(self) -> Attempt {
        Attempt {
            usage: self.usage,
            hold: self.hold,
            ..Attempt::default()
        }
    }

    /// What the runs showed and the attempt held.
    pub(crate) fn release(&mut self) -> Vec<Piece> {
        std::mem::take(&mut self.held)
    }

    /// Takes in one piece of the run: calls, usage and the finish are kept, an error is
    /// returned, the rest is shown: returned, or held when the attempt holds.
    pub(crate) fn take(&mut self, piece: Piece) -> Option<Piece> {
        match self.shown(piece)? {
            error @ Piece::Error(_) => Some(error),
            shown if self.hold => {
                self.held.push(shown);
                None
            }
            shown => Some(shown),
        }
    }

    fn shown(&mut self, piece: Piece) -> Option<Piece> {
        match piece {
            Piece::Call(call) => self.calls.push(call),
            Piece::Usage(usage) => self.usage.accumulate(&usage),
            Piece::Finish(reason) => self.finish = Some(reason),
            Piece::Error(error) => {
                self.failed = true;
                return Some(Piece::Error(error));
            }
            Piece::Text(text) | Piece::Reasoning(text) if text.is_empty() => {}
            Piece::Text(text) => {
                let first = !self.shown;
                self.shown = true;
                if first && self.after_text {
                    return Some(Piece::Text(format!("\n\n{text}")));
                }
                return Some(Piece::Text(text));
            }
            other => return Some(other),
        }
        None
    }

    /// Whether this run or an earlier one of the reply had text.
    pub(crate) fn has_text(&self) -> bool {
        self.after_text || self.shown
    }

    /// Whether any text of the reply reached the client (a stream's text goes out as
    /// it comes).
    pub(crate) fn reached(&self) -> bool {
        self.has_text() && !self.hold
    }

    /// Whether the run has ended (finished or failed).
    pub(crate) fn over(&self) -> bool {
        self.failed || self.finish.is_some()
    }
}

fn from_chat(event: ChatEvent) -> Option<Piece> {
    Some(match event {
        ChatEvent::TextDelta { text } => Piece::Text(text),
        ChatEvent::ThinkingDelta { text } => Piece::Reasoning(text),
        ChatEvent::ToolCallStarted { call } => Piece::Call(call),
        ChatEvent::TurnComplete { usage, .. } => Piece::Usage(usage),
        ChatEvent::Error { error } => Piece::Error(error),
        ChatEvent::Finish { reason, .. } if reason != FinishReason::Error => Piece::Finish(reason),
        _ => return None,
    })
}
