"""`dse sweep` and `dse compare`: tables, JSON rows, offline HTML charts and one-line errors."""

from __future__ import annotations

import json
import re
from html.parser import HTMLParser
from pathlib import Path

import pytest
from typer.testing import CliRunner

from dse.cli import app

runner = CliRunner()
WORKLOAD = ["--model", "llama-3.1-8b", "--input-tokens", "128", "--output-tokens", "16"]
EXTERNAL = re.compile(r"<(?:script|link|img|iframe)\b[^>]*\b(?:src|href)\s*=\s*[\"']?(?:https?:)?//", re.I)


def run_json(*args: str) -> object:
    result = runner.invoke(app, [*args, "--json"])
    assert result.exit_code == 0, result.output
    return json.loads(result.stdout)


class _Tags(HTMLParser):
    def __init__(self) -> None:
        super().__init__()
        self.tags: list[str] = []

    def handle_starttag(self, tag: str, attrs: list) -> None:
        self.tags.append(tag)


def check_offline_page(path: Path) -> None:
    text = path.read_text(encoding="utf-8")
    assert not EXTERNAL.search(text)
    markup = re.sub(r"<script\b[^>]*>.*?</script>", "<script></script>", text, flags=re.S | re.I)
    # plotly.js' own strings (its logo link) aside, no tag loads anything from the network
    assert not re.search(r"""(?:src|href)\s*=\s*["']?(?:https?:)?//""", markup)
    parser = _Tags()
    parser.feed(text)
    parser.close()
    assert {"html", "head", "script", "body", "div"} <= set(parser.tags)
    assert "Plotly.newPlot" in text and len(text) > 1_000_000  # plotly.js inlined


def test_clock_sweep_of_decode_heavy_workload_is_monotone() -> None:
    rows = run_json("sweep", "sm_clock_mhz=600:1980:4", *WORKLOAD, "--batch", "4")
    assert isinstance(rows, list)
    assert [r["params"]["sm_clock_mhz"] for r in rows] == pytest.approx([600, 1060, 1520, 1980])
    assert all(r["feasible"] for r in rows)
    for key in ("tpot_s", "e2e_latency_s", "ttft_s"):
        values = [r["metrics"][key] for r in rows]
        assert values == sorted(values, reverse=True), key
    assert rows[0]["metrics"]["e2e_latency_s"] > rows[-1]["metrics"]["e2e_latency_s"]


def test_two_d_sweep_has_steps1_x_steps2_rows_and_a_table(tmp_path: Path) -> None:
    out = tmp_path / "sweep.html"
    args = ["sweep", "gpu.num_sms=66:132:3", "batch=1:16:2", *WORKLOAD, "--html", str(out)]
    result = runner.invoke(app, args)
    assert result.exit_code == 0, result.output
    assert "TTFT" in result.stdout and "static batch swept" in result.stdout
    rows = run_json(*args[:-2])
    assert isinstance(rows, list) and len(rows) == 6
    assert {(r["params"]["gpu.num_sms"], r["params"]["batch"]) for r in rows} == {
        (s, b) for s in (66, 99, 132) for b in (1, 16)
    }
    check_offline_page(out)


def test_memory_data_rate_sweep_raises_throughput() -> None:
    rows = run_json("sweep", "gpu.memory.data_rate_gbit_per_s=3.2:6.4:3", *WORKLOAD, "--batch", "8")
    tput = [r["metrics"]["output_tokens_per_s"] for r in rows]  # type: ignore[index]
    assert tput == sorted(tput) and tput[0] < tput[-1]


def test_swept_concurrency_implies_the_load_mode() -> None:
    args = ["sweep", "concurrency=1:8:2", *WORKLOAD, "--num-requests", "8"]
    rows = run_json(*args)
    assert [r["params"]["concurrency"] for r in rows] == [1, 8]  # type: ignore[index]
    result = runner.invoke(app, args)
    assert result.exit_code == 0 and "concurrency swept" in result.stdout


def test_failed_points_show_their_reason_and_the_sweep_goes_on() -> None:
    args = ["sweep", "gpu.memory.data_rate_gbit_per_s=5:9:2", *WORKLOAD]
    result = runner.invoke(app, args)
    assert result.exit_code == 0, result.output
    assert "failed:" in result.stdout and "outside" in result.stdout
    rows = run_json(*args)
    assert [r["status"] for r in rows] == ["feasible", "failed"]  # type: ignore[index]


def test_compare_h100_is_faster_than_a100(tmp_path: Path) -> None:
    out = tmp_path / "compare.html"
    args = ["compare", "h100-sxm", "a100-sxm-80gb", *WORKLOAD, "--batch", "8"]
    data = run_json(*args)
    assert isinstance(data, dict) and data["mode"] == "static"
    h100, a100 = data["gpus"]
    assert (h100["params"]["gpu"], a100["params"]["gpu"]) == ("h100-sxm", "a100-sxm-80gb")
    for key in ("ttft_s", "tpot_s", "e2e_latency_s"):
        assert h100["metrics"][key] < a100["metrics"][key]
    assert h100["metrics"]["output_tokens_per_s"] > a100["metrics"]["output_tokens_per_s"]
    result = runner.invoke(app, [*args, "--html", str(out)])
    assert result.exit_code == 0, result.output
    for label in ("memory needed per GPU (GiB)", "memory capacity (GiB)", "J per output token", "h100-sxm"):
        assert label in result.stdout
    check_offline_page(out)


@pytest.mark.parametrize(
    ("flags", "mode"), [(["--concurrency", "4"], "concurrency"), (["--max-throughput"], "max_throughput")]
)
def test_compare_and_sweep_under_load(flags: list[str], mode: str) -> None:
    load = [*WORKLOAD, *flags, "--num-requests", "8"]
    data = run_json("compare", "h100-sxm", "a100-sxm-80gb", *load)
    assert data["mode"] == mode  # type: ignore[index]
    assert all(g["feasible"] for g in data["gpus"])  # type: ignore[index]
    swept = [a for a in load if a not in ("--output-tokens", "16")]  # a swept length takes no flag
    result = runner.invoke(app, ["sweep", "output_tokens=8:16:2", *swept])
    assert result.exit_code == 0, result.output
    assert "16" in result.stdout


@pytest.mark.parametrize(
    "args",
    [
        ["sweep", "sm_clock_mhz=1000:1980", *WORKLOAD],
        ["sweep", "foo=1:2:3", *WORKLOAD],
        ["sweep", "gpu.nums=1:2:3", *WORKLOAD],
        ["sweep", "batch=1:x:3", *WORKLOAD],
        ["sweep", "batch=1:8:2", *WORKLOAD, "--concurrency", "4"],
        ["sweep", "batch=1:8:2", *WORKLOAD, "--batch", "64"],  # the flag was replaced at every point
        ["sweep", "output_tokens=8:16:2", *WORKLOAD],  # --output-tokens 16 likewise
        ["sweep", "sm_clock_mhz=1000:1500:2", *WORKLOAD, "--clock-mhz", "500"],
        ["sweep", "max_num_seqs=8:64:2", *WORKLOAD, "--concurrency", "64", "--max-num-seqs", "32"],
        ["sweep", "host_step_s=0.0001:0.001:2", *WORKLOAD, "--concurrency", "8", "--host-step-us", "300"],
        [
            "sweep",
            "gpu.clocks.sm_clock_max_mhz=1500:1980:2",
            "gpu.clocks.sm_clock_max_hz=1.5e9:1.98e9:2",
            *WORKLOAD,
        ],
        ["sweep", "a=1:2:2", "b=1:2:2", "c=1:2:2", *WORKLOAD],
        ["sweep", "sm_clock_mhz=100:1980:3", *WORKLOAD],
        ["sweep", "batch=1:4:2", "--input-tokens", "64"],  # no --model (the lengths have defaults)
        ["compare", "h100-sxm", *WORKLOAD],
        ["compare", "h100-sxm", "no-such-gpu", *WORKLOAD],
    ],
)
def test_bad_input_is_one_line_and_exit_2(args: list[str]) -> None:
    result = runner.invoke(app, args)
    assert result.exit_code == 2, result.output
    assert "Traceback" not in result.output
    lines = [line for line in result.stderr.splitlines() if line.strip()]
    assert len(lines) == 1 and lines[0].startswith("error:"), result.stderr


@pytest.mark.parametrize(
    ("args", "needle"),
    [
        (["sweep", "gpu.num_sms=100:132:3", "--batch", "8"], "give --model"),
        (["sweep", "gpu.num_sms=100:132:3", "--model", "resnet-50", "--input-tokens", "8", "--output-tokens",
          "8"], "resnet-50 is a vision model"),
        (["sweep", "gpu.num_sms=60:80:2", "--model", "bert-large", "--input-tokens", "8", "--output-tokens",
          "8"], "bert-large is an encoder"),
        # an --html path that cannot be written is refused before the sweep runs, not after
        (["sweep", "batch=1:8:2", "--model", "llama-3.1-8b", "--input-tokens", "64", "--output-tokens", "8",
          "--html", "/"], "is a directory"),
        # ... and compare suggests its own file name, not sweep.html (a fuzzer's finding)
        (["compare", "h100-sxm", "a10", *WORKLOAD, "--html", "/"], "such as /compare.html"),
        # a vision model is named before the lengths it does not take, by the command given
        (["compare", "h100-sxm", "a100-sxm-80gb", "--model", "resnet-50", "--batch", "64"],
         "dse compare is of an LLM serving workload; resnet-50 is a vision model"),
        (["whatif", "h100-sxm", "--memory", "gddr7", "--bus-width-bits", "512", "--data-rate-gbps", "32",
          "--model", "resnet-50", "--batch", "64"], "resnet-50 is a vision model"),
        # an operating fact's range, checked once (a PUE of 0.5 failed at every point, exit 0)
        (["sweep", "cost.operation.pue=0.5:2:2", *WORKLOAD], "cost.operation.pue=0.5: must be in [1, 10]"),
        # a GPU field's own bounds likewise, in the unit of the axis (9e9 MHz failed as its point)
        (["sweep", "gpu.clocks.sm_clock_max_mhz=1500:9e9:2", *WORKLOAD],
         "gpu.clocks.sm_clock_max_mhz=9e+09: Input should be less than or equal to 100000 MHz (got 9e+09"),
        # a clock axis off the GPU's range names the axis, not a --clock-mhz flag nobody typed
        (["sweep", "sm_clock_mhz=100:1980:3", *WORKLOAD], "sweep sm_clock_mhz=100 is outside"),
        # not a sweep: an LLM phase graph refuses a precision the GPU cannot serve, as serving does
        (["predict", "--model", "llama-3.1-8b", "--gpu", "v100-sxm2", "--phase", "decode", "--precision",
          "bf16"], "no bf16 tensor cores"),
    ],
)  # fmt: skip
def test_a_sweep_names_what_it_lacks(args: list[str], needle: str) -> None:
    """It asked for --model when --model was given (a vision model, or only the lengths missing)."""
    result = runner.invoke(app, args)
    assert result.exit_code == 2 and needle in result.stderr, result.output


def test_compare_shows_only_the_metrics_its_mode_gives() -> None:
    """A static batch has a peak kernel power; a load simulation does not, and gets no row of dashes."""
    base = ["compare", "h100-sxm", "a100-sxm-80gb", "--model", "llama-3.1-8b", "--input-tokens", "64",
            "--output-tokens", "8"]  # fmt: skip
    static = runner.invoke(app, [*base, "--batch", "4"])
    load = runner.invoke(app, [*base, "--concurrency", "4", "--num-requests", "8"])
    assert static.exit_code == 0 and load.exit_code == 0, static.output + load.output
    assert "peak power" in static.stdout and "peak power" not in load.stdout


def test_a_swept_length_needs_no_flag_of_its_own() -> None:
    """`sweep input_tokens=...` sets the input of every point: --input-tokens is not asked for, and the
    title says the input is swept (a base value given anyway is not shown as if it ran)."""
    from dse.cli import app

    args = ["sweep", "input_tokens=256:512:2", "--model", "llama-3.1-8b", "--output-tokens", "16", "--json"]
    result = CliRunner().invoke(app, args)
    assert result.exit_code == 0, result.output
    assert [row["params"]["input_tokens"] for row in json.loads(result.stdout)] == [256, 512]


def test_compare_under_load_names_each_gpus_engine_settings() -> None:
    """The settings each GPU's simulation ran with: vLLM's default token budget depends on the GPU's
    memory (8192 tokens per step on an 80 GB H100, 2048 on a 24 GB L4: `dse.serving.presets`), and a
    --layer-host-us given applies to both; a static batch runs no engine scheduler and lists none."""
    load = [*WORKLOAD, "--concurrency", "4", "--num-requests", "8", "--layer-host-us", "100"]
    data = run_json("compare", "h100-sxm", "l4", *load)
    engines = {g["params"]["gpu"]: g["engine"] for g in data["gpus"]}  # type: ignore[index]
    assert engines["h100-sxm"]["max_batched_tokens"] == 8192 and engines["l4"]["max_batched_tokens"] == 2048
    assert {e["layer_host_s"] for e in engines.values()} == {0.0001}
    assert {e["engine"] for e in engines.values()} == {"vllm"}
    text = runner.invoke(app, ["compare", "h100-sxm", "l4", *load])
    assert text.exit_code == 0, text.output
    assert "h100-sxm: vllm engine (max" in text.stdout and "l4: vllm engine (max" in text.stdout
    # one line when every GPU ran with the same settings; named per GPU when one failed (V100: no bf16)
    same = runner.invoke(app, ["compare", "h100-sxm", "h200-sxm", *load])
    assert same.exit_code == 0 and "\nvllm engine (max" in same.stdout, same.output
    failed = runner.invoke(app, ["compare", "h100-sxm", "v100-sxm2", *load])
    assert "h100-sxm: vllm engine (max" in failed.stdout, failed.output
    static = run_json("compare", "h100-sxm", "l4", *WORKLOAD, "--batch", "2")
    assert all("engine" not in g for g in static["gpus"])  # type: ignore[index]


def test_whatif_shows_a_share_s_change_in_points() -> None:
    """A share going from 14.7% to 17.7% changed by 3.0 points; as a relative change it read "+20.5%"."""
    from dse.cli.render import compare_table

    rows = (("energy_cost_fraction", "energy share of cost (%)", 100.0, ".1f"),
            ("kv_cache_utilization", "KV cache in use (mean share)", 1.0, ".1%"),
            ("output_tokens_per_s", "output tokens/s", 1.0, ".0f"))  # fmt: skip
    base = {"energy_cost_fraction": 0.147, "kv_cache_utilization": 0.05, "output_tokens_per_s": 1000.0}
    new = {"energy_cost_fraction": 0.177, "kv_cache_utilization": 0.2, "output_tokens_per_s": 800.0}
    table = compare_table(base, new, rows, ("a", "b"))
    changes = list(table.columns[3].cells)
    assert changes == ["+3.0 points", "+15.0 points", "-20.0%"]


def test_whatif_keeps_the_side_that_runs_when_the_other_cannot() -> None:
    """A changed GPU that cannot run (no memory for a KV cache) hid the baseline's latency and energy rows
    too (a fuzz run): a row with one number shows it beside "-"; a row with none is left out."""
    from dse.cli.render import compare_table

    rows = (("ttft_s", "TTFT (ms)", 1e3, ".1f"), ("tpot_s", "TPOT (ms)", 1e3, ".1f"),
            ("num_gpus", "GPUs", 1.0, ".0f"))  # fmt: skip
    table = compare_table({"ttft_s": 0.17, "num_gpus": 1}, {"ttft_s": None, "num_gpus": 1}, rows, ("a", "b"))
    assert list(table.columns[0].cells) == ["TTFT (ms)", "GPUs"]
    assert list(table.columns[1].cells) == ["170.0", "1"] and list(table.columns[2].cells) == ["-", "1"]


def test_an_interrupted_sweep_shows_the_points_done(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    """Ctrl-C in a sweep printed nothing and wrote no --html (a fuzzer's finding): the rows done are shown
    and charted, one line says how many of how many, and the exit code is 130."""
    import dse.search.sweep as sweep

    calls = {"n": 0}
    real = sweep.evaluate_point

    def stop_at_third(params: object, ctx: object) -> object:
        calls["n"] += 1
        if calls["n"] == 3:
            raise KeyboardInterrupt
        return real(params, ctx)  # type: ignore[arg-type]

    monkeypatch.setattr(sweep, "evaluate_point", stop_at_third)
    out = tmp_path / "part.html"
    args = ["sweep", "batch=1:8:4", *WORKLOAD, "--json", "--html", str(out)]
    result = runner.invoke(app, args)
    assert result.exit_code == 130, result.output
    assert [r["params"]["batch"] for r in json.loads(result.stdout)] == [1, 3]
    assert "interrupted after 2 of 4 points" in result.stderr and out.exists()


def test_a_sigterm_stops_a_sweep_as_ctrl_c_does(monkeypatch: pytest.MonkeyPatch) -> None:
    """SIGTERM (a scheduler, `timeout`) killed a sweep with 143 and no rows; the README's exit codes say 130
    with what was done, as for Ctrl-C."""
    import os
    import signal

    import dse.search.sweep as sweep

    calls = {"n": 0}
    real = sweep.evaluate_point

    def terminated_at_third(params: object, ctx: object) -> object:
        calls["n"] += 1
        if calls["n"] == 3:
            os.kill(os.getpid(), signal.SIGTERM)  # the handler raises here, as a signal lands mid-point
        return real(params, ctx)  # type: ignore[arg-type]

    def unhandled(signum: int, frame: object) -> None:  # without the sweep's handler: fail, not die
        raise RuntimeError("SIGTERM reached the default handler")

    monkeypatch.setattr(sweep, "evaluate_point", terminated_at_third)
    previous = signal.signal(signal.SIGTERM, unhandled)
    try:
        result = runner.invoke(app, ["sweep", "batch=1:8:4", *WORKLOAD, "--json"])
        assert signal.getsignal(signal.SIGTERM) == unhandled  # put back
    finally:
        signal.signal(signal.SIGTERM, previous)
    assert result.exit_code == 130, result.output
    assert [r["params"]["batch"] for r in json.loads(result.stdout)] == [1, 3]


def test_a_long_sweep_draws_a_progress_bar_on_a_terminal(monkeypatch: pytest.MonkeyPatch) -> None:
    """A sweep of thousands of points ran for minutes with no sign of life: on a terminal's stderr a bar
    counts the points (and is gone at the end); stdout keeps only the table or JSON."""
    import io

    from rich.console import Console

    import dse.cli.sweep as cli_sweep

    screen = io.StringIO()
    monkeypatch.setattr(cli_sweep, "err_console", Console(file=screen, force_terminal=True, width=100))
    points = cli_sweep.SWEEP_PROGRESS_MIN_POINTS
    rows = run_json("sweep", f"batch=1:{points}:{points}", *WORKLOAD)
    assert isinstance(rows, list) and len(rows) == points
    assert f"{points}/{points}" in screen.getvalue()


def test_compare_without_lengths_takes_the_default_ones() -> None:
    """As `dse predict` and `dse whatif`: the missing lengths are the serving defaults, said on stderr."""
    base = ["compare", "h100-sxm", "a100-sxm-80gb", "--model", "llama-3.1-8b", "--json"]
    implied = runner.invoke(app, base)
    written = runner.invoke(app, [*base, "--input-tokens", "1024", "--output-tokens", "256"])
    assert implied.exit_code == 0 and written.exit_code == 0, implied.output + written.output
    assert "serving lengths not given" in implied.stderr and "serving lengths" not in written.stderr
    assert json.loads(implied.stdout) == json.loads(written.stdout)


def test_a_cost_fact_set_for_a_sweep_prices_every_point() -> None:
    """`--set cost.operation.pue=2` became the GPU path `gpu.cost.operation.pue`: every point failed ("'cost'
    is not a section of the GPU") and the sweep exited 0. It is the points' cost fact, checked up front."""
    base = ["sweep", "batch=1:4:2", "--model", "llama-3.1-8b", "--input-tokens", "64", "--output-tokens", "8"]
    plain = run_json(*base)
    dear = run_json(*base, "--set", "cost.operation.pue=2")
    for a, b in zip(plain, dear, strict=True):  # type: ignore[call-overload]
        assert b["status"] == "feasible", b
        ratio = b["metrics"]["gco2_per_output_token"] / a["metrics"]["gco2_per_output_token"]
        assert ratio == pytest.approx(2 / 1.3)  # the default PUE is 1.3
    result = runner.invoke(app, [*base, "--set", "cost.operation.pue=20"])
    assert result.exit_code == 2 and "override 'cost.operation.pue': must be in [1, 10]" in result.stderr
    result = runner.invoke(
        app, [*base[:1], "cost.operation.pue=1:2:2", *base[2:], "--set", "cost.operation.pue=1.5"]
    )
    assert result.exit_code == 2 and "also fixed by --set cost.operation.pue" in result.stderr, result.output


def test_compare_and_sweep_take_the_cost_flags_of_predict() -> None:
    """A renter's rate prices each GPU at rate / throughput (the renter's ledger: $ per GPU-hour over the
    tokens it makes in that hour), as `dse predict --gpu-usd-per-hour` does; both refused the flag before."""
    rate_usd_per_h = 2.5
    data = run_json("compare", "h100-sxm", "a100-sxm-80gb", *WORKLOAD, "--batch", "8",
                    "--gpu-usd-per-hour", str(rate_usd_per_h))  # fmt: skip
    assert isinstance(data, dict)
    for row in data["gpus"]:
        m = row["metrics"]
        expected = rate_usd_per_h / 3600.0 / m["output_tokens_per_s"] * 1e6
        assert m["usd_per_million_output_tokens"] == pytest.approx(expected, rel=1e-9)
    rows = run_json("sweep", "sm_clock_mhz=1200:1800:2", *WORKLOAD, "--batch", "8", "--pue", "1.1")
    cleaner = run_json("sweep", "sm_clock_mhz=1200:1800:2", *WORKLOAD, "--batch", "8", "--pue", "1.5")
    assert isinstance(rows, list) and isinstance(cleaner, list)
    for low, high in zip(rows, cleaner, strict=True):  # the same energy at a higher facility overhead
        assert low["metrics"]["gco2_per_output_token"] < high["metrics"]["gco2_per_output_token"]
    both = ["--gpu-usd-per-hour", "2", "--gpu-price-usd", "30000"]
    result = runner.invoke(app, ["compare", "h100-sxm", "a100-sxm-80gb", *WORKLOAD, "--batch", "8", *both])
    assert result.exit_code == 2 and "--gpu-price-usd" in result.output


def test_compare_set_changes_every_gpu_alike() -> None:
    """`--set gpu.num_sms=32` takes most SMs from both GPUs: each one's compute-bound prefill (TTFT) slows."""
    args = ["compare", "h100-sxm", "a100-sxm-80gb", *WORKLOAD, "--batch", "8"]
    base, fewer = run_json(*args), run_json(*args, "--set", "gpu.num_sms=32")
    assert isinstance(base, dict) and isinstance(fewer, dict)
    for before, after in zip(base["gpus"], fewer["gpus"], strict=True):
        assert after["metrics"]["ttft_s"] > 1.5 * before["metrics"]["ttft_s"]


def test_a_swept_cost_fact_beside_its_own_flag_is_refused() -> None:
    """`--pue 1.2` beside a swept `cost.operation.pue` won at every point (equal rows, exit 0); `dse
    predict` refuses `--pue` beside `--set cost.operation.pue` (newcomer review)."""
    args = ["sweep", "cost.operation.pue=1:2:2", "--pue", "1.2", "--batch", "4", *WORKLOAD]
    result = runner.invoke(app, args)
    assert result.exit_code == 2
    assert "--pue and the swept cost.operation.pue set the same fact" in result.output


def test_a_swept_clock_above_that_points_swept_maximum_fails_that_point() -> None:
    """With the clock limit swept beside the clock, a point whose clock is above its own limit was clamped
    to the limit and repeated another row as feasible; it fails with the reason."""
    axes = ["gpu.clocks.sm_clock_max_mhz=1000:2000:2", "sm_clock_mhz=1500:1900:2"]
    rows = run_json("sweep", *axes, "--batch", "4", *WORKLOAD)
    low = [r for r in rows if r["params"]["gpu.clocks.sm_clock_max_mhz"] == 1000]
    high = [r for r in rows if r["params"]["gpu.clocks.sm_clock_max_mhz"] == 2000]
    assert len(low) == 2 and all("outside this point's SM clock range" in str(r["reason"]) for r in low)
    assert not any(r["feasible"] for r in low)
    assert len(high) == 2 and all(r["feasible"] for r in high)


def test_a_sweep_that_crosses_an_engine_default_says_which_points_ran_which() -> None:
    # an H100 of four HBM3 stacks has 64 GiB, under vLLM's 70 GiB rule: 256 sequences and 2048 tokens a
    # step instead of 1024 and 8192, a 2x TTFT change a newcomer read as the bandwidth's
    args = ["sweep", "memory.bus_width_bits=4096:5120:2", "--model", "llama-3.1-8b", "--concurrency", "8",
            "--input-tokens", "128", "--output-tokens", "16", "--num-requests", "16"]  # fmt: skip
    out = runner.invoke(app, args).stdout
    assert "max 256 seqs, 2048 tokens/step" in out and "max 1024 seqs, 8192 tokens/step" in out
    assert "defaults follow each GPU" in out
    rows = json.loads(runner.invoke(app, [*args, "--json"]).stdout)
    assert [r["engine"]["max_num_seqs"] for r in rows] == [256, 1024]
