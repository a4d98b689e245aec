// Model registry, weight lookup with shape checks, batches and the KV cache.
#include "models/model.h"

#include "backends/device.h"
#include "core/small_pages.h"

#include <algorithm>
#include <list>
#include <map>

#include "models/chat_format.h"
#include "models/media_note.h"
#include "models/mapped_weights.h"
#include "models/recipe_rules.h"

namespace pipit {

namespace {
std::map<std::string, ModelFactory>& registry() {
  static std::map<std::string, ModelFactory> r;
  return r;
}
std::map<std::string, const char*>& chat_templates() {
  static std::map<std::string, const char*> r;
  return r;
}
std::map<std::string, const char*>& media_notes() {
  static std::map<std::string, const char*> r;
  return r;
}
std::multimap<std::string, std::string>& mapped_weights() {
  static std::multimap<std::string, std::string> r;
  return r;
}
bool is_weight_dtype(DType t) { return t != DType::I32 && t != DType::I8; }
}  // namespace

void register_builtin_chat_template(const char* model_type, const char* jinja) { chat_templates()[model_type] = jinja; }

const char* builtin_chat_template(const std::string& model_type) {
  auto it = chat_templates().find(model_type);
  return it == chat_templates().end() ? nullptr : it->second;
}

void register_media_note(const char* model_type, const char* note) { media_notes()[model_type] = note; }

const char* media_note(const std::string& model_type) {
  auto it = media_notes().find(model_type);
  return it == media_notes().end() ? nullptr : it->second;
}

std::string media_note_suffix(const std::string& model_type) {
  const char* n = media_note(model_type);
  return n ? std::string(" (") + n + ")" : std::string();
}

namespace {
// a std::list keeps the records where they are while later registrations append: lookups hand out pointers
std::list<FamilyRecipeRules>& family_recipe_registry() {
  static std::list<FamilyRecipeRules> r;
  return r;
}
}  // namespace

void register_family_recipe_rules(FamilyRecipeRules rules) { family_recipe_registry().push_back(std::move(rules)); }

std::vector<const FamilyRecipeRule*> family_recipe_rules(const std::string& model_type) {
  std::vector<const FamilyRecipeRule*> out;
  for (const FamilyRecipeRules& r : family_recipe_registry())
    if (std::find(r.model_types.begin(), r.model_types.end(), model_type) != r.model_types.end())
      for (const FamilyRecipeRule& rule : r.rules) out.push_back(&rule);
  return out;
}

std::vector<const FamilyRecipeRules*> all_family_recipe_rules() {
  std::vector<const FamilyRecipeRules*> out;
  for (const FamilyRecipeRules& r : family_recipe_registry()) out.push_back(&r);
  // registrations from different files run in link order: sorted, the description does not depend on it
  std::stable_sort(out.begin(), out.end(), [](const FamilyRecipeRules* x, const FamilyRecipeRules* y) {
    const std::string a = x->model_types.empty() ? std::string() : x->model_types[0];
    const std::string b = y->model_types.empty() ? std::string() : y->model_types[0];
    return a < b;
  });
  return out;
}

void register_mapped_weights(const char* model_type, const char* pattern) {
  mapped_weights().emplace(model_type, pattern);
}

bool keep_mapped(const std::string& model_type, const std::string& name) {
  auto [b, e] = mapped_weights().equal_range(model_type);
  for (auto it = b; it != e; ++it) {
    const std::string& p = it->second;
    if (!p.empty() && p.back() == '*') {
      if (name.compare(0, p.size() - 1, p, 0, p.size() - 1) == 0) return true;
    } else if (!p.empty() && p.front() == '*') {
      const size_t n = p.size() - 1;
      if (name.size() >= n && name.compare(name.size() - n, n, p, 1, n) == 0) return true;
    } else if (name == p) {
      return true;
    }
  }
  return false;
}

Result<Tensor> WeightSource::get(const std::string& name, const std::vector<int64_t>& shape) const {
  if (!has(name)) return Error::not_found("[load] missing tensor '{}' (expected shape {})", name, shape_to_string(shape));
  PIPIT_ASSIGN_OR_RETURN(Tensor t, find(name));
  if (t.shape() != shape)
    return Error::format("[load] {}: shape {}, expected {}", name, t.shape_str(), shape_to_string(shape));
  if (!is_weight_dtype(t.dtype()))
    return Error::format("[load] {}: dtype {} is not a weight dtype (f32, f16, bf16, q8_0, q4_0, mxfp4)", name,
                         dtype_name(t.dtype()));
  if (dtype_is_quantized(t.dtype()) && shape.size() != 2 && shape.size() != 3)  // 3-D: stacked experts
    return Error::format("[load] {}: quantized dtype {} on a {}-d tensor", name, dtype_name(t.dtype()), shape.size());
  return t;
}

Result<Tensor> WeightSource::get_optional(const std::string& name, const std::vector<int64_t>& shape) const {
  if (!has(name)) return Tensor();
  return get(name, shape);
}

Batch Batch::single(std::span<const int32_t> tokens, int32_t pos0, int slot, bool all_logits) {
  Batch b;
  b.tokens.assign(tokens.begin(), tokens.end());
  for (size_t i = 0; i < tokens.size(); ++i) b.pos.push_back(pos0 + int32_t(i));
  b.seqs.push_back({slot, 0, int64_t(tokens.size())});
  if (all_logits) {
    for (size_t i = 0; i < tokens.size(); ++i) b.logits_rows.push_back(int64_t(i));
  } else if (!tokens.empty()) {
    b.logits_rows.push_back(int64_t(tokens.size()) - 1);
  }
  return b;
}

KvCache::KvCache(const KvCacheSpec& spec, int n_slot, int n_ctx, DType dtype, int n_batch, Device* dev)
    : n_slot_(n_slot), n_ctx_(n_ctx), max_chunk_(n_ctx), dtype_(dtype), dev_(dev) {
  for (int l = 0; l < spec.n_layer; ++l) {
    const int w = size_t(l) < spec.window.size() ? std::max(0, spec.window[size_t(l)]) : 0;
    int rows = n_ctx;
    if (w > 0 && n_batch > 0 && int64_t(w) + n_batch < n_ctx) {
      rows = w + n_batch;
      max_chunk_ = std::min(max_chunk_, rows - w + 1);  // the chunk's first query sees w - 1 older keys
    }
    StateShapes shapes = size_t(l) < spec.state.size() ? spec.state[size_t(l)] : StateShapes{};
    if (!shapes.empty()) rows = 0;  // a recurrent layer: no K/V rows
    rows_.push_back(rows);
    window_.push_back(w);
    for (int s = 0; s < n_slot; ++s) {
      std::vector<Tensor> st;
      for (const auto& shape : shapes) {
        st.push_back(dev ? dev->empty(DType::F32, shape) : Tensor::empty(DType::F32, shape));
        if (s == 0) state_floats_ += st.back().numel();
      }
      state_.push_back(std::move(st));
      auto make = [&] {
        if (!rows) return Tensor();
        if (dev) return dev->empty(dtype, {rows, spec.n_head_kv, spec.head_dim});
        Tensor t = Tensor::empty(dtype, {rows, spec.n_head_kv, spec.head_dim});
        // rows are written from row 0 on, one per token: the first 2 MiB on small pages (core/small_pages.h)
        if (auto* h = dynamic_cast<const HeapStorage*>(t.storage().get())) small_pages_head(*h, size_t(2) << 20);
        return t;
      };
      k_.push_back(make());
      v_.push_back(make());
    }
    state_shapes_.push_back(std::move(shapes));
  }
  state_pos_.assign(size_t(n_slot), 0);
  for (int s = 0; s < n_slot && has_state(); ++s) restore_state(s, StateSnapshot{0, {}});  // zero states
}

Tensor KvCache::state(int layer, int slot, int i) const {
  return state_[size_t(layer) * n_slot_ + slot][size_t(i)];
}

Status KvCache::begin_state(const char* arch, const Batch& batch) {
  if (!has_state()) return Status::ok();
  for (const auto& s : batch.seqs) {
    const int32_t p0 = batch.pos[size_t(s.begin)];
    if (p0 == 0) {
      restore_state(s.slot, StateSnapshot{0, {}});
    } else if (p0 != state_pos_[size_t(s.slot)]) {
      // a recurrent state summarises a whole prefix: it cannot skip ahead, rewind or recover from a failed pass
      return Error::invalid_argument("[{}] the recurrent state of slot {} holds {} tokens; a batch cannot continue it "
                                     "at position {} (rewind through a snapshot or re-evaluate from 0)",
                                     arch, s.slot, state_pos_[size_t(s.slot)], p0);
    }
    state_pos_[size_t(s.slot)] = -1;  // in flight
  }
  return Status::ok();
}

void KvCache::end_state(const Batch& batch) {
  if (!has_state()) return;
  for (const auto& s : batch.seqs) state_pos_[size_t(s.slot)] = batch.pos[size_t(s.begin + s.n - 1)] + 1;
}

StateSnapshot KvCache::save_state(int slot) const {
  StateSnapshot snap{state_pos_[size_t(slot)], std::vector<float>(size_t(state_floats_))};
  read_state(slot, snap.data.data());
  return snap;
}

void KvCache::read_state(int slot, float* out) const {
  for (size_t l = 0; l < rows_.size(); ++l)
    for (const Tensor& t : state_[l * size_t(n_slot_) + size_t(slot)]) {
      if (dev_) dev_->read(t, out, t.nbytes());  // blocking: the state is what the queue has finished with
      else std::copy(t.ptr<float>(), t.ptr<float>() + t.numel(), out);
      out += t.numel();
    }
}

// An empty snapshot's data means the zero state.
void KvCache::restore_state(int slot, const StateSnapshot& snap) {
  PIPIT_ASSERT(snap.data.empty() || int64_t(snap.data.size()) == state_floats_);
  size_t off = 0;
  std::vector<float> zeros;
  for (size_t l = 0; l < rows_.size(); ++l)
    for (const Tensor& t : state_[l * size_t(n_slot_) + size_t(slot)]) {
      const size_t n = size_t(t.numel());
      if (dev_) {
        if (snap.data.empty()) zeros.assign(n, 0.0f);
        dev_->write(t, snap.data.empty() ? zeros.data() : snap.data.data() + off, n * 4);
      } else {
        float* p = t.ptr<float>();
        if (snap.data.empty()) std::fill(p, p + n, 0.0f);
        else std::copy(snap.data.begin() + long(off), snap.data.begin() + long(off + n), p);
      }
      off += n;
    }
  state_pos_[size_t(slot)] = snap.pos;
}

int KvCache::min_rewind(int n_past) const {
  // After positions up to n_past - 1, a ring of R rows holds [n_past - R, n_past); a query at n needs [n - w + 1, n).
  int lo = 0;
  for (size_t l = 0; l < rows_.size(); ++l)
    if (rows_[l] < n_ctx_ && state_shapes_[l].empty()) lo = std::max(lo, n_past - rows_[l] + window_[l] - 1);
  return std::min(lo, n_past);
}

size_t KvCache::bytes() const {
  size_t b = 0;
  for (auto& t : k_) b += t.defined() ? t.nbytes() : 0;
  for (auto& t : v_) b += t.defined() ? t.nbytes() : 0;
  return b + state_bytes_per_slot() * size_t(n_slot_);
}

void register_model(const char* model_type, ModelFactory f) { registry()[model_type] = f; }

ModelFactory find_model(const std::string& model_type) {
  auto it = registry().find(model_type);
  return it == registry().end() ? nullptr : it->second;
}

std::vector<std::string> registered_models() {
  std::vector<std::string> v;
  for (auto& [k, f] : registry()) v.push_back(k);
  return v;
}

Result<std::unique_ptr<Model>> create_model(const HfConfig& cfg, const WeightSource& w) {
  PIPIT_TRY(cfg.validate_sizes());  // before any model allocates from a size the file declares
  const std::string mt = cfg.model_type();
  ModelFactory f = find_model(mt);
  if (!f) {
    std::string list;
    for (auto& m : registered_models()) list += (list.empty() ? "" : ", ") + m;
    if (mt.empty()) return Error::unsupported("[load] config.json has no model_type (supported: {})", list);
    return Error::unsupported("[load] unknown model_type '{}' (supported: {})", mt, list);
  }
  return f(cfg, w);
}

}  // namespace pipit
