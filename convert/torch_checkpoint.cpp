// torch.save zip archives: locate data.pkl, unpickle it safely, and turn each tensor reference into a Tensor over
// its storage entry (checked to hold every element the tensor's offset, shape and strides reach).
#include "convert/torch_checkpoint.h"

#include <cstring>

#include "convert/pickle.h"
#include "convert/zip_reader.h"
#include "core/storage.h"

namespace pipit {

namespace {

// Copies a strided tensor into a contiguous heap buffer, element by element (rare: transposed saves).
Tensor gather_strided(const uint8_t* base, DType dt, int eb, const std::vector<int64_t>& shape,
                      const std::vector<int64_t>& stride) {
  Tensor t = Tensor::empty(dt, shape);
  const int nd = int(shape.size());
  std::vector<int64_t> idx(size_t(nd), 0);
  uint8_t* out = t.data();
  const int64_t n = t.numel();
  for (int64_t k = 0; k < n; ++k) {
    int64_t off = 0;
    for (int d = 0; d < nd; ++d) off += idx[size_t(d)] * stride[size_t(d)];
    std::memcpy(out + k * eb, base + off * eb, size_t(eb));
    for (int d = nd - 1; d >= 0; --d) {  // next index, row-major
      if (++idx[size_t(d)] < shape[size_t(d)]) break;
      idx[size_t(d)] = 0;
    }
  }
  return t;
}

}  // namespace

Result<std::map<std::string, Tensor>> parse_torch_checkpoint(const uint8_t* data, size_t size,
                                                             std::shared_ptr<Storage> owner, const std::string& name,
                                                             std::vector<std::string>* notes) {
  const std::string ctx = "[torch] " + name;
  if (size >= 2 && data[0] == 0x80 && data[1] <= 5)
    return Error::unsupported("{}: a legacy (pre-1.6, non-zip) torch.save file; load and re-save it with "
                              "torch >= 1.6, or save as safetensors",
                              ctx);
  PIPIT_ASSIGN_OR_RETURN(ZipArchive zip, ZipArchive::parse(data, size, name));
  // the archive's entries share one top folder named after the file: "<prefix>/data.pkl"
  const ZipEntry* pkl = nullptr;
  for (auto& e : zip.entries()) {
    const std::string& n = e.name;
    if (n == "data.pkl" || (n.size() > 9 && n.compare(n.size() - 9, 9, "/data.pkl") == 0 &&
                            n.find('/') == n.size() - 9)) {
      if (pkl) return Error::format("{}: more than one data.pkl in the archive", ctx);
      pkl = &e;
    }
  }
  if (!pkl) return Error::format("{}: no data.pkl in the archive (not a torch.save checkpoint?)", ctx);
  const std::string prefix = pkl->name.substr(0, pkl->name.size() - 8);
  if (const ZipEntry* bo = zip.find(prefix + "byteorder")) {
    PIPIT_ASSIGN_OR_RETURN(auto b, zip.data(*bo));
    if (std::string(reinterpret_cast<const char*>(b.first), size_t(b.second)) != "little")
      return Error::unsupported("{}: big-endian checkpoint (byteorder entry is not 'little')", ctx);
  }
  PIPIT_ASSIGN_OR_RETURN(auto pk, zip.data(*pkl));
  PIPIT_ASSIGN_OR_RETURN(PickleObjects objs, unpickle(pk.first, size_t(pk.second), name + ":" + pkl->name));
  PIPIT_ASSIGN_OR_RETURN(auto refs, torch_state_dict(objs, name));

  std::map<std::string, Tensor> out;
  for (auto& r : refs) {
    const std::string tctx = ctx + ": tensor '" + r.name + "'";
    DType dt;
    int eb;
    bool supported;
    if (!torch_storage_dtype(r.storage_type, &dt, &eb, &supported))
      return Error::format("{}: unknown storage type {}", tctx, r.storage_type);
    if (!supported) {
      if (notes) notes->push_back(fmt("skipped '{}' ({}: not a weight type pipit uses)", r.name, r.storage_type));
      continue;
    }
    if (out.count(r.name)) return Error::format("{}: appears twice", tctx);
    const ZipEntry* se = zip.find(prefix + "data/" + r.storage_key);
    if (!se) return Error::format("{}: storage '{}' has no data/{} entry in the archive", tctx, r.storage_key, r.storage_key);
    PIPIT_ASSIGN_OR_RETURN(auto sd, zip.data(*se));
    if (uint64_t(r.storage_numel) > sd.second / uint64_t(eb))
      return Error::format("{}: storage of {} elements needs {} bytes but data/{} has {}", tctx, r.storage_numel,
                           uint64_t(r.storage_numel) * uint64_t(eb), r.storage_key, sd.second);
    if (r.shape.size() > size_t(kMaxDims))
      return Error::unsupported("{}: {} dimensions (at most {})", tctx, r.shape.size(), kMaxDims);
    // the furthest element reached: offset + sum((size - 1) * stride), checked against the storage size
    uint64_t numel = 1, last = uint64_t(r.offset);
    bool empty = false;
    for (size_t d = 0; d < r.shape.size(); ++d) {
      const uint64_t s = uint64_t(r.shape[d]), st = uint64_t(r.stride[d]);
      if (s == 0) empty = true;
      if (s > (uint64_t(1) << 40) || (s && numel > (uint64_t(1) << 40) / s) || st > (uint64_t(1) << 40))
        return Error::format("{}: shape or stride too large", tctx);
      numel *= s;
      if (s) last += (s - 1) * st;
    }
    if (!empty && last >= uint64_t(r.storage_numel))
      return Error::format("{}: offset {} with shape {} and strides {} reaches element {} of a storage of {}", tctx,
                           r.offset, shape_to_string(r.shape), shape_to_string(r.stride), last, r.storage_numel);
    std::vector<int64_t> shape = r.shape.empty() ? std::vector<int64_t>{1} : r.shape;
    // contiguous (row-major, ignoring dims of size 1) -> a view; otherwise a copy
    bool contiguous = true;
    int64_t expect = 1;
    for (size_t d = r.shape.size(); d-- > 0;) {
      if (r.shape[d] != 1 && r.stride[d] != expect) contiguous = false;
      expect *= r.shape[d];
    }
    const uint8_t* base = sd.first + uint64_t(r.offset) * uint64_t(eb);
    if (empty || (contiguous && reinterpret_cast<uintptr_t>(base) % uintptr_t(eb) == 0)) {
      out[r.name] = Tensor::from_data(dt, shape, const_cast<uint8_t*>(empty ? sd.first : base), owner);
    } else {
      out[r.name] = gather_strided(base, dt, eb, shape, r.stride);
      if (notes) notes->push_back(fmt("copied strided or unaligned tensor '{}' to a contiguous buffer", r.name));
    }
  }
  return out;
}

Result<std::map<std::string, Tensor>> read_torch_checkpoint(const std::string& path, std::vector<std::string>* notes) {
  PIPIT_ASSIGN_OR_RETURN(auto map, MmapStorage::open(path));
  const uint8_t* data = map->data();
  const size_t size = map->size();
  return parse_torch_checkpoint(data, size, std::move(map), path, notes);
}

}  // namespace pipit
