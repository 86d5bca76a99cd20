//! `LeaderFetcher`: the leader's view of the group, asked over the master service like any
//! client asks it (`ListJobs`, then `Status` of each job, both answered by the leader, and
//! `ClusterInfo` of each member for its own term and indexes). A follower gets the leader's
//! view this way, and a leader gets its own through the same path. Answers are kept for
//! [`FRESH_MS`], and one fetch runs at a time however many pages poll, so the dashboard costs
//! the group at most a few calls a second.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::{Duration, Instant};

use client::{ClientOptions, GroupView, JobList, JobStatus, MasterClient, RendezvousRun};
use platform::security::Security;
use tokio::sync::Mutex;
use tokio::task::JoinSet;

/// How long a fetched view is served again before it is fetched anew: below the page's poll
/// interval, so several pages share one fetch.
pub(crate) const FRESH_MS: u64 = 500;
/// One attempt of one call.
const RPC_TIMEOUT_MS: u64 = 1_000;
/// One call across its retries (a leader change takes about half a second).
const CALL_DEADLINE_MS: u64 = 2_000;

/// What the leader and the members answered.
#[derive(Clone, Debug)]
pub(crate) struct Fetched {
    /// `ListJobs` and each job's `Status`, or why the leader could not be reached.
    pub jobs: Result<(JobList, Vec<JobStatus>), String>,
    /// Each member's own view, by id (with its address), or why it did not answer.
    pub members: BTreeMap<u64, (String, Result<GroupView, String>)>,
    /// The torchrun rendezvous runs the leader holds, or why it could not be asked.
    pub rendezvous: Result<Vec<RendezvousRun>, String>,
    /// When it was fetched.
    pub at: Instant,
    /// Each trainer's tasks per second since the fetch before, by (job, trainer id).
    pub trainer_rates: BTreeMap<(String, u64), f64>,
}

/// Fetches, one at a time, and keeps the newest answer.
/// Lists the members to ask, by id, at their client addresses.
pub(crate) type Members = Box<dyn Fn() -> BTreeMap<u64, String> + Send + Sync>;

pub(crate) struct LeaderFetcher {
    client: Arc<MasterClient>,
    /// The members to ask, as this master's membership lists them now.
    peers: Members,
    newest: Mutex<Option<Arc<Fetched>>>,
}

impl LeaderFetcher {
    /// A fetcher over the group's members (`peers` lists them, by client address, when
    /// asked; its client starts from `seeds`, the addresses this master was started with, and
    /// learns the rest), with this master's TLS and token.
    pub(crate) fn new(
        seeds: &[String],
        peers: Members,
        security: Security,
    ) -> anyhow::Result<Self> {
        let options = ClientOptions {
            rpc_timeout: Duration::from_millis(RPC_TIMEOUT_MS),
            call_deadline: Some(Duration::from_millis(CALL_DEADLINE_MS)),
            security,
            ..ClientOptions::default()
        };
        let client = Arc::new(MasterClient::new(seeds, options)?);
        Ok(Self { client, peers, newest: Mutex::new(None) })
    }

    /// The newest answer if fresh, else a new one (waiting for a fetch under way).
    pub(crate) async fn view(&self) -> Arc<Fetched> {
        let mut newest = self.newest.lock().await;
        let fresh = Duration::from_millis(FRESH_MS);
        if let Some(kept) = newest.as_ref().filter(|kept| kept.at.elapsed() < fresh) {
            return kept.clone();
        }
        let mut fetched = self.fetch().await;
        fetched.trainer_rates = trainer_rates(newest.as_deref(), &fetched);
        let fetched = Arc::new(fetched);
        *newest = Some(fetched.clone());
        fetched
    }

    async fn fetch(&self) -> Fetched {
        let runs = async { self.client.list_rendezvous().await.map(|(runs, _)| runs) };
        let (jobs, members, rendezvous) = tokio::join!(self.jobs(), self.members(), runs);
        let rendezvous = rendezvous.map_err(|error| error.to_string());
        Fetched { jobs, members, rendezvous, at: Instant::now(), trainer_rates: BTreeMap::new() }
    }

    /// Every job, and each one's status, from the leader.
    async fn jobs(&self) -> Result<(JobList, Vec<JobStatus>), String> {
        let list = self.client.list_jobs().await.map_err(|error| error.to_string())?;
        let mut asked = JoinSet::new();
        for (position, summary) in list.jobs.iter().enumerate() {
            let (client, name) = (self.client.clone(), summary.job.clone());
            asked.spawn(async move { (position, client.status_of(&name).await) });
        }
        let mut statuses = vec![None; list.jobs.len()];
        while let Some(joined) = asked.join_next().await {
            let (position, status) = joined.map_err(|error| error.to_string())?;
            statuses[position] = Some(status.map_err(|error| error.to_string())?);
        }
        Ok((list, statuses.into_iter().flatten().collect()))
    }

    /// Each member's own view, asked of it directly.
    async fn members(&self) -> BTreeMap<u64, (String, Result<GroupView, String>)> {
        let mut asked = JoinSet::new();
        for (id, addr) in (self.peers)() {
            let (client, id, addr) = (self.client.clone(), id, addr.clone());
            asked.spawn(async move {
                let view = client.member_info(&addr).await.map_err(|error| error.to_string());
                (id, (addr, view))
            });
        }
        let mut members = BTreeMap::new();
        while let Some(joined) = asked.join_next().await {
            if let Ok((id, answer)) = joined {
                members.insert(id, answer);
            }
        }
        members
    }
}

/// Tasks per second of each trainer from `before` to `after`, by the tasks done its heartbeats
/// reported (a trainer absent from either, or without a figure, has none).
fn trainer_rates(before: Option<&Fetched>, after: &Fetched) -> BTreeMap<(String, u64), f64> {
    let (Some(before), Ok((_, statuses))) = (before, &after.jobs) else { return BTreeMap::new() };
    let Ok((_, statuses_before)) = &before.jobs else { return BTreeMap::new() };
    let seconds = after.at.saturating_duration_since(before.at).as_secs_f64();
    if seconds <= 0.0 {
        return BTreeMap::new();
    }
    let done_before = tasks_done(statuses_before);
    tasks_done(statuses)
        .into_iter()
        .filter_map(|(key, done)| {
            let then = *done_before.get(&key)?;
            Some((key, done.saturating_sub(then) as f64 / seconds))
        })
        .collect()
}

/// Every trainer's tasks done, by (job, trainer id).
fn tasks_done(statuses: &[JobStatus]) -> BTreeMap<(String, u64), u64> {
    let trainers = statuses.iter().flat_map(|status| {
        let job = status.job.clone().unwrap_or_default();
        let done =
            status.trainers.iter().filter_map(|trainer| Some((trainer.id, trainer.tasks_done?)));
        done.map(move |(id, done)| ((job.clone(), id), done))
    });
    trainers.collect()
}

#[cfg(test)]
mod tests {
    use client::{JobList, TrainerStatus};

    use super::*;

    fn fetched(at: Instant, done: &[(u64, Option<u64>)]) -> Fetched {
        let trainers = done
            .iter()
            .map(|(id, tasks_done)| TrainerStatus {
                id: *id,
                tasks_done: *tasks_done,
                ..TrainerStatus::default()
            })
            .collect();
        let status = JobStatus { job: Some("j".into()), trainers, ..JobStatus::default() };
        let list = JobList { jobs: Vec::new(), retention_ms: 0 };
        Fetched {
            jobs: Ok((list, vec![status])),
            members: BTreeMap::new(),
            rendezvous: Ok(Vec::new()),
            at,
            trainer_rates: BTreeMap::new(),
        }
    }

    /// A trainer's rate is its tasks done since the fetch before over the time between; one
    /// new, silent or without a figure has none, and a count that went back (a new leader's
    /// soft state) is no negative rate.
    #[test]
    fn trainer_rates_count_tasks_between_fetches() {
        let start = Instant::now();
        let before = fetched(start, &[(1, Some(10)), (2, Some(5)), (3, None), (4, Some(9))]);
        let after = fetched(
            start + Duration::from_secs(2),
            &[(1, Some(14)), (2, None), (3, Some(1)), (4, Some(3)), (5, Some(1))],
        );
        let rates = trainer_rates(Some(&before), &after);
        let expected = BTreeMap::from([(("j".to_string(), 1), 2.0), (("j".to_string(), 4), 0.0)]);
        assert_eq!(rates, expected);
        assert!(trainer_rates(None, &after).is_empty());
    }
}
