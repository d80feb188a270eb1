//! DeviceClasses, ResourceSlices and ResourceClaims (`resource.k8s.io` `v1`, `v1beta2`, and
//! `v1beta1`, whose requests and devices lack the `exactly` and `basic` levels) read into
//! [`crate::dra`]'s model.

use std::collections::BTreeMap;

use serde_json::Value;

use crate::dra::{
    AllocatedDevice, Allocation, Attribute, Device, DeviceClass, DeviceRequest, Mode,
    ResourceClaim, ResourceSlice,
};

/// One DRA object, read.
pub enum DraObject {
    /// A DeviceClass.
    Class(DeviceClass),
    /// A ResourceSlice (boxed, as the claim: they are large).
    Slice(Box<ResourceSlice>),
    /// A ResourceClaim.
    Claim(Box<ResourceClaim>),
}

/// Whether `api_version` is a `resource.k8s.io` version read here.
pub fn is_dra_version(api_version: &str) -> bool {
    matches!(
        api_version,
        "resource.k8s.io/v1" | "resource.k8s.io/v1beta2" | "resource.k8s.io/v1beta1"
    )
}

/// Whether `kind` is one of the DRA kinds read here.
pub fn is_dra_kind(kind: &str) -> bool {
    matches!(kind, "DeviceClass" | "ResourceSlice" | "ResourceClaim")
}

/// Reads a DeviceClass, ResourceSlice or ResourceClaim ([`is_dra_kind`]).
pub fn read(kind: &str, name: &str, namespace: &str, value: &Value) -> Result<DraObject, String> {
    match kind {
        "DeviceClass" => Ok(DraObject::Class(DeviceClass {
            name: name.to_string(),
            selectors: selectors(&value["spec"]["selectors"]),
        })),
        "ResourceSlice" => slice(name, value).map(|s| DraObject::Slice(Box::new(s))),
        "ResourceClaim" => claim(name, namespace, value).map(|c| DraObject::Claim(Box::new(c))),
        other => Err(format!("{other} is not a DRA kind")),
    }
}

/// `selectors[].cel.expression`.
fn selectors(list: &Value) -> Vec<String> {
    list.as_array()
        .into_iter()
        .flatten()
        .filter_map(|s| s["cel"]["expression"].as_str())
        .map(str::to_string)
        .collect()
}

fn text<'v>(value: &'v Value, at: &str) -> Result<&'v str, String> {
    value
        .as_str()
        .filter(|s| !s.is_empty())
        .ok_or_else(|| format!("{at} is missing"))
}

fn slice(name: &str, value: &Value) -> Result<ResourceSlice, String> {
    let spec = &value["spec"];
    let driver = text(&spec["driver"], "spec.driver")?.to_string();
    let pool = text(&spec["pool"]["name"], "spec.pool.name")?.to_string();
    let mut devices = Vec::new();
    for (i, d) in spec["devices"].as_array().into_iter().flatten().enumerate() {
        let at = format!("spec.devices[{i}]");
        let name = text(&d["name"], &format!("{at}.name"))?.to_string();
        // v1beta1 keeps a device's attributes under `basic`.
        let attributes = match (&d["attributes"], &d["basic"]["attributes"]) {
            (Value::Object(a), _) | (_, Value::Object(a)) => a,
            _ => &serde_json::Map::new(),
        };
        let mut read = BTreeMap::new();
        for (key, v) in attributes {
            let value = if let Some(s) = v["string"].as_str() {
                Attribute::Str(s.to_string())
            } else if let Some(n) = v["int"].as_i64() {
                Attribute::Int(n)
            } else if let Some(b) = v["bool"].as_bool() {
                Attribute::Bool(b)
            } else if let Some(s) = v["version"].as_str() {
                Attribute::Version(s.to_string())
            } else {
                return Err(format!(
                    "{at}.attributes.{key}: expected one of string, int, bool or version"
                ));
            };
            read.insert(key.clone(), value);
        }
        // v1beta1 keeps these under `basic` too.
        let set = |field: &str| {
            [&d[field], &d["basic"][field]]
                .iter()
                .any(|v| v.as_array().is_some_and(|a| !a.is_empty()))
        };
        let unsupported = if set("consumesCounters") {
            Some("consumesCounters")
        } else if set("bindingConditions") {
            Some("bindingConditions")
        } else {
            None
        };
        devices.push(Device {
            name,
            attributes: read,
            unsupported,
        });
    }
    let node_selector = match &spec["nodeSelector"] {
        Value::Null => Vec::new(),
        selector => node_selector(selector, "spec.nodeSelector")?,
    };
    Ok(ResourceSlice {
        name: name.to_string(),
        node: spec["nodeName"]
            .as_str()
            .filter(|n| !n.is_empty())
            .map(str::to_string),
        all_nodes: spec["allNodes"].as_bool() == Some(true),
        node_selector,
        driver,
        pool,
        generation: integer(&spec["pool"]["generation"], "spec.pool.generation")?.unwrap_or(0),
        slice_count: integer(
            &spec["pool"]["resourceSliceCount"],
            "spec.pool.resourceSliceCount",
        )?,
        devices,
    })
}

/// An optional integer field.
fn integer(value: &Value, at: &str) -> Result<Option<i64>, String> {
    match value {
        Value::Null => Ok(None),
        v => v
            .as_i64()
            .map(Some)
            .ok_or_else(|| format!("{at}: expected an integer, found {v}")),
    }
}

fn claim(name: &str, namespace: &str, value: &Value) -> Result<ResourceClaim, String> {
    let meta = &value["metadata"];
    let labels = meta["labels"]
        .as_object()
        .into_iter()
        .flatten()
        .filter_map(|(k, v)| Some((k.clone(), v.as_str()?.to_string())))
        .collect();
    let extended = meta["annotations"]["resource.kubernetes.io/extended-resource-claim"].as_str()
        == Some("true");
    // A claim whose requests cannot be read is still kept for the devices its allocation
    // holds (leaving it out would show them free); its pods wait, saying why.
    let (requests, mut unreadable) = match requests(value) {
        Ok(requests) => (requests, None),
        Err(why) => (Vec::new(), Some(why)),
    };
    let spec = &value["spec"]["devices"];
    let unsupported = if spec["constraints"]
        .as_array()
        .is_some_and(|c| !c.is_empty())
    {
        Some("spec.devices.constraints (matchAttribute)".to_string())
    } else {
        spec["requests"]
            .as_array()
            .into_iter()
            .flatten()
            // KAI's allocator refuses a request that sets the field at all, even to false
            // (`hasAdminAccess`: its admin-access feature is off).
            .find(|r| !r["exactly"]["adminAccess"].is_null() || !r["adminAccess"].is_null())
            .map(|r| {
                format!(
                    "adminAccess in request {}",
                    r["name"].as_str().unwrap_or_default()
                )
            })
    };
    let status = &value["status"];
    let allocation = match &status["allocation"] {
        Value::Object(a) => {
            let (allocation, why) = allocation(a);
            unreadable = unreadable.or(why);
            Some(allocation)
        }
        _ => None,
    };
    let reserved_for = status["reservedFor"]
        .as_array()
        .into_iter()
        .flatten()
        .filter(|r| r["resource"].as_str() == Some("pods"))
        .filter_map(|r| r["name"].as_str().map(str::to_string))
        .collect();
    Ok(ResourceClaim {
        namespace: namespace.to_string(),
        name: name.to_string(),
        labels,
        extended,
        requests,
        allocation,
        reserved_for,
        unsupported,
        unreadable,
    })
}

/// A claim's `spec.devices.requests`, or why they cannot be read.
fn requests(value: &Value) -> Result<Vec<DeviceRequest>, String> {
    let mut requests = Vec::new();
    for (i, r) in value["spec"]["devices"]["requests"]
        .as_array()
        .into_iter()
        .flatten()
        .enumerate()
    {
        let at = format!("spec.devices.requests[{i}]");
        let request_name = text(&r["name"], &format!("{at}.name"))?.to_string();
        if r["firstAvailable"].is_array() {
            requests.push(DeviceRequest {
                name: request_name,
                class: String::new(),
                mode: Mode::FirstAvailable,
                selectors: Vec::new(),
            });
            continue;
        }
        // v1 and v1beta2 nest the request under `exactly`; v1beta1 does not.
        let (exact, at) = if r["exactly"].is_object() {
            (&r["exactly"], format!("{at}.exactly"))
        } else {
            (r, at)
        };
        let class = text(&exact["deviceClassName"], &format!("{at}.deviceClassName"))?;
        let mode = match exact["allocationMode"].as_str() {
            None | Some("ExactCount") => Mode::Exact(exact["count"].as_i64().unwrap_or(1)),
            Some("All") => Mode::All,
            Some(other) => {
                return Err(format!(
                    "{at}.allocationMode: `{other}` is not ExactCount or All"
                ));
            }
        };
        requests.push(DeviceRequest {
            name: request_name,
            class: class.to_string(),
            mode,
            selectors: selectors(&exact["selectors"]),
        });
    }
    Ok(requests)
}

/// `status.allocation`: its devices, and where its `nodeSelector` lets its pods run: the node
/// it names by `matchFields metadata.name In [node]` (as the allocator writes it for a node's
/// devices), or else its terms, matched against the nodes' labels and names as KAI's `filter`
/// matches them (a `kubernetes.io/hostname` term among them: a label, not a name). A
/// `nodeSelector` that cannot be read ties it to no node, and says why: its devices stay held.
fn allocation(a: &serde_json::Map<String, Value>) -> (Allocation, Option<String>) {
    let devices = a
        .get("devices")
        .and_then(|d| d["results"].as_array())
        .into_iter()
        .flatten()
        .map(|r| AllocatedDevice {
            request: r["request"].as_str().unwrap_or("").to_string(),
            driver: r["driver"].as_str().unwrap_or("").to_string(),
            pool: r["pool"].as_str().unwrap_or("").to_string(),
            device: r["device"].as_str().unwrap_or("").to_string(),
        })
        .collect();
    let (node, selector, why) = match a.get("nodeSelector") {
        None | Some(Value::Null) => (None, Vec::new(), None),
        Some(selector) => match one_node(selector) {
            Some(node) => (Some(node), Vec::new(), None),
            None => match node_selector(selector, "status.allocation.nodeSelector") {
                Ok(terms) => (None, terms, None),
                Err(why) => (None, Vec::new(), Some(why)),
            },
        },
    };
    let allocation = Allocation {
        node,
        selector,
        devices,
    };
    (allocation, why)
}

/// A `NodeSelector`'s terms.
fn node_selector(value: &Value, at: &str) -> Result<Vec<crate::cluster::NodeSelectorTerm>, String> {
    let selector: k8s_openapi::api::core::v1::NodeSelector =
        serde_json::from_value(value.clone()).map_err(|e| format!("{at}: {e}"))?;
    let terms = selector
        .node_selector_terms
        .iter()
        .enumerate()
        .map(|(i, t)| super::objects::term(t, &format!("{at}.nodeSelectorTerms[{i}]")))
        .collect::<Result<Vec<_>, _>>()?;
    if terms.is_empty() {
        return Err(format!("{at} has no nodeSelectorTerms"));
    }
    Ok(terms)
}

fn one_node(selector: &Value) -> Option<String> {
    let terms = selector["nodeSelectorTerms"].as_array()?;
    let [term] = terms.as_slice() else {
        return None;
    };
    if term["matchExpressions"]
        .as_array()
        .is_some_and(|e| !e.is_empty())
    {
        return None;
    }
    let fields = term["matchFields"].as_array()?;
    let [r] = fields.as_slice() else {
        return None;
    };
    let values = r["values"].as_array()?;
    match (
        r["key"].as_str()?,
        r["operator"].as_str()?,
        values.as_slice(),
    ) {
        ("metadata.name", "In", [v]) => v.as_str().map(str::to_string),
        _ => None,
    }
}
