//! KAI Scheduler's own action tests (`pkg/scheduler/actions/*/*_test.go`), transcribed as data
//! into `tests/kai_actions/*.yaml` and run through our cycle with the one action KAI's test
//! runs. Each case cites its KAI file, test function, table index and case name, and carries
//! KAI's expected task statuses. A case whose result differs from KAI's carries a
//! `known-difference` line; the suite passes while every such case still differs and fails when
//! one starts to agree (so a fix is locked in by removing the line). Format, defaults and how the
//! files were made: `tests/kai_actions/README.md`.

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::path::{Path, PathBuf};

use kai_policy_compiler::model::{
    Bound, Cluster, DefaultPlacement, MinRuntime, Namespaces, Origin, Oversubscription,
    PerResource, Policy, PriorityClass, Queue, ResourcePolicy, Strategy,
};
use kai_policy_compiler::quantity::Duration;
use kai_scheduler::cluster::{
    Amounts, GPU_GROUP_LABEL, LabelSelector, Node, NodeSelectorTerm, Operator, Pod,
    PodAffinityTerm, PodGroup, Requirement, SUBGROUP_LABEL, Snapshot, SubGroup, Time, Topology,
};
use kai_scheduler::cycle::{self, Actions, Cycle, GPU_MEMORY_LABEL};
use kai_scheduler::decision::{Decision, EvictReason};
use kai_scheduler::dra;
use kai_scheduler::numa;
use serde::Deserialize;

/// One file of cases: one KAI test file.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct CaseFile {
    /// The KAI test file.
    source: String,
    /// The action its test functions run (`reclaim.New().Execute(ssn)` and the like); for the
    /// integration tests, every action.
    action: String,
    /// KAI's integration tests (`integration_tests_utils.RunTests`): rounds of every action with
    /// the tasks' states fed back between rounds, a match, then rounds that must keep it.
    #[serde(default)]
    integration: bool,
    cases: Vec<Case>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct Case {
    /// The Go test function.
    test: String,
    /// The case's index in that function's table (KAI's "test number").
    number: usize,
    /// The case's `Name`.
    name: String,
    /// Line of the case's literal in the KAI file.
    line: usize,
    /// Why we differ from KAI here (the KAI function that decides), while we do.
    #[serde(rename = "known-difference", default)]
    known_difference: Option<String>,
    #[serde(default)]
    #[allow(dead_code)]
    note: Option<String>,
    /// Why the case cannot be expressed (then it has nothing else).
    #[serde(default)]
    cannot: Option<String>,
    #[serde(rename = "DisableDefaultDepartment", default)]
    disable_default_department: bool,
    /// The test's own scheduler configuration, as node placement per resource kind (KAI's
    /// default, binpack for both, when absent).
    #[serde(rename = "Placement", default)]
    placement: Option<KaiPlacement>,
    /// `dra_fake.TestDRAObjects`.
    #[serde(rename = "DRA", default)]
    dra: KaiDra,
    /// KAI's `Topology` objects: each one's node labels, one per level, as written.
    #[serde(rename = "Topologies", default)]
    topologies: BTreeMap<String, Vec<String>>,
    #[serde(rename = "Nodes", default)]
    nodes: BTreeMap<String, KaiNode>,
    #[serde(rename = "Queues", default)]
    queues: Vec<KaiQueue>,
    #[serde(rename = "Departments", default)]
    departments: Vec<KaiQueue>,
    #[serde(rename = "Jobs", default)]
    jobs: Vec<KaiJob>,
    #[serde(rename = "JobExpectedResults", default)]
    job_expected: BTreeMap<String, Expected>,
    #[serde(rename = "TaskExpectedResults", default)]
    task_expected: BTreeMap<String, Expected>,
    #[serde(rename = "ExpectedNodesResources", default)]
    node_expected: BTreeMap<String, NodeExpected>,
    /// What a test's own asserts demand of a sub-group's domains (transcribe.py's
    /// `HAND_CHECKED`).
    #[serde(rename = "SubGroupDomains", default)]
    sub_group_domains: Vec<DomainsExpected>,
    /// Sub-groups each in one domain of a label, a different one each.
    #[serde(rename = "SubGroupsApart", default)]
    sub_groups_apart: Vec<ApartExpected>,
    /// `integration_tests_utils.TestTopologyMetadata`'s round counts.
    #[serde(default)]
    rounds: Option<Rounds>,
}

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "PascalCase")]
struct Rounds {
    #[serde(default)]
    rounds_until_match: usize,
    #[serde(default)]
    rounds_after_match: usize,
    /// Seconds between rounds (KAI sleeps; our clock does not move: KAI's fake jobs start a
    /// minute before every round's session).
    #[serde(default)]
    #[allow(dead_code)]
    scheduling_duration: f64,
}

/// `nodes_fake.TestNodeBasic`.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "PascalCase")]
struct KaiNode {
    #[serde(rename = "GPUs", default)]
    gpus: i64,
    #[serde(rename = "CPUMillis", default)]
    cpu_millis: f64,
    #[serde(rename = "CPUMemory", default)]
    cpu_memory: f64,
    #[serde(rename = "GPUMemory", default)]
    gpu_memory: i64,
    #[serde(default)]
    max_task_num: Option<u32>,
    #[serde(default)]
    labels: BTreeMap<String, String>,
    #[serde(default)]
    mig_strategy: Option<String>,
    #[serde(default)]
    mig_instances: BTreeMap<String, i64>,
    /// `nodes_fake.NewNumaTopology`: the node's NodeResourceTopology.
    #[serde(default)]
    numa: Option<KaiNuma>,
    #[serde(rename = "GPUName", default)]
    #[allow(dead_code)]
    gpu_name: Option<String>,
}

/// `test_utils.TestQueueBasic` and `TestDepartmentBasic`.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "PascalCase")]
struct KaiQueue {
    name: String,
    #[serde(default)]
    priority: Option<i32>,
    #[serde(rename = "DeservedGPUs", default)]
    deserved_gpus: f64,
    #[serde(rename = "DeservedCPUs", default)]
    deserved_cpus: Option<f64>,
    #[serde(default)]
    deserved_memory: Option<f64>,
    #[serde(rename = "MaxAllowedGPUs", default)]
    max_allowed_gpus: f64,
    #[serde(rename = "MaxAllowedCPUs", default)]
    max_allowed_cpus: Option<f64>,
    #[serde(default)]
    max_allowed_memory: Option<f64>,
    #[serde(rename = "GPUOverQuotaWeight", default)]
    gpu_over_quota_weight: f64,
    #[serde(default)]
    parent_queue: Option<String>,
    /// Seconds.
    #[serde(default)]
    reclaim_min_runtime: Option<f64>,
    #[serde(default)]
    #[allow(dead_code)]
    interactive_timeout_in_minutes: Option<i64>,
}

/// `jobs_fake.TestJobBasic`.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "PascalCase")]
struct KaiJob {
    name: String,
    #[serde(default)]
    namespace: Option<String>,
    queue_name: String,
    #[serde(default)]
    priority: i32,
    #[serde(default)]
    preemptibility: Option<String>,
    #[serde(rename = "RequiredGPUsPerTask", default)]
    required_gpus_per_task: f64,
    #[serde(rename = "RequiredCPUsPerTask", default)]
    required_cpus_per_task: f64,
    #[serde(default)]
    required_memory_per_task: f64,
    #[serde(default)]
    required_gpu_memory: i64,
    #[serde(default)]
    required_multi_fraction_devices_per_task: Option<u32>,
    #[serde(default)]
    job_age_in_minutes: i64,
    #[serde(default)]
    is_best_effort_job: bool,
    /// `status.qosClass` of its pods (`Guaranteed` pods align CPU and memory to NUMA zones).
    #[serde(rename = "QOSClass", default)]
    qos_class: Option<String>,
    /// Seconds.
    #[serde(default)]
    preemption_delay: Option<f64>,
    /// Seconds.
    #[serde(default)]
    stale_duration: Option<f64>,
    /// Seconds.
    #[serde(default)]
    per_job_staleness_grace_period: Option<f64>,
    /// In KAI's multi-round tests: an evicted task stays `Releasing` on its node between rounds
    /// (otherwise it comes back `Pending`).
    #[serde(default)]
    delete_job_in_test: bool,
    /// `RootSubGroupSet: jobs_fake.DefaultSubGroup(n)`; absent: every task.
    #[serde(default)]
    min_available: Option<u32>,
    /// The test's `RootSubGroupSet` tree, as our PodGroup's `spec.subGroups` (the converter
    /// names each sub-group's parent and adds `jobs_fake.BuildJobInfo`'s `default` pod set).
    #[serde(default)]
    sub_groups: Vec<KaiSubGroup>,
    /// The root's `SetMinSubGroup`.
    #[serde(default)]
    min_sub_group: Option<u32>,
    /// The root's topology constraint.
    #[serde(default)]
    topology: Option<KaiConstraint>,
    #[serde(default)]
    tasks: Vec<KaiTask>,
}

/// `topology_info.TopologyConstraintInfo`: levels named by their node label.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "PascalCase")]
struct KaiConstraint {
    /// The `Topology` object the levels belong to.
    topology: String,
    #[serde(default)]
    required_level: Option<String>,
    #[serde(default)]
    preferred_level: Option<String>,
}

/// One sub-group of a job's tree.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "PascalCase")]
struct KaiSubGroup {
    name: String,
    #[serde(default)]
    parent: Option<String>,
    #[serde(default)]
    min_member: Option<u32>,
    #[serde(default)]
    min_sub_group: Option<u32>,
    #[serde(default)]
    topology: Option<KaiConstraint>,
}

/// A node's NUMA topology as `nodes_fake.NewNumaTopology` builds it: policy, scope and zones,
/// quantities as written (`cpu: "4"` is four cores).
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "PascalCase")]
struct KaiNuma {
    policy: String,
    scope: String,
    zones: Vec<KaiZone>,
}

/// `nodes_fake.NewNumaZoneWithAllocatable`.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "PascalCase")]
struct KaiZone {
    name: String,
    allocatable: BTreeMap<String, String>,
    available: BTreeMap<String, String>,
}

impl KaiNuma {
    /// The topology `numa_topology.go: BuildNumaTopology` makes of it.
    fn topology(&self) -> Result<numa::Topology, String> {
        let (policy, scope) = numa::policy_and_scope(Some(&self.policy), Some(&self.scope), None);
        let amounts = |r: &BTreeMap<String, String>| -> Result<numa::Res, String> {
            r.iter()
                .map(|(k, q)| {
                    let v = numa::quantity(k, q).ok_or_else(|| format!("zone quantity {q}"))?;
                    Ok((numa::normalize(k), v))
                })
                .collect()
        };
        let mut zones = Vec::new();
        for z in &self.zones {
            zones.push(numa::Zone {
                name: z.name.clone(),
                allocatable: amounts(&z.allocatable)?,
                available: amounts(&z.available)?,
            });
        }
        numa::sort_zones(&mut zones);
        Ok(numa::Topology {
            policy,
            scope,
            zones,
            names: Default::default(),
        })
    }
}

/// `tasks_fake.TestTaskBasic`.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "PascalCase")]
struct KaiTask {
    #[serde(default)]
    #[allow(dead_code)]
    name: Option<String>,
    /// `nodes_fake.NumaObservedPlacementAnnotation`: the NUMA exporter's record of where the
    /// pod is, zone → resource → quantity.
    #[serde(default)]
    numa_observed: Option<BTreeMap<String, BTreeMap<String, String>>>,
    state: String,
    #[serde(default)]
    node_name: Option<String>,
    #[serde(rename = "GPUGroups", default)]
    #[allow(dead_code)]
    gpu_groups: Vec<String>,
    #[serde(default)]
    node_affinity_names: Vec<String>,
    #[serde(rename = "RequiredGPUs", default)]
    required_gpus: Option<i64>,
    #[serde(default)]
    required_mig_instances: BTreeMap<String, i64>,
    /// The pod set the task is in (`kai.scheduler/subgroup-name`).
    #[serde(default)]
    sub_group_name: Option<String>,
    /// Labels of the pod, and what its inter-pod terms select (`tasks_fake.applyPodAffinityLabels`).
    #[serde(default)]
    pod_affinity_labels: BTreeMap<String, String>,
    /// The topology key of a required pod affinity term selecting `pod_affinity_labels`.
    #[serde(default)]
    pod_affinity_topology_key: Option<String>,
    /// The topology key of a required pod anti-affinity term selecting them.
    #[serde(default)]
    pod_anti_affinity_topology_key: Option<String>,
    /// The task's priority inside its job (`jobs_fake`: the `kai.scheduler/task-priority` label).
    #[serde(default)]
    priority: Option<i64>,
    /// A legacy MIG pod (MIG instances asked in annotations).
    #[serde(default)]
    is_legacy_mig_task: bool,
    /// Claims the pod names (`spec.resourceClaims[].resourceClaimName`).
    #[serde(default)]
    resource_claim_names: Vec<String>,
    /// Claims made from templates: template → claim (`status.resourceClaimStatuses`).
    #[serde(default)]
    resource_claim_templates: BTreeMap<String, String>,
}

/// `test_utils.TestExpectedResultBasic` (the fields compared).
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "PascalCase")]
struct Expected {
    #[serde(default)]
    node_name: Option<String>,
    #[serde(rename = "GPUsRequired", default)]
    gpus_required: f64,
    #[serde(rename = "GPUsAccepted", default)]
    #[allow(dead_code)]
    gpus_accepted: f64,
    #[serde(default)]
    milli_cpu_required: f64,
    #[serde(default)]
    memory_required: f64,
    status: String,
    /// The NUMA zones (indices) the pods hold, in any order; empty: none.
    #[serde(rename = "NUMAZones", default)]
    numa_zones: Option<Vec<usize>>,
}

/// `test_utils.TestExpectedNodesResources`.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "PascalCase")]
struct NodeExpected {
    #[serde(rename = "ReleasingGPUs", default)]
    releasing_gpus: f64,
    #[serde(rename = "IdleGPUs", default)]
    idle_gpus: f64,
    /// What each NUMA zone (by index) has free after the cycle.
    #[serde(rename = "NUMAZonesAvailable", default)]
    numa_zones_available: BTreeMap<usize, BTreeMap<String, String>>,
}

/// A sub-group's pods counted by the value of a node label: exactly `domains`, and on exactly
/// `nodes` when given (KAI's `assertDomainCount`, `assertNodeSet`).
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "PascalCase")]
struct DomainsExpected {
    sub_group: String,
    label: String,
    domains: BTreeMap<String, usize>,
    #[serde(default)]
    nodes: Option<BTreeSet<String>>,
}

/// Each sub-group in a single domain of `label`, no two in the same one, and together exactly
/// `domains` (KAI's `assertSingleDomainName`, `assertDomainSet`).
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "PascalCase")]
struct ApartExpected {
    sub_groups: Vec<String>,
    label: String,
    domains: BTreeSet<String>,
}

/// What a pod of one container asking `cpu` millicores, `memory` bytes and `gpus` GPUs with
/// `qos` as its `status.qosClass` asks of NUMA zones, as ingest reads it.
fn numa_request(qos: Option<&str>, cpu: i64, memory: i64, gpus: i64) -> Option<Box<numa::PodNuma>> {
    use k8s_openapi::api::core::v1::{Container, PodSpec, PodStatus, ResourceRequirements};
    use k8s_openapi::apimachinery::pkg::api::resource::Quantity;
    let requests = BTreeMap::from([
        ("cpu".to_string(), Quantity(format!("{cpu}m"))),
        ("memory".to_string(), Quantity(memory.to_string())),
        ("nvidia.com/gpu".to_string(), Quantity(gpus.to_string())),
    ]);
    let spec = PodSpec {
        containers: vec![Container {
            name: "main".into(),
            resources: Some(ResourceRequirements {
                requests: Some(requests),
                ..Default::default()
            }),
            ..Default::default()
        }],
        ..Default::default()
    };
    let status = PodStatus {
        qos_class: Some(qos.unwrap_or("BestEffort").to_string()),
        ..Default::default()
    };
    kai_scheduler::ingest::pod_numa(&spec, Some(&status)).map(Box::new)
}

/// The cycle's clock in every case; KAI's tests run at `time.Now()`.
const NOW: Time = 1_000_000;
/// KAI's fake jobs that hold resources started a minute ago (`jobs_fake.BuildJobInfo`).
const STARTED_AGO: Time = 60;
/// `nodes_fake`: 20000 CPUs (written as "20000", a quantity in cores) and 20G of memory.
const NODE_CPU_CORES: f64 = 20_000.0;
const NODE_MEMORY: f64 = 20e9;
/// `node_info.DefaultGpuMemory`, MiB.
const DEFAULT_GPU_MEMORY: i64 = 100;
/// KAI's `nonPreemptiblePriorityThreshold`.
const NON_PREEMPTIBLE_FROM: i32 = 100;
/// `tasks_fake.NodeAffinityKey`.
const NODE_AFFINITY_KEY: &str = "kai.scheduler/type";

fn gpu_units(devices: f64) -> i64 {
    (devices * 1000.0).round() as i64
}

/// KAI's -1 (`NoMaxAllowedResource`) is unlimited.
fn bound(v: f64, units: impl Fn(f64) -> i64) -> Bound {
    if v < 0.0 {
        Bound::Unlimited
    } else {
        Bound::Finite(units(v))
    }
}

fn origin(line: usize) -> Origin {
    Origin {
        file: "kai-case".into(),
        line,
    }
}

/// `test_utils.BuildQueueInfoMap`, `BuildDepartmentInfoMap` and `addDefaultDepartmentIfNeeded`
/// as our model: departments first, then queues, parents before children.
fn policy(case: &Case) -> Result<Policy, String> {
    // A queue's CPU quota and limit are millicores (`ResourceQuota(queue.Spec.Resources.CPU)`),
    // while a task's and a node's CPU are quantities in cores.
    let millicores = |v: f64| v.round() as i64;
    let bytes = |v: f64| v.round() as i64;
    let mut departments: Vec<&KaiQueue> = case.departments.iter().collect();
    let default_department = KaiQueue {
        name: "default".into(),
        priority: None,
        deserved_gpus: -1.0,
        deserved_cpus: None,
        deserved_memory: None,
        max_allowed_gpus: -1.0,
        max_allowed_cpus: None,
        max_allowed_memory: None,
        gpu_over_quota_weight: -1.0,
        parent_queue: None,
        reclaim_min_runtime: None,
        interactive_timeout_in_minutes: None,
    };
    let default_parent = departments.is_empty() && !case.disable_default_department;
    if default_parent {
        departments.push(&default_department);
    }
    // (queue, parent name, is a department)
    let mut pending: Vec<(&KaiQueue, Option<String>, bool)> = departments
        .iter()
        .map(|d| (*d, None, true))
        .chain(case.queues.iter().map(|q| {
            let parent = if default_parent {
                Some("default".to_string())
            } else {
                q.parent_queue.clone().filter(|p| !p.is_empty())
            };
            (q, parent, false)
        }))
        .collect();
    let mut queues: Vec<Queue> = Vec::new();
    while !pending.is_empty() {
        let before = pending.len();
        let mut rest = Vec::new();
        for (q, parent, department) in pending {
            let parent_index = match &parent {
                None => None,
                Some(p) => match queues.iter().position(|x| &x.name == p) {
                    Some(i) => Some(i),
                    None => {
                        rest.push((q, parent, department));
                        continue;
                    }
                },
            };
            let index = queues.len();
            if let Some(p) = parent_index {
                queues[p].children.push(index);
            }
            let limit_gpu = if q.max_allowed_gpus == 0.0 {
                -1.0
            } else {
                q.max_allowed_gpus
            };
            // A department's over-quota weight is its deserved GPUs (BuildDepartmentInfoMap).
            let weight = if department {
                q.deserved_gpus
            } else {
                q.gpu_over_quota_weight
            };
            let min_runtime = MinRuntime {
                preempt: None,
                reclaim: q
                    .reclaim_min_runtime
                    .or_else(|| {
                        parent_index.and_then(|p| {
                            queues[p].min_runtime.reclaim.map(|d: Duration| d.0 as f64)
                        })
                    })
                    .map(|s| Duration(s as u64)),
            };
            queues.push(Queue {
                name: q.name.clone(),
                display_name: None,
                priority: q.priority.unwrap_or(100),
                parent: parent_index,
                children: Vec::new(),
                depth: parent_index.map_or(0, |p| queues[p].depth + 1),
                resources: PerResource {
                    gpu: Some(ResourcePolicy {
                        quota: bound(q.deserved_gpus, gpu_units),
                        limit: bound(limit_gpu, gpu_units),
                        weight,
                    }),
                    cpu: Some(ResourcePolicy {
                        quota: bound(q.deserved_cpus.unwrap_or(-1.0), millicores),
                        limit: bound(q.max_allowed_cpus.unwrap_or(-1.0), millicores),
                        weight: 1.0,
                    }),
                    memory: Some(ResourcePolicy {
                        quota: bound(q.deserved_memory.unwrap_or(-1.0), bytes),
                        limit: bound(q.max_allowed_memory.unwrap_or(-1.0), bytes),
                        weight: 1.0,
                    }),
                },
                namespaces: Namespaces {
                    defaults: Vec::new(),
                    open_to_all: true,
                },
                default_priority_class: None,
                placement: None,
                min_runtime,
                labels: BTreeMap::new(),
                annotations: BTreeMap::new(),
                origin: origin(index + 1),
            });
        }
        if rest.len() == before {
            return Err(format!(
                "queues whose parent is not declared: {:?}",
                rest.iter()
                    .map(|(q, p, _)| (&q.name, p))
                    .collect::<Vec<_>>()
            ));
        }
        pending = rest;
    }
    let values: BTreeSet<i32> = case.jobs.iter().map(|j| j.priority).collect();
    let priority_classes = values
        .into_iter()
        .map(|value| PriorityClass {
            name: class_name(value),
            value,
            preemptible: value < NON_PREEMPTIBLE_FROM,
            description: None,
            origin: origin(1),
        })
        .collect();
    Ok(Policy {
        cluster: Cluster {
            placement: match &case.placement {
                Some(p) => DefaultPlacement {
                    gpu: strategy(&p.gpu)?,
                    cpu: strategy(&p.cpu)?,
                },
                None => DefaultPlacement {
                    gpu: Strategy::Binpack,
                    cpu: Strategy::Binpack,
                },
            },
            oversubscription: Oversubscription::Allow,
            ..Cluster::default()
        },
        priority_classes,
        placements: Vec::new(),
        queues,
    })
}

fn class_name(value: i32) -> String {
    format!("priority-{}", value.to_string().replace('-', "minus-"))
}

/// `nodeplacement`'s arguments (and the `gpupack` / `gpuspread` plugin that goes with them).
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct KaiPlacement {
    gpu: String,
    cpu: String,
}

/// `dra_fake.TestDRAObjects`: device classes (no selectors), slices and claims.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "PascalCase")]
struct KaiDra {
    #[serde(default)]
    device_classes: Vec<String>,
    #[serde(default)]
    resource_slices: Vec<KaiSlice>,
    #[serde(default)]
    resource_claims: Vec<KaiClaim>,
}

/// `dra_fake.TestResourceSlice`: `Count` devices named 0, 1, … of driver `nvidia.com/gpu` in
/// pool `NodeName` (`dra_fake.getResourceSlices`).
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "PascalCase")]
struct KaiSlice {
    name: String,
    node_name: String,
    count: usize,
}

/// `dra_fake.TestResourceClaim`: one `ExactCount` request named `request`, and its status.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "PascalCase")]
struct KaiClaim {
    name: String,
    namespace: String,
    device_class_name: String,
    count: i64,
    #[serde(default)]
    labels: BTreeMap<String, String>,
    #[serde(default)]
    allocation: Vec<KaiAllocated>,
    #[serde(default)]
    reserved_for: Vec<String>,
}

/// One device of a claim's allocation.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "PascalCase")]
struct KaiAllocated {
    request: String,
    driver: String,
    pool: String,
    device: String,
}

/// The driver `dra_fake` gives every slice.
const FAKE_DRIVER: &str = "nvidia.com/gpu";

impl KaiDra {
    /// As our snapshot holds them.
    fn objects(&self) -> dra::Dra {
        dra::Dra {
            classes: self
                .device_classes
                .iter()
                .map(|name| dra::DeviceClass {
                    name: name.clone(),
                    selectors: Vec::new(),
                })
                .collect(),
            slices: self
                .resource_slices
                .iter()
                .map(|s| dra::ResourceSlice {
                    name: s.name.clone(),
                    node: Some(s.node_name.clone()),
                    all_nodes: false,
                    node_selector: Vec::new(),
                    driver: FAKE_DRIVER.into(),
                    pool: s.node_name.clone(),
                    // KAI's builder (`getResourceSlices`): generation 0, and as many slices
                    // in the pool as the test gives the node.
                    generation: 0,
                    slice_count: Some(
                        self.resource_slices
                            .iter()
                            .filter(|o| o.node_name == s.node_name)
                            .count() as i64,
                    ),
                    devices: (0..s.count)
                        .map(|i| dra::Device {
                            name: i.to_string(),
                            attributes: BTreeMap::new(),
                            unsupported: None,
                        })
                        .collect(),
                })
                .collect(),
            claims: self
                .resource_claims
                .iter()
                .map(|c| dra::ResourceClaim {
                    namespace: c.namespace.clone(),
                    name: c.name.clone(),
                    labels: c.labels.clone(),
                    extended: false,
                    requests: vec![dra::DeviceRequest {
                        name: "request".into(),
                        class: c.device_class_name.clone(),
                        mode: dra::Mode::Exact(c.count),
                        selectors: Vec::new(),
                    }],
                    allocation: (!c.allocation.is_empty()).then(|| dra::Allocation {
                        node: None,
                        selector: Vec::new(),
                        devices: c
                            .allocation
                            .iter()
                            .map(|a| dra::AllocatedDevice {
                                request: a.request.clone(),
                                driver: a.driver.clone(),
                                pool: a.pool.clone(),
                                device: a.device.clone(),
                            })
                            .collect(),
                    }),
                    reserved_for: c.reserved_for.clone(),
                    unsupported: None,
                    unreadable: None,
                })
                .collect(),
        }
    }

    /// KAI's harness after a round: every claim's status as the session left it.
    fn feed_back(&mut self, changed: &[dra::ClaimStatus]) {
        for status in changed {
            let Some(c) = self
                .resource_claims
                .iter_mut()
                .find(|c| c.namespace == status.namespace && c.name == status.name)
            else {
                continue;
            };
            c.allocation = status
                .allocation
                .iter()
                .flat_map(|a| &a.devices)
                .map(|d| KaiAllocated {
                    request: d.request.clone(),
                    driver: d.driver.clone(),
                    pool: d.pool.clone(),
                    device: d.device.clone(),
                })
                .collect();
            c.reserved_for = status.reserved_for.clone();
        }
    }
}

/// `binpack` or `spread`, as `nodeplacement` reads them.
fn strategy(name: &str) -> Result<Strategy, String> {
    match name {
        "binpack" => Ok(Strategy::Binpack),
        "spread" => Ok(Strategy::Spread),
        other => Err(format!("unknown placement strategy {other:?}")),
    }
}

/// What KAI's fake session holds as pods, nodes and pod groups, as our snapshot. Returns the
/// snapshot and, per KAI job name, its namespace.
/// Pods of finished tasks (KAI's `Succeeded` and `Failed`) hold nothing and are not in the
/// snapshot; they keep their state.
type Finished = Vec<(Pod, &'static str)>;

fn snapshot(
    case: &Case,
    jobs: &[KaiJob],
    claims: &KaiDra,
    integration: bool,
) -> Result<(Snapshot, HashMap<String, String>, Finished), String> {
    let mut nodes = Vec::new();
    for (name, n) in &case.nodes {
        let mut labels = BTreeMap::from([
            (NODE_AFFINITY_KEY.to_string(), name.clone()),
            (
                GPU_MEMORY_LABEL.to_string(),
                if n.gpu_memory > 0 {
                    n.gpu_memory
                } else {
                    DEFAULT_GPU_MEMORY
                }
                .to_string(),
            ),
        ]);
        // As KAI's `nodes_fake.BuildNode`: a node with a MIG strategy is a MIG node.
        labels.insert(
            "node-role.kubernetes.io/mig-enabled".to_string(),
            n.mig_strategy.is_some().to_string(),
        );
        if let Some(strategy) = &n.mig_strategy {
            labels.insert("nvidia.com/mig.strategy".to_string(), strategy.clone());
        }
        labels.extend(n.labels.clone());
        let mixed_mig = n.mig_strategy.as_deref() == Some("mixed");
        nodes.push(Node {
            name: name.clone(),
            labels,
            allocatable: Amounts {
                gpu: if mixed_mig { 0 } else { n.gpus * 1000 },
                cpu: ((if n.cpu_millis > 0.0 {
                    n.cpu_millis
                } else {
                    NODE_CPU_CORES
                }) * 1000.0)
                    .round() as i64,
                memory: (if n.cpu_memory > 0.0 {
                    n.cpu_memory
                } else {
                    NODE_MEMORY
                })
                .round() as i64,
            },
            extended: n.mig_instances.clone(),
            max_pods: Some(n.max_task_num.unwrap_or(110)),
            numa: n
                .numa
                .as_ref()
                .map(KaiNuma::topology)
                .transpose()?
                .map(Box::new),
            ..Node::default()
        });
    }
    let device_mib: HashMap<&str, i64> = nodes
        .iter()
        .map(|n| {
            (
                n.name.as_str(),
                n.labels[GPU_MEMORY_LABEL].parse::<i64>().unwrap_or(100),
            )
        })
        .collect();
    // jobs_fake.BuildJobsAndTasksMaps: jobs sorted by priority (stable, highest first); the
    // i-th of n was created n - i minutes ago unless JobAgeInMinutes says otherwise.
    let mut order: Vec<&KaiJob> = jobs.iter().collect();
    order.sort_by_key(|j| std::cmp::Reverse(j.priority));
    let n = order.len() as i64;
    let mut pods = Vec::new();
    let mut groups = Vec::new();
    let mut namespaces = HashMap::new();
    let mut finished = Vec::new();
    for (index, job) in order.iter().enumerate() {
        let minutes = if job.job_age_in_minutes != 0 {
            job.job_age_in_minutes
        } else {
            n - index as i64
        };
        let created = NOW - (minutes * 60) as u64;
        let namespace = job
            .namespace
            .clone()
            .filter(|s| !s.is_empty())
            .unwrap_or_else(|| "default".into());
        namespaces.insert(job.name.clone(), namespace.clone());
        let preemptible = match job.preemptibility.as_deref() {
            Some("Preemptible") => true,
            Some("NonPreemptible") => false,
            None | Some("") => job.priority < NON_PREEMPTIBLE_FROM,
            Some(other) => return Err(format!("job {}: preemptibility {other:?}", job.name)),
        };
        let mut succeeded = 0;
        for (t, task) in job.tasks.iter().enumerate() {
            let node = task.node_name.clone().filter(|s| !s.is_empty());
            let (bound, terminating) = match task.state.as_str() {
                "Pending" => (false, false),
                "Running" | "Bound" | "Binding" | "Allocated" => (true, false),
                "Releasing" | "StuckInReleasing" => (true, true),
                "Succeeded" | "Failed" => (false, false),
                other => {
                    return Err(format!(
                        "job {} task {t}: state {other} is not modelled",
                        job.name
                    ));
                }
            };
            if bound && node.is_none() {
                return Err(format!(
                    "job {} task {t}: {} without a node",
                    job.name, task.state
                ));
            }
            let fractional =
                job.required_gpus_per_task.fract() != 0.0 || job.required_gpu_memory > 0;
            let devices = job
                .required_multi_fraction_devices_per_task
                .unwrap_or(1)
                .max(1);
            let mut gpu = if job.required_gpu_memory > 0 {
                let mib = job.required_gpu_memory;
                let device = match &node {
                    Some(n) => device_mib.get(n.as_str()).copied(),
                    None => device_mib.values().copied().filter(|&d| d >= mib).min(),
                }
                .unwrap_or(DEFAULT_GPU_MEMORY);
                ((mib * 1000 + device - 1) / device).clamp(1, 1000) * i64::from(devices)
            } else if fractional {
                gpu_units(job.required_gpus_per_task) * i64::from(devices)
            } else {
                gpu_units(job.required_gpus_per_task)
            };
            if let Some(g) = task.required_gpus {
                gpu = g * 1000;
            }
            let (cpu, memory) = if job.is_best_effort_job {
                (0, 0)
            } else {
                (
                    ((if job.required_cpus_per_task != 0.0 {
                        job.required_cpus_per_task
                    } else {
                        1.0
                    }) * 1000.0)
                        .round() as i64,
                    (if job.required_memory_per_task != 0.0 {
                        job.required_memory_per_task
                    } else {
                        1e9
                    })
                    .round() as i64,
                )
            };
            let mut pod = Pod {
                namespace: namespace.clone(),
                name: format!("{}-{t}", job.name),
                group: Some(job.name.clone()),
                queue: Some(job.queue_name.clone()),
                priority_class: Some(class_name(job.priority)),
                request: Amounts { gpu, cpu, memory },
                extended: task.required_mig_instances.clone(),
                fractional,
                shared_devices: if fractional { devices } else { 0 },
                gpu_memory: (job.required_gpu_memory > 0).then_some(job.required_gpu_memory),
                node: node
                    .filter(|_| bound || matches!(task.state.as_str(), "Succeeded" | "Failed")),
                created,
                started: bound.then_some(NOW - STARTED_AGO),
                termination_grace_seconds: 30,
                terminating,
                // A stuck pod's grace period ended long ago; a releasing one's ends soon.
                legacy_mig: task.is_legacy_mig_task,
                deletion_deadline: match task.state.as_str() {
                    "StuckInReleasing" => Some(NOW - 600),
                    "Releasing" => Some(NOW + 30),
                    _ => None,
                },
                ..Pod::default()
            };
            if let Some(sub) = task.sub_group_name.as_ref().filter(|s| !s.is_empty()) {
                pod.labels.insert(SUBGROUP_LABEL.to_string(), sub.clone());
            }
            // What it asks of NUMA zones, read by ingest from the one container `tasks_fake`
            // gives a task (its CPU, memory and GPUs as requests) and its `QOSClass`.
            let gpus = if fractional { 0 } else { gpu / 1000 };
            pod.constraints.numa = numa_request(job.qos_class.as_deref(), cpu, memory, gpus);
            pod.numa_zones = task.numa_observed.as_ref().map(|zones| {
                zones
                    .iter()
                    .map(|(zone, amount)| numa::ZoneAmount {
                        zone: zone.clone(),
                        amount: amount
                            .iter()
                            .filter_map(|(k, q)| Some((k.clone(), numa::quantity(k, q)?)))
                            .collect(),
                    })
                    .collect()
            });
            // The devices a shared task holds, labelled as KAI's binder labels a pod: one
            // device by `runai-gpu-group`, several by one `runai-gpu-group/<group>` each.
            match task.gpu_groups.as_slice() {
                [] => {}
                [one] => {
                    pod.labels.insert(GPU_GROUP_LABEL.to_string(), one.clone());
                }
                many => {
                    for g in many {
                        pod.labels
                            .insert(format!("{GPU_GROUP_LABEL}/{g}"), g.clone());
                    }
                }
            }
            pod.labels.extend(task.pod_affinity_labels.clone());
            if let Some(priority) = task.priority {
                pod.labels
                    .insert("kai.scheduler/task-priority".into(), priority.to_string());
            }
            let term = |key: &Option<String>| -> Vec<PodAffinityTerm> {
                match key {
                    Some(key) if !task.pod_affinity_labels.is_empty() => vec![PodAffinityTerm {
                        selector: LabelSelector {
                            labels: task.pod_affinity_labels.clone(),
                            expressions: Vec::new(),
                        },
                        namespaces: Vec::new(),
                        topology_key: key.clone(),
                    }],
                    _ => Vec::new(),
                }
            };
            pod.constraints.claims = task
                .resource_claim_names
                .iter()
                .map(|name| dra::PodClaim {
                    name: name.clone(),
                    claim: Some(name.clone()),
                    template: false,
                })
                .chain(
                    task.resource_claim_templates
                        .iter()
                        .map(|(template, claim)| dra::PodClaim {
                            name: template.clone(),
                            claim: Some(claim.clone()),
                            template: true,
                        }),
                )
                .collect();
            pod.constraints.pod_affinity = term(&task.pod_affinity_topology_key);
            pod.constraints.pod_anti_affinity = term(&task.pod_anti_affinity_topology_key);
            if !task.node_affinity_names.is_empty() {
                pod.constraints.required_terms = vec![NodeSelectorTerm {
                    expressions: vec![Requirement {
                        key: NODE_AFFINITY_KEY.into(),
                        operator: Operator::In,
                        values: task.node_affinity_names.clone(),
                    }],
                    fields: Vec::new(),
                }];
            }
            match task.state.as_str() {
                "Succeeded" => {
                    succeeded += 1;
                    finished.push((pod, "Succeeded"));
                }
                "Failed" => finished.push((pod, "Failed")),
                _ => pods.push(pod),
            }
        }
        groups.push(PodGroup {
            namespace,
            name: job.name.clone(),
            min_member: job.min_available.unwrap_or(job.tasks.len() as u32),
            queue: Some(job.queue_name.clone()),
            priority_class: Some(class_name(job.priority)),
            created,
            preemptible: Some(preemptible),
            // The session's global default grace period: KAI's stale-gang unit test sets 60 s
            // (our default); the integration tests' fake session leaves it at 0.
            staleness_grace: job
                .per_job_staleness_grace_period
                .map(|s| s as i64)
                .or(integration.then_some(0)),
            stale_since: job.stale_duration.map(|s| NOW - s as u64),
            preemption_delay: job.preemption_delay.map(|s| s as u64),
            succeeded,
            sub_groups: job
                .sub_groups
                .iter()
                .map(|s| SubGroup {
                    name: s.name.clone(),
                    parent: s.parent.clone(),
                    min_member: s.min_member,
                    min_sub_group: s.min_sub_group,
                    topology: s.topology.as_ref().map(|t| t.topology.clone()),
                    topology_required: s.topology.as_ref().and_then(|t| t.required_level.clone()),
                    topology_preferred: s.topology.as_ref().and_then(|t| t.preferred_level.clone()),
                })
                .collect(),
            min_sub_group: job.min_sub_group,
            topology: job.topology.as_ref().map(|t| t.topology.clone()),
            topology_required: job.topology.as_ref().and_then(|t| t.required_level.clone()),
            topology_preferred: job
                .topology
                .as_ref()
                .and_then(|t| t.preferred_level.clone()),
            ..PodGroup::default()
        });
    }
    let mut snapshot = Snapshot {
        numa_ignore: Default::default(),
        topologies: case
            .topologies
            .iter()
            .map(|(name, levels)| Topology {
                name: name.clone(),
                levels: levels.clone(),
            })
            .collect(),
        priority_classes: Default::default(),
        nodes,
        pods,
        groups,
        dra: claims.objects(),
    };
    dra::count_gpus(&mut snapshot);
    Ok((snapshot, namespaces, finished))
}

/// A pod's state after the cycle, in KAI's words.
#[derive(Debug, Clone, PartialEq)]
struct Outcome {
    status: &'static str,
    node: Option<String>,
}

/// What the cycle did to each pod (`namespace/name` → outcome).
fn outcomes(snapshot: &Snapshot, decisions: &[Decision]) -> HashMap<String, Outcome> {
    let mut out: HashMap<String, Outcome> = snapshot
        .pods
        .iter()
        .map(|p| {
            let status = match (&p.node, p.terminating) {
                (None, _) => "Pending",
                (Some(_), true) if cycle::stuck_in_releasing(p, NOW) => "StuckInReleasing",
                (Some(_), true) => "Releasing",
                (Some(_), false) => "Running",
            };
            (
                p.key(),
                Outcome {
                    status,
                    node: p.node.clone(),
                },
            )
        })
        .collect();
    for d in decisions {
        match d {
            Decision::Bind { pod, node } => {
                out.insert(
                    pod.clone(),
                    Outcome {
                        status: "Binding",
                        node: Some(node.clone()),
                    },
                );
            }
            Decision::Nominate { pod, node } => {
                out.insert(
                    pod.clone(),
                    Outcome {
                        status: "Pipelined",
                        node: Some(node.clone()),
                    },
                );
            }
            Decision::Evict { pod, node, reason } => {
                let outcome = match reason {
                    // KAI's consolidation evicts the victim and pipelines it on its new node.
                    EvictReason::Consolidate { to_node, .. } => Outcome {
                        status: "Pipelined",
                        node: Some(to_node.clone()),
                    },
                    _ => Outcome {
                        status: "Releasing",
                        node: Some(node.clone()),
                    },
                };
                out.insert(pod.clone(), outcome);
            }
            Decision::Pending { .. } => {}
        }
    }
    out
}

/// Whether our outcome is the status KAI expects: KAI's Running, Allocated, Bound and Binding
/// all mean "on a node" (a pod bound this cycle, or one that was running and stays).
fn status_matches(expected: &str, got: &str) -> bool {
    let on_node = |s: &str| matches!(s, "Running" | "Allocated" | "Bound" | "Binding");
    expected == got || (on_node(expected) && on_node(got))
}

/// Every way our cycle's result differs from KAI's expectations.
/// One session: the snapshot of these tasks, the actions run, and each pod's outcome.
struct Round {
    /// The claims whose status the cycle changed.
    claims: Vec<dra::ClaimStatus>,
    /// Where the pods the cycle placed went on NUMA zones.
    numa_zones: HashMap<String, Vec<numa::ZoneAmount>>,
    /// What each node's NUMA zones have free after the cycle.
    numa_free: HashMap<String, Vec<(String, numa::Res)>>,
    snapshot: Snapshot,
    namespaces: HashMap<String, String>,
    finished: Finished,
    got: HashMap<String, Outcome>,
}

fn round(
    case: &Case,
    policy: &Policy,
    (jobs, claims): (&[KaiJob], &KaiDra),
    action: Actions,
    integration: bool,
) -> Result<Round, String> {
    let (snapshot, namespaces, finished) = snapshot(case, jobs, claims, integration)?;
    let result = cycle::run_actions(
        &Cycle {
            snapshot: &snapshot,
            policy,
            now: NOW,
            usage: None,
        },
        action,
    );
    let mut got = outcomes(&snapshot, &result.decisions);
    for (pod, status) in &finished {
        got.insert(
            pod.key(),
            Outcome {
                status,
                node: pod.node.clone(),
            },
        );
    }
    // A KAI task that stays pending keeps the NodeName the test gave it.
    for job in jobs {
        let namespace = &namespaces[&job.name];
        for (t, task) in job.tasks.iter().enumerate() {
            if let Some(o) = got.get_mut(&format!("{namespace}/{}-{t}", job.name))
                && o.status == "Pending"
            {
                o.node = task.node_name.clone().filter(|n| !n.is_empty());
            }
        }
    }
    Ok(Round {
        numa_zones: result.numa_zones.into_iter().collect(),
        numa_free: result.numa_free.into_iter().collect(),
        claims: result.claims,
        snapshot,
        namespaces,
        finished,
        got,
    })
}

/// `integration_tests_utils.runSchedulerOneRound`'s feedback: the tasks as the next round's
/// session sees them.
fn feed_back(jobs: &mut [KaiJob], r: &Round) {
    for job in jobs.iter_mut() {
        let namespace = &r.namespaces[&job.name];
        let delete = job.delete_job_in_test;
        for (t, task) in job.tasks.iter_mut().enumerate() {
            let Some(o) = r.got.get(&format!("{namespace}/{}-{t}", job.name)) else {
                continue;
            };
            let (state, node) = match o.status {
                "Releasing" if delete => ("Releasing", o.node.clone()),
                "Releasing" | "Pipelined" => ("Pending", None),
                "Binding" => ("Running", o.node.clone()),
                other => (other, o.node.clone()),
            };
            // A task placed anew holds a device KAI's binder names afresh.
            if state != task.state || node != task.node_name {
                task.gpu_groups.clear();
            }
            task.state = state.to_string();
            task.node_name = node;
        }
    }
}

/// Every way our cycle's result differs from KAI's expectations.
fn mismatches(case: &Case, action: Actions, integration: bool) -> Result<Vec<String>, String> {
    let policy = policy(case)?;
    if !integration {
        return compare(
            case,
            &round(case, &policy, (&case.jobs, &case.dra), action, false)?,
        );
    }
    let rounds = case.rounds.as_ref();
    let until = rounds.map_or(0, |r| r.rounds_until_match);
    let after = rounds.map_or(0, |r| r.rounds_after_match);
    let (until, after) = (
        if until == 0 { 2 } else { until },
        if after == 0 { 5 } else { after },
    );
    let mut jobs = case.jobs.clone();
    let mut claims = case.dra.clone();
    for _ in 0..until {
        let r = round(case, &policy, (&jobs, &claims), action, true)?;
        feed_back(&mut jobs, &r);
        claims.feed_back(&r.claims);
    }
    let nothing = Actions::parse("").expect("no actions");
    let wrong = compare(
        case,
        &round(case, &policy, (&jobs, &claims), nothing, true)?,
    )?;
    if !wrong.is_empty() {
        return Ok(prefixed(format!("after {until} rounds"), wrong));
    }
    for i in 1..=after {
        let r = round(case, &policy, (&jobs, &claims), action, true)?;
        let wrong = compare(case, &r)?;
        if !wrong.is_empty() {
            return Ok(prefixed(format!("in round {i} after the match"), wrong));
        }
        feed_back(&mut jobs, &r);
        claims.feed_back(&r.claims);
    }
    Ok(Vec::new())
}

fn prefixed(when: String, wrong: Vec<String>) -> Vec<String> {
    wrong.into_iter().map(|w| format!("{when}: {w}")).collect()
}

fn compare(case: &Case, r: &Round) -> Result<Vec<String>, String> {
    let Round {
        snapshot,
        namespaces,
        finished,
        got,
        ..
    } = r;
    let mut wrong = Vec::new();
    // Where a pod is on its node's NUMA zones after the cycle: where the cycle put it, or,
    // left where it was, its record; `None` where it holds no zone.
    let zones_of = |pod: &Pod| -> Option<(String, Vec<usize>, Vec<numa::ZoneAmount>)> {
        let o = &got[&pod.key()];
        let node = o.node.clone()?;
        let record = match o.status {
            "Binding" | "Pipelined" => r.numa_zones.get(&pod.key()).cloned(),
            "Running" | "Releasing" | "StuckInReleasing" => pod.numa_zones.clone(),
            _ => None,
        }?;
        let topology = snapshot
            .nodes
            .iter()
            .find(|n| n.name == node)?
            .numa
            .as_ref()?;
        let placement = topology.indexed(&record)?;
        Some((node, placement.iter().map(|(z, _)| *z).collect(), record))
    };
    let pods_of = |job: &str| -> Vec<&Pod> {
        snapshot
            .pods
            .iter()
            .chain(finished.iter().map(|(p, _)| p))
            .filter(|p| p.group.as_deref() == Some(job))
            .collect()
    };
    let mut check = |what: String, pods: Vec<&Pod>, e: &Expected| {
        // KAI's `GpuRequirement.GPUs()` counts no GPUs for a gpu-memory request, nor those of
        // DRA claims (kept apart, `draGpus`).
        let gpus: i64 = pods
            .iter()
            .filter(|p| p.gpu_memory.is_none())
            .map(|p| p.request.gpu - i64::from(p.dra_gpus) * 1000)
            .sum();
        if gpus != gpu_units(e.gpus_required) {
            wrong.push(format!(
                "{what}: KAI's pods ask {} GPUs, the transcription {}",
                e.gpus_required,
                gpus as f64 / 1000.0
            ));
        }
        let cpu: i64 = pods.iter().map(|p| p.request.cpu).sum();
        if e.milli_cpu_required != 0.0 && cpu != e.milli_cpu_required.round() as i64 {
            wrong.push(format!(
                "{what}: KAI's pods ask {} millicores, the transcription {cpu}",
                e.milli_cpu_required
            ));
        }
        let memory: i64 = pods.iter().map(|p| p.request.memory).sum();
        if e.memory_required != 0.0 && memory != e.memory_required.round() as i64 {
            wrong.push(format!(
                "{what}: KAI's pods ask {} bytes, the transcription {memory}",
                e.memory_required
            ));
        }
        if let Some(expected) = &e.numa_zones {
            let mut expected = expected.clone();
            expected.sort_unstable();
            for pod in &pods {
                let mut zones = zones_of(pod).map(|(_, z, _)| z).unwrap_or_default();
                zones.sort_unstable();
                if zones != expected {
                    wrong.push(format!(
                        "{}: KAI on NUMA zones {expected:?}, ours {zones:?}",
                        pod.name
                    ));
                }
            }
        }
        for pod in pods {
            let o = &got[&pod.key()];
            if !status_matches(&e.status, o.status) {
                wrong.push(format!(
                    "{}: KAI {}{}, ours {}{}",
                    pod.name,
                    e.status,
                    e.node_name
                        .as_ref()
                        .filter(|n| !n.is_empty())
                        .map(|n| format!(" on {n}"))
                        .unwrap_or_default(),
                    o.status,
                    o.node
                        .as_ref()
                        .map(|n| format!(" on {n}"))
                        .unwrap_or_default()
                ));
            } else if let Some(n) = e.node_name.as_ref().filter(|n| !n.is_empty())
                && o.node.as_ref() != Some(n)
            {
                wrong.push(format!(
                    "{}: KAI {} on {n}, ours {} on {}",
                    pod.name,
                    e.status,
                    o.status,
                    o.node.as_deref().unwrap_or("no node")
                ));
            }
        }
    };
    for (job, e) in &case.job_expected {
        if !namespaces.contains_key(job) {
            return Err(format!("expected job {job} is not in the case"));
        }
        check(format!("job {job}"), pods_of(job), e);
    }
    // KAI checks only the keys that name a task (`{job}-{index}`) and skips the others.
    for (task, e) in &case.task_expected {
        if let Some(pod) = snapshot
            .pods
            .iter()
            .chain(finished.iter().map(|(p, _)| p))
            .find(|p| &p.name == task)
        {
            check(format!("task {task}"), vec![pod], e);
        }
    }
    // Where a sub-group's pods are: by node, and by the value of a label of their nodes.
    let placed = |sub_group: &str, label: &str| {
        let mut nodes = BTreeSet::new();
        let mut domains: BTreeMap<String, usize> = BTreeMap::new();
        for pod in snapshot
            .pods
            .iter()
            .filter(|p| p.labels.get(SUBGROUP_LABEL).map(String::as_str) == Some(sub_group))
        {
            let Some(node) = got[&pod.key()].node.clone() else {
                continue;
            };
            let value = snapshot
                .nodes
                .iter()
                .find(|n| n.name == node)
                .and_then(|n| n.labels.get(label))
                .cloned()
                .unwrap_or_default();
            *domains.entry(value).or_default() += 1;
            nodes.insert(node);
        }
        (domains, nodes)
    };
    for e in &case.sub_group_domains {
        let (domains, nodes) = placed(&e.sub_group, &e.label);
        if domains != e.domains {
            wrong.push(format!(
                "sub-group {} by {}: KAI {:?}, ours {domains:?}",
                e.sub_group, e.label, e.domains
            ));
        }
        if let Some(expected) = e.nodes.as_ref().filter(|n| **n != nodes) {
            wrong.push(format!(
                "sub-group {} on nodes: KAI {expected:?}, ours {nodes:?}",
                e.sub_group
            ));
        }
    }
    for e in &case.sub_groups_apart {
        let each: Vec<BTreeMap<String, usize>> = e
            .sub_groups
            .iter()
            .map(|sg| placed(sg, &e.label).0)
            .collect();
        let singles: BTreeSet<String> = each
            .iter()
            .filter(|d| d.len() == 1)
            .flat_map(|d| d.keys().cloned())
            .collect();
        if singles.len() != e.sub_groups.len() || singles != e.domains {
            wrong.push(format!(
                "sub-groups {:?} by {}: KAI one each of {:?}, ours {each:?}",
                e.sub_groups, e.label, e.domains
            ));
        }
    }
    for (node, e) in &case.node_expected {
        let n = snapshot
            .nodes
            .iter()
            .find(|n| &n.name == node)
            .ok_or_else(|| format!("expected node {node} is not in the case"))?;
        // KAI's node accounting: releasing = what releasing pods hold less what is pipelined
        // onto them; idle = allocatable less every pod that holds or is releasing. A shared
        // device whose pods stay where they are (their GPU groups known) counts whole, by
        // device (`node_info/gpu_sharing_node_info.go: addSharedGPUTaskResourcesPerPodGroup`):
        // releasing when every pod on it is releasing, else held.
        let (mut held, mut releasing, mut pipelined) = (0, 0, 0);
        let mut devices: BTreeMap<&str, bool> = BTreeMap::new();
        for p in &snapshot.pods {
            let o = &got[&p.key()];
            let was_here = p.node.as_deref() == Some(node.as_str());
            let is_here = o.node.as_deref() == Some(node.as_str());
            let groups = p.gpu_groups();
            if was_here
                && is_here
                && !groups.is_empty()
                && let "Releasing" | "Running" | "Binding" = o.status
            {
                for g in groups {
                    *devices.entry(g).or_insert(true) &= o.status == "Releasing";
                }
                continue;
            }
            match o.status {
                "Releasing" if is_here => releasing += p.request.gpu,
                "Pipelined" if is_here => pipelined += p.request.gpu,
                "Pipelined" if was_here => releasing += p.request.gpu,
                "Running" | "Binding" if is_here => held += p.request.gpu,
                _ => {}
            }
        }
        for all_releasing in devices.into_values() {
            match all_releasing {
                true => releasing += 1000,
                false => held += 1000,
            }
        }
        // KAI's zone ledger after the session (`Zones[i].Available`): the cycle's, as it ends.
        if !e.numa_zones_available.is_empty() {
            let free: Vec<numa::Res> = r
                .numa_free
                .get(node)
                .ok_or_else(|| format!("node {node} expects NUMA zones it does not have"))?
                .iter()
                .map(|(_, res)| res.clone())
                .collect();
            for (z, amounts) in &e.numa_zones_available {
                for (k, q) in amounts {
                    let want = numa::quantity(k, q);
                    let have = free
                        .get(*z)
                        .map(|f| f.get(&numa::normalize(k)).copied().unwrap_or(0));
                    if want != have {
                        wrong.push(format!(
                            "node {node} NUMA zone {z}: KAI {k} {q} free, ours {have:?} (in \
                             millicores for cpu)"
                        ));
                    }
                }
            }
        }
        let idle = n.allocatable.gpu - held - releasing;
        let releasing = releasing - pipelined;
        if idle != gpu_units(e.idle_gpus) || releasing != gpu_units(e.releasing_gpus) {
            wrong.push(format!(
                "node {node}: KAI idle {} releasing {} GPUs, ours idle {} releasing {}",
                e.idle_gpus,
                e.releasing_gpus,
                idle as f64 / 1000.0,
                releasing as f64 / 1000.0
            ));
        }
    }
    Ok(wrong)
}

fn case_files() -> Vec<PathBuf> {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/kai_actions");
    let mut files: Vec<PathBuf> = std::fs::read_dir(&dir)
        .unwrap_or_else(|e| panic!("{}: {e}", dir.display()))
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.extension().is_some_and(|x| x == "yaml"))
        .collect();
    files.sort();
    files
}

#[derive(Default)]
struct Tally {
    transcribed: usize,
    passing: usize,
    known: usize,
    cannot: usize,
}

#[test]
fn our_cycle_does_what_kais_action_tests_expect() {
    let only = std::env::var("KAI_CASE").ok();
    let mut failures = Vec::new();
    let mut tallies: BTreeMap<String, Tally> = BTreeMap::new();
    for path in case_files() {
        let text = std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{path:?}: {e}"));
        let file: CaseFile =
            serde_saphyr::from_str(&text).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
        let action = Actions::parse(&file.action)
            .unwrap_or_else(|e| panic!("{}: action: {e}", path.display()));
        let tally = tallies.entry(file.source.clone()).or_default();
        for case in &file.cases {
            let cite = format!(
                "{} (line {}) {} #{} \"{}\"",
                file.source, case.line, case.test, case.number, case.name
            );
            if only.as_deref().is_some_and(|o| !cite.contains(o)) {
                continue;
            }
            tally.transcribed += 1;
            if let Some(why) = &case.cannot {
                assert!(
                    case.jobs.is_empty() && !why.trim().is_empty(),
                    "{cite}: a case that cannot be expressed says why and has no jobs"
                );
                tally.cannot += 1;
                continue;
            }
            assert!(
                !case.jobs.is_empty()
                    && (!case.job_expected.is_empty()
                        || !case.task_expected.is_empty()
                        || !case.node_expected.is_empty()),
                "{cite}: a case has jobs and expectations, or says why it cannot"
            );
            let result = mismatches(case, action, file.integration);
            match (result, &case.known_difference) {
                (Ok(wrong), None) if wrong.is_empty() => tally.passing += 1,
                (Ok(wrong), Some(_)) if wrong.is_empty() => failures.push(format!(
                    "{cite}\n    now agrees with KAI: remove its known-difference"
                )),
                (Ok(_), Some(_)) => tally.known += 1,
                (Ok(wrong), None) => failures.push(format!("{cite}\n    {}", wrong.join("\n    "))),
                (Err(e), _) => failures.push(format!("{cite}\n    cannot run: {e}")),
            }
        }
    }
    let mut table = String::from(
        "KAI test file: transcribed / passing / known differences / not expressible\n",
    );
    for (source, t) in &tallies {
        table.push_str(&format!(
            "  {source}: {} / {} / {} / {}\n",
            t.transcribed, t.passing, t.known, t.cannot
        ));
    }
    println!("{table}");
    assert!(
        tallies.values().map(|t| t.transcribed).sum::<usize>() > 0,
        "no cases found"
    );
    assert!(
        failures.is_empty(),
        "{} cases differ from KAI's expectations:\n{}\n{table}",
        failures.len(),
        failures.join("\n")
    );
}
