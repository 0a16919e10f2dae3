"""The secure port's gate (telemetry/access.py): the pure rules in tables, then the Gate step by step
with a recorded `post` (the API server's answers as it writes them) and a fake clock for the caches."""

from __future__ import annotations

import asyncio
from collections.abc import Mapping
from typing import Any

import pytest

from kopf_scheduler.telemetry.access import (
    ACCESS_REVIEWS,
    DELEGATED_AUDIENCE,
    TOKEN_REVIEWS,
    AccessPolicy,
    Gate,
    Presented,
    TtlCache,
    User,
    Verdict,
    access_review_body,
    access_review_decision,
    bearer_token,
    certificate_user,
    path_allowed,
    path_pattern_errors,
    presented,
    token_review_body,
    token_review_user,
)

ALICE_CERT = {"subject": ((("organizationName", "devs"),), (("commonName", "alice"),), (("organizationName", "ops"),))}


# --- what a request brings ---------------------------------------------------------------------


@pytest.mark.parametrize(
    ("header", "token"),
    [
        pytest.param("Bearer abc.def", "abc.def", id="bearer"),
        pytest.param("bearer abc", "abc", id="scheme in any case"),
        pytest.param("  Bearer   abc  ", "abc", id="spaces around"),
        pytest.param("Bearer", "", id="no token"),
        pytest.param("Bearer a b", "", id="two words"),
        pytest.param("Basic dXNlcjpwYXNz", "", id="another scheme"),
        pytest.param(None, "", id="no header"),
    ],
)
def test_bearer_token(header: str | None, token: str) -> None:
    assert bearer_token(header) == token


@pytest.mark.parametrize(
    ("cert", "user"),
    [
        pytest.param(ALICE_CERT, User("alice", groups=("devs", "ops")), id="CN is the user, O the groups"),
        pytest.param({"subject": ((("organizationName", "devs"),),)}, None, id="no CommonName: no user"),
        pytest.param({}, None, id="no certificate verified (CERT_NONE gives {})"),
        pytest.param(None, None, id="no certificate"),
    ],
)
def test_certificate_user(cert: Mapping[str, Any] | None, user: User | None) -> None:
    assert certificate_user(cert) == user


@pytest.mark.parametrize(
    ("authorization", "delegated", "cert", "expected"),
    [
        pytest.param(
            "Bearer t1", "Bearer t2", ALICE_CERT, Presented(certificate=User("alice", groups=("devs", "ops"))),
            id="a verified certificate comes first",
        ),
        pytest.param("Bearer t1", "Bearer t2", None, Presented(token="t1"), id="then the Authorization header"),
        pytest.param(
            None, "Bearer t2", None, Presented(token="t2", audiences=(DELEGATED_AUDIENCE,)),
            id="then the plugin's header, reviewed for its audience only",
        ),
        pytest.param("Basic x", None, None, Presented(), id="nothing usable"),
    ],
)  # fmt: skip
def test_presented_tries_certificate_then_token_then_the_delegated_header(
    authorization: str | None, delegated: str | None, cert: Mapping[str, Any] | None, expected: Presented
) -> None:
    assert presented(authorization=authorization, delegated=delegated, peer_certificate=cert) == expected


@pytest.mark.parametrize(
    ("path", "patterns", "allowed"),
    [
        pytest.param("/healthz", ("/healthz", "/readyz"), True, id="exact"),
        pytest.param("/healthz/ping", ("/healthz",), False, id="exact is not a prefix"),
        pytest.param("/healthz/ping", ("/healthz/*",), True, id="trailing star: a prefix"),
        pytest.param("/healthzz", ("/healthz*",), True, id="a prefix of the name too, as upstream"),
        pytest.param("/metrics", ("metrics",), True, id="leading slash optional in the pattern"),
        pytest.param("/", ("/",), True, id="the root"),
        pytest.param("/metrics", (), False, id="nothing allowed"),
        pytest.param("/debug/attempts/a/b", ("/healthz", "/readyz", "/livez"), False, id="defaults keep /debug"),
    ],
)
def test_path_allowed_is_upstreams_path_authorizer(path: str, patterns: tuple[str, ...], allowed: bool) -> None:
    assert path_allowed(path, patterns) is allowed


def test_path_patterns_allow_only_a_trailing_star() -> None:
    assert path_pattern_errors(["/healthz", "/debug/*", "*"]) == []
    assert path_pattern_errors(["/a*/b"]) == ["only a trailing * is allowed in '/a*/b'"]


# --- the reviews' bodies and answers -----------------------------------------------------------


def test_review_bodies_are_the_api_servers_kinds() -> None:
    assert token_review_body("t") == {
        "apiVersion": "authentication.k8s.io/v1", "kind": "TokenReview", "spec": {"token": "t"},
    }  # fmt: skip
    assert token_review_body("t", ["kopf-scheduler"])["spec"] == {"token": "t", "audiences": ["kopf-scheduler"]}
    user = User("system:serviceaccount:ns:sa", uid="u1", groups=("system:serviceaccounts",), extra=(("k", ("v",)),))
    assert access_review_body(user, "get", "/metrics") == {
        "apiVersion": "authorization.k8s.io/v1",
        "kind": "SubjectAccessReview",
        "spec": {
            "user": "system:serviceaccount:ns:sa",
            "uid": "u1",
            "groups": ["system:serviceaccounts"],
            "extra": {"k": ["v"]},
            "nonResourceAttributes": {"path": "/metrics", "verb": "get"},
        },
    }
    assert access_review_body(User("bob"), "get", "/x")["spec"] == {
        "user": "bob", "nonResourceAttributes": {"path": "/x", "verb": "get"},
    }  # fmt: skip


def reviewed(username: str = "", *, audiences: list[str] | None = None, error: str = "") -> dict[str, Any]:
    """A TokenReview's answer as the API server writes it."""
    if not username:
        return {"kind": "TokenReview", "status": {"authenticated": False, **({"error": error} if error else {})}}
    status: dict[str, Any] = {
        "authenticated": True,
        "user": {"username": username, "uid": "u-" + username, "groups": ["system:authenticated"],
                 "extra": {"authentication.kubernetes.io/pod-name": ["p"]}},
    }  # fmt: skip
    if audiences is not None:
        status["audiences"] = audiences
    return {"kind": "TokenReview", "status": status}


def test_token_review_answers() -> None:
    user, why = token_review_user(reviewed("alice"))
    assert user == User(
        "alice",
        uid="u-alice",
        groups=("system:authenticated",),
        extra=(("authentication.kubernetes.io/pod-name", ("p",)),),
    )
    assert why == ""
    assert token_review_user(reviewed(error="token expired")) == (None, "token expired")
    assert token_review_user(reviewed()) == (None, "the token was not authenticated")
    assert token_review_user(reviewed("a", audiences=["kopf-scheduler"]), ["kopf-scheduler"])[0] is not None
    assert token_review_user(reviewed("a", audiences=["https://kubernetes.default.svc"]), ["kopf-scheduler"]) == (
        None,
        "the token is not for audience kopf-scheduler",
    )


@pytest.mark.parametrize(
    ("status", "decision"),
    [
        pytest.param({"allowed": True}, (True, ""), id="allowed"),
        pytest.param({"allowed": True, "reason": 'RBAC: allowed by ClusterRoleBinding "x"'},
                     (True, 'RBAC: allowed by ClusterRoleBinding "x"'), id="allowed with a reason"),
        pytest.param({"allowed": False}, (False, ""), id="no opinion"),
        pytest.param({"allowed": False, "denied": True, "reason": "no"}, (False, "no"), id="denied"),
        pytest.param({"allowed": True, "denied": True}, (False, ""), id="both: denied, as upstream"),
    ],
)  # fmt: skip
def test_access_review_decision(status: dict[str, Any], decision: tuple[bool, str]) -> None:
    assert access_review_decision({"status": status}) == decision


def test_verdict_status_is_a_v1_status() -> None:
    assert Verdict(401, "Unauthorized").status() == {
        "kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure",
        "message": "Unauthorized", "reason": "Unauthorized", "code": 401,
    }  # fmt: skip
    assert Verdict(403, "forbidden: x").status()["reason"] == "Forbidden"
    assert Verdict(500, "boom").status()["reason"] == "InternalError"


# --- the cache ---------------------------------------------------------------------------------


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def test_ttl_cache_expires_each_entry_at_its_deadline_and_evicts_the_least_recently_used() -> None:
    clock = Clock()
    cache: TtlCache[str, int] = TtlCache(2, clock=clock)
    cache.put("a", 1, 10.0)
    cache.put("b", 2, 5.0)
    cache.put("zero", 0, 0.0)  # a TTL of 0 keeps nothing
    assert (cache.get("a"), cache.get("b"), cache.get("zero"), len(cache)) == (1, 2, None, 2)
    clock.now += 5.0
    assert cache.get("b") is None and cache.get("a") == 1  # b's 5 s are over; a's 10 s are not
    cache.put("c", 3, 10.0)
    cache.get("a")
    cache.put("d", 4, 10.0)  # full: c, the least recently used, goes
    assert (cache.get("c"), cache.get("a"), cache.get("d")) == (None, 1, 4)
    clock.now += 5.0
    assert cache.get("a") is None


# --- the gate, step by step ---------------------------------------------------------------------

READER = "system:serviceaccount:monitoring:prometheus"


class ApiServer:
    """Answers reviews as the API server would for a few known tokens and one RBAC rule, and records them."""

    def __init__(self) -> None:
        self.tokens: dict[str, dict[str, Any]] = {
            "reader-token": reviewed(READER),
            "nobody-token": reviewed("system:serviceaccount:default:nobody"),
            "explain-token": reviewed("system:serviceaccount:kopf-scheduler:kopf-scheduler-explain",
                                      audiences=[DELEGATED_AUDIENCE]),
        }  # fmt: skip
        self.allowed = {(READER, "get", "/metrics"), ("alice", "get", "/metrics")}
        self.allowed.add(("system:serviceaccount:kopf-scheduler:kopf-scheduler-explain", "get", "/debug/attempts/a/b"))
        self.posted: list[tuple[str, dict[str, Any]]] = []
        self.failing = False
        self.gate_open: asyncio.Event | None = None

    async def post(self, path: str, body: Mapping[str, Any]) -> tuple[Mapping[str, Any] | None, str]:
        self.posted.append((path, dict(body)))
        if self.gate_open is not None:
            await self.gate_open.wait()
        if self.failing:
            return None, "HTTP 503 the server is shutting down"
        spec = body["spec"]
        if path == TOKEN_REVIEWS:
            answer = self.tokens.get(spec["token"], reviewed(error="invalid bearer token"))
            if "audiences" not in spec and "audiences" in answer["status"]:
                return reviewed(error="token audiences are invalid"), ""  # not the API server's audience
            return answer, ""
        assert path == ACCESS_REVIEWS
        key = (spec["user"], spec["nonResourceAttributes"]["verb"], spec["nonResourceAttributes"]["path"])
        return {"status": {"allowed": key in self.allowed}}, ""

    def kinds(self) -> list[str]:
        return ["token" if path == TOKEN_REVIEWS else "access" for path, _ in self.posted]


def admit(gate: Gate, path: str, **headers: Any) -> Verdict:
    return asyncio.run(gate.admit("GET", path, **headers))


@pytest.mark.parametrize(
    ("path", "headers", "code", "message", "reviews"),
    [
        pytest.param("/healthz", {}, 200, "", [], id="probe without credentials"),
        pytest.param("/livez", {}, 200, "", [], id="livez too"),
        pytest.param("/metrics", {}, 401, "Unauthorized", [], id="no credentials: 401, no review"),
        pytest.param("/metrics", {"authorization": "Bearer forged"}, 401, "Unauthorized", ["token"],
                     id="a token the API server refuses"),
        pytest.param("/healthz", {"authorization": "Bearer forged"}, 401, "Unauthorized", ["token"],
                     id="a refused token even on a probe path, as upstream"),
        pytest.param("/metrics", {"authorization": "Bearer nobody-token"}, 403,
                     'forbidden: User "system:serviceaccount:default:nobody" cannot get path "/metrics"',
                     ["token", "access"], id="authenticated, not authorized"),
        pytest.param("/metrics", {"authorization": "Bearer reader-token"}, 200, "", ["token", "access"],
                     id="authorized"),
        pytest.param("/debug/attempts/a/b", {"authorization": "Bearer reader-token"}, 403,
                     f'forbidden: User "{READER}" cannot get path "/debug/attempts/a/b"', ["token", "access"],
                     id="the metrics reader may not read /debug"),
        pytest.param("/readyz", {"authorization": "Bearer nobody-token"}, 200, "", ["token"],
                     id="always-allowed path: no access review"),
        pytest.param("/metrics", {"peer_certificate": {"subject": ((("commonName", "alice"),),)}}, 200, "",
                     ["access"], id="a client certificate: no token review"),
        pytest.param("/metrics", {"peer_certificate": {"subject": ((("commonName", "root"),),
                                                                   (("organizationName", "system:masters"),))}},
                     200, "", [], id="system:masters: no review at all"),
        pytest.param("/debug/attempts/a/b", {"delegated": "Bearer explain-token"}, 200, "", ["token", "access"],
                     id="the plugin's audience-bound token in its own header"),
        pytest.param("/debug/attempts/a/b", {"authorization": "Bearer explain-token"}, 401, "Unauthorized",
                     ["token"], id="an audience-bound token is no API server token"),
        pytest.param("/metrics", {"delegated": "Bearer reader-token"}, 401, "Unauthorized", ["token"],
                     id="an API server token is refused in the plugin's header"),
    ],
)  # fmt: skip
def test_gate_decides_as_upstreams_delegating_authn_and_authz(
    path: str, headers: dict[str, Any], code: int, message: str, reviews: list[str]
) -> None:
    server = ApiServer()
    verdict = admit(Gate(server.post), path, **headers)
    assert (verdict.code, verdict.message) == (code, message)
    assert server.kinds() == reviews


def test_token_review_audiences_go_with_the_header() -> None:
    server = ApiServer()
    gate = Gate(server.post)
    admit(gate, "/metrics", authorization="Bearer reader-token")
    admit(gate, "/debug/attempts/a/b", delegated="Bearer explain-token")
    token_specs = [body["spec"] for path, body in server.posted if path == TOKEN_REVIEWS]
    assert token_specs == [{"token": "reader-token"}, {"token": "explain-token", "audiences": [DELEGATED_AUDIENCE]}]


def test_answers_are_cached_for_their_ttl_and_failures_not_at_all() -> None:
    clock = Clock()
    server = ApiServer()
    gate = Gate(server.post, AccessPolicy(token_ttl=10.0, allowed_ttl=10.0, denied_ttl=5.0), clock=clock)
    reader, nobody = {"authorization": "Bearer reader-token"}, {"authorization": "Bearer nobody-token"}

    assert admit(gate, "/metrics", **reader).code == 200
    assert admit(gate, "/metrics", **nobody).code == 403
    assert admit(gate, "/metrics", authorization="Bearer forged").code == 401
    assert server.kinds() == ["token", "access", "token", "access", "token"]

    clock.now += 4.9  # everything still cached: the refused token too
    assert [admit(gate, "/metrics", **h).code for h in (reader, nobody, {"authorization": "Bearer forged"})] == [
        200, 403, 401,
    ]  # fmt: skip
    assert len(server.posted) == 5

    clock.now += 0.2  # 5.1 s: the denial (5 s) is asked again, the rest is not
    assert admit(gate, "/metrics", **nobody).code == 403
    assert admit(gate, "/metrics", **reader).code == 200
    assert server.kinds()[5:] == ["access"]

    clock.now += 5.0  # 10.1 s: the tokens and the allowance are asked again
    server.allowed.discard((READER, "get", "/metrics"))  # RBAC changed meanwhile
    assert admit(gate, "/metrics", **reader).code == 403
    assert server.kinds()[6:] == ["token", "access"]

    server.failing = True
    clock.now += 100.0
    assert admit(gate, "/metrics", **reader).code == 401  # the TokenReview failed: not authenticated
    server.failing = False
    assert admit(gate, "/metrics", **reader).code == 403  # ...and that failure was not cached
    assert server.kinds()[8:] == ["token", "token", "access"]


def test_a_failed_access_review_answers_500_and_is_not_cached() -> None:
    server = ApiServer()
    gate = Gate(server.post)
    cert = {"subject": ((("commonName", "alice"),),)}
    server.failing = True
    verdict = admit(gate, "/metrics", peer_certificate=cert)
    assert verdict.code == 500 and verdict.message == "SubjectAccessReview failed: HTTP 503 the server is shutting down"
    server.failing = False
    assert admit(gate, "/metrics", peer_certificate=cert).code == 200
    assert server.kinds() == ["access", "access"]


def test_concurrent_requests_with_one_token_share_one_review_of_each_kind() -> None:
    server = ApiServer()
    gate = Gate(server.post)

    async def main() -> list[int]:
        server.gate_open = asyncio.Event()
        requests = [
            asyncio.create_task(gate.admit("GET", "/metrics", authorization="Bearer reader-token")) for _ in range(5)
        ]
        await asyncio.sleep(0)
        await asyncio.sleep(0)
        server.gate_open.set()
        return [v.code for v in await asyncio.gather(*requests)]

    assert asyncio.run(main()) == [200] * 5
    assert server.kinds() == ["token", "access"]


def test_the_token_is_not_kept_in_the_cache() -> None:
    server = ApiServer()
    gate = Gate(server.post)
    admit(gate, "/metrics", authorization="Bearer reader-token")
    keys = list(gate._tokens._entries)
    assert len(keys) == 1 and b"reader-token" not in keys[0]
