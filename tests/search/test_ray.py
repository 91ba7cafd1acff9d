"""The one test that starts a real (local) Ray instance: same points and front as the serial executor."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from dse.search.runner import run_study

from .test_runner import comparable, read_log, zdt_study
from .toy import zdt1

pytest.importorskip("ray")


def test_ray_executor_matches_serial(tmp_path: Path) -> None:
    study = zdt_study(tmp_path, 96)
    serial = run_study(study, out=tmp_path / "serial", evaluator=zdt1)
    ray_run = run_study(study, out=tmp_path / "ray", evaluator=zdt1, executor="ray", workers=2)
    assert ray_run.executor == "ray" and ray_run.stop_reason == serial.stop_reason
    assert comparable(read_log(ray_run.run_dir)) == comparable(read_log(serial.run_dir))
    assert json.loads((ray_run.run_dir / "summary.json").read_text())["front_size"] == serial.front_size
    import ray

    assert not ray.is_initialized()  # the executor shut down the instance it started


def test_ray_continues_a_finished_run_with_every_logged_point(tmp_path: Path) -> None:
    """A serial run that ended mid-generation, continued on Ray with a larger budget: the serial run of
    that budget, every logged point kept (tests/search/test_continue.py, for serial and process)."""
    from .test_continue import FIRST, MORE, assert_results_hold_the_log, discrete_study

    first = run_study(discrete_study(tmp_path, FIRST), out=tmp_path, evaluator=zdt1)
    more = run_study(resume=first.run_dir, evaluator=zdt1, n_points=MORE, executor="ray", workers=2)
    assert more.executor == "ray" and more.n_cached == FIRST and more.n_evaluated == MORE - FIRST
    assert_results_hold_the_log(more)
    straight = run_study(discrete_study(tmp_path, MORE), out=tmp_path / "straight", evaluator=zdt1)
    assert comparable(read_log(more.run_dir)) == comparable(read_log(straight.run_dir))


def test_local_ray_env_is_loopback_only_and_restored(monkeypatch: pytest.MonkeyPatch) -> None:
    import os

    import ray._private.ray_constants as ray_constants
    from ray._private.services import get_node_ip_address

    from dse.search.executors import CLOSED_LOCAL_PROXY, _local_ray_env

    monkeypatch.setenv("HTTPS_PROXY", "http://corp-proxy:3128")
    monkeypatch.delenv("NO_PROXY", raising=False)
    before = ray_constants.ENABLE_RAY_CLUSTER
    with _local_ray_env(local=True):
        assert os.environ["HTTPS_PROXY"] == os.environ["http_proxy"] == CLOSED_LOCAL_PROXY
        assert "127.0.0.1" in os.environ["NO_PROXY"]
        assert os.environ["RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER"] == "0"
        assert get_node_ip_address() == "127.0.0.1"  # no 8.8.8.8 lookup
    assert os.environ["HTTPS_PROXY"] == "http://corp-proxy:3128" and "NO_PROXY" not in os.environ
    assert ray_constants.ENABLE_RAY_CLUSTER is before
    with _local_ray_env(local=False):  # joining a cluster by address: Ray's own behaviour
        assert os.environ["HTTPS_PROXY"] == "http://corp-proxy:3128"


@pytest.mark.slow
def test_study_on_a_two_node_cluster_by_address(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """`dse run --address`: a two-node local cluster (two raylets on 127.0.0.1, one CPU each) runs a study
    and gives the serial run's points. ~15 s (`make test-slow`)."""
    import ray
    import ray._private.ray_constants as ray_constants
    from ray.cluster_utils import Cluster

    # loopback-only, as dse's own local start (the cluster processes inherit the variable)
    monkeypatch.setenv("RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER", "0")
    monkeypatch.setattr(ray_constants, "ENABLE_RAY_CLUSTER", False)
    cluster = Cluster(initialize_head=True, head_node_args={"num_cpus": 1, "node_ip_address": "127.0.0.1"})
    try:
        cluster.add_node(num_cpus=1, node_ip_address="127.0.0.1")
        cluster.wait_for_nodes()
        study = zdt_study(tmp_path, 32)
        serial = run_study(study, out=tmp_path / "serial", evaluator=zdt1)
        on_cluster = run_study(
            study, out=tmp_path / "cluster", evaluator=zdt1, executor="ray", address=cluster.address
        )
        assert on_cluster.executor == "ray" and on_cluster.n_points == serial.n_points == 32
        assert comparable(read_log(on_cluster.run_dir)) == comparable(read_log(serial.run_dir))
        assert not ray.is_initialized()  # the driver disconnected; the cluster keeps running
        assert len([n for n in cluster.list_all_nodes()]) == 2
    finally:
        if ray.is_initialized():
            ray.shutdown()
        cluster.shutdown()
