//! Trainers: they take tasks from the master, read the task's chunks through `storage`, compute
//! gradients of a model on ndarray and push them to the pservers, pull fresh parameters, and at
//! the end write the model out as safetensors.
//!
//! `model`, `batch` and `example_input` are pure; `task_data` reads a task's records;
//! `safetensors` writes and reads saved models; `joined_job` learns the job's spec from the
//! masters (or submits it); `run` is the loop against the master and the pservers;
//! `evaluation` scores a model on a dataset.

pub mod batch;
pub mod config;
pub mod evaluation;
pub mod example_input;
pub mod exchange;
pub mod feature_count;
pub mod joined_job;
pub mod model;
pub mod progress;
pub mod run;
pub mod safetensors;
pub mod saved_model;
pub mod step;
pub mod task_data;

pub use config::TrainerConfig;
pub use run::run;
pub mod local;
pub mod local_faults;
pub mod metrics;
