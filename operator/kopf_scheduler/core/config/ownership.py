"""Which SchedulingPolicy serves each schedulerName, and the status every policy reports.

The operator tells a ``PolicyBook`` each policy it sees (its metadata and the outcome of
validating its spec) and each deletion; the book answers with a ``Settlement``: the scheduler
names to start or switch serving, those to stop serving, and the status bodies to write. The
rules:

- a spec that validates is **Accepted** and its profile becomes the policy's last good one;
- a spec that does not is rejected (``Accepted=False``, reason **Invalid**, every field error in
  the message); the last good profile, if there is one, stays in force;
- when several policies with a good profile claim one schedulerName, the oldest
  (``creationTimestamp``, then name) serves it and the others report **Conflict**; when the owner
  goes away or moves to another name, the next claimant takes over;
- ``lastTransitionTime`` of the Accepted condition moves only when its status or reason changes;
- ``observedGeneration`` is the generation last seen, ``activeGeneration`` the one in force while
  the policy serves its name (removed, through a merge-patch null, while it does not);
- a status is produced for the policy just observed and for each other one whose status changed.

Pure: time is an argument (``now``, only to stamp a transition); nothing here writes anything.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, Final

from ..model.timestamps import rfc3339
from .policy import FieldError
from .profile import Profile

__all__ = [
    "CONDITION_ACCEPTED",
    "Condition",
    "PolicyBook",
    "PolicyMeta",
    "PolicyRecord",
    "Serving",
    "Settlement",
    "condition_of",
    "owner_of",
    "status_body",
    "transition_time",
]

CONDITION_ACCEPTED: Final = "Accepted"
REASON_ACCEPTED: Final = "Accepted"
REASON_INVALID: Final = "Invalid"
REASON_CONFLICT: Final = "Conflict"
#: metav1.Condition's limit on a message
MAX_CONDITION_MESSAGE: Final = 32768


@dataclass(frozen=True, slots=True)
class PolicyMeta:
    """What the operator needs of a SchedulingPolicy besides validating its spec."""

    name: str
    generation: int
    created: str  # RFC 3339 creationTimestamp: sorts chronologically as text
    uid: str
    scheduler_name: str  # spec.schedulerName as written (may be invalid)
    spec: Mapping[str, Any]


@dataclass(frozen=True, slots=True)
class Condition:
    """The Accepted condition: ``"True"``/``"False"``, a reason, a message."""

    status: str
    reason: str
    message: str


@dataclass(frozen=True, slots=True)
class Serving:
    """A scheduler name in service: by which policy, with which generation's profile."""

    scheduler_name: str
    policy: str
    generation: int
    profile: Profile


@dataclass(frozen=True, slots=True)
class Settlement:
    """What the operator must do after a policy event."""

    #: names to start serving, or to serve with another policy or generation
    serve: tuple[Serving, ...] = ()
    #: names no longer served (their pods stay Pending)
    stop: tuple[str, ...] = ()
    #: SchedulingPolicy name -> the status to write (a JSON merge patch of ``status``)
    statuses: Mapping[str, Mapping[str, Any]] = field(default_factory=dict)


@dataclass(slots=True)
class PolicyRecord:
    """One SchedulingPolicy as last seen, with its last good profile and what it last reported."""

    meta: PolicyMeta
    profile: Profile | None = None  # the last accepted one
    active_generation: int | None = None  # the generation `profile` came from
    errors: tuple[FieldError, ...] = ()  # of the generation last seen
    condition: Condition | None = None
    transition_time: str = ""
    status: Mapping[str, Any] | None = None  # the body last produced

    @property
    def claim(self) -> str | None:
        """The scheduler name its last good profile serves, if it has one."""
        return self.profile.scheduler_name if self.profile is not None else None


# --------------------------------------------------------------------------- the rules, one function each


def owner_of(claimants: Iterable[PolicyRecord]) -> PolicyRecord | None:
    """The oldest claimant (creationTimestamp, then name), or None when there is none."""
    return min(claimants, key=lambda r: (r.meta.created, r.meta.name), default=None)


def condition_of(record: PolicyRecord, owner: PolicyRecord | None) -> Condition:
    """Invalid (field errors win), else Conflict (another policy owns the name), else Accepted."""
    meta = record.meta
    if record.errors:
        message = (
            "invalid fields: "
            + ", ".join(e.path for e in record.errors)
            + ": "
            + "; ".join(str(e) for e in record.errors)
        )
        suffix = f" (still serving generation {record.active_generation})" if owner is record else ""
        return Condition("False", REASON_INVALID, message[: MAX_CONDITION_MESSAGE - len(suffix)] + suffix)
    if owner is not None and owner is not record:
        return Condition(
            "False",
            REASON_CONFLICT,
            f"schedulerName {meta.scheduler_name!r} is already served"
            f" by the older SchedulingPolicy {owner.meta.name!r}",
        )
    return Condition(
        "True", REASON_ACCEPTED, f"serving schedulerName {meta.scheduler_name!r} with generation {meta.generation}"
    )


def transition_time(previous: Condition | None, previous_time: str, current: Condition, now: datetime) -> str:
    """Kept while status and reason stay the same (a new message alone is no transition)."""
    if (
        previous is not None
        and previous_time
        and (previous.status, previous.reason) == (current.status, current.reason)
    ):
        return previous_time
    return rfc3339(now)


def status_body(
    meta: PolicyMeta, condition: Condition, *, transition_time: str, active_generation: int | None
) -> dict[str, Any]:
    """The ``status`` merge patch: observedGeneration, activeGeneration (None deletes it), the condition."""
    return {
        "observedGeneration": meta.generation,
        "activeGeneration": active_generation,
        "conditions": [
            {
                "type": CONDITION_ACCEPTED,
                "status": condition.status,
                "reason": condition.reason,
                "message": condition.message,
                "lastTransitionTime": transition_time,
                "observedGeneration": meta.generation,
            }
        ],
    }


# --------------------------------------------------------------------------- the book


class PolicyBook:
    """Every SchedulingPolicy of this process and the scheduler names they serve; see the module docstring."""

    def __init__(self) -> None:
        self.records: dict[str, PolicyRecord] = {}
        #: scheduler name -> what serves it now
        self.serving: dict[str, Serving] = {}

    def owner(self, scheduler_name: str) -> PolicyRecord | None:
        return owner_of(r for r in self.records.values() if r.claim == scheduler_name)

    def served_by(self, policy: str) -> Serving | None:
        """The name `policy` serves now, if it serves one."""
        record = self.records.get(policy)
        claim = record.claim if record is not None else None
        serving = self.serving.get(claim) if claim is not None else None
        return serving if serving is not None and serving.policy == policy else None

    def observe(self, meta: PolicyMeta, validated: Profile | Sequence[FieldError], *, now: datetime) -> Settlement:
        """A policy was created, changed or seen again; `validated` is validate_policy's outcome for its spec."""
        record = self.records.get(meta.name)
        if record is None:
            record = self.records[meta.name] = PolicyRecord(meta)
        record.meta = meta
        before = record.claim
        if isinstance(validated, Profile):
            record.profile, record.active_generation, record.errors = validated, meta.generation, ()
        else:
            record.errors = tuple(validated)
        return self._settle({n for n in (before, record.claim) if n is not None}, always=meta.name, now=now)

    def delete(self, name: str, *, now: datetime) -> Settlement:
        """The policy is gone: its name goes to the next claimant, or stops being served."""
        record = self.records.pop(name, None)
        if record is None or record.claim is None:
            return Settlement()
        return self._settle({record.claim}, always=None, now=now)

    def _settle(self, names: set[str], *, always: str | None, now: datetime) -> Settlement:
        serve: list[Serving] = []
        stop: list[str] = []
        touched = {always} if always is not None else set()
        for sname in sorted(names):
            current = self.serving.get(sname)
            if current is not None:
                touched.add(current.policy)
            owner = self.owner(sname)
            if owner is None:
                if current is not None:
                    del self.serving[sname]
                    stop.append(sname)
                continue
            assert owner.profile is not None and owner.active_generation is not None  # a claim implies both
            if current is None or (current.policy, current.generation) != (owner.meta.name, owner.active_generation):
                self.serving[sname] = Serving(sname, owner.meta.name, owner.active_generation, owner.profile)
                serve.append(self.serving[sname])
            touched.update(r.meta.name for r in self.records.values() if r.claim == sname)
        statuses: dict[str, Mapping[str, Any]] = {}
        for name in sorted(touched):
            record = self.records.get(name)
            if record is None:
                continue
            body = self._report(record, now)
            if name == always or body != record.status:
                statuses[name] = body
            record.status = body
        return Settlement(tuple(serve), tuple(stop), statuses)

    def _report(self, record: PolicyRecord, now: datetime) -> dict[str, Any]:
        claim = record.claim
        owner = self.owner(claim) if claim is not None else None
        condition = condition_of(record, owner)
        record.transition_time = transition_time(record.condition, record.transition_time, condition, now)
        record.condition = condition
        active = record.active_generation if owner is record else None
        return status_body(record.meta, condition, transition_time=record.transition_time, active_generation=active)
