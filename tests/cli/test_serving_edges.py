"""Edges of `dse predict`'s serving modes a newcomer run found: huge shapes, KV-limited step counts, dp
replicas without clients, a layout flag at its default, and a static batch with no memory for its cache."""

from __future__ import annotations

import pytest
from typer.testing import CliRunner

from dse.cli import app
from tests.cli.test_load_cli import run_json

runner = CliRunner()
SERVE = ["predict", "--model", "llama-3.1-8b", "--gpu", "h100-sxm"]


@pytest.mark.parametrize(
    "args",
    [
        [*SERVE, "--input-tokens", "1024", "--output-tokens", "256", "--batch", "1000000000"],
        ["predict", "--model", "llama-3.1-8b", "--batch", "1000000000", "--seq-len", "100000"],
        ["predict", "--model", "llama-3.1-8b", "--training", "--micro-batch", "1000000000",
         "--global-batch", "1000000000", "--seq-len", "8192"],  # a batch within 2^31 - 1, its tokens not
    ],
)  # fmt: skip
def test_a_shape_past_2_to_the_53_is_bad_input_not_a_crash(args: list[str]) -> None:
    result = runner.invoke(app, args)
    assert result.exit_code == 2 and "up to 2^53" in result.stderr, result.output
    assert len(result.stderr.strip().splitlines()) == 1


def test_the_step_guard_counts_the_sequences_the_kv_cache_holds() -> None:
    """2,048 sequences may run, but the cache holds ~450 of 1,016 tokens: ~890k steps, refused up front
    (the guard used to divide by max_num_seqs and simulate for minutes)."""
    args = [*SERVE, "--input-tokens", "16", "--output-tokens", "2000", "--request-rate", "1000",
            "--num-requests", "200000", "--max-num-seqs", "2048"]  # fmt: skip
    result = runner.invoke(app, args)
    assert result.exit_code == 2 and "engine steps" in result.stderr, result.output


def test_replicas_without_clients_still_count_requests_and_preemptions() -> None:
    base = ["predict", "--model", "qwen3-30b-a3b", "--gpu", "h100-sxm", "--dp", "8", "--ep", "8",
            "--input-tokens", "512", "--output-tokens", "64", "--num-requests", "40"]  # fmt: skip
    out = run_json(*base, "--concurrency", "4")
    assert out["feasible"] and out["preemptions"] == 0 and out["num_requests"] == 40
    assert out["steps"] is None  # two runs were mixed: no one run's step count


def test_a_layout_flag_at_its_default_still_asks_for_serving() -> None:
    """`--tp 1` in a sweep over tp must give the serving keys, as `--tp 2` does."""
    one, two = (run_json(*SERVE, "--tp", tp, "--batch", "4") for tp in ("1", "2"))
    assert one["mode"] == two["mode"] == "static" and (one["num_gpus"], two["num_gpus"]) == (1, 2)
    assert "ttft_s" not in run_json(*SERVE, "--batch", "4")  # no flag: one forward pass


def test_static_batch_kv_share_and_running_batch() -> None:
    lengths = ["--input-tokens", "1024", "--output-tokens", "256"]
    over = run_json(*SERVE, *lengths, "--batch", "256")
    assert not over["feasible"] and over["kv_cache_utilization"] > 1  # the cache needs more than is left
    # activations alone exceed the memory: no share to report, rather than 0 (an empty cache)
    none_left = run_json(*SERVE, *lengths, "--batch", "2000")
    assert not none_left["feasible"] and none_left["kv_cache_utilization"] is None
    # one replica's running sequences, as under load: 32 requests over 4 dp replicas run 8 at a time
    static = run_json(*SERVE, *lengths, "--tp", "2", "--dp", "4", "--batch", "32")
    load = run_json(*SERVE, *lengths, "--tp", "2", "--dp", "4", "--concurrency", "32", "--num-requests", "32",
                    "--engine", "none", "--max-batched-tokens", "40000")  # fmt: skip
    assert static["avg_batch_size"] == 8.0 and load["avg_batch_size"] == pytest.approx(8.0, rel=0.05)
