// A safe reader for the pickle subset torch.save uses for state dicts. It is a small stack machine over plain data
// (ints, floats, strings, tuples, lists, dicts) that never imports or calls anything: the only "globals" it accepts
// are a fixed list of names it gives its own meaning to — collections.OrderedDict (an empty dict),
// torch._utils._rebuild_tensor_v2 / _rebuild_tensor / _rebuild_parameter (a tensor reference) and the storage types
// torch.FloatStorage, torch.HalfStorage, ... (a dtype tag for BINPERSID storage ids). Any other global, and any
// opcode outside the subset (INST, OBJ, NEWOBJ, EXT*, PERSID, ...), is an error that names it.
//
// What torch.save writes in data.pkl (protocol 2): an OrderedDict built with REDUCE, filled by SETITEMS with
// name -> _rebuild_tensor_v2(storage, storage_offset, size, stride, requires_grad, backward_hooks); each storage is
// BINPERSID of ('storage', torch.FloatStorage, '<key>', 'cpu', numel) and its bytes are the zip entry data/<key>.
// Reference: Python's Lib/pickletools.py (opcode table), torch/serialization.py, torch/_utils.py.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "core/dtype.h"
#include "core/status.h"

namespace pipit {

// Objects live in one vector and refer to each other by index, so no ownership cycles or deep recursive
// destruction can come from a hostile file.
struct PyObj {
  enum class Kind { kNone, kBool, kInt, kFloat, kStr, kBytes, kTuple, kList, kDict, kGlobal, kStorage, kTensor };
  Kind kind = Kind::kNone;
  int64_t i = 0;
  double f = 0;
  std::string s;                          // str, bytes; kGlobal: "module.name"; kStorage: the storage key
  std::vector<int> items;                 // tuple, list
  std::vector<std::pair<int, int>> dict;  // dict (insertion order)
  // kStorage: the storage type ("torch.FloatStorage") in `type` and element count in `i`.
  // kTensor: storage object index in `storage`, element offset, shape and strides (elements).
  std::string type;
  int storage = -1;
  int64_t offset = 0;
  std::vector<int64_t> shape, stride;
};

struct PickleObjects {
  std::vector<PyObj> objs;
  int root = -1;
  const PyObj& at(int i) const { return objs[size_t(i)]; }
};

Result<PickleObjects> unpickle(const uint8_t* data, size_t size, const std::string& name);

// A tensor of a state dict: where its elements are (storage key + element offset) and how they are laid out.
struct TorchTensorRef {
  std::string name;
  std::string storage_key, storage_type;
  int64_t storage_numel = 0;
  int64_t offset = 0;
  std::vector<int64_t> shape, stride;
};

// The name -> tensor entries of the unpickled state dict (or of a nested "state_dict" / "model" dict).
Result<std::vector<TorchTensorRef>> torch_state_dict(const PickleObjects& p, const std::string& name);

// Element type and size of a torch storage type name; false for names pipit does not know.
bool torch_storage_dtype(const std::string& type, DType* dtype, int* elem_bytes, bool* supported);

}  // namespace pipit
