//! A small fake Kubernetes API server for end-to-end runs of `kai-scheduler run --kubeconfig`:
//! plain HTTP on 127.0.0.1, on a thread and runtime of its own, stopped when dropped.
//!
//! It serves what the backend reads and writes, no more: list and watch of Nodes, Pods and
//! PodGroups (a PodGroup can be created, 409 for a name taken; and an empty list for any other
//! collection, such as Queues, PriorityClasses and
//! Namespaces; Queues are listed from what a test puts in `queues`), a merge patch of a
//! PodGroup (the stale mark) and of a Queue's status, a pod's `binding` subresource (recorded; the
//! pod is then bound and a `MODIFIED` event goes out on the pod watch, as the API server does),
//! Events, one coordination Lease, a merge patch of a pod's metadata, and a merge patch of a ResourceClaim's status (DRA claims
//! served from `others`). For `--apply-queues`: Queues and PriorityClasses are
//! listed (with an equality `labelSelector`), server-side applied (created, or their labels,
//! annotations and fields replaced; a PriorityClass's `value` cannot change, 422, as the API
//! server says) and deleted. The owner kinds grouping reads are listed and watched from
//! `others` (the built-in ones served empty by default; a CRD's collection absent from it answers
//! a bare 404, as when the CRD is not installed). Anything else is recorded and answered 404.
//! A test drives it: it can hold the first lists back, change the pods without telling the
//! watch, send watch events for Nodes and Pods (a node going NotReady, a pod deleted), end the
//! pod watch with a `410 Gone` error event, make the Lease fail, and take the whole server away
//! (every request 503, open watches closed) and back.
//!
//! It is not an API server: no authentication, no validation, no field selectors, no paging,
//! one resourceVersion counter for everything. It stands in for one only as far as kube-rs's
//! client and watcher need.

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use axum::Router;
use axum::body::{Body, Bytes};
use axum::http::{Method, StatusCode, Uri};
use axum::response::Response;
use futures::StreamExt;
use serde_json::{Value, json};
use tokio::sync::broadcast;

/// One request as the server saw it.
#[derive(Debug, Clone)]
pub struct Seen {
    pub method: String,
    pub path: String,
    pub query: String,
    pub body: Value,
}

/// What the server holds and what a test can change.
pub struct State {
    pub nodes: Mutex<Vec<Value>>,
    pub pods: Mutex<Vec<Value>>,
    pub groups: Mutex<Vec<Value>>,
    pub queues: Mutex<Vec<Value>>,
    pub priority_classes: Mutex<Vec<Value>>,
    /// Owner kinds served: collection path (`/apis/jobset.x-k8s.io/v1alpha2/jobsets`) → its
    /// objects. The built-in `apps/v1` and `batch/v1` ones are served empty when absent here;
    /// any other collection answers a bare `404 page not found`, as for a CRD not installed.
    pub others: Mutex<BTreeMap<String, Vec<Value>>>,
    pub lease: Mutex<Option<Value>>,
    /// Every Lease request answers 500 while set.
    pub lease_fails: AtomicBool,
    /// Lists wait while set.
    pub hold_lists: AtomicBool,
    /// Every request answers 503 while set (see [`State::go_away`]).
    pub away: AtomicBool,
    /// The resourceVersion when the server last went away: a watch resumed from an older one
    /// is told `410 Gone` (the restarted server has no history before it), so the client lists
    /// again.
    history_from: AtomicU64,
    /// Every request, in order.
    pub requests: Mutex<Vec<Seen>>,
    /// The bodies of the bindings posted: (pod path, body).
    pub bindings: Mutex<Vec<(String, Value)>>,
    /// Watch events: (collection path, event); `None` closes every open watch.
    events: broadcast::Sender<Option<(String, Value)>>,
    version: AtomicU64,
}

impl State {
    /// The next resourceVersion of the server's one counter.
    pub fn next_version(&self) -> String {
        (self.version.fetch_add(1, Ordering::SeqCst) + 1).to_string()
    }

    /// Sends a watch event on the pod watches open now.
    pub fn pod_event(&self, kind: &str, pod: &Value) {
        self.event("/api/v1/pods", kind, pod);
    }

    fn event(&self, path: &str, kind: &str, object: &Value) {
        let _ = self.events.send(Some((
            path.to_string(),
            json!({ "type": kind, "object": object }),
        )));
    }

    /// Changes a node and tells the node watches.
    pub fn change_node(&self, name: &str, change: impl FnOnce(&mut Value)) {
        let node = {
            let mut nodes = self.nodes.lock().unwrap();
            let node = nodes
                .iter_mut()
                .find(|n| n["metadata"]["name"] == name)
                .expect("the node exists");
            change(node);
            node["metadata"]["resourceVersion"] = json!(self.next_version());
            node.clone()
        };
        self.event("/api/v1/nodes", "MODIFIED", &node);
    }

    /// Deletes a pod and tells the pod watches.
    pub fn delete_pod(&self, namespace: &str, name: &str) {
        let pod = {
            let mut pods = self.pods.lock().unwrap();
            let at = pods
                .iter()
                .position(|p| {
                    p["metadata"]["namespace"] == namespace && p["metadata"]["name"] == name
                })
                .expect("the pod exists");
            let mut pod = pods.remove(at);
            pod["metadata"]["resourceVersion"] = json!(self.next_version());
            pod
        };
        self.pod_event("DELETED", &pod);
    }

    /// The server goes away: every request answers 503 and the open watches are closed, as
    /// when an API server restarts behind its load balancer. [`State::come_back`] ends it.
    pub fn go_away(&self) {
        self.away.store(true, Ordering::SeqCst);
        self.history_from
            .store(self.version.load(Ordering::SeqCst) + 1, Ordering::SeqCst);
        let _ = self.events.send(None);
    }

    /// The server answers again.
    pub fn come_back(&self) {
        self.away.store(false, Ordering::SeqCst);
    }

    /// Adds an object to the collection `path` of [`State::others`] and tells its watches.
    pub fn add_other(&self, path: &str, mut object: Value) {
        object["metadata"]["resourceVersion"] = json!(self.next_version());
        let mut others = self.others.lock().unwrap();
        others
            .entry(path.to_string())
            .or_default()
            .push(object.clone());
        drop(others);
        self.event(path, "ADDED", &object);
    }

    /// Changes the object `name` of the collection `path` of [`State::others`] and tells its
    /// watches.
    pub fn change_other(&self, path: &str, name: &str, change: impl FnOnce(&mut Value)) {
        let object = {
            let mut others = self.others.lock().unwrap();
            let object = others
                .get_mut(path)
                .and_then(|items| items.iter_mut().find(|o| o["metadata"]["name"] == name))
                .expect("the object exists");
            change(object);
            object["metadata"]["resourceVersion"] = json!(self.next_version());
            object.clone()
        };
        self.event(path, "MODIFIED", &object);
    }

    /// Adds a pod and tells the pod watches.
    pub fn add_pod(&self, mut pod: Value) {
        pod["metadata"]["resourceVersion"] = json!(self.next_version());
        self.pods.lock().unwrap().push(pod.clone());
        self.pod_event("ADDED", &pod);
    }

    /// Ends every open pod watch with the error a compacted resourceVersion gives: `410 Gone`.
    pub fn expire_pod_watch(&self) {
        self.event(
            "/api/v1/pods",
            "ERROR",
            &json!({ "apiVersion": "v1", "kind": "Status", "status": "Failure", "code": 410,
                     "reason": "Expired", "message": "too old resource version" }),
        );
    }

    /// The bodies of the `method` requests to `path`, in order.
    pub fn bodies(&self, method: &str, path: &str) -> Vec<Value> {
        self.requests
            .lock()
            .unwrap()
            .iter()
            .filter(|r| r.method == method && r.path == path)
            .map(|r| r.body.clone())
            .collect()
    }

    /// How many times `path` was listed (GET without `watch`).
    pub fn lists(&self, path: &str) -> usize {
        self.requests
            .lock()
            .unwrap()
            .iter()
            .filter(|r| r.method == "GET" && r.path == path && !is_watch(&r.query))
            .count()
    }
}

/// The running server.
pub struct FakeApi {
    pub state: Arc<State>,
    pub url: String,
    stop: Option<tokio::sync::oneshot::Sender<()>>,
    thread: Option<std::thread::JoinHandle<()>>,
}

impl Drop for FakeApi {
    fn drop(&mut self) {
        if let Some(stop) = self.stop.take() {
            let _ = stop.send(());
        }
        if let Some(thread) = self.thread.take() {
            let _ = thread.join();
        }
    }
}

impl FakeApi {
    /// Starts serving `nodes` and `pods`.
    pub fn start(nodes: Vec<Value>, pods: Vec<Value>) -> FakeApi {
        FakeApi::start_with_groups(nodes, pods, Vec::new())
    }

    /// Starts serving `nodes`, `pods` and PodGroups.
    pub fn start_with_groups(nodes: Vec<Value>, pods: Vec<Value>, groups: Vec<Value>) -> FakeApi {
        let (events, _) = broadcast::channel(64);
        let state = Arc::new(State {
            nodes: Mutex::new(nodes),
            pods: Mutex::new(pods),
            groups: Mutex::new(groups),
            queues: Mutex::new(Vec::new()),
            priority_classes: Mutex::new(Vec::new()),
            others: Mutex::new(BTreeMap::new()),
            lease: Mutex::new(None),
            lease_fails: AtomicBool::new(false),
            hold_lists: AtomicBool::new(false),
            away: AtomicBool::new(false),
            history_from: AtomicU64::new(0),
            requests: Mutex::new(Vec::new()),
            bindings: Mutex::new(Vec::new()),
            events,
            version: AtomicU64::new(100),
        });
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        listener.set_nonblocking(true).unwrap();
        let url = format!("http://{}", listener.local_addr().unwrap());
        let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
        let s = state.clone();
        let thread = std::thread::spawn(move || {
            let runtime = tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()
                .unwrap();
            runtime.block_on(async move {
                let listener = tokio::net::TcpListener::from_std(listener).unwrap();
                let app = Router::new().fallback(handle).with_state(s);
                tokio::select! {
                    _ = axum::serve(listener, app).into_future() => {}
                    _ = stopped => {}
                }
            });
            // Open watches end with the runtime.
            runtime.shutdown_timeout(Duration::from_millis(100));
        });
        FakeApi {
            state,
            url,
            stop: Some(stop),
            thread: Some(thread),
        }
    }

    /// A kubeconfig that points at this server.
    pub fn kubeconfig(&self) -> String {
        format!(
            "apiVersion: v1\nkind: Config\nclusters:\n- name: fake\n  cluster:\n    server: {}\nusers:\n- name: fake\n  user: {{}}\ncontexts:\n- name: fake\n  context:\n    cluster: fake\n    user: fake\n    namespace: default\ncurrent-context: fake\n",
            self.url
        )
    }
}

fn is_watch(query: &str) -> bool {
    query
        .split('&')
        .any(|kv| kv == "watch=true" || kv == "watch=1")
}

/// Whether `item` matches the query's `labelSelector` (`key=value` terms, comma-separated; the
/// only form the backend sends).
fn selected(item: &Value, query: &str) -> bool {
    let Some(selector) = query
        .split('&')
        .find_map(|kv| kv.strip_prefix("labelSelector="))
    else {
        return true;
    };
    let selector = selector
        .replace("%3D", "=")
        .replace("%2C", ",")
        .replace("%2F", "/");
    selector.split(',').all(|term| match term.split_once('=') {
        Some((key, value)) => item["metadata"]["labels"][key] == value,
        None => false,
    })
}

fn status(code: u16, reason: &str, message: &str) -> Value {
    json!({ "apiVersion": "v1", "kind": "Status", "metadata": {},
            "status": if code < 300 { "Success" } else { "Failure" },
            "code": code, "reason": reason, "message": message })
}

fn answer(code: u16, body: &Value) -> Response {
    Response::builder()
        .status(StatusCode::from_u16(code).unwrap())
        .header("content-type", "application/json")
        .body(Body::from(serde_json::to_vec(body).unwrap()))
        .unwrap()
}

/// Applies a JSON merge patch (RFC 7386): `null` removes a key, objects merge, the rest
/// replaces.
fn merge(target: &mut Value, patch: &Value) {
    let Value::Object(patch) = patch else {
        *target = patch.clone();
        return;
    };
    if !target.is_object() {
        *target = json!({});
    }
    let map = target.as_object_mut().unwrap();
    for (key, value) in patch {
        if value.is_null() {
            map.remove(key);
        } else {
            merge(map.entry(key.clone()).or_insert(Value::Null), value);
        }
    }
}

/// The built-in owner collections a cluster always serves.
const BUILT_IN_OWNERS: [&str; 5] = [
    "/apis/apps/v1/replicasets",
    "/apis/apps/v1/deployments",
    "/apis/apps/v1/statefulsets",
    "/apis/batch/v1/jobs",
    "/apis/batch/v1/cronjobs",
];

/// The collections the server lists and watches: path → (apiVersion, list kind).
fn collection(state: &State, path: &str) -> Option<(String, String)> {
    if BUILT_IN_OWNERS.contains(&path) || state.others.lock().unwrap().contains_key(path) {
        // `/apis/{group}/{version}/{plural}`
        let parts: Vec<&str> = path.trim_start_matches('/').split('/').collect();
        return Some((format!("{}/{}", parts[1], parts[2]), "List".to_string()));
    }
    let (api_version, kind) = match path {
        "/api/v1/nodes" => ("v1", "NodeList"),
        "/api/v1/pods" => ("v1", "PodList"),
        "/apis/scheduling.run.ai/v2alpha2/podgroups" => {
            ("scheduling.run.ai/v2alpha2", "PodGroupList")
        }
        "/apis/scheduling.run.ai/v2/queues" => ("scheduling.run.ai/v2", "QueueList"),
        "/apis/scheduling.k8s.io/v1/priorityclasses" => {
            ("scheduling.k8s.io/v1", "PriorityClassList")
        }
        "/api/v1/namespaces" => ("v1", "NamespaceList"),
        _ => return None,
    };
    Some((api_version.to_string(), kind.to_string()))
}

async fn handle(
    axum::extract::State(state): axum::extract::State<Arc<State>>,
    method: Method,
    uri: Uri,
    body: Bytes,
) -> Response {
    let path = uri.path().to_string();
    let query = uri.query().unwrap_or("").to_string();
    let body: Value = serde_json::from_slice(&body).unwrap_or(Value::Null);
    state.requests.lock().unwrap().push(Seen {
        method: method.to_string(),
        path: path.clone(),
        query: query.clone(),
        body: body.clone(),
    });
    let parts: Vec<&str> = path.trim_start_matches('/').split('/').collect();
    if state.away.load(Ordering::SeqCst) {
        return answer(
            503,
            &status(503, "ServiceUnavailable", "the API server is away"),
        );
    }

    if method == Method::GET
        && let Some((api_version, kind)) = collection(&state, &path)
    {
        if is_watch(&query) {
            let from = query
                .split('&')
                .find_map(|kv| kv.strip_prefix("resourceVersion="))
                .and_then(|v| v.parse::<u64>().ok());
            if from.is_some_and(|v| v < state.history_from.load(Ordering::SeqCst)) {
                return gone_watch();
            }
            return watch(&state, &path);
        }
        while state.hold_lists.load(Ordering::SeqCst) {
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        let items = match path.as_str() {
            "/api/v1/nodes" => state.nodes.lock().unwrap().clone(),
            "/api/v1/pods" => state.pods.lock().unwrap().clone(),
            "/apis/scheduling.run.ai/v2alpha2/podgroups" => state.groups.lock().unwrap().clone(),
            "/apis/scheduling.run.ai/v2/queues" => state.queues.lock().unwrap().clone(),
            "/apis/scheduling.k8s.io/v1/priorityclasses" => {
                state.priority_classes.lock().unwrap().clone()
            }
            other => state
                .others
                .lock()
                .unwrap()
                .get(other)
                .cloned()
                .unwrap_or_default(),
        };
        let items: Vec<Value> = items
            .into_iter()
            .filter(|item| selected(item, &query))
            .collect();
        let version = state.next_version();
        return answer(
            200,
            &json!({ "apiVersion": api_version, "kind": kind,
                     "metadata": { "resourceVersion": version }, "items": items }),
        );
    }

    // POST /apis/scheduling.run.ai/v2alpha2/namespaces/{ns}/podgroups: a new PodGroup (409 if
    // one of that name exists), told to the PodGroup watches.
    if method == Method::POST
        && parts.len() == 6
        && parts[..3] == ["apis", "scheduling.run.ai", "v2alpha2"]
        && parts[5] == "podgroups"
    {
        let mut group = body.clone();
        let name = group["metadata"]["name"].as_str().unwrap_or("").to_string();
        let mut groups = state.groups.lock().unwrap();
        if groups
            .iter()
            .any(|g| g["metadata"]["namespace"] == parts[4] && g["metadata"]["name"] == name)
        {
            return answer(
                409,
                &status(409, "AlreadyExists", "podgroups already exists"),
            );
        }
        group["metadata"]["namespace"] = json!(parts[4]);
        group["metadata"]["uid"] = json!(format!("uid-pg-{name}"));
        group["metadata"]["resourceVersion"] = json!(state.next_version());
        group["metadata"]["creationTimestamp"] = json!("2026-01-01T00:05:00Z");
        groups.push(group.clone());
        drop(groups);
        state.event(
            "/apis/scheduling.run.ai/v2alpha2/podgroups",
            "ADDED",
            &group,
        );
        return answer(201, &group);
    }

    // PATCH /apis/resource.k8s.io/v1/namespaces/{ns}/resourceclaims/{name}/status: a JSON
    // merge patch of a claim in `others`, refused (409) when it names a resourceVersion other
    // than the claim's, as the API server refuses a stale write; told to the claim watches.
    if method == Method::PATCH
        && parts.len() == 8
        && parts[..3] == ["apis", "resource.k8s.io", "v1"]
        && parts[5] == "resourceclaims"
        && parts[7] == "status"
    {
        let claims = "/apis/resource.k8s.io/v1/resourceclaims";
        let claim = {
            let mut others = state.others.lock().unwrap();
            let Some(claim) = others.get_mut(claims).and_then(|items| {
                items.iter_mut().find(|c| {
                    c["metadata"]["namespace"] == parts[4] && c["metadata"]["name"] == parts[6]
                })
            }) else {
                return answer(404, &status(404, "NotFound", "resourceclaims not found"));
            };
            let wanted = &body["metadata"]["resourceVersion"];
            if !wanted.is_null() && *wanted != claim["metadata"]["resourceVersion"] {
                return answer(
                    409,
                    &status(
                        409,
                        "Conflict",
                        "the object has been modified; please apply your changes to the latest version and try again",
                    ),
                );
            }
            merge(&mut claim["status"], &body["status"]);
            claim["metadata"]["resourceVersion"] = json!(state.next_version());
            claim.clone()
        };
        state.event(claims, "MODIFIED", &claim);
        return answer(200, &claim);
    }

    // PATCH /apis/scheduling.run.ai/v2alpha2/namespaces/{ns}/podgroups/{name}: a JSON merge
    // patch of the group (the watch is not told; the next list shows it).
    if method == Method::PATCH
        && parts.len() == 7
        && parts[..3] == ["apis", "scheduling.run.ai", "v2alpha2"]
        && parts[5] == "podgroups"
    {
        let mut groups = state.groups.lock().unwrap();
        let Some(group) = groups
            .iter_mut()
            .find(|g| g["metadata"]["namespace"] == parts[4] && g["metadata"]["name"] == parts[6])
        else {
            return answer(404, &status(404, "NotFound", "podgroups not found"));
        };
        merge(group, &body);
        group["metadata"]["resourceVersion"] = json!(state.next_version());
        return answer(200, group);
    }

    // PATCH /apis/scheduling.run.ai/v2/queues/{name}/status: a JSON merge patch of a Queue
    // that exists; 404 for one that does not.
    if method == Method::PATCH
        && parts.len() == 6
        && parts[..4] == ["apis", "scheduling.run.ai", "v2", "queues"]
        && parts[5] == "status"
    {
        let mut queues = state.queues.lock().unwrap();
        let Some(queue) = queues
            .iter_mut()
            .find(|q| q["metadata"]["name"] == parts[4])
        else {
            return answer(404, &status(404, "NotFound", "queues not found"));
        };
        merge(queue, &body);
        queue["metadata"]["resourceVersion"] = json!(state.next_version());
        return answer(200, queue);
    }

    // Server-side apply and delete of a Queue or a PriorityClass (cluster-scoped).
    let managed = match parts.as_slice() {
        ["apis", "scheduling.run.ai", "v2", "queues", name] => Some((&state.queues, *name)),
        ["apis", "scheduling.k8s.io", "v1", "priorityclasses", name] => {
            Some((&state.priority_classes, *name))
        }
        _ => None,
    };
    if let Some((objects, name)) = managed {
        let mut objects = objects.lock().unwrap();
        let at = objects.iter().position(|o| o["metadata"]["name"] == name);
        return match (method, at) {
            (Method::PATCH, _) if !query.contains("fieldManager=") => answer(
                400,
                &status(400, "BadRequest", "only server-side apply is served"),
            ),
            (Method::PATCH, None) => {
                let mut new = body;
                new["metadata"]["resourceVersion"] = json!(state.next_version());
                objects.push(new.clone());
                answer(201, &new)
            }
            (Method::PATCH, Some(i)) => {
                let old = &mut objects[i];
                if old["kind"] == "PriorityClass" && old["value"] != body["value"] {
                    return answer(
                        422,
                        &status(
                            422,
                            "Invalid",
                            &format!(
                                "PriorityClass.scheduling.k8s.io \"{name}\" is invalid: value: Forbidden: may not be changed in an update."
                            ),
                        ),
                    );
                }
                // The applier is the only manager here: what it applies is what the object is
                // (the server's own fields, such as status, stay).
                let kept_status = old.get("status").cloned();
                *old = body;
                if let Some(s) = kept_status {
                    old["status"] = s;
                }
                old["metadata"]["resourceVersion"] = json!(state.next_version());
                answer(200, old)
            }
            (Method::DELETE, Some(i)) => {
                objects.remove(i);
                answer(200, &status(200, "", ""))
            }
            (Method::DELETE, None) => answer(404, &status(404, "NotFound", "not found")),
            _ => answer(405, &status(405, "MethodNotAllowed", "")),
        };
    }

    // /apis/coordination.k8s.io/v1/namespaces/{ns}/leases[/{name}]
    if parts.len() >= 6
        && parts[..3] == ["apis", "coordination.k8s.io", "v1"]
        && parts[5] == "leases"
    {
        if state.lease_fails.load(Ordering::SeqCst) {
            return answer(500, &status(500, "InternalError", "etcd is away"));
        }
        let mut lease = state.lease.lock().unwrap();
        return match method {
            Method::GET => match &*lease {
                Some(l) => answer(200, l),
                None => answer(404, &status(404, "NotFound", "leases not found")),
            },
            Method::POST | Method::PUT => {
                let mut new = body;
                new["apiVersion"] = json!("coordination.k8s.io/v1");
                new["kind"] = json!("Lease");
                new["metadata"]["resourceVersion"] = json!(state.next_version());
                *lease = Some(new.clone());
                answer(if method == Method::POST { 201 } else { 200 }, &new)
            }
            _ => answer(405, &status(405, "MethodNotAllowed", "")),
        };
    }

    // PATCH /api/v1/namespaces/{ns}/pods/{name}: a JSON merge patch of a pod's metadata (the
    // predicted NUMA placement); the watch is told.
    if method == Method::PATCH
        && parts.len() == 6
        && parts[..2] == ["api", "v1"]
        && parts[4] == "pods"
    {
        let (namespace, name) = (parts[3], parts[5]);
        let patched = {
            let mut pods = state.pods.lock().unwrap();
            pods.iter_mut()
                .find(|p| p["metadata"]["namespace"] == namespace && p["metadata"]["name"] == name)
                .map(|p| {
                    merge(&mut p["metadata"], &body["metadata"]);
                    p["metadata"]["resourceVersion"] = json!(state.next_version());
                    p.clone()
                })
        };
        return match patched {
            Some(pod) => {
                state.pod_event("MODIFIED", &pod);
                answer(200, &pod)
            }
            None => answer(
                404,
                &status(404, "NotFound", &format!("pods \"{name}\" not found")),
            ),
        };
    }

    // /api/v1/namespaces/{ns}/pods/{name}/binding
    if method == Method::POST && parts.len() == 7 && parts[4] == "pods" && parts[6] == "binding" {
        let (namespace, name) = (parts[3], parts[5]);
        let node = body["target"]["name"].as_str().unwrap_or("").to_string();
        state
            .bindings
            .lock()
            .unwrap()
            .push((format!("{namespace}/{name}"), body));
        let bound = {
            let mut pods = state.pods.lock().unwrap();
            let pod = pods
                .iter_mut()
                .find(|p| p["metadata"]["namespace"] == namespace && p["metadata"]["name"] == name);
            match pod {
                None => None,
                Some(p) if p["spec"]["nodeName"].is_string() => {
                    return answer(
                        409,
                        &status(409, "Conflict", &format!("pod {name} is already assigned")),
                    );
                }
                Some(p) => {
                    p["spec"]["nodeName"] = json!(node);
                    p["status"]["phase"] = json!("Running");
                    p["status"]["startTime"] = json!("2026-01-01T00:00:00Z");
                    p["metadata"]["resourceVersion"] = json!(state.next_version());
                    Some(p.clone())
                }
            }
        };
        return match bound {
            Some(pod) => {
                state.pod_event("MODIFIED", &pod);
                answer(201, &status(201, "", ""))
            }
            None => answer(
                404,
                &status(404, "NotFound", &format!("pods \"{name}\" not found")),
            ),
        };
    }

    // /api/v1/namespaces/{ns}/events
    if method == Method::POST && parts.len() == 5 && parts[4] == "events" {
        return answer(201, &body);
    }

    if method == Method::GET && parts.len() == 4 && parts[0] == "apis" {
        // A collection of a group the server does not serve: a real API server answers with
        // plain text, not a Status.
        return Response::builder()
            .status(404)
            .header("content-type", "text/plain; charset=utf-8")
            .body(Body::from("404 page not found\n"))
            .unwrap();
    }
    answer(
        404,
        &status(
            404,
            "NotFound",
            &format!("{method} {path} is not served here"),
        ),
    )
}

/// A watch that ends at once with `410 Gone`: the resourceVersion asked for is older than the
/// server's history.
fn gone_watch() -> Response {
    let event = json!({ "type": "ERROR", "object": {
        "apiVersion": "v1", "kind": "Status", "status": "Failure", "code": 410,
        "reason": "Expired", "message": "too old resource version" } });
    let mut line = serde_json::to_vec(&event).unwrap();
    line.push(b'\n');
    Response::builder()
        .status(200)
        .header("content-type", "application/json")
        .body(Body::from(line))
        .unwrap()
}

/// A watch: the events the test sends for this collection (Nodes and Pods), until an error
/// event or the server going away ends it; for the other kinds, nothing, held open until then.
fn watch(state: &State, path: &str) -> Response {
    let rx = state.events.subscribe();
    let path = path.to_string();
    let events = futures::stream::unfold((rx, false), move |(mut rx, ended)| {
        let path = path.clone();
        async move {
            if ended {
                return None;
            }
            loop {
                match rx.recv().await {
                    Ok(Some((at, event))) if at == path => {
                        let ended = event["type"] == "ERROR";
                        let mut line = serde_json::to_vec(&event).unwrap();
                        line.push(b'\n');
                        return Some((
                            Ok::<_, std::convert::Infallible>(Bytes::from(line)),
                            (rx, ended),
                        ));
                    }
                    Ok(Some(_)) | Err(broadcast::error::RecvError::Lagged(_)) => continue,
                    Ok(None) | Err(broadcast::error::RecvError::Closed) => return None,
                }
            }
        }
    })
    .boxed();
    Response::builder()
        .status(200)
        .header("content-type", "application/json")
        .body(Body::from_stream(events))
        .unwrap()
}
