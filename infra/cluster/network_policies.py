"""The NetworkPolicy agent: kubernetes-sigs' kube-network-policies, the one kind ships.

The CNI bridge plugin enforces no NetworkPolicy, so without an agent the chart's policies are
declarations nobody checks. The agent runs as kind runs it: a privileged DaemonSet on the
node's network (here, the cluster's network namespace), watching pods, namespaces and
policies. It sends the first packet of every connection to or from a pod through an nfqueue
and answers with the verdict the policies give; established traffic never leaves the kernel.

Built from the Go module proxy with one change. Its nftables rules use nft's ``queue``
statement, and this machine's kernel is built without ``nft_queue`` (CONFIG_NFT_QUEUE) but with
xtables' NFQUEUE target and ``nft_compat``. The build therefore states the same queue as that
target (revision 3: queue number, one queue, the bypass flag): the same kernel queue and the
same verdicts. Its image holds the one static binary, like the pause image.
"""

from __future__ import annotations

from typing import Any, Final

from core.settings import Settings
from infra.cluster import api, network
from infra.stack.process import StackError, run_tool

MODULE: Final = "sigs.k8s.io/kube-network-policies"
NAME: Final = "kube-network-policies"
NAMESPACE: Final = "kube-system"
NFQUEUE_ID: Final = 98  # kind's choice (install.yaml)
METRICS_PORT: Final = 9080

# The change, in the controller's two places that build the queue statement.
_QUEUE_STATEMENT: Final = """\tqueue := &expr.Queue{Num: uint16(c.config.QueueID)}
\tif c.config.FailOpen {
\t\tqueue.Flag = expr.QueueFlagBypass
\t}
"""
_QUEUE_TARGET: Final = "\tqueue := nfqueueTarget(uint16(c.config.QueueID), c.config.FailOpen)\n"
QUEUE_TARGET_GO: Final = """package networkpolicy

import (
\t"encoding/binary"

\t"github.com/google/nftables/expr"
\t"github.com/google/nftables/xt"
)

// nfqueueTarget is nft's queue statement as xtables' NFQUEUE target (revision 3) through
// nft_compat, for kernels built without nft_queue: struct xt_NFQ_info_v3 {queuenum,
// queues_total, flags}, NFQ_FLAG_BYPASS = 1.
func nfqueueTarget(num uint16, bypass bool) expr.Any {
\tinfo := make(xt.Unknown, 6)
\tbinary.NativeEndian.PutUint16(info[0:], num)
\tbinary.NativeEndian.PutUint16(info[2:], 1)
\tif bypass {
\t\tbinary.NativeEndian.PutUint16(info[4:], 1)
\t}
\treturn &expr.Target{Name: "NFQUEUE", Rev: 3, Info: &info}
}
"""


def image_name(settings: Settings) -> str:
    # not registry.k8s.io's name: this is our build of it, with the change above
    return f"lk.local/{NAME}:{settings.network_policy_agent_version}"


def fingerprint() -> tuple[str, ...]:
    """What the change is: a new change builds again."""
    return (_QUEUE_STATEMENT, _QUEUE_TARGET, QUEUE_TARGET_GO)


def patch_controller(source: str) -> str:
    """The controller's source with the queue statement as the NFQUEUE target; refuses a
    source whose queue statements are not the two this change was written for."""
    count = source.count(_QUEUE_STATEMENT)
    if count != 2:
        raise StackError(
            f"{MODULE}: expected 2 nft queue statements in controller.go, found {count}: "
            "the NFQUEUE change needs updating for this version"
        )
    return source.replace(_QUEUE_STATEMENT, _QUEUE_TARGET)


def objects(settings: Settings) -> list[dict[str, Any]]:
    """Its RBAC and DaemonSet, as kind's install.yaml has them, without NRI: containerd 1.6
    has no NRI, so the agent learns pod IPs from the API alone."""
    labels = {"app.kubernetes.io/name": NAME, "k8s-app": NAME}
    node_ip = settings.cluster_node_ip
    return [
        *api.cluster_role(
            NAME,
            {"": ["pods", "namespaces"], "networking.k8s.io": ["networkpolicies"]},
            {"kind": "ServiceAccount", "name": NAME, "namespace": NAMESPACE},
        ),
        {
            "apiVersion": "v1",
            "kind": "ServiceAccount",
            "metadata": {"name": NAME, "namespace": NAMESPACE},
        },
        {
            "apiVersion": "apps/v1",
            "kind": "DaemonSet",
            "metadata": {"name": NAME, "namespace": NAMESPACE, "labels": labels},
            "spec": {
                "selector": {"matchLabels": labels},
                "template": {
                    "metadata": {"labels": labels},
                    "spec": {
                        "hostNetwork": True,
                        "priorityClassName": "system-node-critical",
                        "tolerations": [{"operator": "Exists"}],
                        "serviceAccountName": NAME,
                        "containers": [
                            {
                                "name": NAME,
                                "image": image_name(settings),
                                "imagePullPolicy": "Never",
                                "args": [
                                    "--hostname-override=$(MY_NODE_NAME)",
                                    "--disable-nri",
                                    f"--nfqueue-id={NFQUEUE_ID}",
                                    f"--metrics-bind-address=127.0.0.1:{METRICS_PORT}",
                                    "--v=2",
                                ],
                                "env": [
                                    # The API at the node's IP, as the components reach it:
                                    # the netns has no route to Service IPs of its own.
                                    {"name": "KUBERNETES_SERVICE_HOST", "value": node_ip},
                                    {"name": "KUBERNETES_SERVICE_PORT", "value": "6443"},
                                    {
                                        "name": "MY_NODE_NAME",
                                        "valueFrom": {"fieldRef": {"fieldPath": "spec.nodeName"}},
                                    },
                                ],
                                "resources": {"requests": {"cpu": "20m", "memory": "50Mi"}},
                                "securityContext": {
                                    "privileged": True,
                                    "capabilities": {"add": ["NET_ADMIN"]},
                                },
                            }
                        ],
                    },
                },
            },
        },
    ]


def ready(settings: Settings) -> bool:
    """Its pod runs and it has written its table: it has read the policies and pods."""
    try:
        status = api.get(settings, f"/apis/apps/v1/namespaces/{NAMESPACE}/daemonsets/{NAME}")
        table = ["nft", "list", "table", "inet", NAME]
        run_tool("nft", network.nsenter_argv(settings, table), timeout_s=10)
    except StackError:
        return False
    st = status.get("status", {})
    return bool(st.get("desiredNumberScheduled")) and st.get("numberReady") == st.get(
        "desiredNumberScheduled"
    )
