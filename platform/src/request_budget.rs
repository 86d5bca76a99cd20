//! `RequestBudgetLayer`: a tower layer on every raftrain gRPC server that puts each request
//! body under the server's byte budget and the body deadline ([`BudgetBody`]), so calls that
//! announce huge messages and never send them cannot hold memory without limit.

use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::Duration;

use tokio::sync::Semaphore;
use tower::{Layer, Service};

use crate::budget_body::BudgetBody;
use crate::port_limits::PortLimits;

/// Adds [`RequestBudget`] to a server's services; every service of the server shares one
/// budget.
#[derive(Clone, Debug)]
pub struct RequestBudgetLayer {
    budget: Arc<Semaphore>,
    budget_bytes: u64,
    deadline: Duration,
}

impl RequestBudgetLayer {
    pub fn new(limits: &PortLimits) -> Self {
        let budget_bytes = limits.request_bytes_in_flight.min(Semaphore::MAX_PERMITS as u64);
        Self {
            budget: Arc::new(Semaphore::new(budget_bytes as usize)),
            budget_bytes,
            deadline: limits.request_body(),
        }
    }
}

impl<S> Layer<S> for RequestBudgetLayer {
    type Service = RequestBudget<S>;

    fn layer(&self, inner: S) -> Self::Service {
        RequestBudget { inner, layer: self.clone() }
    }
}

/// The budgeting service around one server's services.
#[derive(Clone, Debug)]
pub struct RequestBudget<S> {
    inner: S,
    layer: RequestBudgetLayer,
}

impl<S> Service<http::Request<tonic::body::Body>> for RequestBudget<S>
where
    S: Service<http::Request<tonic::body::Body>>,
{
    type Response = S::Response;
    type Error = S::Error;
    type Future = S::Future;

    fn poll_ready(&mut self, context: &mut Context<'_>) -> Poll<Result<(), Self::Error>> {
        self.inner.poll_ready(context)
    }

    fn call(&mut self, request: http::Request<tonic::body::Body>) -> Self::Future {
        let layer = &self.layer;
        let request = request.map(|body| {
            let deadline = tokio::time::sleep(layer.deadline);
            let budgeted =
                BudgetBody::new(body, layer.budget.clone(), layer.budget_bytes, deadline);
            tonic::body::Body::new(budgeted)
        });
        self.inner.call(request)
    }
}
