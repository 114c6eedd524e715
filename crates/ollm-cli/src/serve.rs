//! `ollm serve`: an OpenAI-compatible server in front of a pool of model servers, which
//! repairs tool calls on the way through (docs/serve.md).
//!
//! # Decisions
//! - The pool is the library's [`ProviderPool`]; each `--upstream` is one replica,
//!   reached through the adapter `--provider` names, without the adapter's own retries
//!   (the pool's failover is the retry).
//! - It listens on loopback only unless an API key is given: an open proxy to a model
//!   server on a LAN is a gift to anyone on it.
//! - The health checks run every `--health-interval` seconds in the background; traffic
//!   also marks replicas (see the pool's docs).
//! - The address it listens on is printed on stdout (`listening on http://...`) once the
//!   socket is bound, so scripts and tests can start it on port 0 and read the port.
//! - The config file's `[coach] off` switches the coach's rules off for serve's repairs
//!   as for `ollm run`; the rest of the coach's config is `ollm_serve`'s default (the
//!   `path` argument for `path-in-name`, as the CLI's tools take).
//! - This file is the CLI's glue: flags, the config file's `[serve]` table
//!   ([`ServeEntry`]) and the environment settle here into plain [`Options`], and the
//!   server is `ollm_serve`'s router (crates/ollm-serve). A `--repair` flag wins over
//!   `[serve] repair`, `--repair-model` over `[serve.models]`.

use std::io::Write;
use std::time::Duration;

use ollm_bridge::{ProviderPool, Replica, ReplicaKind};
use ollm_core::{CoachConfig, Rule, ToolMode};
use ollm_serve::{ClientKey, Options, Policy, Repair, ServeEntry};

use crate::args::{HealthArg, RepairArg, ServeArgs};
use crate::config::{self, Env, ProviderKind, ProviderSettings, Settings};
use crate::exit::CliError;
use crate::providers;

/// Runs the server until Ctrl-C.
pub(crate) fn run(
    args: &ServeArgs,
    settings: &Settings,
    entry: &ServeEntry,
) -> Result<(), CliError> {
    let provider = &settings.provider;
    let mut options = options(args, entry, provider.kind, &Env::from_process())?;
    rules_switched(&mut options, settings);
    if !args.listen.ip().is_loopback() && options.keys.is_empty() {
        return Err(CliError::Usage(format!(
            "refusing to listen on {} without --api-key: only loopback addresses are open",
            args.listen
        )));
    }
    let rt = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()?;
    let pool = pool(args, provider)?;
    let router = ollm_serve::router(pool.clone(), options)
        .map_err(|e| CliError::Usage(format!("[serve]: {e}")))?;
    rt.block_on(async {
        let checks = pool.spawn_health_checks(Duration::from_secs(args.health_interval.max(1)));
        let listener = tokio::net::TcpListener::bind(args.listen).await?;
        let addr = listener.local_addr()?;
        {
            let mut out = std::io::stdout().lock();
            writeln!(out, "listening on http://{addr}")?;
            out.flush()?;
        }
        let shutdown = async {
            let _ = tokio::signal::ctrl_c().await;
        };
        let served = axum::serve(listener, router)
            .with_graceful_shutdown(shutdown)
            .await;
        checks.abort();
        served.map_err(CliError::from)
    })
}

/// The server's options from its flags, the config file's `[serve]` table (flags win) and
/// the environment (the keys' variables).
fn options(
    args: &ServeArgs,
    entry: &ServeEntry,
    kind: ProviderKind,
    env: &Env,
) -> Result<Options, CliError> {
    let flag = match (args.no_repair, args.repair) {
        (true, _) => Some(Repair::Off),
        (false, arg) => arg.map(|a| match a {
            RepairArg::Off => Repair::Off,
            RepairArg::Flag => Repair::Flag,
            RepairArg::On => Repair::On,
        }),
    };
    let mut policy = Policy {
        default: flag.or(entry.repair).unwrap_or_default(),
        models: entry
            .models
            .iter()
            .filter_map(|(name, m)| Some((name.clone(), m.repair?)))
            .collect(),
    };
    for raw in &args.repair_models {
        let (model, repair) = raw
            .rsplit_once('=')
            .and_then(|(m, p)| Some((m, p.parse::<Repair>().ok()?)))
            .filter(|(m, _)| !m.is_empty())
            .ok_or_else(|| {
                CliError::Usage(format!(
                    "--repair-model {raw:?}: expected MODEL=off|flag|on"
                ))
            })?;
        policy.models.insert(model.to_owned(), repair);
    }
    let max_in_flight = match args.max_in_flight.or(entry.max_in_flight) {
        Some(0) => {
            return Err(CliError::Usage(
                "[serve] max_in_flight must be at least 1".into(),
            ));
        }
        limit => limit.map(|n| n as usize),
    };
    let mut options = Options::default();
    options.policy = policy;
    options.keys = keys(args, entry, env)?;
    options.max_in_flight = max_in_flight;
    options.max_body_bytes = args.max_body_bytes;
    options.forward_headers.clone_from(&entry.forward_headers);
    coach_switches(&mut options, entry);
    // Anthropic's Messages API takes no response schema: the ReAct prompt instead.
    options.constraint = match kind {
        ProviderKind::Anthropic => ToolMode::React,
        ProviderKind::Ollama | ProviderKind::Openai => ToolMode::Constrained,
    };
    Ok(options)
}

/// The `[serve]` table's coach switches, the server's (on by default, as in `ollm
/// run`: [`ServeEntry::tool_or_none`]) and each model's own, and the client tools it
/// takes as read-only (for every model: the tools are the clients').
fn coach_switches(options: &mut Options, entry: &ServeEntry) {
    options.coach.read_only = entry.read_only().into_iter().collect();
    set_rule(
        &mut options.coach,
        Rule::ToolOrNone,
        Some(entry.tool_or_none()),
    );
    set_rule(
        &mut options.coach,
        Rule::GreedyToolTurns,
        Some(entry.greedy_tool_turns()),
    );
    set_rule(&mut options.coach, Rule::RoutedCall, entry.routed_call);
    for (model, m) in &entry.models {
        let switches = [
            (Rule::ToolOrNone, m.tool_or_none),
            (Rule::GreedyToolTurns, m.greedy_tool_turns),
            (Rule::RoutedCall, m.routed_call),
        ];
        if switches.iter().any(|(_, on)| on.is_some()) {
            let mut coach = options.coach.clone();
            for (rule, on) in switches {
                set_rule(&mut coach, rule, on);
            }
            options.model_coach.insert(model.clone(), coach);
        }
    }
}

/// `[coach] off` and `on`, and `[models."NAME".coach] off` and `on`, hold for serve's
/// repairs as for `ollm run`: the first for every model, the second for requests naming
/// that model (`off` outranks `on`).
fn rules_switched(options: &mut Options, settings: &Settings) {
    let per_model = [
        (&settings.model_coach_off, true),
        (&settings.model_coach_on, false),
    ];
    for (models, off) in per_model {
        for (model, rules) in models {
            let server = options.coach.clone();
            let coach = options.model_coach.entry(model.clone()).or_insert(server);
            let set = if off { &mut coach.off } else { &mut coach.on };
            set.extend(rules.iter().copied());
        }
    }
    let coaches = std::iter::once(&mut options.coach).chain(options.model_coach.values_mut());
    coaches.for_each(|c| {
        c.off.extend(settings.coach_off.iter().copied());
        c.on.extend(settings.coach_on.iter().copied());
    });
}

/// A rule's switch in the `[serve]` table: on, off, or as `coach` has it. Either word
/// replaces the other, so a model's own `true` wins over the server's `false` (its coach
/// starts as a copy of the server's); `[coach] off` is applied after, and wins over both.
fn set_rule(coach: &mut CoachConfig, rule: Rule, on: Option<bool>) {
    match on {
        Some(true) => {
            coach.off.remove(&rule);
            coach.turn_on(rule);
        }
        Some(false) => {
            coach.on.remove(&rule);
            coach.turn_off(rule);
        }
        None => {}
    }
}

/// The keys clients may use: `--api-key` (named `default`) and `[serve.keys.NAME]`.
fn keys(args: &ServeArgs, entry: &ServeEntry, env: &Env) -> Result<Vec<ClientKey>, CliError> {
    let mut keys: Vec<ClientKey> = args
        .api_key
        .iter()
        .map(|secret| ClientKey {
            name: "default".into(),
            secret: secret.clone(),
            repair: None,
        })
        .collect();
    for (name, key) in &entry.keys {
        let secret = env.get(&key.api_key_env).ok_or_else(|| {
            CliError::Usage(format!(
                "[serve.keys.{name}]: the variable {} is not set",
                key.api_key_env
            ))
        })?;
        keys.push(ClientKey {
            name: name.clone(),
            secret: secret.to_owned(),
            repair: key.repair,
        });
    }
    Ok(keys)
}

/// The pool of `--upstream`s (or the provider's own address).
fn pool(args: &ServeArgs, provider: &ProviderSettings) -> Result<ProviderPool, CliError> {
    let kind = match (args.health, provider.kind) {
        (Some(HealthArg::Llama), _) => ReplicaKind::LlamaCpp,
        (Some(HealthArg::Models), _) => ReplicaKind::OpenAi,
        (Some(HealthArg::Ollama), _) | (None, ProviderKind::Ollama) => ReplicaKind::Ollama,
        (None, _) => ReplicaKind::OpenAi,
    };
    let addresses = if args.upstreams.is_empty() {
        vec![provider.address.expose().to_owned()]
    } else {
        args.upstreams
            .iter()
            .map(|raw| {
                config::normalise_host(raw, provider.kind)
                    .ok_or_else(|| CliError::Usage(format!("unusable --upstream address {raw:?}")))
            })
            .collect::<Result<_, _>>()?
    };
    let replicas = addresses
        .iter()
        .map(|address| {
            let adapter = providers::connect_member(provider, address)?;
            Ok(Replica::new(address, kind, adapter))
        })
        .collect::<Result<Vec<_>, CliError>>()?;
    ProviderPool::new(replicas).map_err(|e| CliError::Usage(e.to_string()))
}

#[cfg(test)]
mod settle_tests {
    use clap::Parser;

    use super::*;
    use crate::args::{Cli, Command};

    fn settle(flags: &[&str], file: &str, kind: ProviderKind) -> Result<Options, CliError> {
        let argv = [&["ollm", "serve"][..], flags].concat();
        let Command::Serve(args) = Cli::try_parse_from(argv).expect("flags").command else {
            panic!("not serve");
        };
        let entry: ServeEntry = toml::from_str(file).expect("table");
        options(
            &args,
            &entry,
            kind,
            &Env::from_pairs(&[("AGENT_KEY", "k1")]),
        )
    }

    #[test]
    fn flags_win_over_the_table_and_keys_come_from_the_environment() {
        let file = "repair = \"on\"\n[models.m]\nrepair = \"on\"\n\
                    [keys.agent]\napi_key_env = \"AGENT_KEY\"\nrepair = \"flag\"\n";
        let check = |flags: &[&str], default: Repair, m: Repair| {
            let got = settle(flags, file, ProviderKind::Openai).expect("settled");
            assert_eq!(
                (got.policy.default, got.policy.models["m"]),
                (default, m),
                "{flags:?}"
            );
            assert_eq!(got.constraint, ToolMode::Constrained);
            let keys: Vec<_> = got
                .keys
                .iter()
                .map(|k| (k.name.as_str(), k.secret.as_str(), k.repair))
                .collect();
            assert_eq!(keys, [("agent", "k1", Some(Repair::Flag))]);
        };
        check(&[], Repair::On, Repair::On);
        check(&["--repair", "flag"], Repair::Flag, Repair::On);
        check(&["--no-repair"], Repair::Off, Repair::On);
        check(&["--repair-model", "m=off"], Repair::On, Repair::Off);
        let limit = |flags: &[&str], file: &str| {
            settle(flags, file, ProviderKind::Openai).map(|o| o.max_in_flight)
        };
        assert_eq!(limit(&[], "").ok(), Some(None));
        assert_eq!(limit(&[], "max_in_flight = 3").ok(), Some(Some(3)));
        assert_eq!(
            limit(&["--max-in-flight", "2"], "max_in_flight = 3").ok(),
            Some(Some(2))
        );
        assert!(limit(&[], "max_in_flight = 0").is_err());
        let forward = settle(
            &[],
            "forward_headers = [\"x-smg-routing-key\"]",
            ProviderKind::Openai,
        )
        .expect("settled")
        .forward_headers;
        assert_eq!(forward, ["x-smg-routing-key"]);
        let routed = |file: &str| {
            let options = settle(&[], file, ProviderKind::Openai).expect("settled");
            options.coach.is_on(Rule::ToolOrNone)
        };
        assert!(routed(""), "serve's default, as ollm run's");
        assert!(routed("tool_or_none = true"));
        assert!(!routed("tool_or_none = false"));
        let per_model = settle(
            &[],
            "tool_or_none = false\n[models.small]\ntool_or_none = true\n[models.big]\nrepair = \"flag\"\n",
            ProviderKind::Openai,
        )
        .expect("settled");
        assert!(
            !per_model.coach.is_on(Rule::ToolOrNone),
            "the server's stays off"
        );
        let small = per_model
            .model_coach
            .get("small")
            .expect("small's own coach");
        assert!(small.is_on(Rule::ToolOrNone));
        assert!(
            !per_model.model_coach.contains_key("big"),
            "big says nothing of it"
        );
        let read_only = settle(
            &[],
            "read_only = [\"read_file\"]\n[models.small]\ntool_or_none = true\n",
            ProviderKind::Openai,
        )
        .expect("settled");
        let names = |c: &CoachConfig| c.read_only.iter().cloned().collect::<Vec<_>>();
        assert_eq!(names(&read_only.coach), ["read_file"]);
        assert_eq!(
            names(&read_only.model_coach["small"]),
            ["read_file"],
            "every model's"
        );
        let greedy = |file: &str| {
            let coach = settle(&[], file, ProviderKind::Openai)
                .expect("settled")
                .coach;
            coach.on.contains(&Rule::GreedyToolTurns) && coach.is_on(Rule::GreedyToolTurns)
        };
        assert!(greedy(""), "serve's default, as ollm run's");
        assert!(!greedy("greedy_tool_turns = false"));
        let default_read_only = settle(&[], "", ProviderKind::Openai).expect("settled");
        let read = &default_read_only.coach.read_only;
        assert!(read.contains("read_file") && read.contains("list_directory"));
        assert!(!read.contains("write_file") && !read.contains("run_command"));
        let none = settle(&[], "read_only = []", ProviderKind::Openai).expect("settled");
        assert!(none.coach.read_only.is_empty(), "nothing withheld");
        let routed = settle(
            &[],
            "routed_call = true\n[models.big]\nrouted_call = false\n",
            ProviderKind::Openai,
        )
        .expect("settled");
        assert!(routed.coach.is_on(Rule::RoutedCall));
        assert!(
            !routed.model_coach["big"].is_on(Rule::RoutedCall),
            "big's own"
        );
        let routed = settle(&[], "", ProviderKind::Openai).expect("settled");
        assert!(!routed.coach.is_on(Rule::RoutedCall), "off by default");
        // A model's own `true` over the server's `false`, as the docs' example has it.
        let own = settle(
            &[],
            "tool_or_none = false\n[models.small]\ntool_or_none = true\n",
            ProviderKind::Openai,
        )
        .expect("settled");
        assert!(!own.coach.is_on(Rule::ToolOrNone));
        assert!(
            own.model_coach["small"].is_on(Rule::ToolOrNone),
            "small's own"
        );
        let messages = settle(&[], "", ProviderKind::Anthropic).expect("settled");
        assert_eq!(
            messages.constraint,
            ToolMode::React,
            "no schema on the Messages API"
        );
        assert!(settle(&["--repair-model", "=on"], "", ProviderKind::Openai).is_err());
        assert!(
            settle(
                &[],
                "[keys.x]\napi_key_env = \"UNSET\"\n",
                ProviderKind::Openai
            )
            .is_err()
        );
    }

    /// `[coach] off` holds for every model's coach, `[models."NAME".coach] off` for
    /// that model's only, whether or not `[serve.models."NAME"]` gave it a coach.
    #[test]
    fn the_configs_rules_off_and_on_hold_for_serves_coaches() {
        let mut settings = crate::config::settle(
            &crate::args::GlobalArgs::default(),
            &Env::default(),
            "c".into(),
            None,
        )
        .expect("settled");
        settings.coach_off.insert(Rule::ActNudge);
        let big = [Rule::ToolsContext].into();
        settings.model_coach_off.insert("big".into(), big);
        let mut options = settle(
            &[],
            "[models.small]\ntool_or_none = true\n",
            ProviderKind::Openai,
        )
        .expect("settled");
        rules_switched(&mut options, &settings);
        let off = |coach: &CoachConfig| coach.off.iter().copied().collect::<Vec<_>>();
        assert_eq!(off(&options.coach), [Rule::ActNudge]);
        assert_eq!(off(&options.model_coach["small"]), [Rule::ActNudge]);
        assert_eq!(
            off(&options.model_coach["big"]),
            [Rule::ActNudge, Rule::ToolsContext]
        );
        assert!(options.model_coach["small"].is_on(Rule::ToolOrNone));
        // `on` as `off`: the server's for every coach, a model's for its own.
        settings.coach_on.insert(Rule::KeyHint);
        settings
            .model_coach_on
            .insert("gpt".into(), [Rule::NameRepair].into());
        rules_switched(&mut options, &settings);
        let gpt = &options.model_coach["gpt"];
        assert!(gpt.is_on(Rule::NameRepair) && gpt.is_on(Rule::KeyHint));
        assert!(options.coach.is_on(Rule::KeyHint) && !options.coach.is_on(Rule::NameRepair));
        assert!(!options.model_coach["small"].is_on(Rule::NameRepair));
    }
}
