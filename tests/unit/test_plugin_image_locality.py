"""ImageLocality: image names, spread-scaled sizes, thresholds, SKIP, vector agreement."""

from __future__ import annotations

import random

import numpy as np
import pytest
from builders import make_node, make_pod, node_info

from kopf_scheduler.core.framework.arguments import PluginArgsError
from kopf_scheduler.core.framework.basics import CycleState
from kopf_scheduler.core.framework.snapshot import Snapshot
from kopf_scheduler.core.model.parsing import parse_pod
from kopf_scheduler.core.plugins.image_locality import (
    MAX_CONTAINER_THRESHOLD,
    MIN_THRESHOLD,
    ImageLocality,
    calculate_priority,
    normalized_image_name,
)

Mi = 1024 * 1024


@pytest.mark.parametrize(
    "name, normalized",
    [
        pytest.param("nginx", "nginx:latest", id="no tag"),
        pytest.param("nginx:1.25", "nginx:1.25", id="tag"),
        pytest.param("registry:5000/app", "registry:5000/app:latest", id="port is not a tag"),
        pytest.param("registry:5000/app:v2", "registry:5000/app:v2", id="port and tag"),
        pytest.param("app@sha256:abc", "app@sha256:abc", id="digest"),
    ],
)
def test_normalized_image_name(name, normalized):
    assert normalized_image_name(name) == normalized


@pytest.mark.parametrize(
    "total, containers, score",
    [
        pytest.param(0, 1, 0, id="nothing present"),
        pytest.param(20 * Mi, 1, 0, id="below the 23Mi floor"),
        # 100 * (500 - 23) // (1000 - 23) = 47700 // 977 = 48
        pytest.param(500 * Mi, 1, 48, id="one container"),
        pytest.param(1000 * Mi, 1, 100, id="at the ceiling"),
        pytest.param(3000 * Mi, 2, 100, id="ceiling scales with containers"),
        # 100 * (1000 - 23) // (2000 - 23) = 97700 // 1977 = 49
        pytest.param(1000 * Mi, 2, 49, id="two containers"),
    ],
)
def test_calculate_priority(total, containers, score):
    assert calculate_priority(total, containers) == score


def run(pod, nodes):
    infos = [node_info(n) for n in nodes]
    snap = Snapshot.of(infos)
    plugin = ImageLocality()
    state = CycleState()
    if plugin.pre_score(state, pod, infos, snap).is_skip:
        return None
    per_node = [plugin.score(state, pod, i) for i in infos]
    vec = plugin.score_nodes(state, pod, snap.table, np.arange(len(infos), dtype=np.intp)).tolist()
    assert vec == per_node
    return per_node


def test_spread_factor():
    nodes = [
        make_node("a").image(250 * Mi, "web:1").obj(),
        make_node("b").image(250 * Mi, "web:1").image(500 * Mi, "db:latest", "db@sha256:1").obj(),
    ]
    pod = make_pod().container(image="web:1").container(image="db").obj()
    # web on 2/2 nodes: 250Mi each; db ("db" -> "db:latest") on 1/2 nodes: 500Mi * 0.5 = 250Mi
    # a: 100 * (250 - 23) // (2000 - 23) = 22700 // 1977 = 11
    # b: 100 * (500 - 23) // 1977 = 47700 // 1977 = 24
    assert run(pod, nodes) == [11, 24]


def test_init_containers_count():
    nodes = [make_node("a").image(800 * Mi, "tool:1").obj()]
    pod = make_pod().container(image="app:1").obj()
    assert run(pod, nodes) is None  # no node holds app:1
    body = make_pod().container(image="app:1").raw()
    body["spec"]["initContainers"] = [{"name": "i", "image": "tool:1"}]
    pod_with_init = parse_pod(body)
    # 800Mi on 1/1 nodes, 2 containers: 100 * (800 - 23) // (2000 - 23) = 77700 // 1977 = 39
    assert run(pod_with_init, nodes) == [39]


def test_image_volumes_count():
    # upstream sumImageScores counts image volumes (ImageVolume, GA in v1.36) like containers
    nodes = [make_node("a").image(800 * Mi, "data:1").obj(), make_node("b").obj()]
    pod = make_pod().container(image="app:1").volume({"name": "d", "image": {"reference": "data:1"}}).obj()
    # 800Mi on 1/2 nodes -> 400Mi; 2 images: a: 100 * (400 - 23) // (2000 - 23) = 37700 // 1977 = 19; b: 0
    assert run(pod, nodes) == [19, 0]


def test_same_image_twice_counts_twice():
    nodes = [make_node("a").image(300 * Mi, "x:1").obj()]
    pod = make_pod().container(image="x:1").container(image="x:1").obj()
    # 600Mi, 2 containers: 100 * (600 - 23) // 1977 = 57700 // 1977 = 29
    assert run(pod, nodes) == [29]


def test_names_and_args():
    assert ImageLocality().name == ImageLocality.NAME == "ImageLocality"
    assert ImageLocality(name="ImageLocalityPriority").name == "ImageLocalityPriority"
    assert (MIN_THRESHOLD, MAX_CONTAINER_THRESHOLD) == (23 * Mi, 1000 * Mi)
    with pytest.raises(PluginArgsError, match="x: unknown field: this plugin takes no arguments"):
        ImageLocality.new({"x": 1})


@pytest.mark.parametrize("seed", range(5))
def test_vector_agrees_with_per_node(seed):
    rng = random.Random(seed)
    images = ["a:1", "b:latest", "c:2", "d:latest"]
    nodes = []
    for i in range(25):
        b = make_node(f"n{i}")
        for img in rng.sample(images, rng.randint(0, 3)):
            b.image(rng.randint(1, 1500) * Mi, img)
        nodes.append(b.obj())
    pod_b = make_pod()
    for img in rng.sample(["a:1", "b", "c:2", "d", "e:9"], rng.randint(1, 3)):
        pod_b.container(image=img)
    run(pod_b.obj(), nodes)
