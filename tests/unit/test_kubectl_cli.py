"""The kubectl plugin's habits without a cluster: how a pod is named, where -n may go, and what shell
completion offers; then its commands against the fake API server (tests/fakeapi.py, the ``api_server`` fixture):
the policies table, the leader's lookup, explain's errors, completion's lookups
(tests/tools/test_kubectl_plugin_process.py runs it as a process: kubectl's exit status
for usage errors, the completion script's last line; tests/cluster/test_kubectl_plugin.py runs the commands
against the real control plane)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
import yaml
from fakeapi import FakeApiServer

from kopf_scheduler.commands.kubectl import (
    LEADER_LABEL,
    PluginError,
    Target,
    complete,
    completions,
    leader_pod,
    main,
    parser,
    target,
)
from kopf_scheduler.edge.blocking import BlockingApi
from kopf_scheduler.edge.credentials import Credentials


@pytest.mark.parametrize(
    ("argument", "flag", "context", "expected"),
    [
        pytest.param("web", None, None, Target("default", "web"), id="NAME: default namespace"),
        pytest.param("web", None, "team-a", Target("team-a", "web"), id="NAME: the context's namespace"),
        pytest.param("web", "team-b", "team-a", Target("team-b", "web"), id="NAME: -n wins over the context"),
        pytest.param("pod/web", "team-b", None, Target("team-b", "web"), id="pod/NAME"),
        pytest.param("pods/web", None, "team-a", Target("team-a", "web"), id="pods/NAME"),
        pytest.param("po/web", None, None, Target("default", "web"), id="po/NAME"),
        pytest.param("team-c/web", None, "team-a", Target("team-c", "web"), id="NS/NAME"),
        pytest.param("team-c/web", "team-c", None, Target("team-c", "web"), id="NS/NAME agreeing with -n"),
    ],
)
def test_a_pod_is_named_as_kubectl_names_it(
    argument: str, flag: str | None, context: str | None, expected: Target
) -> None:
    assert target(argument, flag_namespace=flag, context_namespace=context) == expected


@pytest.mark.parametrize(
    ("argument", "flag", "says"),
    [
        pytest.param("a/b/c", None, "give the pod as POD, pod/POD or NAMESPACE/POD", id="too many parts"),
        pytest.param("/web", None, "give the pod as", id="empty namespace"),
        pytest.param("pod/", None, "give the pod as", id="empty name"),
        pytest.param("team-c/web", "team-d", "is in namespace team-c, but -n says team-d", id="NS/NAME against -n"),
    ],
)
def test_what_names_no_pod_is_refused(argument: str, flag: str | None, says: str) -> None:
    with pytest.raises(PluginError, match=says):
        target(argument, flag_namespace=flag, context_namespace=None)


@pytest.mark.parametrize(
    "argv",
    [
        pytest.param(["-n", "ns", "explain", "web"], id="-n before the command"),
        pytest.param(["explain", "web", "-n", "ns"], id="-n after the pod"),
        pytest.param(["explain", "--namespace", "ns", "web"], id="--namespace"),
    ],
)
def test_namespace_flag_goes_before_or_after_the_command(argv: list[str]) -> None:
    args = parser().parse_args(argv)
    assert (args.namespace, args.pod, args.operator_namespace) == ("ns", "web", "kopf-scheduler")


def test_flags_before_the_command_are_kept_when_the_command_does_not_repeat_them() -> None:
    args = parser().parse_args(["--operator-namespace", "ops", "--kubeconfig", "k", "explain", "web", "-o", "yaml"])
    assert (args.operator_namespace, args.kubeconfig, args.namespace, args.output) == ("ops", "k", None, "yaml")
    assert parser().parse_args(["policies", "-o", "wide", "a", "b"]).names == ["a", "b"]


CLUSTER = {
    ("namespaces", ""): ["default", "kopf-scheduler", "team-a"],
    ("pods", ""): ["api-0", "web-0", "web-1"],  # the context's namespace
    ("pods", "team-a"): ["batch-0", "web-9"],
    ("policies", ""): ["bin-packing", "default"],
}


def lookup(kind: str, namespace: str) -> list[str]:
    return CLUSTER.get((kind, namespace), [])


@pytest.mark.parametrize(
    ("words", "offered"),
    [
        pytest.param([""], ["explain", "policies"], id="the commands"),
        pytest.param(["ex"], ["explain"], id="a command begun"),
        pytest.param(["--"], ["--kubeconfig", "--namespace", "--operator-namespace"], id="global flags"),
        pytest.param(["explain", "w"], ["web-0", "web-1"], id="pods of the context's namespace"),
        pytest.param(["-n", "team-a", "explain", ""], ["batch-0", "web-9"], id="pods of -n"),
        pytest.param(["explain", "-n", "team-a", "w"], ["web-9"], id="pods of -n given after"),
        pytest.param(["explain", "pod/a"], ["pod/api-0"], id="pod/NAME"),
        pytest.param(["explain", "team-a/b"], ["team-a/batch-0"], id="NS/NAME"),
        pytest.param(["explain", "web-0", "-o", ""], ["wide", "json", "yaml"], id="outputs"),
        pytest.param(["explain", "-n", "t"], ["team-a"], id="namespaces"),
        pytest.param(["explain", "web-0", "--l"], ["--lease"], id="a flag of explain"),
        pytest.param(["explain", "web-0", ""], [], id="one pod only"),
        pytest.param(["policies", "default", ""], ["bin-packing"], id="policies not yet named"),
        pytest.param(["explain", "--lease", ""], [], id="a flag's free value"),
    ],
)
def test_completion_offers_commands_flags_namespaces_pods_and_policies(words: list[str], offered: list[str]) -> None:
    assert completions(words, lookup) == offered


# --------------------------------------------------------------------------- against the fake API server
# The commands' requests, as the user, against tests/fakeapi.py on a loop in a thread (the plugin's client blocks).


def policy_body(name: str, scheduler: str, accepted: str, reason: str = "", message: str = "") -> dict[str, Any]:
    return {
        "apiVersion": "scheduling.kopf.dev/v1alpha1",
        "kind": "SchedulingPolicy",
        "metadata": {"name": name},
        "spec": {"schedulerName": scheduler},
        "status": {
            "conditions": [{"type": "Accepted", "status": accepted, "reason": reason, "message": message}],
            "activeGeneration": 1,
        },
    }


def with_policies(server: FakeApiServer) -> None:
    server.add("scheduling.kopf.dev", "v1alpha1", "schedulingpolicies", policy_body("zeta", "kopf-z", "True"))
    server.add(
        "scheduling.kopf.dev",
        "v1alpha1",
        "schedulingpolicies",
        policy_body("alpha", "kopf-a", "False", "Invalid", "spec.priorities[0].name: unknown priority 'X'" + "." * 80),
    )


def test_policies_lists_every_policy_sorted_with_its_state(api_server, capsys) -> None:
    kubeconfig = str(api_server(with_policies))
    assert main(["--kubeconfig", kubeconfig, "policies"]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines[0].split() == ["NAME", "SCHEDULER", "ACCEPTED", "REASON", "MESSAGE"]
    assert lines[1].split()[:4] == ["alpha", "kopf-a", "False", "Invalid"] and lines[1].endswith("...")
    assert len(lines[1].split("   ")[-1]) <= 80
    assert lines[2].split() == ["zeta", "kopf-z", "True"]
    assert main(["--kubeconfig", kubeconfig, "policies", "zeta", "-o", "wide"]) == 0
    wide = capsys.readouterr().out.splitlines()
    assert wide[0].split()[-2:] == ["GENERATION", "ACTIVE"] and len(wide) == 2 and wide[1].split()[-1] == "1"


def test_policies_prints_one_object_or_a_list_as_json_or_yaml(api_server, capsys) -> None:
    kubeconfig = str(api_server(with_policies))
    assert main(["--kubeconfig", kubeconfig, "policies", "zeta", "-o", "json"]) == 0
    assert json.loads(capsys.readouterr().out)["metadata"]["name"] == "zeta"
    assert main(["--kubeconfig", kubeconfig, "policies", "-o", "yaml"]) == 0
    listed = yaml.safe_load(capsys.readouterr().out)
    assert listed["kind"] == "List" and [i["metadata"]["name"] for i in listed["items"]] == ["alpha", "zeta"]


def test_policies_names_a_missing_policy_as_kubectl_does(api_server, capsys) -> None:
    kubeconfig = str(api_server(with_policies))
    assert main(["--kubeconfig", kubeconfig, "policies", "zeta", "nope"]) == 1
    assert capsys.readouterr().err == 'error: schedulingpolicies.scheduling.kopf.dev "nope" not found\n'


def operator_pod(name: str, phase: str) -> dict[str, Any]:
    key, _, value = LEADER_LABEL.partition("=")
    return {
        "metadata": {"name": name, "namespace": "kopf-scheduler", "labels": {key: value}},
        "spec": {"containers": [{"name": "c", "image": "i"}]},
        "status": {"phase": phase},
    }


def lease(holder: str) -> dict[str, Any]:
    return {"metadata": {"name": "kopf-scheduler", "namespace": "kopf-scheduler"}, "spec": {"holderIdentity": holder}}


@pytest.mark.parametrize(
    "objects, leader, error",
    [
        pytest.param([("coordination.k8s.io", "leases", lease("op-7d9_x1y2"))], "op-7d9", None, id="Lease holder"),
        pytest.param([("coordination.k8s.io", "leases", lease("plain"))], "plain", None, id="holder without suffix"),
        pytest.param(
            [("", "pods", operator_pod("op-1", "Running")), ("", "pods", operator_pod("op-2", "Pending"))],
            "op-1",
            None,
            id="no Lease: the one running pod",
        ),
        pytest.param(
            [("", "pods", operator_pod("op-1", "Running")), ("", "pods", operator_pod("op-2", "Running"))],
            None,
            "no leader in Lease kopf-scheduler/kopf-scheduler, and 2 operator pods run: op-1, op-2",
            id="two running pods",
        ),
        pytest.param([], None, "no leader in Lease kopf-scheduler/kopf-scheduler and no running pod", id="none"),
    ],
)
def test_the_leader_is_the_lease_holder_or_the_one_running_operator_pod(api_server, objects, leader, error) -> None:
    def seed(server: FakeApiServer) -> None:
        for group, plural, body in objects:
            server.add(group, "v1", plural, body)

    kubeconfig = api_server(seed)
    with BlockingApi(Credentials(server=server_url(kubeconfig), source="test")) as client:
        if error is None:
            assert leader_pod(client, namespace="kopf-scheduler", lease="kopf-scheduler") == leader
        else:
            with pytest.raises(PluginError) as caught:
                leader_pod(client, namespace="kopf-scheduler", lease="kopf-scheduler")
            assert str(caught.value).startswith(error)


def server_url(kubeconfig: Path) -> str:
    return str(yaml.safe_load(kubeconfig.read_text())["clusters"][0]["cluster"]["server"])


def with_leader(server: FakeApiServer) -> None:
    server.add("coordination.k8s.io", "v1", "leases", lease("op-1_abc"))


def test_explain_asks_the_leader_through_the_pod_proxy_and_says_who_did_not_answer(api_server, capsys) -> None:
    kubeconfig = str(api_server(with_leader))
    assert main(["--kubeconfig", kubeconfig, "explain", "web", "--scheme", "http"]) == 1
    # the fake API server serves no pods/proxy: its 404 is the operator pod's answer as the plugin reports it
    assert capsys.readouterr().err.startswith("error: kopf-scheduler/op-1:10259 answered HTTP 404: ")


def test_explain_over_https_first_mints_the_explain_accounts_token(api_server, capsys) -> None:
    kubeconfig = api_server(with_leader)
    assert main(["--kubeconfig", str(kubeconfig), "explain", "team-b/web"]) == 1
    err = capsys.readouterr().err
    assert err.startswith(
        "error: cannot request a token of ServiceAccount kopf-scheduler/kopf-scheduler-explain: HTTP 404"
    )
    assert err.rstrip().endswith("(deploy/rbac.yaml and the chart create it; --explain-account names another)")


def with_pods(server: FakeApiServer) -> None:
    for namespace in ("team-a", "team-b"):
        server.add("", "v1", "namespaces", {"metadata": {"name": namespace}})
    for namespace, name in (("team-a", "web-1"), ("team-a", "web-2"), ("team-a", "db"), ("team-b", "web-9")):
        server.add("", "v1", "pods", {"metadata": {"name": name, "namespace": namespace}, "spec": {"containers": []}})


@pytest.mark.parametrize(
    "words, offered",
    [
        pytest.param(["explain", "we"], ["web-1", "web-2"], id="pods of the context's namespace"),
        pytest.param(["explain", "pod/d"], ["pod/db"], id="pod/ prefix"),
        pytest.param(["explain", "team-b/"], ["team-b/web-9"], id="NS/ prefix"),
        pytest.param(["-n", "team-"], ["team-a", "team-b"], id="namespaces"),
    ],
)
def test_completion_asks_the_cluster_for_names(api_server, capsys, words, offered) -> None:
    kubeconfig = str(api_server(with_pods))
    assert complete(["--kubeconfig", kubeconfig, *words]) == 0
    assert capsys.readouterr().out.splitlines() == [*offered, ":4"]


def test_completion_offers_nothing_when_the_cluster_cannot_be_asked(tmp_path, capsys) -> None:
    assert complete(["--kubeconfig", str(tmp_path / "missing"), "explain", "we"]) == 0
    assert capsys.readouterr().out.splitlines() == [":4"]
