#!/usr/bin/env bash
# What Android needs from a shipped library, checked on the aarch64 Linux build (the NDK is not available here):
#  - every PT_LOAD segment aligned to 16 KiB (Android 15+ devices with 16 KiB pages refuse 4 KiB-aligned libraries);
#  - no OpenMP or other runtime beyond the C/C++ libraries and the tokenizer's two (PCRE2, utf8proc: on Android
#    they are linked statically or shipped beside the library), nothing from the host (OpenCL, libjpeg, httplib);
#  - the Arm kernels of every level in the one library (runtime dispatch: dotprod and i8mm code present);
#  - the JNI library needs only libpipit and the C library.
# Usage: tests/e2e/arm_elf_check.sh BUILD_DIR
set -euo pipefail
build=$1
READELF=${READELF:-aarch64-linux-gnu-readelf}
command -v "$READELF" >/dev/null || READELF=readelf
fail=0
check_elf() {
  local lib=$1; shift
  local allowed=("$@")
  [[ -f "$lib" ]] || { echo "[elf] FAIL $lib: missing"; fail=1; return; }
  "$READELF" -h "$lib" | grep -q "AArch64" || { echo "[elf] FAIL $lib: not an AArch64 ELF"; fail=1; }
  local bad_align="" align
  for align in $("$READELF" -lW "$lib" | awk '$1 == "LOAD" { print $NF }'); do
    (( align < 16384 )) && bad_align+="$align "
  done
  if [[ -n "$bad_align" ]]; then echo "[elf] FAIL $lib: LOAD segments aligned to $bad_align (< 0x4000)"; fail=1
  else echo "[elf] ok   $lib: every LOAD segment aligned to >= 16 KiB"; fi
  local needed
  needed=$("$READELF" -dW "$lib" | sed -n 's/.*(NEEDED).*\[\(.*\)\]/\1/p')
  for n in $needed; do
    local ok=0
    for a in "${allowed[@]}"; do [[ "$n" == $a ]] && ok=1; done
    if ((ok)); then :; else echo "[elf] FAIL $lib: unexpected DT_NEEDED $n"; fail=1; fi
  done
  echo "[elf] $lib needs: $(echo $needed | tr '\n' ' ')"
}
lib=$(ls "$build"/libpipit.so.* 2>/dev/null | head -1)
check_elf "$lib" 'libstdc++.so.*' 'libm.so.*' 'libgcc_s.so.*' 'libc.so.*' 'ld-linux-aarch64.so.*' \
  'libpcre2-8.so.*' 'libutf8proc.so.*'
jni=$(find "$build" -name 'libpipit_jni.so' | head -1)
check_elf "$jni" 'libpipit.so.*' 'libc.so.*'
# runtime dispatch: the dotprod (sdot/udot) and i8mm (smmla/usmmla) kernels are in the one library
# (the mnemonics counted from a file: `objdump | grep -q` fails under pipefail when grep stops reading early)
dis=$(mktemp); trap 'rm -f "$dis"' EXIT
"${OBJDUMP:-aarch64-linux-gnu-objdump}" -d "$lib" | awk '{print $3}' | sort | uniq -c > "$dis"
if grep -qE ' (sdot|udot)$' "$dis" && grep -qE ' (smmla|usmmla|ummla)$' "$dis"; then
  echo "[elf] ok   dotprod and i8mm kernels are in $(basename "$lib") (chosen at run time)"
else
  echo "[elf] FAIL no dotprod / i8mm instructions in $(basename "$lib")"; fail=1
fi
exit $fail
