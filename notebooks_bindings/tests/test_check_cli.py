"""python -m linattn.check: exit 0 with PASS for correct outputs, 1 with FAIL (and the worst
elements) for wrong values, shapes or NaN, 2 for unusable input (missing or unknown keys)."""
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
    assert code == 1 and "1 NaN" in out and "final_state: not given" in out
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
