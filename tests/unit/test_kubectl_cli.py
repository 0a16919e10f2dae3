"""The kubectl plugin's habits without a cluster: how a pod is named, where -n may go, and what shell
completion offers (tests/tools/test_kubectl_plugin_process.py runs it as a process: kubectl's exit status
for usage errors, the completion script's last line; tests/cluster/test_kubectl_plugin.py runs the commands
against the real control plane)."""

from __future__ import annotations

import pytest

from kopf_scheduler.commands.kubectl import PluginError, Target, completions, parser, target


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
