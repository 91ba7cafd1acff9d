"""EnergAIzer kernel-list import: all artifact files load, GEMMs match published dims, errors name entries."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from dse.calibrate.data.common import data_root
from dse.errors import ConfigError
from dse.workload.energaizer import ELEMENTWISE_OP_KINDS, as_precision, load_kernel_list, parse_workload_name
from dse.workload.ops import ELEMENTWISE_KINDS, OP_TYPES, ElementwiseOp, GemmOp, NormOp, SoftmaxOp


def _workload_dir() -> Path | None:
    try:
        return data_root() / "energaizer" / "workloads" / "all"
    except ConfigError:
        return None


WORKLOAD_DIR = _workload_dir()
NO_DATA = "shared/data not found (set DSE_DATA_DIR to run the dataset tests)"
needs_data = pytest.mark.skipif(WORKLOAD_DIR is None, reason=NO_DATA)
WORKLOAD_FILES = sorted(WORKLOAD_DIR.glob("*.json")) if WORKLOAD_DIR else []
FILE_PARAMS = [pytest.param(p, id=p.stem) for p in WORKLOAD_FILES] or [
    pytest.param(None, marks=pytest.mark.skip(reason=NO_DATA), id="no-data")
]

GEMM_BF16 = [
    {
        "batch": 1,
        "dimM": 128,
        "dimN": 256,
        "dimK": 64,
        "precM": "bf16",
        "precA": "bf16",
        "useTensorCore": True,
    },
    ["gemm", "tc", "bf16_bf16"],
]
ADD = [{"dim": 4096, "op": "pointwise_add", "prec": "bf16"}, ["elementwise"]]


def _write(tmp_path: Path, entries: object, name: str = "synthetic.json") -> Path:
    path = tmp_path / name
    path.write_text(json.dumps(entries))
    return path


# --- the artifact's 90 files -------------------------------------------------------------------------------


@needs_data
def test_artifact_has_90_kernel_lists() -> None:
    assert len(WORKLOAD_FILES) == 90


@pytest.mark.parametrize("path", FILE_PARAMS)
def test_every_artifact_file_loads(path: Path) -> None:
    graph = load_kernel_list(path)
    entries = json.loads(path.read_text())
    assert graph.name == path.stem
    assert len(graph) >= 1
    assert all(isinstance(op, OP_TYPES) for op in graph)
    assert all(op.name.startswith(f"{path.stem}/") for op in graph)
    # merging keeps every launch; GPT-2's lists (12 layers) gain one score pass per layer
    restored = 12 if path.stem.startswith("gpt2model_") else 0
    assert graph.meta["restored_kernels"] == restored
    assert graph.num_kernels == len(entries) + restored and len(entries) == graph.meta["num_entries"]
    assert graph.total_flop() > 0
    assert graph.meta["batch"] >= 1 and graph.meta["precision"] == "bf16"


@needs_data
def test_gpt2_b1_s1024_gemms_match_published_dims() -> None:
    # GPT-2 small (Radford et al. 2019; HF config): 12 layers, hidden 768, MLP 4 x 768 = 3072, 12 heads of 64.
    num_layers, hidden, mlp, heads, tokens = 12, 768, 3072, 12, 1024
    graph = load_kernel_list(WORKLOAD_DIR / "gpt2model_gpt2_pbf16_b1_s1024_modeprefill.json")
    gemms = [op for op in graph if isinstance(op, GemmOp)]
    shapes = [(op.m, op.k, op.n) for op in gemms for _ in range(op.count)]
    assert shapes.count((tokens, hidden, 3 * hidden)) >= num_layers  # c_attn (fused QKV)
    assert shapes.count((tokens, hidden, mlp)) >= num_layers  # c_fc
    assert shapes.count((tokens, mlp, hidden)) >= num_layers  # MLP c_proj
    # The weight GEMMs (batch 1) do exactly 2 x tokens x (non-embedding weights) FLOP.
    weights_per_layer = hidden * 3 * hidden + hidden * hidden + 2 * hidden * mlp
    weight_flop = sum(op.flop * op.count for op in gemms if op.batch == 1)
    assert weight_flop == 2 * tokens * num_layers * weights_per_layer
    # Attention score GEMMs: batch = heads, [s, 64] x [64, s].
    assert sum(op.count for op in gemms if (op.batch, op.m, op.n, op.k) == (heads, tokens, tokens, 64)) == 12
    assert all(op.dtype == "bf16" for op in gemms)
    norms = [op for op in graph if isinstance(op, NormOp)]
    assert sum(op.count for op in norms) == 2 * num_layers + 1  # ln_1, ln_2 per layer + ln_f
    assert all((op.rows, op.cols) == (tokens, hidden) for op in norms)


@needs_data
def test_gpt2_scores_take_two_elementwise_passes_per_layer() -> None:
    # transformers' GPT2Attention divides the [B, H, S, S] scores by a 0-dim tensor and applies the causal
    # mask with torch.where before the softmax: two kernels per layer over B x H x S x S elements.
    graph = load_kernel_list(WORKLOAD_DIR / "gpt2model_gpt2_pbf16_b8_s2048_modeprefill.json")
    scores = 8 * 12 * 2048 * 2048
    passes = [op for op in graph if isinstance(op, ElementwiseOp) and op.num_elements == scores]
    assert sum(op.count for op in passes) == 2 * 12
    assert sorted({op.kind for op in passes}) == ["add", "scale"]


@needs_data
def test_qwen2_rotary_gemm_is_fp32_on_cuda_cores() -> None:
    graph = load_kernel_list(WORKLOAD_DIR / "qwen2model_qwen2-1p5b_pbf16_b1_s128_modeprefill.json")
    first = graph.ops[0]
    assert isinstance(first, GemmOp) and first.dtype == "fp32" and first.k == 1


@needs_data
def test_resnet_convolutions_become_gemms() -> None:
    graph = load_kernel_list(WORKLOAD_DIR / "resnet101__pbf16_b8_freq900.json")
    first = graph.ops[0]
    assert isinstance(first, GemmOp) and first.name.endswith("/0:conv2d")
    assert (first.m, first.n, first.k) == (8 * 112 * 112, 64, 3 * 7 * 7)  # 7x7/2 stem conv, 224 -> 112
    assert graph.meta["seq_len"] is None and graph.meta["model"] == "resnet101"


# --- mapping rules on synthetic files -----------------------------------------------------------------------


def test_mapping_table_targets_known_kinds() -> None:
    assert set(ELEMENTWISE_OP_KINDS.values()) <= set(ELEMENTWISE_KINDS)


def test_one_entry_list_is_one_kernel(tmp_path: Path) -> None:
    graph = load_kernel_list(_write(tmp_path, [GEMM_BF16]))
    assert len(graph) == 1 and graph.num_kernels == 1
    (op,) = graph.ops
    assert op == GemmOp(name="synthetic/0:gemm", m=128, n=256, k=64, batch=1, dtype="bf16")


def test_consecutive_identical_entries_merge_in_order(tmp_path: Path) -> None:
    graph = load_kernel_list(_write(tmp_path, [ADD, ADD, ADD, GEMM_BF16, ADD]))
    assert [(op.name, op.count) for op in graph] == [
        ("synthetic/0:pointwise_add", 3),
        ("synthetic/3:gemm", 1),
        ("synthetic/4:pointwise_add", 1),
    ]
    assert graph.num_kernels == 5


def test_lookalike_entries_do_not_merge(tmp_path: Path) -> None:
    lookalike = [{**GEMM_BF16[0], "useTensorCore": 1}, GEMM_BF16[1]]  # 1 == True in Python, not in JSON
    with pytest.raises(ConfigError, match="entry 1: useTensorCore must be true or false"):
        load_kernel_list(_write(tmp_path, [GEMM_BF16, lookalike]))


@pytest.mark.parametrize(
    ("prec", "use_tc", "tag", "dtype"),
    [
        ("fp32", False, "cuda", "fp32"),
        ("fp32", True, "tc", "tf32"),
        ("bf16", True, "tc", "bf16"),
        ("fp16", True, "tc", "fp16"),
    ],
)
def test_gemm_dtype_follows_tensor_core_flag(
    tmp_path: Path, prec: str, use_tc: bool, tag: str, dtype: str
) -> None:
    entry = [
        {**GEMM_BF16[0], "precM": prec, "precA": prec, "useTensorCore": use_tc},
        ["gemm", tag, f"{prec}_{prec}"],
    ]
    (op,) = load_kernel_list(_write(tmp_path, [entry])).ops
    assert isinstance(op, GemmOp) and op.dtype == dtype


def _gemm(prec: str, use_tc: bool = True, kind: str = "gemm") -> list[object]:
    return [{**GEMM_BF16[0], "precM": prec, "precA": prec, "useTensorCore": use_tc}, [kind]]


@pytest.mark.parametrize(
    ("entries", "precision"),
    [
        ([GEMM_BF16, ADD], "bf16"),
        ([_gemm("fp8"), ADD], "fp8"),  # bf16 activations around fp8 GEMMs: the GEMMs' type
        ([_gemm("fp32", use_tc=False), GEMM_BF16], "bf16"),  # Qwen2's fp32 RoPE GEMM on the CUDA cores
        ([_gemm("fp32", use_tc=False)], "fp32"),
        ([_gemm("fp32", kind="conv2d"), _gemm("fp32", use_tc=False)], "tf32"),  # cuDNN's TF32 convolutions
        ([GEMM_BF16, _gemm("fp8")], "mixed"),
        ([ADD], "bf16"),  # no GEMM: the other kernels' type
        ([ADD, [{"batch": 4, "dim": 64, "prec": "fp32"}, ["softmax"]]], "mixed"),
    ],
)
def test_a_lists_precision_is_what_its_entries_record(tmp_path: Path, entries: list, precision: str) -> None:
    """Session 36: the precision came from the file name's `p<precision>` token, so a bf16 list saved as
    `..._pfp32_...` said fp32, and a hand-named list had none. It is the type of the list's Tensor-Core
    GEMMs (what --precision names for a model), else of its GEMMs, else of its kernels; "mixed" if several."""
    for name in ("my_fp32_pfp32_b1.json", "mymodel_x_pbf16_b1.json", "hand_named.json"):
        assert load_kernel_list(_write(tmp_path, entries, name)).meta["precision"] == precision, name


def test_a_16_bit_precision_retypes_the_tensor_core_gemms(tmp_path: Path) -> None:
    """Session 36: `--precision bf16` left a list as recorded, so an fp8 list could run on an A100 only by
    editing it. bf16 and fp16 re-type the 16-bit and narrower Tensor-Core GEMMs (a bf16 trace as fp16 for a
    V100, fp8 as bf16 for an A100); fp32 data (CUDA-core GEMMs, TF32 convolutions) and other kernels stay."""
    fp8_add = [{"dim": 4096, "op": "pointwise_add", "prec": "fp8"}, ["elementwise"]]
    entries = [_gemm("fp8"), GEMM_BF16, _gemm("fp32", use_tc=False), _gemm("fp32", kind="conv2d"), fp8_add]
    graph = load_kernel_list(_write(tmp_path, entries))
    for precision, gemms in (("bf16", ["bf16", "bf16"]), ("fp16", ["fp16", "fp16"])):
        typed = as_precision(graph, precision)
        assert [op.dtype for op in typed.ops] == [*gemms, "fp32", "tf32", "fp8"]
        assert typed.ops[0].c_dtype == precision  # an fp8 GEMM that wrote fp8 writes the new type
        # what is priced: the re-typed GEMMs beside the TF32 convolution, two Tensor-Core types
        assert typed.meta["precision"] == "mixed" and typed.name == f"synthetic@{precision}"
        assert [op.name for op in typed.ops] == [op.name for op in graph.ops]
    # a bf16 trace is its own bf16 run: the same graph, not a copy
    trace = load_kernel_list(_write(tmp_path, [GEMM_BF16, ADD], "trace.json"))
    assert as_precision(trace, "bf16") is trace
    with pytest.raises(ConfigError, match="bf16, fp16 or fp32 only"):
        as_precision(trace, "fp8")


def test_a_16_bit_precision_reports_what_it_retyped_not_the_flag(tmp_path: Path) -> None:
    """A TF32 list keeps its fp32-data GEMMs under --precision bf16 (nothing 16-bit to re-type), so it is
    priced as TF32 and says so, as `list_precision` of the ops it runs; it said "bf16" (session 36 fuzzer)."""
    tf32 = load_kernel_list(_write(tmp_path, [_gemm("fp32", kind="conv2d"), _gemm("fp32")], "tf32.json"))
    for precision in ("bf16", "fp16"):
        typed = as_precision(tf32, precision)
        assert [op.dtype for op in typed.ops] == ["tf32", "tf32"] and typed.meta["precision"] == "tf32"
    # a list of both re-types its 16-bit GEMMs and keeps the TF32 ones: two types priced
    both = load_kernel_list(_write(tmp_path, [GEMM_BF16, _gemm("fp32", kind="conv2d")], "both.json"))
    assert as_precision(both, "fp16").meta["precision"] == "mixed"


def test_elementwise_softmax_layernorm_mapping(tmp_path: Path) -> None:
    entries = [
        [{"dim": 10, "op": "typecast_to_fp32", "prec": "bf16"}, ["elementwise"]],
        [{"dim": 10, "op": "unspecified_tensor", "prec": "bf16"}, ["elementwise"]],
        [{"dim": 10, "op": "unspecified_scalar", "prec": "fp32"}, ["elementwise"]],
        [{"dim": 10, "op": "scalar_mul", "prec": "bf16"}, ["elementwise"]],
        [{"batch": 6, "dim": 7, "prec": "fp32"}, ["softmax", "fp32"]],
        [{"batch": 6, "dim": 7, "prec": "bf16"}, ["layernorm", "bf16"]],
    ]
    cast, mask, power, scale, softmax, norm = load_kernel_list(_write(tmp_path, entries)).ops
    assert cast == ElementwiseOp(
        name="synthetic/0:typecast_to_fp32", kind="cast", num_elements=10, dtype="bf16", out_dtype="fp32"
    )
    assert (mask.kind, mask.num_inputs) == ("add", 2)
    assert (power.kind, power.dtype) == ("scale", "fp32")
    assert scale.kind == "scale"
    assert softmax == SoftmaxOp(name="synthetic/4:softmax", rows=6, cols=7, dtype="fp32")
    assert norm == NormOp(name="synthetic/5:layernorm", rows=6, cols=7, kind="layernorm", dtype="bf16")


def test_score_pass_restored_only_before_a_softmax_over_the_same_elements(tmp_path: Path) -> None:
    scores = [{"dim": 42, "op": "unspecified_tensor", "prec": "bf16"}, ["elementwise"]]
    softmax = [{"batch": 6, "dim": 7, "prec": "bf16"}, ["softmax", "bf16"]]
    other = [{"dim": 10, "op": "unspecified_tensor", "prec": "bf16"}, ["elementwise"]]
    graph = load_kernel_list(_write(tmp_path, [scores, scores, softmax, other, softmax]))
    assert [(op.name, op.count) for op in graph] == [
        ("synthetic/0:unspecified_tensor", 2),
        ("synthetic/0:score_pass", 2),
        ("synthetic/2:softmax", 1),
        ("synthetic/3:unspecified_tensor", 1),
        ("synthetic/4:softmax", 1),
    ]
    restored = graph.ops[1]
    assert isinstance(restored, ElementwiseOp)
    assert (restored.kind, restored.num_inputs, restored.num_elements) == ("scale", 1, 42)
    assert graph.meta["restored_kernels"] == 2 and graph.num_kernels == 7


@pytest.mark.parametrize(
    ("bad_entry", "needle"),
    [
        ([{"dim": 4}, ["conv3d"]], "unknown entry kind 'conv3d'; allowed: gemm, conv2d"),
        ([{"dim": 4, "op": "pointwise_xor", "prec": "bf16"}, ["elementwise"]], "unknown elementwise op"),
        (
            [{"batch": 1, "dimM": 8, "dimN": 8, "precM": "bf16", "useTensorCore": True}, ["gemm", "tc"]],
            "dimK",
        ),
        ([{**GEMM_BF16[0], "extra": 1}, ["gemm", "tc"]], "unknown key(s) ['extra']"),
        ([{**GEMM_BF16[0], "dimM": 0}, ["gemm", "tc"]], "m must be a positive integer"),
        ([{**GEMM_BF16[0], "dimM": 8.5}, ["gemm", "tc"]], "m must be a positive integer"),
        ([{**GEMM_BF16[0], "useTensorCore": False}, ["gemm", "cuda"]], "without Tensor Cores"),
        ([{**GEMM_BF16[0], "useTensorCore": False}, ["gemm", "tc"]], "contradicts"),
        ([{"batch": 2, "dim": 4, "prec": "int4"}, ["softmax"]], "prec 'int4'"),
        ([{"dim": 4, "op": "typecast_to_int3", "prec": "bf16"}, ["elementwise"]], "typecast target"),
        ([{"dim": 4, "op": "relu", "prec": "bf16"}, []], "non-empty list of strings"),
        ({"dim": 4}, "two-item list"),
    ],
)
def test_bad_entry_names_file_index_and_entry(tmp_path: Path, bad_entry: object, needle: str) -> None:
    path = _write(tmp_path, [GEMM_BF16, bad_entry])
    with pytest.raises(ConfigError) as info:
        load_kernel_list(path)
    message = str(info.value)
    assert str(path) in message and "entry 1:" in message
    assert needle in message
    assert json.dumps(bad_entry)[:20] in message  # the offending entry is quoted


@pytest.mark.parametrize(
    ("text", "needle"),
    [
        ("{}", "expected a JSON list at the top level"),
        ("[]", "non-empty JSON list"),
        ("[1, ", "not valid JSON"),
    ],
)
def test_bad_file_raises_config_error(tmp_path: Path, text: str, needle: str) -> None:
    path = tmp_path / "bad.json"
    path.write_text(text)
    with pytest.raises(ConfigError, match=needle):
        load_kernel_list(path)


def test_missing_file_raises_config_error(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="does not exist"):
        load_kernel_list(tmp_path / "nope.json")


_ENTRY = st.sampled_from(
    [
        GEMM_BF16,
        ADD,
        [{"dim": 4096, "op": "gelu", "prec": "bf16"}, ["elementwise"]],
        [{"batch": 32, "dim": 128, "prec": "bf16"}, ["softmax", "bf16"]],
    ]
)


@settings(max_examples=50, deadline=None)
@given(entries=st.lists(_ENTRY, min_size=1, max_size=30))
def test_merging_preserves_launches_and_work(entries: list[object]) -> None:
    import tempfile

    with tempfile.TemporaryDirectory() as tmp:
        merged = load_kernel_list(_write(Path(tmp), entries))
        singles = [load_kernel_list(_write(Path(tmp), [e], f"s{i}.json")) for i, e in enumerate(entries)]
    assert merged.num_kernels == len(entries)
    assert merged.total_flop() == pytest.approx(sum(g.total_flop() for g in singles))
    assert merged.total_min_dram_bytes() == pytest.approx(sum(g.total_min_dram_bytes() for g in singles))
    assert all(a != b for a, b in zip(merged.ops, merged.ops[1:], strict=False))


# --- workload names ----------------------------------------------------------------------------------------


def test_parse_workload_name_language_and_vision() -> None:
    assert parse_workload_name("gpt2model_gpt2_pbf16_b1_s1024_modeprefill") == {
        "model": "gpt2",
        "model_class": "gpt2model",
        "model_config": "gpt2",
        "precision": "bf16",
        "batch": 1,
        "seq_len": 1024,
        "mode": "prefill",
        "attention": None,
        "sm_clock_hz": None,
        "iterations": None,
    }
    opt = parse_workload_name("optmodel_opt-1p3b_pfp32_b8_s128_modeprefill_attneager_freq1140_iter1252.csv")
    assert (opt["model"], opt["precision"], opt["attention"], opt["sm_clock_hz"], opt["iterations"]) == (
        "opt-1.3b",
        "fp32",
        "eager",
        1140e6,
        1252,
    )
    resnet = parse_workload_name("resnet101__pbf16_b8_freq900")
    assert (resnet["model"], resnet["model_config"], resnet["batch"], resnet["seq_len"]) == (
        "resnet101",
        None,
        8,
        None,
    )


@pytest.mark.parametrize("stem", ["gpt2", "gpt2model_gpt2_pbf16_s128", "gpt2model_gpt2_pbf16_b1_x9"])
def test_parse_workload_name_rejects_malformed(stem: str) -> None:
    with pytest.raises(ConfigError, match="workload name"):
        parse_workload_name(stem)


@needs_data
def test_parse_workload_name_agrees_with_measurement_columns() -> None:
    import pandas as pd

    from dse.calibrate.data.energaizer import load_energaizer_measurements

    for which in ("a100", "a10", "dvfs"):
        df = load_energaizer_measurements(which)
        for row in df.itertuples():
            parsed = parse_workload_name(row.workload)
            assert parsed["model"] == row.model
            assert parsed["precision"] == row.precision and parsed["batch"] == row.batch
            assert parsed["sm_clock_hz"] == row.sm_clock_hz and parsed["iterations"] == row.iterations
            if pd.isna(row.seq_len):
                assert parsed["seq_len"] is None and parsed["mode"] is None
            else:
                assert (parsed["seq_len"], parsed["mode"]) == (row.seq_len, row.mode)
