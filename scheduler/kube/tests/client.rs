//! The exact API requests the backend makes, and what it makes of the answers, against a
//! `tower-test` mock service standing in for the API server (as kube-rs tests its own client).

use std::time::Duration;

use http::{Method, Request, Response, StatusCode};
use k8s_openapi::api::coordination::v1::Lease;
use k8s_openapi::jiff::Timestamp;
use kai_scheduler_kube::access;
use kai_scheduler_kube::calls::{self, Call, Managed, QueueNumbers};
use kai_scheduler_kube::client::{Limits, Outcome, Sender, Sent};
use kai_scheduler_kube::lease::{self, Election, Leading, Step, step};
use kube::client::Body;
use serde_json::{Value, json};
use tower_test::mock::{self, Handle};

type ApiServer = Handle<Request<Body>, Response<Body>>;

fn mock_client() -> (kube::Client, ApiServer) {
    let (service, handle) = mock::pair::<Request<Body>, Response<Body>>();
    (kube::Client::new(service, "default"), handle)
}

/// One request as the API server saw it.
#[derive(Debug)]
struct Seen {
    method: Method,
    path: String,
    query: String,
    content_type: Option<String>,
    body: Value,
}

/// Takes the next request and answers it with `status` and `body`.
async fn answer(server: &mut ApiServer, status: u16, body: Value) -> Seen {
    let (request, respond) = server.next_request().await.expect("a request");
    let (parts, body_in) = request.into_parts();
    let bytes = body_in.collect_bytes().await.unwrap();
    let seen = Seen {
        method: parts.method,
        path: parts.uri.path().to_string(),
        query: parts.uri.query().unwrap_or("").to_string(),
        content_type: parts
            .headers
            .get("content-type")
            .map(|v| v.to_str().unwrap().to_string()),
        body: if bytes.is_empty() {
            Value::Null
        } else {
            serde_json::from_slice(&bytes).unwrap()
        },
    };
    let response = Response::builder()
        .status(StatusCode::from_u16(status).unwrap())
        .header("content-type", "application/json")
        .body(Body::from(serde_json::to_vec(&body).unwrap()))
        .unwrap();
    respond.send_response(response);
    seen
}

/// The body the API server sends with a refusal.
fn failure(code: u16, reason: &str, message: &str) -> Value {
    json!({ "apiVersion": "v1", "kind": "Status", "status": "Failure", "code": code,
            "reason": reason, "message": message })
}

fn success() -> Value {
    json!({ "apiVersion": "v1", "kind": "Status", "status": "Success", "code": 201 })
}

/// Sends `calls` while the test's server answers each request with `answers` in order.
async fn exchange(calls: Vec<Call>, answers: Vec<(u16, Value)>) -> (Vec<Sent>, Vec<Seen>) {
    let (client, mut server) = mock_client();
    let sender = Sender::new(
        client,
        Limits {
            parallel: 1,
            per_second: 1000,
        },
    );
    let serve = tokio::spawn(async move {
        let mut seen = Vec::new();
        for (status, body) in answers {
            seen.push(answer(&mut server, status, body).await);
        }
        // Nothing more may come (no retry, no forced delete).
        let more = tokio::time::timeout(Duration::from_millis(100), server.next_request()).await;
        assert!(more.is_err(), "an unexpected further request");
        seen
    });
    let sent = sender.send(calls).await;
    (sent, serve.await.unwrap())
}

#[tokio::test]
async fn a_bind_posts_the_binding_to_the_pods_binding_subresource() {
    let (sent, seen) = exchange(
        vec![calls::bind("team-a/p0", "node-1")],
        vec![(201, success())],
    )
    .await;
    assert_eq!(sent[0].outcome, Outcome::Done);
    assert_eq!(seen[0].method, Method::POST);
    assert_eq!(seen[0].path, "/api/v1/namespaces/team-a/pods/p0/binding");
    assert_eq!(
        seen[0].body,
        json!({ "apiVersion": "v1", "kind": "Binding",
                "metadata": { "name": "p0", "namespace": "team-a" },
                "target": { "apiVersion": "v1", "kind": "Node", "name": "node-1" } })
    );
}

/// A bind of a pod with a DRA claim to write first.
fn bind_with_claim() -> Call {
    let mut bind = calls::bind("team-a/p0", "node-1");
    if let Call::Bind { claims, .. } = &mut bind {
        claims.push(calls::ClaimWrite {
            name: "p0-gpu".into(),
            patch: json!({ "metadata": { "resourceVersion": "7" }, "status": { "reservedFor": [] } }),
            allocation: None,
        });
    }
    bind
}

#[tokio::test]
async fn a_bind_writes_its_claims_status_first_and_not_at_all_when_that_fails() {
    let claim = json!({ "apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaim",
                        "metadata": { "name": "p0-gpu", "namespace": "team-a" }, "spec": {} });
    let (sent, seen) = exchange(
        vec![bind_with_claim()],
        vec![(200, claim), (201, success())],
    )
    .await;
    assert_eq!(sent[0].outcome, Outcome::Done);
    let got: Vec<(Method, &str, Option<&str>)> = seen
        .iter()
        .map(|s| (s.method.clone(), s.path.as_str(), s.content_type.as_deref()))
        .collect();
    assert_eq!(
        got,
        [
            (
                Method::PATCH,
                "/apis/resource.k8s.io/v1/namespaces/team-a/resourceclaims/p0-gpu/status",
                Some("application/merge-patch+json")
            ),
            (
                Method::POST,
                "/api/v1/namespaces/team-a/pods/p0/binding",
                Some("application/json")
            ),
        ]
    );
    // The claim changed since the caches read it: the pod is not bound.
    let (sent, seen) = exchange(
        vec![bind_with_claim()],
        vec![(
            409,
            failure(409, "Conflict", "the object has been modified"),
        )],
    )
    .await;
    assert_eq!(
        sent[0].outcome,
        Outcome::Conflict("the object has been modified".into())
    );
    assert_eq!(seen.len(), 1, "no binding is posted: {seen:?}");
}

#[tokio::test]
async fn a_bind_records_the_predicted_numa_zones_on_the_pod_first() {
    let record = r#"[{"amount":{"cpu":"3"},"zone":"node-0"}]"#;
    let mut bind = calls::bind("team-a/p0", "node-1");
    if let Call::Bind { numa, .. } = &mut bind {
        *numa = Some(record.into());
    }
    let pod = json!({ "apiVersion": "v1", "kind": "Pod",
                      "metadata": { "name": "p0", "namespace": "team-a" } });
    let (sent, seen) = exchange(vec![bind.clone()], vec![(200, pod), (201, success())]).await;
    assert_eq!(sent[0].outcome, Outcome::Done);
    assert_eq!(seen[0].method, Method::PATCH);
    assert_eq!(seen[0].path, "/api/v1/namespaces/team-a/pods/p0");
    assert_eq!(
        seen[0].content_type.as_deref(),
        Some("application/merge-patch+json")
    );
    assert_eq!(
        seen[0].body,
        json!({ "metadata": { "annotations": {
            "kai.scheduler/numa-placement-predicted": record } } })
    );
    assert_eq!(seen[1].path, "/api/v1/namespaces/team-a/pods/p0/binding");
    // A pod that cannot be annotated is not bound.
    let (sent, seen) = exchange(
        vec![bind.clone()],
        vec![(404, failure(404, "NotFound", "pods \"p0\" not found"))],
    )
    .await;
    assert_ne!(sent[0].outcome, Outcome::Done);
    assert_eq!(seen.len(), 1, "no binding is posted: {seen:?}");
    // A refusal names the permission of the patch, not the binding's.
    let (sent, _) = exchange(
        vec![bind],
        vec![(403, failure(403, "Forbidden", "pods \"p0\" is forbidden"))],
    )
    .await;
    assert_eq!(sent[0].outcome, Outcome::Forbidden(access::POD_ANNOTATE));
}

#[tokio::test]
async fn a_bind_that_conflicts_or_finds_the_pod_gone_is_reported_not_retried() {
    let (sent, _) = exchange(
        vec![calls::bind("ns/a", "n1"), calls::bind("ns/b", "n1")],
        vec![
            (
                409,
                failure(409, "Conflict", "pod a is already assigned to node n2"),
            ),
            (404, failure(404, "NotFound", "pods \"b\" not found")),
        ],
    )
    .await;
    assert_eq!(
        sent[0].outcome,
        Outcome::Conflict("pod a is already assigned to node n2".into())
    );
    assert_eq!(
        sent[1].outcome,
        Outcome::Gone("pods \"b\" not found".into())
    );
}

#[tokio::test]
async fn an_eviction_posts_a_policy_v1_eviction_with_the_grace_period() {
    let (sent, seen) = exchange(vec![calls::evict("team-b/old", 45)], vec![(201, success())]).await;
    assert_eq!(sent[0].outcome, Outcome::Done);
    assert_eq!(
        (seen[0].method.clone(), seen[0].path.as_str()),
        (Method::POST, "/api/v1/namespaces/team-b/pods/old/eviction")
    );
    assert_eq!(
        seen[0].body,
        json!({ "apiVersion": "policy/v1", "kind": "Eviction",
                "metadata": { "name": "old", "namespace": "team-b" },
                "deleteOptions": { "gracePeriodSeconds": 45 } })
    );
}

#[tokio::test]
async fn an_eviction_a_disruption_budget_refuses_is_reported_and_never_forced() {
    let message = "Cannot evict pod as it would violate the pod's disruption budget.";
    let (sent, seen) = exchange(
        vec![calls::evict("team-b/old", 30)],
        vec![(429, failure(429, "TooManyRequests", message))],
    )
    .await;
    // One request: no delete follows the refusal (`exchange` checks nothing more came).
    assert_eq!(seen.len(), 1);
    assert_eq!(sent[0].outcome, Outcome::RefusedByBudget(message.into()));
    assert!(
        sent[0]
            .to_string()
            .starts_with("evict team-b/old: refused by a PodDisruptionBudget"),
        "{}",
        sent[0]
    );
}

#[tokio::test]
async fn a_missing_permission_names_it() {
    let (sent, _) = exchange(
        vec![calls::bind("ns/p", "n")],
        vec![(403, failure(403, "Forbidden", "forbidden"))],
    )
    .await;
    assert_eq!(sent[0].outcome, Outcome::Forbidden(access::BIND));
    assert!(
        sent[0]
            .to_string()
            .contains("may not create pods/binding (core)"),
        "{}",
        sent[0]
    );
}

#[tokio::test]
async fn status_patches_go_to_the_status_subresources_with_the_right_patch_types() {
    let queue = calls::queue_status_patch(&QueueNumbers {
        name: "team-a".into(),
        allocated: Default::default(),
        requested: Default::default(),
        fair_share: Default::default(),
    });
    let group = Call::PodGroupStatus {
        namespace: "ns".into(),
        name: "g".into(),
        patch: json!({ "status": { "schedulingConditions": null } }),
    };
    let condition = Call::PodCondition {
        namespace: "ns".into(),
        pod: "p".into(),
        patch: json!({ "status": { "conditions": [] } }),
    };
    // The API server answers a patch with the object patched.
    let object = |api_version: &str, kind: &str| json!({ "apiVersion": api_version, "kind": kind, "metadata": { "name": "x" }, "spec": {} });
    let (sent, seen) = exchange(
        vec![queue.clone(), group, condition],
        vec![
            (200, object("scheduling.run.ai/v2", "Queue")),
            (200, object("scheduling.run.ai/v2alpha2", "PodGroup")),
            (200, object("v1", "Pod")),
        ],
    )
    .await;
    assert!(sent.iter().all(|s| s.outcome == Outcome::Done), "{sent:?}");
    let got: Vec<(Method, &str, Option<&str>)> = seen
        .iter()
        .map(|s| (s.method.clone(), s.path.as_str(), s.content_type.as_deref()))
        .collect();
    assert_eq!(
        got,
        [
            (
                Method::PATCH,
                "/apis/scheduling.run.ai/v2/queues/team-a/status",
                Some("application/merge-patch+json")
            ),
            (
                Method::PATCH,
                "/apis/scheduling.run.ai/v2alpha2/namespaces/ns/podgroups/g/status",
                Some("application/merge-patch+json")
            ),
            (
                Method::PATCH,
                "/api/v1/namespaces/ns/pods/p/status",
                Some("application/strategic-merge-patch+json")
            ),
        ]
    );
    let Call::QueueStatus { patch, .. } = queue else {
        unreachable!()
    };
    assert_eq!(seen[0].body, patch);
}

#[tokio::test]
async fn apply_is_a_forced_server_side_apply_by_kai_policy_and_prune_a_delete() {
    let queue = json!({
        "apiVersion": "scheduling.run.ai/v2", "kind": "Queue",
        "metadata": { "name": "a", "labels": { "app.kubernetes.io/managed-by": "kai-policy" } },
        "spec": { "resources": { "gpu": { "quota": 4.0, "limit": -1.0, "overQuotaWeight": 1.0 } } }
    });
    let (sent, seen) = exchange(
        vec![
            Call::Apply {
                kind: Managed::Queue,
                name: "a".into(),
                object: queue.clone(),
            },
            Call::Prune {
                kind: Managed::PriorityClass,
                name: "old".into(),
            },
        ],
        vec![
            (200, queue.clone()),
            (
                200,
                json!({ "apiVersion": "v1", "kind": "Status", "status": "Success", "code": 200 }),
            ),
        ],
    )
    .await;
    assert_eq!(seen[0].method, Method::PATCH);
    assert_eq!(seen[0].path, "/apis/scheduling.run.ai/v2/queues/a");
    let query: Vec<&str> = seen[0]
        .query
        .split('&')
        .filter(|kv| !kv.is_empty())
        .collect();
    assert_eq!(query.len(), 2, "{query:?}");
    assert!(query.contains(&"force=true") && query.contains(&"fieldManager=kai-policy"));
    assert_eq!(
        seen[0].content_type.as_deref(),
        Some("application/apply-patch+yaml")
    );
    assert_eq!(seen[0].body, queue);
    assert_eq!(seen[1].method, Method::DELETE);
    assert_eq!(
        seen[1].path,
        "/apis/scheduling.k8s.io/v1/priorityclasses/old"
    );
    assert!(sent.iter().all(|s| s.outcome == Outcome::Done), "{sent:?}");
}

#[tokio::test]
async fn no_more_calls_are_in_flight_than_the_limit() {
    let (client, mut server) = mock_client();
    let sender = Sender::new(
        client,
        Limits {
            parallel: 2,
            per_second: 1000,
        },
    );
    let calls: Vec<Call> = (0..4)
        .map(|i| calls::bind(&format!("ns/p{i}"), "n"))
        .collect();
    let sending = tokio::spawn(async move { sender.send(calls).await });
    let (_, first) = server.next_request().await.unwrap();
    let (_, second) = server.next_request().await.unwrap();
    let third = tokio::time::timeout(Duration::from_millis(200), server.next_request()).await;
    assert!(third.is_err(), "a third request while two are unanswered");
    let ok = || {
        Response::builder()
            .status(201)
            .body(Body::from(serde_json::to_vec(&success()).unwrap()))
            .unwrap()
    };
    first.send_response(ok());
    second.send_response(ok());
    for _ in 0..2 {
        let (_, respond) = server.next_request().await.unwrap();
        respond.send_response(ok());
    }
    let sent = sending.await.unwrap();
    assert_eq!(sent.len(), 4);
    assert!(sent.iter().all(|s| s.outcome == Outcome::Done));
}

#[tokio::test(start_paused = true)]
async fn calls_start_no_faster_than_the_rate_limit() {
    let (client, mut server) = mock_client();
    let sender = Sender::new(
        client,
        Limits {
            parallel: 10,
            per_second: 2,
        },
    );
    let calls: Vec<Call> = (0..5)
        .map(|i| calls::bind(&format!("ns/p{i}"), "n"))
        .collect();
    let start = tokio::time::Instant::now();
    let serve = tokio::spawn(async move {
        let mut at = Vec::new();
        for _ in 0..5 {
            answer(&mut server, 201, success()).await;
            at.push(start.elapsed());
        }
        at
    });
    sender.send(calls).await;
    let at = serve.await.unwrap();
    // Two a second: the fifth starts two seconds after the first (virtual time).
    assert!(at[4] >= Duration::from_secs(2), "{at:?}");
    assert!(at[4] < Duration::from_millis(2100), "{at:?}");
}

// --- Leader election ---------------------------------------------------------------------------

fn election() -> Election {
    Election {
        namespace: "kai-system".into(),
        name: "kai-scheduler".into(),
        identity: "replica-a".into(),
        duration: Duration::from_secs(15),
        period: Duration::from_secs(5),
    }
}

fn held_by(holder: &str, renewed: &str, transitions: i32) -> Lease {
    serde_json::from_value(json!({
        "metadata": { "name": "kai-scheduler", "namespace": "kai-system", "resourceVersion": "41" },
        "spec": { "holderIdentity": holder, "leaseDurationSeconds": 15,
                  "acquireTime": "2026-05-01T11:00:00.000000Z", "renewTime": renewed,
                  "leaseTransitions": transitions },
    }))
    .unwrap()
}

fn at(t: &str) -> Timestamp {
    t.parse().unwrap()
}

#[test]
fn the_lease_is_taken_when_absent_or_expired_renewed_when_ours_and_followed_otherwise() {
    let e = election();
    let now = at("2026-05-01T12:00:10Z");
    let Step::Create(created) = step(&e, None, now) else {
        panic!("no lease: create it")
    };
    let spec = created.spec.unwrap();
    assert_eq!(spec.holder_identity.as_deref(), Some("replica-a"));
    assert_eq!(spec.lease_duration_seconds, Some(15));

    // Another replica renewed 9 s ago (< 15 s): follow it.
    let fresh = held_by("replica-b", "2026-05-01T12:00:01.000000Z", 3);
    assert_eq!(
        step(&e, Some(&fresh), now),
        Step::Follow {
            holder: "replica-b".into()
        }
    );
    // Renewed exactly 15 s ago: expired, take it over, counting the transition.
    let stale = held_by("replica-b", "2026-05-01T11:59:55.000000Z", 3);
    let Step::Update(taken) = step(&e, Some(&stale), now) else {
        panic!("expired: take it")
    };
    let spec = taken.spec.unwrap();
    assert_eq!(spec.holder_identity.as_deref(), Some("replica-a"));
    assert_eq!(spec.lease_transitions, Some(4));
    assert_eq!(spec.acquire_time.unwrap().0, now);
    assert_eq!(
        taken.metadata.resource_version.as_deref(),
        Some("41"),
        "written against what was read"
    );

    // Ours: renew without a transition.
    let ours = held_by("replica-a", "2026-05-01T12:00:05.000000Z", 4);
    let Step::Update(renewed) = step(&e, Some(&ours), now) else {
        panic!("ours: renew")
    };
    let spec = renewed.spec.unwrap();
    assert_eq!(spec.lease_transitions, Some(4));
    assert_eq!(spec.renew_time.unwrap().0, now);
    assert_eq!(spec.acquire_time.unwrap().0, at("2026-05-01T11:00:00Z"));
}

#[test]
fn a_released_lease_is_taken_at_once() {
    // What `lease::release` leaves: no holder. Another replica takes it without waiting out
    // the duration, even though it was renewed a moment ago.
    let mut released = held_by("replica-b", "2026-05-01T12:00:09.000000Z", 3);
    released.spec.as_mut().unwrap().holder_identity = None;
    let Step::Update(taken) = step(&election(), Some(&released), at("2026-05-01T12:00:10Z")) else {
        panic!("released: take it")
    };
    let spec = taken.spec.unwrap();
    assert_eq!(spec.holder_identity.as_deref(), Some("replica-a"));
    assert_eq!(spec.lease_transitions, Some(4));
}

#[tokio::test]
async fn the_leader_releases_its_lease_and_leaves_anothers_alone() {
    let (client, mut server) = mock_client();
    let api = leases(client);
    let release = tokio::spawn(async move { lease::release(&api, &election()).await });
    let mine = held_by("replica-a", "2026-05-01T12:00:09.000000Z", 2);
    answer(&mut server, 200, serde_json::to_value(&mine).unwrap()).await;
    let update = answer(&mut server, 200, json!({})).await;
    assert_eq!(
        (update.method, update.path.as_str()),
        (Method::PUT, LEASE_PATH)
    );
    assert_eq!(update.body["metadata"]["resourceVersion"], "41");
    assert!(
        update.body["spec"].get("holderIdentity").is_none(),
        "{}",
        update.body
    );
    assert_eq!(update.body["spec"]["leaseDurationSeconds"], 1);
    assert_eq!(update.body["spec"]["leaseTransitions"], 2);
    assert_eq!(release.await.unwrap(), Ok(true));

    // Held by another replica (it took over meanwhile): nothing is written.
    let (client, mut server) = mock_client();
    let api = leases(client);
    let release = tokio::spawn(async move { lease::release(&api, &election()).await });
    let theirs = held_by("replica-b", "2026-05-01T12:00:09.000000Z", 3);
    answer(&mut server, 200, serde_json::to_value(&theirs).unwrap()).await;
    assert_eq!(release.await.unwrap(), Ok(false));
}

fn leases(client: kube::Client) -> kube::Api<Lease> {
    kube::Api::namespaced(client, "kai-system")
}

const LEASE_PATH: &str = "/apis/coordination.k8s.io/v1/namespaces/kai-system/leases/kai-scheduler";

#[tokio::test]
async fn a_replica_creates_the_missing_lease_and_leads() {
    let (client, mut server) = mock_client();
    let round = tokio::spawn(async move { lease::round(&leases(client), &election()).await });
    let get = answer(&mut server, 404, failure(404, "NotFound", "not found")).await;
    assert_eq!((get.method, get.path.as_str()), (Method::GET, LEASE_PATH));
    let create = answer(&mut server, 201, json!({})).await;
    assert_eq!(create.method, Method::POST);
    assert_eq!(
        create.path,
        "/apis/coordination.k8s.io/v1/namespaces/kai-system/leases"
    );
    assert_eq!(create.body["spec"]["holderIdentity"], "replica-a");
    assert_eq!(round.await.unwrap(), Leading::Yes);
}

#[tokio::test]
async fn the_leader_renews_with_an_update_of_what_it_read() {
    let (client, mut server) = mock_client();
    let round = tokio::spawn(async move { lease::round(&leases(client), &election()).await });
    let now = Timestamp::now();
    let mine = held_by("replica-a", &format!("{now:.6}"), 1);
    answer(&mut server, 200, serde_json::to_value(&mine).unwrap()).await;
    let update = answer(&mut server, 200, json!({})).await;
    assert_eq!(
        (update.method, update.path.as_str()),
        (Method::PUT, LEASE_PATH)
    );
    assert_eq!(update.body["metadata"]["resourceVersion"], "41");
    assert_eq!(update.body["spec"]["holderIdentity"], "replica-a");
    assert_eq!(round.await.unwrap(), Leading::Yes);
}

#[tokio::test]
async fn a_replica_that_loses_the_race_or_the_server_does_not_lead() {
    // Another replica wrote first: the update of the expired lease is refused with 409.
    let (client, mut server) = mock_client();
    let round = tokio::spawn(async move { lease::round(&leases(client), &election()).await });
    let expired = held_by("replica-b", "2020-01-01T00:00:00.000000Z", 1);
    answer(&mut server, 200, serde_json::to_value(&expired).unwrap()).await;
    answer(
        &mut server,
        409,
        failure(409, "Conflict", "the object has been modified"),
    )
    .await;
    let result = round.await.unwrap();
    assert_eq!(
        result,
        Leading::Unknown(Outcome::Conflict("the object has been modified".into()))
    );
    assert!(!result.leads());

    // The API server fails the read: not leading either.
    let (client, mut server) = mock_client();
    let round = tokio::spawn(async move { lease::round(&leases(client), &election()).await });
    answer(&mut server, 500, failure(500, "InternalError", "etcd down")).await;
    assert!(!round.await.unwrap().leads());
}

#[tokio::test]
async fn a_fresh_lease_of_another_replica_is_followed_without_writing() {
    let (client, mut server) = mock_client();
    let round = tokio::spawn(async move { lease::round(&leases(client), &election()).await });
    let theirs = held_by("replica-b", &format!("{:.6}", Timestamp::now()), 1);
    answer(&mut server, 200, serde_json::to_value(&theirs).unwrap()).await;
    assert_eq!(
        round.await.unwrap(),
        Leading::No {
            holder: "replica-b".into()
        }
    );
    // The round is over and the client gone: the server sees no further request.
    let more = tokio::time::timeout(Duration::from_millis(100), server.next_request()).await;
    assert!(!matches!(more, Ok(Some(_))), "a follower writes nothing");
}

#[tokio::test(start_paused = true)]
async fn the_leader_stops_leading_at_the_first_renewal_that_fails() {
    let (client, mut server) = mock_client();
    let (tx, mut rx) = tokio::sync::watch::channel(Leading::No {
        holder: String::new(),
    });
    let task = tokio::spawn(lease::run(leases(client), election(), tx));
    // Round 1: no lease, create it.
    answer(&mut server, 404, failure(404, "NotFound", "not found")).await;
    answer(&mut server, 201, json!({})).await;
    rx.changed().await.unwrap();
    assert!(rx.borrow().leads());
    // Round 2, one period later: the server is gone.
    answer(&mut server, 503, failure(503, "ServiceUnavailable", "down")).await;
    rx.changed().await.unwrap();
    assert!(!rx.borrow().leads());
    drop(rx);
    task.abort();
}

#[tokio::test(start_paused = true)]
async fn a_renewal_that_hangs_stops_the_leader_after_one_period() {
    let (client, mut server) = mock_client();
    let (tx, mut rx) = tokio::sync::watch::channel(Leading::No {
        holder: String::new(),
    });
    let task = tokio::spawn(lease::run(leases(client), election(), tx));
    answer(&mut server, 404, failure(404, "NotFound", "not found")).await;
    answer(&mut server, 201, json!({})).await;
    rx.changed().await.unwrap();
    assert!(rx.borrow().leads());
    // Round 2: the API server takes the request and never answers.
    let (_request, _never_answered) = server.next_request().await.expect("the renewal's read");
    let started = tokio::time::Instant::now();
    rx.changed().await.unwrap();
    assert!(
        matches!(&*rx.borrow(), Leading::Unknown(Outcome::Failed(0, m)) if m.contains("longer than the renewal period")),
        "{:?}",
        *rx.borrow()
    );
    assert!(
        started.elapsed() <= election().period,
        "{:?}",
        started.elapsed()
    );
    drop(rx);
    task.abort();
}
