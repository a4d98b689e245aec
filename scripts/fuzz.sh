#!/usr/bin/env bash
# Builds the file-parser fuzz targets (tests/fuzz/fuzz_*.cpp) with clang-14 libFuzzer + ASan + UBSan and runs each
# for a fixed budget from small valid seeds (tests/fuzz/make_seeds.py). Any crash, sanitizer report or leak fails.
# usage: scripts/fuzz.sh [SECONDS_PER_TARGET=60] [OUT_DIR=build-fuzz] [TARGETS...]
#   e.g. scripts/fuzz.sh 60            all six targets, 60 s each
#        scripts/fuzz.sh 300 build-fuzz gguf pickle
# Needs clang-14 and libclang-rt-14-dev (scripts/setup.sh installs both); python3 (+ python3-torch for pickle seeds);
# libjpeg-turbo and stb for the image target; FFmpeg's libraries (+ python3-av for seeds) for the video target.
set -euo pipefail
BUDGET=${1:-60}
OUT=${2:-build-fuzz}
shift $(( $# > 2 ? 2 : $# ))
TARGETS=${*:-pipit safetensors gguf pickle image video}
ROOT=$(cd "$(dirname "$0")/.." && pwd)
mkdir -p "$OUT"
OUT=$(cd "$OUT" && pwd)

CXX=${CXX:-clang++-14}
FLAGS=(-std=c++20 -O1 -g -fno-omit-frame-pointer -fsanitize=fuzzer,address,undefined -fno-sanitize-recover=undefined
       -I"$ROOT" -I"$ROOT/include" -I/usr/include/stb -DPIPIT_VERSION=\"fuzz\" -DPIPIT_WITH_LIBJPEG=1
       -DPIPIT_WITH_TOKENIZER=1)
# the parsers and what they use; nothing else of the library is linked
LIB=(core/dtype.cpp core/storage.cpp core/tensor.cpp core/output_file.cpp core/limits.cpp format/safetensors.cpp format/pipit_format.cpp format/gguf.cpp
     format/tokenizer_parts.cpp convert/checkpoint.cpp models/checkpoint_traits.cpp convert/gguf_mmproj.cpp
     convert/pickle.cpp convert/zip_reader.cpp convert/torch_checkpoint.cpp convert/gguf_import.cpp
     convert/gguf_tokenizer.cpp
     models/vision/image.cpp models/vision/jpeg_decode.cpp models/vision/resample.cpp models/vision/image_processor.cpp
     models/vision/qwen2_vl_image_processor.cpp models/vision/clip_image_processor.cpp
     models/vision/deepseek_ocr_image_processor.cpp models/vision/gemma4_image_processor.cpp
     modules/video_ffmpeg.cpp)
# GGUF import's family records (models/gguf_traits.h): every arch and projector is a file of its own beside its model
LIB+=(format/gguf_meta.cpp models/gguf_traits.cpp $(cd "$ROOT" && echo models/*_gguf.cpp))
# what they call: file probes, and the reference kernels' dtype conversions (GGUF import widens small tensors through
# ref_kernels(); dispatch.cpp built without PIPIT_HAVE_*_KERNELS links the reference table alone)
LIB+=(core/file_probe.cpp core/cpu.cpp core/panels.cpp backends/cpu/dispatch.cpp $(cd "$ROOT" && echo backends/cpu/ref/*.cpp))
# the tokenizer, which a GGUF's vocabulary is built into at load (Tokenizer::load_parts)
LIB+=($(cd "$ROOT" && echo tokenizer/*.cpp))

echo "[fuzz] building with $CXX into $OUT"
objs=()
for s in "${LIB[@]}"; do
  o="$OUT/obj/${s//\//_}.o"
  mkdir -p "$OUT/obj"
  if [ ! -f "$o" ] || [ "$ROOT/$s" -nt "$o" ]; then
    "$CXX" "${FLAGS[@]/-fsanitize=fuzzer,/-fsanitize=fuzzer-no-link,}" -c "$ROOT/$s" -o "$o"
  fi
  objs+=("$o")
done

/usr/bin/python3 "$ROOT/tests/fuzz/make_seeds.py" "$OUT/seeds" >/dev/null

status=0
for t in $TARGETS; do
  "$CXX" "${FLAGS[@]}" "$ROOT/tests/fuzz/fuzz_$t.cpp" "${objs[@]}" -lpcre2-8 -lutf8proc -ljpeg -lavformat -lavcodec -lswscale -lavutil -o "$OUT/fuzz_$t"
  corpus="$OUT/corpus_$t"
  mkdir -p "$corpus"
  echo "[fuzz] fuzz_$t: ${BUDGET}s"
  if ! (cd "$OUT" && "./fuzz_$t" "$corpus" "$OUT/seeds/$t" -max_total_time="$BUDGET" -max_len=65536 \
          -rss_limit_mb=4096 -timeout=20 -print_final_stats=1 > "$OUT/fuzz_$t.log" 2>&1); then
    echo "[fuzz] fuzz_$t FAILED: see $OUT/fuzz_$t.log"
    tail -30 "$OUT/fuzz_$t.log"
    status=1
  else
    grep -E "stat::number_of_executed_units|stat::peak_rss_mb" "$OUT/fuzz_$t.log" | tr '\n' ' '
    echo " corpus $(ls "$corpus" | wc -l) files"
  fi
done
exit $status
