"""Throw-away PKI for the local control plane.

One CA signs everything: the kube-apiserver serving certificate and every
client certificate (admin, kube-scheduler, test users). The service-account
keypair is separate and RSA, because that is what the apiserver's token signer
expects. Keys are ECDSA P-256 otherwise: they are generated in microseconds,
which keeps `cluster up` fast. Nothing here is meant to outlive the cluster.
"""

from __future__ import annotations

import datetime as _dt
import ipaddress
from dataclasses import dataclass
from pathlib import Path

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec, rsa
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

__all__ = ["CertPair", "Pki", "create_pki", "issue_client_cert"]

#: Names the apiserver answers to: loopback, and the in-cluster service names
#: (10.0.0.1 is the first address of --service-cluster-ip-range=10.0.0.0/24).
SERVING_DNS_NAMES = (
    "localhost",
    "kubernetes",
    "kubernetes.default",
    "kubernetes.default.svc",
    "kubernetes.default.svc.cluster.local",
)
SERVING_IPS = ("127.0.0.1", "10.0.0.1")

ADMIN_USER = "kopf-scheduler-admin"
ADMIN_GROUPS = ("system:masters",)

_VALIDITY = _dt.timedelta(days=365)
_CLOCK_SKEW = _dt.timedelta(minutes=5)


@dataclass(frozen=True)
class CertPair:
    """Paths to a PEM certificate and its PEM private key."""

    cert: Path
    key: Path


@dataclass(frozen=True)
class Pki:
    """Every file the control plane needs, all under one directory."""

    ca: CertPair
    serving: CertPair
    admin: CertPair
    service_account_key: Path  # RSA private key: --service-account-signing-key-file
    service_account_pub: Path  # its public key: --service-account-key-file


def _new_key() -> ec.EllipticCurvePrivateKey:
    return ec.generate_private_key(ec.SECP256R1())


def _write_key(path: Path, key: ec.EllipticCurvePrivateKey | rsa.RSAPrivateKey) -> None:
    path.write_bytes(
        key.private_bytes(
            serialization.Encoding.PEM,
            serialization.PrivateFormat.PKCS8,
            serialization.NoEncryption(),
        )
    )
    path.chmod(0o600)


def _write_cert(path: Path, cert: x509.Certificate) -> None:
    path.write_bytes(cert.public_bytes(serialization.Encoding.PEM))


def _name(common_name: str, organizations: tuple[str, ...] = ()) -> x509.Name:
    attrs = [x509.NameAttribute(NameOID.ORGANIZATION_NAME, org) for org in organizations]
    attrs.append(x509.NameAttribute(NameOID.COMMON_NAME, common_name))
    return x509.Name(attrs)


def _builder(subject: x509.Name, issuer: x509.Name, public_key: ec.EllipticCurvePublicKey) -> x509.CertificateBuilder:
    now = _dt.datetime.now(_dt.UTC)
    return (
        x509.CertificateBuilder()
        .subject_name(subject)
        .issuer_name(issuer)
        .public_key(public_key)
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - _CLOCK_SKEW)
        .not_valid_after(now + _VALIDITY)
    )


def _load_ca(ca: CertPair) -> tuple[x509.Certificate, ec.EllipticCurvePrivateKey]:
    cert = x509.load_pem_x509_certificate(ca.cert.read_bytes())
    key = serialization.load_pem_private_key(ca.key.read_bytes(), password=None)
    if not isinstance(key, ec.EllipticCurvePrivateKey):
        raise TypeError(f"{ca.key}: expected an EC private key")
    return cert, key


def _leaf(
    ca: CertPair,
    out: CertPair,
    subject: x509.Name,
    *,
    usage: x509.ObjectIdentifier,
    sans: x509.SubjectAlternativeName | None = None,
) -> CertPair:
    ca_cert, ca_key = _load_ca(ca)
    key = _new_key()
    builder = (
        _builder(subject, ca_cert.subject, key.public_key())
        .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
        .add_extension(
            x509.KeyUsage(
                digital_signature=True,
                key_encipherment=False,
                content_commitment=False,
                data_encipherment=False,
                key_agreement=False,
                key_cert_sign=False,
                crl_sign=False,
                encipher_only=False,
                decipher_only=False,
            ),
            critical=True,
        )
        .add_extension(x509.ExtendedKeyUsage([usage]), critical=False)
        .add_extension(x509.AuthorityKeyIdentifier.from_issuer_public_key(ca_key.public_key()), critical=False)
    )
    if sans is not None:
        builder = builder.add_extension(sans, critical=False)
    _write_key(out.key, key)
    _write_cert(out.cert, builder.sign(ca_key, hashes.SHA256()))
    return out


def issue_client_cert(ca: CertPair, directory: Path, name: str, user: str, groups: tuple[str, ...] = ()) -> CertPair:
    """Issue a client certificate for `user` in `groups` (CN and O, as Kubernetes reads them)."""
    return _leaf(
        ca,
        CertPair(directory / f"{name}.crt", directory / f"{name}.key"),
        _name(user, groups),
        usage=ExtendedKeyUsageOID.CLIENT_AUTH,
    )


def create_pki(directory: Path) -> Pki:
    """Create a fresh CA, serving cert, admin client cert and service-account keys in `directory`."""
    directory.mkdir(parents=True, exist_ok=True)

    ca = CertPair(directory / "ca.crt", directory / "ca.key")
    ca_key = _new_key()
    ca_name = _name("kopf-scheduler-local-ca")
    ca_cert = (
        _builder(ca_name, ca_name, ca_key.public_key())
        .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
        .add_extension(
            x509.KeyUsage(
                digital_signature=True,
                key_encipherment=False,
                content_commitment=False,
                data_encipherment=False,
                key_agreement=False,
                key_cert_sign=True,
                crl_sign=True,
                encipher_only=False,
                decipher_only=False,
            ),
            critical=True,
        )
        .add_extension(x509.SubjectKeyIdentifier.from_public_key(ca_key.public_key()), critical=False)
        .sign(ca_key, hashes.SHA256())
    )
    _write_key(ca.key, ca_key)
    _write_cert(ca.cert, ca_cert)

    sans = x509.SubjectAlternativeName(
        [x509.DNSName(n) for n in SERVING_DNS_NAMES] + [x509.IPAddress(ipaddress.ip_address(ip)) for ip in SERVING_IPS]
    )
    serving = _leaf(
        ca,
        CertPair(directory / "apiserver.crt", directory / "apiserver.key"),
        _name("kube-apiserver"),
        usage=ExtendedKeyUsageOID.SERVER_AUTH,
        sans=sans,
    )
    admin = issue_client_cert(ca, directory, "admin", ADMIN_USER, ADMIN_GROUPS)

    sa_key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
    sa_key_path, sa_pub_path = directory / "sa.key", directory / "sa.pub"
    _write_key(sa_key_path, sa_key)
    sa_pub_path.write_bytes(
        sa_key.public_key().public_bytes(serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo)
    )
    return Pki(ca=ca, serving=serving, admin=admin, service_account_key=sa_key_path, service_account_pub=sa_pub_path)
