"""Ahead-of-time kernels and the persistent kernel cache (sycl/kernel_store.cpp).

Every test runs fresh Python processes (what a user's new process sees) with its own cache
directory (GNNSPARSE_CACHE_DIR) and checks where each kernel came from (_sycl.kernel_loads()),
which warnings were raised, and that results match gnnsparse.reference. Faults: a corrupt,
truncated or misplaced cache entry, an unwritable cache directory, shipped SPIR-V the driver
rejects, a pack built from other sources: each must cost one warning and fall back, never crash or
load another instance's kernel.
"""
from __future__ import annotations

import json
import os
import struct
import subprocess
import sys
from pathlib import Path

import pytest

from conftest import sycl_or_skip

pytestmark = [pytest.mark.sycl]

# One process: a few ops over instances of three kernels; prints what happened as JSON.
SCRIPT = r"""
import json, sys, warnings
import numpy as np
warnings.simplefilter("always")
with warnings.catch_warnings(record=True) as caught:
    import gnnsparse as gs
    from gnnsparse import reference as ref, _sycl
    rng = np.random.default_rng(5)
    M, K = 60, 50
    deg = rng.poisson(4, M); deg[3] = 0
    rowptr = np.concatenate([[0], np.cumsum(deg)]).astype(np.int32)
    col = rng.integers(0, K, rowptr[-1]).astype(np.int32)
    A = gs.CSR(rowptr, col, rng.standard_normal(rowptr[-1]).astype(np.float32), (M, K))
    ok = True
    for reduce, C in [("sum", 20), ("mean", 20), ("max", 5)][: int(sys.argv[1])]:
        X = rng.standard_normal((K, C)).astype(np.float32)
        Y = gs.spmm(A, X, reduce)
        ok &= bool(np.allclose(Y, ref.spmm(A, X, reduce), rtol=1e-5, atol=1e-5))
print(json.dumps({"ok": ok, "loads": [[n, o] for n, o, _ in _sycl.kernel_loads()],
                  "warnings": [str(w.message) for w in caught], "info": {k: str(v) for k, v in _sycl.aot_info().items()}}))
"""


def run(env_extra, n=3, check=True):
    env = dict(os.environ)
    env.pop("GNNSPARSE_POISON", None)
    env.update(env_extra)
    r = subprocess.run([sys.executable, "-c", SCRIPT, str(n)], capture_output=True, text=True, env=env, timeout=600)
    assert r.returncode == 0 or not check, r.stdout + r.stderr
    out = json.loads(r.stdout.strip().splitlines()[-1])
    assert out["ok"], out
    return out


def origins(out):
    return [o for _, o in out["loads"]]


@pytest.fixture
def cache(tmp_path):
    sycl_or_skip()
    return tmp_path / "cache"


def entries(cache):
    return sorted((cache / "sycl-kernels-v1").glob("*.bin"))


def test_spirv_then_cache(cache):
    first = run({"GNNSPARSE_CACHE_DIR": str(cache)})
    if int(first["info"]["shipped_spirv"]) == 0:
        pytest.skip("this build ships no SPIR-V (no OpenCL device at build time)")
    assert origins(first) == ["shipped SPIR-V"] * 3 and not first["warnings"], first
    assert len(entries(cache)) == 3
    second = run({"GNNSPARSE_CACHE_DIR": str(cache)})
    assert origins(second) == ["the kernel cache"] * 3 and not second["warnings"], second


def test_cache_off_and_source_path(cache):
    out = run({"GNNSPARSE_CACHE": "0", "GNNSPARSE_AOT": "0", "GNNSPARSE_CACHE_DIR": str(cache)}, n=1)
    assert origins(out) == ["source"] and not out["warnings"]
    assert not cache.exists()
    # built from source, then cached: the next process loads the binary
    run({"GNNSPARSE_AOT": "0", "GNNSPARSE_CACHE_DIR": str(cache)}, n=1)
    again = run({"GNNSPARSE_AOT": "0", "GNNSPARSE_CACHE_DIR": str(cache)}, n=1)
    assert origins(again) == ["the kernel cache"] and not again["warnings"]


@pytest.mark.parametrize("damage", ["flip", "truncate"])
def test_corrupt_entry_is_rebuilt(cache, damage):
    run({"GNNSPARSE_CACHE_DIR": str(cache)}, n=2)
    for f in entries(cache):
        b = bytearray(f.read_bytes())
        if damage == "flip":
            b[len(b) // 2] ^= 0xFF
        else:
            del b[5:]
        f.write_bytes(bytes(b))
    out = run({"GNNSPARSE_CACHE_DIR": str(cache)}, n=2)
    assert "the kernel cache" not in origins(out)
    assert len(out["warnings"]) == 2 and all("corrupt kernel cache entry" in w for w in out["warnings"]), out
    healed = run({"GNNSPARSE_CACHE_DIR": str(cache)}, n=2)
    assert origins(healed) == ["the kernel cache"] * 2 and not healed["warnings"]


def test_misplaced_entry_never_loads_another_kernel(cache):
    run({"GNNSPARSE_CACHE_DIR": str(cache)}, n=2)
    a, b = entries(cache)
    ta, tb = a.read_bytes(), b.read_bytes()
    a.write_bytes(tb)
    b.write_bytes(ta)
    out = run({"GNNSPARSE_CACHE_DIR": str(cache)}, n=2)  # results checked against the reference
    assert "the kernel cache" not in origins(out)
    assert len(out["warnings"]) == 2 and all("stale kernel cache entry" in w for w in out["warnings"]), out


def test_unwritable_cache_dir_warns_once(tmp_path):
    sycl_or_skip()
    blocker = tmp_path / "a-file"
    blocker.write_text("not a directory")
    out = run({"GNNSPARSE_CACHE_DIR": str(blocker / "cache")}, n=3)
    assert len(out["warnings"]) == 1 and "not writable" in out["warnings"][0], out


def _rewrite_pack(src: Path, dst: Path, blob_fn=None, source_hash=None):
    """Copy a SPIR-V pack (format: sycl/kernel_store.hpp), changing every blob and/or the source hash."""
    data = bytearray(src.read_bytes())
    magic, shash, count = struct.unpack_from("<8sQI", data, 0)
    assert magic == b"GNNSPV01"
    if source_hash is not None:
        struct.pack_into("<Q", data, 8, source_hash)
    if blob_fn:
        for i in range(count):
            at = 20 + 40 * i
            key, noff, nlen, boff, blen, bhash = struct.unpack_from("<QIIQQQ", data, at)
            blob = bytes(blob_fn(bytes(data[boff:boff + blen])))
            assert len(blob) == blen
            data[boff:boff + blen] = blob
            struct.pack_into("<Q", data, at + 32, _fnv1a(blob))
    dst.write_bytes(bytes(data))


def _fnv1a(b: bytes) -> int:
    h = 1469598103934665603
    for x in b:
        h = ((h ^ x) * 1099511628211) & 0xFFFFFFFFFFFFFFFF
    return h


def _shipped_pack():
    from gnnsparse import _sycl

    d = Path(_sycl.aot_info()["kernel_dir"] or "/nonexistent")
    packs = sorted(d.glob("spmm*.gnnspv"))
    if not packs:
        pytest.skip("this build ships no SPIR-V")
    return packs[0]


def test_rejected_spirv_falls_back_to_source(cache, tmp_path):
    pack = _shipped_pack()
    kdir = tmp_path / "kernels"
    kdir.mkdir()
    # a valid SPIR-V header, then garbage: the pack checks out, the driver must refuse it
    _rewrite_pack(pack, kdir / pack.name, blob_fn=lambda b: b[:20] + bytes((x * 7 + 3) & 0xFF for x in b[20:]))
    out = run({"GNNSPARSE_CACHE_DIR": str(cache), "GNNSPARSE_KERNEL_DIR": str(kdir)}, n=1)
    assert origins(out) == ["source"], out
    assert len(out["warnings"]) == 1 and "rejected the shipped SPIR-V" in out["warnings"][0], out


def test_pack_from_other_sources_is_ignored(cache, tmp_path):
    pack = _shipped_pack()
    kdir = tmp_path / "kernels"
    kdir.mkdir()
    _rewrite_pack(pack, kdir / pack.name, source_hash=12345)
    out = run({"GNNSPARSE_CACHE_DIR": str(cache), "GNNSPARSE_KERNEL_DIR": str(kdir)}, n=1)
    assert origins(out) == ["source"], out
    assert len(out["warnings"]) == 1 and "built from other kernel sources" in out["warnings"][0], out


def test_two_processes_at_once(cache):
    env = dict(os.environ, GNNSPARSE_CACHE_DIR=str(cache))
    env.pop("GNNSPARSE_POISON", None)
    procs = [subprocess.Popen([sys.executable, "-c", SCRIPT, "3"], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                              text=True, env=env) for _ in range(2)]
    for p in procs:
        so, se = p.communicate(timeout=600)
        assert p.returncode == 0, so + se
        out = json.loads(so.strip().splitlines()[-1])
        assert out["ok"] and not out["warnings"], out
    assert not list((cache / "sycl-kernels-v1").glob("*.tmp.*"))  # no temporary file left behind
    after = run({"GNNSPARSE_CACHE_DIR": str(cache)})
    assert origins(after) == ["the kernel cache"] * 3 and not after["warnings"]


def test_launch_policy_stays_in_the_shipped_list():
    """Every instance the launch functions pick over a grid of shapes is in the list the build
    compiles (sycl/policy.hpp, for_each_portable_instance)."""
    sycl_or_skip()
    from gnnsparse import _sycl

    for sg in (8, 16, 32):
        assert _sycl.launch_policy_outliers(sg) == []


# One process: the first quantized ops of a new user (quantize, quant.spmm / sddmm / fusedmm,
# dequantize) on int32 and int64 indices, each checked against the reference on the dequantized
# inputs; prints what happened as JSON.
QSCRIPT = r"""
import json, sys, warnings
import numpy as np
warnings.simplefilter("always")
with warnings.catch_warnings(record=True) as caught:
    import gnnsparse as gs
    from gnnsparse import reference as ref, _sycl
    rng = np.random.default_rng(7)
    M = 61
    deg = rng.poisson(4, M); deg[3] = 0
    rowptr = np.concatenate([[0], np.cumsum(deg)])
    col = rng.integers(0, M, rowptr[-1])
    X = rng.standard_normal((M, 20)).astype(np.float32)
    ok = True
    small = sys.argv[1] == "small"  # int32 indices, int8, quant.spmm only
    for itype in (np.int32,) if small else (np.int32, np.int64):
        A = gs.CSR(rowptr.astype(itype), col.astype(itype), rng.standard_normal(rowptr[-1]).astype(np.float32), (M, M))
        for bits in (8,) if small else (8, 4):
            Q = gs.quantize(X, bits=bits, seed=3)
            Xq = np.asarray(gs.dequantize(Q), dtype=np.float64)
            ok &= bool(np.abs(Xq - X).max() <= Q.scale_value() * 1.0001)
            ok &= bool(np.allclose(gs.quant.spmm(A, Q, "max"), ref.spmm(A, Xq, "max"), rtol=1e-5, atol=1e-5))
            if small:
                continue
            ok &= bool(np.allclose(gs.quant.sddmm(A, Q, Q), ref.sddmm(A, Xq, Xq), rtol=1e-5, atol=1e-4))
            ok &= bool(np.allclose(gs.quant.fusedmm(A, Q, Q, Q, edge="softmax"),
                                   ref.fusedmm(A, Xq, Xq, Xq, "dot", "softmax"), rtol=1e-4, atol=1e-5))
print(json.dumps({"ok": ok, "loads": [[n, o] for n, o, _ in _sycl.kernel_loads()],
                  "warnings": [str(w.message) for w in caught], "info": {k: str(v) for k, v in _sycl.aot_info().items()}}))
"""


def run_quant(env_extra, small=False):
    env = dict(os.environ)
    env.pop("GNNSPARSE_POISON", None)
    env.update(env_extra)
    r = subprocess.run([sys.executable, "-c", QSCRIPT, "small" if small else "all"], capture_output=True, text=True, env=env, timeout=600)
    assert r.returncode == 0, r.stdout + r.stderr
    out = json.loads(r.stdout.strip().splitlines()[-1])
    assert out["ok"], out
    return out


# what QSCRIPT loads at sub-group size 16 (the shipped size): every portable quantized kernel
QUANT_KERNELS = sorted(
    ["gnnsparse::quant_absmax<256>", "gnnsparse::quant_scale<256>"]
    + [f"gnnsparse::quant_{k}<{b}>" for k in ("quantize", "dequantize") for b in (4, 8)]
    + [f"gnnsparse::{k}<{i}, 16>" for k in ("qsddmm_sg", "qfusedmm_sg") for i in ("int", "long")]
    + [f"gnnsparse::qspmm_sg<{i}, 16, gnnsparse::Reduce::max, true>" for i in ("int", "long")])


def test_quantized_first_call_spirv_then_cache(cache):
    """The quantized kernels' first process loads the shipped SPIR-V (no C++ front end) and fills
    the persistent cache; the next process loads every kernel from the cache."""
    from gnnsparse import _sycl

    kdir = Path(_sycl.aot_info()["kernel_dir"] or "/nonexistent")
    if not (kdir / "quant.gnnspv").exists() or (kdir / "quant.gnnspv").stat().st_size <= 20:
        pytest.skip("this build ships no quantized SPIR-V (no OpenCL device at build time)")
    first = run_quant({"GNNSPARSE_CACHE_DIR": str(cache)})
    if _sycl_sg() != 16:
        pytest.skip("the device's sub-group size is not the shipped one (16)")
    assert sorted(n for n, _ in first["loads"]) == QUANT_KERNELS, first
    assert set(origins(first)) == {"shipped SPIR-V"} and not first["warnings"], first
    assert len(entries(cache)) == len(QUANT_KERNELS)
    second = run_quant({"GNNSPARSE_CACHE_DIR": str(cache)})
    assert sorted(n for n, _ in second["loads"]) == QUANT_KERNELS, second
    assert set(origins(second)) == {"the kernel cache"} and not second["warnings"], second


def test_quantized_source_path_is_cached(cache):
    """Without shipped kernels (GNNSPARSE_AOT=0) the quantized kernels compile from source once,
    then load from the persistent cache: never a source build in every process."""
    first = run_quant({"GNNSPARSE_AOT": "0", "GNNSPARSE_CACHE_DIR": str(cache)}, small=True)
    assert set(origins(first)) == {"source"} and not first["warnings"], first
    again = run_quant({"GNNSPARSE_AOT": "0", "GNNSPARSE_CACHE_DIR": str(cache)}, small=True)
    assert sorted(again["loads"]) == sorted([n, "the kernel cache"] for n, _ in first["loads"]), again
    assert not again["warnings"], again


def _sycl_sg():
    import dpctl
    from gnnsparse import _sycl

    return int(_sycl.device_caps(dpctl.SyclQueue())["preferred_sub_group_size"])


def test_quantized_launch_policy_stays_in_the_shipped_list():
    """Every instance the quantized launch functions (sycl/quant_policy.hpp: the quantizer's passes,
    dequantize, quant SpMM / SDDMM / FusedMM, the ESIMD quantizer) pick over a grid of devices,
    shapes and arguments is in the lists the build compiles."""
    sycl_or_skip()
    from gnnsparse import _sycl

    for sg in (8, 16, 32):
        assert _sycl.quant_launch_policy_outliers(sg) == []


# A stand-in for libze_loader: records what the loader passes to zeModuleCreate / zeKernelCreate.
FAKE_ZE = r"""
#include <stdint.h>
#include <stdio.h>
#include <string.h>
typedef struct { uint32_t stype; const void *next; uint32_t format; size_t size; const uint8_t *data;
                 const char *flags; const void *constants; } module_desc;
typedef struct { uint32_t stype; const void *next; uint32_t flags; const char *name; } kernel_desc;
static char rec[1024];
static uint32_t mstype, format, kstype; static size_t size; static unsigned char head[4];
int zeModuleCreate(void *c, void *d, const module_desc *m, void **mod, void **log) {
  mstype = m->stype; format = m->format; size = m->size; memcpy(head, m->data, 4); *mod = (void *)0x10; return 0; }
int zeKernelCreate(void *mod, const kernel_desc *k, void **out) {
  kstype = k->stype;
  snprintf(rec, sizeof rec, "%u %u %zu %02x%02x%02x%02x %u %s", mstype, format, size, head[0], head[1], head[2], head[3],
           kstype, k->name);
  *out = (void *)0x20; return 0; }
int zeModuleDestroy(void *m) { return 0; }
const char *fake_record(void) { return rec; }
"""

PROBE_NATIVE = r"""
import ctypes, json, sys
from gnnsparse import _sycl
key = int(sys.argv[1], 16)
msg = _sycl.native_binary_check("pvc", key)
fake = ctypes.CDLL(sys.argv[2])
fake.fake_record.restype = ctypes.c_char_p
print(json.dumps({"msg": msg, "record": fake.fake_record().decode()}))
"""


def test_pvc_binaries_and_their_loader_on_a_stand_in_level_zero(tmp_path):
    """cmake/aot/pvc_binaries.sh builds pvc binaries (ocloc) for a few instances; the runtime's
    Level Zero loader finds an instance's binary in the pack and hands it to zeModuleCreate as a
    native module and asks zeKernelCreate for its kernel (a stand-in loader records the calls:
    nothing runs on a GPU here)."""
    import shutil

    sycl_or_skip()
    if shutil.which("ocloc") is None or shutil.which("cc") is None:
        pytest.skip("needs ocloc (apt-get install intel-opencl-icd) and a C compiler")
    pack = _shipped_pack()
    kdir = tmp_path / "kernels"
    kdir.mkdir()
    root = Path(__file__).resolve().parents[1]
    r = subprocess.run(["bash", str(root / "cmake/aot/pvc_binaries.sh"), "--limit", "2", str(kdir / "pvc.gnnbin"),
                        str(pack)], capture_output=True, text=True, timeout=600)
    assert r.returncode == 0 and "2 of 2 instances built for pvc" in r.stdout, r.stdout + r.stderr
    sys.path.insert(0, str(root / "cmake/aot"))
    import pack as packfmt

    magic, _, items = packfmt.read(kdir / "pvc.gnnbin")
    assert magic == b"GNNBIN01" and len(items) == 2
    key, raw, blob = items[0]
    assert blob[:4] == b"\x7fELF"  # ocloc's native binary (zebin)
    fake = tmp_path / "libfake_ze.so"
    (tmp_path / "fake_ze.c").write_text(FAKE_ZE)
    subprocess.run(["cc", "-shared", "-fPIC", "-o", str(fake), str(tmp_path / "fake_ze.c")], check=True)
    env = dict(os.environ, GNNSPARSE_KERNEL_DIR=str(kdir), GNNSPARSE_ZE_LOADER=str(fake))
    r = subprocess.run([sys.executable, "-c", PROBE_NATIVE, f"{key:x}", str(fake)], capture_output=True, text=True,
                       env=env, timeout=300)
    assert r.returncode == 0, r.stdout + r.stderr
    out = json.loads(r.stdout.strip().splitlines()[-1])
    assert out["msg"] == "", out
    # ZE_STRUCTURE_TYPE_MODULE_DESC, ZE_MODULE_FORMAT_NATIVE, the binary's size and ELF header,
    # ZE_STRUCTURE_TYPE_KERNEL_DESC, the instance's kernel name
    assert out["record"] == f"27 1 {len(blob)} 7f454c46 29 {raw}", out


def test_build_without_a_device_ships_empty_packs_quietly(cache, tmp_path):
    """A package built where no OpenCL device could drive the compiler ships empty packs
    (gnnsparse_aot says so at build time); at run time kernels then compile from source, with no
    warning."""
    sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "cmake/aot"))
    import pack as packfmt

    kdir = tmp_path / "kernels"
    kdir.mkdir()
    packfmt.write(kdir / "spmm.gnnspv", b"GNNSPV01", 0, [])
    out = run({"GNNSPARSE_CACHE_DIR": str(cache), "GNNSPARSE_KERNEL_DIR": str(kdir)}, n=1)
    assert origins(out) == ["source"] and not out["warnings"], out
