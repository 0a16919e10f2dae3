"""Who may read the secure port: delegated authentication and authorization, as kube-scheduler's 10259.

Upstream: k8s.io/apiserver ``pkg/server/options/authentication.go`` (DelegatingAuthenticationOptions),
``authorization.go`` (DelegatingAuthorizationOptions), ``pkg/authentication/authenticatorfactory/
delegating.go``, ``pkg/authentication/token/cache`` (the token cache), ``plugin/pkg/authorizer/webhook``
(the SubjectAccessReview cache) and ``pkg/authorization/path`` (the always-allowed paths).

**Authentication**, first that applies:

1. a client certificate the TLS handshake verified against the cluster's client CA (``--client-ca-file``
   or the ``extension-apiserver-authentication`` ConfigMap): the user is the subject's CommonName, its
   groups the subject's Organizations (upstream's ``CommonNameUserConversion``; no CommonName: no user);
2. ``Authorization: Bearer TOKEN``: a TokenReview decides (the API server's own audiences);
3. ``Kopf-Scheduler-Authorization: Bearer TOKEN`` (``DELEGATED_HEADER``): a token minted with the
   audience ``kopf-scheduler`` (``DELEGATED_AUDIENCE``), reviewed with that audience only. The API
   server's pod proxy drops the Authorization header of the requests it forwards (it authenticated
   them itself, then sends them on with no identity), so the kubectl plugin mints such a token for a
   ServiceAccount its user may request tokens of and sends it here; a token the API server would take
   is refused in this header, and this one is useless against the API server.

Answers of TokenReviews are cached ``CACHE_TTL`` (10 s: upstream's ``--authentication-token-webhook-
cache-ttl``), authenticated and refused alike; a review that could not be made (no answer, an error
status) is not cached. Keys are an HMAC of the token under a key drawn at start, so no token stays in
memory; concurrent requests with one token share one review (upstream's singleflight).

A request with no credentials is **401** unless its path is always allowed. Here we part from
upstream: kube-scheduler authenticates it as ``system:anonymous`` and asks a SubjectAccessReview,
which the default RBAC denies (403); we have no anonymous user, so an unauthenticated scrape costs no
review and says what is missing.

**Authorization**, first that applies: a user in an always-allowed group (``system:masters``, as
upstream); an always-allowed path (``/healthz``, ``/readyz``, ``/livez`` by default, or the
``--authorization-always-allow-paths`` list: exact paths, or prefixes ending in ``*``; a leading ``/``
optional); else a SubjectAccessReview of the verb (the HTTP method in lower case) on the path as a
non-resource URL (``get /metrics``, ``get /debug/attempts/NS/NAME``). Allowed answers are cached
``CACHE_TTL``, denied ones too (upstream's ``--authorization-webhook-cache-authorized-ttl`` and
``-unauthorized-ttl``), failures not at all; a review that cannot be made answers 500, as upstream
answers an authorizer's error with no decision.

The functions are pure (bodies to send, answers to read, the path rules); ``Gate`` sequences them,
posting reviews through a callable (the operator passes its one API client, ``edge/client.Api``) and
reading time from a clock it is given.
"""

from __future__ import annotations

import asyncio
import hashlib
import hmac
import logging
import os
import time
from collections import OrderedDict
from collections.abc import Awaitable, Callable, Hashable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Final, Generic, TypeVar

from ..core.model import paths

__all__ = [
    "ACCESS_REVIEWS",
    "CACHE_SIZE",
    "CACHE_TTL",
    "DEFAULT_ALWAYS_ALLOW_GROUPS",
    "DEFAULT_ALWAYS_ALLOW_PATHS",
    "DELEGATED_AUDIENCE",
    "DELEGATED_HEADER",
    "TOKEN_REVIEWS",
    "AccessPolicy",
    "Gate",
    "Post",
    "Presented",
    "TtlCache",
    "User",
    "Verdict",
    "access_review_body",
    "access_review_decision",
    "bearer_token",
    "certificate_user",
    "path_allowed",
    "path_pattern_errors",
    "presented",
    "token_review_body",
    "token_review_user",
]

TOKEN_REVIEWS: Final = paths.collection("authentication.k8s.io/v1", "tokenreviews")
ACCESS_REVIEWS: Final = paths.collection("authorization.k8s.io/v1", "subjectaccessreviews")
#: the header the kubectl plugin's audience-bound token comes in (see the module docstring)
DELEGATED_HEADER: Final = "Kopf-Scheduler-Authorization"
DELEGATED_AUDIENCE: Final = "kopf-scheduler"
DEFAULT_ALWAYS_ALLOW_PATHS: Final = ("/healthz", "/readyz", "/livez")
DEFAULT_ALWAYS_ALLOW_GROUPS: Final = ("system:masters",)
#: seconds an answer is kept: upstream's default for tokens and for both kinds of access answers
CACHE_TTL: Final = 10.0
#: answers kept at most, per kind (upstream's webhook authorizer keeps 8192)
CACHE_SIZE: Final = 8192

logger = logging.getLogger(__name__)

Post = Callable[[str, Mapping[str, Any]], Awaitable[tuple[Mapping[str, Any] | None, str]]]
"""POST a review (path, body) to the API server: (the answer's JSON, "") or (None, why not)."""


@dataclass(frozen=True, slots=True)
class User:
    """Who made a request, as a TokenReview or a client certificate says (a SubjectAccessReview's subject)."""

    name: str
    uid: str = ""
    groups: tuple[str, ...] = ()
    extra: tuple[tuple[str, tuple[str, ...]], ...] = ()


@dataclass(frozen=True, slots=True)
class Presented:
    """The credentials a request brought, in the order they are tried."""

    certificate: User | None = None
    token: str = ""
    #: the audiences to review `token` with; () means the API server's own
    audiences: tuple[str, ...] = ()


@dataclass(frozen=True, slots=True)
class Verdict:
    """What the gate says: 200 lets the request through; 401, 403 or 500 answer it with `message`."""

    code: int
    message: str = ""
    user: User | None = None

    @property
    def allowed(self) -> bool:
        return self.code == 200

    def status(self) -> dict[str, Any]:
        """The answer's body: a ``v1.Status``, as the API server and kube-scheduler write one."""
        reason = {401: "Unauthorized", 403: "Forbidden"}.get(self.code, "InternalError")
        return {
            "kind": "Status",
            "apiVersion": "v1",
            "metadata": {},
            "status": "Failure",
            "message": self.message,
            "reason": reason,
            "code": self.code,
        }


@dataclass(frozen=True, slots=True)
class AccessPolicy:
    """The flags of ``kopf-scheduler run`` that shape the gate; defaults are upstream's."""

    always_allow_paths: tuple[str, ...] = DEFAULT_ALWAYS_ALLOW_PATHS
    always_allow_groups: tuple[str, ...] = DEFAULT_ALWAYS_ALLOW_GROUPS
    token_ttl: float = CACHE_TTL
    allowed_ttl: float = CACHE_TTL
    denied_ttl: float = CACHE_TTL


# --------------------------------------------------------------------------- pure: what came in


def bearer_token(value: str | None) -> str:
    """The token of ``Bearer TOKEN`` (the scheme in any case), else "" (upstream's bearertoken
    authenticator: another scheme or an empty token is no opinion)."""
    if not value:
        return ""
    scheme, _, token = value.strip().partition(" ")
    token = token.strip()
    return token if scheme.lower() == "bearer" and token and " " not in token else ""


def certificate_user(peer_certificate: Mapping[str, Any] | None) -> User | None:
    """The user of a verified client certificate (``ssl.SSLSocket.getpeercert()``'s form): its subject's
    CommonName, its Organizations as groups; None without a certificate or a CommonName."""
    if not peer_certificate:
        return None
    name, groups = "", []
    for rdn in peer_certificate.get("subject") or ():
        for key, value in rdn:
            if key == "commonName" and not name:
                name = str(value)
            elif key == "organizationName":
                groups.append(str(value))
    return User(name, groups=tuple(groups)) if name else None


def presented(
    *, authorization: str | None, delegated: str | None, peer_certificate: Mapping[str, Any] | None
) -> Presented:
    """The request's credentials, in the order of the module docstring."""
    user = certificate_user(peer_certificate)
    if user is not None:
        return Presented(certificate=user)
    token = bearer_token(authorization)
    if token:
        return Presented(token=token)
    token = bearer_token(delegated)
    if token:
        return Presented(token=token, audiences=(DELEGATED_AUDIENCE,))
    return Presented()


def path_pattern_errors(patterns: Sequence[str]) -> list[str]:
    """Why `patterns` cannot be always-allowed paths: a ``*`` anywhere but at the end."""
    return [f"only a trailing * is allowed in {p!r}" for p in patterns if "*" in p[:-1]]


def path_allowed(path: str, patterns: Sequence[str]) -> bool:
    """Whether an always-allowed pattern matches `path` (upstream's path authorizer: exact, or a
    prefix when the pattern ends in ``*``; leading slashes ignored on both sides)."""
    plain = path.removeprefix("/")
    for pattern in patterns:
        bare = pattern.removeprefix("/")
        if bare.endswith("*"):
            if plain.startswith(bare[:-1]):
                return True
        elif plain == bare:
            return True
    return False


# --------------------------------------------------------------------------- pure: the reviews


def token_review_body(token: str, audiences: Sequence[str] = ()) -> dict[str, Any]:
    spec: dict[str, Any] = {"token": token}
    if audiences:
        spec["audiences"] = list(audiences)
    return {"apiVersion": "authentication.k8s.io/v1", "kind": "TokenReview", "spec": spec}


def token_review_user(answer: Mapping[str, Any], audiences: Sequence[str] = ()) -> tuple[User | None, str]:
    """The user a TokenReview's answer authenticated, or None and why not. With `audiences`, the
    answer must name one of them (upstream's webhook token authenticator checks the intersection)."""
    status = answer.get("status") or {}
    if not status.get("authenticated"):
        return None, str(status.get("error") or "the token was not authenticated")
    if audiences and not set(audiences) & set(status.get("audiences") or ()):
        return None, f"the token is not for audience {', '.join(audiences)}"
    user = status.get("user") or {}
    name = str(user.get("username") or "")
    if not name:
        return None, "the TokenReview named no user"
    extra = tuple(sorted((str(k), tuple(str(v) for v in vs or ())) for k, vs in (user.get("extra") or {}).items()))
    groups = tuple(str(g) for g in user.get("groups") or ())
    return User(name, uid=str(user.get("uid") or ""), groups=groups, extra=extra), ""


def access_review_body(user: User, verb: str, path: str) -> dict[str, Any]:
    spec: dict[str, Any] = {"user": user.name, "nonResourceAttributes": {"path": path, "verb": verb}}
    if user.uid:
        spec["uid"] = user.uid
    if user.groups:
        spec["groups"] = list(user.groups)
    if user.extra:
        spec["extra"] = {k: list(v) for k, v in user.extra}
    return {"apiVersion": "authorization.k8s.io/v1", "kind": "SubjectAccessReview", "spec": spec}


def access_review_decision(answer: Mapping[str, Any]) -> tuple[bool, str]:
    """(allowed, reason) of a SubjectAccessReview's answer; denied and no opinion are both not allowed."""
    status = answer.get("status") or {}
    allowed = bool(status.get("allowed")) and not status.get("denied")
    return allowed, str(status.get("reason") or "")


def forbidden(user: User, verb: str, path: str, reason: str) -> Verdict:
    """Upstream's message: ``forbidden: User "NAME" cannot VERB path "PATH"[: REASON]``."""
    message = f'forbidden: User "{user.name}" cannot {verb} path "{path}"'
    return Verdict(403, f"{message}: {reason}" if reason else message, user)


UNAUTHORIZED: Final = Verdict(401, "Unauthorized")


# --------------------------------------------------------------------------- the caches

K = TypeVar("K", bound=Hashable)
V = TypeVar("V")


class TtlCache(Generic[K, V]):
    """At most `size` answers, each until its own deadline; the least recently used goes first when full."""

    def __init__(self, size: int = CACHE_SIZE, *, clock: Callable[[], float] = time.monotonic) -> None:
        self._size = size
        self._clock = clock
        self._entries: OrderedDict[K, tuple[float, V]] = OrderedDict()

    def __len__(self) -> int:
        return len(self._entries)

    def get(self, key: K) -> V | None:
        entry = self._entries.get(key)
        if entry is None:
            return None
        deadline, value = entry
        if self._clock() >= deadline:
            del self._entries[key]
            return None
        self._entries.move_to_end(key)
        return value

    def put(self, key: K, value: V, ttl: float) -> None:
        """Keep `value` for `ttl` seconds (0 or less: not at all)."""
        if ttl <= 0:
            return
        self._entries[key] = (self._clock() + ttl, value)
        self._entries.move_to_end(key)
        while len(self._entries) > self._size:
            self._entries.popitem(last=False)


# --------------------------------------------------------------------------- the gate


@dataclass(slots=True)
class _Flights:
    """Reviews under way by key: a second request with the same key awaits the first one's answer."""

    running: dict[Hashable, asyncio.Future[Any]] = field(default_factory=dict)

    async def share(self, key: Hashable, run: Callable[[], Awaitable[V]]) -> V:
        future = self.running.get(key)
        if future is not None:
            try:
                result: V = await asyncio.shield(future)
            except asyncio.CancelledError:
                if not future.cancelled():
                    raise
                return await self.share(key, run)  # the one that asked was cancelled: ask anew
            return result
        future = asyncio.get_running_loop().create_future()
        self.running[key] = future
        try:
            value = await run()
        except asyncio.CancelledError:
            future.cancel()  # those who wait ask again (a cancelled future cannot carry the exception)
            raise
        except BaseException as exc:
            future.set_exception(exc)
            future.exception()  # retrieved: no "never retrieved" warning when nobody else waited
            raise
        else:
            future.set_result(value)
            return value
        finally:
            del self.running[key]


class Gate:
    """Decides each request of the secure port (see the module docstring); `post` sends the reviews."""

    def __init__(
        self, post: Post, policy: AccessPolicy | None = None, *, clock: Callable[[], float] = time.monotonic
    ) -> None:
        self.policy = policy or AccessPolicy()
        self._post = post
        self._hmac_key = os.urandom(32)
        self._tokens: TtlCache[bytes, tuple[User | None, str]] = TtlCache(clock=clock)
        self._access: TtlCache[tuple[User, str, str], tuple[bool, str]] = TtlCache(clock=clock)
        self._flights = _Flights()
        #: reviews sent (for tests and logs): TokenReviews, SubjectAccessReviews
        self.sent: dict[str, int] = {"token": 0, "access": 0}

    async def admit(
        self,
        method: str,
        path: str,
        *,
        authorization: str | None = None,
        delegated: str | None = None,
        peer_certificate: Mapping[str, Any] | None = None,
    ) -> Verdict:
        verb = method.lower()
        creds = presented(authorization=authorization, delegated=delegated, peer_certificate=peer_certificate)
        if creds.certificate is not None:
            user: User | None = creds.certificate
        elif creds.token:
            user, _ = await self._review_token(creds.token, creds.audiences)
            if user is None:
                return UNAUTHORIZED
        elif path_allowed(path, self.policy.always_allow_paths):
            return Verdict(200)
        else:
            return UNAUTHORIZED
        assert user is not None
        if set(user.groups) & set(self.policy.always_allow_groups):
            return Verdict(200, user=user)
        if path_allowed(path, self.policy.always_allow_paths):
            return Verdict(200, user=user)
        return await self._review_access(user, verb, path)

    async def _review_token(self, token: str, audiences: tuple[str, ...]) -> tuple[User | None, str]:
        key = hmac.new(self._hmac_key, "\x00".join((*audiences, token)).encode(), hashlib.sha256).digest()
        cached = self._tokens.get(key)
        if cached is not None:
            return cached

        async def review() -> tuple[User | None, str]:
            self.sent["token"] += 1
            answer, error = await self._post(TOKEN_REVIEWS, token_review_body(token, audiences))
            if answer is None:
                logger.warning("cannot authenticate a request: TokenReview failed: %s", error)
                return None, f"TokenReview failed: {error}"  # not cached: the next request asks again
            outcome = token_review_user(answer, audiences)
            self._tokens.put(key, outcome, self.policy.token_ttl)
            return outcome

        return await self._flights.share(("token", key), review)

    async def _review_access(self, user: User, verb: str, path: str) -> Verdict:
        key = (user, verb, path)
        cached = self._access.get(key)
        if cached is None:

            async def review() -> tuple[bool, str] | str:
                self.sent["access"] += 1
                answer, error = await self._post(ACCESS_REVIEWS, access_review_body(user, verb, path))
                if answer is None:
                    logger.warning("cannot authorize a request: SubjectAccessReview failed: %s", error)
                    return error
                decision = access_review_decision(answer)
                ttl = self.policy.allowed_ttl if decision[0] else self.policy.denied_ttl
                self._access.put(key, decision, ttl)
                return decision

            outcome = await self._flights.share(("access", key), review)
            if isinstance(outcome, str):
                return Verdict(500, f"SubjectAccessReview failed: {outcome}", user)
            cached = outcome
        allowed, reason = cached
        return Verdict(200, user=user) if allowed else forbidden(user, verb, path, reason)
