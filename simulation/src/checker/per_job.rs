//! What a checker remembers, kept per job: task ids, trainer ids, slot indices and
//! generations are a job's own, so the same numbers in two jobs are two things.

use std::collections::BTreeMap;

/// One `T` per job name, made empty the first time the job is named.
pub struct PerJob<T> {
    jobs: BTreeMap<String, T>,
}

impl<T> Default for PerJob<T> {
    fn default() -> Self {
        Self { jobs: BTreeMap::new() }
    }
}

impl<T: Default> PerJob<T> {
    /// Job `job`'s memory.
    pub fn of(&mut self, job: &str) -> &mut T {
        if !self.jobs.contains_key(job) {
            self.jobs.insert(job.to_string(), T::default());
        }
        self.jobs.get_mut(job).expect("inserted above")
    }

    /// Job `job`'s memory, if the job was named before.
    pub fn get(&self, job: &str) -> Option<&T> {
        self.jobs.get(job)
    }

    /// Every job's memory, by name.
    pub fn iter(&self) -> impl Iterator<Item = (&str, &T)> + '_ {
        self.jobs.iter().map(|(job, memory)| (job.as_str(), memory))
    }
}
