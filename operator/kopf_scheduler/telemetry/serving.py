"""TLS of the secure port: the serving certificate (given as files, or made at start) and the client CA.

Upstream: k8s.io/apiserver ``pkg/server/options/serving.go`` (SecureServingOptions) and client-go's
``util/cert`` (GenerateSelfSignedCertKeyWithFixtures). With no ``--tls-cert-file`` kube-scheduler makes
a CA and a serving certificate signed by it for ``localhost`` and ``127.0.0.1``, valid a year, and keeps
them in memory (its ``--cert-dir`` is empty); ``self_signed`` does the same (P-256 keys, where upstream
draws 2048-bit RSA: a fraction of the time at start, and every client we know takes them). Scrapers
and the kubelet's HTTPS probes do not verify such a certificate (kube-prometheus scrapes kube-scheduler
with ``insecureSkipVerify``); give one from your own CA (cert-manager) to have it verified.

Certificate files are watched as upstream's dynamic serving content watches them: ``CertificateFiles``
re-reads them when their modification times change (a rotated Secret's mount), and new handshakes get
the new certificate. TLS 1.2 at least, as upstream's default.

A client CA makes the server ask for a client certificate (optional: Prometheus sends a token
instead); one signed by that CA authenticates its subject (``access.certificate_user``), one that is
not fails the handshake.
"""

from __future__ import annotations

import datetime as dt
import ipaddress
import logging
import os
import ssl
import tempfile
from collections.abc import Sequence
from dataclasses import dataclass

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

__all__ = ["VALIDITY", "CertificateFiles", "self_signed", "server_context"]

logger = logging.getLogger(__name__)

VALIDITY = dt.timedelta(days=365)


def self_signed(
    hosts: Sequence[str] = ("localhost",),
    ips: Sequence[str] = ("127.0.0.1",),
    *,
    now: dt.datetime | None = None,
) -> tuple[bytes, bytes]:
    """(the serving certificate then its CA, PEM; the serving key, PEM): a CA named ``HOST-ca@UNIX``
    and a serving certificate ``HOST@UNIX`` for `hosts` and `ips`, both valid `VALIDITY` from an hour ago."""
    now = now or dt.datetime.now(dt.UTC)
    stamp = int(now.timestamp())
    start, end = now - dt.timedelta(hours=1), now + VALIDITY
    ca_key = ec.generate_private_key(ec.SECP256R1())
    ca_name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, f"{hosts[0]}-ca@{stamp}")])
    ca = (
        x509.CertificateBuilder()
        .subject_name(ca_name)
        .issuer_name(ca_name)
        .public_key(ca_key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(start)
        .not_valid_after(end)
        .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
        .add_extension(_usage(cert_sign=True), critical=True)
        .sign(ca_key, hashes.SHA256())
    )
    key = ec.generate_private_key(ec.SECP256R1())
    names: list[x509.GeneralName] = [x509.DNSName(h) for h in hosts]
    names += [x509.IPAddress(ipaddress.ip_address(ip)) for ip in ips]
    cert = (
        x509.CertificateBuilder()
        .subject_name(x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, f"{hosts[0]}@{stamp}")]))
        .issuer_name(ca_name)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(start)
        .not_valid_after(end)
        .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
        .add_extension(_usage(cert_sign=False), critical=True)
        .add_extension(x509.ExtendedKeyUsage([ExtendedKeyUsageOID.SERVER_AUTH]), critical=False)
        .add_extension(x509.SubjectAlternativeName(names), critical=False)
        .sign(ca_key, hashes.SHA256())
    )
    chain = cert.public_bytes(serialization.Encoding.PEM) + ca.public_bytes(serialization.Encoding.PEM)
    key_pem = key.private_bytes(
        serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()
    )
    return chain, key_pem


def _usage(*, cert_sign: bool) -> x509.KeyUsage:
    return x509.KeyUsage(
        digital_signature=True,
        content_commitment=False,
        key_encipherment=not cert_sign,
        data_encipherment=False,
        key_agreement=False,
        key_cert_sign=cert_sign,
        crl_sign=False,
        encipher_only=False,
        decipher_only=False,
    )


def server_context(
    *,
    cert_file: str | None = None,
    key_file: str | None = None,
    cert_pem: bytes | None = None,
    key_pem: bytes | None = None,
    client_ca: bytes | None = None,
) -> ssl.SSLContext:
    """A server-side context with the certificate given as files or as PEM (written to a private
    temporary folder only as long as ``ssl`` needs to read it); with `client_ca` (PEM), client
    certificates are asked for and verified against it."""
    # not create_default_context: it would trust the system's CAs for client certificates too
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    ctx.minimum_version = ssl.TLSVersion.TLSv1_2
    if cert_file and key_file:
        ctx.load_cert_chain(cert_file, key_file)
    elif cert_pem and key_pem:
        with tempfile.TemporaryDirectory(prefix="kopf-scheduler-serving-") as tmp:
            paths = []
            for name, data in (("tls.crt", cert_pem), ("tls.key", key_pem)):
                path = os.path.join(tmp, name)
                with open(os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600), "wb") as f:
                    f.write(data)
                paths.append(path)
            ctx.load_cert_chain(paths[0], paths[1])
    else:
        raise ValueError("a serving certificate needs a certificate and its key")
    if client_ca:
        ctx.load_verify_locations(cadata=client_ca.decode("ascii", "replace"))
        ctx.verify_mode = ssl.CERT_OPTIONAL
    else:
        ctx.verify_mode = ssl.CERT_NONE
    return ctx


@dataclass(slots=True)
class CertificateFiles:
    """``--tls-cert-file`` and ``--tls-private-key-file``, reloaded into a context when they change."""

    cert_file: str
    key_file: str
    _seen: tuple[float, float] = (0.0, 0.0)

    def __post_init__(self) -> None:
        self._seen = self._mtimes()

    def _mtimes(self) -> tuple[float, float]:
        try:
            return os.stat(self.cert_file).st_mtime, os.stat(self.key_file).st_mtime
        except OSError:
            return self._seen

    def reload_if_changed(self, ctx: ssl.SSLContext) -> bool:
        """Load the files into `ctx` again when either changed since last time; False when they did not
        or cannot be loaded (a half-written pair: the next look tries again)."""
        now = self._mtimes()
        if now == self._seen:
            return False
        try:
            ctx.load_cert_chain(self.cert_file, self.key_file)
        except (OSError, ssl.SSLError) as exc:
            logger.warning("the serving certificate changed but cannot be loaded (trying again later): %s", exc)
            return False
        self._seen = now
        logger.info("serving certificate reloaded from %s", self.cert_file)
        return True
