"""The two time formats of the Kubernetes API, rendered from a moment the caller supplies.

``metav1.Time`` is RFC 3339 in UTC with whole seconds (conditions, event first/last timestamps);
``metav1.MicroTime`` has exactly six fractional digits, even when they are zero (event
``eventTime``, Lease ``acquireTime``/``renewTime``: the API server rejects any other count).
Pure: no clock is read here; the operator passes ``datetime.now(UTC)``.
"""

from __future__ import annotations

from datetime import UTC, datetime

__all__ = ["parse_time", "rfc3339", "rfc3339_micro"]


def rfc3339(moment: datetime) -> str:
    """metav1.Time: ``2030-01-02T03:04:05Z``."""
    return moment.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def rfc3339_micro(moment: datetime) -> str:
    """metav1.MicroTime: ``2030-01-02T03:04:05.000000Z``."""
    return moment.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


def parse_time(text: str | None) -> datetime | None:
    """Either format (or any RFC 3339 time) as an aware UTC datetime; empty or None stays None."""
    if not text:
        return None
    return datetime.fromisoformat(text).astimezone(UTC)
