#!/usr/bin/env bash
# Native binaries for the Intel Data Center GPU Max 1550 (pvc) from the shipped SPIR-V packs:
# `ocloc compile -spirv_input -device pvc` per instance (ESIMD instances with -vc-codegen, the
# vector-compute backend), joined into one device-binary pack that the runtime loads through
# zeModuleCreate(ZE_MODULE_FORMAT_NATIVE) on a Level Zero pvc device (sycl/kernel_store.cpp).
# Nothing runs here: this proves ocloc generates pvc code for each instance.
#
# usage: cmake/aot/pvc_binaries.sh [-j N] [--limit N] [--allow-failures] OUT.gnnbin PACK.gnnspv...
#   -j N              parallel ocloc processes (default 2)
#   --limit N         only the first N instances of each pack (a smoke run)
#   --allow-failures  exit 0 when the pack was written even if some instances failed (the build)
# Prints "FAIL <key> <kernel>" per instance ocloc cannot build and a summary per pack; the output
# pack holds every instance that built. Exit status: 0 when all built, 1 when some failed,
# 2 on bad usage or no ocloc (Debian/Ubuntu: apt-get install intel-opencl-icd).
set -uo pipefail
HERE=$(cd "$(dirname "$0")" && pwd)
JOBS=2 LIMIT=0 ALLOW=0
while [ $# -gt 0 ]; do
  case "$1" in
    -j) JOBS=$2; shift 2 ;;
    --limit) LIMIT=$2; shift 2 ;;
    --allow-failures) ALLOW=1; shift ;;
    *) break ;;
  esac
done
[ $# -ge 2 ] || { sed -n 2,16p "$0" >&2; exit 2; }
command -v ocloc >/dev/null || { echo "ocloc not found (apt-get install intel-opencl-icd)" >&2; exit 2; }
OUT=$1; shift
WORK=$(mktemp -d)
trap 'rm -rf "$WORK"' EXIT
echo "ocloc: $(command -v ocloc) ($(dpkg-query -W -f='${Package} ${Version}' intel-opencl-icd 2>/dev/null || echo 'version unknown'))"

# one instance: <dir> <key>; ocloc 22.43 aborts (SIGABRT) on some modules depending on the address
# space layout (tests/drivers/esimd_aot.sh): first try with ASLR off, retry an abort with ASLR on
NOASLR=""
if setarch "$(uname -m)" -R true 2>/dev/null; then NOASLR="setarch $(uname -m) -R"; fi
build_one() {
  local dir=$1 key=$2 opts="" try rc pre
  # ESIMD kernels (namespace gnnsparse::esimd: "5esimd" in the mangled name) go to the vector-compute backend
  grep -q '5esimd' "$dir/$key.name" && opts="-vc-codegen"
  for try in 1 2 3; do
    pre=""; [ "$try" -eq 1 ] && pre=$NOASLR
    (cd "$dir" && $pre ocloc compile -file "$key.spv" -spirv_input -device pvc ${opts:+-options "$opts"} \
       -output "$key" > "$key.log" 2>&1) 2>/dev/null
    rc=$?
    [ $rc -eq 134 ] || break
  done
  if [ $rc -eq 0 ] && ls "$dir/$key"_*.bin >/dev/null 2>&1; then mv "$dir/$key"_*.bin "$dir/$key.bin"; else
    echo "FAIL $key $(cat "$dir/$key.name") (ocloc rc=$rc: $(grep -m1 -iE 'error|abort' "$dir/$key.log"))"; fi
}
export -f build_one
export NOASLR

status=0
SRCHASH=""
for pack in "$@"; do
  name=$(basename "$pack" .gnnspv)
  d="$WORK/$name"
  python3 "$HERE/pack.py" split "$pack" "$d" || exit 2
  SRCHASH=$(cat "$d/source_hash")
  keys=$(cd "$d" && ls *.spv | sed 's/\.spv$//')
  [ "$LIMIT" -gt 0 ] && keys=$(echo "$keys" | head -n "$LIMIT")
  t0=$SECONDS
  echo "$keys" | xargs -P "$JOBS" -I{} bash -c 'build_one "$0" "$1"' "$d" {} | tee "$WORK/$name.fail"
  total=$(echo "$keys" | wc -l); bad=$(grep -c '^FAIL' "$WORK/$name.fail")
  echo "$name: $((total - bad)) of $total instances built for pvc in $((SECONDS - t0)) s"
  [ "$bad" -eq 0 ] || status=1
  mkdir -p "$WORK/all"
  for k in $keys; do [ -f "$d/$k.bin" ] && mv "$d/$k.bin" "$WORK/all/" && cp "$d/$k.name" "$WORK/all/"; done
done
python3 "$HERE/pack.py" join "$OUT" "$WORK/all" "$SRCHASH" || exit 2
[ $ALLOW -eq 1 ] && exit 0
exit $status
