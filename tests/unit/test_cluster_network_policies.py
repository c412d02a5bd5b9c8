"""infra/cluster: the NetworkPolicy agent's build change, its objects, and etcd's build and
data-version guard (no processes, no Go)."""

from __future__ import annotations

from pathlib import Path

import pytest

from core.settings import Settings
from infra.cluster import build, network_policies, paths
from infra.cluster.components import ETCD, Component, etcd_version_file
from infra.stack.process import StackError

# The two places of kube-network-policies v0.8.0's controller.go that state the queue.
_UPSTREAM = """func (c *Controller) a() {
	queue := &expr.Queue{Num: uint16(c.config.QueueID)}
	if c.config.FailOpen {
		queue.Flag = expr.QueueFlagBypass
	}
}

func (c *Controller) b() {
	queue := &expr.Queue{Num: uint16(c.config.QueueID)}
	if c.config.FailOpen {
		queue.Flag = expr.QueueFlagBypass
	}
}
"""


@pytest.fixture
def settings(tmp_path: Path) -> Settings:
    return Settings(home=tmp_path, stack_dir=None, cache_dir=tmp_path / "cache")


def test_the_queue_statement_becomes_the_nfqueue_target_in_both_places() -> None:
    patched = network_policies.patch_controller(_UPSTREAM)
    assert "expr.Queue" not in patched
    assert patched.count("nfqueueTarget(uint16(c.config.QueueID), c.config.FailOpen)") == 2
    # xt_NFQ_info_v3: queue number, one queue, flags (bypass = 1)
    assert 'Name: "NFQUEUE", Rev: 3' in network_policies.QUEUE_TARGET_GO


def test_a_source_the_change_was_not_written_for_is_refused() -> None:
    once = _UPSTREAM.split("func (c *Controller) b()")[0]
    with pytest.raises(StackError, match="found 1"):
        network_policies.patch_controller(once)


def test_the_agent_runs_as_kind_runs_it_on_the_node_network(settings: Settings) -> None:
    by_kind = {o["kind"]: o for o in network_policies.objects(settings)}
    assert set(by_kind) == {"ClusterRole", "ClusterRoleBinding", "ServiceAccount", "DaemonSet"}
    rules = by_kind["ClusterRole"]["rules"]
    assert {r for rule in rules for r in rule["resources"]} == {
        "pods",
        "namespaces",
        "networkpolicies",
    }
    assert all(set(rule["verbs"]) == {"list", "watch"} for rule in rules)
    pod = by_kind["DaemonSet"]["spec"]["template"]["spec"]
    assert pod["hostNetwork"] is True
    container = pod["containers"][0]
    assert container["image"] == network_policies.image_name(settings)
    assert container["imagePullPolicy"] == "Never"  # no registry: imported by `lk cluster up`
    assert "--disable-nri" in container["args"]  # containerd 1.6 has no NRI
    env = {e["name"]: e.get("value") for e in container["env"]}
    assert env["KUBERNETES_SERVICE_HOST"] == settings.cluster_node_ip


def test_etcd_builds_the_server_and_its_siblings_at_one_release(settings: Settings) -> None:
    go_mod = build.etcd_go_mod("v3.6.16")
    for module in ("server/v3", "api/v3", "client/pkg/v3", "client/v3", "pkg/v3"):
        assert f"go.etcd.io/etcd/{module} v3.6.16" in go_mod
    assert Component(ETCD, settings).binary() == paths.tools_bin_dir(settings) / "etcd"


def test_etcd_refuses_data_an_older_minor_version_wrote(settings: Settings) -> None:
    data = paths.etcd_dir(settings)
    (data / "member").mkdir(parents=True)  # data of a cluster before the version record: 3.4
    with pytest.raises(StackError, match=r"etcd 3\.4.*lk cluster reset"):
        Component(ETCD, settings).start()
    etcd = Component(ETCD, settings)
    etcd_version_file(settings).write_text("3.5\n")
    with pytest.raises(StackError, match=r"etcd 3\.5"):
        etcd.start()
