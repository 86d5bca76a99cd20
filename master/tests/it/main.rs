//! Integration tests of the master crate: one test binary, one module per feature.

mod codec;
mod dataset;
mod dataset_batches;
mod dispatch;
mod expiry;
mod faults;
mod index_datasets;
mod job_restart;
mod jobs;
mod liveness;
mod model_restore;
mod passes;
mod properties;
mod pservers;
mod reports;
mod sessions;
mod support;
mod tidy;
mod trainers;
