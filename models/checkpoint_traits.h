// A family whose HF checkpoint stores tensors in a layout its model does not take (GPT-OSS's fused, MXFP4-packed
// experts) registers, beside the model, a function that takes the tensors to its model's layout. convert/'s
// open_checkpoint runs it for the checkpoint's model_type after reading an HF directory's tensors (safetensors or
// PyTorch), so the loader and the converter both see the model's layout and convert/ names no family. A .pipit
// file holds the converted tensors already and a GGUF's import maps them itself (models/gguf_traits.h).
#pragma once

#include "core/status.h"
#include "format/checkpoint.h"

namespace pipit {

using CheckpointLayoutFn = Status (*)(Checkpoint& c);

void register_checkpoint_layout(const char* model_type, CheckpointLayoutFn fn);
// Runs the function registered for c.config's model_type; nothing for a family without one (or a model_type that
// is not a string, which the model registry reports).
Status apply_checkpoint_layout(Checkpoint& c);

struct CheckpointLayoutRegistrar {
  CheckpointLayoutRegistrar(const char* model_type, CheckpointLayoutFn fn) {
    register_checkpoint_layout(model_type, fn);
  }
};

}  // namespace pipit
