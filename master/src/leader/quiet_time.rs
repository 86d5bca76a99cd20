//! `QuietTime`: which stretch of time a leader that has not heard its quorum credits to the
//! leases it holds, so that each quiet instant is credited once, however the rounds alternate.

use tokio::time::Instant;

/// The leader's record of the quiet time it credited. A *spell* begins with a round that did
/// not hear the quorum and ends when the quorum acknowledges a heartbeat sent after every
/// instant the spell credited. Within a spell, a round that heard the quorum is contact: the
/// time up to it is never credited afterwards. Without that, rounds alternating between
/// "heard" and "hold" (acks just around the leader lease: slow disks, long round trips) each
/// credited the whole age of the newest ack again, more than the time that passed, and a dead
/// holder's lease never ran out.
#[derive(Debug, Default)]
pub(crate) struct QuietTime {
    spell: Option<QuietSpell>,
}

#[derive(Debug)]
struct QuietSpell {
    /// Every quiet instant up to here was credited.
    credited_until: Instant,
    /// The newest round of the spell that heard the quorum, if one did since the last hold.
    heard_at: Option<Instant>,
}

impl QuietTime {
    /// A round at `now` heard the quorum, whose newest acknowledged heartbeat was sent at
    /// `acked_at`. An ack sent after all the spell credited ends the spell: holders could renew
    /// from then on, and the next quiet stretch starts from its own ack.
    pub(crate) fn heard(&mut self, now: Instant, acked_at: Option<Instant>) {
        let Some(spell) = &mut self.spell else { return };
        if acked_at.is_some_and(|acked_at| acked_at >= spell.credited_until) {
            self.spell = None;
            return;
        }
        spell.heard_at = Some(now);
    }

    /// A round at `now` did not hear the quorum (its newest ack was sent at `acked_at`, if
    /// any): the instant from which to credit quiet time up to `now`. The first hold of a spell
    /// credits from the ack, since renewals need a confirmed leadership and none was confirmed
    /// after it; later ones from the last instant credited or heard, whichever is later.
    pub(crate) fn hold(&mut self, now: Instant, acked_at: Option<Instant>) -> Instant {
        let quiet_since = acked_at.unwrap_or(now);
        let since = match &self.spell {
            None => quiet_since,
            Some(spell) => {
                let contact = spell.heard_at.unwrap_or(spell.credited_until);
                quiet_since.max(spell.credited_until).max(contact)
            }
        };
        // `since` is at or after everything credited before, and the end of the credit never
        // moves back, so no instant is credited twice (a clock read behind it credits nothing).
        self.spell = Some(QuietSpell { credited_until: since.max(now), heard_at: None });
        since.min(now)
    }

    /// Forgets the spell, as the leases it held are forgotten (a new term, stepping down).
    pub(crate) fn clear(&mut self) {
        self.spell = None;
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    /// The stretches credited never overlap and never include a round that heard the quorum;
    /// a spell ends only when an ack was sent after everything it credited. Each row: rounds
    /// as (ms since the start, heard?, ack age ms), then the credited stretch of each hold.
    #[test]
    fn each_quiet_instant_is_credited_once() {
        type Round = (u64, bool, u64);
        let check = |rounds: &[Round], expected: &[(i64, u64)]| {
            let start = Instant::now() + Duration::from_secs(10);
            let at = |ms: i64| match u64::try_from(ms) {
                Ok(ms) => start + Duration::from_millis(ms),
                Err(_) => start - Duration::from_millis(ms.unsigned_abs()),
            };
            let mut quiet = QuietTime::default();
            let mut credited = Vec::new();
            for &(ms, heard, age_ms) in rounds {
                let now = start + Duration::from_millis(ms);
                let acked_at = now.checked_sub(Duration::from_millis(age_ms));
                if heard {
                    quiet.heard(now, acked_at);
                    continue;
                }
                let since = quiet.hold(now, acked_at);
                credited.push((since, now));
            }
            let expected: Vec<_> =
                expected.iter().map(|&(from, to)| (at(from), at(to as i64))).collect();
            assert_eq!(credited, expected, "rounds {rounds:?}");
        };
        // A quiet spell of consecutive holds credits from the ack, then round to round.
        check(&[(0, false, 900), (100, false, 1_000)], &[(-900, 0), (0, 100)]);
        // Heard and hold rounds alternating with acks around a 1 s lease: after the first
        // hold, only the time since the round that heard the quorum.
        check(
            &[(0, true, 950), (100, false, 1_050), (200, true, 950), (300, false, 1_050)],
            &[(-950, 100), (200, 300)],
        );
        // An ack sent after all the spell credited ends it: the next spell starts at its ack.
        check(&[(0, false, 500), (100, true, 50), (200, false, 150)], &[(-500, 0), (50, 200)]);
        // A newer ack than the last round heard moves the start of the credit forward.
        check(&[(0, false, 500), (100, true, 400), (500, false, 100)], &[(-500, 0), (400, 500)]);
    }
}
