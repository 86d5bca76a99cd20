//! The exit statuses of `raftrain`, so a supervisor can tell a finished process from one to
//! restart and from one that never will work (Kubernetes' `podFailurePolicy` matches them;
//! `deploy/kubernetes/trainers.yaml`). The README lists them; `exit_status` reads them off an
//! error by its typed causes, never by its text.
//!
//! | code | meaning | what a supervisor does |
//! | --- | --- | --- |
//! | 0 | finished: a trainer's job is done, a server was stopped by SIGTERM or SIGINT | nothing |
//! | 1 | failed, cause not classified (a bug, an I/O error, a diverging model) | restart, within a budget |
//! | 2 | fatal configuration error: bad flags, unreadable TLS or token files, a request the masters refuse as wrong, a model that does not fit the job, a trainer `--passes` that is not its submitted job's | give up: the same flags fail again |
//! | 3 | lost slot: a pserver whose slot the masters gave to another generation | replace it (a standby takes the slot) |
//! | 75 | retryable: no master leader or no pserver answered for the `--master-wait-s` or `--pserver-wait-s` limit | restart without counting it as a failure |
//! | 101 | panic (Rust's own status) | a bug: look at the log |
//!
//! 2 is also what clap exits with on a flag it cannot parse, so a typo and a bad value are one
//! code; 75 is `EX_TEMPFAIL` from `sysexits.h`.

use client::pserver::PServerClientError;
use client::ClientError;
use platform::security::SecurityError;
use pserver::held_slot::FenceError;

/// Failed for a reason no other code names.
pub(crate) const FAILED: i32 = 1;
/// The flags, files or job description are wrong: retrying changes nothing.
pub(crate) const CONFIGURATION: i32 = 2;
/// A pserver lost its slot to another generation.
pub(crate) const LOST_SLOT: i32 = 3;
/// The cluster was out of reach for longer than the process was told to wait.
pub(crate) const RETRYABLE: i32 = 75;
/// A thread or task panicked (a bug), and the process ended on an error since: Rust's own
/// status for a panic.
pub(crate) const PANICKED: i32 = 101;

/// Marks an error as a configuration error (`.context(Configuration)`), for checks that have
/// no type of their own (`validate()`'s messages).
#[derive(Debug, Clone, Copy)]
pub(crate) struct Configuration;

impl std::fmt::Display for Configuration {
    fn fmt(&self, formatter: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        formatter.write_str("configuration")
    }
}

/// The exit status for `error`, from the first cause in it that one of the codes names.
pub(crate) fn exit_status(error: &anyhow::Error) -> i32 {
    status_after(error, crate::logging::PANICKED.load(std::sync::atomic::Ordering::SeqCst))
}

/// [`exit_status`] of a process in which a thread or task `panicked` (or not).
fn status_after(error: &anyhow::Error, panicked: bool) -> i32 {
    if panicked {
        return PANICKED;
    }
    // A context marker is found by anyhow through every context layer above it.
    let configuration = error.downcast_ref::<Configuration>().is_some()
        || find::<SecurityError>(error).is_some()
        || find::<trainer::joined_job::IndexJobRefused>(error).is_some()
        || find::<trainer::joined_job::PassesDiffer>(error).is_some();
    if configuration {
        return CONFIGURATION;
    }
    if let Some(FenceError::LeaseLost { .. }) = find::<FenceError>(error) {
        return LOST_SLOT;
    }
    if let Some(pserver_error) = find::<PServerClientError>(error) {
        return pserver_client_status(pserver_error);
    }
    find::<ClientError>(error).map_or(FAILED, client_status)
}

/// `T` among `error`'s context layers or its chain of causes.
fn find<T>(error: &anyhow::Error) -> Option<&T>
where
    T: std::error::Error + Send + Sync + 'static,
{
    error.downcast_ref::<T>().or_else(|| error.chain().find_map(|cause| cause.downcast_ref()))
}

fn pserver_client_status(error: &PServerClientError) -> i32 {
    match error {
        PServerClientError::Master(error) => client_status(error),
        PServerClientError::Unavailable { .. } | PServerClientError::SlotsNotHeld { .. } => {
            RETRYABLE
        }
        PServerClientError::LayoutMismatch(_) => CONFIGURATION,
        _ => FAILED,
    }
}

fn client_status(error: &ClientError) -> i32 {
    match error {
        ClientError::NoMasters
        | ClientError::BadAddress { .. }
        | ClientError::NoSuchJob { .. }
        | ClientError::InvalidArgument { .. } => CONFIGURATION,
        ClientError::Rejected {
            code: tonic::Code::Unauthenticated | tonic::Code::PermissionDenied,
            ..
        } => CONFIGURATION,
        ClientError::NotHolder { .. } => LOST_SLOT,
        ClientError::Deadline { .. }
        | ClientError::TryAgainLater { .. }
        | ClientError::Connection { .. } => RETRYABLE,
        _ => FAILED,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    /// After a panic of any thread or task (the Raft core's), every error exits with Rust's
    /// panic status, whatever its cause.
    #[test]
    fn an_error_after_a_panic_is_the_panic_status() {
        let stopped = anyhow::anyhow!("the Raft core stopped without a word (it panicked)");
        assert_eq!(status_after(&stopped, true), 101);
        assert_eq!(status_after(&stopped, false), 1);
        let configuration = anyhow::anyhow!("bad").context(Configuration);
        assert_eq!(status_after(&configuration, true), 101);
    }

    /// Each typed cause maps to its code wherever it sits in the chain, under any context.
    #[test]
    fn causes_map_to_codes() {
        let check = |error: anyhow::Error, expected: i32| {
            let error = error.context("run the process").context("outermost");
            assert_eq!(status_after(&error, false), expected, "{error:#}");
        };
        check(anyhow::anyhow!("--passes must be at least 1").context(Configuration), 2);
        check(SecurityError::Pair { given: "--tls-cert", missing: "--tls-key" }.into(), 2);
        let deadline = || ClientError::Deadline {
            call: "GetTask",
            deadline: Duration::from_secs(1),
            attempts: 3,
            last_error: "refused".into(),
        };
        check(deadline().into(), RETRYABLE);
        check(PServerClientError::Master(deadline()).into(), RETRYABLE);
        let waited = Duration::from_secs(1);
        check(PServerClientError::SlotsNotHeld { held: 1, desired: 2, waited }.into(), RETRYABLE);
        check(PServerClientError::LayoutMismatch("shape".into()).into(), CONFIGURATION);
        check(
            ClientError::InvalidArgument { call: "ReportDataset", message: "m".into() }.into(),
            2,
        );
        let lost = FenceError::LeaseLost { slot: 0, generation: 1, reason: "taken".into() };
        check(lost.into(), LOST_SLOT);
        let unconfirmed = FenceError::LeaseUnconfirmed { slot: 0, generation: 1, overdue_ms: 9 };
        check(unconfirmed.into(), FAILED);
        check(anyhow::anyhow!("disk full"), FAILED);
        let wrong_token = ClientError::Rejected {
            call: "Status",
            code: tonic::Code::Unauthenticated,
            message: "wrong cluster token".into(),
        };
        check(wrong_token.into(), CONFIGURATION);
    }

    /// A cause behind a plain `source()` (not an anyhow layer) is found too.
    #[test]
    fn a_source_cause_is_found() {
        #[derive(Debug)]
        struct Claim(FenceError);
        impl std::fmt::Display for Claim {
            fn fmt(&self, formatter: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                formatter.write_str("claim the slot")
            }
        }
        impl std::error::Error for Claim {
            fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
                Some(&self.0)
            }
        }
        let lost = FenceError::LeaseLost { slot: 1, generation: 2, reason: "taken".into() };
        assert_eq!(exit_status(&Claim(lost).into()), LOST_SLOT);
    }
}
