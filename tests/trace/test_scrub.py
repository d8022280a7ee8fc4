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
from hypothesis import assume, given, settings
from hypothesis import strategies as st

import nsysprobe
from nsysprobe.cli import main
from nsysprobe.trace.secrets.placeholders import PLACEHOLDER
from nsysprobe.trace.secrets.scrubber import scrub_text
from nsysprobe.trace.values import range_pattern

from exports import Export

TOKEN = "hf_SECRETTOKEN0123456789"


def plain(text: str) -> str:
    """``text`` with each placeholder written as its kind only: ``<path:kqzvwmbtxyaq>`` is
    ``<path>`` (the hash differs from one scrub to the next)."""
    return PLACEHOLDER.sub(lambda m: f"<{m[1]}>", text)


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
    names = {plain(v) for (v,) in db.execute("SELECT value FROM StringIds")}
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
        "num_key_value_heads=8",
        "tokens_per_sec=1234.5",
        "tokenizer.encode",
        "thrust::sort_by_key",
        "forward pass 2",
        "password-reset flow",
        "docker run -p 8080:80",
        "aten::embedding_dense_backward, seq = 7",
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
    assert plain(scrub_text(text)) == scrubbed


@pytest.mark.parametrize(
    "text, scrubbed",
    [
        ("password:\n  K01hunter2", "password:\n  <secret>"),  # YAML
        ('password="K02hunter2', "password=<secret>"),  # an unclosed quote
        (':password => "K03hunter2"', ":password => <secret>"),  # Ruby
        ("api_key := K04s3cret", "api_key := <secret>"),  # Go
        ('$env:OPENAI_API_KEY="K05abc123"', "$env:OPENAI_API_KEY=<secret>"),  # PowerShell
        ("PGPASSWORD=(K07hunter2)", "PGPASSWORD=(<secret>)"),
        ("sshpass -p K09hunter2 ssh host", "sshpass -p <secret> ssh host"),
        ("password\u00a0=\u00a0K10hunter2", "password\u00a0=\u00a0<secret>"),
        ("AccountKey=K11abc+def/ghi==;", "AccountKey=<secret>;"),
        ("PASSWORD=123456", "PASSWORD=<secret>"),
        ("mysql -u root -pK12hunter2 db", "mysql -u root -p<secret> db"),
        ("curl -u bob:K13pw -X GET", "curl -u <secret> -X GET"),
        ("--password K14hunter2 --epochs 3", "--password <secret> --epochs 3"),
        ("client_secret: 'K15 with spaces'", "client_secret: <secret>"),
        ("password=ab<K16>cd next", "password=<secret> next"),
    ],
)
def test_a_secret_after_any_separator_is_replaced(text, scrubbed):
    assert plain(scrub_text(text)) == scrubbed


_SECRET_NAMES = (
    "password", "PGPASSWORD", "api_key", "HF_TOKEN", "AccountKey", "--hf-token", "client_secret",
    "auth_token", "x-api-key", "mysql_pwd", "SESSION_ID", "passphrase",
)  # fmt: skip
_SEPARATORS = ("=", ": ", " := ", " => ", "=(", '="', ":\n  ", "\u00a0=\u00a0", " = ", "\t:\u2003")


@settings(max_examples=400, deadline=None)
@given(
    st.sampled_from(_SECRET_NAMES),
    st.sampled_from(_SEPARATORS),
    st.text("abcXYZ0189+/=_.-~!$%^*:@#\\<>", min_size=1, max_size=40).filter(
        lambda v: v.lower() not in ("none", "null", "no")
    ),
)
def test_the_value_of_a_secret_setting_never_survives(name, separator, value):
    assume(not (separator.endswith("=") and value.startswith(">")))  # that is Ruby's =>
    scrubbed = scrub_text(f"step 3 {name}{separator}{value} done")
    head, tail = f"step 3 {name}", " done"
    assert scrubbed.startswith(head) and scrubbed.endswith(tail), scrubbed
    between = scrubbed[len(head) : -len(tail)]
    assert PLACEHOLDER.search(between), scrubbed
    assert set(PLACEHOLDER.sub("", between)) <= set(separator), scrubbed


# Names built from parts: words, separators, runs of digits (None), paths, secrets, ...
_PARTS = st.sampled_from(
    [
        "Batch", "step", "aten::add", "fwd", " ", "_", "/", ".", ":", "=", "-", "#", ", seq = ",
        "(", ")", "/data/train/ab.jpg", "/data/train/cd.jpg", "/home/alice/run", "~/ckpt",
        "C:\\Users\\bob\\x", "HF_TOKEN=", "password: ", "--api-key ", "token=", "Bearer ",
        "hf_abcdefghijklmnopqrst", "ghp_", "AKIA", "alice@example.com", "https://example.com/v",
        "gpu.cluster.internal", "sshpass -p ", "max_tokens=", "deadbeef", "abcdef", "K", "x",
        None, None, None,
    ]
)  # fmt: skip
_SHAPES = st.lists(_PARTS, max_size=10)
# Runs of digits: any length (32 digits look like a hex key, 4 numbers like an IPv4 address
# until a number passes 255), Unicode digits too, as range_pattern masks them.
_RUNS = st.text("0123456789\u0663", min_size=1, max_size=40)


def _name(shape: list, runs: list[str]) -> str:
    it = iter(runs)
    return "".join(part if part is not None else next(it) for part in shape)


@settings(max_examples=400, deadline=None)
@given(st.data())
def test_scrubbing_keeps_which_names_are_equal_and_which_have_equal_range_patterns(data):
    """r11: ``Batch 3 /data/train/ab.jpg`` and ``Batch 4 /data/train/cd.jpg`` both became
    ``Batch # <path>``, and the copy found 20 steps where the original found none."""
    shape = data.draw(_SHAPES)
    other = data.draw(st.one_of(st.just(shape), _SHAPES))
    runs = data.draw(st.lists(_RUNS, min_size=shape.count(None), max_size=shape.count(None)))
    if other == shape and data.draw(st.booleans()):
        other_runs = runs
    else:
        n = other.count(None)
        other_runs = data.draw(st.lists(_RUNS, min_size=n, max_size=n))
    a, b = _name(shape, runs), _name(other, other_runs)
    sa, sb = scrub_text(a), scrub_text(b)
    assert (range_pattern(a) == range_pattern(b)) == (range_pattern(sa) == range_pattern(sb))
    assert (a == b) == (sa == sb)


def test_the_placeholders_of_two_scrubs_differ():
    """A key per scrub: a placeholder cannot be matched against a guess's hash."""
    text = "load /home/alice/data"
    assert scrub_text(text, key=b"one") == scrub_text(text, key=b"one")
    assert scrub_text(text, key=b"one") != scrub_text(text, key=b"two")
    assert plain(scrub_text(text, key=b"one")) == "load <path>"
