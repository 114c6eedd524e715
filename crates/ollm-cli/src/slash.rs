//! The chat's Ollama-style settings commands: `/set` and `/show`, as `ollama run` spells
//! them, so a user's habits carry over.
//!
//! Decisions:
//! - The commands edit the chat's [`ChatConfig`] and nothing else; the chat hands the new
//!   config to its client, so a parameter set here is on the wire of the next request
//!   (core copies `options` into every request).
//! - Parameter names are Ollama's (`num_predict`, `num_ctx`, `repeat_penalty`, ...); the
//!   value is parsed strictly and a bad one changes nothing.
//! - `/set think` and `/set nothink` are the same as `/think on` and `/think off`.
//! - Everything here is pure (text in, text out) so it is tested without a terminal.

use ollm_core::ChatConfig;
use ollm_types::Think;

use crate::sampling;

/// The usage text for `/set`.
pub(crate) const SET_USAGE: &str = "usage: /set system TEXT | /set parameter NAME VALUE | /set think | /set nothink\n  parameters: temperature, top_p, top_k, repeat_penalty, seed, num_predict, num_ctx, stop";

/// The usage text for `/show`.
pub(crate) const SHOW_USAGE: &str = "usage: /show info | parameters | system";

/// Applies `/set ARG` to `config`: `Ok` with what changed, `Err` with why nothing did.
pub(crate) fn set(arg: Option<&str>, config: &mut ChatConfig) -> Result<String, String> {
    let arg = arg.unwrap_or_default().trim();
    let (what, rest) = arg.split_once(char::is_whitespace).unwrap_or((arg, ""));
    let rest = rest.trim();
    match what {
        "system" if !rest.is_empty() => {
            config.system = Some(unquote(rest).to_owned());
            Ok("set system message".to_owned())
        }
        "system" => {
            config.system = None;
            Ok("cleared system message".to_owned())
        }
        "parameter" => {
            let (name, value) = rest
                .split_once(char::is_whitespace)
                .ok_or_else(|| SET_USAGE.to_owned())?;
            set_parameter(name, value.trim(), config)?;
            Ok(format!("set parameter {name} to {}", value.trim()))
        }
        "think" => {
            config.think = Some(Think::On);
            Ok("thinking: on".to_owned())
        }
        "nothink" => {
            config.think = Some(Think::Off);
            Ok("thinking: off".to_owned())
        }
        _ => Err(SET_USAGE.to_owned()),
    }
}

fn unquote(text: &str) -> &str {
    text.strip_prefix('"')
        .and_then(|t| t.strip_suffix('"'))
        .unwrap_or(text)
}

fn parse<T: std::str::FromStr>(name: &str, value: &str) -> Result<T, String> {
    value
        .parse()
        .map_err(|_| format!("invalid value {value:?} for parameter {name}"))
}

fn ruled<T>(name: &str, value: Result<T, String>) -> Result<T, String> {
    value.map_err(|why| format!("invalid value for parameter {name}: {why}"))
}

fn set_parameter(name: &str, value: &str, config: &mut ChatConfig) -> Result<(), String> {
    let o = &mut config.options;
    match name {
        // The same rules as the flags and the config file.
        "temperature" => o.temperature = Some(ruled(name, sampling::temperature(value))?),
        "top_p" => o.top_p = Some(ruled(name, sampling::probability(value))?),
        "top_k" => o.top_k = Some(parse(name, value)?),
        "repeat_penalty" => o.repeat_penalty = Some(parse(name, value)?),
        "seed" => o.seed = Some(parse(name, value)?),
        "num_predict" => o.max_tokens = Some(parse(name, value)?),
        "num_ctx" => o.context_length = Some(parse(name, value)?),
        "stop" => o.stop.push(unquote(value).to_owned()),
        other => return Err(format!("unknown parameter {other:?}\n{SET_USAGE}")),
    }
    Ok(())
}

/// The text of `/show ARG`; `info` is given by the chat (it knows the server's answer).
pub(crate) fn show(arg: Option<&str>, config: &ChatConfig, info: &str) -> String {
    match arg.map(str::trim) {
        Some("info") => info.to_owned(),
        Some("parameters") => parameters(config),
        Some("system") => config
            .system
            .clone()
            .unwrap_or_else(|| "no system message set".to_owned()),
        _ => SHOW_USAGE.to_owned(),
    }
}

/// The parameters this chat sets, one `name value` a line (Ollama's names).
pub(crate) fn parameters(config: &ChatConfig) -> String {
    let o = &config.options;
    let mut lines = Vec::new();
    let mut add = |name: &str, value: Option<String>| {
        if let Some(v) = value {
            lines.push(format!("{name:<16}{v}"));
        }
    };
    add("temperature", o.temperature.map(|v| v.to_string()));
    add("top_p", o.top_p.map(|v| v.to_string()));
    add("top_k", o.top_k.map(|v| v.to_string()));
    add("repeat_penalty", o.repeat_penalty.map(|v| v.to_string()));
    add("seed", o.seed.map(|v| v.to_string()));
    add("num_predict", o.max_tokens.map(|v| v.to_string()));
    add("num_ctx", o.context_length.map(|v| v.to_string()));
    for s in &o.stop {
        add("stop", Some(format!("{s:?}")));
    }
    add("think", config.think.map(|t| t.to_string()));
    if lines.is_empty() {
        "no parameters set (the server's defaults apply)".to_owned()
    } else {
        lines.join("\n")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Applies `line` (what follows `/set`) to a fresh config and checks the outcome.
    fn check(line: &str, ok: bool, pred: impl Fn(&ChatConfig) -> bool) {
        let mut c = ChatConfig::default();
        let before = c.clone();
        let out = set(Some(line), &mut c);
        assert_eq!(out.is_ok(), ok, "{line}: {out:?}");
        if ok {
            assert!(pred(&c), "{line}: {c:?}");
        } else {
            assert_eq!(c, before, "{line}: a refused /set changes nothing");
        }
    }

    #[test]
    fn set_follows_ollama() {
        check("system be brief", true, |c| {
            c.system.as_deref() == Some("be brief")
        });
        check("system \"quoted\"", true, |c| {
            c.system.as_deref() == Some("quoted")
        });
        check("parameter temperature 0.2", true, |c| {
            c.options.temperature == Some(0.2)
        });
        check("parameter top_k 40", true, |c| c.options.top_k == Some(40));
        check("parameter top_p 0.9", true, |c| {
            c.options.top_p == Some(0.9)
        });
        check("parameter seed -3", true, |c| c.options.seed == Some(-3));
        check("parameter num_predict 64", true, |c| {
            c.options.max_tokens == Some(64)
        });
        check("parameter num_ctx 8192", true, |c| {
            c.options.context_length == Some(8192)
        });
        check("parameter repeat_penalty 1.1", true, |c| {
            c.options.repeat_penalty == Some(1.1)
        });
        check("parameter stop \"<end>\"", true, |c| {
            c.options.stop == ["<end>"]
        });
        check("think", true, |c| c.think == Some(Think::On));
        check("nothink", true, |c| c.think == Some(Think::Off));
        check("parameter temperature warm", false, |_| true);
        // The flags' and the config's rules: refused here too.
        check("parameter temperature -1", false, |_| true);
        check("parameter temperature NaN", false, |_| true);
        check("parameter top_p 1.5", false, |_| true);
        check("parameter top_k -1", false, |_| true);
        check("parameter nosuch 1", false, |_| true);
        check("parameter temperature", false, |_| true);
        check("verbose", false, |_| true);
        check("", false, |_| true);
    }

    #[test]
    fn show_lists_what_is_set() {
        let mut c = ChatConfig::default();
        assert!(show(Some("parameters"), &c, "").contains("no parameters"));
        assert_eq!(show(Some("system"), &c, ""), "no system message set");
        assert_eq!(show(Some("info"), &c, "the info"), "the info");
        assert_eq!(show(None, &c, ""), SHOW_USAGE);
        set(Some("parameter temperature 0.5"), &mut c).unwrap();
        set(Some("system hi"), &mut c).unwrap();
        assert!(show(Some("parameters"), &c, "").contains("temperature     0.5"));
        assert_eq!(show(Some("system"), &c, ""), "hi");
    }
}
