"""What Kopf logs in with, and how our requests name themselves: the process's one ``Credentials``.

Kopf's login handler returns a ``kopf.ConnectionInfo`` built here from the same ``Credentials``
(``edge/credentials.py``) the informers, the writes and the Lease use, with the token's expiration
when it has one (an exec plugin's): Kopf calls the login handler again once it passed.
"""

from __future__ import annotations

from importlib.metadata import PackageNotFoundError, version

import kopf

from ..edge.credentials import Credentials

__all__ = ["connection_info", "user_agent"]


def user_agent(identity: str) -> str:
    """``kopf-scheduler/<version> (<identity>)``: audit logs tell our replicas apart by it."""
    try:
        release = version("kopf-scheduler")
    except PackageNotFoundError:  # a source tree without its metadata
        release = "dev"
    return f"kopf-scheduler/{release} ({identity})"


def connection_info(creds: Credentials) -> kopf.ConnectionInfo:
    """The same server, CA, client certificate and current token, for Kopf's own requests."""
    token = creds.token
    return kopf.ConnectionInfo(
        server=creds.server,
        ca_path=creds.ca_path,
        ca_data=creds.ca_data,
        insecure=creds.insecure or None,
        certificate_path=creds.certificate_path,
        certificate_data=creds.certificate_data,
        private_key_path=creds.private_key_path,
        private_key_data=creds.private_key_data,
        token=token.current() if token is not None else None,
        default_namespace=creds.namespace,
        proxy_url=creds.proxy_url,
        expiration=token.expiration if token is not None else None,
    )
