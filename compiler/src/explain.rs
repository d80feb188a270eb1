//! `explain`: what every queue gets under a scenario, and why, in words. Pure: a policy and a
//! scenario in, a report out; rendering as a tree table, markdown or JSON.

use std::collections::BTreeMap;
use std::fmt::Write as _;

use serde::Serialize;

use crate::check::did_you_mean;
use crate::fairshare::{self, Cap, Demand, DeservedBy, FairShares, Share};
use crate::model::{PerResource, Policy};
use crate::quantity::{QuantityError, ResourceKind, format_quantity, parse_quantity};
use crate::scenario::{QuantityValue, Scenario};
use crate::yaml;

/// A scenario file that does not fit the policy: what is wrong and where.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error(
    "{file}{}{}: {message}",
    line.map(|l| format!(":{l}")).unwrap_or_default(),
    column.filter(|_| line.is_some()).map(|c| format!(":{c}")).unwrap_or_default()
)]
pub struct ScenarioError {
    /// The scenario file.
    pub file: String,
    /// The line the problem is on, when it can be found.
    pub line: Option<usize>,
    /// The column the problem starts at, when it can be found.
    pub column: Option<usize>,
    /// What is wrong and how to fix it.
    pub message: String,
}

/// Parses a scenario file's text.
pub fn parse_scenario(file: &str, text: &str) -> Result<Scenario, ScenarioError> {
    let error = |e: yaml::YamlError| ScenarioError {
        file: file.to_string(),
        line: e.line,
        column: e.column,
        message: format!("not a valid scenario: {}", e.message),
    };
    // The tree first: YAML mistakes are reported with their place before the shape is checked.
    yaml::locate(text).map_err(error)?;
    serde_saphyr::from_str(text).map_err(|e| error(yaml::yaml_error(&e)))
}

/// The default what-if: the declared capacity, with every leaf queue asking for all of it
/// (what each team gets when everybody is busy).
pub fn busy_demand(policy: &Policy) -> Demand {
    let capacity = policy.cluster.capacity;
    let everything = PerResource {
        gpu: capacity.gpu.unwrap_or(0),
        cpu: capacity.cpu.unwrap_or(0),
        memory: capacity.memory.unwrap_or(0),
    };
    Demand {
        capacity,
        request: policy
            .queues
            .iter()
            .map(|q| {
                if q.is_leaf() {
                    everything
                } else {
                    PerResource::default()
                }
            })
            .collect(),
        usage: vec![PerResource::default(); policy.queues.len()],
        k: policy.cluster.fairness.map_or(0.0, |f| f.k),
    }
}

/// Turns a scenario into the engine's demand, checking every name and number against the policy.
pub fn demand_from_scenario(
    policy: &Policy,
    scenario: &Scenario,
    file: &str,
    text: &str,
) -> Result<Demand, Vec<ScenarioError>> {
    let mut errors = Vec::new();
    let tree = yaml::locate(text).ok();
    // A path ending in a key points at the key; one ending in a resource, at its value.
    let mut fail = |path: &[&str], at_value: bool, message: String| {
        let place = tree.as_ref().map(|t| {
            if at_value {
                t.place_of(path)
            } else {
                t.key_place(path)
            }
        });
        errors.push(ScenarioError {
            file: file.to_string(),
            line: place.map(|p| p.line).filter(|&l| l > 0),
            column: place.map(|p| p.column).filter(|&c| c > 0),
            message,
        });
    };
    // The user's own text of a value, for messages (YAML numbers come back re-printed).
    let written = |path: &[&str]| -> Option<String> {
        let tree = tree.as_ref()?;
        let place = tree.place_of(path);
        (tree.place_of(&path[..path.len() - 1]) != place)
            .then(|| place.text(text).map(str::to_string))
            .flatten()
    };
    let mut demand = Demand {
        capacity: policy.cluster.capacity,
        request: vec![PerResource::default(); policy.queues.len()],
        usage: vec![PerResource::default(); policy.queues.len()],
        k: scenario
            .k
            .or(policy.cluster.fairness.map(|f| f.k))
            .unwrap_or(0.0),
    };
    if !(demand.k.is_finite() && demand.k >= 0.0) {
        let shown = written(&["k"]).unwrap_or_else(|| demand.k.to_string());
        fail(
            &["k"],
            true,
            format!("k must be a number of 0 or more, not {shown}"),
        );
    }
    let index = |name: &str| policy.queues.iter().position(|q| q.name == name);
    let leaves: Vec<&str> = policy
        .queues
        .iter()
        .filter(|q| q.is_leaf())
        .map(|q| q.name.as_str())
        .collect();
    let unknown = |name: &str| {
        let hint = match did_you_mean(name, policy.queues.iter().map(|q| q.name.as_str())) {
            Some(s) => format!(" (did you mean \"{s}\"?)"),
            None if leaves.len() <= 12 => format!("; the leaf queues are {}", leaves.join(", ")),
            None => String::new(),
        };
        format!("no queue is named \"{name}\"{hint}")
    };
    // Parse what the user wrote, not the float YAML made of it (`99999999999999999999`).
    let quantity = |path: &[&str], v: &QuantityValue, kind: ResourceKind| match v {
        QuantityValue::Number(_) => match written(path) {
            Some(raw) => parse_quantity(&raw, kind).or_else(|e| match e {
                QuantityError::Unparsable(_) => quantity(v, kind),
                e => Err(e),
            }),
            None => quantity(v, kind),
        },
        QuantityValue::Text(_) => quantity(v, kind),
    };
    if let Some(capacity) = &scenario.capacity {
        for kind in ResourceKind::ALL {
            if let Some(v) = amount(capacity, kind) {
                let path = ["capacity", kind.name()];
                match quantity(&path, v, kind) {
                    Ok(v) => *demand.capacity.get_mut(kind) = Some(v),
                    Err(e) => fail(&path, true, format!("capacity.{}: {e}", kind.name())),
                }
            }
        }
    }
    for (name, amounts) in &scenario.demand {
        let Some(q) = index(name) else {
            fail(
                &["demand", name],
                false,
                format!("demand: {}", unknown(name)),
            );
            continue;
        };
        let queue = &policy.queues[q];
        if !queue.is_leaf() {
            let children: Vec<&str> = queue
                .children
                .iter()
                .map(|&c| policy.queues[c].name.as_str())
                .collect();
            fail(
                &["demand", name],
                false,
                format!(
                    "demand: \"{name}\" has child queues ({}); demand is given per leaf queue",
                    children.join(", ")
                ),
            );
            continue;
        }
        for kind in ResourceKind::ALL {
            if let Some(v) = amount(amounts, kind) {
                let path = ["demand", name, kind.name()];
                match quantity(&path, v, kind) {
                    Ok(v) => *demand.request[q].get_mut(kind) = v,
                    Err(e) => fail(&path, true, format!("demand.{name}.{}: {e}", kind.name())),
                }
            }
        }
    }
    for (name, usage) in &scenario.usage {
        let Some(q) = index(name) else {
            fail(&["usage", name], false, format!("usage: {}", unknown(name)));
            continue;
        };
        for (kind, value) in [
            (ResourceKind::Gpu, usage.gpu),
            (ResourceKind::Cpu, usage.cpu),
            (ResourceKind::Memory, usage.memory),
        ] {
            match value {
                Some(u) if (0.0..=1.0).contains(&u) => *demand.usage[q].get_mut(kind) = u,
                Some(u) => {
                    let path = ["usage", name, kind.name()];
                    let shown = written(&path).unwrap_or_else(|| u.to_string());
                    fail(
                        &path,
                        true,
                        format!(
                            "usage.{name}.{}: {shown} is outside [0, 1]; usage is the queue's share of the cluster over the window",
                            kind.name()
                        ),
                    );
                }
                None => {}
            }
        }
    }
    if errors.is_empty() {
        Ok(demand)
    } else {
        Err(errors)
    }
}

fn amount(a: &crate::scenario::ResourceAmounts, kind: ResourceKind) -> Option<&QuantityValue> {
    match kind {
        ResourceKind::Gpu => a.gpu.as_ref(),
        ResourceKind::Cpu => a.cpu.as_ref(),
        ResourceKind::Memory => a.memory.as_ref(),
    }
}

fn quantity(v: &QuantityValue, kind: ResourceKind) -> Result<i64, crate::quantity::QuantityError> {
    match v {
        QuantityValue::Number(n) => parse_quantity(&format!("{n}"), kind),
        QuantityValue::Text(t) => parse_quantity(t, kind),
    }
}

/// What `explain` shows: every queue's terms and share of every resource, with the reasons.
#[derive(Debug, Clone)]
pub struct Report<'p> {
    /// The policy explained.
    pub policy: &'p Policy,
    /// The engine's result.
    pub shares: FairShares,
    /// Resources worth a column: governed somewhere, or with capacity or demand.
    pub shown: Vec<ResourceKind>,
    /// What the report had to assume, and how to say it instead (printed before the tables).
    pub notes: Vec<String>,
}

impl<'p> Report<'p> {
    /// Computes the fair shares of `policy` under `demand`.
    pub fn new(policy: &'p Policy, demand: &Demand) -> Self {
        let shares = fairshare::compute(policy, demand);
        let shown: Vec<ResourceKind> = ResourceKind::ALL
            .into_iter()
            .filter(|&k| {
                k == ResourceKind::Gpu
                    || policy.queues.iter().any(|q| q.resources.get(k).is_some())
                    || demand.request.iter().any(|r| *r.get(k) > 0)
            })
            .collect();
        let notes = shown
            .iter()
            .filter(|&&k| demand.capacity.get(k).is_none())
            .map(|&k| capacity_note(policy, &shares, k))
            .collect();
        Report {
            policy,
            shares,
            shown,
            notes,
        }
    }

    /// One queue's share of one resource.
    pub fn share(&self, queue: usize, kind: ResourceKind) -> &Share {
        self.shares.queues[queue].get(kind)
    }

    /// Why queue `q` gets what it gets of `kind`, in one sentence.
    pub fn sentence(&self, q: usize, kind: ResourceKind) -> String {
        let queue = &self.policy.queues[q];
        let s = self.share(q, kind);
        let n = |v: i64| short(v, kind);
        let terms = queue.resources.get(kind);
        // What this queue's sibling set divides, in the user's words.
        let level = match queue.parent {
            Some(p) => format!("{}'s share of {}", self.policy.queues[p].name, n(s.divided)),
            None => format!("the cluster's {}", n(s.divided)),
        };
        let mut text = if terms.is_none() {
            // KAI reads a resource without quota or limit as unlimited both ways: each such
            // sibling may take up to the whole level, so they are not divided among themselves.
            format!(
                "{} deserved (not governed at this queue: unlimited, so it may take up to all \
                 of {level} whatever its siblings take; a `{} quota=…` here divides it among them)",
                n(s.deserved),
                kind.name()
            )
        } else {
            let by = match s.deserved_by {
                DeservedBy::Quota => "quota",
                DeservedBy::Limit => "limit",
                DeservedBy::Request => "request",
                DeservedBy::Divided if queue.parent.is_some() => {
                    "unlimited quota: all of its parent's share"
                }
                DeservedBy::Divided => "unlimited quota: the whole cluster",
            };
            format!("{} deserved ({by})", n(s.deserved))
        };
        let over = s.over_quota();
        if over > 0 {
            let weight = terms.map_or(1.0, |t| t.weight);
            let _ = write!(
                text,
                " + {} over quota (weight {} of {} at priority {}, {} left after quotas",
                n(over),
                num(weight),
                num(s.bucket_weight),
                queue.priority,
                with_unit(s.bucket_available, kind)
            );
            if s.leftover > 0 {
                let _ = write!(text, "; {} of it from the leftover pass", n(s.leftover));
            }
            text.push(')');
        }
        if s.fair_share > s.divided {
            let _ = write!(
                text,
                "; that is more than {level}: the quotas here add up to more than there is, and \
                 KAI keeps a finite quota in full"
            );
        }
        let limit = terms.and_then(|t| t.limit.finite());
        let more = |s: &Share| n(s.requestable - s.fair_share);
        let tail = match s.cap {
            Cap::Request if s.request == 0 && s.fair_share == 0 => "; asks for nothing".to_string(),
            Cap::Request | Cap::Limit if s.fair_share > s.requestable => {
                let what = if s.cap == Cap::Limit {
                    "limit"
                } else {
                    "request"
                };
                format!(
                    "; {} more than its {what} {}: KAI's leftover pass gives a whole unit \
                     without cutting it to the {what}",
                    n(s.fair_share - s.requestable),
                    n(s.requestable)
                )
            }
            Cap::Request => format!("; capped by request {}", n(s.requestable)),
            Cap::Limit => format!(
                "; capped by limit {}",
                limit.map_or_else(|| n(s.requestable), n)
            ),
            Cap::ZeroWeight => format!(
                "; weight 0 gets nothing over quota ({} more requested)",
                more(s)
            ),
            Cap::Exhausted => format!("; nothing left to divide ({} more requested)", more(s)),
            Cap::Stopped => format!(
                "; {} stays undivided: with past usage counted, no queue that wants more pulls \
                 any of it, and KAI stops dividing then ({} more requested)",
                with_unit(s.undivided, kind),
                more(s)
            ),
        };
        text.push_str(&tail);
        if let Some(p) = queue.parent {
            let _ = write!(
                text,
                "; a share of {}'s {}",
                self.policy.queues[p].name,
                n(self.share(p, kind).fair_share)
            );
        }
        text
    }
}

/// Says that no capacity was given for `kind`, what the engine assumed instead (what the
/// top-level queues can take) and how to declare it.
fn capacity_note(policy: &Policy, shares: &FairShares, kind: ResourceKind) -> String {
    let assumed = policy
        .queues
        .iter()
        .position(|q| q.parent.is_none())
        .map_or(0, |root| shares.queues[root].get(kind).divided);
    let consequence = if assumed == 0 {
        ", so every share is 0"
    } else {
        ""
    };
    let name = kind.name();
    format!(
        "no {name} capacity is declared: assumed {}, what the top-level queues ask for{consequence}; \
         declare it with `capacity {name}=…` in the `cluster` block, or `capacity: {{{name}: …}}` \
         in a scenario file (--scenario)",
        with_unit(assumed, kind)
    )
}

/// An amount with its unit, for prose: "18 GPUs", "12 cores", "500m CPU", "960Gi".
fn with_unit(v: i64, kind: ResourceKind) -> String {
    match kind {
        ResourceKind::Gpu if v == 1000 => "1 GPU".to_string(),
        ResourceKind::Gpu => format!("{} GPUs", short(v, kind)),
        ResourceKind::Cpu if v % 1000 == 0 => format!("{} cores", v / 1000),
        ResourceKind::Cpu => format!("{} CPU", short(v, kind)),
        ResourceKind::Memory => short(v, kind),
    }
}

/// Whether a sentence about this queue and resource says anything: the resource is GPU, or the
/// queue governs or requests it.
fn worth_a_sentence(report: &Report, q: usize, kind: ResourceKind) -> bool {
    kind == ResourceKind::Gpu
        || report.policy.queues[q].resources.get(kind).is_some()
        || report.share(q, kind).request > 0
}

fn num(v: f64) -> String {
    if v.fract() == 0.0 {
        format!("{v:.0}")
    } else {
        format!("{}", (v * 1000.0).round() / 1000.0)
    }
}

/// An amount as people read it: GPUs as devices, CPU as cores or millicores, memory as a quantity.
pub fn short(v: i64, kind: ResourceKind) -> String {
    format_quantity(v, kind)
}

fn column_title(kind: ResourceKind) -> &'static str {
    match kind {
        ResourceKind::Gpu => "GPU (devices)",
        ResourceKind::Cpu => "CPU (cores)",
        ResourceKind::Memory => "Memory",
    }
}

/// The queue names drawn as a tree (`├─ `, `└─ `), in the policy's order.
pub fn tree_labels(policy: &Policy) -> Vec<String> {
    let mut labels = Vec::with_capacity(policy.queues.len());
    for (i, q) in policy.queues.iter().enumerate() {
        let mut prefix = String::new();
        let mut chain = Vec::new();
        let mut at = q.parent;
        while let Some(p) = at {
            chain.push(p);
            at = policy.queues[p].parent;
        }
        // For each ancestor below the top, a bar if that ancestor has siblings after it.
        for &a in chain.iter().rev().skip(1) {
            prefix.push_str(if is_last(policy, a) { "   " } else { "│  " });
        }
        if q.parent.is_some() {
            prefix.push_str(if is_last(policy, i) {
                "└─ "
            } else {
                "├─ "
            });
        }
        labels.push(format!("{prefix}{}", q.name));
    }
    labels
}

fn is_last(policy: &Policy, q: usize) -> bool {
    match policy.queues[q].parent {
        Some(p) => policy.queues[p].children.last() == Some(&q),
        None => true,
    }
}

fn cell_bound(b: Option<crate::model::Bound>, kind: ResourceKind, unlimited: &str) -> String {
    match b {
        Some(crate::model::Bound::Finite(v)) => short(v, kind),
        Some(crate::model::Bound::Unlimited) => unlimited.to_string(),
        None => "-".to_string(),
    }
}

/// Table rows for one resource: queue label, quota, limit, weight, request, fair share.
fn rows(report: &Report, kind: ResourceKind) -> Vec<[String; 6]> {
    let labels = tree_labels(report.policy);
    report
        .policy
        .queues
        .iter()
        .enumerate()
        .map(|(i, q)| {
            let terms = q.resources.get(kind);
            let s = report.share(i, kind);
            [
                labels[i].clone(),
                cell_bound(terms.map(|t| t.quota), kind, "∞"),
                cell_bound(terms.map(|t| t.limit), kind, "∞"),
                terms.map_or("-".to_string(), |t| num(t.weight)),
                short(s.request, kind),
                short(s.fair_share, kind),
            ]
        })
        .collect()
}

/// The human report: a tree table per shown resource, then one line per queue.
pub fn render_human(report: &Report) -> String {
    let mut out = String::new();
    for note in &report.notes {
        let _ = writeln!(out, "note: {note}");
    }
    if !report.notes.is_empty() {
        out.push('\n');
    }
    for &kind in &report.shown {
        let header = [
            column_title(kind),
            "quota",
            "limit",
            "weight",
            "request",
            "fair share",
        ]
        .map(String::from);
        let mut table = vec![header];
        table.extend(rows(report, kind));
        let widths: Vec<usize> = (0..6)
            .map(|c| {
                table
                    .iter()
                    .map(|r| r[c].chars().count())
                    .max()
                    .unwrap_or(0)
            })
            .collect();
        for (i, row) in table.iter().enumerate() {
            let mut line = String::new();
            for (c, cell) in row.iter().enumerate() {
                let pad = widths[c] - cell.chars().count();
                if c == 0 {
                    line.push_str(cell);
                    line.push_str(&" ".repeat(pad));
                } else {
                    line.push_str("  ");
                    line.push_str(&" ".repeat(pad));
                    line.push_str(cell);
                }
            }
            out.push_str(line.trim_end());
            out.push('\n');
            if i == 0 {
                out.push_str(&"─".repeat(widths.iter().sum::<usize>() + 10));
                out.push('\n');
            }
        }
        out.push('\n');
    }
    for (i, q) in report.policy.queues.iter().enumerate() {
        for &kind in report
            .shown
            .iter()
            .filter(|&&k| worth_a_sentence(report, i, k))
        {
            let label = if report.shown.len() > 1 {
                format!("{} ({})", q.name, kind.name())
            } else {
                q.name.clone()
            };
            let _ = writeln!(out, "{label}: {}", report.sentence(i, kind));
        }
    }
    out
}

/// The markdown report, ready to post as a pull-request comment.
pub fn render_markdown(report: &Report) -> String {
    let mut out = String::new();
    for note in &report.notes {
        let _ = writeln!(out, "> **Note:** {note}\n");
    }
    for &kind in &report.shown {
        let _ = writeln!(
            out,
            "| {} | quota | limit | weight | request | fair share |",
            column_title(kind)
        );
        out.push_str("| --- | ---: | ---: | ---: | ---: | ---: |\n");
        for row in rows(report, kind) {
            let name = row[0]
                .replace("├─ ", "&nbsp;&nbsp;")
                .replace("└─ ", "&nbsp;&nbsp;")
                .replace("│  ", "&nbsp;&nbsp;")
                .replace("   ", "&nbsp;&nbsp;");
            let _ = writeln!(
                out,
                "| {name} | {} | {} | {} | {} | **{}** |",
                row[1], row[2], row[3], row[4], row[5]
            );
        }
        out.push('\n');
    }
    out.push_str("<details><summary>Why each queue gets what it gets</summary>\n\n");
    for (i, q) in report.policy.queues.iter().enumerate() {
        for &kind in report
            .shown
            .iter()
            .filter(|&&k| worth_a_sentence(report, i, k))
        {
            let _ = writeln!(
                out,
                "- `{}` ({}): {}",
                q.name,
                kind.name(),
                report.sentence(i, kind)
            );
        }
    }
    out.push_str("\n</details>\n");
    out
}

/// One resource of one queue in the JSON report: GPU in devices, CPU in millicores, memory in
/// bytes; `quota`/`limit` null where unlimited or not governed.
#[derive(Debug, Serialize)]
struct JsonResource {
    quota: Option<serde_json::Number>,
    limit: Option<serde_json::Number>,
    weight: f64,
    request: serde_json::Number,
    fair_share: serde_json::Number,
    why: String,
}

fn json_amount(v: i64, kind: ResourceKind) -> serde_json::Number {
    match kind {
        ResourceKind::Gpu if v % 1000 == 0 => serde_json::Number::from(v / 1000),
        ResourceKind::Gpu => {
            serde_json::Number::from_f64(v as f64 / 1000.0).unwrap_or_else(|| 0.into())
        }
        _ => serde_json::Number::from(v),
    }
}

/// The JSON report: `{"notes": [TEXT…], "queues": {NAME: {"gpu": {…}, "cpu": {…}, "memory": {…}}}}`.
pub fn render_json(report: &Report) -> String {
    let mut queues: BTreeMap<&str, BTreeMap<&str, JsonResource>> = BTreeMap::new();
    for (i, q) in report.policy.queues.iter().enumerate() {
        let mut per = BTreeMap::new();
        for kind in ResourceKind::ALL {
            let terms = q.resources.get(kind);
            let s = report.share(i, kind);
            per.insert(
                kind.name(),
                JsonResource {
                    quota: terms
                        .and_then(|t| t.quota.finite())
                        .map(|v| json_amount(v, kind)),
                    limit: terms
                        .and_then(|t| t.limit.finite())
                        .map(|v| json_amount(v, kind)),
                    weight: terms.map_or(1.0, |t| t.weight),
                    request: json_amount(s.request, kind),
                    fair_share: json_amount(s.fair_share, kind),
                    why: report.sentence(i, kind),
                },
            );
        }
        queues.insert(&q.name, per);
    }
    let mut out = serde_json::to_string_pretty(
        &serde_json::json!({ "notes": report.notes, "queues": queues }),
    )
    .unwrap_or_default();
    out.push('\n');
    out
}
