//! The sampling knobs of `ollm run`: `temperature`, `top_p`, `top_k`, `seed` and `stop`,
//! in one struct shared by the flags, the config file's layers and the wire (issue 26).
//!
//! # Decisions
//! - One struct, [`Sampling`], is all three: clap flattens it into `ollm run`'s flags
//!   (`--temperature`, ...), serde flattens it into every table of the config file that
//!   sets run defaults (`defaults.rs` `RunDefaults`), and [`Sampling::options`] is the one
//!   place it becomes core's wire struct, `ollm_types::GenerationOptions`. A new knob is
//!   one field here and nowhere else in the settling (`/set parameter` edits the
//!   `GenerationOptions` a chat already holds, `slash.rs`).
//! - Not `GenerationOptions` itself: that struct is ollm-types' (no clap there), and its
//!   `stop` is a list where empty means unset, while a layer must tell "unset" from "set
//!   to nothing". Its `max_tokens` is `ChatConfig::max_tokens` here (the run's cap, a
//!   flag of its own), and its `context_length` is settled by `context.rs`; the config
//!   file has no `repeat_penalty` key (`/set parameter repeat_penalty` has).
//! - Each knob's rule is written once ([`temperature_ok`], [`probability_ok`]): the flag
//!   parsers and [`Sampling::refused`], which checks a config table, both use it.
//! - A leaf: it imports no other module of the CLI.
//! - The config tables that flatten it cannot also use serde's `deny_unknown_fields`
//!   (serde hands a struct with a flattened field every leftover key and takes none back);
//!   `RunDefaults`, which has the attribute, sees every key its table does not know and
//!   refuses the unknown ones.

use clap::Args;
use ollm_types::GenerationOptions;
use serde::{Deserialize, Serialize};

/// `--temperature`, `--top-p`, `--top-k`, `--seed`, `--stop`, and the same keys in the
/// config file. Unset means the next layer's value, else the server's default.
#[derive(Debug, Args, Default, Clone, PartialEq, Deserialize, Serialize)]
#[serde(default)]
pub(crate) struct Sampling {
    /// Sampling temperature (0 picks the likeliest token).
    #[arg(long, value_name = "T", value_parser = temperature)]
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) temperature: Option<f32>,
    /// Nucleus sampling: keep the likeliest tokens up to this total probability (0-1).
    #[arg(long, value_name = "P", value_parser = probability)]
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) top_p: Option<f32>,
    /// Keep only the K likeliest tokens.
    #[arg(long, value_name = "K")]
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) top_k: Option<u32>,
    /// Random seed, for repeatable sampling.
    #[arg(long, value_name = "N", allow_negative_numbers = true)]
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) seed: Option<i64>,
    /// A sequence that ends generation (repeatable).
    #[arg(long, value_name = "TEXT")]
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) stop: Option<Vec<String>>,
}

impl Sampling {
    /// Each knob from `self`, else from `lower`.
    pub(crate) fn or(self, lower: &Sampling) -> Sampling {
        Sampling {
            temperature: self.temperature.or(lower.temperature),
            top_p: self.top_p.or(lower.top_p),
            top_k: self.top_k.or(lower.top_k),
            seed: self.seed.or(lower.seed),
            stop: self.stop.or_else(|| lower.stop.clone()),
        }
    }

    /// The first knob whose value its flag would refuse: `(key, why)`.
    pub(crate) fn refused(&self) -> Option<(&'static str, &'static str)> {
        if self.temperature.is_some_and(|t| !temperature_ok(t)) {
            return Some(("temperature", TEMPERATURE_RULE));
        }
        if self.top_p.is_some_and(|p| !probability_ok(p)) {
            return Some(("top_p", PROBABILITY_RULE));
        }
        None
    }

    /// The wire's sampling options: the one place the knobs reach core. What is unset
    /// stays unset (the server's default).
    pub(crate) fn options(self) -> GenerationOptions {
        GenerationOptions {
            temperature: self.temperature,
            top_p: self.top_p,
            top_k: self.top_k,
            seed: self.seed,
            stop: self.stop.unwrap_or_default(),
            ..GenerationOptions::default()
        }
    }
}

const TEMPERATURE_RULE: &str = "must be a number of at least 0";
const PROBABILITY_RULE: &str = "must be a number from 0 to 1";

/// The temperature's rule: a finite number of at least 0.
fn temperature_ok(t: f32) -> bool {
    t.is_finite() && t >= 0.0
}

/// `top_p`'s rule: a number from 0 to 1.
fn probability_ok(p: f32) -> bool {
    (0.0..=1.0).contains(&p)
}

/// `--temperature`'s parser (and `/set parameter temperature`'s).
pub(crate) fn temperature(text: &str) -> Result<f32, String> {
    match text.parse::<f32>() {
        Ok(v) if temperature_ok(v) => Ok(v),
        _ => Err(format!("`{text}` is not a number of at least 0")),
    }
}

/// `--top-p`'s parser (and `/set parameter top_p`'s).
pub(crate) fn probability(text: &str) -> Result<f32, String> {
    match text.parse::<f32>() {
        Ok(v) if probability_ok(v) => Ok(v),
        _ => Err(format!("`{text}` is not a number from 0 to 1")),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_knob_comes_from_the_first_layer_that_sets_it() {
        let upper = Sampling {
            temperature: Some(0.5),
            stop: Some(Vec::new()),
            ..Sampling::default()
        };
        let lower = Sampling {
            temperature: Some(1.0),
            top_k: Some(40),
            stop: Some(vec!["END".into()]),
            ..Sampling::default()
        };
        let got = upper.or(&lower);
        assert_eq!(got.temperature, Some(0.5));
        assert_eq!(got.top_k, Some(40));
        // A layer that sets `stop = []` sets it: nothing ends generation.
        assert_eq!(got.stop, Some(Vec::new()));
    }

    #[test]
    fn options_carry_every_knob_and_nothing_else() {
        let s = Sampling {
            temperature: Some(0.2),
            top_p: Some(0.9),
            top_k: Some(3),
            seed: Some(-7),
            stop: Some(vec!["###".into()]),
        };
        let o = s.options();
        assert_eq!(
            (o.temperature, o.top_p, o.top_k, o.seed, o.stop),
            (
                Some(0.2),
                Some(0.9),
                Some(3),
                Some(-7),
                vec!["###".to_owned()]
            )
        );
        assert_eq!(
            (o.max_tokens, o.repeat_penalty, o.context_length),
            (None, None, None)
        );
        assert_eq!(Sampling::default().options(), GenerationOptions::default());
    }

    #[test]
    fn the_flag_and_the_file_share_each_rule() {
        let check = |temperature: &str, top_p: &str, file: Option<&str>| {
            let t = temperature.parse::<f32>().unwrap();
            let p = top_p.parse::<f32>().unwrap();
            let s = Sampling {
                temperature: Some(t),
                top_p: Some(p),
                ..Sampling::default()
            };
            assert_eq!(
                s.refused().map(|(key, _)| key),
                file,
                "{temperature} {top_p}"
            );
            let flags_ok = self::temperature(temperature).is_ok() && probability(top_p).is_ok();
            assert_eq!(flags_ok, file.is_none(), "{temperature} {top_p}");
        };
        check("0", "0", None);
        check("2.5", "1", None);
        check("-0.5", "0.5", Some("temperature"));
        check("NaN", "0.5", Some("temperature"));
        check("inf", "0.5", Some("temperature"));
        check("1", "1.5", Some("top_p"));
        check("1", "-0.1", Some("top_p"));
    }
}
