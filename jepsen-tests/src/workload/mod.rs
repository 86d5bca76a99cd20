//! What the harness does to the cluster while the nemesis works: the task-queue clients, the
//! rendezvous clients and the observers that read the cluster's own view.

pub mod observers;
pub mod recorded_tasks;
pub mod rendezvous;
pub mod task_queue;
pub mod training;
