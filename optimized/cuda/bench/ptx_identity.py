#!/usr/bin/env python3
"""optimized/cuda/bench/ptx_identity.py -- prove a CUDA refactor behaviour-preserving without a GPU:
emit the PTX of .cu files with the exact flags of a build, and compare two PTX files kernel by kernel
(every .entry and non-inlined .func) up to symbol names, label numbers, local-depot numbers,
.loc / .file / comment lines and .visible. Register numbers are NOT ignored (a renumbering is
reported as a difference). Used by the sessions that moved shared CUDA code into tc_common.cuh /
bwd_common.cuh / common.cuh (optimized/cuda/RESULTS.md).

  python3 optimized/cuda/bench/ptx_identity.py emit build/cuda /tmp/ptx_before optimized/cuda/v2_tensorcore.cu ...
  (change the code, emit again into /tmp/ptx_after)
  python3 optimized/cuda/bench/ptx_identity.py compare /tmp/ptx_before/v2_tensorcore.ptx /tmp/ptx_after/v2_tensorcore.ptx

`compare` exits 1 if any kernel differs, is missing or is new. `compare A B --map 'REGEX=>REPL' ...` renames the
kernels of B first (re.sub on the demangled name, once and again until it names a kernel of A), e.g.
`--map ', false>(?=\()=>>'` when a template gained last parameters whose defaults (false) keep the old kernels: they
are then matched to their old names (session 18; the lookahead keeps the match on the kernel's own template list).
The caller must know that the stripped values are the defaults; a kernel the map renames onto another's name is
reported as a collision, not hidden."""
import json, os, re, subprocess, sys


def emit(build, out, files):
    """nvcc -ptx with the build's own command line (compile_commands.json), -c replaced by -ptx."""
    cmds = json.load(open(os.path.join(build, "compile_commands.json")))
    os.makedirs(out, exist_ok=True)
    rc = 0
    for f in files:
        base = os.path.basename(f)
        entry = [e for e in cmds if e["file"].endswith("/" + base)]
        if not entry:
            print(f"{f}: not in {build}/compile_commands.json"); rc = 1; continue
        cmd = entry[0]["command"].replace(" -c ", " -ptx ")
        cmd = re.sub(r" -o \S+", " -o " + os.path.join(os.path.abspath(out), base[:-3] + ".ptx"), cmd)
        r = subprocess.run(cmd, shell=True, cwd=entry[0]["directory"], capture_output=True, text=True)
        print(f"{base}: rc={r.returncode}")
        if r.returncode: print(r.stderr[-2000:]); rc = 1
    return rc


def norm(body):
    body = re.sub(r"_Z[A-Za-z0-9_]+", "SYM", body)
    body = re.sub(r"\$L__[A-Za-z0-9_]+", "LBL", body)
    body = re.sub(r"__local_depot\d+", "__local_depot", body)
    body = body.replace(".visible ", "")
    return "\n".join(l for l in body.split("\n") if l.strip() and not re.match(r"\s*(//|\.loc|\.file)", l))


def entries(path):
    s = open(path).read()
    out = {}
    for p in re.split(r"\n(?=(?:\.visible |\.weak )?\.(?:entry|func) )", s):
        m = re.match(r"(?:\.visible |\.weak )?\.(entry|func)\s+(?:\([^)]*\)\s*)?(\S+?)\(", p)
        if not m: continue
        name = subprocess.run(["c++filt", m.group(2)], capture_output=True, text=True).stdout.strip()
        end = p.find("\n}\n")  # the body ends at the first closing brace in column 0
        out[(m.group(1), name)] = norm(p[:end + 2] if end >= 0 else p)
    return out


def compare(a_path, b_path, maps=()):
    a, b = entries(a_path), entries(b_path)
    diff_extra = [0]
    names_a = {n for _, n in a}

    def rename(name):  # apply each map again and again until the name is one of A's (else keep it)
        for pat, repl in maps:
            cur = name
            while cur not in names_a:
                nxt = re.sub(pat, repl, cur, count=1)
                if nxt == cur: break
                cur = nxt
            if cur in names_a: return cur
        return name
    renamed = {}
    for k, v in b.items():
        nk = (k[0], rename(k[1]))
        if nk in renamed:  # two kernels of B under one name: report both, hide neither (review19)
            print("COLLISION after --map:", k, "and another kernel of B both become", nk); diff_extra[0] += 1
            nk = k
        renamed[nk] = v
    b = renamed
    same, diff = 0, diff_extra[0]
    for k, v in a.items():
        if k not in b: print("MISSING after:", k); diff += 1
        elif b[k] == v: same += 1
        else: print("DIFF:", k); diff += 1
    for k in b:
        if k not in a: print("NEW after:", k); diff += 1
    ne = sum(1 for k in a if k[0] == "entry")
    print(f"{a_path}: {ne} kernels, {len(a) - ne} funcs; identical {same}, different/missing/new {diff}")
    return 1 if diff else 0


if __name__ == "__main__":
    if len(sys.argv) >= 5 and sys.argv[1] == "emit":
        sys.exit(emit(sys.argv[2], sys.argv[3], sys.argv[4:]))
    if len(sys.argv) >= 4 and sys.argv[1] == "compare" and len(sys.argv) % 2 == 0:
        maps = [tuple(sys.argv[i + 1].split("=>", 1)) for i in range(4, len(sys.argv), 2)
                if sys.argv[i] == "--map" and "=>" in sys.argv[i + 1]]
        if len(maps) == (len(sys.argv) - 4) // 2:
            sys.exit(compare(sys.argv[2], sys.argv[3], maps))
    print(__doc__); sys.exit(2)
