//! Process-wide logging: `tracing` to standard error, filtered by `RAFTRAIN_LOG` (default
//! `LOG_FILTER_DEFAULT`: INFO, openraft's own at WARN, since its INFO lines are many and rarely
//! what an operator needs, and its replication's off, since it logs three lines per failed try
//! to a peer that is down, every few tens of milliseconds; the consensus crate logs such a peer
//! once as it goes down and comes back instead, `peer unreachable`, and `QuietVotes` drops
//! openraft's error line for each vote request such a peer fails), as text (coloured only on
//! a terminal) or one JSON object a line, and a panic hook that logs the panic before the
//! default report.
//!
//! A JSON line is flat for log stores to query: the event's fields (`message` included) sit at
//! the top level beside `timestamp`, `level` and `target`, and so do the process's `role`
//! (`master`, `pserver`, `trainer`, ...) and, when the command line names it, its `id` (a
//! master's `--id`, a pserver's advertised address, a trainer's `--name`). The spans a line is
//! in (a trainer's id, a task's) stay under `span` and `spans`, as tracing-subscriber writes them.

use std::fmt::Write as _;
use std::io::IsTerminal as _;

use clap::ValueEnum;
use tracing_subscriber::fmt::format::{self, FormatEvent, FormatFields, Writer};
use tracing_subscriber::fmt::FmtContext;
use tracing_subscriber::layer::SubscriberExt as _;
use tracing_subscriber::registry::LookupSpan;
use tracing_subscriber::util::SubscriberInitExt as _;
use tracing_subscriber::EnvFilter;

use crate::quiet_votes::QuietVotes;

/// The environment variable holding a `tracing` filter such as `info,consensus=debug`.
const LOG_FILTER_VARIABLE: &str = "RAFTRAIN_LOG";
const LOG_FILTER_DEFAULT: &str =
    "info,openraft=warn,openraft::replication=off,openraft::engine::handler::replication_handler=off";

/// How log lines are written.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub(crate) enum LogFormat {
    /// Human-readable lines.
    Text,
    /// One flat JSON object per line (for log collectors): the event's fields, the process's
    /// `role` and `id`.
    Json,
}

/// Who is logging: the subcommand's role, and the process's name within it when known.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct ProcessIdentity {
    pub(crate) role: &'static str,
    pub(crate) id: Option<String>,
}

/// Installs the subscriber and the panic hook. Called once, first thing in `main`.
pub(crate) fn init(format: LogFormat, identity: &ProcessIdentity) {
    let filter = EnvFilter::try_from_env(LOG_FILTER_VARIABLE)
        .unwrap_or_else(|_| EnvFilter::new(LOG_FILTER_DEFAULT));
    let builder = tracing_subscriber::fmt().with_env_filter(filter).with_writer(std::io::stderr);
    match format {
        LogFormat::Text => {
            builder.with_ansi(std::io::stderr().is_terminal()).finish().with(QuietVotes).init()
        }
        LogFormat::Json => {
            let json = format::format().json().flatten_event(true);
            let tagged = Tagged { inner: json, members: identity.json_members() };
            builder.json().event_format(tagged).finish().with(QuietVotes).init()
        }
    }
    let default_hook = std::panic::take_hook();
    std::panic::set_hook(Box::new(move |info| {
        PANICKED.store(true, std::sync::atomic::Ordering::SeqCst);
        tracing::error!(panic = %info, "raftrain panicked; this is a bug");
        default_hook(info);
    }));
}

/// Whether any thread or task of this process panicked (a task's panic, such as the Raft
/// core's, does not end the process by itself: the error it leads to exits with Rust's panic
/// status, 101, rather than 1).
pub(crate) static PANICKED: std::sync::atomic::AtomicBool =
    std::sync::atomic::AtomicBool::new(false);

impl ProcessIdentity {
    /// `"role":"...","id":"...",`: the members every JSON line starts with, escaped once.
    fn json_members(&self) -> String {
        let quoted = |text: &str| serde_json::Value::from(text).to_string();
        let mut members = format!("\"role\":{},", quoted(self.role));
        if let Some(id) = &self.id {
            // Writing to a String cannot fail.
            let _ = write!(members, "\"id\":{},", quoted(id));
        }
        members
    }
}

/// An event formatter that writes `inner`'s JSON object with `members` first.
struct Tagged<F> {
    inner: F,
    members: String,
}

impl<S, N, F> FormatEvent<S, N> for Tagged<F>
where
    S: tracing::Subscriber + for<'lookup> LookupSpan<'lookup>,
    N: for<'writer> FormatFields<'writer> + 'static,
    F: FormatEvent<S, N>,
{
    fn format_event(
        &self,
        context: &FmtContext<'_, S, N>,
        mut writer: Writer<'_>,
        event: &tracing::Event<'_>,
    ) -> std::fmt::Result {
        let mut line = String::new();
        self.inner.format_event(context, Writer::new(&mut line), event)?;
        match line.strip_prefix('{') {
            Some(rest) => write!(writer, "{{{}{rest}", self.members),
            None => writer.write_str(&line),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The members are valid JSON whatever the id holds, and the id is left out when unknown.
    #[test]
    fn members_are_escaped_json() {
        let check = |identity: ProcessIdentity, expected: &str| {
            let members = identity.json_members();
            assert_eq!(members, expected);
            let object = format!("{{{members}\"message\":\"m\"}}");
            serde_json::from_str::<serde_json::Value>(&object).expect("valid JSON");
        };
        check(ProcessIdentity { role: "demo", id: None }, r#""role":"demo","#);
        check(
            ProcessIdentity { role: "trainer", id: Some("a\"b\n".into()) },
            r#""role":"trainer","id":"a\"b\n","#,
        );
    }
}
