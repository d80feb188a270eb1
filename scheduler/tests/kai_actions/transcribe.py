#!/usr/bin/env python3
"""Transcribes KAI Scheduler's action tests (Go struct literals) into the case files of this folder.

Usage (from the repository root):

    python3 scheduler/tests/kai_actions/transcribe.py KAI_CHECKOUT [KAI_TEST_FILE ...]

KAI_CHECKOUT is a work tree of kai-scheduler/KAI-Scheduler (or a folder holding its `pkg/`);
each KAI_TEST_FILE is a path under it such as `pkg/scheduler/actions/reclaim/reclaim_test.go`
(default: every file in FILES below). For each, every `test_utils.TestTopologyBasic{...}`
literal is read with a small Go expression parser and written as one case of
`<file stem>.yaml` beside this script, in the same field names as KAI's structs. What the
harness cannot express (DRA objects, NUMA, topologies, sub-groups with their own topology,
scheduler configuration mocks, ...) becomes a case with `cannot:` and the reason. The analysis fields a person adds to
a case (`known-difference`, `note`) are kept when the file is written again (needs PyYAML).

The numbers are KAI's, copied as data; no Go sentence or comment is copied.
"""

import json
import os
import re
import sys

HERE = os.path.dirname(os.path.abspath(__file__))

# KAI test file -> the one action its test function runs.
FILES = {
    "pkg/scheduler/actions/reclaim/reclaim_test.go": "reclaim",
    "pkg/scheduler/actions/reclaim/reclaimDepartments_test.go": "reclaim",
    "pkg/scheduler/actions/reclaim/reclaimGang_test.go": "reclaim",
    "pkg/scheduler/actions/reclaim/reclaim_elastic_test.go": "reclaim",
    "pkg/scheduler/actions/preempt/preempt_test.go": "preempt",
    "pkg/scheduler/actions/preempt/preemptGang_test.go": "preempt",
    "pkg/scheduler/actions/preempt/preempt_elastic_test.go": "preempt",
    "pkg/scheduler/actions/allocate/allocate_test.go": "allocate",
    "pkg/scheduler/actions/allocate/allocateGang_test.go": "allocate",
    "pkg/scheduler/actions/allocate/allocateElastic_test.go": "allocate",
    "pkg/scheduler/actions/consolidation/consolidation_test.go": "consolidation",
    "pkg/scheduler/actions/allocate/allocateFractionalGpu_test.go": "allocate",
    "pkg/scheduler/actions/allocate/allocateGpuMemory_test.go": "allocate",
    "pkg/scheduler/actions/reclaim/reclaimGpuMemory_test.go": "reclaim",
    "pkg/scheduler/actions/preempt/preemptGpuMemory_test.go": "preempt",
    "pkg/scheduler/actions/consolidation/consolidationGpuMemory_test.go": "consolidation",
    "pkg/scheduler/actions/allocate/allocateMIG_test.go": "allocate",
    "pkg/scheduler/actions/reclaim/reclaimMIG_test.go": "reclaim",
    "pkg/scheduler/actions/preempt/preemptMIG_test.go": "preempt",
    "pkg/scheduler/actions/allocate/allocateTopology_test.go": "allocate",
    "pkg/scheduler/actions/allocate/allocate_subgroups_test.go": "allocate",
    "pkg/scheduler/actions/reclaim/reclaim_sub_group_test.go": "reclaim",
    "pkg/scheduler/actions/preempt/preempt_subgroups_test.go": "preempt",
    "pkg/scheduler/actions/consolidation/consolidation_subgroups_test.go": "consolidation",
    "pkg/scheduler/actions/allocate/allocate_stuck_in_releasing_test.go": "allocate",
    "pkg/scheduler/actions/allocate/interpod_affinity_test.go": "allocate",
    "pkg/scheduler/actions/allocate/allocate_multi_topology_test.go": "allocate",
    "pkg/scheduler/actions/allocate/allocate_numa_test.go": "allocate",
    "pkg/scheduler/actions/reclaim/reclaim_numa_test.go": "reclaim",
    "pkg/scheduler/actions/preempt/preempt_numa_test.go": "preempt",
    "pkg/scheduler/actions/preempt/preempt_gang_full_drain_test.go": "preempt",
    "pkg/scheduler/actions/reclaim/reclaim_anchor_victim_test.go": "reclaim",
    "pkg/scheduler/actions/stalegangeviction/stalegangeviction_test.go": "stalegangeviction",
}

# KAI's integration tests run every action, several rounds (integration_tests_utils.RunTests).
ALL_ACTIONS = "allocate, consolidation, reclaim, preempt, stalegangeviction"
for _name in ["reclaim/reclaim_test", "reclaim/reclaimFractional_test", "reclaim/reclaimMIG_test",
              "reclaim/reclaim_dra_overflow_test", "reclaim/reclaim_gpu_dra_test",
              "preempt/preempt_test", "preempt/preemptGang_test", "preempt/preemptFractional_test",
              "preempt/preemptMIG_test", "preempt/allocate_preempt_test",
              "allocate/allocate_test", "allocate/allocateFractionalGpu_test",
              "allocate/allocateMIG_test", "allocate/allocate_topology_test",
              "allocate/allocate_dra_test", "allocate/allocate_shared_dra_test",
              "consolidation/consolidation_test", "consolidation/consolidationGang_test",
              "consolidation/consolidationFractional_test",
              "consolidation_and_reclaim/consolidation_and_reclaim_test",
              "deletion_tests/deletion_test", "stalegangeviction/stalegangeviction_test"]:
    FILES[f"pkg/scheduler/actions/integration_tests/{_name}.go"] = ALL_ACTIONS
FILES["pkg/scheduler/actions/integration_tests/numa/numa_test.go"] = \
    "allocate, consolidation, reclaim, preempt"

# ---------------------------------------------------------------------------------------------
# Tokens

TOKEN = re.compile(
    r"""
    (?P<ws>\s+)
  | (?P<comment>//[^\n]*|/\*.*?\*/)
  | (?P<raw>`[^`]*`)
  | (?P<str>"(?:\\.|[^"\\])*")
  | (?P<rune>'(?:\\.|[^'\\])*')
  | (?P<num>\d+\.\d*(?:[eE][-+]?\d+)?|\.\d+(?:[eE][-+]?\d+)?|\d+[eE][-+]?\d+|0[xX][0-9a-fA-F]+|\d+)
  | (?P<ident>[A-Za-z_][A-Za-z0-9_]*)
  | (?P<op>:=|==|!=|<=|>=|&&|\|\||<<|>>|\+\+|--|\.\.\.|[-+*/%&|^<>=!:;,.(){}\[\]])
    """,
    re.S | re.X,
)


def tokens(text):
    out = []
    pos = 0
    while pos < len(text):
        m = TOKEN.match(text, pos)
        if not m:
            raise ValueError(f"cannot read Go at {text[pos:pos + 40]!r}")
        kind = m.lastgroup
        if kind not in ("ws", "comment"):
            out.append((kind, m.group(), m.start()))
        pos = m.end()
    return out


# ---------------------------------------------------------------------------------------------
# Values

class Raw(str):
    """Go text the parser keeps but cannot evaluate."""


class Call:
    def __init__(self, name, args):
        self.name, self.args = name, args

    def __repr__(self):
        return f"{self.name}({', '.join(map(repr, self.args))})"


class Lit(dict):
    """A keyed composite literal; `type` is the Go type written before it (or None)."""

    def __init__(self, typ):
        super().__init__()
        self.type = typ


CONSTANTS = {
    "constants.PriorityInferenceNumber": 125,
    "constants.PriorityBuildNumber": 100,
    "constants.PriorityInteractivePreemptibleNumber": 75,
    "constants.PriorityTrainNumber": 50,
    # node_info.TopologyManagerPolicy / Scope and the pods' QoS classes, as the kubelet and the
    # API server spell them.
    "node_info.TopologyPolicyNone": "none",
    "node_info.TopologyPolicyBestEffort": "best-effort",
    "node_info.TopologyPolicyRestricted": "restricted",
    "node_info.TopologyPolicySingleNUMANode": "single-numa-node",
    "node_info.TopologyScopeContainer": "container",
    "node_info.TopologyScopePod": "pod",
    "v1.PodQOSGuaranteed": "Guaranteed",
    "v1.PodQOSBurstable": "Burstable",
    "v1.PodQOSBestEffort": "BestEffort",
    "v1.ResourceCPU": "cpu",
    "v1.ResourceMemory": "memory",
    "time.Nanosecond": 1e-9,
    "time.Millisecond": 0.001,
    "time.Second": 1,
    "time.Minute": 60,
    "time.Hour": 3600,
    "true": True,
    "false": False,
    "nil": None,
    "common_info.NoMaxAllowedResource": -1,
    "commonconstants.DefaultQueuePriority": 100,
    "constants.DefaultQueuePriority": 100,
    "enginev2alpha2.Preemptible": "Preemptible",
    "enginev2alpha2.NonPreemptible": "NonPreemptible",
    "v2alpha2.Preemptible": "Preemptible",
    "v2alpha2.NonPreemptible": "NonPreemptible",
    "node_info.MigStrategyMixed": "mixed",
    "node_info.MigStrategySingle": "single",
    "constants.GPUResource": "gpu",
    "constants.CPUResource": "cpu",
    "constants.SpreadStrategy": "spread",
    "constants.BinpackStrategy": "binpack",
    "tasks_fake.NodeAffinityKey": "kai.scheduler/type",
    "commonconstants.DefaultQueueLabel": "kai.scheduler/queue",
    "resourceapi.ResourceClaimReservedForMaxSize": 256,
    "math.MaxInt64": 9223372036854775807,
}


class Parser:
    def __init__(self, toks, text):
        self.t, self.i, self.text = toks, 0, text

    def peek(self, k=0):
        j = self.i + k
        return self.t[j] if j < len(self.t) else ("eof", "", len(self.text))

    def next(self):
        tok = self.peek()
        self.i += 1
        return tok

    def expect(self, value):
        tok = self.next()
        if tok[1] != value:
            raise ValueError(f"expected {value!r}, found {tok[1]!r} at {self.line(tok[2])}")
        return tok

    def line(self, pos):
        return self.text.count("\n", 0, pos) + 1

    def skip_balanced(self):
        """Skips from an opening bracket to its match; returns the source text."""
        start = self.peek()[2]
        depth = 0
        while True:
            kind, v, pos = self.next()
            if v in "({[":
                depth += 1
            elif v in ")}]":
                depth -= 1
                if depth == 0:
                    return self.text[start:pos + 1]
            if kind == "eof":
                raise ValueError("unbalanced")

    def type_expr(self):
        """Reads a type: []T, *T, map[K]V, pkg.T; returns its text."""
        parts = []
        while True:
            kind, v, _ = self.peek()
            if v == "[":
                self.next()
                if self.peek()[1] == "]":
                    self.next()
                    parts.append("[]")
                else:
                    inner = self.expr()
                    self.expect("]")
                    parts.append(f"[{inner}]")
            elif v == "*":
                self.next()
                parts.append("*")
            elif v == "map":
                self.next()
                self.expect("[")
                key = self.type_expr()
                self.expect("]")
                parts.append(f"map[{key}]")
            elif kind == "ident":
                self.next()
                name = v
                while self.peek()[1] == "." and self.peek(1)[0] == "ident":
                    self.next()
                    name += "." + self.next()[1]
                parts.append(name)
                return "".join(parts)
            else:
                return "".join(parts)

    def expr(self):
        left = self.unary()
        while self.peek()[1] in ("+", "-", "*", "/", "<<", "|", "&&", "||", "==", "!="):
            op = self.next()[1]
            right = self.unary()
            left = binop(op, left, right)
        return left

    def unary(self):
        v = self.peek()[1]
        if v == "&":
            self.next()
            return self.unary()
        if v == "-":
            self.next()
            x = self.unary()
            return -x if isinstance(x, (int, float)) else Raw(f"-{x}")
        if v == "!":
            self.next()
            x = self.unary()
            return (not x) if isinstance(x, bool) else Raw(f"!{x}")
        return self.primary()

    def primary(self):
        kind, v, pos = self.peek()
        if v == "{":
            return self.composite(None)
        if v == "(":
            self.next()
            x = self.expr()
            self.expect(")")
            return x
        if kind == "num":
            self.next()
            return int(v, 0) if re.fullmatch(r"\d+|0[xX][0-9a-fA-F]+", v) else float(v)
        if kind == "str":
            self.next()
            return json.loads(v)
        if kind == "raw":
            self.next()
            return v[1:-1]
        if v == "func":
            start = pos
            self.next()
            self.skip_balanced()  # parameters
            while self.peek()[1] != "{":
                self.next()
            self.skip_balanced()  # body
            if self.peek()[1] == "(":
                self.skip_balanced()
            return Raw(self.text[start:self.peek()[2]].strip().rstrip(","))
        if v in ("[", "*", "map"):
            typ = self.type_expr()
            if self.peek()[1] == "{":
                return self.composite(typ)
            return Raw(typ)
        if kind == "ident":
            name = self.type_expr()
            while True:
                nv = self.peek()[1]
                if nv == "{":
                    return self.composite(name)
                if nv == "(":
                    self.next()
                    args = []
                    while self.peek()[1] != ")":
                        args.append(self.expr())
                        if self.peek()[1] == ",":
                            self.next()
                    self.expect(")")
                    result = call(name, args)
                    if self.peek()[1] == "." :
                        self.next()
                        name = f"{result!r}.{self.next()[1]}"
                        continue
                    return result
                if name in CONSTANTS:
                    return CONSTANTS[name]
                if name.startswith("pod_status."):
                    return name.split(".", 1)[1]
                return Raw(name)
        raise ValueError(f"unexpected {v!r} at line {self.line(pos)}")

    def composite(self, typ):
        self.expect("{")
        keyed, items = None, []
        while self.peek()[1] != "}":
            first = self.expr()
            if self.peek()[1] == ":":
                self.next()
                value = self.expr()
                keyed = True
                items.append((first, value))
            else:
                keyed = False
                items.append(first)
            if self.peek()[1] == ",":
                self.next()
        self.expect("}")
        if keyed:
            lit = Lit(typ)
            for k, v in items:
                lit[str(k)] = v
            return lit
        if typ is None or typ.startswith("[]"):
            return list(items)
        lit = Lit(typ)  # an empty struct literal
        return lit


def binop(op, a, b):
    if op == "+" and isinstance(a, str) and isinstance(b, str) and not isinstance(a, Raw) \
            and not isinstance(b, Raw):
        return a + b
    if isinstance(a, (int, float)) and isinstance(b, (int, float)) and not isinstance(a, bool):
        if op == "+":
            return a + b
        if op == "-":
            return a - b
        if op == "*":
            return a * b
        if op == "/":
            return a / b
        if op == "<<":
            return a << b
    return Raw(f"{a} {op} {b}")


def call(name, args):
    if name in ("ptr.To", "pointer.Int", "pointer.Int32", "pointer.Int64", "pointer.Float64",
                "pointer.String", "pointer.Bool", "pointer.Duration", "int", "int32", "int64", "uint64", "float64",
                "test_utils.CreateFloat64Pointer", "ptr.To[int]", "ptr.To[int64]",
                "ptr.To[uint64]", "ptr.To[float64]", "v1.ResourceName", "resource_info.ResourceName"):
        return args[0] if args else None
    if name == "buildEvenlyDistributedTopologyNodes":
        return evenly_distributed_nodes(*args)
    if name == "dra_fake.RandomReservedForReferences":
        # n consumers named pod-<i> (their UIDs are random; only their number is read).
        return [{"Resource": "pods", "Name": f"pod-{i}"} for i in range(args[0])]
    if name == "allocatedDRAClaimStatus":
        # reclaim_dra_overflow_test.go's helper: devices 0 and 1 of node0 for victim-claim,
        # reserved for the named pod.
        return {"Allocation": {"Devices": {"Results": [
                    {"Request": "victim-claim", "Driver": "nvidia.com/gpu", "Pool": "node0",
                     "Device": str(d)} for d in (0, 1)]}},
                "ReservedFor": [{"Resource": "pods", "Name": args[0]}]}
    if name == "nodes_fake.NewNumaZone":
        return {"Name": args[0], "Allocatable": args[1], "Available": args[1]}
    if name == "nodes_fake.NewNumaZoneWithAllocatable":
        return {"Name": args[0], "Allocatable": args[1], "Available": args[2]}
    if name == "nodes_fake.NewNumaTopology":
        return {"Policy": args[0], "Scope": args[1], "Zones": list(args[2:])}
    if name == "nodes_fake.NumaObservedPlacementAnnotation":
        return {"__numa_observed__": args[0]}
    if "." not in name and name in LOCAL_FUNCS:
        return LOCAL_FUNCS[name](args)
    if name == "jobs_fake.DefaultSubGroup":
        return {"__default_sub_group__": args[0]}
    nil = lambda a: None if a == "nil" else a  # noqa: E731 (Go's nil arrives as a bare name)
    if name == "subgroup_info.NewSubGroupSet":
        return SubGroupSet(args[0], nil(args[1]) if len(args) > 1 else None)
    if name == "subgroup_info.NewPodSet":
        return PodSet(args[0], args[1], nil(args[2]) if len(args) > 2 else None)
    return Call(name, args)


def evenly_distributed_nodes(zones, spines_per_zone, racks_per_spine, nodes_per_rack, gpus):
    """The nodes of allocateTopology_test.go's `buildEvenlyDistributedTopologyNodes`: zones of
    spines of racks of nodes, numbered from 1 across the cluster (nodes from 0)."""
    nodes, n = {}, 0
    for z in range(1, zones + 1):
        for sp in range(1, spines_per_zone + 1):
            spine = sp + (z - 1) * spines_per_zone
            for r in range(1, racks_per_spine + 1):
                rack = r + (sp - 1) * racks_per_spine + (z - 1) * spines_per_zone * racks_per_spine
                for _ in range(nodes_per_rack):
                    nodes[f"node{n}"] = {"GPUs": gpus, "Labels": {
                        "k8s.io/zone": f"zone{z}", "k8s.io/spine": f"spine{spine}",
                        "k8s.io/rack": f"rack{rack}"}}
                    n += 1
    return nodes


class SubGroupSet:
    """KAI's `subgroup_info.SubGroupSet`, as a test builds it."""
    def __init__(self, name, topology):
        self.name, self.topology, self.min_sub_group = name, topology, None
        self.children = []


class PodSet:
    """KAI's `subgroup_info.PodSet`, as a test builds it."""
    def __init__(self, name, min_available, topology):
        self.name, self.topology, self.min_available = name, topology, min_available


def evaluate_builder(raw):
    """Runs a test's `func() *subgroup_info.SubGroupSet { ... }()` body: assignments of
    `subgroup_info.NewSubGroupSet` / `NewPodSet`, `AddPodSet`, `AddSubGroup`, `SetMinSubGroup`
    and `return`; anything else is a case the converter cannot read."""
    return run_builder(raw[raw.index("{") + 1:raw.rindex("}")], returns=True)


def run_builder(body, returns):
    """The statements of a sub-group builder: the value it returns, or (returns=False: a
    function's statements before its `return test_utils.TestTopologyBasic{`) the variables it
    leaves set."""
    env = {}

    def value(text):
        text = text.strip()
        if re.fullmatch(r"&?\w+", text) and text.lstrip("&") in env:
            return env[text.lstrip("&")]
        if re.fullmatch(r"\w+", text) and text in env:
            return env[text]
        return Parser(tokens(text), text).expr()

    # One statement per line, a statement's arguments possibly spread over several.
    statements, pending = [], ""
    for line in body.splitlines():
        line = line.split("//")[0].strip()
        if not line:
            continue
        pending = f"{pending} {line}".strip()
        depth = sum(pending.count(c) for c in "({[") - sum(pending.count(c) for c in ")}]")
        if depth <= 0:
            statements.append(pending)
            pending = ""
    if pending:
        raise Cannot(f"a sub-group builder statement left open: {pending[:70]}")
    for line in statements:
        line = re.sub(r",\s*([)}\]])", r"\1", line)
        m = re.fullmatch(r"(\w+)\s*:=\s*(.+)", line)
        if m:
            env[m.group(1)] = value(m.group(2))
            continue
        m = re.fullmatch(r"(\w+)\.(AddPodSet|AddSubGroup|SetMinSubGroup)\((.*)\)", line)
        if m and isinstance(env.get(m.group(1)), SubGroupSet):
            target, arg = env[m.group(1)], value(m.group(3))
            if m.group(2) == "SetMinSubGroup":
                target.min_sub_group = arg
            else:
                target.children.append(arg)
            continue
        m = re.fullmatch(r"return (\w+)", line)
        if m and isinstance(env.get(m.group(1)), SubGroupSet):
            return env[m.group(1)]
        raise Cannot(f"a sub-group builder line the converter does not read: {line[:70]}")
    if not returns:
        return env
    raise Cannot("a sub-group builder without a return")


def builder_variables(text, line):
    """The sub-group trees a builder function sets up before the literal it returns (which
    starts at `line`), by variable name."""
    start = max(m.end() for m in re.finditer(r"^func [^\n]*\{\n", text, re.M)
                if text.count("\n", 0, m.start()) + 1 < line)
    end = text.rindex("return", 0, sum(len(x) for x in text.splitlines(True)[:line]))
    return run_builder(text[start:end], returns=False)


def bind_variables(value, env):
    """The literal with each bare variable name the builder set replaced by its value."""
    if isinstance(value, Raw) and str(value) in env:
        return env[str(value)]
    if isinstance(value, dict):
        for k in list(value):
            item = bind_variables(value.pop(k), env)
            # A map key written as a variable (`{zoneID: cpu("3")}`) is read as its name.
            value[env[k] if isinstance(env.get(k), str) else k] = item
    elif isinstance(value, list):
        value[:] = [bind_variables(v, env) for v in value]
    return value


def constraint(info, what):
    """A `topology_info.TopologyConstraintInfo` as the case's `Topology` (None: no constraint)."""
    if info is None:
        return None
    if not isinstance(info, dict):
        raise Cannot(f"{what} has a topology constraint the converter does not read: {info!r}")
    check_fields(info, {"Topology", "RequiredLevel", "PreferredLevel"}, what)
    return plain(dict(info), what)


def sub_groups_of(root, job_name):
    """A built tree as our PodGroup's `spec.subGroups` (parents named) and `minSubGroup`."""
    out = []

    def walk(node, parent):
        for child in node.children:
            entry = {"Name": child.name}
            if parent:
                entry["Parent"] = parent
            topo = constraint(child.topology, f"job {job_name} sub-group {child.name}")
            if topo:
                entry["Topology"] = topo
            if isinstance(child, PodSet):
                entry["MinMember"] = child.min_available
            elif isinstance(child, SubGroupSet):
                if child.min_sub_group is not None:
                    entry["MinSubGroup"] = child.min_sub_group
                out.append(entry)
                walk(child, child.name)
                continue
            else:
                raise Cannot(f"job {job_name}: a sub-group member the converter does not read")
            out.append(entry)

    walk(root, None)
    return out, root.min_sub_group


# ---------------------------------------------------------------------------------------------
# From KAI's structs to case data

INTEGRATION = False

JOB_FIELDS = {"DeleteJobInTest", "Name", "Namespace", "QueueName", "Priority", "Preemptibility", "RequiredGPUsPerTask",
              "RequiredCPUsPerTask", "RequiredMemoryPerTask", "RequiredGpuMemory",
              "RequiredMultiFractionDevicesPerTask", "Tasks", "JobAgeInMinutes",
              "IsBestEffortJob", "PreemptionDelay", "StaleDuration", "PerJobStalenessGracePeriod",
              "MinAvailable", "SubGroups", "MinSubGroup", "Topology", "QOSClass"}
TASK_FIELDS = {"Name", "State", "NodeName", "GPUGroups", "NodeAffinityNames", "RequiredGPUs",
               "RequiredMigInstances", "SubGroupName", "PodAffinityLabels",
               "PodAffinityTopologyKey", "PodAntiAffinityTopologyKey", "Priority",
               "IsLegacyMigTask", "ResourceClaimNames", "ResourceClaimTemplates", "NumaObserved"}
NODE_FIELDS = {"GPUs", "CPUMillis", "CPUMemory", "GPUMemory", "MaxTaskNum", "Labels",
               "MigStrategy", "MigInstances", "GPUName", "Numa"}
QUEUE_FIELDS = {"Name", "Priority", "DeservedGPUs", "DeservedCPUs", "DeservedMemory",
                "MaxAllowedGPUs", "MaxAllowedCPUs", "MaxAllowedMemory", "GPUOverQuotaWeight",
                "ParentQueue", "ReclaimMinRuntime", "InteractiveTimeoutInMinutes"}
DEPARTMENT_FIELDS = {"Name", "DeservedGPUs", "MaxAllowedGPUs", "MaxAllowedCPUs", "MaxAllowedMemory"}
EXPECT_FIELDS = {"NodeName", "GPUsRequired", "GPUsAccepted", "MilliCpuRequired", "MemoryRequired",
                 "Status", "GPUGroups", "DontValidateGPUGroup", "ExpectedErrorMessage",
                 "LastStartTimestampOlderThan", "NUMAZones"}
NODE_EXPECT_FIELDS = {"ReleasingGPUs", "IdleGPUs", "NUMAZonesAvailable"}
TOPOLOGY_FIELDS = {"Name", "Jobs", "Nodes", "Queues", "Departments", "DisableDefaultDepartment", "Topologies",
                   "TestDRAObjects",
                   "JobExpectedResults", "TaskExpectedResults", "ExpectedNodesResources", "Mocks"}

# Fields read but not checked (the harness ignores them), with why, for the file's header.
IGNORED = {
    "GPUGroups": "in expectations, the device a pod ends on: our decisions name nodes only",
    "DontValidateGPUGroup": "goes with GPUGroups",
    "GPUName": "a label only",
    "InteractiveTimeoutInMinutes": "not read by the action",
    "LastStartTimestampOlderThan": "KAI's job start stamp; we keep none",
    "ExpectedErrorMessage": "KAI's fit-error text; our pending reasons are worded differently",
    "Mocks.CacheRequirements": "counts of cache calls allowed by the mock, not expectations",
}


class Cannot(Exception):
    pass


def plain(value, what):
    """A value the YAML can hold, or Cannot."""
    if isinstance(value, Raw):
        raise Cannot(f"{what} is Go code the converter does not evaluate: {value}")
    if isinstance(value, Call):
        raise Cannot(f"{what} is a call the converter does not evaluate: {value!r}")
    if isinstance(value, dict):
        return {str(k): plain(v, f"{what}.{k}") for k, v in value.items()}
    if isinstance(value, list):
        return [plain(v, f"{what}[]") for v in value]
    if isinstance(value, float) and value.is_integer():
        return int(value)
    return value


def check_fields(lit, allowed, what):
    extra = [k for k in lit if k not in allowed]
    if extra:
        raise Cannot(f"{what} uses {', '.join(sorted(extra))}, which the harness does not model")


def duration(value, what):
    """`&metav1.Duration{Duration: 10 * time.Minute}` or a time.Duration, in seconds."""
    if isinstance(value, Lit) and "Duration" in value:
        value = value["Duration"]
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        return value
    raise Cannot(f"{what} is a duration the converter does not read: {value!r}")


def job(lit):
    lit = dict(lit)
    if "RootSubGroupSet" in lit:
        rs = lit.pop("RootSubGroupSet")
        if isinstance(rs, dict) and "__default_sub_group__" in rs:
            lit["MinAvailable"] = rs["__default_sub_group__"]
        elif isinstance(rs, SubGroupSet) or (isinstance(rs, Raw) and rs.startswith("func()")):
            root = rs if isinstance(rs, SubGroupSet) else evaluate_builder(rs)
            topo = constraint(root.topology, f"job {lit.get('Name')}")
            if topo:
                lit["Topology"] = topo
            subs, min_sub = sub_groups_of(root, lit.get("Name"))
            names = {sg["Name"] for sg in subs}
            # jobs_fake.BuildJobInfo: tasks without a sub-group go to a `default` pod set of
            # every task of the job, added to the root when the test did not make one.
            if subs and any(not t.get("SubGroupName") for t in lit.get("Tasks", [])) \
                    and "default" not in names:
                subs.append({"Name": "default", "MinMember": len(lit.get("Tasks", []))})
            if subs:
                lit["SubGroups"] = subs
            if min_sub is not None:
                lit["MinSubGroup"] = min_sub
        else:
            raise Cannot(f"job {lit.get('Name')} has sub-groups or a topology constraint "
                         f"(RootSubGroupSet {str(rs).splitlines()[0][:70]}...): our gangs have "
                         f"neither")
    if lit.get("DeleteJobInTest"):
        if not INTEGRATION:
            raise Cannot(f"job {lit.get('Name')} sets DeleteJobInTest outside a multi-round test")
    else:
        lit.pop("DeleteJobInTest", None)
    for k in ("JobNotReadyForSsn",):
        if lit.get(k):
            raise Cannot(f"job {lit.get('Name')} sets {k}")
        lit.pop(k, None)
    check_fields(lit, JOB_FIELDS, f"job {lit.get('Name')}")
    for k in ("PreemptionDelay", "StaleDuration", "PerJobStalenessGracePeriod"):
        if k in lit:
            lit[k] = duration(lit[k], f"job {lit.get('Name')} {k}")
    tasks = []
    for t in lit.get("Tasks", []):
        t = dict(t)
        if t.get("SubGroupName") and "SubGroups" not in lit:
            raise Cannot(f"a task of job {lit.get('Name')} names a sub-group of a job without any")
        notes = t.get("Annotations")
        if isinstance(notes, dict) and "__numa_observed__" in notes:
            # nodes_fake.NumaObservedPlacementAnnotation: the exporter's record, by zone.
            t["NumaObserved"] = t.pop("Annotations")["__numa_observed__"]
        for k in ("Annotations", "PersistentVolumeClaimNames"):
            if t.get(k):
                raise Cannot(f"a task of job {lit.get('Name')} sets {k}, which the harness "
                             f"does not model")
            t.pop(k, None)
        check_fields(t, TASK_FIELDS, f"a task of job {lit.get('Name')}")
        if t.get("State") not in ("Pending", "Running", "Bound", "Binding", "Allocated", "StuckInReleasing",
                                  "Releasing", "Succeeded", "Failed"):
            raise Cannot(f"a task of job {lit.get('Name')} starts {t.get('State')}, a state our "
                         f"snapshot has no input for")
        tasks.append(plain(t, "task"))
    lit["Tasks"] = tasks
    return plain(lit, f"job {lit.get('Name')}")


def queue(lit, fields, what):
    lit = dict(lit)
    if lit.get("V1"):
        raise Cannot(f"{what} {lit.get('Name')} is a v1 queue (no resources)")
    lit.pop("V1", None)
    if lit.get("UseOnlyFreeCPUResources"):
        raise Cannot(f"{what} {lit.get('Name')} sets UseOnlyFreeCPUResources")
    lit.pop("UseOnlyFreeCPUResources", None)
    check_fields(lit, fields, f"{what} {lit.get('Name')}")
    if "ReclaimMinRuntime" in lit:
        lit["ReclaimMinRuntime"] = duration(lit["ReclaimMinRuntime"], "ReclaimMinRuntime")
    return plain(lit, f"{what} {lit.get('Name')}")


def node(name, lit):
    lit = dict(lit)
    if lit.get("NumaTopology") is not None:
        lit["Numa"] = lit.pop("NumaTopology")
    lit.pop("NumaTopology", None)
    if lit.get("GpuMemorySynced") is not None and "GpuMemorySynced" in lit:
        raise Cannot(f"node {name} sets GpuMemorySynced")
    lit.pop("GpuMemorySynced", None)
    check_fields(lit, NODE_FIELDS, f"node {name}")
    return plain(lit, f"node {name}")


def expectations(lit, what):
    out = {}
    for name, e in lit.items():
        e = dict(e)
        if e.get("NUMAZones") is None:
            e.pop("NUMAZones", None)
        check_fields(e, EXPECT_FIELDS, f"{what} {name}")
        for k in ("GPUGroups", "DontValidateGPUGroup", "LastStartTimestampOlderThan",
                  "ExpectedErrorMessage"):
            e.pop(k, None)
        out[str(name)] = plain(e, f"{what} {name}")
    return out


def topologies(items):
    """`[]*kaiv1alpha1.Topology` as {name: [node label of each level, in the order written]}."""
    out = {}
    for t in items:
        if not isinstance(t, dict):
            raise Cannot(f"a topology the converter does not read: {t!r}")
        name = (t.get("ObjectMeta") or {}).get("Name")
        levels = (t.get("Spec") or {}).get("Levels") or []
        if not name or not all(isinstance(lv, dict) and set(lv) == {"NodeLabel"} for lv in levels):
            raise Cannot(f"a topology the converter does not read: {t!r}"[:160])
        out[str(name)] = [plain(lv["NodeLabel"], f"topology {name}") for lv in levels]
    return out


def scheduler_conf(conf, nodes):
    """A test's own scheduler configuration as our policy's placement, {gpu, cpu}: KAI's
    SchedulingShard ties the device order to the GPU strategy (`schedulingshard_types.go:
    setDefaultPlugins`: `gpupack` with binpack, `gpuspread` with spread) and gives both to
    `nodeplacement`; a configuration outside that, or one without `nodeplacement` over several
    nodes (no node order at all), cannot be written as a policy."""
    names, node = [], None
    for tier in (conf.get("Tiers") or []) if isinstance(conf, dict) else []:
        for plugin in tier.get("Plugins") or []:
            args = plugin.get("Arguments") or {}
            names.append(str(plugin.get("Name")) + (f" {dict(args)}" if args else ""))
            if plugin.get("Name") == "nodeplacement":
                node = {k: str(v) for k, v in args.items()}
    listed = ", ".join(names) or "?"
    plugins = {n.split(" ")[0] for n in names}
    device = ("binpack" if "gpupack" in plugins else None,
              "spread" if "gpuspread" in plugins else None)
    device = device[0] or device[1]
    if node is not None and set(node) != {"gpu", "cpu"}:
        raise Cannot(f"the test's scheduler configuration (plugins {listed}) sets nodeplacement "
                     "arguments the converter does not read")
    if node is not None and device is not None and node["gpu"] != device:
        raise Cannot(f"the test replaces KAI's scheduler configuration (Mocks.SchedulerConf: "
                     f"plugins {listed}): nodes by {node['gpu']} and devices by {device}, a mix "
                     "that neither our policy nor KAI's SchedulingShard can configure "
                     "(schedulingshard_types.go: setDefaultPlugins ties gpupack / gpuspread to "
                     "the GPU strategy)")
    if node is None and len(nodes) > 1:
        raise Cannot(f"the test replaces KAI's scheduler configuration (Mocks.SchedulerConf: "
                     f"plugins {listed}) with no nodeplacement plugin, so no node order, over "
                     "several nodes: our policy always orders nodes")
    if node is None:
        node = {"gpu": device or "binpack", "cpu": device or "binpack"}
    return {"gpu": node["gpu"], "cpu": node["cpu"]}


def dra_objects(lit):
    """`dra_fake.TestDRAObjects`: device class names; slices (`dra_fake.getResourceSlices`
    gives each `Count` devices named 0, 1, ... of driver `nvidia.com/gpu` in pool `NodeName`,
    whatever its `DeviceClassName`); claims, each one `ExactCount` request named `request`,
    with their status's allocated devices and the names of the pods reserving them."""
    out = {"DeviceClasses": [plain(c, "device class") for c in lit.get("DeviceClasses") or []],
           "ResourceSlices": [], "ResourceClaims": []}
    for sl in lit.get("ResourceSlices") or []:
        sl = dict(sl)
        if sl.get("AllNodes") or sl.get("NodeSelector"):
            raise Cannot(f"resource slice {sl.get('Name')} is for all nodes or a node selector")
        out["ResourceSlices"].append({"Name": plain(sl["Name"], "slice"),
                                      "NodeName": plain(sl["NodeName"], "slice"),
                                      "Count": plain(sl.get("Count", 0), "slice")})
    for c in lit.get("ResourceClaims") or []:
        c = dict(c)
        claim = {k: plain(c[k], f"claim {c.get('Name')}")
                 for k in ("Name", "Namespace", "DeviceClassName", "Count", "Labels") if k in c}
        status = c.get("ClaimStatus") or {}
        allocation = (status.get("Allocation") or {}).get("Devices", {}).get("Results")
        if allocation:
            claim["Allocation"] = [{k: plain(r[k], "allocation") for k in
                                    ("Request", "Driver", "Pool", "Device")} for r in allocation]
        if status.get("ReservedFor"):
            claim["ReservedFor"] = [plain(r["Name"], "reservedFor") for r in status["ReservedFor"]]
        out["ResourceClaims"].append(claim)
    return out


def topology(lit, meta):
    """One KAI TestTopologyBasic as a case dict (raises Cannot)."""
    if "__unreadable__" in lit:
        raise Cannot(f"the converter cannot read this literal: {lit['__unreadable__']}")
    extra = [k for k in lit if k not in TOPOLOGY_FIELDS and k != "Name"]
    extra_meta = [k for k in meta if k not in ("TestTopologyBasic", "Name")]
    if extra:
        raise Cannot(f"the test sets {', '.join(sorted(extra))}, which the harness does not model")
    mocks = lit.get("Mocks")
    placement = None
    if isinstance(mocks, dict) and mocks.get("SchedulerConf") is not None:
        placement = scheduler_conf(mocks["SchedulerConf"], lit.get("Nodes") or {})
    if isinstance(mocks, dict) and mocks.get("GPUMetric") is not None:
        raise Cannot("the test mocks GPU metrics")
    expects = (lit.get("JobExpectedResults") or lit.get("TaskExpectedResults")
               or lit.get("ExpectedNodesResources"))
    if isinstance(lit.get("Jobs"), list) and not lit.get("Jobs") and not expects:
        raise Cannot("the case has no jobs and expects nothing: there is nothing to compare")
    if not lit.get("Jobs") or not (lit.get("JobExpectedResults") or lit.get("TaskExpectedResults")
                                   or lit.get("ExpectedNodesResources")):
        raise Cannot("the literal holds no jobs or no expectations: the test fills them in Go "
                     "code or checks its results by hand, which the converter does not read")
    case = {}
    if placement:
        case["Placement"] = placement
    if lit.get("DisableDefaultDepartment"):
        case["DisableDefaultDepartment"] = True
    if lit.get("Topologies"):
        case["Topologies"] = topologies(lit["Topologies"])
    if lit.get("TestDRAObjects"):
        case["DRA"] = dra_objects(lit["TestDRAObjects"])
    case["Nodes"] = {str(n): node(n, v) for n, v in (lit.get("Nodes") or {}).items()}
    case["Queues"] = [queue(q, QUEUE_FIELDS, "queue") for q in lit.get("Queues") or []]
    if lit.get("Departments"):
        case["Departments"] = [queue(d, DEPARTMENT_FIELDS, "department")
                               for d in lit["Departments"]]
    case["Jobs"] = [job(j) for j in lit.get("Jobs") or []]
    if lit.get("JobExpectedResults"):
        case["JobExpectedResults"] = expectations(lit["JobExpectedResults"], "job")
    if lit.get("TaskExpectedResults"):
        case["TaskExpectedResults"] = expectations(lit["TaskExpectedResults"], "task")
    if lit.get("ExpectedNodesResources"):
        nodes = {}
        for n, e in lit["ExpectedNodesResources"].items():
            e = dict(e)
            if e.get("NUMAZonesAvailable") is None:
                e.pop("NUMAZonesAvailable", None)
            check_fields(e, NODE_EXPECT_FIELDS, f"expected node {n}")
            nodes[str(n)] = plain(e, f"expected node {n}")
        case["ExpectedNodesResources"] = nodes
    if extra_meta:
        case["rounds"] = {k: plain(meta[k], k) for k in extra_meta}
    return case


def enclosing_test(text, pos, tests):
    """The Go function a literal sits in, and the Test function that runs it."""
    funcs = [(m.start(), m.group(1)) for m in re.finditer(r"^func (?:\([^)]*\) )?(\w+)", text, re.M)]
    inside = None
    for start, name in funcs:
        if start < pos:
            inside = name
    if inside and inside.startswith("Test"):
        return inside
    for start, name in funcs:
        if name.startswith("Test"):
            body_end = next((s for s, _ in funcs if s > start), len(text))
            if inside and re.search(r"\b" + re.escape(inside) + r"\(", text[start:body_end]):
                return name
    return inside or "?"


def cases_of(text):
    toks = tokens(text)
    out = []
    numbers = {}
    i = 0
    while i < len(toks):
        kind, v, pos = toks[i]
        # A TestTopologyMetadata literal ({ Name?, TestTopologyBasic: ..., Rounds... }) or a bare
        # TestTopologyBasic one.
        if v == "TestTopologyBasic" and i + 1 < len(toks) and toks[i + 1][1] in ("{",):
            is_field = i >= 2 and toks[i - 1][1] == "." and toks[i - 2][1] == "test_utils"
            # A function's result type (`) test_utils.TestTopologyBasic {` or `) []test_utils...`).
            returns_it = i >= 3 and toks[i - 3][1] == ")" or \
                (i >= 5 and toks[i - 3][1] == "]" and toks[i - 5][1] == ")")
            if is_field and i >= 5 and toks[i - 3][1] == "]" and toks[i - 4][1] == "[" \
                    and toks[i - 5][1] != ")":
                # A table of bare literals: `[]test_utils.TestTopologyBasic{ {...}, {...} }`.
                p = Parser(toks, text)
                p.i = i + 1
                table = p.composite("[]test_utils.TestTopologyBasic")
                test = enclosing_test(text, pos, None)
                for lit in table:
                    number = numbers.get(test, 0)
                    numbers[test] = number + 1
                    at = text.find(f'Name: {json.dumps(lit.get("Name", ""))}', pos)
                    line = text.count("\n", 0, at if at >= 0 else pos) + 1
                    out.append((test, number, lit, {}, line))
                i = p.i
                continue
            if not is_field or returns_it:
                i += 1
                continue
            # Is it the value of a `TestTopologyBasic:` field inside a metadata literal?
            meta_start = None
            if i >= 4 and toks[i - 3][1] == ":" and toks[i - 4][1] == "TestTopologyBasic":
                # find the enclosing '{' of the metadata literal
                depth = 0
                j = i - 5
                while j >= 0:
                    if toks[j][1] in ")}]":
                        depth += 1
                    elif toks[j][1] in "({[":
                        if depth == 0:
                            break
                        depth -= 1
                    j -= 1
                meta_start = j
            parsed = False
            if meta_start is not None:
                try:
                    p = Parser(toks, text)
                    p.i = meta_start
                    meta = p.composite(None)
                    lit = meta["TestTopologyBasic"]
                    end = p.i
                    parsed = True
                except (ValueError, KeyError, TypeError):
                    parsed = False  # not a literal around it: read the topology alone
            if not parsed:
                p = Parser(toks, text)
                p.i = i + 1
                meta = {}
                try:
                    lit = p.composite("test_utils.TestTopologyBasic")
                    end = p.i
                except ValueError as e:
                    lit = Lit("test_utils.TestTopologyBasic")
                    lit["__unreadable__"] = Raw(str(e))
                    end = i + 1
            test = enclosing_test(text, pos, None)
            number = numbers.get(test, 0)
            numbers[test] = number + 1
            out.append((test, number, lit, meta, text.count("\n", 0, pos) + 1))
            i = end
            continue
        i += 1
    return out


# ---------------------------------------------------------------------------------------------
# Writing

def flow(value):
    """One-line YAML flow style (JSON with bare words where YAML allows them)."""
    if isinstance(value, dict):
        return "{" + ", ".join(f"{key(k)}: {flow(v)}" for k, v in value.items()) + "}"
    if isinstance(value, list):
        return "[" + ", ".join(flow(v) for v in value) + "]"
    if isinstance(value, bool):
        return "true" if value else "false"
    if value is None:
        return "null"
    if isinstance(value, (int, float)):
        return repr(value)
    return key(value)


BARE = re.compile(r"^[A-Za-z_][A-Za-z0-9_./-]*$")
RESERVED = {"true", "false", "null", "yes", "no", "on", "off", "y", "n", "~"}


def key(s):
    s = str(s)
    if BARE.match(s) and s.lower() not in RESERVED:
        return s
    return json.dumps(s)


def write_case(lines, case):
    lines.append(f"  - test: {case['test']}")
    lines.append(f"    number: {case['number']}")
    lines.append(f"    name: {json.dumps(case['name'])}")
    lines.append(f"    line: {case['line']}")
    for k in ("known-difference", "note", "cannot"):
        if case.get(k):
            lines.append(f"    {k}: {json.dumps(case[k])}")
    for k, v in case.items():
        if k in ("test", "number", "name", "line", "known-difference", "note", "cannot"):
            continue
        if isinstance(v, dict) and v and k != "rounds":
            lines.append(f"    {k}:")
            for name, item in v.items():
                lines.append(f"      {key(name)}: {flow(item)}")
        elif isinstance(v, list) and v:
            lines.append(f"    {k}:")
            for item in v:
                lines.append(f"      - {flow(item)}")
        else:
            lines.append(f"    {k}: {flow(v)}")


def previous_notes(path):
    if not os.path.exists(path):
        return {}
    try:
        import yaml  # noqa: PLC0415
    except ImportError:
        sys.exit("PyYAML is needed to keep the notes of an existing case file")
    with open(path, encoding="utf-8") as f:
        data = yaml.safe_load(f)
    notes = {}
    for c in data.get("cases", []):
        kept = {k: c[k] for k in ("known-difference", "note") if c.get(k)}
        if kept:
            notes[(c["test"], c["name"])] = kept
    return notes


def table_name(text, line):
    """A case named outside the literal (`{name: "...", topology: test_utils.TestTopologyBasic{`)."""
    lines = text.splitlines()[max(0, line - 6):line]
    for candidate in reversed(lines):
        m = re.search(r'\bname:\s*"([^"]*)"', candidate)
        if m:
            return m.group(1)
    return None


def go_consts(text, function):
    """The integer constants of a Go function's `const ( ... )` block."""
    body = text[text.index(f"func {function}("):]
    block = re.search(r"const\s*\((.*?)\)", body, re.S).group(1)
    return {k: int(v) for k, v in re.findall(r"^\s*(\w+)\s*=\s*(\d+)", block, re.M)}


def full_drain(text, test):
    """`TestPreemptGangFullDrainMultiVictimPerNode` builds its nodes, jobs and expectations in Go
    loops; this repeats those loops over the test's own constants (nodeCount, gpusPerNode,
    gangPodGPUs, queueName) and builds the literal they make."""
    c = go_consts(text, test)
    queue_name = re.search(r'queueName\s*=\s*"([^"]+)"', text).group(1)
    n, g = c["nodeCount"], c["gpusPerNode"]
    lit = Lit("test_utils.TestTopologyBasic")
    lit["Nodes"] = {f"node{i}": {"GPUs": g} for i in range(n)}
    jobs, expected = [], {}
    for i in range(n):
        for j in range(g):
            name = f"victim-n{i}-g{j}"
            jobs.append({"Name": name, "RequiredGPUsPerTask": 1,
                         "Priority": CONSTANTS["constants.PriorityTrainNumber"],
                         "QueueName": queue_name,
                         "Tasks": [{"NodeName": f"node{i}", "State": "Running"}]})
            expected[name] = {"GPUsRequired": 1, "Status": "Releasing"}
    jobs.append({"Name": "gang-preemptor", "RequiredGPUsPerTask": c["gangPodGPUs"],
                 "Priority": CONSTANTS["constants.PriorityBuildNumber"],
                 "QueueName": queue_name, "Tasks": [{"State": "Pending"} for _ in range(n)]})
    expected["gang-preemptor"] = {"GPUsRequired": n * c["gangPodGPUs"], "Status": "Pipelined",
                                  "DontValidateGPUGroup": True}
    lit["Queues"] = [{"Name": queue_name, "DeservedGPUs": n * g, "GPUOverQuotaWeight": 1,
                      "MaxAllowedGPUs": -1}]
    lit["Jobs"] = jobs
    lit["JobExpectedResults"] = expected
    return lit


def scattered_nodes(text, test):
    """preemptGang_test.go's `getTestsScatteredNodesForGangMetadata` (run by
    `TestHandleScatteredNodesForGangPreempt`): its loops over nodeCount nodes of gpuPerNode GPUs,
    each GPU running a one-GPU job a minute younger than the one before, and a two-pod preemptor
    whose pods are held by node affinity to the second and the fourth node."""
    c = go_consts(text, "getTestsScatteredNodesForGangMetadata")
    queue_name = re.search(r'queueName\s*=\s*"([^"]+)"', text).group(1)
    lit = Lit("test_utils.TestTopologyBasic")
    lit["Nodes"] = {f"node{i}": {"GPUs": c["gpuPerNode"]} for i in range(c["nodeCount"])}
    jobs = []
    for i in range(c["nodeCount"]):
        for j in range(c["gpuPerNode"]):
            jobs.append({"Name": f"job-{i}-{j}", "RequiredGPUsPerTask": 1,
                         "Priority": CONSTANTS["constants.PriorityTrainNumber"],
                         "QueueName": queue_name, "JobAgeInMinutes": i * c["gpuPerNode"] + j,
                         "Tasks": [{"State": "Running", "NodeName": f"node{i}"}]})
    jobs.append({"RequiredGPUsPerTask": 1, "Name": "preemptor", "QueueName": queue_name,
                 "Priority": CONSTANTS["constants.PriorityInteractivePreemptibleNumber"],
                 "Tasks": [{"State": "Pending", "NodeAffinityNames": ["node1"]},
                           {"State": "Pending", "NodeAffinityNames": ["node3"]}]})
    lit["Queues"] = [{"Name": queue_name, "MaxAllowedGPUs": -1, "GPUOverQuotaWeight": 1}]
    lit["Jobs"] = jobs
    lit["JobExpectedResults"] = {"preemptor": {"GPUsRequired": 2, "Status": "Pipelined",
                                               "DontValidateGPUGroup": True}}
    return lit


# Test functions whose literal is filled in by Go loops, with the function that repeats them.
LOOP_BUILT = {"TestPreemptGangFullDrainMultiVictimPerNode": full_drain,
              "TestHandleScatteredNodesForGangPreempt": scattered_nodes}


# Test functions that build their literal in a helper and check its result with Go asserts of
# their own rather than expectation fields: what those asserts demand, written out as data.
# `SubGroupDomains`: the pods of a sub-group by the value of a node label (exactly these counts,
# so all in one domain) and, when given, exactly the nodes they use; `SubGroupsApart`: each of
# the sub-groups in one domain of the label, a different one each, together exactly `Domains`.
HAND_CHECKED = {
    "TestHandleTopologyAllocation_MultiTopologiesAcrossSubgroups": {
        "note": "expectations from the test's asserts: every task Binding, assertDomainCount "
                "and assertNodeSet per sub-group",
        "JobExpectedResults": {"pending_job0": {"GPUsRequired": 24, "Status": "Binding"}},
        "SubGroupDomains": [
            {"SubGroup": "rack-workers", "Label": "topology.test/rack-domain",
             "Domains": {"rack-a": 3}, "Nodes": ["node0", "node1"]},
            {"SubGroup": "zone-workers", "Label": "topology.test/zone-domain",
             "Domains": {"zone-x": 3}, "Nodes": ["node2", "node4"]},
        ],
    },
    "TestHandleTopologyAllocation_HierarchicalMultiTopologiesAcrossSubgroups": {
        "note": "expectations from the test's asserts: every task Binding, assertDomainCount "
                "of each child's zone, assertSingleDomainName of each child's rack, the two "
                "racks different and assertDomainSet of them",
        "JobExpectedResults": {"pending_job1": {"GPUsRequired": 24, "Status": "Binding"}},
        "SubGroupDomains": [
            {"SubGroup": "child-a", "Label": "topology.test/zone-domain", "Domains": {"zone-x": 3}},
            {"SubGroup": "child-b", "Label": "topology.test/zone-domain", "Domains": {"zone-x": 3}},
        ],
        "SubGroupsApart": [
            {"SubGroups": ["child-a", "child-b"], "Label": "topology.test/rack-domain",
             "Domains": ["rack-a", "rack-b"]},
        ],
    },
}


# The test file's own helper functions that return one expression (`twoFullZonesNode()`,
# `runningVictim(name, queue, priority, zoneID)`, `cpu(amount)`), by name: each evaluates its
# return expression with its parameters bound to the call's arguments.
LOCAL_FUNCS = {}


def local_functions(text):
    out = {}
    pattern = re.compile(r"^func (\w+)\(([^)]*)\)[^{\n]*\{\n\s*return ", re.M)
    for m in pattern.finditer(text):
        name, params = m.group(1), m.group(2)
        if name.startswith("Test") or name.startswith("get"):
            continue
        names = [p.strip().split()[0] for p in params.split(",") if p.strip()]
        start = m.end()

        def run(args, start=start, names=names):
            toks = tokens(text[start:])
            value = Parser(toks, text[start:]).expr()
            return bind_variables(value, dict(zip(names, args)))

        out[name] = run
    return out


# Files under integration_tests/ that run their actions once on one session
# (`action.Execute(ssn)` in a loop), not through integration_tests_utils.RunTests' rounds.
SINGLE_SESSION = {"pkg/scheduler/actions/integration_tests/numa/numa_test.go"}


def transcribe(kai, rel, action):
    global INTEGRATION, LOCAL_FUNCS
    INTEGRATION = "/integration_tests/" in rel and rel not in SINGLE_SESSION
    with open(os.path.join(kai, rel), encoding="utf-8") as f:
        text = f.read()
    LOCAL_FUNCS = local_functions(text)
    stem = os.path.basename(rel).replace(".go", ".yaml")
    if "/integration_tests/" in rel:
        stem = "integration_" + rel.split("/integration_tests/")[1].split("/")[0] + "_" + stem
    out_path = os.path.join(HERE, stem)
    notes = previous_notes(out_path)
    cases = []
    for test, number, lit, meta, line in cases_of(text):
        name = lit.get("Name") or meta.get("Name") or table_name(text, line) or f"#{number}"
        case = {"test": test, "number": number, "name": name, "line": line}
        if test in LOOP_BUILT:
            lit = LOOP_BUILT[test](text, test)
        checks = dict(HAND_CHECKED.get(test, {}))
        try:
            if checks:
                lit = bind_variables(lit, builder_variables(text, line))
                lit["JobExpectedResults"] = checks.pop("JobExpectedResults")
                case["note"] = checks.pop("note")
            case.update(topology(lit, meta))
            case.update(checks)
        except Cannot as e:
            case["cannot"] = str(e)
        except (AttributeError, TypeError, KeyError, ValueError) as e:
            case["cannot"] = (f"the literal is built from Go variables or code the converter "
                              f"does not evaluate ({e.__class__.__name__}: {e})")
        case.update(notes.get((test, name), {}))
        cases.append(case)
    lines = [
        "# KAI Scheduler's action test cases, transcribed by transcribe.py from the KAI file below;",
        "# each case names the Go test function, its index in that function's table (number), the",
        "# case's Name and the line of its literal. Field names are KAI's (test_utils.TestTopologyBasic,",
        "# jobs_fake.TestJobBasic, tasks_fake.TestTaskBasic, nodes_fake.TestNodeBasic); format and",
        "# defaults: README.md in this folder.",
        f"source: {rel}",
        f"action: {action}",
        *(["integration: true"] if INTEGRATION else []),
        "cases:",
    ]
    for case in cases:
        write_case(lines, case)
    with open(out_path, "w", encoding="utf-8") as f:
        f.write("\n".join(lines) + "\n")
    cannot = sum(1 for c in cases if "cannot" in c)
    print(f"{rel}: {len(cases)} cases, {cannot} not expressible -> {os.path.relpath(out_path)}")


def main():
    if len(sys.argv) < 2:
        sys.exit(__doc__)
    kai = sys.argv[1]
    files = sys.argv[2:] or list(FILES)
    for rel in files:
        transcribe(kai, rel, FILES.get(rel, "allocate"))


if __name__ == "__main__":
    main()
