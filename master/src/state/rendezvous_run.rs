//! One rendezvous run (a torchrun `--rdzv-id`): its keys with their versions, the bytes they
//! take, when a client last wrote to it, and its clients' sessions for exactly-once retries.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use super::rendezvous_op::{
    RendezvousEntry, RendezvousOp, RendezvousRefusal, RendezvousReply, KEYS_PER_RUN_MAX,
    RUN_BYTES_MAX, RUN_SESSION_COUNT_MAX,
};
use super::sessions::Sessions;

#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, Default)]
pub(crate) struct RendezvousRun {
    pub(crate) keys: BTreeMap<String, RendezvousEntry>,
    /// Key and value bytes of every key, kept with each change (checked by the invariants).
    pub(crate) bytes: u64,
    /// The version the next write takes; versions are never reused within the run.
    pub(crate) next_version: u64,
    /// The state's clock at the run's last write (idle runs expire).
    pub(crate) touched_ms: u64,
    pub(crate) sessions: Sessions<RUN_SESSION_COUNT_MAX>,
}

impl RendezvousRun {
    /// A run with no keys, written at `now_ms`.
    pub(crate) fn new(now_ms: u64) -> Self {
        Self { next_version: 1, touched_ms: now_ms, ..Self::default() }
    }

    /// Applies `op` (sizes already checked) at `now_ms`: the run's bounds hold after it, or
    /// nothing changes (a refused write does not count as a touch either).
    pub(crate) fn apply(
        &mut self,
        run: &str,
        op: &RendezvousOp,
        now_ms: u64,
    ) -> Result<RendezvousReply, RendezvousRefusal> {
        let reply = self.execute(run, op)?;
        self.touched_ms = self.touched_ms.max(now_ms);
        Ok(reply)
    }

    fn execute(
        &mut self,
        run: &str,
        op: &RendezvousOp,
    ) -> Result<RendezvousReply, RendezvousRefusal> {
        let key = op.key();
        let current = self.keys.get(key);
        match op {
            RendezvousOp::Set { value, .. } => self.write(run, key, value.clone()),
            RendezvousOp::CompareSet { expected, value, .. } => {
                let matches = match current {
                    Some(entry) => &entry.value == expected,
                    None => expected.is_empty(),
                };
                if matches {
                    return self.write(run, key, value.clone());
                }
                Ok(RendezvousReply::Written { entry: current.cloned(), set: false })
            }
            RendezvousOp::CompareVersion { version, value, .. } => {
                let now = current.map_or(0, |entry| entry.version);
                if now == *version || accepts_stale_version(now, *version) {
                    return self.write(run, key, value.clone());
                }
                Ok(RendezvousReply::Written { entry: current.cloned(), set: false })
            }
            RendezvousOp::Add { delta, .. } => self.add(run, key, *delta),
            RendezvousOp::Delete { .. } => {
                let existed = self.remove(key);
                Ok(RendezvousReply::Deleted { existed })
            }
        }
    }

    /// The answer a replayed retry of `op` gets from what its session kept: the value the op
    /// wrote if it wrote one, else the key's value if it has not changed since, else the key's
    /// entry now (the op still did not write it).
    pub(crate) fn refill(&self, op: &RendezvousOp, kept: RendezvousReply) -> RendezvousReply {
        let RendezvousReply::Written { entry: Some(entry), set } = kept else { return kept };
        let value = match (set, op.value(), self.keys.get(op.key())) {
            (true, Some(value), _) => value.to_vec(),
            (_, _, Some(now)) if now.version == entry.version => now.value.clone(),
            (_, _, now) => return RendezvousReply::Written { entry: now.cloned(), set },
        };
        RendezvousReply::Written {
            entry: Some(RendezvousEntry { value, version: entry.version }),
            set,
        }
    }

    fn add(
        &mut self,
        run: &str,
        key: &str,
        delta: i64,
    ) -> Result<RendezvousReply, RendezvousRefusal> {
        let count = match self.keys.get(key) {
            None => 0,
            Some(entry) => parse_count(key, &entry.value)?,
        };
        let sum = count
            .checked_add(delta)
            .ok_or_else(|| RendezvousRefusal::Overflow { key: key.to_string() })?;
        let written = self.write(run, key, sum.to_string().into_bytes())?;
        let RendezvousReply::Written { entry: Some(entry), .. } = written else {
            unreachable!("a write that succeeded answers its entry")
        };
        Ok(RendezvousReply::Added { value: sum, version: entry.version })
    }

    /// Stores `value` under `key` with a new version, if the run's bounds allow it.
    fn write(
        &mut self,
        run: &str,
        key: &str,
        value: Vec<u8>,
    ) -> Result<RendezvousReply, RendezvousRefusal> {
        let old_bytes = self.keys.get(key).map_or(0, |entry| entry_bytes(key, &entry.value));
        let bytes = self.bytes - old_bytes + entry_bytes(key, &value);
        if bytes > RUN_BYTES_MAX {
            return Err(RendezvousRefusal::RunFull { run: run.to_string(), bytes });
        }
        if old_bytes == 0 && self.keys.len() >= KEYS_PER_RUN_MAX {
            return Err(RendezvousRefusal::TooManyKeys {
                run: run.to_string(),
                keys: self.keys.len(),
            });
        }
        let version = self.next_version;
        self.next_version += 1;
        self.bytes = bytes;
        let entry = RendezvousEntry { value, version };
        self.keys.insert(key.to_string(), entry.clone());
        Ok(RendezvousReply::Written { entry: Some(entry), set: true })
    }

    fn remove(&mut self, key: &str) -> bool {
        let Some(entry) = self.keys.remove(key) else { return false };
        self.bytes -= entry_bytes(key, &entry.value);
        true
    }

    /// Whether the byte count is the keys' and every bound holds.
    pub(crate) fn is_consistent(&self) -> bool {
        let bytes: u64 = self.keys.iter().map(|(key, entry)| entry_bytes(key, &entry.value)).sum();
        let versions_below = self.keys.values().all(|entry| entry.version < self.next_version);
        bytes == self.bytes
            && bytes <= RUN_BYTES_MAX
            && self.keys.len() <= KEYS_PER_RUN_MAX
            && versions_below
            && self.sessions.index_matches()
    }
}

/// Planted bug `rendezvous-stale-version`: a compare by version also accepts the version
/// just before the key's current one (never, without the `planted-bugs` feature).
fn accepts_stale_version(now: u64, named: u64) -> bool {
    now > 0 && named + 1 == now && crate::planted::active("rendezvous-stale-version")
}

/// What a key and its value count against [`RUN_BYTES_MAX`].
fn entry_bytes(key: &str, value: &[u8]) -> u64 {
    (key.len() + value.len()) as u64
}

/// The count a key holds for `add`: a decimal integer, as c10d stores keep it.
fn parse_count(key: &str, value: &[u8]) -> Result<i64, RendezvousRefusal> {
    let refusal = || RendezvousRefusal::NotAnInteger {
        key: key.to_string(),
        value: String::from_utf8_lossy(&value[..value.len().min(32)]).into_owned(),
    };
    std::str::from_utf8(value).ok().and_then(|text| text.parse().ok()).ok_or_else(refusal)
}
