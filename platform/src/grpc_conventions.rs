//! The gRPC conventions every raftrain port speaks besides its own services, so that
//! Kubernetes, service meshes and `grpcurl` work with it as with any gRPC server:
//! `grpc.health.v1.Health` ([`GrpcHealth`]: a status per service, set by whatever knows it) and
//! server reflection, v1 and v1alpha, over the descriptors the caller passes
//! (`proto::FILE_DESCRIPTOR_SET`). [`conventional_router`] mounts both on a server from
//! [`crate::server_builder`], so they pass through the same TLS, port limits and request
//! budget as the services beside them. Health needs no token (a Kubernetes probe sends no
//! metadata; `AuthLayer` lets `grpc.health.v1` through), reflection does when one is set.

use std::sync::{Arc, Mutex};

use tonic::server::NamedService;
use tonic::transport::server::Router;
use tonic_health::server::{HealthReporter, HealthService};
use tonic_health::ServingStatus;

use crate::health_watches::{BoundedHealth, WatchCounts};
use crate::server_builder::{ServerBuilder, ServerLayers};

/// A server from [`crate::server_builder`] with health and reflection mounted.
pub type ServerRouter = Router<ServerLayers>;

/// The largest health request decoded: a service name. Health is also served on the plain
/// metrics port, where no request budget applies, so a stream may not make it hold more.
pub const HEALTH_REQUEST_BYTES_MAX: usize = 1024;

/// The health of one process's services, as `grpc.health.v1` answers it. Clones share the
/// statuses; a service never set is `NOT_FOUND` to a client, and the server as a whole (`""`)
/// is `SERVING` while the process serves at all. Its `Watch` streams are bounded
/// ([`crate::health_watches`]) over every port that serves it.
#[derive(Clone, Debug, Default)]
pub struct GrpcHealth {
    reporter: HealthReporter,
    watches: Arc<Mutex<WatchCounts>>,
}

impl GrpcHealth {
    /// Sets `service`'s status; watchers (`Health/Watch`) see the change.
    pub async fn set(&self, service: &str, serving: bool) {
        let status = if serving { ServingStatus::Serving } else { ServingStatus::NotServing };
        self.reporter.set_service_status(service, status).await;
    }

    /// The `grpc.health.v1.Health` service over these statuses, with its request and watch
    /// bounds.
    pub fn service(&self) -> tonic_health::pb::health_server::HealthServer<BoundedHealth> {
        let service = HealthService::from_health_reporter(self.reporter.clone());
        let service = BoundedHealth::new(service, self.watches.clone());
        tonic_health::pb::health_server::HealthServer::new(service)
            .max_decoding_message_size(HEALTH_REQUEST_BYTES_MAX)
    }
}

/// Reflection that cannot be built from the descriptors given (a build defect: they are
/// compiled in).
#[derive(Debug, thiserror::Error)]
#[error("gRPC reflection: the compiled-in descriptors do not decode: {0}")]
pub struct ReflectionError(#[from] tonic_reflection::server::Error);

/// `builder` with health (over `health`) and reflection mounted, advertising `services` (the
/// full names of the services the caller adds next) and the two conventions' own, described
/// by `descriptors` (an encoded `FileDescriptorSet`).
pub fn conventional_router(
    builder: &mut ServerBuilder,
    health: &GrpcHealth,
    services: &[&str],
    descriptors: &'static [u8],
) -> Result<ServerRouter, ReflectionError> {
    let reflection = || {
        let own = [HEALTH_SERVICE, REFLECTION_SERVICE_V1, REFLECTION_SERVICE_V1ALPHA];
        own.iter().chain(services).fold(
            tonic_reflection::server::Builder::configure()
                .register_encoded_file_descriptor_set(descriptors)
                .register_encoded_file_descriptor_set(tonic_health::pb::FILE_DESCRIPTOR_SET),
            |builder, name| builder.with_service_name(*name),
        )
    };
    let v1 = reflection().build_v1()?;
    let v1alpha = reflection().build_v1alpha()?;
    Ok(builder.add_service(health.service()).add_service(v1).add_service(v1alpha))
}

/// `grpc.health.v1.Health`.
pub const HEALTH_SERVICE: &str =
    <tonic_health::pb::health_server::HealthServer<HealthService> as NamedService>::NAME;
const REFLECTION_SERVICE_V1: &str = "grpc.reflection.v1.ServerReflection";
const REFLECTION_SERVICE_V1ALPHA: &str = "grpc.reflection.v1alpha.ServerReflection";
