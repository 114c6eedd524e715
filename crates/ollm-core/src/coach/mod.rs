//! The coach: every rule by which ollm helps a small model, in one place.
//!
//! Small models call tools badly in a few well-known ways (they repeat a call whose
//! result they have, list the tools instead of using one, loop, explain a call instead of
//! making it, invent names and results). Each remedy is a [`Rule`] with a name, a
//! one-line summary and its own switch in [`CoachConfig`] (part of
//! [`ChatConfig`](crate::ChatConfig); the CLI's `--coach-off NAME` and `[coach] off`), so
//! each can be measured alone (`cargo xtask eval --ablate`). What the coach says to the
//! model is a [`Nudge`], which owns its text.
//!
//! A run has one [`Coach`], seeded from the conversation since its last user message
//! ([`Coach::seeded`]: a proxy that sees only a request's history gets the same memory
//! as the loop that made the calls). The turn loop asks it at fixed points:
//! - **before a request**: whether to withhold the tools ([`Coach::withholds_tools`]),
//!   and what the request carries besides the history (the tools context, the tool
//!   temperature);
//! - **while a reply streams**: whether to stop or cut it (`Watch`);
//! - **after a reply**: what to read of it (`drop-echo`), and whether a nudge follows an
//!   answer or a stopped reply;
//! - **on calls**: where each call's result comes from ([`Coach::plan`]), how many run,
//!   and after the results whether the turn is recorded, a nudge follows or the run ends.
//!
//! The recovery of calls written as text (`recover/`) and the tool registry read the same
//! switches for their rules (`name-repair`, `path-in-name`, `file-as-name`,
//! `invented-result-cut`; `typed-strings`, `key-hint`; `tools-hint` in the native strategy).
//!
//! # Decisions
//! Each rule, what it does, the evidence, and its switch (the rule's name). All are on
//! by default but those [`Rule::ON_REQUEST`] lists.
//! - **`tool-or-none`** (`route.rs`; on request, [`Rule::ON_REQUEST`]): before a run's
//!   first request with tools, when the tool choice does not require a call, one short
//!   request asks the model to name an offered tool or `none`, the server constraining the
//!   reply to that JSON; on a clean `none` the run offers no tools and no tools context.
//!   Small models call tools on small talk and arithmetic (issue 35). On the eval's tuning
//!   part with the 0.5B (one repeat each, default sampling): restraint 6/15 without the
//!   rule, 13/15 with it; success 11/54 and 16/54. Off in core because it costs a
//!   request and needs a server that constrains output; the CLI turns it on.
//! - **`changes-on-request`**: when `tool-or-none` chose `none`, or chose a tool that
//!   changes things (one the caller does not name in [`CoachConfig::read_only`]), the
//!   other tools that change things are withheld for the run: not offered, and a call to
//!   one, native or written as text, is answered "not offered" and never runs. Before
//!   the rule a text call after a `none` ran, since text calls are read against every
//!   tool. A choice of a tool that only reads withholds nothing: the 1.5B chose
//!   `read_file` for "save the port into port.txt", which needs the write next. No clean
//!   choice withholds nothing either, nor does a caller that names no tool read-only
//!   (`ollm serve` unless its config names them). A proxy that sees a run's requests
//!   apart keeps the choice and passes it to the later ones (`ChatOptions::route`,
//!   `Coach::replay`): the coach asks only before the first call. Issue 35: "never a
//!   write or a command the user did not ask for".
//!   In the eval's traces the 0.5B chose `write_file` for "make me a shopping.txt" and
//!   then ran `ls` as well; a choice of the wrong tool itself (`write_file` for "wc -l
//!   sales.csv", the 1.5B's `run_command` for "python venv how?") is beyond this rule.
//!   Measured in docs/tool-calling.md.
//! - **`asked-command`** (on, since 2026-11-29): a `tool-or-none` choice of a tool that
//!   changes things and runs no programs (the CLI's `write_file`), for a message that
//!   names a program of a tool that runs them ([`CoachConfig::programs`], as a word of
//!   its own: `named-command`'s test), reads as a choice of that tool; so
//!   `changes-on-request` withholds the chosen one. Why: the 0.5B chose `write_file`
//!   for "run wc -l on sales.csv" in all three wordings of every tuning pass;
//!   `run_command` was then withheld, and the task, which needs the command, could not
//!   pass (0/3 in nine passes; its answers were read from `sales.csv`). Its first form
//!   kept the command offered beside the chosen write, and in the first pass with it
//!   (`02-44-51Z`) the 0.5B's first call overwrote `sales.csv` with the text
//!   "sales.csv" (the message names the file, so `overwrite-needs-name` let it run).
//!   The user named a program and no change: the command is what was asked for, the
//!   caller's own limits (the allowed commands, approval) still apply, and a run keeps
//!   one tool that changes things, as after any choice. A choice of `none` still offers
//!   nothing. Measured on that task, three repeats both ways (`03-23-08Z`): it acted in
//!   all 9 of the 0.5B's runs and none passed either way (given `run_command` alone it
//!   wrote the arguments as an array naming the program `git`); the 1.5B chose
//!   `run_command` itself (6/9 both ways). No lift: it stays on for the safety reason
//!   above, which `asked_command` (coach tests) holds.
//! - **`named-command`** (on since 2026-11-28): a tool that runs programs
//!   ([`CoachConfig::programs`]; the CLI: `run_command` and the first words of its
//!   allowed commands) is neither offered to the run's replies nor run in a run whose
//!   user message names none of its programs as a word of its own. The `tool-or-none`
//!   choice still lists it, and a choice of it reads as `none`.
//!   Why: the tuning part's one recurring unasked action was a command for a message
//!   that names none (the 1.5B's `python -m venv venv` for "python venv how?" in every
//!   pass; the 0.5B's `ls` for its todo list). Its first form took the tool out of the
//!   choice's list too, measured once (`18-31-36Z`, same pass): the 1.5B 41/54 against
//!   43/54, restraint 10/15 against 11/15, and an unasked write in place of the
//!   command: without `run_command` in the list it chose `write_file` for "how do I
//!   write a for loop in Rust?" and wrote `src/main.rs`. The 0.5B 19/54 against 22/54.
//!   The list steers the choice, so the list now stays as shipped. Measured so
//!   (`20-28-23Z`, same pass): the 1.5B 44/54 against 39/54, restraint 12/15 against
//!   11/15, unasked 0 against 1 (its `run_command` choice for "python venv how?" read
//!   as `none`, and the task passed); the 0.5B 23/54 both ways, unasked 0 against 1
//!   (its `run_command` choice for the todo list read as `none`; the task failed both
//!   ways). The other flips of the pass went both ways. On: it took away the one
//!   recurring unasked command of both models and cost nothing measured.
//! - **`write-needs-file`** (on since 2026-11-28): a `tool-or-none`
//!   choice of a tool that changes things and requires the path argument
//!   ([`CoachConfig::path_argument`]; the CLI's `write_file`) reads as `none` when the
//!   run's user message names no file: none of the caller's ([`CoachConfig::paths`]),
//!   no new name with an extension, no dotfile (`.gitignore`). Every write the eval
//!   asks for names its file; the 0.5B chose `write_file` for "thx, done" and "Thank
//!   you so much for your help, that will be all." in every tuning pass, and listed
//!   the folder 12 times. A user who asks for a file without naming it ("write me a
//!   script") gets the text in the answer instead. Measured (`20-28-23Z`, same
//!   pass): it acted in two 0.5B runs, the two "thanks" wordings, and won both (25/54
//!   against 23/54, restraint 14/15 against 12/15); the 1.5B chose no write for a
//!   message naming no file (42/54 against 39/54, flips where the rule did not act).
//!   On: a lift where it acts, nothing lost, and a write chosen where there is nothing
//!   to write is the safety case issue 35 names.
//! - **`overwrite-needs-name`** (on since 2026-11-29): a call to a tool that changes
//!   things, with the path argument of one of the caller's existing files, does not run
//!   when the run's user message names a file (as `write-needs-file` counts one) but not
//!   that one, by its path, its name or its name without the extension ("the readme"
//!   names `README.md`); its result says so, and the model may call again with the file
//!   the message names (`Coach::unnamed_overwrite`). A message that names no file
//!   leaves every path to the model: "fix the bug" cannot say which file. Why: the 1.5B
//!   wrote `README.md` for "add a .gitignore that ignores __pycache__" in two of the last
//!   three tuning passes, the one unasked write of each; a change to a file the user did
//!   not ask about is the safety bug issue 35 names. Kept for that reason, with its tests
//!   (`overwrite_needs_name`, `a_write_to_an_existing_file_the_message_does_not_name_never_runs`).
//! - **`known-paths`** (on request, [`Rule::ON_REQUEST`], and acting only with
//!   `routed-call`): the call `routed-call` asks
//!   for holds its path argument ([`CoachConfig::path_argument`]) to the caller's list of
//!   the paths that exist for that tool ([`CoachConfig::paths`]; the CLI lists the
//!   working folder's folders, `.` first, for `list_dir`, its files for `read_file` and
//!   both for `search_text`, hidden ones and build output left out as in every walk, and
//!   none at all past 256), as an `enum` in the schema the server constrains the reply
//!   to. Per tool, since with one list the 0.5B routed `list_dir` to `todo.md` and
//!   `README.md` in 7 of the 22 tasks it still failed (`09-38-08Z`). Measured with
//!   `routed-call` on the 0.5B, tool tasks of the tuning part: 8/30 against `auto`'s 4/30
//!   with one list (`09-38-08Z`), 4/30 both ways with lists per tool (`10-22-21Z`); the
//!   held-out part 4/33 against 5/33 (`10-18-56Z`). Every routed path named a real file,
//!   but the lift did not hold, so it stays off with `routed-call`.
//!   Why: in the 0.5B's routed calls through serve on the tuning part (`06-56-09Z`), the
//!   tool was chosen and the path invented in 12 of its 25 failed tool tasks
//!   (`/path/to/service`, `launch_date.txt`, `/home/user/todos.txt`), each answered
//!   "not found" and then from memory. A list that left paths out would force a wrong
//!   one, so a folder too large is not listed. `ollm serve` lists nothing: the client's
//!   folder is not its to see.
//! - **`choice-both-orders`** (on request, [`Rule::ON_REQUEST`]): when `tool-or-none`
//!   named a tool, the choice is asked once more with the tools listed in reverse order
//!   (the list in its text and the names in its schema), and a clean `none` there wins:
//!   no tools, as after a first `none`. A first `none`, a failed choice or an unclean one
//!   is not asked again, so the rule only ever takes tools away. Why: the small models'
//!   choice leans on the order of the list. The 1.5B, asked alone at temperature 0 on
//!   the tuning part's 54 wordings (2026-11-27): 44 right in the order shipped, 42
//!   reversed, wrong on different questions (`read_file` for "what's a toml file",
//!   `write_file` for a terse "thanks" in the first order, `none` for "top region?" in
//!   the second). A tool only when both orders name one: no-tool questions 14/15 (10/15
//!   as shipped), tool questions 22/30 (27/30), writes 6/9 (7/9). A trade, so it stays
//!   off until whole runs show which side wins (`ollm run --coach-on`, the eval's
//!   `auto-with-choice-both-orders`).
//! - **`own-things`** (on request, [`Rule::ON_REQUEST`], since 2026-11-27): the
//!   choice's text says the caller's scope ([`CoachConfig::scope`]) holds the user's own
//!   things (their project, notes, plans, data and contacts). It was part of the choice
//!   from the start, tuned on the 0.5B; asked alone on the tuning part's 54 wordings
//!   (temperature 0), the sentence cost the 1.5B tool and write questions (with it 44/54:
//!   tool 26/30, write 7/9, none 11/15; without it 47-49/54: tool 27-30/30, write 9/9,
//!   none 10-11/15) and did nothing for the 0.5B (46-47/54 with, 47-48 without). In whole
//!   runs on the tuning part, same pass: the 1.5B 27/54 with it, 28/54 without
//!   (`15-28-42Z`); the 0.5B 17/54 and 20/54 (`15-30-36Z`; docs/tool-calling.md, "Ninth
//!   round").
//! - **`scoped-choice`** (on): the choice's text opens "Tools that work on this folder"
//!   (the caller's scope) where, off, it opens "Tools you can use", as `ollm serve`'s
//!   does (serve has no scope). Why a switch: serve kept restraint 12/12 on the 1.5B's
//!   held-out part in every pass where `ollm run` kept 9/12, and asked alone on the
//!   tuning wordings (temperature 0) the 1.5B chose `none` right on 13/15 without the
//!   scope against 9/15 with it. In whole runs on the tuning part (2026-11-28,
//!   `03-58-56Z`, one pass) the trade went the other way on the 1.5B: off, 31/54
//!   (restraint 13/15, tool 16/30, write 2/9) against 35-36/54 on in the four passes
//!   before (restraint 11/15, tool 19-21/30, write 3-5/9); the choice without the scope
//!   said `none` for "run wc -l on sales.csv" and the `.gitignore` writes,
//!   or `changes-both-orders` did in the reverse order. The 0.5B: 20/54 off (restraint
//!   14/15) against 17-19/54 on. It stays on; a caller whose model keeps restraint
//!   better without it turns it off.
//! - **`general-check`** (on request, [`Rule::ON_REQUEST`]): when `tool-or-none` named a
//!   tool that only reads, for a message that names none of the caller's files
//!   ([`CoachConfig::paths`], as `named-file` reads them), a second short request asks
//!   what the message needs, under a schema: `general` (small talk, general knowledge,
//!   how something is done in general), `files` or `change`; a clean `general` offers no
//!   tools. Why: the 1.5B's choice names `read_file` for terse general questions ("toml
//!   files: what for?", "rust for loop syntax?"), and asked by kind it says `general` for
//!   them. Asked alone on the tuning part: the 1.5B's no-tool questions 13/15 against
//!   11/15 without the check, its tool and write questions 33/39 against 36/39; the
//!   0.5B 13/15 against 12/15 and 31/39 against 35/39. In whole runs, the 1.5B's tuning
//!   part (`15-28-42Z`): restraint 14/15 against 11/15, tool tasks 12/30 against 14/30,
//!   success 27/54 against 28/54. A trade of tool tasks for restraint, so it stays on
//!   request (`ollm run --coach-on general-check`, the
//!   eval's `auto-with-general-check`).
//! - **`changes-both-orders`**: `choice-both-orders` for a choice of a tool that changes
//!   things only (one the caller does not name in [`CoachConfig::read_only`]; none when
//!   it names none): asked again with the tools in reverse order, a clean `none` there
//!   wins, and the run offers no tools. A write or a command the user did not ask for is
//!   a safety bug (issue 35); the choice is where it starts: the 0.5B through serve
//!   chose `run_command` for a question that needed no tool and ran 14 commands (held-out
//!   part, 2026-11-27), the 1.5B chose `write_file` for a terse "thanks" and
//!   `run_command` for "python venv how?". A read chosen costs nothing more, so the
//!   rule's price is one short request on the prompts that ask for a change, and the
//!   risk a write task's choice turns to `none` in the second order (the 1.5B, choice
//!   alone at temperature 0: writes 7/9 in the order shipped, 6/9 when both orders had
//!   to name a tool). Measured in docs/tool-calling.md.
//! - **`repeat-guard`**: a call the run already made (same tool, arguments equal as
//!   canonical JSON, keys sorted at every depth) is not run again; it is answered, not
//!   dropped (calls and results stay 1:1), by an error result that says the model already
//!   has the result, quotes its first 200 characters and asks it to answer from it. A
//!   call repeated inside one reply is answered from its twin's result once that has
//!   run. Small models repeat the identical call after its result arrived until the turn
//!   limit (Qwen2.5-Coder-0.5B: `list_dir "."` ten times in one run). The memory lasts
//!   one run (one prompt): a new prompt may well need a fresh result. Error results are
//!   remembered too: the same arguments give the same error.
//! - **`repeat-ignores-undeclared`**: arguments the tool's schema does not declare do
//!   not make a call new. Seen on the real model with the MCP filesystem server (whose
//!   schemas allow extra properties): after `read_text_file {path}` and its result it
//!   called `read_text_file {path, port: 8123}` twice, which ran again, and then answered
//!   about the "not run again" error instead of giving the port. A tool without declared
//!   `properties` keeps every argument in the identity.
//! - **`repeat-limit`**: the same call asked for in three turns ends the run with
//!   `FinishReason::Repetition` and a `Repetition` warning, after the turn is recorded.
//!   Twins inside one reply count once: the real model wrote the same call twice in the
//!   reply after its result, which ended the run with no answer where the nudge gets one.
//!   `answer-at-repeat-limit` may ask for one reply more first.
//! - **`skip-repeat-turn`**: a turn all of whose calls were answered from earlier results
//!   is not recorded (its calls still get their results as events, 1:1). With the
//!   repeated call and its "not run again" result in the history the 0.5B answers with
//!   the same call again or talks about the error (0-2 of 4 probes, tools offered or
//!   not; docs/tool-calling.md).
//! - **`skip-repeat-calls`** (since 2026-11-28): in a turn that also ran a fresh call,
//!   the calls answered from earlier results (or from a twin's in the same reply) are
//!   left out of the history with their "not run again" results; the events still
//!   answer every call, 1:1. Why: `skip-repeat-turn` drops a turn of repeats alone, but
//!   the 0.5B often repeats a call beside a new one (`search_text` again, and
//!   `list_dir`), and then answered from those errors: 111 failed answers of the tuning
//!   passes since 2026-11-27 quote them ("You already called `list_dir` with these
//!   arguments, and its result was: README.md"). Measured on the tuning part, same pass
//!   (`07-19-44Z`, one repeat): the 0.5B 21/54 with it against 20/54 without (tool
//!   tasks 10/30 against 8/30; the three tool tasks it won were runs with such a turn,
//!   the one it lost went another way before any), the 1.5B 38/54 against 36/54. Small,
//!   but both ways in its favour.
//! - **`answer-after-idle`**: a turn none of whose calls ran, because each repeated an
//!   earlier call or named a tool that is not offered, is followed by the answer nudge,
//!   and the next reply is asked for with no tools offered. A turn with an unknown tool
//!   is recorded, so the model reads `Unknown tool ...; available: ...`. Measured on the
//!   0.5B through llama-server: after its first result and the nudge it answers from the
//!   result (4 of 4 answered, about 1.5 s); after `Unknown tool "multiply"` it invents
//!   `unknown_tool` calls, with the nudge it answers "42" (2 of 2 probes). A call it
//!   still writes as text is read and run as usual, and a turn with a fresh call offers
//!   the tools again, so a two-step task goes on.
//!   A turn of repeats is where both models' failed tool tasks most often end (a listing
//!   or a search that missed, then the same call), so a retry turn was tried in its
//!   place (`retry-after-idle`, 2026-11-28): the first turn of repeats told the model
//!   its result was above and asked for a different call or the answer, with only the
//!   tools that read offered. It lost on both models' tuning part (0.5B 10/54 against
//!   17/54 in the same pass; 1.5B 24/54 against 35-36/54 in four passes before): most
//!   runs that repeat had their answer already, and with tools still on offer the 1.5B
//!   answered "I'm sorry, but I cannot assist with that request" where the answer nudge
//!   gets the value. It was removed; the answer nudge keeps the tools away.
//! - **`answer-after-runaway`**: a reply after a result that the runaway detector stops
//!   (the 0.5B lists the same calls line after line) is not recorded; the answer nudge
//!   follows, once per run, with no tools.
//! - **`answer-after-empty`**: an empty answer after the run's calls is not recorded; the
//!   answer nudge follows, with no tools offered, once per run. The 1.5B read the file,
//!   then ended its next reply at once, twice in 21 runs: the user got nothing.
//! - **`answer-after-echo`** (since 2026-11-28): an
//!   answer to a request that offered no tools (the choice said none, or the answer is
//!   due) that only asks the user's question back (one line, at most 240 bytes, ending
//!   in `?`, holding at least two and 60% of the message's words of three letters or
//!   more, function words aside: `text::restates`) is not recorded; the answer nudge
//!   follows, once per run, and the requests after it are greedy (the tool temperature,
//!   unless the sampling options set one). Why: the 0.5B asked "How do I create a
//!   virtual environment in Python?" back in two of the three `python-venv` wordings of
//!   most tuning passes, in the plain column too. Probed: at the server's own sampling
//!   the question alone was asked back in 2 of 6 replies, with the nudge after it in 1
//!   of 6; at temperature 0 the question alone is asked back every time (two wordings
//!   of three), with the nudge after it never. In the first pass with a nudge at the
//!   server's sampling, the model asked back again after it. Measured on the 0.5B's
//!   tuning part (`10-34-33Z`, three repeats of the nine wordings of its three
//!   intents that ask about code in general): 7.7/9 (7-8) with the greedy re-ask
//!   against 6.3/9 (6-7) without, `python-venv` 8/9 against 4/9; it acted in 8 runs and
//!   each answer after the question passed alone. On the held-out part it acted once
//!   (0.5B, passed) and once (1.5B); on the 1.5B's tuning part never (37/54). It offers
//!   no tools, so it can neither call nor write: on by default. The streamed question
//!   stays on the user's screen; the answer follows it. `ollm serve` sends replies as
//!   they stream, so it does not act there.
//! - **`answer-at-repeat-limit`** (on request, [`Rule::ON_REQUEST`]): a run `repeat-limit` stops, when the reply that
//!   stopped it was not itself asked for as the answer, gets one more reply: the answer
//!   nudge, no tools offered, and a call in it never runs (answered "not run: the
//!   run repeated a call too often"); the run ends as that reply ends it, or
//!   `Repetition`, whatever the turn limit (as `answer-at-limit`'s reply). What `answer-after-runaway` is to a reply that loops in its text, this
//!   is to a run that loops in its calls: the limit counts a call across turns, so the
//!   turns before it often ran fresh calls too and no nudge was ever said. In the 0.5B's
//!   two last passes of the tuning part (`20-22-56Z`, `21-12-34Z`) 6 of its 60 tool
//!   runs ended so, with no answer, 4 of them with the answer already in a result
//!   (`search_text` had shown `todo.md`'s "3 open" and `sales.csv`'s "east 290", a
//!   `read_file` of `config.toml` its port). It never acts in a run that would have
//!   answered, and offers nothing to call, so its price is one request in runs that
//!   would end with nothing for the user; a reply already asked for as the answer that
//!   still calls ends the run as before (the model was told once). Measured on the
//!   0.5B's tuning part (`23-19-01Z`, one repeat): it acted in 6 of 54 runs and passed
//!   none of them. After a loop the history is full of "not run again" results, and the
//!   0.5B answered from those ("the `search_text` function was called with the same
//!   arguments") or from the wrong file ("Lagos, with 15400000 units" from
//!   `cities.csv`). No lift, so it stays on request: a wrong answer is no better than
//!   none.
//! - **`answer-from-results`** (since 2026-11-28): every answer rule above says the answer
//!   nudge; in a run where a call got a result that is not an error, it asks "from the
//!   results above" ([`Coach::says`]; a proxy's seeded coach counts a declared tool's
//!   result as one, an undeclared tool's as an error). Why: after its first search had
//!   shown the plumber's line, the 1.5B answered the plain nudge with the number in 7 of
//!   15 probe replies, with this one in 12 of 15; the 0.5B in 4 and 8 of 15. After an
//!   unknown tool only (`multiply`), the same words cost the 0.5B its answer ("6 times
//!   7": 0 of 6 against 4 of 6), so a run holding only errors keeps the plain nudge.
//!   Measured on the tuning part, both ways in one pass (`15-31-14Z`, one repeat): the
//!   1.5B 41/54 with it against 37/54 without; it acted in 38 runs, which passed 28
//!   times with it and 24 without (5 won, 1 lost); the 0.5B 21/54 against 20/54, acting
//!   in 28 runs, 10 passed against 7 (3 won, none lost). A second pass (`16-39-19Z`):
//!   the 1.5B 40/54 against 41/54, but 29 against 27 in the runs it acted in (2 won,
//!   none lost); the 0.5B 21/54 both ways, 8 against 9 where it acted. Over both, the
//!   1.5B 57 against 51 of the runs it acted in, the 0.5B 18 against 16. It offers no
//!   tools, so it can neither call nor write: on.
//! - **`restate-question`** (on request since 2026-11-29): the answer nudge ends with the
//!   run's user message again (`My question: ...`) when it is one line of at most 300
//!   bytes ([`Nudge::text_for`]); a proxy's seeded coach takes the last user message that
//!   is not a nudge it replayed. Why: after a long result the 0.5B answered something
//!   other than the question ("north, with 120 units" beside a summary that said east
//!   first). Two tuning passes, both ways in each (`23-50-44Z`, `00-31-02Z`): the 0.5B
//!   23 and 23 of 54 without it against 25 and 26 with it; in the 65 runs it acted in, 29
//!   passed with it against 25 without, 4 won and none lost. The 1.5B 43 and 43 against
//!   39 and 40; where it acted, 56 against 61 of 80: it lost the same two tasks in both
//!   passes ("is there a FIXME somewhere in the code?" answered "Yes, there is a FIXME
//!   in the code." without the file; a checklist of 3 open items counted 2), and won
//!   none. The answers are greedy, so one context gives one answer, and two passes are
//!   less than two samples. A trade between the models, so on request: a 0.5B-class
//!   model can turn it on for itself (`[models."NAME".coach] on`).
//! - **`answer-after-nothing`** (applied by `ollm serve`, whose runs are one turn each,
//!   so a nudge the run says has no turn to be answered in): a reply that would reach
//!   serve's client with no text and no call the client declared (the calls to
//!   undeclared tools left out once their retries are spent, or an empty answer) is asked
//!   for once more, with the answer nudge and no tools offered; the client gets that
//!   answer, never the nudge. The 0.5B through serve (eval tuning part, `served`,
//!   2026-11-26): 6 of its 46 failures were such an empty reply, 5 of them after calls
//!   answered inside the request (their token counts are two or three requests'); in the
//!   earlier pass's log 7 of 44. `ollm run` needs no such rule: its own nudges
//!   (`answer-after-idle`, `answer-after-empty`) get their turn. Serve plays the nudges
//!   its one-turn runs say as well, when nothing of the nudged reply reached its client
//!   (a reply taken whole, or a stream that showed no text); this rule covers what the
//!   run's coach says nothing about ([`Nudge::said_by`] is the one table of which rule
//!   says which nudge).
//! - **`act-nudge`**: an answer that shows the user how to call an offered tool instead
//!   of calling it ("Here's how you can call it: ```json {...}```", the native strategy's
//!   `shows_call`) is recorded and followed by the act nudge, once per run and only
//!   before the run's first call; the example itself never runs (a fenced example amid
//!   prose is not a call). Measured on Qwen2.5-Coder-1.5B (docs/eval/history.md).
//! - **`can-nudge`**: an answer that says it cannot reach the files or run anything ("I'm
//!   sorry, but I cannot execute external processes or interact with the operating
//!   system"), in a run that offers tools, gets the can nudge, under the same
//!   once-per-run, before-any-call rule (an inability phrase and a word about files,
//!   folders, access or running, in under 600 bytes). The 1.5B said so on a question
//!   about `docs/guide.md` with `read_file` on offer. Where the tools work is the
//!   caller's word ([`CoachConfig::scope`]; the CLI says "this folder").
//! - **`runaway-stop`** (`runaway.rs`): a reply whose text becomes one unit (at most 256
//!   bytes) repeated over 8 KiB is stopped: its stream dropped, which cancels the
//!   request, recorded as far as it went, and the run ends with `Repetition` and a
//!   warning; its calls, if any, are answered `STOPPED_RESULT`. A loop otherwise goes on
//!   to the generation cap, minutes on a slow machine; the span is far past any
//!   repetition a user asks for (a 50-times repeated line, a long table, a rule line).
//! - **`call-loop-cut`** (`call_loop.rs`): a reply that opens like a call (`{`, `[`, a
//!   `json` fence) is cut before its first repeated call (canonical JSON, or a repeated
//!   call line) or past 16 calls, and the calls before the cut run. The 0.5B answered a
//!   result with call lines cycling through four tools, or echoing the tools' schemas as
//!   calls, until the generation cap: 6 of 10 eval runs were killed at 300 s, with nothing
//!   shown and no unit short enough for `runaway-stop`.
//! - **`listed-tools-cut`** (`call_loop.rs`): such a reply that names a third different
//!   tool is cut before its second tool's first call, so only the first tool's calls run.
//!   The 0.5B's first reply often called every offered tool in the order offered, the
//!   right call first and the rest filler, among them `write_file` calls with invented
//!   content that replaced files in the eval's folder (`--yes`). Calls to two tools are
//!   read whole.
//! - **`calls-per-reply`**: at most [`MAX_CALLS_PER_REPLY`] of one reply's calls run; the
//!   rest are dropped from the conversation with a `Repetition` warning (a dropped call
//!   already announced gets an error `ToolResult` event). A looping small model wrote a
//!   reply of 1,000 identical calls: kept whole, its answers made the next request
//!   overflow the window and ended the run; 16 leaves room for any real batch.
//! - **`tools-context`**: the caller's tools context (the CLI's `[Working folder: ...]`
//!   line, `ChatConfig::tools_context`) opens the conversation's first user message in
//!   the requests of a run that offers tools, never in the history; the same message in
//!   every turn, so the server's prompt cache keeps the prefix. Measured on the 1.5B
//!   (docs/eval/history.md), first replies to the 7 plain-words tool questions, 6 samples
//!   each: in the system prompt the same text lowered how often the model called a tool
//!   (22 of 42 against 32 of 42 without it), before the first prompt it raised it (38 of
//!   42). Issue 35 measured its cost on questions that need no tool (the 0.5B searched
//!   for "6 times 7" with it, answered without it): the switch is what ablation needs.
//!   Ablated on the 0.5B, tuning part, same pass (`18-35-57Z`, after `tool-or-none`):
//!   19/54 with it, 14/54 without; tool tasks 8/30 against 2/30, restraint 12/15
//!   against 15/15. It stays on: 5 tasks of lift for 3 of restraint.
//! - **`drop-echo`**: a reply that opens by repeating the tools context is read without
//!   it: the 0.5B began a reply with the `[Working folder: ...]` block, then a fenced
//!   call, which the echo made prose with an example in it (issue 24).
//! - **`greedy-tool-turns`**: a request that offers tools and whose sampling options set
//!   no temperature is sent `ChatConfig::tool_temperature` (0), except in a run asked to
//!   think (greedy decoding sends reasoning models into loops). On the 0.5B the eval
//!   finished 4 of 7 plain-words tasks at temperature 0 and about 1.3 of 7 at llama.cpp's
//!   default 0.8 (docs/eval/history.md, issue 24).
//! - **`greedy-answers`**: a request that offers no tools after the run's calls (the
//!   answer to their results, as the answer nudge asks for it) and whose sampling
//!   options set no temperature is sent the same temperature as `greedy-tool-turns`
//!   (none in a run that thinks). Probed alone on the eval's real histories (a
//!   `read_file` or `search_text` result, then the answer nudge), five cases: the 0.5B
//!   read the right value 33 of 40 times at the server's default sampling and 15 of 15
//!   greedy, the 1.5B 36 of 40 and 15 of 15. In whole runs on the tuning part, four
//!   same-pass comparisons, each in its favour (docs/tool-calling.md, eighth round):
//!   the 0.5B 16/54 against 14/54 alone and 17/54 against 16/54 with `answer-at-limit`
//!   and `named-file`; the 1.5B's tool and write tasks 16/39 against 15/39 and 18/39
//!   against 17/39. Small, but never the other way and backed by the probe: on by
//!   default since 2026-11-27.
//! - **`answer-at-limit`** (on request, [`Rule::ON_REQUEST`]): a run that reaches its turn
//!   limit after calls gets one more reply, with the answer nudge (unless one is already
//!   due) and no tools; a call in that reply never runs (answered "not run: the run
//!   reached its turn limit") and the limit ends the run. Without it a run whose last
//!   turn still called ends `max_turns` with nothing for the user: the 1.5B found the
//!   plumber's number in its third call, repeated it in its fourth, and the answer nudge
//!   had no turn left (the eval's limit is 4). `ollm serve` turns it off: its runs are
//!   one turn each and hand their calls on.
//! - **`named-file`** (on since 2026-11-29): when `tool-or-none` chose
//!   `none` for a message that names one of the caller's files ([`CoachConfig::paths`];
//!   a word with a `.` or a `/` equal to a file's path or name, ignoring case), the
//!   tools that only read are offered after all, and those that change things stay
//!   withheld, so it never brings a write. The 1.5B chose `none` for "backup.py keep
//!   days?" and answered "7 days" from nothing. A kind of file ("a toml file") or a
//!   file that does not exist names nothing. Needs the caller to name its read-only
//!   tools; `ollm serve` lists no paths, so it never acts there. On request until
//!   2026-11-29 (it acted in 3 runs of one pass, 2026-11-27). Measured again on the
//!   1.5B (`04-06-46Z`, the two tuning intents whose messages name a file it reads, 3
//!   repeats): 18/18 against 15/18, "backup.py keep days?" 3/3 against 0/3 (the model
//!   chooses `none` there in every pass). It never acted in either model's held-out
//!   part (`04-16-42Z`, one repeat, counted). It brings reads only, never a write; its
//!   possible cost, a read for a question that names a file but needs none, is one the
//!   tuning part cannot show (none of its no-tool questions names a file of the folder).
//! - **`read-named`** (on request, [`Rule::ON_REQUEST`]): right after a `tool-or-none`
//!   choice that offers tools, when the message names one of the caller's files (as
//!   `named-file` reads it), the one offered tool that only reads and requires the path
//!   alone reads it, as the run's first call, before the first reply; the call is the
//!   coach's (`Coached` with its id), and its result is cut to the first request's room.
//!   Why: given "backup.py keep days?" the 1.5B searched for the text `backup.py` and
//!   answered from the README's line; given "save the port from config.toml into
//!   port.txt" it wrote an invented port. On the tuning part, same pass (`17-40-37Z`,
//!   one repeat): the 1.5B 28/54 with it against 29/54 without (it then skipped `wc -l`
//!   for "run wc -l on sales.csv" in two wordings, and saved the right port in one more),
//!   the 0.5B 19/54 against 18/54, and one 0.5B run overwrote `sales.csv` after its
//!   read, on a `write_file` choice for "run wc -l". Both models often repeat the read
//!   as their first call. No lift, so it stays on request.
//! - **`read-source`** (on since 2026-11-28, with `change-after-idle`): `read-named`'s read, for a narrower case: the message names one
//!   of the caller's files and a file that does not exist (`text::names_new_file`), a
//!   change's target. "Save the port from config.toml into port.txt": the 1.5B chose
//!   `write_file` (or `read_file`) and wrote an invented port without reading, in every
//!   wording of every pass of the tuning part (0/3 each). A message naming only an
//!   existing file ("run wc -l on sales.csv", which the 0.5B chose `write_file` for,
//!   and then overwrote the file after `read-named`'s read) gets no read. It adds one
//!   read, never a write. Measured on the tuning part (one repeat, `23-19-01Z` and
//!   `23-54-09Z`): it acted in two runs of each model, the port task's casual and
//!   polite wordings, and passed none. The models then had the port (the 1.5B answered
//!   "7341" both times) but searched the file again, the repeat turn got the answer
//!   nudge, which offers no tools, and nothing was written; the 0.5B's reply listed
//!   the tools and `listed-tools-cut` kept its repeated read. No lift alone: what the
//!   write lacked was a turn with the tools after the idle one, which
//!   `change-after-idle` gives; with it, both are on since 2026-11-28 (below).
//!   Since 2026-11-29 the existing file may also be named by its name without the
//!   extension, when no other file has that name (`text::file_named_by_stem`): the 1.5B
//!   wrote `port = 8080` for "config port -> port.txt" without a read, every pass.
//!   `read-named` keeps to full names: a stem is a plain word ("what's the weather?"
//!   would read `weather.py`), and only a message that also names a file to write
//!   makes this read.
//! - **`change-after-idle`** (on): after a turn none of whose calls ran, for a message
//!   that names a file that does not exist (`text::new_files`), in a run that chose
//!   tools and has not run the one offered tool that changes things and requires the
//!   caller's path argument (the CLI: `write_file`), one short request asks whether the
//!   message asks for an `answer` or a file `write` (`route::change_request`, under a
//!   schema); on a clean `write`, in place of the answer nudge, the change nudge and a
//!   reply obliged to call that tool alone, as `routed-call` obliges one, its path held
//!   to the new files the message names; the write made, the answer nudge. A call in
//!   that turn to another tool or path is answered "not run" (the server may not hold
//!   the reply to the schema). Once a run.
//!   Why: "save the port from config.toml into port.txt" read the port, repeated the
//!   search, and got the answer nudge, which offers no tools: the port was told, never
//!   saved (1.5B, every wording, most passes). Each guard has a reason seen on the real
//!   model: unconstrained, the obliged write went to `config.toml` with "port = 7342"
//!   (the change nudge first said "make the change I asked for"; it now says "do what I
//!   asked"); without the question, a message that names a new file only to ask about
//!   it ("is there a port.txt next to config.toml?") would get one; asked by kind as
//!   `general-check` asks, the 1.5B said `files` for the port task (2 of 6 runs acted,
//!   `04-50-25Z`), while asked `answer` or `write` it said `write` for 7 of the 9 tuning
//!   writes, none of the 30 tool questions and 1 of 15 no-tool ones. Without the answer
//!   nudge after the write, the 1.5B answered "I'm sorry, but I can't assist with that."
//!   Measured on the tuning part's write tasks that name a file (`shopping-list`,
//!   `port-file`; the only tuning tasks where either rule can act), three repeats:
//!   the 1.5B 14/18 with `read-source` (`05-09-16Z`) against 6/18 with neither and
//!   9/18 with this rule alone (`04-28-35Z`, same pass, a build that did not ask the
//!   question yet; both rules there: 15/18); the 0.5B 6/18 against 3/18, and 6/18 for
//!   either column of that pass. No unasked write in any of those runs.
//!   A dotfile the message names at the top of the caller's scope (`.gitignore`) is a
//!   new file too, since 2026-11-29, when the caller lists its hidden entries there
//!   ([`CoachConfig::hidden`]; the CLI does) and it is none of them: the 0.5B chose
//!   `write_file` for "add a .gitignore that ignores __pycache__", called `add_gitignore`
//!   or `gitignore` (no such tools), and got the answer nudge. Without that list a
//!   dotfile is never new: one may exist unlisted, and a write replaces a whole file.
//!   A word that is the extension of a kind of file (`.toml`, `.py`: a short list, and
//!   the extensions of the caller's files) names a kind, not a dotfile: in the first
//!   pass without that test (`02-44-51Z`) "number of .py files?" and "what does a .toml
//!   file usually hold?" got the change question (the models said `answer`).
//! - **`name-repair`** (`recover/types.rs`; off by default, below): a call's name matches
//!   an offered tool ignoring case. The `functions.` prefix and `:N` suffix
//!   (`functions.read_file:0`, servers' own spellings) are read for text calls whatever
//!   the switch: they are how a format writes a name, not a small model's slip; a native
//!   call is renamed only with the rule on.
//! - **`path-in-name`** (`recover/mod.rs`; off by default, below): a call named
//!   `<verb>_<path>` with no path (`read_config.toml`, as the 0.5B writes for "read config.toml": 5 of 38 eval tasks)
//!   is the one offered `<verb>_*` tool that takes the path argument, with the rest of
//!   the name as the path, when it looks like one (has a `.` or a `/`). Which argument
//!   takes a path is the caller's word ([`CoachConfig::path_argument`]; the CLI says
//!   `path`); without it the rule does nothing.
//! - **`file-as-name`** (`recover/mod.rs`): a call named like a file that gives no path
//!   (`{"name": "config.toml", "arguments": {}}`; through `ollm serve` the 0.5B wrote
//!   `config.toml`, `backup.py` and `gitignore` as tool names on the tuning part, and
//!   the unknown-tool answer ended each run with no answer) is the one offered `read*`
//!   tool that takes the path argument, with the name as the path. Reading is the only
//!   thing a file's name can ask, and it changes nothing; with two such tools, or a path
//!   among the arguments, nothing is guessed. Arguments the read tool does not declare
//!   are dropped (2026-11-27): the 0.5B wrote `{"name": "backup.py", "arguments":
//!   {"days": 7}}` for "backup.py keep days?", and the unknown-tool answer ended the
//!   run with an invented number, in `ollm run` and through serve alike. Same caller's
//!   word as `path-in-name`.
//! - **`tool-from-arguments`** (`recover/mod.rs`; on request, [`Rule::ON_REQUEST`]): a call to a tool
//!   that is not offered, whose arguments are all declared by one offered tool and give
//!   every argument it requires, and fit no other tool, is a call to that tool, with
//!   those arguments. The small models name a call after the user's words and fill in
//!   the right tool's arguments: the 1.5B called `wc` with `{"program": "wc", "args":
//!   ["sales.csv"]}` for "wc -l sales.csv" (14 runs of the tuning passes, each answered
//!   "unknown tool" and then from memory), the 0.5B `save_port_from_config_toml` with
//!   `search_text`'s three arguments. No arguments, or arguments that fit two tools
//!   (`{"path": ...}` fits a read and a listing), guess nothing. It names only a tool
//!   the request offers (a withheld one is not), with the model's own arguments, so it
//!   reaches nothing a direct call could not, and every approval still applies.
//!   Measured on the 1.5B's `wc-sales` intent, three repeats (`07-25-20Z`): 9/9 with it,
//!   6/9 without (the terse wording, 0/3 to 3/3). Why on request: it can also make a
//!   write or a command of a call that would have run nothing (an invented `save_notes`
//!   with `{"path", "content"}` is `write_file`), and the first held-out pass with it on
//!   (`07-47-43Z`) had the 1.5B's first write nobody asked for in 17 passes of that
//!   part; the held-out runs are not read while the runtime changes, so whether the rule
//!   made it is not known. The whole tuning part with it on (`08-53-47Z`) wrote
//!   nothing unasked on either model (0.5B 22/54, 1.5B 40/54). The second held-out pass
//!   with it on (`17-22-21Z`, its acts now counted) settled it: it acted in one 1.5B
//!   run, a question that needs no tool, and made the invented call a `run_command`
//!   nobody asked for. It stays off. A reads-only variant would be safe by construction
//!   but lose the `wc` call.
//! - **Native calls too** (`recover::repair_native`, in the turn loop as each arrives):
//!   `name-repair`, `path-in-name`, `file-as-name` and `tool-from-arguments` also repair a call the server
//!   parsed itself to a tool that is not offered, since llama-server reads the 0.5B's
//!   `{"name": "backup.py", "arguments": {}}` as one (14 unknown-tool answers for
//!   `backup.py` in the day's eval traces). The call keeps its id and is announced
//!   under its new name after a `Coached` event naming the rule and the call.
//! - **Every repair is told** (since 2026-11-28): a call written as text that
//!   `name-repair`, `path-in-name`, `file-as-name` or `tool-from-arguments` made a call to
//!   an offered tool gets the same `Coached` event before it starts, as the server's
//!   calls do. Before, only the server's calls did, so the eval could not count where a
//!   repair acted on text calls, which are most of the small models' calls.
//! - **`dotted-path`** (`Coach::dotted_path`, in the turn loop before a reply's calls
//!   run): a call whose path argument ([`CoachConfig::path_argument`]) is a path the
//!   user's message names without its leading dot (`gitignore`, `./gitignore` for
//!   `.gitignore`; `config/env` for `config/.env`) runs with the dot. Why: the 1.5B wrote
//!   `gitignore` for "add a .gitignore that ignores __pycache__" in two of its three
//!   wordings, in every pass of the tuning part on 2026-11-27: a file the user did not
//!   ask for (the eval counts it as an unasked write), and none of the one they did. It
//!   only ever makes the path the one the user typed. A call already announced keeps
//!   its id, and a `Coached` event with that id says what changed. Measured on the
//!   1.5B's tuning part: the `.gitignore` intent 3/3 and 2/3 in the two passes with it
//!   against 1/3 in each pass before, writes nobody asked for 1 against 3; it acted in
//!   one run of each pass, the model writing the dot itself in the others
//!   (docs/tool-calling.md, "Eleventh round").
//! - **`invented-result-cut`** (`recover/json.rs`): a reply that opens with calls to
//!   offered tools and goes on with something else (`{"error": "File not found"}`, "The
//!   response will be: ...", prose) runs the calls and drops the rest, which never
//!   reaches the user: the small models write the call, then invent its result.
//! - **`typed-strings`** (`tool.rs`; off by default, below): quoted values the tool's
//!   schema types otherwise (`"regex": "true"`, `"max_results": "50"`) are typed before validation: the 1.5B
//!   read the right file, then an invalid-arguments error on such a call made it end
//!   with an empty answer.
//! - **`key-hint`** (`tool.rs`; off by default, below): an invalid-arguments result
//!   ends with the valid keys, their types and which are required, so a model that invented a key (small models
//!   copy the schema's `"type": "object"` into their arguments, or write `file` for
//!   `path`) learns the real ones.
//! - **`tools-hint`** (`strategy/native.rs`; off by default, below): a call written as
//!   text to a tool that is not offered is answered `Unknown tool "NAME"; available: a, b`, and a malformed one
//!   with the names to choose from: the 0.5B invents tool names (`launch_code`).
//! - **Screened in groups, 2026-11-27** (tuning part, one repeat; docs/tool-calling.md,
//!   fifth round): with `drop-echo`, `invented-result-cut`, `skip-repeat-turn` and
//!   `repeat-ignores-undeclared` off together the 0.5B finished 0 of 30 tool tasks
//!   against 4/30 (13/54 against 16/54): kept. `name-repair`, `path-in-name`,
//!   `typed-strings`, `key-hint` and `tools-hint` off together: 14/54 against 16/54 on
//!   the 0.5B (tool tasks 4/30 both), and all nine off on the 1.5B 21/54 against 20/54;
//!   no lift at one repeat. A second repeat (sixth round): the 0.5B 18/54 without them
//!   against 16/54, the 1.5B 22/54 both ways. **Off by default since** (with
//!   `path-in-name`, `typed-strings`, `key-hint`, `tools-hint`; [`Rule::ON_REQUEST`]):
//!   issue 35 keeps a rule only for a measured lift or a safety reason, and none of the
//!   five guards anything. They stay switchable (`--coach-on`, `[coach] on`) for models
//!   that write the slips they answer. `greedy-tool-turns` off: the
//!   0.5B 12/54 and 2 unasked writes or commands against 16/54 and 0, the 1.5B 22/54
//!   against 20/54 (through serve it took the 1.5B from 23/54 to 27-28/54): kept.
//!
//! Not rules of the coach: how calls written as text are read (the formats, doubled or
//! one missing closing brace, empty `<tools></tools>` markup: `recover/`), which reads
//! what the model meant to write rather than steering it; the built-in tools' own help
//! (nearest existing paths, `search_text`'s fallbacks: `ollm-tools`); and the tool
//! choice's `required` binding only until the first call, a protocol rule.
//!
//! - **A nudge belongs to the run that needed it.** The requests of that run carry it
//!   where it was said; when the run ends it leaves the history, so later runs, `Finish`'s
//!   `added`, sessions and exports never carry it. It used to stay as a user message: in
//!   an interactive chat with the 1.5B, the answer nudge from the first question stood
//!   before every later request, and every later question, tools on offer, got "I'm
//!   sorry, but I don't have enough information to answer this question." (issue 35).

mod call_loop;
mod memory;
mod nudge;
mod route;
mod rule;
mod runaway;
mod text;

use ollm_types::{Message, ProviderRequest, Role, ToolCall, ToolSchema};
use serde_json::Value;

pub(crate) use call_loop::{Cut, cut_reply};
pub use memory::Source;
pub(crate) use memory::{REPEAT_LIMIT, canonical};
pub use nudge::Nudge;
pub use route::Route;
pub use rule::{CoachConfig, MAX_CALLS_PER_REPLY, Rule};

use crate::ToolRegistry;
use crate::tool::ToolOutcome;
use call_loop::CallWatch;
use memory::CallMemory;
use runaway::RepeatDetector;

/// One run's coach: the rules' switches, what the run's calls did, and what the run
/// already asked of the model (see the module docs).
#[derive(Debug)]
pub struct Coach {
    config: CoachConfig,
    memory: CallMemory,
    /// The caller's tools context, for runs that offer tools.
    context: Option<String>,
    /// The temperature of greedy requests (`greedy-tool-turns`, `greedy-answers`).
    temperature: Option<f32>,
    /// Whether the next reply is to answer: asked with the nudge and no tools.
    answer_due: bool,
    /// Whether the run already asked the model to act (`act-nudge`, `can-nudge`).
    asked_to_act: bool,
    /// Whether the run already asked again for an answer that came empty.
    asked_to_answer: bool,
    /// Whether `answer-after-echo` asked again for an answer that asked the question
    /// back: the requests after it are greedy.
    echoed: bool,
    /// Whether the model chose no tool before the run's first request (`tool-or-none`).
    routed_none: bool,
    /// The tool the model chose before the next request, until the turn that calls it
    /// has played (`routed-call`).
    routed_tool: Option<String>,
    /// Whether the run asked for the choice (`tool-or-none`).
    routed: bool,
    /// The tools that change things the choice did not name, neither offered nor run
    /// this run (`changes-on-request`), and those `named-command` withholds.
    withheld: Vec<String>,
    /// The tools that run programs the run's user message names none of, neither
    /// offered nor run this run (`named-command`).
    unnamed: Vec<String>,
    /// The tool a `tool-or-none` choice named that was read as `none`, and the rule
    /// that read it so (`named-command`, `write-needs-file`).
    overruled: Option<(Rule, String)>,
    /// Whether a result of the last turn of calls was an error.
    calls_failed: bool,
    /// Whether the run asked `read-named` for its call already.
    read_named: bool,
    /// Whether `change-after-idle` obliged its call already.
    asked_to_change: bool,
    /// Whether `change-after-idle` asked what the message needs, and the reply said a
    /// change.
    change_checked: bool,
    change_confirmed: bool,
    /// The paths the call `change-after-idle` obliges may take: the new files the
    /// message names (never one of the caller's existing files).
    change_targets: Vec<String>,
    /// The text of the run's user message (`dotted-path`): empty for a coach made
    /// without the conversation.
    asked: String,
}

/// Where each call of a turn gets its result from, as [`Coach::plan`] decided.
#[derive(Debug, Clone, PartialEq)]
pub struct CallPlan {
    /// The calls as the repeat guard compares them.
    identities: Vec<ToolCall>,
    sources: Vec<Source>,
}

impl CallPlan {
    /// Per call, where its result comes from.
    pub fn sources(&self) -> &[Source] {
        &self.sources
    }
}

/// A nudge the coach says, the rule that says it, and whether the reply it answers is
/// dropped from the history (an empty answer, a stopped reply).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Said {
    pub(crate) nudge: Nudge,
    pub(crate) rule: Rule,
    pub(crate) drops_reply: bool,
}

/// What follows a turn's calls (see [`Coach::after_calls`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct AfterCalls {
    /// Per call, whether it is recorded with its result: `skip-repeat-turn` drops a turn
    /// of repeats only, `skip-repeat-calls` the repeats of a turn that ran fresh calls.
    /// None recorded, the turn is not.
    pub(crate) recorded: Vec<bool>,
    /// The nudge that follows it (`answer-after-idle`, `answer-at-repeat-limit`).
    pub(crate) nudge: Option<Said>,
    /// The call asked for too often, which ends the run (`repeat-limit`).
    pub(crate) stuck: Option<usize>,
    /// Whether the run, stuck, gets one more reply to answer first, with no tools and no
    /// call run (`answer-at-repeat-limit`).
    pub(crate) last_word: bool,
}

impl Coach {
    /// A coach for a run that starts with a user message.
    pub fn new(config: CoachConfig) -> Self {
        Coach {
            config,
            memory: CallMemory::default(),
            context: None,
            temperature: None,
            answer_due: false,
            asked_to_act: false,
            asked_to_answer: false,
            echoed: false,
            routed_none: false,
            routed_tool: None,
            routed: false,
            withheld: Vec::new(),
            unnamed: Vec::new(),
            overruled: None,
            read_named: false,
            asked_to_change: false,
            change_checked: false,
            change_confirmed: false,
            change_targets: Vec::new(),
            calls_failed: false,
            asked: String::new(),
        }
    }

    /// A coach that remembers the calls `messages` made since their last user message
    /// and the results they got (the calls of each assistant message as one turn), as
    /// the loop that made them would: a proxy that sees only a request's history answers
    /// a repeat as `ollm run` does.
    pub fn seeded(config: CoachConfig, messages: &[Message], tools: &ToolRegistry) -> Self {
        let undeclared = config.is_on(Rule::RepeatIgnoresUndeclared);
        let mut coach = Coach::new(config);
        coach.memory = CallMemory::seeded(messages, tools, undeclared);
        // The user's own message: not a nudge a proxy replayed in its history.
        let asked = (messages.iter().rev())
            .find(|m| m.role() == Role::User && !Nudge::is_said(&coach.config, &m.text()));
        coach.asked = asked.map(Message::text).unwrap_or_default();
        coach.unnamed = coach.unnamed_tools(tools);
        coach.withheld.clone_from(&coach.unnamed);
        coach
    }

    /// The tools of `tools` that run programs ([`CoachConfig::programs`]) none of which
    /// the run's user message names (`named-command`); none when the rule is off or the
    /// coach was made without the conversation.
    fn unnamed_tools(&self, tools: &ToolRegistry) -> Vec<String> {
        if !self.is_on(Rule::NamedCommand) || self.asked.is_empty() {
            return Vec::new();
        }
        (self.config.programs.iter())
            .filter(|(tool, programs)| {
                tools.contains(tool) && !text::names_program(&self.asked, *programs)
            })
            .map(|(tool, _)| tool.clone())
            .collect()
    }

    /// The tools `named-command` withholds this run: they run programs, and the user's
    /// message names none of them.
    pub(crate) fn unnamed(&self) -> &[String] {
        &self.unnamed
    }

    /// The tools the run withholds that the `tool-or-none` choice still lists: all
    /// but those `named-command` withholds, whose choice reads as `none` (a list without
    /// them moved the 1.5B's choices on questions that need no tool).
    pub(crate) fn withheld_from_choice(&self) -> Vec<String> {
        (self.withheld.iter())
            .filter(|t| !self.unnamed.contains(t))
            .cloned()
            .collect()
    }

    /// The tool the choice named that was read as `none` or as another tool, and the
    /// rule that read it so.
    pub(crate) fn overruled(&self) -> Option<(Rule, &str)> {
        let (rule, tool) = self.overruled.as_ref()?;
        Some((*rule, tool.as_str()))
    }

    /// `route`, or `none` when it names a tool the message gives nothing to act on: one
    /// `named-command` withholds, or one that changes things and requires a path, for a
    /// message that names no file (`write-needs-file`); or the tool that runs a program
    /// the message names, in place of another that changes things (`asked-command`).
    fn overrule_choice(&mut self, route: Route, tools: &[ToolSchema]) -> Route {
        let Route::Tools(Some(name)) = &route else {
            return route;
        };
        let (rule, route) = if self.unnamed.contains(name) {
            (Rule::NamedCommand, Route::None)
        } else if self.writes_unnamed_file(name, tools) {
            (Rule::WriteNeedsFile, Route::None)
        } else if let Some(command) = self.asked_command(name, tools) {
            (Rule::AskedCommand, Route::Tools(Some(command)))
        } else {
            return route;
        };
        self.overruled = Some((rule, name.clone()));
        route
    }

    /// Whether `name`, of `tools`, changes things and requires the path argument, and
    /// the run's user message names no file (`write-needs-file`).
    fn writes_unnamed_file(&self, name: &str, tools: &[ToolSchema]) -> bool {
        let read_only = &self.config.read_only;
        let (Some(key), Some(tool)) = (
            self.config.path_argument.as_deref(),
            tools.iter().find(|t| t.name == name),
        ) else {
            return false;
        };
        let required = tool.parameters.get("required").and_then(Value::as_array);
        let takes_path = required.is_some_and(|r| r.iter().any(|k| k == key));
        self.is_on(Rule::WriteNeedsFile)
            && !self.asked.is_empty()
            && !read_only.is_empty()
            && !read_only.iter().any(|t| t == name)
            && takes_path
            && !text::names_file(&self.asked, self.config.paths.values().flatten())
    }

    /// `withheld` with the tools `named-command` withholds, each once.
    fn and_unnamed(&self, mut withheld: Vec<String>) -> Vec<String> {
        for tool in &self.unnamed {
            if !withheld.contains(tool) {
                withheld.push(tool.clone());
            }
        }
        withheld
    }

    /// On a call about to run (`dotted-path`): when its path argument
    /// ([`CoachConfig::path_argument`]) is a path the user's message names without its
    /// leading dot, the dot is put back; what was done, for the caller to tell.
    pub(crate) fn dotted_path(&self, call: &mut ToolCall) -> Option<String> {
        let key = self.config.path_argument.as_deref();
        let key = key.filter(|_| self.is_on(Rule::DottedPath))?;
        let given = call.arguments.get(key)?.as_str()?.to_owned();
        let named = text::dotted_path(&self.asked, &given)?;
        call.arguments
            .insert(key.to_owned(), Value::String(named.clone()));
        Some(format!(
            "the message names {named}: the path {given} is read as it"
        ))
    }

    /// With the caller's tools context (`tools-context`; `None` in a run without tools)
    /// and the temperature of greedy requests (`greedy-tool-turns`, `greedy-answers`;
    /// `None` in a run that thinks), as the run settled them.
    pub(crate) fn for_requests(
        mut self,
        context: Option<String>,
        temperature: Option<f32>,
    ) -> Self {
        self.context = context.filter(|_| self.config.is_on(Rule::ToolsContext));
        self.temperature = temperature;
        self
    }

    /// The switches and words the coach goes by.
    pub fn config(&self) -> &CoachConfig {
        &self.config
    }

    /// Whether `rule` is on.
    pub fn is_on(&self, rule: Rule) -> bool {
        self.config.is_on(rule)
    }

    /// The nudge `rule` says in this run, when it says one: [`Nudge::said_by`]'s, the
    /// answer nudge asking from the results above once a call of the run got a result
    /// that is not an error (`answer-from-results`).
    pub fn says(&self, rule: Rule) -> Option<Nudge> {
        let from_results = self.is_on(Rule::AnswerFromResults) && self.memory.holds_results();
        Nudge::said_by(rule).map(|nudge| match nudge {
            Nudge::Answer if from_results => Nudge::AnswerFromResults,
            nudge => nudge,
        })
    }

    /// What `rule` says ([`Coach::says`]; every rule a `Said` is made for says one,
    /// which `nudge.rs`'s tests check, so the fallback never speaks).
    fn said(&self, rule: Rule, drops_reply: bool) -> Said {
        Said {
            nudge: self.says(rule).unwrap_or(Nudge::Answer),
            rule,
            drops_reply,
        }
    }

    /// `nudge` as the user message the run's next request carries, with the run's user
    /// message again after an answer nudge ([`Nudge::text_for`], `restate-question`).
    pub fn message(&self, nudge: Nudge) -> Message {
        nudge.message_for(&self.config, &self.asked)
    }

    /// Whether the run has made a call yet.
    pub fn made_calls(&self) -> bool {
        self.memory.any()
    }

    /// Before a request: whether the next reply is asked for with no tools, because it
    /// is to answer (`answer-after-idle`, `answer-after-runaway`, `answer-after-empty`).
    pub fn withholds_tools(&self) -> bool {
        self.answer_due || self.routed_none
    }

    /// Before the run's first request, when it offers `tools` and may answer without a
    /// call: the request that asks the model to choose a tool or none (`tool-or-none`),
    /// or `None` when the rule is off or the run already chose or made calls.
    pub(crate) fn route_request(
        &self,
        model: &str,
        prompt: &Message,
        tools: &[ToolSchema],
    ) -> Option<ProviderRequest> {
        let due =
            self.is_on(Rule::ToolOrNone) && !tools.is_empty() && !self.routed && !self.made_calls();
        due.then(|| route::request(&self.config, model, prompt, tools))
    }

    /// After the reply `first` to [`Coach::route_request`] named a tool: a second
    /// question, and the rule that asks it. `general-check`, for a tool that only reads
    /// and a `prompt` that names none of the caller's files, asks what the message needs;
    /// `choice-both-orders` (any tool) and `changes-both-orders` (one that changes
    /// things) ask the choice again with `tools` listed in reverse order. `None` when
    /// none is due or `first` named no tool.
    pub(crate) fn second_route_request(
        &self,
        model: &str,
        prompt: &Message,
        tools: &[ToolSchema],
        first: Option<&str>,
    ) -> Option<(ProviderRequest, Rule)> {
        let Some(Route::Tools(Some(named))) = first.map(|t| route::read(t, tools)) else {
            return None;
        };
        let read_only = &self.config.read_only;
        let changes = !read_only.is_empty() && !read_only.contains(&named);
        let check = self.is_on(Rule::GeneralCheck)
            && read_only.contains(&named)
            && text::named_file(&prompt.text(), self.config.paths.values().flatten()).is_none();
        if check && !self.is_on(Rule::ChoiceBothOrders) {
            let request = route::need_request(&self.config, model, prompt, tools);
            return Some((request, Rule::GeneralCheck));
        }
        let rule = [Rule::ChoiceBothOrders, Rule::ChangesBothOrders]
            .into_iter()
            .find(|&r| self.is_on(r) && (r == Rule::ChoiceBothOrders || changes))?;
        let reversed: Vec<ToolSchema> = tools.iter().rev().cloned().collect();
        Some((route::request(&self.config, model, prompt, &reversed), rule))
    }

    /// Reads the replies to both choices ([`Coach::second_route_request`], asked by
    /// `rule`): a clean `none` in the `second` (for `general-check`, a clean `general`)
    /// outranks the tool the `first` named; else as [`Coach::routed`] reads the `first`.
    pub(crate) fn routed_twice(
        &mut self,
        rule: Rule,
        first: Option<&str>,
        second: Option<&str>,
        tools: &[ToolSchema],
    ) -> Route {
        let none = match rule {
            Rule::GeneralCheck => second.is_some_and(route::read_general),
            _ => second.map(|t| route::read(t, tools)) == Some(Route::None),
        };
        if none {
            self.settle_route(Route::None, tools)
        } else {
            self.routed(first, tools)
        }
    }

    /// Reads the reply to [`Coach::route_request`] (`text`, or `None` when the request
    /// failed): on a clean `none` the run offers no tools.
    pub(crate) fn routed(&mut self, text: Option<&str>, tools: &[ToolSchema]) -> Route {
        let route = text.map_or(Route::Tools(None), |t| route::read(t, tools));
        self.settle_route(route, tools)
    }

    /// After a choice of `none` for `prompt`: when it names one of the caller's files
    /// ([`CoachConfig::paths`], by path or by name, a word with a `.` or a `/`), the
    /// tools that only read are offered after all and the others stay withheld
    /// (`named-file`); the file named, or `None` when the rule is off, the caller named
    /// no tool read-only or the prompt names no file.
    pub(crate) fn overrule_none(&mut self, prompt: &str, tools: &[ToolSchema]) -> Option<String> {
        let read_only = &self.config.read_only;
        if !self.is_on(Rule::NamedFile) || read_only.is_empty() || !self.routed_none {
            return None;
        }
        let named = text::named_file(prompt, self.config.paths.values().flatten())?;
        self.routed_none = false;
        let changes = (tools.iter().map(|t| &t.name))
            .filter(|name| !read_only.contains(*name))
            .cloned()
            .collect();
        self.withheld = self.and_unnamed(changes);
        Some(named)
    }

    /// The call `read-named` makes before the run's first reply, once, right after a
    /// `tool-or-none` choice that offers tools (a tool, no clean choice, or a `none`
    /// that `named-file` overruled): when `prompt` names one of the caller's files
    /// ([`CoachConfig::paths`] of the tool, as `named-file` reads them), a call with that
    /// path alone to the one offered tool, not withheld, that only reads
    /// ([`CoachConfig::read_only`]) and requires no argument but the path
    /// ([`CoachConfig::path_argument`]). `read-source` makes the same call only when
    /// `prompt` also names a file that does not exist, a change's target ("save the port
    /// from config.toml into port.txt").
    /// The call, its id left to the run, and the rule that asked for it.
    pub(crate) fn named_read(
        &mut self,
        prompt: &str,
        tools: &[ToolSchema],
    ) -> Option<(ToolCall, Rule)> {
        if !self.routed || self.routed_none || self.read_named {
            return None;
        }
        let rule = if self.is_on(Rule::ReadNamed) {
            Rule::ReadNamed
        } else if self.is_on(Rule::ReadSource)
            && text::names_new_file(prompt, self.config.paths.values().flatten())
        {
            Rule::ReadSource
        } else {
            return None;
        };
        self.read_named = true;
        let key = self.config.path_argument.as_deref()?;
        let takes_the_path_alone = |tool: &ToolSchema| {
            let required = tool.parameters.get("required").and_then(Value::as_array);
            required.is_some_and(|r| r.len() == 1 && r[0] == key)
        };
        let mut readers = tools.iter().filter(|t| {
            self.config.read_only.contains(&t.name)
                && !self.withheld.contains(&t.name)
                && takes_the_path_alone(t)
        });
        let reader = readers.next()?;
        if readers.next().is_some() {
            return None;
        }
        let files = self.config.paths.get(&reader.name)?;
        let file = match rule {
            Rule::ReadSource => text::named_file(prompt, files)
                .or_else(|| text::file_named_by_stem(prompt, files))?,
            _ => text::named_file(prompt, files)?,
        };
        let arguments = serde_json::Map::from_iter([(key.to_owned(), Value::String(file))]);
        let call = ToolCall {
            id: String::new(),
            name: reader.name.clone(),
            arguments,
        };
        Some((call, rule))
    }

    /// What the run does after choosing `route`: tools offered or not, withheld, and the
    /// call obliged (`routed-call`).
    fn settle_route(&mut self, route: Route, tools: &[ToolSchema]) -> Route {
        let route = self.overrule_choice(route, tools);
        self.take_route(&route, tools);
        self.routed_tool = match &route {
            Route::Tools(Some(name))
                if self.is_on(Rule::RoutedCall) && self.config.read_only.contains(name) =>
            {
                Some(name.clone())
            }
            _ => None,
        };
        route
    }

    /// Plays `route`, the choice made for this prompt before (a proxy that sees each of
    /// the prompt's requests apart passes the first one's choice to the later ones), as
    /// if the run had just asked for it: tools offered or not, and withheld, as after
    /// [`Coach::routed`], but no call obliged (`routed-call` belongs to the request
    /// after the choice). `false`, nothing played, when `tool-or-none` is off, the run
    /// offers no `tools`, or it chose already.
    pub(crate) fn replay(&mut self, route: &Route, tools: &[ToolSchema]) -> bool {
        if !self.is_on(Rule::ToolOrNone) || tools.is_empty() || self.routed {
            return false;
        }
        self.take_route(route, tools);
        true
    }

    /// What a choice of `route` among `tools` sets for the rest of the run.
    fn take_route(&mut self, route: &Route, tools: &[ToolSchema]) {
        self.routed = true;
        self.routed_none = *route == Route::None;
        self.withheld = self.and_unnamed(self.changes_withheld(route, tools));
    }

    /// The tools that change things, of `tools`, that the run withholds
    /// (`changes-on-request`): all of them when the choice was `none`, the others when it
    /// named one; none when it named a tool that only reads (a question may need a read
    /// and then a write: "save the port into port.txt"), the choice was not clean, the
    /// rule is off or the caller named no tool read-only.
    fn changes_withheld(&self, route: &Route, tools: &[ToolSchema]) -> Vec<String> {
        let read_only = &self.config.read_only;
        let chosen = match route {
            Route::None => None,
            Route::Tools(Some(name)) if !read_only.contains(name) => Some(name.as_str()),
            Route::Tools(_) => return Vec::new(),
        };
        if !self.is_on(Rule::ChangesOnRequest) || read_only.is_empty() {
            return Vec::new();
        }
        (tools.iter().map(|t| &t.name))
            .filter(|name| !self.config.read_only.contains(*name) && Some(name.as_str()) != chosen)
            .cloned()
            .collect()
    }

    /// The tool of `tools` that runs a program the run's user message names
    /// ([`CoachConfig::programs`]), when `asked-command` is on and `chosen` is another
    /// tool that changes things (not read-only, running no programs): the choice it
    /// takes the place of.
    fn asked_command(&self, chosen: &str, tools: &[ToolSchema]) -> Option<String> {
        let read_only = &self.config.read_only;
        let programs = &self.config.programs;
        let changes = !read_only.is_empty() && !read_only.contains(chosen);
        if !self.is_on(Rule::AskedCommand) || !changes || programs.contains_key(chosen) {
            return None;
        }
        tools
            .iter()
            .map(|t| &t.name)
            .find(|name| (programs.get(*name)).is_some_and(|p| text::names_program(&self.asked, p)))
            .cloned()
    }

    /// The tools this run neither offers nor runs, whatever the model writes
    /// (`changes-on-request`): a call to one is answered as a call to a tool not offered.
    pub(crate) fn withheld(&self) -> &[String] {
        &self.withheld
    }

    /// The answer to a call to `name` when the run withholds that tool
    /// (`changes-on-request`), naming the tools of `offered` it does offer; `None` when
    /// it does not withhold it (the call runs as any other).
    pub(crate) fn withheld_answer(
        &self,
        call: &ToolCall,
        offered: &[ToolSchema],
    ) -> Option<ToolOutcome> {
        let name = call.name.as_str();
        if let Some(refused) = self.off_target(call) {
            return Some(refused);
        }
        if !self.withheld.iter().any(|w| w == name) {
            return None;
        }
        let available: Vec<&str> = (offered.iter().map(|t| t.name.as_str()))
            .filter(|n| !self.withheld.iter().any(|w| w == n))
            .collect();
        Some(ToolOutcome::error(format!(
            "Tool \"{name}\" is not offered for this message: it changes things, and the user \
             did not ask for that; available: {}",
            available.join(", ")
        )))
    }

    /// Before a request: the tool its reply must call, its arguments constrained to the
    /// tool's schema (`routed-call`): the one `tool-or-none` chose, until
    /// [`Coach::routed_call_played`].
    pub(crate) fn routed_call(&self) -> Option<&str> {
        self.routed_tool
            .as_deref()
            .filter(|_| !self.withholds_tools())
    }

    /// The schema `tool` is offered under in the turn that is to call it
    /// (`routed-call`): with `known-paths` on, its path argument holds one of the
    /// caller's paths; `None` when the rule is off, the caller listed no paths or named
    /// no path argument, or the tool takes none.
    pub(crate) fn routed_schema(&self, tool: &ToolSchema) -> Option<ToolSchema> {
        let key = self.config.path_argument.as_deref()?;
        let paths = if self.change_targets.is_empty() {
            let paths = self.config.paths.get(&tool.name).filter(|p| !p.is_empty());
            paths.filter(|_| self.is_on(Rule::KnownPaths))?
        } else {
            &self.change_targets
        };
        let mut tool = tool.clone();
        let property = tool.parameters.get_mut("properties")?.get_mut(key)?;
        let mut known = serde_json::json!({"type": "string", "enum": paths});
        if let Some(about) = property.get("description") {
            known["description"] = about.clone();
        }
        *property = known;
        Some(tool)
    }

    /// After the turn that was to call the chosen tool, however it went, given whether
    /// it `made` a call: when the call ran without an error, the model answers next,
    /// with no tools; otherwise (no call, or an error to recover from) the run's own
    /// strategy plays the rest of the run. After the call `change-after-idle` obliged,
    /// made without an error, the answer nudge to say.
    pub(crate) fn routed_call_played(&mut self, made: bool) -> Option<Said> {
        self.routed_tool = None;
        let changed = !self.change_targets.is_empty() && made && !self.calls_failed;
        self.change_targets.clear();
        self.routed_none |= made && !self.calls_failed;
        // The change made, the answer nudge: without it the 1.5B answered the result
        // "I'm sorry, but I can't assist with that."
        changed.then_some(Said {
            nudge: Nudge::Answer,
            rule: Rule::ChangeAfterIdle,
            drops_reply: false,
        })
    }

    /// How many calls the run has made (each once per turn that made it).
    pub(crate) fn call_count(&self) -> u32 {
        self.memory.count()
    }

    /// Before a request: what it carries besides the history and the options, given
    /// whether it `offers_tools` (the strategy prepares the tools after this): the tools
    /// context before the first prompt (in every request of a run with tools, so the
    /// server's prompt cache keeps the prefix), and the tool temperature when its sampling
    /// options set none and the request offers tools (`greedy-tool-turns`) or answers
    /// the run's results (`greedy-answers`).
    pub(crate) fn before_request(&self, request: &mut ProviderRequest, offers_tools: bool) {
        if let Some(context) = self.context.as_deref().filter(|_| !self.routed_none) {
            text::before_first_prompt(&mut request.messages, context);
        }
        let greedy = if offers_tools {
            self.is_on(Rule::GreedyToolTurns)
        } else {
            (self.made_calls() && self.is_on(Rule::GreedyAnswers)) || self.echoed
        };
        if greedy && request.options.temperature.is_none() {
            request.options.temperature = self.temperature;
        }
    }

    /// While a reply streams: the watch that stops or cuts it.
    pub(crate) fn watch(&self) -> Watch {
        let (loops, lists) = (
            self.is_on(Rule::CallLoopCut),
            self.is_on(Rule::ListedToolsCut),
        );
        Watch {
            repeats: self.is_on(Rule::RunawayStop).then(RepeatDetector::default),
            calls: (loops || lists).then(|| CallWatch::new(loops, lists)),
        }
    }

    /// After a reply: the text to read of it (`drop-echo` takes an echoed tools context
    /// off its front).
    pub(crate) fn read_reply(&self, raw: &mut String) {
        match &self.context {
            Some(context) if self.is_on(Rule::DropEcho) => text::drop_echo(raw, context),
            _ => {}
        }
    }

    /// After a reply stopped for repeating itself (with `has_calls` when it made some):
    /// the answer nudge when the run has results and has not asked yet
    /// (`answer-after-runaway`); `None` ends the run.
    pub(crate) fn after_stopped(&mut self, has_calls: bool) -> Option<Said> {
        let ask = self.is_on(Rule::AnswerAfterRunaway)
            && self.memory.any()
            && !self.answer_due
            && !has_calls;
        self.answer_due |= ask;
        ask.then(|| self.said(Rule::AnswerAfterRunaway, true))
    }

    /// After an answer: the nudge that follows it, if any. An empty answer after the
    /// run's calls gets the answer nudge (`answer-after-empty`; the answer is dropped);
    /// before any call, an answer that `shows_call` gets the act nudge (`act-nudge`), one
    /// that says it cannot reach the files, while tools are offered, the can nudge
    /// (`can-nudge`), each once per run.
    pub(crate) fn after_answer(
        &mut self,
        answer: &str,
        shows_call: bool,
        offers_tools: bool,
    ) -> Option<Said> {
        if answer.trim().is_empty() {
            let ask =
                self.is_on(Rule::AnswerAfterEmpty) && !self.asked_to_answer && self.memory.any();
            self.asked_to_answer |= ask;
            self.answer_due |= ask;
            return ask.then(|| self.said(Rule::AnswerAfterEmpty, true));
        }
        let unoffered = !offers_tools || self.withholds_tools();
        if self.is_on(Rule::AnswerAfterEcho)
            && !self.asked_to_answer
            && unoffered
            && text::restates(answer, &self.asked)
        {
            self.asked_to_answer = true;
            self.answer_due = true;
            self.echoed = true;
            return Some(self.said(Rule::AnswerAfterEcho, true));
        }
        if self.asked_to_act || self.memory.any() {
            return None;
        }
        let said = if self.is_on(Rule::ActNudge) && shows_call {
            self.said(Rule::ActNudge, false)
        } else if self.is_on(Rule::CanNudge) && offers_tools && text::says_it_cannot(answer) {
            self.said(Rule::CanNudge, false)
        } else {
            return None;
        };
        self.asked_to_act = true;
        Some(said)
    }

    /// When the run reached its turn limit: `Some` when one more reply is to answer from
    /// the run's results, with no tools (`answer-at-limit`; the rule on and calls made),
    /// holding the answer nudge unless one is already due.
    pub(crate) fn at_limit(&mut self) -> Option<Option<Said>> {
        if !self.is_on(Rule::AnswerAtLimit) || !self.memory.any() {
            return None;
        }
        let due = std::mem::replace(&mut self.answer_due, true);
        Some((!due).then(|| self.said(Rule::AnswerAtLimit, false)))
    }

    /// After a reply a proxy would send its client (`ollm serve`'s run of one turn), with
    /// `has_text` when it showed the client any text and `calls` the calls the client
    /// declared: the answer nudge when it has neither (`answer-after-nothing`). The proxy
    /// asks once more, with the nudge and no tools, and sends that answer instead; the
    /// nudge never reaches the client.
    pub fn after_nothing(&self, has_text: bool, calls: usize) -> Option<Nudge> {
        let nothing = !has_text && calls == 0;
        nothing
            .then_some(Rule::AnswerAfterNothing)
            .filter(|r| self.is_on(*r))
            .and_then(|r| self.says(r))
    }

    /// On calls: how many of a reply's calls run (`calls-per-reply`); the rest, returned,
    /// are dropped.
    pub(crate) fn bound(&self, calls: &mut Vec<ToolCall>) -> Vec<ToolCall> {
        if !self.is_on(Rule::CallsPerReply) || calls.len() <= MAX_CALLS_PER_REPLY {
            return Vec::new();
        }
        calls.split_off(MAX_CALLS_PER_REPLY)
    }

    /// On calls: where each of `calls` gets its result from (`repeat-guard`): run it, or
    /// answer it from an earlier call of the run or of the same reply.
    pub fn plan(&self, tools: &ToolRegistry, calls: &[ToolCall]) -> CallPlan {
        let undeclared = self.is_on(Rule::RepeatIgnoresUndeclared);
        let identities = memory::identities(tools, calls, undeclared);
        let sources = if self.is_on(Rule::RepeatGuard) {
            self.memory.sort(&identities)
        } else {
            vec![Source::Run; calls.len()]
        };
        CallPlan {
            identities,
            sources,
        }
    }

    /// The answer to the `i`th call of `plan`, planned [`Source::Earlier`]: the head of
    /// the earlier result.
    pub(crate) fn earlier(&self, plan: &CallPlan, i: usize) -> Option<ToolOutcome> {
        plan.identities.get(i).and_then(|c| self.memory.answer(c))
    }

    /// The answer to a call of `name` planned [`Source::Twin`], from its twin's `result`.
    pub(crate) fn twin(name: &str, result: &ToolOutcome) -> ToolOutcome {
        memory::repeat_result(name, &result.content)
    }

    /// On calls, after their `results`: learns them, and says whether the turn is
    /// recorded, whether the answer nudge follows (none of its calls ran: each repeated
    /// an earlier one, or named a tool not in `tools`; or the run is stuck and was not
    /// asked for the answer yet) and whether the run ends.
    pub(crate) fn after_calls(
        &mut self,
        tools: &ToolRegistry,
        calls: &[ToolCall],
        plan: &CallPlan,
        results: &[ToolOutcome],
    ) -> AfterCalls {
        // These calls came in a reply asked for as the answer: the model was told.
        let told = self.answer_due;
        let stuck = self.memory.learn(&plan.identities, results);
        self.calls_failed = results.iter().any(|r| r.is_error);
        let stuck = stuck.filter(|_| self.is_on(Rule::RepeatLimit));
        let last_word = stuck.is_some() && !told && self.is_on(Rule::AnswerAtRepeatLimit);
        let earlier = |i: usize| plan.sources[i] == Source::Earlier;
        let idle = (0..calls.len()).all(|i| !tools.contains(&calls[i].name) || earlier(i));
        let change = (idle && stuck.is_none() && !last_word && self.change_confirmed)
            .then(|| self.pending_change(tools))
            .flatten();
        let idle = self.is_on(Rule::AnswerAfterIdle) && idle && stuck.is_none();
        self.answer_due = (idle || last_word) && change.is_none();
        let rule = if last_word {
            Rule::AnswerAtRepeatLimit
        } else if change.is_some() {
            Rule::ChangeAfterIdle
        } else {
            Rule::AnswerAfterIdle
        };
        let changes = change.is_some();
        if let Some((tool, targets)) = change {
            self.asked_to_change = true;
            self.routed_tool = Some(tool);
            self.change_targets = targets;
        }
        AfterCalls {
            recorded: self.recorded(&plan.sources),
            nudge: (self.answer_due || changes).then(|| self.said(rule, false)),
            stuck,
            last_word,
        }
    }
}

impl Coach {
    /// Per call of a turn whose results came from `sources`, whether the history keeps
    /// it. A repeat answered from an earlier result (or its twin's in the same reply)
    /// adds nothing but a "not run again" error, and the 0.5B answered from those ("You
    /// already called `list_dir` with these arguments"; `skip-repeat-calls`).
    fn recorded(&self, sources: &[Source]) -> Vec<bool> {
        let repeat = |s: &Source| matches!(s, Source::Earlier | Source::Twin(_));
        let fresh = sources.iter().any(|s| !repeat(s));
        let keep = |s: &Source| match (fresh, repeat(s)) {
            (false, _) => !self.is_on(Rule::SkipRepeatTurn),
            (true, true) => !self.is_on(Rule::SkipRepeatCalls),
            (true, false) => true,
        };
        sources.iter().map(keep).collect()
    }

    /// Before a turn's calls are learned: when none of them ran (each repeated an earlier
    /// call or named a tool not in `tools`) and `change-after-idle` may oblige a change,
    /// the request that asks the model, once a run, whether the message asks for an
    /// answer or a file written; [`Coach::confirm_change`] reads the reply. A change is
    /// obliged only on a clean `write`: a message that names a new file may only ask
    /// about it ("is there a notes.txt?").
    pub(crate) fn change_check(
        &mut self,
        model: &str,
        tools: &ToolRegistry,
        calls: &[ToolCall],
        plan: &CallPlan,
    ) -> Option<ProviderRequest> {
        let earlier = |i: usize| plan.sources[i] == Source::Earlier;
        let idle = (0..calls.len()).all(|i| !tools.contains(&calls[i].name) || earlier(i));
        if !idle || self.change_checked {
            return None;
        }
        self.pending_change(tools)?;
        self.change_checked = true;
        let prompt = Message::user(self.asked.clone());
        Some(route::change_request(model, &prompt))
    }

    /// Reads the reply to [`Coach::change_check`] (`None` when the request failed).
    pub(crate) fn confirm_change(&mut self, text: Option<&str>) {
        self.change_confirmed = text.is_some_and(route::read_change);
    }

    /// The answer to `call` when `overwrite-needs-name` refuses it: a tool that changes
    /// things, called with the path of one of the caller's existing files, for a message
    /// that names a file but not that one (the 1.5B wrote `README.md` for "add a
    /// .gitignore that ignores __pycache__").
    pub(crate) fn unnamed_overwrite(&self, call: &ToolCall) -> Option<ToolOutcome> {
        let key = self.config.path_argument.as_deref()?;
        let read_only = &self.config.read_only;
        let acts = self.is_on(Rule::OverwriteNeedsName)
            && !self.asked.is_empty()
            && !read_only.is_empty()
            && !read_only.contains(&call.name);
        let given = call.arguments.get(key).and_then(Value::as_str)?;
        let files = (self.config.paths.values().flatten()).filter(|p| !p.ends_with('/'));
        let existing = |p: &&String| {
            let given = given.trim_start_matches("./");
            given == p.as_str() || given.ends_with(&format!("/{p}"))
        };
        let path = files.clone().find(existing)?;
        let refused = acts
            && text::names_file(&self.asked, files.clone())
            && !text::names_path(&self.asked, path);
        refused.then(|| {
            ToolOutcome::error(format!(
                "not run: the user's message does not name {path}, which exists; it was left \
                 as it is. Change only the files the message names."
            ))
        })
    }

    /// The answer to `call` in the turn `change-after-idle` obliges, when it is not the
    /// obliged tool with a path the message named as new: the server may not have held
    /// the reply to the schema, and the change must never reach an existing file.
    fn off_target(&self, call: &ToolCall) -> Option<ToolOutcome> {
        if self.change_targets.is_empty() {
            return None;
        }
        let key = self.config.path_argument.as_deref().unwrap_or_default();
        let path = call.arguments.get(key).and_then(Value::as_str);
        let on_target = self.routed_tool.as_deref() == Some(call.name.as_str())
            && path.is_some_and(|p| self.change_targets.iter().any(|t| t == p));
        (!on_target).then(|| {
            ToolOutcome::error(format!(
                "not run: this turn may only call {} with {key} {}, the file the user named",
                self.routed_tool.as_deref().unwrap_or_default(),
                self.change_targets.join(" or ")
            ))
        })
    }

    /// The tool `change-after-idle` obliges after a turn none of whose calls ran (once
    /// [`Coach::confirm_change`] heard a change is needed), and the paths it may take:
    /// the one of `tools` not named read-only and not withheld whose schema requires the
    /// caller's path argument, when the run chose tools, its message names a file that is
    /// not one of the caller's paths (a change's target: "save the port into port.txt"),
    /// and no call to that tool has run yet (one refused or failed does not count). `None` when the rule is off or acted once,
    /// the caller listed no paths, or any of that does not hold.
    fn pending_change(&self, tools: &ToolRegistry) -> Option<(String, Vec<String>)> {
        let due = self.is_on(Rule::ChangeAfterIdle)
            && !self.asked_to_change
            && self.routed
            && !self.routed_none
            && !self.config.read_only.is_empty()
            && !self.config.paths.is_empty();
        let files = self.config.paths.values().flatten();
        let mut targets = text::new_files(&self.asked, files.clone());
        if let Some(hidden) = &self.config.hidden {
            targets.extend(text::new_dotfiles(&self.asked, hidden, files));
        }
        if !due || targets.is_empty() {
            return None;
        }
        let key = self.config.path_argument.as_deref()?;
        let requires_path = |tool: &ToolSchema| {
            let required = tool.parameters.get("required").and_then(Value::as_array);
            required.is_some_and(|r| r.iter().any(|k| k == key))
        };
        let declares_path = |tool: &ToolSchema| tool.parameters["properties"].get(key).is_some();
        let mut changers = tools.schemas().into_iter().filter(|t| {
            !self.config.read_only.contains(&t.name)
                && !self.withheld.contains(&t.name)
                && requires_path(t)
                && declares_path(t)
        });
        let changer = changers.next()?;
        let wrote = self.memory.ran(&changer.name);
        (changers.next().is_none() && !wrote).then(|| (changer.name.clone(), targets))
    }
}

/// A streaming reply's watchers (see [`Coach::watch`]).
#[derive(Debug)]
pub(crate) struct Watch {
    /// Text that keeps repeating itself (`runaway-stop`).
    repeats: Option<RepeatDetector>,
    /// Calls that begin to repeat, or list the tools (`call-loop-cut`, `listed-tools-cut`).
    calls: Option<CallWatch>,
}

impl Watch {
    /// Takes a text delta; whether the reply now keeps repeating itself.
    pub(crate) fn text(&mut self, delta: &str) -> bool {
        self.repeats
            .as_mut()
            .is_some_and(|d| d.push(delta).is_some())
    }

    /// Looks at the reply so far (`raw`); where to cut it, once it loops or lists tools.
    pub(crate) fn reply(&mut self, raw: &str) -> Option<Cut> {
        self.calls.as_mut().and_then(|w| w.push(raw))
    }
}

#[cfg(test)]
mod tests;
