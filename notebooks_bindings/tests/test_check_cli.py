"""python -m linattn.check: exit 0 with PASS for correct outputs and gradients, 1 with FAIL (and the
worst elements) for wrong values, shapes or NaN, 2 for unusable input (missing or unknown keys,
raw bf16 arrays, Python objects), with messages that say what to do."""
import subprocess
import sys

import numpy as np
import pytest

import linattn
import linattn.testing as lt


def run_check(tmp_path, op, inputs, outputs, *extra):
    np.savez(tmp_path / "in.npz", **inputs)
    np.savez(tmp_path / "out.npz", **outputs)
    p = subprocess.run([sys.executable, "-m", "linattn.check", "--op", op, str(tmp_path / "in.npz"),
                        str(tmp_path / "out.npz"), *extra], capture_output=True, text=True, timeout=120)
    return p.returncode, p.stdout + p.stderr


def npz_inputs(inp):
    """fla-style inputs as .npz keys (None dropped; scale as a 0-d array)."""
    d = {k: x for k, x in inp.items() if k != "output_final_state" and x is not None}
    if "scale" in d:
        d["scale"] = np.array(d["scale"])
    return d


@pytest.mark.parametrize("op", linattn.OPS)
def test_cli_passes_float32_reference_outputs_with_every_key(tmp_path, op):
    inp = lt.random_inputs(op, B=1, T=11, cu_seqlens=2, initial_state=True, scale=0.7, seed=5)
    o, S = linattn.reference(op, **inp)
    code, out = run_check(tmp_path, op, npz_inputs(inp), {"o": o, "final_state": S})
    assert code == 0, out
    assert "VERDICT: PASS" in out and "o: ok" in out and "final_state: ok" in out


def test_cli_fails_a_wrong_output_and_names_the_worst_element(tmp_path):
    inp = lt.random_inputs("gated_delta_rule", T=8, seed=6)
    o, S = linattn.reference("gated_delta_rule", **inp)
    o = o.copy()
    o[0, 5, 1, 2] += 1.0
    code, out = run_check(tmp_path, "gated_delta_rule", npz_inputs(inp), {"o": o, "final_state": S})
    assert code == 1 and "VERDICT: FAIL" in out and "o: MISMATCH" in out
    assert "at (0, 5, 1, 2)" in out and "final_state: ok" in out


def test_cli_fails_nan_and_wrong_shapes_and_honours_the_tolerance(tmp_path):
    inp = lt.random_inputs("kda", T=6, seed=7)
    o, S = linattn.reference("kda", **inp)
    bad = o.copy()
    bad[0, 0, 0, 0] = np.nan
    code, out = run_check(tmp_path, "kda", npz_inputs(inp), {"o": bad})
    assert code == 1 and "1 NaN" in out and "final_state: not compared" in out
    code, out = run_check(tmp_path, "kda", npz_inputs(inp), {"o": o, "final_state": S.transpose(0, 1, 3, 2)})
    assert code == 1 and "final_state: shape mismatch" in out
    noisy = (o * (1 + 1e-4)).astype(np.float32)
    assert run_check(tmp_path, "kda", npz_inputs(inp), {"o": noisy})[0] == 1
    assert run_check(tmp_path, "kda", npz_inputs(inp), {"o": noisy}, "--rtol-rms", "1e-3")[0] == 0


def test_cli_rejects_missing_unknown_and_invalid_inputs_with_exit_2(tmp_path):
    inp = npz_inputs(lt.random_inputs("gdn2", T=4, seed=8))
    o, _ = linattn.reference("gdn2", **inp)
    code, out = run_check(tmp_path, "gdn2", {k: x for k, x in inp.items() if k != "w"}, {"o": o})
    assert code == 2 and "lacks required keys ['w']" in out
    code, out = run_check(tmp_path, "gdn2", {**inp, "beta": inp["b"]}, {"o": o})
    assert code == 2 and "does not take" in out and "'beta'" in out
    code, out = run_check(tmp_path, "gdn2", inp, {"o": o, "S": o})
    assert code == 2 and "outputs must hold 'o'" in out
    code, out = run_check(tmp_path, "gdn2", {**inp, "g": -inp["g"] + 0.5}, {"o": o})
    assert code == 2 and "the reference rejected the inputs" in out and "argument 'g'" in out
    code, out = run_check(tmp_path, "mamba", inp, {"o": o})
    assert code == 2 and "unknown operator" in out


def test_cli_checks_softmax_attention(tmp_path, rng):
    q, k, v = rng.standard_normal((1, 5, 2, 3)), rng.standard_normal((1, 5, 1, 3)), rng.standard_normal((1, 5, 1, 4))
    o = linattn.naive_softmax_attn(q, k, v)
    assert run_check(tmp_path, "softmax_attn", {"q": q, "k": k, "v": v}, {"o": o})[0] == 0
    assert run_check(tmp_path, "softmax_attn", {"q": q, "k": k, "v": v}, {"o": o[:, ::-1].copy()})[0] == 1


def run_files(tmp_path, op, *args):
    p = subprocess.run([sys.executable, "-m", "linattn.check", "--op", op, *map(str, args)],
                       capture_output=True, text=True, timeout=120)
    return p.returncode, p.stdout + p.stderr


def test_cli_checks_gradients_from_a_file(tmp_path):
    inp = lt.random_inputs("gdn2", T=9, initial_state=True, seed=14)
    cot = lt.random_cotangents("gdn2", inp, seed=1)
    grads = {k: x.astype(np.float32) for k, x in lt.reference_gradients("gdn2", inp, cot["do"], cot["dht"]).items()}
    lt.save_npz(tmp_path / "in.npz", inp)
    lt.save_npz(tmp_path / "g.npz", **cot, **grads)
    code, out = run_files(tmp_path, "gdn2", tmp_path / "in.npz", "--grads", tmp_path / "g.npz")
    assert code == 0, out
    assert all(f"{k}: ok" in out for k in ("dq", "dk", "dv", "dg", "db", "dw", "dh0")) and "VERDICT: PASS" in out
    bad = dict(grads, dg=grads["dg"].copy())
    bad["dg"][0, 3, 1, 2] *= -1
    lt.save_npz(tmp_path / "g.npz", **cot, **bad)
    code, out = run_files(tmp_path, "gdn2", tmp_path / "in.npz", "--grads", tmp_path / "g.npz")
    assert code == 1 and "dg: MISMATCH" in out and "at (0, 3, 1, 2)" in out
    lt.save_npz(tmp_path / "g.npz", **cot, **{k: x for k, x in grads.items() if k != "dw"})
    code, out = run_files(tmp_path, "gdn2", tmp_path / "in.npz", "--grads", tmp_path / "g.npz")
    assert code == 2 and "missing ['dw']" in out
    code, out = run_files(tmp_path, "gdn2", tmp_path / "in.npz")
    assert code == 2 and "nothing to check" in out


def test_cli_reads_the_harness_own_inputs_and_explains_bf16_and_none(tmp_path):
    inp = lt.random_inputs("kda", T=7, seed=15)  # holds output_final_state=True and initial_state=None
    o, S = linattn.reference("kda", **inp)
    np.savez(tmp_path / "in.npz", **{k: x for k, x in inp.items() if x is not None})
    np.savez(tmp_path / "out.npz", o=o, final_state=S)
    code, out = run_files(tmp_path, "kda", tmp_path / "in.npz", tmp_path / "out.npz")
    assert code == 0, out
    np.savez(tmp_path / "in_none.npz", **inp)
    code, out = run_files(tmp_path, "kda", tmp_path / "in_none.npz", tmp_path / "out.npz")
    assert code == 2 and "holds a Python object" in out  # scale, initial_state and cu_seqlens are None there
    assert any(f"inputs key '{k}'" in out for k in ("scale", "initial_state", "cu_seqlens"))
    ml_dtypes = pytest.importorskip("ml_dtypes", reason="ml_dtypes (.ci/install-deps.sh installs it) is not installed")
    ob = o.astype(ml_dtypes.bfloat16)
    np.savez(tmp_path / "out_bf.npz", o=ob)
    code, out = run_files(tmp_path, "kda", tmp_path / "in.npz", tmp_path / "out_bf.npz")
    assert code == 2 and "raw 2-byte values" in out and "--dtype bfloat16" in out
    # save_npz widens bf16 exactly and records it: the 16-bit tolerance applies
    lt.save_npz(tmp_path / "out_bf.npz", o=ob)
    assert "linattn_dtype" in np.load(tmp_path / "out_bf.npz").files
    code, out = run_files(tmp_path, "kda", tmp_path / "in.npz", tmp_path / "out_bf.npz")
    assert code == 0 and "for dtype=bfloat16" in out, out
    # the same values widened by hand: float32's tolerance fails them, unless --dtype says bf16
    np.savez(tmp_path / "out_w.npz", o=ob.astype(np.float32))
    assert run_files(tmp_path, "kda", tmp_path / "in.npz", tmp_path / "out_w.npz")[0] == 1
    assert run_files(tmp_path, "kda", tmp_path / "in.npz", tmp_path / "out_w.npz", "--dtype", "bfloat16")[0] == 0


def test_cli_softmax_uses_the_scaled_floor_and_the_inputs_types(tmp_path, rng):
    q, k, v = rng.standard_normal((1, 8, 2, 3)), rng.standard_normal((1, 8, 2, 3)), 1e-6 * rng.standard_normal((1, 8, 2, 4))
    o = linattn.naive_softmax_attn(q, k, v)
    inp = {"q": q.astype(np.float32), "k": k.astype(np.float32), "v": v.astype(np.float32)}
    assert run_check(tmp_path, "softmax_attn", inp, {"o": o.astype(np.float32)})[0] == 0
    assert run_check(tmp_path, "softmax_attn", inp, {"o": (1.5 * o).astype(np.float32)})[0] == 1
    assert run_check(tmp_path, "softmax_attn", inp, {"o": np.zeros_like(o, np.float32)})[0] == 1


def test_cli_refuses_npy_bad_dtype_names_and_integer_cotangents_with_exit_2(tmp_path):
    inp = lt.random_inputs("delta_rule", T=6, seed=24)
    o, S = linattn.reference("delta_rule", **inp)
    lt.save_npz(tmp_path / "in.npz", inp)
    np.save(tmp_path / "o.npy", o)
    code, out = run_files(tmp_path, "delta_rule", tmp_path / "in.npz", tmp_path / "o.npy")
    assert code == 2 and "single array (.npy)" in out
    np.savez(tmp_path / "out.npz", o=o, linattn_dtype=np.array(["bfloat16", "float32"]))
    code, out = run_files(tmp_path, "delta_rule", tmp_path / "in.npz", tmp_path / "out.npz")
    assert code == 2 and "expected one type name" in out
    np.savez(tmp_path / "out.npz", o=(o * 1.005).astype(np.float32))
    for bad in ("int8", "bool", "object"):
        code, out = run_files(tmp_path, "delta_rule", tmp_path / "in.npz", tmp_path / "out.npz", "--dtype", bad)
        assert code == 2 and "not a floating type" in out, out
    cot = lt.random_cotangents("delta_rule", inp)
    g = lt.reference_gradients("delta_rule", inp, cot["do"], cot["dht"])
    lt.save_npz(tmp_path / "g.npz", **g, do=cot["do"].astype(np.int32), dht=cot["dht"])
    code, out = run_files(tmp_path, "delta_rule", tmp_path / "in.npz", "--grads", tmp_path / "g.npz")
    assert code == 2 and "grads key 'do' expected a float array" in out


def test_cli_tolerance_per_key(tmp_path):
    inp = lt.random_inputs("delta_rule", T=6, seed=25)
    o, S = linattn.reference("delta_rule", **inp)
    lt.save_npz(tmp_path / "in.npz", inp)
    lt.save_npz(tmp_path / "out.npz", o=(o * 1.01).astype(np.float32), final_state=S)
    assert run_files(tmp_path, "delta_rule", tmp_path / "in.npz", tmp_path / "out.npz")[0] == 1
    code, out = run_files(tmp_path, "delta_rule", tmp_path / "in.npz", tmp_path / "out.npz", "--rtol-rms", "o=2e-2")
    assert code == 0 and "tolerance 2.0e-02" in out and "tolerance 1.0e-05" in out, out
    code, out = run_files(tmp_path, "delta_rule", tmp_path / "in.npz", tmp_path / "out.npz", "--rtol-rms", "o=x")
    assert code == 2 and "--rtol-rms expected a number" in out


def test_cli_damaged_files_are_unusable_input_with_exit_2(tmp_path):
    import zipfile
    inp = lt.random_inputs("delta_rule", T=6, seed=40)
    o, S = linattn.reference("delta_rule", **inp)
    lt.save_npz(tmp_path / "in.npz", inp)
    lt.save_npz(tmp_path / "out.npz", o=o, final_state=S)
    good = (tmp_path / "in.npz").read_bytes()
    (tmp_path / "empty.npz").write_bytes(b"")
    (tmp_path / "trunc.npz").write_bytes(good[: len(good) // 2])
    crc = bytearray(good)
    at = crc.find(np.ascontiguousarray(inp["q"]).tobytes())
    crc[at + 3] ^= 0xFF  # one byte of q's data: the member's CRC-32 no longer matches
    (tmp_path / "crc.npz").write_bytes(bytes(crc))
    with zipfile.ZipFile(tmp_path / "raw.npz", "w") as z:
        z.writestr("q", b"not an array")
    for name, reason in (("empty", "EOFError"), ("trunc", "BadZipFile"), ("crc", "Bad CRC-32"),
                         ("raw", "its member 'q' is not a .npy array")):
        code, out = run_files(tmp_path, "delta_rule", tmp_path / f"{name}.npz", tmp_path / "out.npz")
        assert code == 2 and f"cannot read inputs file '{tmp_path / name}.npz'" in out and reason in out, out
        assert "Traceback" not in out
    code, out = run_files(tmp_path, "delta_rule", tmp_path / "in.npz", tmp_path / "trunc.npz")
    assert code == 2 and "cannot read outputs file" in out


def test_cli_refuses_non_float_inputs_and_unknown_tolerance_keys(tmp_path):
    inp = lt.random_inputs("gated_delta_rule", T=6, seed=41)
    o, S = linattn.reference("gated_delta_rule", **inp)
    for key, bad in (("q", inp["q"] > 0), ("v", (10 * inp["v"]).astype(np.int32)), ("g", inp["g"].astype(np.int64))):
        code, out = run_check(tmp_path, "gated_delta_rule", npz_inputs({**inp, key: bad}), {"o": o})
        assert code == 2 and f"inputs key '{key}' expected a float array but got dtype {bad.dtype}" in out, out
    for flag in ("O=1", "oo=1"):
        code, out = run_check(tmp_path, "gated_delta_rule", npz_inputs(inp), {"o": o}, "--rtol-rms", flag)
        assert code == 2 and "valid keys: ['o', 'final_state'" in out, out


def test_cli_float128_is_float64_precision_and_ml_dtypes_int4_is_not_called_bf16(tmp_path):
    inp = lt.random_inputs("gated_delta_rule", T=6, seed=42)
    o, S = linattn.reference("gated_delta_rule", **inp)
    off = (o * (1 + 3e-3)).astype(np.float64)
    code, out = run_check(tmp_path, "gated_delta_rule", npz_inputs(inp), {"o": off}, "--dtype", "float128")
    assert code == 1 and "tolerance 1.0e-10" in out, out
    ml_dtypes = pytest.importorskip("ml_dtypes", reason="ml_dtypes (.ci/install-deps.sh installs it) is not installed")
    code, out = run_check(tmp_path, "gated_delta_rule", npz_inputs(inp), {"o": o.astype(ml_dtypes.int4)})
    assert code == 2 and "raw 1-byte values" in out and "bfloat16" not in out.split("raw 1-byte")[1].split(")")[0]


def test_cli_first_line_of_a_nan_output_says_nan(tmp_path):
    inp = lt.random_inputs("delta_rule", T=6, seed=43)
    o, S = linattn.reference("delta_rule", **inp)
    o = o.copy()
    o[0, 2, 1, 3] = np.nan
    code, out = run_check(tmp_path, "delta_rule", npz_inputs(inp), {"o": o, "final_state": S})
    assert code == 1 and "o: MISMATCH: non-finite values in actual: 1 NaN, 0 Inf; first at (0, 2, 1, 3)" in out, out
