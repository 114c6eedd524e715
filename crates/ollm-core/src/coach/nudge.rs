//! What the coach says to the model: the [`Nudge`]s, each owning its text. A leaf.
//!
//! The texts are private: they are tuning knobs, measured on real models (see the
//! coach's Decisions), not an API. A nudge is a user message the run that needed it
//! sends; it never stays in the history (see the coach's Decisions).

use ollm_types::Message;
use serde::{Deserialize, Serialize};

use super::rule::{CoachConfig, Rule};

/// Asks for the answer: after a turn none of whose calls ran, after a runaway reply that
/// followed a result, after an empty answer, at the repeat limit and at the turn limit.
pub(crate) const ANSWER: &str = "Now answer my question in plain words, without calling any tool.";

/// Asks for the answer from the results above (`answer-from-results`): the answer
/// nudge in a run that holds a result that is not an error.
const ANSWER_FROM_RESULTS: &str =
    "Now answer my question from the results above, in plain words, without calling any tool.";

/// The longest user message `restate-question` repeats after the answer nudge: a
/// longer one (or one of several lines) is a paste or a task, not a question to recall.
const RESTATED_MAX: usize = 300;

/// Asks for the change the user's message asked for (`change-after-idle`).
const CHANGE: &str = "Now do what I asked, with what the results above say.";

/// Asks an answer that showed how to call a tool to call it.
const ACT: &str = "Do not tell me how to call the tools: call the one you need yourself now, \
then answer my question from its result.";

/// Tells an answer that said it cannot reach the files that it can, naming where the
/// tools work (the caller's words).
fn can(scope: Option<&str>) -> String {
    let can = match scope {
        Some(scope) => format!("You can: the tools you were given work on {scope}."),
        None => "You can: use the tools you were given.".to_owned(),
    };
    format!("{can} Call the one you need now, then answer my question from its result.")
}

/// Every nudge.
const EVERY: [Nudge; 5] = [
    Nudge::Answer,
    Nudge::AnswerFromResults,
    Nudge::Act,
    Nudge::Can,
    Nudge::Change,
];

/// A user message the coach adds to a run.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
#[non_exhaustive]
pub enum Nudge {
    /// Answer now, in plain words, without tools.
    Answer,
    /// Answer now from the results above, in plain words, without tools.
    AnswerFromResults,
    /// Do not show how to call a tool: call it.
    Act,
    /// The tools do reach what the answer said it cannot.
    Can,
    /// Make the change asked for.
    Change,
}

impl Nudge {
    /// The nudge's text, with the caller's words from `config`.
    pub fn text(self, config: &CoachConfig) -> String {
        match self {
            Nudge::Answer => ANSWER.to_owned(),
            Nudge::AnswerFromResults => ANSWER_FROM_RESULTS.to_owned(),
            Nudge::Act => ACT.to_owned(),
            Nudge::Can => can(config.scope.as_deref()),
            Nudge::Change => CHANGE.to_owned(),
        }
    }

    /// The nudge as the user message a request carries.
    pub fn message(self, config: &CoachConfig) -> Message {
        Message::user(self.text(config))
    }

    /// The nudge's text in a run whose user message is `asked`: [`Nudge::text`], and for
    /// an answer nudge, when `restate-question` is on and `asked` is one line of at most
    /// 300 bytes, that message again at its end.
    pub fn text_for(self, config: &CoachConfig, asked: &str) -> String {
        let text = self.text(config);
        let asked = asked.trim();
        let restates = config.is_on(Rule::RestateQuestion)
            && self.withholds_tools()
            && !asked.is_empty()
            && asked.len() <= RESTATED_MAX
            && !asked.contains('\n');
        if restates {
            format!("{text} My question: {asked}")
        } else {
            text
        }
    }

    /// Whether `text` is what a nudge says under `config` (a user message the coach
    /// added, not the user's own).
    pub fn is_said(config: &CoachConfig, text: &str) -> bool {
        EVERY.iter().any(|n| text.starts_with(&n.text(config)))
    }

    /// [`Nudge::text_for`] as the user message a request carries.
    pub fn message_for(self, config: &CoachConfig, asked: &str) -> Message {
        Message::user(self.text_for(config, asked))
    }

    /// The nudge `rule` says, when it says one: the one table of which rule says what
    /// (the coach's `Said`s are made from it; `ollm serve` reads it to play a nudge a run
    /// of one turn said).
    pub fn said_by(rule: Rule) -> Option<Nudge> {
        Some(match rule {
            Rule::AnswerAfterIdle
            | Rule::AnswerAfterRunaway
            | Rule::AnswerAfterEmpty
            | Rule::AnswerAfterEcho
            | Rule::AnswerAfterNothing
            | Rule::AnswerAtRepeatLimit
            | Rule::AnswerAtLimit => Nudge::Answer,
            Rule::ActNudge => Nudge::Act,
            Rule::CanNudge => Nudge::Can,
            Rule::ChangeAfterIdle => Nudge::Change,
            _ => return None,
        })
    }

    /// Whether the reply to this nudge is asked for with no tools offered: the answer
    /// nudges ask for words; the act and can nudges ask for a call.
    pub fn withholds_tools(self) -> bool {
        matches!(self, Nudge::Answer | Nudge::AnswerFromResults)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const ALL: [Nudge; 5] = EVERY;

    #[test]
    fn the_can_nudge_names_the_callers_place_or_none() {
        let folder = CoachConfig {
            scope: Some("this folder".into()),
            ..CoachConfig::default()
        };
        assert_eq!(
            Nudge::Can.text(&folder),
            "You can: the tools you were given work on this folder. Call the one you need \
             now, then answer my question from its result."
        );
        let text = Nudge::Can.text(&CoachConfig::default());
        assert!(!text.contains("folder"), "{text}");
        for nudge in ALL {
            assert_eq!(nudge.message(&folder).text(), nudge.text(&folder));
        }
    }

    #[test]
    fn restate_question_ends_only_the_answer_nudges_with_a_short_one_line_message() {
        let mut on = CoachConfig::default();
        on.turn_on(Rule::RestateQuestion);
        let long = "why? ".repeat(61);
        let check = |config: &CoachConfig, nudge: Nudge, asked: &str, restated: bool| {
            let text = nudge.text_for(config, asked);
            let want = match restated {
                true => format!("{} My question: {}", nudge.text(config), asked.trim()),
                false => nudge.text(config),
            };
            assert_eq!(text, want, "{nudge:?} for {asked:?}");
            assert_eq!(nudge.message_for(config, asked).text(), text);
        };
        check(
            &on,
            Nudge::AnswerFromResults,
            "which port does the app use?",
            true,
        );
        check(&on, Nudge::Answer, "  thanks!\n", true);
        check(&on, Nudge::Act, "which port does the app use?", false);
        check(&on, Nudge::Change, "save it to port.txt", false);
        check(&on, Nudge::Answer, "", false);
        check(&on, Nudge::Answer, "fix this:\nfn main() {}", false);
        check(&on, Nudge::Answer, long.trim(), false);
        check(&on, Nudge::Answer, &long[..300], true);
        let off = CoachConfig::default();
        check(
            &off,
            Nudge::AnswerFromResults,
            "which port does the app use?",
            false,
        );
        let restated = Nudge::Answer.text_for(&on, "hi");
        assert!(Nudge::is_said(&on, &restated), "{restated}");
        assert!(ALL.iter().all(|n| Nudge::is_said(&on, &n.text(&on))));
        assert!(!Nudge::is_said(&on, "which port does the app use?"));
    }

    #[test]
    fn the_rules_that_nudge_say_their_nudge_and_only_the_answers_withhold_tools() {
        let said: Vec<(Rule, Nudge)> = (Rule::ALL.iter())
            .filter_map(|&r| Nudge::said_by(r).map(|n| (r, n)))
            .collect();
        let want = vec![
            (Rule::AnswerAfterIdle, Nudge::Answer),
            (Rule::AnswerAfterRunaway, Nudge::Answer),
            (Rule::AnswerAfterEmpty, Nudge::Answer),
            (Rule::AnswerAfterEcho, Nudge::Answer),
            (Rule::ChangeAfterIdle, Nudge::Change),
            (Rule::AnswerAtRepeatLimit, Nudge::Answer),
            (Rule::AnswerAtLimit, Nudge::Answer),
            (Rule::AnswerAfterNothing, Nudge::Answer),
            (Rule::ActNudge, Nudge::Act),
            (Rule::CanNudge, Nudge::Can),
        ];
        assert_eq!(said, want);
        let withholding: Vec<bool> = ALL.map(Nudge::withholds_tools).to_vec();
        assert_eq!(withholding, [true, true, false, false, false]);
    }
}
