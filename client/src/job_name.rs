//! What a job may be called, checked wherever a name comes in (`raftrain job submit`, the
//! Python `TaskClient`, the master's service): a Kubernetes-style DNS label (RFC 1123), so a
//! name can be typed, quoted in a shell, used as a file name and as a label, and every
//! command can address the job again. A NUL or a control character in a name made the job
//! unreachable by any command. Names admitted before this rule stay addressable: only what
//! creates a job is checked for syntax; what acts on a job only needs a name at all.

/// The longest name a submit admits: a DNS label's length. The replicated state keeps its own
/// wider bound (`JOB_NAME_BYTES_MAX` in the master) for entries committed before this one.
pub const SUBMITTED_JOB_NAME_BYTES_MAX: usize = 63;

/// Checks a name that creates a job: 1 to [`SUBMITTED_JOB_NAME_BYTES_MAX`] bytes of
/// lowercase ASCII letters, digits and '-', starting and ending with a letter or digit. The
/// error names the offending character and its byte offset.
pub fn check_job_name(job: &str) -> Result<(), String> {
    require_job_name(job)?;
    if job.len() > SUBMITTED_JOB_NAME_BYTES_MAX {
        return Err(format!(
            "job name: {} bytes, at most {SUBMITTED_JOB_NAME_BYTES_MAX} accepted",
            job.len()
        ));
    }
    let allowed = "lowercase letters a-z, digits 0-9 and '-' (not first or last)";
    for (offset, character) in job.char_indices() {
        let edge = offset == 0 || offset + character.len_utf8() == job.len();
        let fits = character.is_ascii_lowercase()
            || character.is_ascii_digit()
            || (character == '-' && !edge);
        if !fits {
            return Err(format!(
                "job name {:?}: character {:?} at byte {offset} is not allowed; use {allowed}",
                job.escape_debug().to_string(),
                character
            ));
        }
    }
    Ok(())
}

/// Checks that a command that changes a job (cancel, checkpoint, restore) names one: the
/// empty name means "the group's only job" to older clients, and an unset shell variable
/// must not cancel whatever job happens to run.
pub fn require_job_name(job: &str) -> Result<(), String> {
    if job.is_empty() {
        return Err("job name: empty; name the job (`raftrain job list` shows them)".to_string());
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// `job` is accepted, or refused with an error containing `expected`.
    fn check(job: &str, expected: Option<&str>) {
        match (check_job_name(job), expected) {
            (Ok(()), None) => {}
            (Err(error), Some(expected)) => {
                assert!(error.contains(expected), "{job:?}: {error} lacks {expected:?}")
            }
            (outcome, expected) => panic!("{job:?}: {outcome:?}, expected {expected:?}"),
        }
    }

    /// DNS labels are accepted (the names the README, tests and manifests use); anything
    /// else is refused naming the character and its offset, or the length.
    #[test]
    fn names_are_dns_labels() {
        for job in ["job", "a", "mnist", "train-1", "index-job", "e2e", "simulated-2", "0"] {
            check(job, None);
        }
        check(&"a".repeat(SUBMITTED_JOB_NAME_BYTES_MAX), None);
        check(&"a".repeat(SUBMITTED_JOB_NAME_BYTES_MAX + 1), Some("64 bytes, at most 63"));
        check("", Some("empty"));
        check("a\0b", Some("'\\0' at byte 1"));
        check("a\nb", Some("'\\n' at byte 1"));
        check("Mnist", Some("'M' at byte 0"));
        check("my job", Some("' ' at byte 2"));
        check("-a", Some("'-' at byte 0"));
        check("a-", Some("'-' at byte 1"));
        check("a_b", Some("'_' at byte 1"));
        check("a.b", Some("'.' at byte 1"));
        check("é", Some("'é' at byte 0"));
        check("a\u{1b}[2J", Some("'\\u{1b}' at byte 1"));
    }
}
