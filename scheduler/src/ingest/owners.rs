//! Grouping pods as KAI's pod-grouper does (`pkg/podgrouper/podgrouper/plugins/*`): a pod
//! without a `pod-group-name` annotation joins the group of its top owner (`ownerReferences`
//! followed up through the objects in the file), with the queue, priority label and gang size
//! that owner's kind gives.

use std::collections::{BTreeMap, HashMap, HashSet};

use serde_json::Value;

use super::objects::{PREEMPTIBILITY_LABEL, PRIORITY_LABEL};
use crate::cluster::{ObjectRef, PodGroup, SubGroup};

/// A reference to an owner, as `ownerReferences` hold it (`apiVersion` and `uid` empty when
/// not given).
pub type OwnerRef = ObjectRef;

/// KAI's annotation on a batch Job (and JobSet) that sets the group's minimum.
pub const MIN_MEMBER_ANNOTATION: &str = "kai.scheduler/batch-min-member";

/// An object that may own pods, as far as grouping reads it.
#[derive(Debug, Clone, Default)]
pub struct Owner {
    kind: String,
    labels: BTreeMap<String, String>,
    annotations: BTreeMap<String, String>,
    parent: Option<OwnerRef>,
    /// The gang size its kind gives, or why it could not be read.
    min_member: Option<Result<u32, String>>,
    /// The sub-groups its kind gives (a JobSet's replicated jobs and their replicas) with the
    /// group's `minSubGroup`, or why they could not be read.
    sub_groups: Option<Result<(Vec<SubGroup>, u32), String>>,
    /// Whether a pod was grouped under it (objects that own no pod get the old skip note).
    pub used: bool,
}

/// The controlling owner of an object (`controller: true`, else the first).
pub fn controller(metadata: Option<&Value>) -> Option<OwnerRef> {
    let refs = metadata?.get("ownerReferences")?.as_array()?;
    let chosen = refs
        .iter()
        .find(|r| r.get("controller").and_then(Value::as_bool) == Some(true))
        .or_else(|| refs.first())?;
    let text = |key: &str| {
        chosen
            .get(key)
            .and_then(Value::as_str)
            .unwrap_or_default()
            .to_string()
    };
    Some(OwnerRef {
        kind: chosen.get("kind")?.as_str()?.to_string(),
        name: chosen.get("name")?.as_str()?.to_string(),
        api_version: text("apiVersion"),
        uid: text("uid"),
    })
}

fn string_map(v: Option<&Value>) -> BTreeMap<String, String> {
    v.and_then(Value::as_object)
        .map(|m| {
            m.iter()
                .map(|(k, v)| {
                    let text = match v {
                        Value::String(s) => s.clone(),
                        other => other.to_string(),
                    };
                    (k.clone(), text)
                })
                .collect()
        })
        .unwrap_or_default()
}

/// Reads what grouping needs from any object with metadata.
pub fn owner(kind: &str, value: &Value) -> Owner {
    let meta = value.get("metadata");
    let annotations = string_map(meta.and_then(|m| m.get("annotations")));
    Owner {
        kind: kind.to_string(),
        labels: string_map(meta.and_then(|m| m.get("labels"))),
        parent: controller(meta),
        min_member: min_member(kind, value, &annotations),
        sub_groups: (kind == "JobSet")
            .then(|| jobset_sub_groups(value, &annotations))
            .flatten(),
        annotations,
        used: false,
    }
}

fn int(v: Option<&Value>) -> Option<i64> {
    v.and_then(|v| v.as_i64().or_else(|| v.as_str()?.parse().ok()))
}

fn path<'v>(v: &'v Value, keys: &[&str]) -> Option<&'v Value> {
    keys.iter().try_fold(v, |v, k| v.get(k))
}

/// The gang size KAI's grouper for this kind computes, or `None` for kinds whose groups have
/// no gang rule (minMember 1).
fn min_member(
    kind: &str,
    v: &Value,
    annotations: &BTreeMap<String, String>,
) -> Option<Result<u32, String>> {
    let to_u32 = |n: i64, what: &str| {
        u32::try_from(n).map_err(|_| format!("{what} is {n}, not a number of pods"))
    };
    let spec = v.get("spec")?;
    match kind {
        // `job_grouper.go: calcMinMember`.
        "Job" => annotations.get(MIN_MEMBER_ANNOTATION).map(|text| {
            text.parse::<i64>()
                .map_err(|_| {
                    format!("annotation {MIN_MEMBER_ANNOTATION}: `{text}` is not a number")
                })
                .and_then(|n| to_u32(n, &format!("annotation {MIN_MEMBER_ANNOTATION}")))
        }),
        // `kubeflow/distributed_common.go` and `pytorch_grouper.go`: runPolicy's minAvailable,
        // else elasticPolicy's minReplicas (PyTorchJob), else the sum of all replicas.
        "PyTorchJob" | "TFJob" | "MPIJob" | "XGBoostJob" | "JAXJob" => {
            if let Some(n) = int(path(
                spec,
                &["runPolicy", "schedulingPolicy", "minAvailable"],
            )) {
                return Some(to_u32(n, "spec.runPolicy.schedulingPolicy.minAvailable"));
            }
            if let Some(n) = int(path(spec, &["elasticPolicy", "minReplicas"])) {
                return Some(to_u32(n, "spec.elasticPolicy.minReplicas"));
            }
            let field = match kind {
                "PyTorchJob" => "pytorchReplicaSpecs",
                "TFJob" => "tfReplicaSpecs",
                "MPIJob" => "mpiReplicaSpecs",
                "XGBoostJob" => "xgbReplicaSpecs",
                _ => "jaxReplicaSpecs",
            };
            let Some(specs) = spec.get(field).and_then(Value::as_object) else {
                return Some(Err(format!("spec.{field} is missing")));
            };
            let mut total = 0i64;
            for (name, replica) in specs {
                total += int(replica.get("replicas")).unwrap_or(1);
                if int(replica.get("replicas")) == Some(0) {
                    return Some(Err(format!("spec.{field}.{name}.replicas is 0")));
                }
            }
            Some(to_u32(
                total,
                &format!("the sum of spec.{field}.*.replicas"),
            ))
        }
        // Without sub-groups: every pod of every replicated job (KAI requires each replicated
        // job as a sub-group by default).
        "JobSet" => {
            let jobs = spec.get("replicatedJobs")?.as_array()?;
            let total: i64 = jobs
                .iter()
                .map(|j| {
                    let replicas = int(j.get("replicas")).unwrap_or(1);
                    let pods = int(path(j, &["template", "spec", "parallelism"])).unwrap_or(1);
                    replicas * pods
                })
                .sum();
            Some(to_u32(total, "the pods of spec.replicatedJobs"))
        }
        // `ray_grouper.go`: the head plus each worker group's minReplicas (else replicas) times
        // its hosts.
        "RayCluster" | "RayJob" => {
            let cluster = if kind == "RayJob" {
                spec.get("rayClusterSpec")?
            } else {
                spec
            };
            let mut total = 1i64;
            for g in cluster
                .get("workerGroupSpecs")
                .and_then(Value::as_array)
                .into_iter()
                .flatten()
            {
                let min = int(g.get("minReplicas")).unwrap_or(0);
                let desired = int(g.get("replicas")).unwrap_or(0);
                let hosts = int(g.get("numOfHosts")).unwrap_or(1).max(1);
                total += if min > 0 { min } else { desired } * hosts;
            }
            Some(to_u32(total, "the pods of the Ray cluster"))
        }
        // `lws_grouper.go`: one group per replica (leader and workers), of the template's size.
        "LeaderWorkerSet" => int(path(spec, &["leaderWorkerTemplate", "size"]))
            .map(|n| to_u32(n, "spec.leaderWorkerTemplate.size")),
        _ => None,
    }
}

/// A JobSet's sub-groups as KAI's `jobset_grouper.go: buildSubGroups` makes them: each
/// replicated job groups its replicas (`minSubGroup`: all of them), each replica
/// (`<job>-replica-<index>`) needs its template's `parallelism` pods (or the template's
/// `kai.scheduler/batch-min-member`); the group needs every replicated job, one with
/// `startupPolicyOrder: InOrder` (the controller starts them one by one), or the JobSet's own
/// `kai.scheduler/batch-min-member` when smaller (`computePodGroupMinSubGroup`). `None` when
/// the JobSet has no replicated jobs.
fn jobset_sub_groups(
    v: &Value,
    annotations: &BTreeMap<String, String>,
) -> Option<Result<(Vec<SubGroup>, u32), String>> {
    let jobs = path(v, &["spec", "replicatedJobs"])?.as_array()?;
    if jobs.is_empty() {
        return None;
    }
    let count = |text: &str, what: &str| -> Result<u32, String> {
        match text.parse::<i64>() {
            Ok(n) if n >= 1 => u32::try_from(n).map_err(|_| format!("{what} is {n}")),
            _ => Err(format!("{what}: `{text}` is not a number of 1 or more")),
        }
    };
    let mut subs = Vec::new();
    for (i, job) in jobs.iter().enumerate() {
        let Some(name) = job
            .get("name")
            .and_then(Value::as_str)
            .filter(|n| !n.is_empty())
        else {
            return Some(Err(format!("spec.replicatedJobs[{i}] has no name")));
        };
        let replicas = int(job.get("replicas")).unwrap_or(1);
        let Ok(replicas) = u32::try_from(replicas) else {
            return Some(Err(format!(
                "spec.replicatedJobs[{i}].replicas is {replicas}"
            )));
        };
        let min = match path(
            job,
            &["template", "metadata", "annotations", MIN_MEMBER_ANNOTATION],
        )
        .and_then(Value::as_str)
        {
            Some(text) => match count(
                text,
                &format!("spec.replicatedJobs[{i}].template annotation {MIN_MEMBER_ANNOTATION}"),
            ) {
                Ok(n) => n,
                Err(why) => return Some(Err(why)),
            },
            None => {
                let p = int(path(job, &["template", "spec", "parallelism"])).unwrap_or(1);
                match u32::try_from(p) {
                    Ok(p) => p,
                    Err(_) => {
                        return Some(Err(format!(
                            "spec.replicatedJobs[{i}].template.spec.parallelism is {p}"
                        )));
                    }
                }
            }
        };
        subs.push(SubGroup {
            name: name.to_string(),
            min_sub_group: Some(replicas),
            ..SubGroup::default()
        });
        for r in 0..replicas {
            subs.push(SubGroup {
                name: format!("{name}-replica-{r}"),
                parent: Some(name.to_string()),
                min_member: Some(min),
                ..SubGroup::default()
            });
        }
    }
    let all = jobs.len() as u32;
    let min_sub_group = match annotations.get(MIN_MEMBER_ANNOTATION) {
        Some(text) => match count(text, &format!("annotation {MIN_MEMBER_ANNOTATION}")) {
            Ok(n) => n.min(all),
            Err(why) => return Some(Err(why)),
        },
        None if path(v, &["spec", "startupPolicy", "startupPolicyOrder"])
            .and_then(Value::as_str)
            == Some("InOrder") =>
        {
            1
        }
        None => all,
    };
    Some(Ok((subs, min_sub_group)))
}

/// The sub-group KAI's JobSet grouper puts a pod in (`assignPodToSubGroup`): from the labels
/// the JobSet controller sets on it.
fn jobset_replica(pod_labels: &BTreeMap<String, String>) -> Option<String> {
    let job = pod_labels.get("jobset.sigs.k8s.io/replicatedjob-name")?;
    let index = pod_labels.get("jobset.sigs.k8s.io/job-index")?;
    Some(format!("{job}-replica-{index}"))
}

/// Kinds whose pods KAI gangs: without the owner object in the file, the pods present stand in.
const GANG_KINDS: [&str; 9] = [
    "PyTorchJob",
    "TFJob",
    "MPIJob",
    "XGBoostJob",
    "JAXJob",
    "JobSet",
    "RayCluster",
    "RayJob",
    "LeaderWorkerSet",
];

/// The objects of the file that may own pods, by `(namespace, kind, name)`.
#[derive(Debug, Default)]
pub struct Owners {
    by_key: HashMap<(String, String, String), Owner>,
    /// Kinds of which every object is present (the backend's watch caches): a chain that ends
    /// at a missing object of one of these kinds is not yet whole.
    complete: HashSet<String>,
}

/// The group a pod joins through its owners.
#[derive(Debug, Clone)]
pub struct Grouping {
    /// The group's name (KAI's `pg-<owner>` style, plus the replica for LeaderWorkerSets).
    pub name: String,
    /// The group to create when it does not exist yet.
    pub group: PodGroup,
    /// Queue label on the top owner.
    pub queue: Option<String>,
    /// `priorityClassName` label on the top owner.
    pub priority_label: Option<String>,
    /// `kai.scheduler/preemptibility` label on the top owner.
    pub preemptibility: Option<bool>,
    /// A note to add once per group (the owner is missing, or its size could not be read).
    pub note: Option<String>,
    /// Whether its size is the number of its pods in the file (owner missing).
    pub count_pods: bool,
    /// The sub-group the pod belongs to, when the group has sub-groups made for its kind.
    pub subgroup: Option<String>,
    /// The owner the chain stops at (`Job a/train`) when it is of a kind whose objects are all
    /// present and it is not: the owner is newer than the caches, so the group is not known yet.
    pub missing_owner: Option<String>,
}

impl Owners {
    /// Owners of which every object of `kinds` is present: see [`Grouping::missing_owner`].
    pub fn complete(kinds: &[String]) -> Self {
        Owners {
            complete: kinds.iter().cloned().collect(),
            ..Owners::default()
        }
    }

    /// Adds an object.
    pub fn add(&mut self, namespace: &str, name: &str, owner: Owner) {
        self.by_key.insert(
            (namespace.to_string(), owner.kind.clone(), name.to_string()),
            owner,
        );
    }

    /// Objects that own no pod, for the skip notes: `(namespace, kind, name)`.
    pub fn unused(&self) -> impl Iterator<Item = &(String, String, String)> {
        self.by_key.iter().filter(|(_, o)| !o.used).map(|(k, _)| k)
    }

    /// The group of a pod owned by `first` in `namespace`, following owners up to the top.
    pub fn group_of(
        &mut self,
        namespace: &str,
        first: &OwnerRef,
        pod_name: &str,
        pod_labels: &BTreeMap<String, String>,
        queue_label: &str,
    ) -> Grouping {
        let mut top = first.clone();
        // The owners walked, from the pod's up to the top.
        let mut walked = vec![first.clone()];
        let mut chain: Vec<(String, String, String)> = Vec::new();
        for _ in 0..16 {
            let key = (namespace.to_string(), top.kind.clone(), top.name.clone());
            let Some(o) = self.by_key.get(&key) else {
                break;
            };
            chain.push(key);
            match &o.parent {
                Some(p) if !chain.iter().any(|k| k.1 == p.kind && k.2 == p.name) => {
                    top = p.clone();
                    walked.push(top.clone());
                }
                _ => break,
            }
        }
        for key in &chain {
            if let Some(o) = self.by_key.get_mut(key) {
                o.used = true;
            }
        }
        // The walk stops at the first owner it cannot find, or at the top: `chain` ends with the
        // top's key exactly when the top was found.
        let top_found = chain
            .last()
            .is_some_and(|k| k.1 == top.kind && k.2 == top.name);
        let missing_owner = (!top_found && self.complete.contains(&top.kind))
            .then(|| format!("{} {namespace}/{}", top.kind, top.name));
        // A CronJob's runs are separate workloads: KAI's CronJob grouper groups each by its Job
        // (`plugins/cronjobs/crobjob-grouper.go: GetPodGroupMetadata`), not by the CronJob.
        if top.kind == "CronJob"
            && let [.., job, _] = walked.as_slice()
        {
            top = job.clone();
        }
        let found = self
            .by_key
            .get(&(namespace.to_string(), top.kind.clone(), top.name.clone()));
        let kind = top.kind.as_str();
        let owner_read = found.is_some();
        let label = |key: &str| {
            found
                .and_then(|o| o.labels.get(key))
                .filter(|v| !v.is_empty())
                .cloned()
        };
        // Deployments: one group per pod, `inference` by default (`deployment_grouper.go`).
        let per_pod = kind == "Deployment" || (kind == "ReplicaSet" && found.is_none());
        let replica = (kind == "LeaderWorkerSet")
            .then(|| {
                pod_labels
                    .get("leaderworkerset.sigs.k8s.io/group-index")
                    .cloned()
            })
            .flatten();
        let name = match (&replica, per_pod) {
            (_, true) => format!("pg-{pod_name}"),
            (Some(r), _) => format!("pg-{}-group-{r}", top.name),
            (None, _) => format!("pg-{}", top.name),
        };
        let mut note = None;
        let mut count_pods = false;
        let min = match found.and_then(|o| o.min_member.clone()) {
            Some(Ok(n)) => n,
            Some(Err(why)) => {
                note = Some(format!(
                    "{kind} {namespace}/{}: {why}; its pods are grouped as one gang of the pods in the file",
                    top.name
                ));
                count_pods = true;
                0
            }
            None if found.is_none() && GANG_KINDS.contains(&kind) => {
                note = Some(format!(
                    "{kind} {namespace}/{} is not in the file: its pods are grouped as one gang of the pods in the file (add it to the file for its real size)",
                    top.name
                ));
                count_pods = true;
                0
            }
            None => 1,
        };
        // A JobSet read whole: its replicated jobs and replicas are sub-groups, as KAI makes them.
        let (sub_groups, min_sub_group, subgroup) = match found.and_then(|o| o.sub_groups.clone()) {
            Some(Ok((subs, min_sub))) => match jobset_replica(pod_labels) {
                Some(replica) => (subs, Some(min_sub), Some(replica)),
                None => {
                    note = Some(format!(
                        "{kind} {namespace}/{}: pod {pod_name} lacks the labels jobset.sigs.k8s.io/replicatedjob-name and job-index, so it is in no replica: it is not scheduled",
                        top.name
                    ));
                    (subs, Some(min_sub), None)
                }
            },
            Some(Err(why)) => {
                note = Some(format!(
                    "{kind} {namespace}/{}: {why}; its pods are grouped as one gang of its replicated jobs' pods",
                    top.name
                ));
                (Vec::new(), None, None)
            }
            None => (Vec::new(), None, None),
        };
        let min = if sub_groups.is_empty() { min } else { 0 };
        let annotations = found.map(|o| &o.annotations);
        let annotation = |key: &str| {
            annotations
                .and_then(|a| a.get(key))
                .filter(|v| !v.is_empty())
                .cloned()
        };
        Grouping {
            group: PodGroup {
                namespace: namespace.to_string(),
                name: name.clone(),
                min_member: min,
                topology: annotation("kai.scheduler/topology"),
                topology_required: annotation("kai.scheduler/topology-required-placement"),
                topology_preferred: annotation("kai.scheduler/topology-preferred-placement"),
                kind_priority: Some(if per_pod { "inference" } else { "train" }.to_string()),
                sub_groups,
                min_sub_group,
                // Only an owner read whole gives the group's object: not a Deployment's per-pod
                // groups, nor a group sized from the pods present, nor an owner without a uid.
                owner: (owner_read
                    && !per_pod
                    && !count_pods
                    && !top.uid.is_empty()
                    && !top.api_version.is_empty())
                .then(|| Box::new(top.clone())),
                ..Default::default()
            },
            name,
            queue: label(queue_label),
            priority_label: label(PRIORITY_LABEL),
            preemptibility: match label(PREEMPTIBILITY_LABEL).as_deref() {
                Some("preemptible") => Some(true),
                Some("non-preemptible") => Some(false),
                _ => None,
            },
            note,
            count_pods,
            subgroup,
            missing_owner,
        }
    }
}
