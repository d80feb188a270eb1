//! Watch caches (edge): one reflector per kind the scheduler reads (Nodes, Pods, PodGroups,
//! Queues, whose names say which Queue objects may get a status, KAI's Topologies, whose levels
//! topology constraints name, and the kinds that own pods,
//! [`access::OWNER_KINDS`], for grouping), each listing once and then following the watch,
//! relisting by itself after a `410 Gone` or a broken connection (kube-runtime's watcher with
//! its default backoff).
//!
//! PodGroups, Queues and owners are followed as untyped objects (one object our types cannot
//! read must not stop a cache); PodGroups become our type in [`Caches::objects`], one by one.
//!
//! An owner kind the cluster does not serve (its CRD is not installed: the list answers 404) or
//! does not let us read (403) is *absent*: readiness does not wait for it, its pods are grouped
//! without it, and its watch keeps trying quietly, so a CRD installed later is followed.
//!
//! A cycle takes [`Caches::objects`]: a copy of every store at that moment. The stores are
//! updated by their own tasks, so the kinds are each consistent but read one after the
//! other; a pod bound between two reads is seen either pending or bound, never half, and the
//! next cycle sees it as it is.

use std::sync::Arc;

use futures::{Stream, StreamExt};
use k8s_openapi::api::core::v1::{Node, Pod};
use k8s_openapi::api::scheduling::v1::PriorityClass;
use kube::Api;
use kube::api::{ApiResource, DynamicObject, GroupVersionKind, TypeMeta};
use kube::runtime::reflector::{self, Store};
use kube::runtime::{WatchStreamExt, watcher};
use tokio::sync::watch;
use tokio::task::JoinSet;

use crate::access::{self, OwnerKind};
use crate::crd::{PodGroup, Queue};
use crate::snapshot::Objects;

/// The stores, filled by tasks that run until the caches are dropped.
pub struct Caches {
    nodes: Store<Node>,
    pods: Store<Pod>,
    groups: Store<DynamicObject>,
    queues: Store<DynamicObject>,
    priority_classes: Store<PriorityClass>,
    /// KAI's Topology objects, and whether their watch has listed (or found the kind absent).
    topologies: (Store<DynamicObject>, watch::Receiver<Listing>),
    /// DRA's DeviceClasses, ResourceSlices and ResourceClaims, each with its listing.
    dra: Vec<(Store<DynamicObject>, watch::Receiver<Listing>)>,
    /// NodeResourceTopology objects, with their listing, when NUMA alignment is on.
    numa: Option<(Store<DynamicObject>, watch::Receiver<Listing>)>,
    owners: Vec<OwnerCache>,
    _tasks: JoinSet<()>,
}

/// Where a watch stands.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Listing {
    /// Not listed yet.
    Pending,
    /// Listed: the store holds every object of the kind.
    Listed,
    /// The kind is not served (404) or not readable (403).
    Absent,
}

/// The cache of one owner kind.
struct OwnerCache {
    kind: &'static OwnerKind,
    store: Store<DynamicObject>,
    listing: watch::Receiver<Listing>,
}

fn follow<K>(api: Api<K>, kind: &'static str, tasks: &mut JoinSet<()>) -> Store<K>
where
    K: kube::Resource<DynamicType = ()>
        + Clone
        + std::fmt::Debug
        + serde::de::DeserializeOwned
        + Send
        + Sync
        + 'static,
{
    let (reader, writer) = reflector::store();
    let stream = watcher(api, watcher::Config::default())
        .default_backoff()
        .reflect(writer);
    let (listing, _) = watch::channel(Listing::Pending);
    tasks.spawn(drive(stream, kind.to_string(), None, listing));
    reader
}

/// What a cache of untyped objects keeps of each one (never `managedFields`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Keep {
    /// Metadata only.
    Metadata,
    /// Metadata and `spec`.
    Spec,
    /// Everything else.
    Whole,
}

/// Follows one kind as untyped objects, so that one object our types cannot read never stops
/// the cache (a typed reflector fails its whole list on it), and keeps of each object only
/// what `keep` says, so the cache of every ReplicaSet in a big cluster stays small.
/// `absent_note` is what a 404 or 403 on the list means for this kind (logged once at info, and
/// the listing is then [`Listing::Absent`]); `None`: an error like any other.
fn follow_dynamic(
    client: kube::Client,
    resource: ApiResource,
    keep: Keep,
    absent_note: Option<&'static str>,
    tasks: &mut JoinSet<()>,
) -> (Store<DynamicObject>, watch::Receiver<Listing>) {
    let writer = reflector::store::Writer::new(resource.clone());
    let reader = writer.as_reader();
    let types = TypeMeta {
        api_version: resource.api_version.clone(),
        kind: resource.kind.clone(),
    };
    let stream = watcher(
        Api::<DynamicObject>::all_with(client, &resource),
        watcher::Config::default(),
    )
    .default_backoff()
    .modify(move |object: &mut DynamicObject| {
        // List items come without their type; ingest reads the kind from it.
        object.types = Some(types.clone());
        object.metadata.managed_fields = None;
        match keep {
            Keep::Whole => {}
            Keep::Spec => {
                let spec = object.data.get_mut("spec").map(serde_json::Value::take);
                object.data = match spec {
                    Some(spec) => serde_json::json!({ "spec": spec }),
                    None => serde_json::json!({}),
                };
            }
            Keep::Metadata => object.data = serde_json::json!({}),
        }
    })
    .reflect(writer);
    let (listing, receiver) = watch::channel(Listing::Pending);
    let name = if resource.group.is_empty() || absent_note.is_none() {
        resource.kind.clone()
    } else {
        format!("{} ({})", resource.kind, resource.api_version)
    };
    tasks.spawn(drive(stream, name, absent_note, listing));
    (reader, receiver)
}

/// Follows one owner kind: metadata, and the spec where its gang size is.
fn follow_owner(
    client: kube::Client,
    kind: &'static OwnerKind,
    tasks: &mut JoinSet<()>,
) -> OwnerCache {
    let resource = ApiResource {
        group: kind.group.into(),
        version: kind.version.into(),
        api_version: format!("{}/{}", kind.group, kind.version),
        kind: kind.kind.into(),
        plural: kind.plural.into(),
    };
    let keep = if kind.spec {
        Keep::Spec
    } else {
        Keep::Metadata
    };
    let (store, listing) = follow_dynamic(
        client,
        resource,
        keep,
        Some("pods it owns are grouped without it"),
        tasks,
    );
    OwnerCache {
        kind,
        store,
        listing,
    }
}

/// The objects of the caches whose kind the cluster serves (an absent kind's store is empty
/// anyway; its watch keeps trying).
fn present<'a>(
    caches: impl IntoIterator<Item = &'a (Store<DynamicObject>, watch::Receiver<Listing>)>,
) -> Vec<Arc<DynamicObject>> {
    caches
        .into_iter()
        .filter(|(_, listing)| *listing.borrow() != Listing::Absent)
        .flat_map(|(store, _)| store.state())
        .collect()
}

/// A PodGroup from the cache as our type. One without a `spec` (both KAI's CRD and ours accept
/// it) reads as one with an empty spec, as KAI's Go types read it; a field of the wrong type
/// (only possible where the CRD does not check) is why it cannot be read.
pub fn typed_group(object: &DynamicObject) -> Result<PodGroup, String> {
    let mut value = serde_json::to_value(object).map_err(|e| e.to_string())?;
    if value.get("spec").is_none_or(serde_json::Value::is_null) {
        value["spec"] = serde_json::json!({});
    }
    serde_json::from_value(value).map_err(|e| e.to_string())
}

/// Runs one watch to the end, logging its failures and saying where its listing stands.
async fn drive<K>(
    stream: impl Stream<Item = Result<watcher::Event<K>, watcher::Error>>,
    kind: String,
    absent_note: Option<&'static str>,
    listing: watch::Sender<Listing>,
) {
    futures::pin_mut!(stream);
    // Errors are retried by the backoff; the store keeps the last good state meanwhile.
    // The first error of a run is a warning, its repeats are debug, the recovery is info,
    // so an API server away for a minute makes two lines, not one per retry.
    let mut failing = false;
    while let Some(item) = stream.next().await {
        match item {
            Err(e) => {
                let refused = match &e {
                    watcher::Error::InitialListFailed(kube::Error::Api(s)) => Some(s.code),
                    _ => None,
                };
                match (refused, absent_note) {
                    (Some(code @ (403 | 404)), Some(note)) => {
                        if *listing.borrow() != Listing::Absent {
                            let why = if code == 404 {
                                "is not served by this cluster (its CRD is not installed)"
                            } else {
                                "may not be listed (403: the scheduler's ClusterRole lacks list and watch on it)"
                            };
                            tracing::info!("{kind} {why}: {note}; checking again with backoff");
                        }
                        listing.send_replace(Listing::Absent);
                    }
                    _ if !failing => {
                        tracing::warn!("the {kind} watch failed, retrying with backoff: {e}")
                    }
                    _ => tracing::debug!("the {kind} watch failed again: {e}"),
                }
                failing = true;
            }
            Ok(event) => {
                if failing {
                    tracing::info!("the {kind} watch is back");
                    failing = false;
                }
                if matches!(event, watcher::Event::InitDone) {
                    listing.send_replace(Listing::Listed);
                }
            }
        }
    }
}

impl Caches {
    /// Starts following Nodes, Pods, PodGroups, Queues, PriorityClasses and the owner kinds
    /// cluster-wide, and NodeResourceTopology objects with `numa`.
    pub fn start(client: kube::Client, numa: bool) -> Caches {
        let mut tasks = JoinSet::new();
        Caches {
            nodes: follow(Api::all(client.clone()), "Node", &mut tasks),
            pods: follow(Api::all(client.clone()), "Pod", &mut tasks),
            groups: follow_dynamic(
                client.clone(),
                ApiResource::erase::<PodGroup>(&()),
                Keep::Whole,
                None,
                &mut tasks,
            )
            .0,
            queues: follow_dynamic(
                client.clone(),
                ApiResource::erase::<Queue>(&()),
                Keep::Metadata,
                None,
                &mut tasks,
            )
            .0,
            priority_classes: follow(Api::all(client.clone()), "PriorityClass", &mut tasks),
            topologies: follow_dynamic(
                client.clone(),
                ApiResource::from_gvk_with_plural(
                    &GroupVersionKind::gvk("kai.scheduler", "v1alpha1", "Topology"),
                    "topologies",
                ),
                Keep::Whole,
                Some(
                    "KAI's Topology CRD is not installed: topology constraints are read by their node labels alone",
                ),
                &mut tasks,
            ),
            dra: [
                ("DeviceClass", "deviceclasses"),
                ("ResourceSlice", "resourceslices"),
                ("ResourceClaim", "resourceclaims"),
            ]
            .into_iter()
            .map(|(kind, plural)| {
                follow_dynamic(
                    client.clone(),
                    ApiResource::from_gvk_with_plural(
                        &GroupVersionKind::gvk("resource.k8s.io", "v1", kind),
                        plural,
                    ),
                    Keep::Whole,
                    Some(
                        "the cluster serves no DRA (resource.k8s.io/v1, Kubernetes 1.34 or later): pods with resource claims wait",
                    ),
                    &mut tasks,
                )
            })
            .collect(),
            numa: numa.then(|| {
                follow_dynamic(
                    client.clone(),
                    ApiResource::from_gvk_with_plural(
                        &GroupVersionKind::gvk("topology.node.k8s.io", "v1alpha2", "NodeResourceTopology"),
                        "noderesourcetopologies",
                    ),
                    Keep::Whole,
                    Some(
                        "NUMA alignment is on but no NodeResourceTopology objects can be read (install NFD's topology updater): nodes are placed on without regard to their NUMA zones",
                    ),
                    &mut tasks,
                )
            }),
            owners: access::OWNER_KINDS
                .iter()
                .map(|kind| follow_owner(client.clone(), kind, &mut tasks))
                .collect(),
            _tasks: tasks,
        }
    }

    /// Waits until every cache has listed once, or found its owner kind absent (what
    /// `/readyz` waits for): a first cycle before the owners are read would group a gang's pods
    /// one by one. The future owns handles on the stores, so it can run as its own task.
    pub fn synced(&self) -> impl Future<Output = Result<(), String>> + Send + 'static {
        let (nodes, pods, groups) = (self.nodes.clone(), self.pods.clone(), self.groups.clone());
        let classes = self.priority_classes.clone();
        let mut topologies = self.topologies.1.clone();
        let dra: Vec<_> = self
            .dra
            .iter()
            .chain(&self.numa)
            .map(|(_, l)| l.clone())
            .collect();
        let owners: Vec<_> = self
            .owners
            .iter()
            .map(|o| (o.kind.kind, o.listing.clone()))
            .collect();
        async move {
            let wait = |r: Result<(), reflector::store::WriterDropped>, kind: &str| {
                r.map_err(|_| format!("the {kind} watch stopped before its first list"))
            };
            wait(nodes.wait_until_ready().await, "Node")?;
            wait(pods.wait_until_ready().await, "Pod")?;
            wait(groups.wait_until_ready().await, "PodGroup")?;
            wait(classes.wait_until_ready().await, "PriorityClass")?;
            topologies
                .wait_for(|l| *l != Listing::Pending)
                .await
                .map_err(|_| "the Topology watch stopped before its first list".to_string())?;
            for mut listing in dra {
                listing
                    .wait_for(|l| *l != Listing::Pending)
                    .await
                    .map_err(|_| {
                        "a DRA or NodeResourceTopology watch stopped before its first list"
                            .to_string()
                    })?;
            }
            for (kind, mut listing) in owners {
                listing
                    .wait_for(|l| *l != Listing::Pending)
                    .await
                    .map_err(|_| format!("the {kind} watch stopped before its first list"))?;
            }
            Ok(())
        }
    }

    /// The names of the Queue objects in the cluster now. Empty until the Queue watch has
    /// listed (and for good where KAI's Queue CRD is not installed): readiness does not wait
    /// for it, as the scheduler reads queues from its policy, not from the cluster.
    pub fn queue_names(&self) -> std::collections::BTreeSet<String> {
        self.queues
            .state()
            .iter()
            .filter_map(|q| q.metadata.name.clone())
            .collect()
    }

    /// A copy of every store now, with the owner kinds whose caches hold every object.
    pub fn objects(&self) -> Objects {
        let mut owners = Vec::new();
        let mut complete_owner_kinds: Vec<String> = Vec::new();
        for cache in &self.owners {
            if *cache.listing.borrow() == Listing::Absent {
                continue;
            }
            owners.extend(cache.store.state());
            if *cache.listing.borrow() == Listing::Listed
                && !complete_owner_kinds.iter().any(|k| k == cache.kind.kind)
            {
                complete_owner_kinds.push(cache.kind.kind.to_string());
            }
        }
        let mut groups = Vec::new();
        let mut unreadable_groups = Vec::new();
        for object in self.groups.state() {
            match typed_group(&object) {
                Ok(group) => groups.push(Arc::new(group)),
                Err(why) => unreadable_groups.push((
                    object.metadata.namespace.clone().unwrap_or_default(),
                    object.metadata.name.clone().unwrap_or_default(),
                    why,
                )),
            }
        }
        Objects {
            nodes: self.nodes.state(),
            pods: self.pods.state(),
            groups,
            unreadable_groups,
            priority_classes: self.priority_classes.state(),
            topologies: present([&self.topologies]),
            dra: present(&self.dra),
            numa: present(&self.numa),
            owners,
            complete_owner_kinds,
        }
    }
}
