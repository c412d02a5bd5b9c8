"""Issue 15, item 7: a render that cannot read the cluster (`helm template`, `--dry-run`, a
GitOps tool) never rotates the credentials or Kafka's cluster id: a first install still
renders, an upgrade fails with a sentence, and the cluster id is derived, not random."""

from __future__ import annotations

import base64
import re

import helm_python as helm
import pytest

from tests.charts.chart_utils import Rendered, render_fresh, render_release


def _cluster_id(rendered: Rendered) -> str:
    (config,) = [
        c for c in rendered.by_component("ConfigMap", "kafka") if "cluster-id" in c["data"]
    ]
    return str(config["data"]["cluster-id"])


class TestUpgradeWithoutTheLiveObjects:
    def test_generated_credentials_should_fail_with_a_sentence_asking_for_existing_secret(
        self,
    ) -> None:
        values = {"kafka": {"clusterId": "MkU3OEVBNTcwNTJENDM2Qk"}}  # only the Secret is missing
        with pytest.raises(helm.HelmError, match=r"cannot read the Secret lambda-kappa/lk-creden"):
            render_release(values, upgrade=True)
        with pytest.raises(helm.HelmError, match=r"set credentials\.existingSecret"):
            render_release(values, upgrade=True)

    def test_kafka_cluster_id_should_fail_with_a_sentence_asking_for_it(self) -> None:
        values = {"credentials": {"existingSecret": "lk-own"}}
        with pytest.raises(
            helm.HelmError, match=r"cannot read the ConfigMap lambda-kappa/lk-kafka"
        ):
            render_release(values, upgrade=True)
        with pytest.raises(helm.HelmError, match=r"set kafka\.clusterId"):
            render_release(values, upgrade=True)

    def test_should_render_with_an_existing_secret_and_a_given_cluster_id(self) -> None:
        values = {
            "credentials": {"existingSecret": "lk-own"},
            "kafka": {"clusterId": "MkU3OEVBNTcwNTJENDM2Qk"},
        }
        rendered = render_release(values, upgrade=True)
        assert rendered.of_kind("Secret") == []
        assert _cluster_id(rendered) == "MkU3OEVBNTcwNTJENDM2Qk"
        (job,) = rendered.by_component("Job", "init")
        assert job["metadata"]["name"] == "lk-init-r2"

    def test_should_render_without_kafka(self) -> None:
        values = {
            "credentials": {"existingSecret": "lk-own"},
            "kafka": {"enabled": False, "externalHost": "kafka.example.internal"},
        }
        assert render_release(values, upgrade=True).by_component("ConfigMap", "kafka") == []


class TestFirstInstall:
    def test_should_still_generate_credentials(self) -> None:
        (secret,) = render_fresh().of_kind("Secret")
        assert len(secret["data"]) > 10

    def test_kafka_cluster_id_should_be_the_same_on_every_render(self) -> None:
        assert _cluster_id(render_fresh()) == _cluster_id(render_fresh())
        assert _cluster_id(render_release()) == _cluster_id(render_release())

    def test_kafka_cluster_id_should_differ_per_release_and_namespace(self) -> None:
        ids = {
            _cluster_id(render_release()),
            _cluster_id(render_release(name="other")),
            _cluster_id(render_release(namespace="elsewhere")),
        }
        assert len(ids) == 3

    def test_kafka_cluster_id_should_be_a_kafka_uuid(self) -> None:
        """Uuid.fromString: 22 base64url characters decoding to 16 bytes."""
        cluster_id = _cluster_id(render_release())
        assert re.fullmatch(r"[A-Za-z0-9_-]{22}", cluster_id)
        assert len(base64.urlsafe_b64decode(cluster_id + "==")) == 16

    def test_a_given_cluster_id_should_be_used(self) -> None:
        rendered = render_release({"kafka": {"clusterId": "AAAAAAAAAAAAAAAAAAAAAQ"}})
        assert _cluster_id(rendered) == "AAAAAAAAAAAAAAAAAAAAAQ"

    def test_schema_should_refuse_a_malformed_cluster_id(self) -> None:
        with pytest.raises(helm.HelmValuesError, match="clusterId"):
            render_release({"kafka": {"clusterId": "not-22-characters"}})
