//! Sending a cycle's calls (edge): each [`Call`] as one API request, a bounded number in flight
//! and at most so many started per second, each answered with an [`Outcome`] the daemon reports.
//!
//! Nothing is retried here: a refused eviction (a PodDisruptionBudget says no, 429) or a failed
//! bind (pod or node gone, 404; pod already bound, 409) leaves the cluster as it was, the next
//! snapshot shows it so, and the next cycle decides again. Nothing is ever forced: a refused
//! eviction never becomes a delete.

use std::time::Duration;

use futures::StreamExt;
use k8s_openapi::api::core::v1::{Event, Pod};
use kube::api::{Api, ApiResource, DeleteParams, DynamicObject, Patch, PatchParams, PostParams};
use serde_json::Value;
use tokio::sync::Mutex;
use tokio::time::Instant;

use crate::access::{self, Access};
use crate::apply::FIELD_MANAGER;
use crate::calls::{Call, Managed};
use crate::crd::{PodGroup, Queue};

/// How hard the backend may press on the API server.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Limits {
    /// Requests in flight at once.
    pub parallel: usize,
    /// Requests started per second.
    pub per_second: u32,
}

impl Default for Limits {
    /// client-go's defaults for a controller (`QPS` 50), ten at a time.
    fn default() -> Self {
        Limits {
            parallel: 10,
            per_second: 50,
        }
    }
}

/// What became of one call.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Outcome {
    /// The API server accepted it.
    Done,
    /// An eviction a PodDisruptionBudget refused (429): the pod keeps running; the next cycle
    /// may try again.
    RefusedByBudget(String),
    /// The object (or the node a pod was bound to) no longer exists (404).
    Gone(String),
    /// The object changed under us (409; for a bind: the pod is already bound).
    Conflict(String),
    /// The scheduler's ServiceAccount lacks this permission (403).
    Forbidden(Access),
    /// Any other failure: status code (0 when there was no answer) and message.
    Failed(u16, String),
}

/// One call and its outcome, for the daemon's log and metrics and for [`crate::snapshot::Assumed`].
#[derive(Debug, Clone, PartialEq)]
pub struct Sent {
    /// The call.
    pub call: Call,
    /// What came of it.
    pub outcome: Outcome,
}

impl std::fmt::Display for Sent {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}: {}", self.call.describe(), self.outcome)
    }
}

impl Call {
    /// The permission this call needs.
    pub fn access(&self) -> Access {
        match self {
            Call::Bind { .. } => access::BIND,
            Call::Evict { .. } => access::EVICT,
            Call::PodCondition { .. } => access::POD_STATUS,
            Call::PodGroupStatus { .. } => access::POD_GROUP_STATUS,
            Call::PodGroupAnnotation { .. } => access::POD_GROUP_ANNOTATE,
            Call::CreatePodGroup { .. } => access::POD_GROUP_CREATE,
            Call::PodGroupSpec { .. } => access::POD_GROUP_ANNOTATE,
            Call::QueueStatus { .. } => access::QUEUE_STATUS,
            Call::Event { .. } => access::EVENT,
            Call::Apply {
                kind: Managed::Queue,
                ..
            } => access::QUEUES_APPLY,
            Call::Apply {
                kind: Managed::PriorityClass,
                ..
            } => access::PRIORITY_CLASSES_APPLY,
            Call::Prune {
                kind: Managed::Queue,
                ..
            } => access::QUEUES_DELETE,
            Call::Prune {
                kind: Managed::PriorityClass,
                ..
            } => access::PRIORITY_CLASSES_DELETE,
        }
    }

    /// The call in words.
    pub fn describe(&self) -> String {
        match self {
            Call::Bind {
                namespace,
                pod,
                binding,
                ..
            } => format!(
                "bind {namespace}/{pod} to {}",
                binding.target.name.as_deref().unwrap_or("")
            ),
            Call::Evict { namespace, pod, .. } => format!("evict {namespace}/{pod}"),
            Call::PodCondition { namespace, pod, .. } => {
                format!("set the PodScheduled condition of {namespace}/{pod}")
            }
            Call::PodGroupStatus {
                namespace, name, ..
            } => format!("update the status of PodGroup {namespace}/{name}"),
            Call::PodGroupAnnotation {
                namespace, name, ..
            } => format!("mark PodGroup {namespace}/{name} stale (or clear the mark)"),
            Call::CreatePodGroup {
                namespace, name, ..
            } => format!("create PodGroup {namespace}/{name} for its workload"),
            Call::PodGroupSpec {
                namespace, name, ..
            } => format!("update the spec of PodGroup {namespace}/{name} from its workload"),
            Call::QueueStatus { name, .. } => format!("update the status of Queue {name}"),
            Call::Event { namespace, event } => format!(
                "record event {} on {namespace}/{}",
                event.reason.as_deref().unwrap_or(""),
                event.involved_object.name.as_deref().unwrap_or("")
            ),
            Call::Apply { kind, name, .. } => format!("apply {} {name}", kind.kind()),
            Call::Prune { kind, name } => format!(
                "delete {} {name} (applied by this scheduler, no longer in the policy)",
                kind.kind()
            ),
        }
    }
}

/// Sends calls through one Kubernetes client.
#[derive(Clone)]
pub struct Sender {
    client: kube::Client,
    limits: Limits,
}

impl Sender {
    /// A sender over `client`.
    pub fn new(client: kube::Client, limits: Limits) -> Self {
        Sender { client, limits }
    }

    /// Sends every call, at most `limits.parallel` in flight and `limits.per_second` started
    /// per second; returns every outcome, in the order of `calls`.
    pub async fn send(&self, calls: Vec<Call>) -> Vec<Sent> {
        let gap = Duration::from_secs(1) / self.limits.per_second.max(1);
        let next = Mutex::new(Instant::now());
        let mut sent: Vec<(usize, Sent)> = futures::stream::iter(calls.into_iter().enumerate())
            .map(|(i, call)| {
                let next = &next;
                async move {
                    let start = {
                        let mut next = next.lock().await;
                        let start = (*next).max(Instant::now());
                        *next = start + gap;
                        start
                    };
                    tokio::time::sleep_until(start).await;
                    (i, self.send_one(call).await)
                }
            })
            .buffer_unordered(self.limits.parallel.max(1))
            .collect()
            .await;
        sent.sort_by_key(|(i, _)| *i);
        sent.into_iter().map(|(_, s)| s).collect()
    }

    /// Sends one call.
    pub async fn send_one(&self, call: Call) -> Sent {
        let mut step = call.access();
        let result = self.request(call.clone(), &mut step).await;
        Sent {
            call,
            outcome: outcome(result, step),
        }
    }

    /// Sends one call; `step` is the permission of the request sent last (a bind sends up to
    /// three), so that a refusal names the one missing.
    async fn request(&self, call: Call, step: &mut Access) -> Result<(), kube::Error> {
        let client = self.client.clone();
        let post = PostParams::default();
        let patch = PatchParams::default();
        match call {
            Call::Bind {
                namespace,
                pod,
                binding,
                claims,
                numa,
            } => {
                // The claims first, as KAI's binder: a pod bound before its claims are allocated
                // would not start.
                let resource = ApiResource::from_gvk_with_plural(
                    &kube::api::GroupVersionKind::gvk("resource.k8s.io", "v1", "ResourceClaim"),
                    "resourceclaims",
                );
                for claim in claims {
                    *step = access::RESOURCE_CLAIM_STATUS;
                    let api: Api<DynamicObject> =
                        Api::namespaced_with(client.clone(), &namespace, &resource);
                    api.patch_status(&claim.name, &patch, &Patch::Merge(claim.patch))
                        .await?;
                }
                // The predicted NUMA placement next, as KAI's binder records it before binding.
                if let Some(record) = numa {
                    *step = access::POD_ANNOTATE;
                    // `null` removes a prediction a bind that failed left behind.
                    let pods: Api<Pod> = Api::namespaced(client.clone(), &namespace);
                    let body = serde_json::json!({"metadata": {"annotations": {
                        kai_scheduler::numa::PREDICTED_ANNOTATION: record,
                    }}});
                    pods.patch(&pod, &patch, &Patch::Merge(body)).await?;
                }
                *step = access::BIND;
                let body = serde_json::to_value(&binding).map_err(kube::Error::SerdeError)?;
                create_pod_subresource(client, &namespace, &pod, "binding", body).await
            }
            Call::Evict {
                namespace,
                pod,
                eviction,
            } => {
                let body = serde_json::to_value(&eviction).map_err(kube::Error::SerdeError)?;
                create_pod_subresource(client, &namespace, &pod, "eviction", body).await
            }
            Call::PodCondition {
                namespace,
                pod,
                patch: body,
            } => {
                let pods: Api<Pod> = Api::namespaced(client, &namespace);
                pods.patch_status(&pod, &patch, &Patch::Strategic(body))
                    .await
                    .map(drop)
            }
            Call::PodGroupStatus {
                namespace,
                name,
                patch: body,
            } => {
                let groups: Api<PodGroup> = Api::namespaced(client, &namespace);
                groups
                    .patch_status(&name, &patch, &Patch::Merge(body))
                    .await
                    .map(drop)
            }
            Call::PodGroupAnnotation {
                namespace,
                name,
                patch: body,
            }
            | Call::PodGroupSpec {
                namespace,
                name,
                patch: body,
            } => {
                let groups: Api<PodGroup> = Api::namespaced(client, &namespace);
                groups
                    .patch(&name, &patch, &Patch::Merge(body))
                    .await
                    .map(drop)
            }
            Call::CreatePodGroup {
                namespace, object, ..
            } => {
                let object: DynamicObject =
                    serde_json::from_value(object).map_err(kube::Error::SerdeError)?;
                let api: Api<DynamicObject> =
                    Api::namespaced_with(client, &namespace, &ApiResource::erase::<PodGroup>(&()));
                api.create(&post, &object).await.map(drop)
            }
            Call::QueueStatus { name, patch: body } => {
                let queues: Api<Queue> = Api::all(client);
                queues
                    .patch_status(&name, &patch, &Patch::Merge(body))
                    .await
                    .map(drop)
            }
            Call::Event { namespace, event } => {
                let events: Api<Event> = Api::namespaced(client, &namespace);
                events.create(&post, &event).await.map(drop)
            }
            Call::Apply { kind, name, object } => {
                let api: Api<DynamicObject> = Api::all_with(client, &kind.api_resource());
                let apply = PatchParams::apply(FIELD_MANAGER).force();
                api.patch(&name, &apply, &Patch::Apply(object))
                    .await
                    .map(drop)
            }
            Call::Prune { kind, name } => {
                let api: Api<DynamicObject> = Api::all_with(client, &kind.api_resource());
                api.delete(&name, &DeleteParams::default()).await.map(drop)
            }
        }
    }
}

/// `POST` to a pod's subresource (`binding`, `eviction`); the answer's body is not needed.
async fn create_pod_subresource(
    client: kube::Client,
    namespace: &str,
    pod: &str,
    subresource: &str,
    body: Value,
) -> Result<(), kube::Error> {
    let pods: Api<Pod> = Api::namespaced(client, namespace);
    let post = PostParams::default();
    pods.create_subresource::<_, Value>(subresource, pod, &post, &body)
        .await
        .map(drop)
}

/// Sorts an answer into an [`Outcome`].
fn outcome(result: Result<(), kube::Error>, access: Access) -> Outcome {
    let status = match result {
        Ok(()) => return Outcome::Done,
        Err(kube::Error::Api(status)) => status,
        Err(other) => return Outcome::Failed(0, other.to_string()),
    };
    let message = status.message.clone();
    match status.code {
        403 => Outcome::Forbidden(access),
        404 => Outcome::Gone(message),
        409 => Outcome::Conflict(message),
        429 if access == access::EVICT => Outcome::RefusedByBudget(message),
        code => Outcome::Failed(code, message),
    }
}

impl std::fmt::Display for Outcome {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Outcome::Done => write!(f, "done"),
            Outcome::RefusedByBudget(m) => write!(
                f,
                "refused by a PodDisruptionBudget ({m}); the pod keeps running and the next cycle may try again"
            ),
            Outcome::Gone(m) => write!(f, "the object is gone ({m})"),
            Outcome::Conflict(m) => write!(f, "conflict ({m}); the next snapshot shows the change"),
            Outcome::Forbidden(a) => write!(
                f,
                "forbidden: the scheduler's ServiceAccount may not {a}; install the chart's RBAC (charts/kai-scheduler/templates/rbac.yaml)"
            ),
            Outcome::Failed(0, m) => write!(f, "failed: {m}"),
            Outcome::Failed(code, m) => write!(f, "failed ({code}): {m}"),
        }
    }
}
