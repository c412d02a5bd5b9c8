"""Certificates (kubernetes-the-hard-way: "Provisioning a CA and Generating TLS Certificates").

One CA signs every certificate of the cluster: the apiserver's serving certificate, the
kubelet's serving certificate, and a client certificate per user (admin, each control plane
component, the node, kube-proxy, CoreDNS, the apiserver's client to kubelets). The user name is
the certificate's CN and its groups are the O fields, as the apiserver reads them. The service
accounts' token signing key pair is here too. Keys are ECDSA P-256 (fast to make and to verify).
"""

from __future__ import annotations

import datetime as dt
import ipaddress
from dataclasses import dataclass
from pathlib import Path

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

from core.settings import Settings
from infra.cluster import paths

_VALIDITY = dt.timedelta(days=3650)


@dataclass(frozen=True)
class CertSpec:
    """One leaf certificate: ``name`` is its file name (name.crt, name.key)."""

    name: str
    common_name: str
    organizations: tuple[str, ...] = ()
    dns_names: tuple[str, ...] = ()
    ip_addresses: tuple[str, ...] = ()
    server: bool = False
    client: bool = True


def service_ip(settings: Settings) -> str:
    """The ``kubernetes`` Service's IP: the first address of the Service CIDR."""
    return str(ipaddress.ip_network(settings.cluster_service_cidr)[1])


def apiserver_sans(settings: Settings) -> tuple[tuple[str, ...], tuple[str, ...]]:
    """DNS names and IPs the apiserver answers as: the host's relay (127.0.0.1), the node IP,
    the ``kubernetes`` Service's IP and names."""
    domain = settings.cluster_domain
    dns = (
        "localhost",
        settings.cluster_node_name,
        "kubernetes",
        "kubernetes.default",
        "kubernetes.default.svc",
        f"kubernetes.default.svc.{domain}",
    )
    ips = ("127.0.0.1", settings.cluster_node_ip, service_ip(settings))
    return dns, ips


# The user the apiserver presents to kubelets (logs, exec, port-forward); bootstrap binds it to
# the system:kubelet-api-admin ClusterRole.
APISERVER_KUBELET_CLIENT = "kube-apiserver-kubelet-client"
COREDNS_USER = "lk:coredns"


def cert_specs(settings: Settings) -> list[CertSpec]:
    node = settings.cluster_node_name
    dns, ips = apiserver_sans(settings)
    return [
        CertSpec("kube-apiserver", "kube-apiserver", (), dns, ips, server=True, client=False),
        CertSpec("apiserver-kubelet-client", APISERVER_KUBELET_CLIENT),
        CertSpec("admin", "admin", ("system:masters",)),
        CertSpec("kube-controller-manager", "system:kube-controller-manager"),
        CertSpec("kube-scheduler", "system:kube-scheduler"),
        CertSpec("kube-proxy", "system:kube-proxy", ("system:node-proxier",)),
        CertSpec("kubelet-client", f"system:node:{node}", ("system:nodes",)),
        CertSpec(
            "kubelet-serving",
            f"system:node:{node}",
            ("system:nodes",),
            (node,),
            (settings.cluster_node_ip,),
            server=True,
            client=False,
        ),
        CertSpec("coredns", COREDNS_USER),
    ]


def _new_key() -> ec.EllipticCurvePrivateKey:
    return ec.generate_private_key(ec.SECP256R1())


def _key_pem(key: ec.EllipticCurvePrivateKey) -> bytes:
    return key.private_bytes(
        serialization.Encoding.PEM,
        serialization.PrivateFormat.TraditionalOpenSSL,
        serialization.NoEncryption(),
    )


def _write(path: Path, data: bytes, mode: int = 0o644) -> None:
    path.write_bytes(data)
    path.chmod(mode)


def _name(common_name: str, organizations: tuple[str, ...] = ()) -> x509.Name:
    attrs = [x509.NameAttribute(NameOID.ORGANIZATION_NAME, o) for o in organizations]
    return x509.Name([*attrs, x509.NameAttribute(NameOID.COMMON_NAME, common_name)])


def _builder(
    subject: x509.Name, issuer: x509.Name, public_key: ec.EllipticCurvePublicKey, *, ca: bool
) -> x509.CertificateBuilder:
    """What every certificate here shares: validity (from 5 minutes ago, against clock skew),
    basic constraints and key usage (a CA signs certificates; a leaf signs and enciphers)."""
    now = dt.datetime.now(dt.UTC)
    usage = x509.KeyUsage(
        digital_signature=True,
        content_commitment=False,
        key_encipherment=not ca,
        data_encipherment=False,
        key_agreement=False,
        key_cert_sign=ca,
        crl_sign=ca,
        encipher_only=False,
        decipher_only=False,
    )
    return (
        x509.CertificateBuilder()
        .subject_name(subject)
        .issuer_name(issuer)
        .public_key(public_key)
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - dt.timedelta(minutes=5))
        .not_valid_after(now + _VALIDITY)
        .add_extension(x509.BasicConstraints(ca=ca, path_length=None), critical=True)
        .add_extension(usage, critical=True)
    )


def certificate_authority(pki: Path) -> tuple[x509.Certificate, ec.EllipticCurvePrivateKey]:
    """The cluster's CA (made once; every later run reuses it)."""
    crt, key = pki / "ca.crt", pki / "ca.key"
    if crt.is_file() and key.is_file():
        ca_key = serialization.load_pem_private_key(key.read_bytes(), None)
        assert isinstance(ca_key, ec.EllipticCurvePrivateKey)
        return x509.load_pem_x509_certificate(crt.read_bytes()), ca_key
    ca_key = _new_key()
    name = _name("lambda-kappa-cluster-ca")
    cert = (
        _builder(name, name, ca_key.public_key(), ca=True)
        .add_extension(x509.SubjectKeyIdentifier.from_public_key(ca_key.public_key()), False)
        .sign(ca_key, hashes.SHA256())
    )
    _write(key, _key_pem(ca_key), 0o600)
    _write(crt, cert.public_bytes(serialization.Encoding.PEM))
    return cert, ca_key


def issue(
    spec: CertSpec, ca_cert: x509.Certificate, ca_key: ec.EllipticCurvePrivateKey
) -> tuple[x509.Certificate, ec.EllipticCurvePrivateKey]:
    key = _new_key()
    usages = ([ExtendedKeyUsageOID.SERVER_AUTH] if spec.server else []) + (
        [ExtendedKeyUsageOID.CLIENT_AUTH] if spec.client else []
    )
    subject = _name(spec.common_name, spec.organizations)
    builder = (
        _builder(subject, ca_cert.subject, key.public_key(), ca=False)
        .add_extension(x509.ExtendedKeyUsage(usages), critical=False)
        .add_extension(
            x509.AuthorityKeyIdentifier.from_issuer_public_key(ca_key.public_key()), False
        )
    )
    if spec.dns_names or spec.ip_addresses:
        names: list[x509.GeneralName] = [x509.DNSName(d) for d in spec.dns_names]
        names += [x509.IPAddress(ipaddress.ip_address(i)) for i in spec.ip_addresses]
        builder = builder.add_extension(x509.SubjectAlternativeName(names), critical=False)
    return builder.sign(ca_key, hashes.SHA256()), key


def cert_sans(cert: x509.Certificate) -> tuple[set[str], set[str]]:
    """A certificate's DNS names and IPs (empty if it has no SAN extension)."""
    try:
        san = cert.extensions.get_extension_for_class(x509.SubjectAlternativeName).value
    except x509.ExtensionNotFound:
        return set(), set()
    return (
        set(san.get_values_for_type(x509.DNSName)),
        {str(i) for i in san.get_values_for_type(x509.IPAddress)},
    )


def _current(path: Path, spec: CertSpec, ca_cert: x509.Certificate) -> bool:
    """Whether the certificate on disk is this spec's, signed by this CA (else remake it)."""
    try:
        cert = x509.load_pem_x509_certificate(path.read_bytes())
    except (FileNotFoundError, ValueError):
        return False
    if cert.issuer != ca_cert.subject or cert.subject != _name(
        spec.common_name, spec.organizations
    ):
        return False
    return cert_sans(cert) == (set(spec.dns_names), set(spec.ip_addresses))


def generate_certificates(settings: Settings) -> Path:
    """The CA, every leaf certificate and the service account key pair (idempotent: what is
    on disk and still matches the settings is kept)."""
    pki = paths.pki_dir(settings)
    pki.mkdir(parents=True, exist_ok=True)
    pki.chmod(0o700)
    ca_cert, ca_key = certificate_authority(pki)
    for spec in cert_specs(settings):
        crt, key = pki / f"{spec.name}.crt", pki / f"{spec.name}.key"
        if key.is_file() and _current(crt, spec, ca_cert):
            continue
        cert, leaf_key = issue(spec, ca_cert, ca_key)
        _write(key, _key_pem(leaf_key), 0o600)
        _write(crt, cert.public_bytes(serialization.Encoding.PEM))
    sa_key, sa_pub = pki / "service-account.key", pki / "service-account.pub"
    if not (sa_key.is_file() and sa_pub.is_file()):
        signing_key = _new_key()
        _write(sa_key, _key_pem(signing_key), 0o600)
        _write(
            sa_pub,
            signing_key.public_key().public_bytes(
                serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo
            ),
        )
    return pki
