"""infra/cluster/pki.py: the cluster's certificates (made in a temporary folder)."""

from __future__ import annotations

from pathlib import Path

import pytest
from cryptography import x509
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

from core.settings import Settings
from infra.cluster import paths, pki


@pytest.fixture
def settings(tmp_path: Path) -> Settings:
    return Settings(home=tmp_path, stack_dir=None, cache_dir=tmp_path / "cache")


def _load(settings: Settings, name: str) -> x509.Certificate:
    return x509.load_pem_x509_certificate((paths.pki_dir(settings) / f"{name}.crt").read_bytes())


def test_apiserver_sans_cover_the_relay_the_node_and_the_service(settings: Settings) -> None:
    dns, ips = pki.apiserver_sans(settings)
    assert {"127.0.0.1", "10.200.0.1", "10.96.0.1"} <= set(ips)
    assert {"kubernetes", "kubernetes.default", "kubernetes.default.svc"} <= set(dns)
    assert "kubernetes.default.svc.cluster.local" in dns
    assert pki.service_ip(settings) == "10.96.0.1"


def test_generated_certificates(settings: Settings) -> None:
    pki.generate_certificates(settings)
    ca = _load(settings, "ca")
    apiserver = _load(settings, "kube-apiserver")
    assert apiserver.issuer == ca.subject
    dns, ips = pki.cert_sans(apiserver)
    assert "127.0.0.1" in ips and "10.96.0.1" in ips and "kubernetes.default.svc" in dns
    usage = apiserver.extensions.get_extension_for_class(x509.ExtendedKeyUsage).value
    assert ExtendedKeyUsageOID.SERVER_AUTH in usage

    kubelet = _load(settings, "kubelet-client")
    cn = kubelet.subject.get_attributes_for_oid(NameOID.COMMON_NAME)[0].value
    org = kubelet.subject.get_attributes_for_oid(NameOID.ORGANIZATION_NAME)[0].value
    assert (cn, org) == ("system:node:lk-node", "system:nodes")
    admin = _load(settings, "admin")
    assert admin.subject.get_attributes_for_oid(NameOID.ORGANIZATION_NAME)[0].value == (
        "system:masters"
    )
    serving = _load(settings, "kubelet-serving")
    assert pki.cert_sans(serving)[1] == {"10.200.0.1"}
    for name in ("ca", "admin", "service-account"):
        key = paths.pki_dir(settings) / f"{name}.key"
        assert key.stat().st_mode & 0o077 == 0  # private keys are private


def test_generation_is_idempotent_and_follows_settings(settings: Settings) -> None:
    pki.generate_certificates(settings)
    first = _load(settings, "kube-apiserver").serial_number
    pki.generate_certificates(settings)
    assert _load(settings, "kube-apiserver").serial_number == first  # kept
    moved = settings.model_copy(update={"cluster_node_ip": "10.200.0.7"})
    pki.generate_certificates(moved)
    again = _load(moved, "kube-apiserver")
    assert again.serial_number != first  # the node IP changed: remade
    assert "10.200.0.7" in pki.cert_sans(again)[1]
