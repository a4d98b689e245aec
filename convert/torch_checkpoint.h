// PyTorch checkpoints (pytorch_model.bin, *.pt, *.pth) as written by torch.save >= 1.6: a zip archive holding
// <prefix>/data.pkl (the pickled state dict, read by convert/pickle.h without running any code) and
// <prefix>/data/<key> (the raw little-endian bytes of each storage). Contiguous tensors become views of the mapped
// file; strided ones are copied into a contiguous buffer.
#pragma once

#include <map>
#include <memory>
#include <string>
#include <vector>

#include "core/status.h"
#include "core/tensor.h"

namespace pipit {

// Reads the tensors of a torch.save archive already in memory (`owner` keeps the bytes alive). Tensors of types pipit
// has no use for (int64, float64, bool) are skipped with a note.
Result<std::map<std::string, Tensor>> parse_torch_checkpoint(const uint8_t* data, size_t size,
                                                             std::shared_ptr<Storage> owner, const std::string& name,
                                                             std::vector<std::string>* notes);
Result<std::map<std::string, Tensor>> read_torch_checkpoint(const std::string& path, std::vector<std::string>* notes);

}  // namespace pipit
