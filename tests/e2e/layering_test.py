#!/usr/bin/env python3
"""The layering rules of docs/contributing.md, checked on the source tree (issue 31's acceptance greps):

  - models/ calls ops only: no CPU kernel table (`ctx.k->`, `kernels()`, `ref_kernels()`), no
    `#include "backends/cpu/..."` and no Op::kHostLoops declared, except in the files listed in PENDING (empty);
  - backends/ops.h and backends/device.h include nothing from a backend folder (no include cycle), and CPU code
    never asks which device it runs on (`ctx.dev`);
  - no model type registered in models/ is named in backends/ (placement is by capability: Model::ops_used);
  - GGUF import (convert/gguf_import.cpp, gguf_mmproj.cpp) names no llama.cpp arch, projector or model type, and
    convert/gguf_tokenizer.cpp no family's vocabulary type or pre-tokenizer: each is a record beside the model
    (models/gguf_traits.h);
  - the quantization recipe (convert/recipe.cpp, recipe.h) names no model type or GGUF arch, and none of the tensor
    names or labels of a family's recipe rules: those are records beside the model (models/recipe_rules.h).
  - runtime/, cli/, server/ and capi/ name no model type or media processor, and read no family's media detail
    (placeholder framing tokens, video processor sizes): video and audio processors are records in models/.

usage: layering_test.py SOURCE_DIR
"""
import pathlib
import re
import sys

# Model files whose host steps are not ops yet (issue 31 item 2): none since every model was converted. A file may
# join only with a reason in its commit; it must leave as soon as it is clean.
PENDING = set()

KERNEL_CALL = re.compile(r"ctx\.k->|\bref_kernels\(\)|(?<![\w.>])kernels\(\)|#include \"backends/cpu/")


def sources(root, folder):
    for p in sorted((root / folder).rglob("*")):
        if p.suffix in (".cpp", ".h"):
            yield p


def main():
    root = pathlib.Path(sys.argv[1])
    errors = []

    for p in sources(root, "models"):
        rel = p.relative_to(root).as_posix()
        hits = [f"{rel}:{i}: {line.strip()}" for i, line in enumerate(p.read_text().splitlines(), 1)
                if KERNEL_CALL.search(line)]
        if hits and rel not in PENDING:
            errors.append("a model calls the CPU backend directly (use an op of backends/ops.h):\n  " +
                          "\n  ".join(hits))
        if not hits and rel in PENDING:
            errors.append(f"{rel} is clean now: remove it from PENDING in {pathlib.Path(__file__).name}")
    for rel in sorted(PENDING):
        if not (root / rel).exists():
            errors.append(f"{rel} is in PENDING but does not exist")

    for rel in ("backends/ops.h", "backends/device.h"):
        for i, line in enumerate((root / rel).read_text().splitlines(), 1):
            if re.match(r'#include "backends/(cpu|opencl)/', line):
                errors.append(f"{rel}:{i}: includes a backend's header ({line.strip()}): the seam must not")

    for p in sources(root, "models"):
        for i, line in enumerate(p.read_text().splitlines(), 1):
            code = line.split("//", 1)[0]
            if "Op::kHostLoops" in code and p.relative_to(root).as_posix() not in PENDING:
                errors.append(f"{p.relative_to(root)}:{i}: declares host loops; make the step an op")

    for p in sources(root, "backends/cpu"):
        for i, line in enumerate(p.read_text().splitlines(), 1):
            if "ctx.dev" in line:
                errors.append(f"{p.relative_to(root)}:{i}: CPU code asks which device it runs on: {line.strip()}")

    names = set()
    for p in sources(root, "models"):
        names.update(re.findall(r'PIPIT_REGISTER_MODEL\("([a-z0-9_]+)"', p.read_text()))
    if len(names) < 10:
        errors.append(f"found only {len(names)} registered model types: is PIPIT_REGISTER_MODEL still used?")
    for p in sources(root, "backends"):
        text = p.read_text()
        for n in sorted(names):
            if f'"{n}"' in text:
                errors.append(f"{p.relative_to(root)} names the model type '{n}': devices decide by ops")

    # GGUF import reads each family's llama.cpp arch / mmproj projector from its record beside the model
    # (models/gguf_traits.h): the import itself names none of them, nor a model type
    gguf = set()
    for p in sources(root, "models"):
        text = p.read_text()
        gguf.update(re.findall(r'\.gguf = "([^"]+)"', text))
        gguf.update(re.findall(r'GgufProjectorRegistrar \w+\("([^"]+)"', text))
    if len(gguf) < 10:
        errors.append(f"found only {len(gguf)} GGUF archs / projectors registered in models/: is GgufArchRegistrar "
                      "still used?")
    for rel in ("convert/gguf_import.cpp", "convert/gguf_mmproj.cpp"):
        text = (root / rel).read_text()
        for n in sorted(gguf | names):
            if f'"{n}"' in text:
                errors.append(f"{rel} names '{n}': a family's GGUF knowledge is its record in models/")

    # likewise the GGUF vocabulary translation for a family's own vocabulary types and pre-tokenizers ("gpt2" and
    # "llama", llama.cpp's generic byte-level and SentencePiece types, stay there)
    vocab = set()
    for p in sources(root, "models"):
        text = p.read_text()
        vocab.update(re.findall(r'GgufVocabRegistrar \w+\(\{\.model = "([^"]+)"', text))
        for listed in re.findall(r'\.names = \{([^}]*)\}', text):
            vocab.update(re.findall(r'"([^"]+)"', listed))
    if len(vocab) < 4:
        errors.append(f"found only {len(vocab)} GGUF vocabulary / pre-tokenizer names registered in models/")
    text = (root / "convert/gguf_tokenizer.cpp").read_text()
    for n in sorted(vocab):
        if f'"{n}"' in text:
            errors.append(f"convert/gguf_tokenizer.cpp names '{n}': a family's vocabulary is its record in models/")

    # the quantization recipe reads a family's rules from its records beside the model (FamilyRecipeRegistrar): no
    # string in the recipe names a model type, an arch, or holds a tensor name or label one of those records declares
    # (the rules' literals in models/: registrations, and shared sets such as recipe_rules.h's moe_recipe_rules with
    # the names its callers pass)
    rule_names, rule_labels = set(), set()
    for p in sources(root, "models"):
        text = p.read_text()
        rule_labels.update(re.findall(r'\.label = "([^"]+)"', text))
        for listed in re.findall(r'\.(?:prefix|suffix|contains|only_with) = \{([^}]*)\}', text):
            rule_names.update(re.findall(r'"([^"]+)"', listed))
        for args in re.findall(r'moe_recipe_rules\(("[^)]*)\)', text):
            rule_names.update(re.findall(r'"([^"]+)"', args))
    if len(rule_labels) < 4 or len(rule_names) < 8:
        errors.append(f"found only {len(rule_labels)} recipe rule labels and {len(rule_names)} tensor names "
                      "registered in models/: is FamilyRecipeRegistrar still used?")
    for rel in ("convert/recipe.cpp", "convert/recipe.h"):
        text = (root / rel).read_text()
        for n in sorted(names | gguf):
            if f'"{n}"' in text:
                errors.append(f"{rel} names '{n}': a family's recipe rules are its records in models/")
        for i, line in enumerate(text.splitlines(), 1):
            for literal in re.findall(r'"((?:[^"\\]|\\.)*)"', line):
                for n in sorted(rule_names | rule_labels):
                    if n in literal:
                        errors.append(f"{rel}:{i}: \"{literal}\" holds '{n}', which a family's recipe rule declares "
                                      "(models/recipe_rules.h): the rule belongs beside the model")
    # Video and audio processors are records beside their models, registered by name (a VideoProcessorKind,
    # models/vision/video_processor.h; an audio record per model_type, models/audio/audio_model.h): the runtime and
    # the front ends reach them by name or capability. Their code (comments aside) names no registered model type or
    # media processor, and reads none of the fields only a family's record interprets: placeholder framing tokens, a
    # video processor's sizes, a family's helpers. runtime/multimodal.cpp still lays out image placeholders from
    # VisionTokens (the image tokens' framing: issue 31 item 3 moved video and audio), so it may read those alone.
    media = set()
    for p in sources(root, "models"):
        text = p.read_text()
        media.update(re.findall(r'PIPIT_REGISTER_(?:IMAGE|VIDEO)_PROCESSOR\("([a-z0-9_]+)"', text))
        media.update(re.findall(r'AudioEncoderRegistrar \w+\("([a-z0-9_]+)"', text))
    if not any(re.search(r'PIPIT_REGISTER_VIDEO_PROCESSOR\("', p.read_text()) for p in sources(root, "models")) or \
            not any("AudioEncoderRegistrar " in p.read_text() for p in sources(root, "models")):
        errors.append("found no video processor or audio record registered in models/: are "
                      "PIPIT_REGISTER_VIDEO_PROCESSOR and AudioEncoderRegistrar still used?")
    family_fields = {"vision_start_id", "vision_end_id", "image_begin_id", "image_end_id", "boa_id", "eoa_id",
                     "video_timestamp_text", "patch_size", "merge_size", "temporal_patch_size"}
    image_layout = {"runtime/multimodal.cpp": {"vision_start_id", "vision_end_id", "image_begin_id", "image_end_id"}}
    for folder in ("runtime", "cli", "server", "capi"):
        for p in sources(root, folder):
            rel = p.relative_to(root).as_posix()
            for i, line in enumerate(p.read_text().splitlines(), 1):
                code = line.split("//", 1)[0]
                for n in sorted(media | names):
                    if f'"{n}"' in code:
                        errors.append(f"{rel}:{i} names '{n}': reach a model's media processor by name from its "
                                      "record")
                for f in sorted(family_fields - image_layout.get(rel, set())):
                    if re.search(rf"\b{f}\b", code):
                        errors.append(f"{rel}:{i} reads '{f}', a family's media detail: it belongs in the "
                                      f"family's processor record in models/ ({line.strip()})")

    for e in errors:
        print("FAIL:", e)
    print(f"layering: {len(names)} model types, {len(PENDING)} model files pending, {len(errors)} problems")
    return 1 if errors else 0


if __name__ == "__main__":
    sys.exit(main())
