// The safe unpickler: an opcode loop over a value stack, a mark stack and a memo, with every read bounds-checked and
// every pop checked for underflow. See pickle.h for the accepted subset.
#include "convert/pickle.h"

#include <cstring>
#include <unordered_map>

namespace pipit {

namespace {

using Kind = PyObj::Kind;

constexpr size_t kMaxObjects = size_t(1) << 26;  // far above any state dict; bounds memory on hostile input

struct StorageType {
  const char* name;
  DType dtype;
  int elem_bytes;
  bool supported;
};
const StorageType kStorageTypes[] = {
    {"torch.FloatStorage", DType::F32, 4, true},     {"torch.HalfStorage", DType::F16, 2, true},
    {"torch.BFloat16Storage", DType::BF16, 2, true}, {"torch.IntStorage", DType::I32, 4, true},
    {"torch.CharStorage", DType::I8, 1, true},       {"torch.DoubleStorage", DType::F32, 8, false},
    {"torch.LongStorage", DType::I32, 8, false},     {"torch.ShortStorage", DType::I32, 2, false},
    {"torch.ByteStorage", DType::I8, 1, false},      {"torch.BoolStorage", DType::I8, 1, false},
};

const char* const kCallables[] = {"collections.OrderedDict", "torch._utils._rebuild_tensor_v2",
                                  "torch._utils._rebuild_tensor", "torch._utils._rebuild_parameter"};

bool allowed_global(const std::string& g) {
  for (const char* c : kCallables)
    if (g == c) return true;
  for (auto& t : kStorageTypes)
    if (g == t.name) return true;
  return false;
}

const char* opcode_name(uint8_t op) {
  switch (op) {
    case 'i': return "INST";
    case 'o': return "OBJ";
    case 0x81: return "NEWOBJ";
    case 0x92: return "NEWOBJ_EX";
    case 'P': return "PERSID";
    case 'p': return "PUT";
    case 'g': return "GET";
    case 'S': return "STRING";
    case 'V': return "UNICODE";
    case 'I': return "INT";
    case 'L': return "LONG";
    case 'F': return "FLOAT";
    case 0x82: case 0x83: case 0x84: return "EXT";
    case 0x90: return "ADDITEMS";
    case 0x8f: return "EMPTY_SET";
    case 0x91: return "FROZENSET";
    case 0x96: return "BYTEARRAY8";
    case 0x97: return "NEXT_BUFFER";
    case 0x98: return "READONLY_BUFFER";
    default: return "unknown";
  }
}

class Unpickler {
 public:
  Unpickler(const uint8_t* d, size_t n, const std::string& name) : d_(d), n_(n), ctx_("[pickle] " + name) {}

  Result<PickleObjects> run() {
    while (true) {
      const size_t at = pos_;
      uint8_t op;
      PIPIT_TRY(read_bytes(&op, 1));
      if (out_.objs.size() > kMaxObjects) return Error::format("{}: more than {} objects", ctx_, kMaxObjects);
      switch (op) {
        case 0x80: { uint8_t v; PIPIT_TRY(read_bytes(&v, 1)); if (v > 5) return bad(at, "protocol > 5"); break; }
        case 0x95: { uint64_t v; PIPIT_TRY(read_le(&v, 8)); break; }  // FRAME: a size hint, nothing to do
        case '.': {                                                    // STOP
          if (stack_.size() != 1 || !marks_.empty()) return bad(at, "STOP with a stack that is not one value");
          out_.root = stack_.back();
          return std::move(out_);
        }
        case '(': marks_.push_back(stack_.size()); break;
        case '0': { int x; PIPIT_TRY(pop(&x, at)); break; }
        case '1': { std::vector<int> v; PIPIT_TRY(pop_mark(&v, at)); break; }
        case '2': { if (stack_.empty()) return bad(at, "DUP on an empty stack"); stack_.push_back(stack_.back()); break; }
        case 'N': push(make(Kind::kNone)); break;
        case 0x88: case 0x89: { int o = make(Kind::kBool); obj(o).i = op == 0x88; push(o); break; }
        case 'J': { int32_t v; PIPIT_TRY(read_le(&v, 4)); push_int(v); break; }
        case 'K': { uint8_t v; PIPIT_TRY(read_le(&v, 1)); push_int(v); break; }
        case 'M': { uint16_t v; PIPIT_TRY(read_le(&v, 2)); push_int(v); break; }
        case 0x8a: case 0x8b: {  // LONG1 / LONG4: little-endian two's complement of n bytes
          uint64_t n = 0;
          if (op == 0x8a) { uint8_t b; PIPIT_TRY(read_le(&b, 1)); n = b; } else { uint32_t b; PIPIT_TRY(read_le(&b, 4)); n = b; }
          if (n > 8) return bad(at, "integer wider than 64 bits");
          uint8_t buf[8] = {};
          PIPIT_TRY(read_bytes(buf, size_t(n)));
          uint64_t u = 0;
          for (size_t k = 0; k < n; ++k) u |= uint64_t(buf[k]) << (8 * k);
          if (n > 0 && n < 8 && (buf[n - 1] & 0x80)) u |= ~uint64_t(0) << (8 * n);  // sign-extend
          push_int(int64_t(u));
          break;
        }
        case 'G': {  // BINFLOAT: big-endian double
          uint8_t b[8];
          PIPIT_TRY(read_bytes(b, 8));
          uint64_t u = 0;
          for (int k = 0; k < 8; ++k) u = (u << 8) | b[k];
          int o = make(Kind::kFloat);
          std::memcpy(&obj(o).f, &u, 8);
          push(o);
          break;
        }
        case 'X': case 0x8c: case 0x8d: case 'T': case 'U': case 'B': case 'C': case 0x8e: {
          uint64_t len = 0;
          if (op == 0x8c || op == 'U' || op == 'C') { uint8_t v; PIPIT_TRY(read_le(&v, 1)); len = v; }
          else if (op == 0x8d || op == 0x8e) { PIPIT_TRY(read_le(&len, 8)); }
          else if (op == 'T') { int32_t v; PIPIT_TRY(read_le(&v, 4)); if (v < 0) return bad(at, "negative length"); len = uint64_t(v); }
          else { uint32_t v; PIPIT_TRY(read_le(&v, 4)); len = v; }
          if (len > n_ - pos_) return bad(at, "string runs past the end of the data (truncated?)");
          const bool is_bytes = op == 'B' || op == 'C' || op == 0x8e;
          int o = make(is_bytes ? Kind::kBytes : Kind::kStr);
          obj(o).s.assign(reinterpret_cast<const char*>(d_ + pos_), size_t(len));
          pos_ += size_t(len);
          push(o);
          break;
        }
        case ')': push(make(Kind::kTuple)); break;
        case ']': push(make(Kind::kList)); break;
        case '}': push(make(Kind::kDict)); break;
        case 't': case 'l': {
          std::vector<int> v;
          PIPIT_TRY(pop_mark(&v, at));
          int o = make(op == 't' ? Kind::kTuple : Kind::kList);
          obj(o).items = std::move(v);
          push(o);
          break;
        }
        case 0x85: case 0x86: case 0x87: {
          const size_t n = size_t(op - 0x84);
          if (stack_.size() < n || (!marks_.empty() && stack_.size() - n < marks_.back()))
            return bad(at, "TUPLEn with too few values on the stack");
          int o = make(Kind::kTuple);
          obj(o).items.assign(stack_.end() - long(n), stack_.end());
          stack_.resize(stack_.size() - n);
          push(o);
          break;
        }
        case 'a': {
          int v, l;
          PIPIT_TRY(pop(&v, at));
          PIPIT_TRY(top(&l, at));
          if (obj(l).kind != Kind::kList) return bad(at, "APPEND to a non-list");
          obj(l).items.push_back(v);
          break;
        }
        case 'e': {
          std::vector<int> v;
          PIPIT_TRY(pop_mark(&v, at));
          int l;
          PIPIT_TRY(top(&l, at));
          if (obj(l).kind != Kind::kList) return bad(at, "APPENDS to a non-list");
          obj(l).items.insert(obj(l).items.end(), v.begin(), v.end());
          break;
        }
        case 'd': case 's': case 'u': {
          std::vector<int> v;
          if (op == 's') {
            int k, x;
            PIPIT_TRY(pop(&x, at));
            PIPIT_TRY(pop(&k, at));
            v = {k, x};
          } else {
            PIPIT_TRY(pop_mark(&v, at));
          }
          if (v.size() % 2) return bad(at, "odd number of keys and values");
          int dct;
          if (op == 'd') {
            dct = make(Kind::kDict);
            push(dct);
          } else {
            PIPIT_TRY(top(&dct, at));
            if (obj(dct).kind != Kind::kDict) return bad(at, "SETITEM(S) on a non-dict");
          }
          for (size_t k = 0; k < v.size(); k += 2) obj(dct).dict.emplace_back(v[k], v[k + 1]);
          break;
        }
        case 'q': case 'r': case 0x94: {  // BINPUT / LONG_BINPUT / MEMOIZE
          uint32_t idx = 0;
          if (op == 'q') { uint8_t v; PIPIT_TRY(read_le(&v, 1)); idx = v; }
          else if (op == 'r') { PIPIT_TRY(read_le(&idx, 4)); }
          else idx = uint32_t(memo_.size());
          int t;
          PIPIT_TRY(top(&t, at));
          memo_[idx] = t;
          break;
        }
        case 'h': case 'j': {  // BINGET / LONG_BINGET
          uint32_t idx = 0;
          if (op == 'h') { uint8_t v; PIPIT_TRY(read_le(&v, 1)); idx = v; } else { PIPIT_TRY(read_le(&idx, 4)); }
          auto it = memo_.find(idx);
          if (it == memo_.end()) return bad(at, fmt("memo index {} was never stored", idx));
          push(it->second);
          break;
        }
        case 'c': case 0x93: {  // GLOBAL "module\nname\n" / STACK_GLOBAL (module, name on the stack)
          std::string module, name;
          if (op == 'c') {
            PIPIT_TRY(read_line(&module, at));
            PIPIT_TRY(read_line(&name, at));
          } else {
            int n, m;
            PIPIT_TRY(pop(&n, at));
            PIPIT_TRY(pop(&m, at));
            if (obj(n).kind != Kind::kStr || obj(m).kind != Kind::kStr) return bad(at, "STACK_GLOBAL of non-strings");
            module = obj(m).s;
            name = obj(n).s;
          }
          const std::string g = module + "." + name;
          if (!allowed_global(g))
            return Error::unsupported("{}: global '{}' at byte {} is not allowed: only torch tensor rebuild "
                                      "functions, torch storage types and collections.OrderedDict are accepted (pipit "
                                      "never runs code from a checkpoint)",
                                      ctx_, g, at);
          int o = make(Kind::kGlobal);
          obj(o).s = g;
          push(o);
          break;
        }
        case 'Q': {  // BINPERSID: ('storage', storage_type, key, location, numel)
          int pid;
          PIPIT_TRY(pop(&pid, at));
          PIPIT_TRY(persistent_load(pid, at));
          break;
        }
        case 'R': {
          int args, fn;
          PIPIT_TRY(pop(&args, at));
          PIPIT_TRY(pop(&fn, at));
          PIPIT_TRY(reduce(fn, args, at));
          break;
        }
        case 'b': {  // BUILD: set state; accepted (and ignored) on dicts and tensors, e.g. a state dict's _metadata
          int state, target;
          PIPIT_TRY(pop(&state, at));
          PIPIT_TRY(top(&target, at));
          if (obj(target).kind != Kind::kDict && obj(target).kind != Kind::kTensor)
            return bad(at, "BUILD on an object that is not a dict or tensor");
          break;
        }
        default:
          return Error::unsupported("{}: opcode 0x{} ({}) at byte {} is outside the torch state-dict subset", ctx_,
                                    hex(op), opcode_name(op), at);
      }
    }
  }

 private:
  const uint8_t* d_;
  size_t n_, pos_ = 0;
  std::string ctx_;
  PickleObjects out_;
  std::vector<int> stack_;
  std::vector<size_t> marks_;
  std::unordered_map<uint32_t, int> memo_;

  static std::string hex(uint8_t v) {
    const char* h = "0123456789abcdef";
    return {h[v >> 4], h[v & 15]};
  }
  Status bad(size_t at, const std::string& what) const {
    return Error::format("{}: {} at byte {}", ctx_, what, at);
  }
  PyObj& obj(int i) { return out_.objs[size_t(i)]; }
  int make(Kind k) {
    out_.objs.emplace_back();
    out_.objs.back().kind = k;
    return int(out_.objs.size() - 1);
  }
  void push(int o) { stack_.push_back(o); }
  void push_int(int64_t v) {
    int o = make(Kind::kInt);
    obj(o).i = v;
    push(o);
  }
  Status read_bytes(void* p, size_t n) {
    if (n > n_ - pos_) return Error::format("{}: data ends at byte {} (truncated?)", ctx_, n_);
    std::memcpy(p, d_ + pos_, n);
    pos_ += n;
    return Status::ok();
  }
  template <class T>
  Status read_le(T* v, size_t n) {  // little-endian host (pipit only builds for those)
    *v = 0;
    return read_bytes(v, n);
  }
  Status read_line(std::string* s, size_t at) {
    const void* nl = std::memchr(d_ + pos_, '\n', n_ - pos_);
    if (!nl) return bad(at, "GLOBAL without a newline");
    const size_t len = size_t(static_cast<const uint8_t*>(nl) - (d_ + pos_));
    s->assign(reinterpret_cast<const char*>(d_ + pos_), len);
    pos_ += len + 1;
    return Status::ok();
  }
  Status pop(int* v, size_t at) {
    if (stack_.empty() || (!marks_.empty() && stack_.size() <= marks_.back()))
      return bad(at, "pop from an empty stack");
    *v = stack_.back();
    stack_.pop_back();
    return Status::ok();
  }
  Status top(int* v, size_t at) {
    if (stack_.empty() || (!marks_.empty() && stack_.size() <= marks_.back())) return bad(at, "empty stack");
    *v = stack_.back();
    return Status::ok();
  }
  Status pop_mark(std::vector<int>* v, size_t at) {
    if (marks_.empty()) return bad(at, "no MARK to pop to");
    const size_t m = marks_.back();
    marks_.pop_back();
    if (m > stack_.size()) return bad(at, "MARK above the top of the stack");  // cannot happen: pops respect marks
    v->assign(stack_.begin() + long(m), stack_.end());
    stack_.resize(m);
    return Status::ok();
  }
  bool int_at(int tuple, size_t k, int64_t* v) {
    const auto& t = obj(tuple);
    if (k >= t.items.size() || obj(t.items[k]).kind != Kind::kInt) return false;
    *v = obj(t.items[k]).i;
    return true;
  }
  Status int_list(int o, std::vector<int64_t>* v, size_t at) {
    if (obj(o).kind != Kind::kTuple && obj(o).kind != Kind::kList) return bad(at, "tensor size/stride is not a tuple");
    if (obj(o).items.size() > 8) return bad(at, "tensor with more than 8 dimensions");
    v->clear();
    for (size_t k = 0; k < obj(o).items.size(); ++k) {
      int64_t x;
      if (!int_at(o, k, &x) || x < 0) return bad(at, "tensor size/stride entry is not a non-negative int");
      v->push_back(x);
    }
    return Status::ok();
  }

  Status persistent_load(int pid, size_t at) {
    const auto& t = obj(pid);
    if (t.kind != Kind::kTuple || t.items.size() != 5 || obj(t.items[0]).kind != Kind::kStr ||
        obj(t.items[0]).s != "storage")
      return bad(at, "persistent id is not ('storage', type, key, location, numel)");
    int64_t numel = 0;
    if (obj(t.items[1]).kind != Kind::kGlobal || obj(t.items[2]).kind != Kind::kStr || !int_at(pid, 4, &numel) ||
        numel < 0)
      return bad(at, "malformed storage persistent id");
    const std::string type = obj(t.items[1]).s, key = obj(t.items[2]).s;  // copies: make() may move objects
    DType dt;
    int eb;
    bool sup;
    if (!torch_storage_dtype(type, &dt, &eb, &sup)) return bad(at, "persistent id of an unknown storage type " + type);
    int o = make(Kind::kStorage);
    obj(o).type = type;
    obj(o).s = key;
    obj(o).i = numel;
    push(o);
    return Status::ok();
  }

  Status reduce(int fn, int args, size_t at) {
    if (obj(fn).kind != Kind::kGlobal) return bad(at, "REDUCE of something that is not an allowed global");
    if (obj(args).kind != Kind::kTuple) return bad(at, "REDUCE arguments are not a tuple");
    const std::string g = obj(fn).s;
    const std::vector<int> a = obj(args).items;
    if (g == "collections.OrderedDict") {
      if (!a.empty()) return bad(at, "OrderedDict with arguments");
      push(make(Kind::kDict));
      return Status::ok();
    }
    if (g == "torch._utils._rebuild_parameter") {  // (data, requires_grad, backward_hooks) -> data
      if (a.size() < 1 || obj(a[0]).kind != Kind::kTensor) return bad(at, "_rebuild_parameter without a tensor");
      push(a[0]);
      return Status::ok();
    }
    if (g == "torch._utils._rebuild_tensor_v2" || g == "torch._utils._rebuild_tensor") {
      // (storage, storage_offset, size, stride, ...)
      if (a.size() < 4 || obj(a[0]).kind != Kind::kStorage) return bad(at, g + " without (storage, offset, size, stride)");
      int64_t offset;
      if (!int_at(args, 1, &offset) || offset < 0) return bad(at, "tensor storage offset is not a non-negative int");
      int o = make(Kind::kTensor);
      obj(o).storage = a[0];
      obj(o).offset = offset;
      std::vector<int64_t> shape, stride;
      PIPIT_TRY(int_list(a[2], &shape, at));
      PIPIT_TRY(int_list(a[3], &stride, at));
      if (shape.size() != stride.size()) return bad(at, "tensor size and stride differ in length");
      obj(o).shape = std::move(shape);
      obj(o).stride = std::move(stride);
      push(o);
      return Status::ok();
    }
    return Error::unsupported("{}: calling '{}' at byte {} is not allowed", ctx_, g, at);
  }
};

}  // namespace

bool torch_storage_dtype(const std::string& type, DType* dtype, int* elem_bytes, bool* supported) {
  for (auto& t : kStorageTypes)
    if (type == t.name) {
      *dtype = t.dtype;
      *elem_bytes = t.elem_bytes;
      *supported = t.supported;
      return true;
    }
  return false;
}

Result<PickleObjects> unpickle(const uint8_t* data, size_t size, const std::string& name) {
  return Unpickler(data, size, name).run();
}

Result<std::vector<TorchTensorRef>> torch_state_dict(const PickleObjects& p, const std::string& name) {
  const std::string ctx = "[pickle] " + name;
  int dict = p.root;
  if (dict < 0 || p.at(dict).kind != Kind::kDict) return Error::format("{}: the pickle is not a dict of tensors", ctx);
  // checkpoints that wrap the state dict: {"state_dict": {...}} or {"model": {...}}
  bool has_tensor = false;
  for (auto& [k, v] : p.at(dict).dict) has_tensor |= p.at(v).kind == Kind::kTensor;
  if (!has_tensor) {
    for (auto& [k, v] : p.at(dict).dict)
      if (p.at(k).kind == Kind::kStr && (p.at(k).s == "state_dict" || p.at(k).s == "model") &&
          p.at(v).kind == Kind::kDict) {
        dict = v;
        break;
      }
  }
  std::vector<TorchTensorRef> out;
  for (auto& [k, v] : p.at(dict).dict) {
    if (p.at(k).kind != Kind::kStr) return Error::format("{}: a state-dict key is not a string", ctx);
    const PyObj& t = p.at(v);
    if (t.kind != Kind::kTensor) continue;  // e.g. bookkeeping values next to the tensors
    const PyObj& st = p.at(t.storage);
    TorchTensorRef r;
    r.name = p.at(k).s;
    r.storage_key = st.s;
    r.storage_type = st.type;
    r.storage_numel = st.i;
    r.offset = t.offset;
    r.shape = t.shape;
    r.stride = t.stride;
    out.push_back(std::move(r));
  }
  if (out.empty()) return Error::format("{}: no tensors in the state dict", ctx);
  return out;
}

}  // namespace pipit
