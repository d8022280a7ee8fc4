"""``nsysprobe scrub``: a new database holding what the analyses read, its names scrubbed.

The hostile cases (secrets planted in every column of real exports, signals, races, traps)
are in tests/reliability/test_scrub_secrets.py; these are the command's contract on a small
built export, and the text scrubber on names as they occur.
"""

from __future__ import annotations

import hashlib
import json
import sqlite3

import pytest
from click.testing import CliRunner

import nsysprobe
from nsysprobe.cli import main
from nsysprobe.trace.scrub import scrub_text

from exports import Export

TOKEN = "hf_SECRETTOKEN0123456789"


def export_with_environment(build):
    ex = Export()
    ex.capture = {
        "PROCESS_0:ENVIRONMENT_VARIABLE": f'HF_TOKEN="{TOKEN}"',
        "PROCESS_0:WORKING_DIR": "/home/alice/project",
        "DEVICE_DISPLAY_NAME": "alice-workstation",
        "PROCESS_0:COLLECT_NVTX_TRACE": "true",
    }
    ex.sid(f"HOME=/home/alice\x00HF_TOKEN={TOKEN}\x00PATH=/usr/bin")
    ex.sid(f"WANDB_API_KEY={TOKEN}")
    ex.sid("/tmp/alice/run/train.py")
    ex.row(
        "TARGET_INFO_SYSTEM_ENV",
        globalVid=1,
        devStateName="Local",
        name="Host",
        nameEnum=1,
        value="alice-workstation",
    )
    for i in range(2):
        ex.nvtx(i * 100, i * 100 + 90, f"Batch {i}")
        ex.nvtx(i * 100, i * 100 + 10, "phase=forward")
    ex.nvtx(200, 210, "load /home/alice/data")
    ex.kernel(0, 50, launch_at=0)
    return build(ex)


def test_the_copy_holds_what_the_analyses_read_and_no_secret(build, tmp_path):
    src = export_with_environment(build)
    before = hashlib.sha256(src.read_bytes()).hexdigest()
    out = tmp_path / "shared.sqlite"
    result = CliRunner().invoke(main, ["scrub", str(src), "-o", str(out)])
    assert result.exit_code == 0, result.output
    assert result.output == (
        f"wrote {out}: kept 7 tables with the columns nsysprobe reads; dropped 1 table, "
        f"9 columns and 0 views/triggers/indexes\n"
        f"scrubbed 1 name (secrets, paths, addresses); dropped 3 unreferenced strings and "
        f"3 metadata/diagnostic rows\n"
    )
    raw = out.read_bytes()
    for secret in (TOKEN.encode(), b"alice"):
        assert secret not in raw
    assert hashlib.sha256(src.read_bytes()).hexdigest() == before  # input untouched
    db = sqlite3.connect(out)
    tables = {n for (n,) in db.execute("SELECT name FROM sqlite_master")}
    meta = dict(db.execute("SELECT name, value FROM META_DATA_CAPTURE"))
    names = {v for (v,) in db.execute("SELECT value FROM StringIds")}
    db.close()
    assert "TARGET_INFO_SYSTEM_ENV" not in tables
    assert meta == {"COLLECT_NVTX_TRACE": "true"}
    kept = {"Batch 0", "Batch 1", "phase=forward", "load <path>", "sgemm", "cudaLaunchKernel_v7000"}
    assert names == kept
    a, b = nsysprobe.analyze(src), nsysprobe.analyze(out)
    assert a.steps == b.steps and a.gaps == b.gaps
    assert {c.name for c in b.steps.children} == {"phase=forward"}  # NVTX names stay


def test_json_says_what_was_kept_and_dropped(build, tmp_path):
    src = export_with_environment(build)
    out = tmp_path / "shared.sqlite"
    result = CliRunner().invoke(main, ["scrub", str(src), "-o", str(out), "--format", "json"])
    assert result.exit_code == 0, result.output
    assert json.loads(result.output) == {
        "schema_version": 1,
        "output": str(out),
        "tables_kept": [
            "CUPTI_ACTIVITY_KIND_KERNEL",
            "CUPTI_ACTIVITY_KIND_RUNTIME",
            "NVTX_EVENTS",
            "ENUM_CUDA_MEM_KIND",
            "META_DATA_EXPORT",
            "META_DATA_CAPTURE",
            "StringIds",
        ],
        "tables_dropped": 1,
        "objects_dropped": 0,
        "columns_dropped": 9,
        "rows_dropped": 3,
        "strings_dropped": 3,
        "texts_scrubbed": 1,
    }


def test_scrub_never_overwrites_without_force_and_never_the_input(build, tmp_path):
    src = export_with_environment(build)
    out = tmp_path / "exists.sqlite"
    out.write_text("keep me")
    result = CliRunner().invoke(main, ["scrub", str(src), "-o", str(out)])
    assert result.exit_code == 2
    assert result.output == (
        f"nsysprobe: error: -o {out}: file exists; pass --force to overwrite it or choose "
        f"another name\n"
    )
    assert out.read_text() == "keep me"
    same = CliRunner().invoke(main, ["scrub", str(src), "-o", str(src), "--force"])
    assert same.exit_code == 2
    assert same.output == (
        f"nsysprobe: error: -o {src}: is an input of this command; write to another file\n"
    )
    forced = CliRunner().invoke(main, ["scrub", str(src), "-o", str(out), "--force"])
    assert forced.exit_code == 0, forced.output
    assert out.read_bytes().startswith(b"SQLite format 3\x00")
    assert sorted(p.name for p in tmp_path.iterdir() if p.name.startswith(".")) == []


def test_help_says_what_is_kept_and_what_is_not():
    result = CliRunner().invoke(main, ["scrub", "--help"])
    assert result.exit_code == 0
    text = " ".join(result.output.split())
    for phrase in (
        "only the tables and columns the analyses read",
        "Everything else stays behind",
        "same figures on the copy",
        "EXPORT is only read",
        "--format [text|json]",
    ):
        assert phrase in text, phrase


@pytest.mark.parametrize(
    "name",
    [
        "aten::add",
        "aten::convolution, seq = 12, op_id = 3401",
        "Batch 12",
        "ProfilerStep#3",
        "phase=forward",
        "loss=0.5",
        "LR=0.001",
        "max_tokens=4096",
        "key_padding_mask=None",
        "migration/9",
        "fwd/bwd",
        "pt_data_worker",
        "NVIDIA H100 80GB HBM3",
        "0000:19:00.0",
        "2025.3.1.90-253135822126v0",
        "CUDA_MEMCPY_KIND_UVM_DTOH",
        "cudaMemcpyAsync_ptsz_v7000",
        "ncclDevKernel_AllReduce_Sum_f32_RING_LL(ncclDevKernelArgsStorage<4096ul>)",
        "void at::native::vectorized_elementwise_kernel<4, at::native::CUDAFunctor_add<float>, "
        "at::detail::Array<char *, 3>>(int, T2, T3)",
        "sm90_xmma_gemm_f16f16_f16f32_f32_tn_n_tilesize128x128x64_warpgroupsize1x1x1_execute_"
        "segment_k_off_kernel__5x_cublas",
        "void cutlass__5x_cudnn::Kernel<cutlass__5x_cudnn::conv::threadblock::"
        "Conv2dWgradOutputGradientTileAccessIteratorOptimized<float>>(T1::Params)",
        "at::Tensor::~Tensor()",
        "torch.nn.functional.linear",
        "Number of incomplete CUPTI events dropped: 12",
    ],
)
def test_names_stay_as_they_are(name):
    assert scrub_text(name) == name


@pytest.mark.parametrize(
    "text, scrubbed",
    [
        ("--hf-token=hf_abcdEFGH1234ijklMNOP", "--hf-token=<secret>"),
        ("--hf-token hf_abcdEFGH1234ijklMNOP", "--hf-token <secret>"),
        (
            "env WANDB_API_KEY=0123456789abcdef01 python train.py",
            "env WANDB_API_KEY=<secret> python train.py",
        ),
        ("export HF_TOKEN=abc", "export HF_TOKEN=<secret>"),
        ("aws_secret_access_key=wJalrXUtnFEMI/K7MDENG", "aws_secret_access_key=<secret>"),
        ("password: hunter2", "password: <secret>"),
        ('{"api_key": "x1y2z3"}', '{"api_key": <secret>}'),
        ("Authorization: Bearer abc.DEF-ghi_123456", "Authorization: <secret> <secret>"),
        ("step token=zZ9xY8wV7uT6", "step token=<secret>"),
        ("ghp_abcdefghijklmnopqrstuvwxyz0123456789", "<secret>"),
        ("key AKIAIOSFODNN7EXAMPLE", "key <secret>"),
        ("wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY", "<secret>"),
        ("run 0123456789abcdef0123456789abcdef", "run <secret>"),
        ("cd /home/alice/project && python train.py", "cd <path> && python train.py"),
        ("save C:\\Users\\alice\\ckpt.pt", "save <path>"),
        ("~/secrets/key.pem", "<path>"),
        ("mail alice.smith@corp.example.com", "mail <address>"),
        ("push https://user:pw@github.com/x/y.git", "push <url>"),
        ("node gpu-7.cluster.internal up", "node <host> up"),
        ("master 10.1.2.3:29500", "master <host>:29500"),
    ],
)
def test_secrets_paths_and_addresses_are_replaced(text, scrubbed):
    assert scrub_text(text) == scrubbed
