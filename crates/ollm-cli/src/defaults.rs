//! Defaults for `ollm run` from the config file (issue 14): `think`, `hide_thinking`,
//! `system`, `tool_mode`, `max_turns`, `max_tokens`, the sampling options and
//! `keep_alive`, settable at the top of the file, in `[providers.NAME]` and in
//! `[models."NAME"]`.
//!
//! Decisions:
//! - One precedence, decided in one place ([`Layers::resolve`]): a flag, then
//!   `[models."MODEL"]`, then the provider's table, then the top level; where none sets
//!   a value, core's built-in default applies (`ChatConfig::default()`). Each setting is
//!   settled on its own, so a model table that sets only `temperature` keeps the
//!   provider's `system`.
//! - The per-model table applies to the model a run starts with; `/model` in a chat
//!   changes the model only (its `context_length` still follows, through core's table).
//! - A value the flag would refuse is refused in the file too (a usage error naming the
//!   table), so a typo never reaches the server.
//! - The sampling options are one flattened [`Sampling`] (`sampling.rs`), the same struct
//!   the flags parse into and the only one that converts into core's
//!   `GenerationOptions`: this file layers it as a whole and never names its knobs
//!   (issue 26 found them repeated field by field here, in the flags and in `run.rs`).
//!   Because it is flattened, this struct's `deny_unknown_fields` is the one that refuses
//!   an unknown key in any table that holds run defaults.
//! - `context_length` is not here: core settles the window ([`crate::context`]).
//! - Custom HTTP `headers` are per provider and global only (the HTTP client is built
//!   once per provider); they live in `config.rs` with the provider's settings.

use std::collections::BTreeMap;
use std::fmt::Display;
use std::str::FromStr;

use ollm_core::ToolMode;
use ollm_types::Think;
use serde::{Deserialize, Deserializer, Serialize};

use crate::exit::CliError;
use crate::sampling::Sampling;

/// The run defaults one table of the config file sets; every key is optional.
#[derive(Debug, Clone, Default, PartialEq, Deserialize, Serialize)]
#[serde(default, deny_unknown_fields)]
pub(crate) struct RunDefaults {
    /// Think: `on`, `off`, `low`, `medium`, `high` (or `true`, `false`).
    #[serde(deserialize_with = "parsed", skip_serializing_if = "Option::is_none")]
    pub(crate) think: Option<Think>,
    /// Keep the model's thinking off screen.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) hide_thinking: Option<bool>,
    /// The system prompt.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) system: Option<String>,
    /// How tools reach the model: `auto`, `native`, `react`, `constrained`.
    #[serde(deserialize_with = "parsed", skip_serializing_if = "Option::is_none")]
    pub(crate) tool_mode: Option<ToolMode>,
    /// The most model round trips per prompt.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) max_turns: Option<u32>,
    /// The most tokens one reply may generate.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) max_tokens: Option<u32>,
    /// `temperature`, `top_p`, `top_k`, `seed` and `stop` (`sampling.rs`).
    #[serde(flatten)]
    pub(crate) sampling: Sampling,
    /// How long Ollama keeps the model loaded: a duration (`"10m"`, `"1h"`, `"0"`) or
    /// seconds (`-1` forever). OpenAI-compatible servers have no such setting.
    #[serde(
        deserialize_with = "keep_alive",
        skip_serializing_if = "Option::is_none"
    )]
    pub(crate) keep_alive: Option<String>,
    /// Stop a reply that keeps repeating itself (default `true`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) runaway_guard: Option<bool>,
}

impl RunDefaults {
    /// Each setting from `self`, else from `lower`.
    fn or(self, lower: &RunDefaults) -> RunDefaults {
        RunDefaults {
            think: self.think.or(lower.think),
            hide_thinking: self.hide_thinking.or(lower.hide_thinking),
            system: self.system.or_else(|| lower.system.clone()),
            tool_mode: self.tool_mode.or(lower.tool_mode),
            max_turns: self.max_turns.or(lower.max_turns),
            max_tokens: self.max_tokens.or(lower.max_tokens),
            sampling: self.sampling.or(&lower.sampling),
            keep_alive: self.keep_alive.or_else(|| lower.keep_alive.clone()),
            runaway_guard: self.runaway_guard.or(lower.runaway_guard),
        }
    }

    /// The flags of `ollm run` as a layer (an unset flag sets nothing).
    pub(crate) fn of_flags(args: &crate::args::RunArgs) -> RunDefaults {
        RunDefaults {
            think: args.think,
            hide_thinking: args.hide_thinking.then_some(true),
            system: args.system.clone(),
            tool_mode: args.tool_mode,
            max_turns: args.max_turns,
            max_tokens: args.max_tokens,
            sampling: args.sampling.clone(),
            keep_alive: args.keep_alive.clone(),
            runaway_guard: args.no_runaway_guard.then_some(false),
        }
    }

    /// Refuses what the flags would refuse; `table` names where the values were set.
    fn check(&self, table: &str) -> Result<(), CliError> {
        let bad = |key: &str, why: &str| {
            Err(CliError::Usage(format!(
                "{key} in {table} of the config {why}"
            )))
        };
        if let Some((key, why)) = self.sampling.refused() {
            return bad(key, why);
        }
        if self.max_turns == Some(0) {
            return bad("max_turns", "must be at least 1");
        }
        if self.max_tokens == Some(0) {
            return bad("max_tokens", "must be at least 1");
        }
        Ok(())
    }
}

/// The run defaults of the config file, by where they were set.
#[derive(Debug, Clone, Default, PartialEq)]
pub(crate) struct Layers {
    /// The top level of the file.
    pub(crate) global: RunDefaults,
    /// The settled provider's `[providers.NAME]` table.
    pub(crate) provider: RunDefaults,
    /// `[models."NAME"]` tables, by model.
    pub(crate) models: BTreeMap<String, RunDefaults>,
}

impl Layers {
    /// The layers of a file, checked: the top level, the provider's table and the
    /// models' tables.
    pub(crate) fn new(
        global: RunDefaults,
        provider: (&str, RunDefaults),
        models: BTreeMap<String, RunDefaults>,
    ) -> Result<Self, CliError> {
        global.check("the top level")?;
        provider.1.check(&format!("[providers.{}]", provider.0))?;
        for (name, table) in &models {
            table.check(&format!("[models.{name:?}]"))?;
        }
        Ok(Layers {
            global,
            provider: provider.1,
            models,
        })
    }

    /// What a run of `model` gets: each setting from the first of the flags,
    /// `[models."MODEL"]`, the provider's table and the top level that sets it. The one
    /// place this precedence is decided.
    pub(crate) fn resolve(&self, flags: &RunDefaults, model: &str) -> RunDefaults {
        let none = RunDefaults::default();
        let per_model = self.models.get(model).unwrap_or(&none);
        [per_model, &self.provider, &self.global]
            .into_iter()
            .fold(flags.clone(), RunDefaults::or)
    }
}

/// A value read by its type's `FromStr` (the flags' spelling, any case); a TOML boolean
/// is read as `true` or `false`.
fn parsed<'de, D, T>(deserializer: D) -> Result<Option<T>, D::Error>
where
    D: Deserializer<'de>,
    T: FromStr,
    T::Err: Display,
{
    #[derive(Deserialize)]
    #[serde(untagged)]
    enum Raw {
        Bool(bool),
        Text(String),
    }
    let text = match Raw::deserialize(deserializer)? {
        Raw::Bool(b) => b.to_string(),
        Raw::Text(t) => t,
    };
    text.parse().map(Some).map_err(serde::de::Error::custom)
}

/// `keep_alive`: a duration as Ollama reads it, or a number of seconds.
fn keep_alive<'de, D: Deserializer<'de>>(deserializer: D) -> Result<Option<String>, D::Error> {
    #[derive(Deserialize)]
    #[serde(untagged)]
    enum Raw {
        Seconds(i64),
        Text(String),
    }
    let text = match Raw::deserialize(deserializer)? {
        Raw::Seconds(n) => n.to_string(),
        Raw::Text(t) => t,
    };
    crate::args::keep_alive(&text)
        .map(Some)
        .map_err(serde::de::Error::custom)
}

/// The lines `ollm config show` prints for `table` (TOML, one `key = value` a line).
pub(crate) fn render(table: &RunDefaults) -> String {
    toml::to_string(table).unwrap_or_default()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn table(text: &str) -> RunDefaults {
        toml::from_str(text).unwrap()
    }

    /// Defaults that set only the temperature.
    fn warm(temperature: f32) -> RunDefaults {
        RunDefaults {
            sampling: Sampling {
                temperature: Some(temperature),
                ..Sampling::default()
            },
            ..RunDefaults::default()
        }
    }

    /// Precedence, one row per case: which layers set `temperature` (flag, model,
    /// provider, global) and the value the run gets.
    #[test]
    fn the_nearest_layer_that_sets_a_value_wins() {
        let t = warm;
        let none = RunDefaults::default;
        let check = |flag: RunDefaults,
                     model: RunDefaults,
                     provider: RunDefaults,
                     global: RunDefaults,
                     expected: Option<f32>| {
            let layers = Layers {
                global,
                provider,
                models: [("m".to_owned(), model)].into(),
            };
            let got = layers.resolve(&flag, "m").sampling.temperature;
            assert_eq!(got, expected);
            // Another model's table never applies.
            let other = layers.resolve(&flag, "other").sampling.temperature;
            assert_eq!(
                other,
                flag.sampling
                    .temperature
                    .or(layers.provider.sampling.temperature)
                    .or(layers.global.sampling.temperature)
            );
        };
        check(t(1.0), t(2.0), t(3.0), t(4.0), Some(1.0));
        check(none(), t(2.0), t(3.0), t(4.0), Some(2.0));
        check(none(), none(), t(3.0), t(4.0), Some(3.0));
        check(none(), none(), none(), t(4.0), Some(4.0));
        check(none(), none(), none(), none(), None);
        check(t(1.0), none(), none(), t(4.0), Some(1.0));
        check(none(), t(2.0), none(), t(4.0), Some(2.0));
    }

    #[test]
    fn each_setting_is_settled_on_its_own() {
        let layers = Layers {
            global: table("system = \"global\"\nmax_turns = 3\nstop = [\"A\"]"),
            provider: table("system = \"provider\"\nkeep_alive = \"10m\""),
            models: [(
                "m".to_owned(),
                table("temperature = 0.5\nthink = \"high\"\ntool_mode = \"ReAct\""),
            )]
            .into(),
        };
        let flags = RunDefaults {
            max_turns: Some(7),
            ..RunDefaults::default()
        };
        let got = layers.resolve(&flags, "m");
        assert_eq!(
            got,
            RunDefaults {
                think: Some(Think::High),
                system: Some("provider".into()),
                tool_mode: Some(ToolMode::React),
                max_turns: Some(7),
                sampling: Sampling {
                    temperature: Some(0.5),
                    stop: Some(vec!["A".into()]),
                    ..Sampling::default()
                },
                keep_alive: Some("10m".into()),
                ..RunDefaults::default()
            }
        );
    }

    #[test]
    fn values_are_read_as_the_flags_read_them() {
        let check = |text: &str, expected: Result<RunDefaults, ()>| {
            let got: Result<RunDefaults, _> = toml::from_str(text);
            assert_eq!(got.map_err(|_| ()), expected, "{text}");
        };
        let think = |t| RunDefaults {
            think: Some(t),
            ..RunDefaults::default()
        };
        check("think = true", Ok(think(Think::On)));
        check("think = \"LOW\"", Ok(think(Think::Low)));
        check("think = \"max\"", Err(()));
        check("tool_mode = \"magic\"", Err(()));
        let keep = |k: &str| RunDefaults {
            keep_alive: Some(k.into()),
            ..RunDefaults::default()
        };
        check("keep_alive = -1", Ok(keep("-1")));
        check("keep_alive = \"1h30m\"", Ok(keep("1h30m")));
        check("keep_alive = \"soon\"", Err(()));
        check("temperature = 1", Ok(warm(1.0)));
        check("bogus = 1", Err(()));
    }

    #[test]
    fn values_the_flags_refuse_are_refused_naming_the_table() {
        for text in [
            "temperature = -0.5",
            "top_p = 1.5",
            "max_turns = 0",
            "max_tokens = 0",
        ] {
            let err = table(text).check("[models.\"m\"]").unwrap_err();
            assert!(matches!(err, CliError::Usage(_)), "{text}");
        }
        assert!(table("temperature = 0.0\ntop_p = 1.0").check("x").is_ok());
    }

    #[test]
    fn rendered_tables_read_back_as_themselves() {
        let t = table(
            "think = \"medium\"\nhide_thinking = true\nsystem = \"be \\\"brief\\\"\"\n\
             tool_mode = \"react\"\nmax_turns = 4\nmax_tokens = 99\ntemperature = 0.25\n\
             top_p = 0.5\ntop_k = 40\nseed = -3\nstop = [\"END\"]\nkeep_alive = \"5m\"",
        );
        let shown = render(&t);
        assert_eq!(table(&shown), t, "{shown}");
        assert_eq!(render(&RunDefaults::default()), "");
        // A float is shown as written, not as its nearest f64.
        assert_eq!(render(&table("temperature = 0.1")), "temperature = 0.1\n");
    }
}
