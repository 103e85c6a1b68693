// SPDX-License-Identifier: Apache-2.0
// SPDX-FileCopyrightText: 2026 kvtier authors
// Python bindings (nanobind): Options, Engine and geometries, with save/lookup/restore taking any
// tensor that speaks DLPack or the buffer protocol (PyTorch, NumPy, CuPy), zero-copy, on the host
// or on a CUDA device. kvtier errors become kvtier.Error(message, code).
#include <nanobind/nanobind.h>
#include <nanobind/ndarray.h>
#include <nanobind/stl/string.h>
#include <nanobind/stl/unique_ptr.h>
#include <nanobind/stl/variant.h>
#include <nanobind/stl/vector.h>

#include <cstdint>
#include <limits>
#include <optional>
#include <stdexcept>
#include <variant>

#include "kvtier/kvtier.hpp"

namespace nb = nanobind;
using namespace nb::literals;

namespace {

/// A kvtier Status on its way to Python.
struct PyError : std::runtime_error {
  PyError(const kvtier::Status& st)
      : std::runtime_error(st.to_string()), code(kvtier::error_code_name(st.code())) {}
  std::string code;
};

template <typename T>
T unwrap(kvtier::Result<T> r) {
  if (!r) throw PyError(r.error());
  return std::move(*r);
}

// Any dtype, any device, C-contiguous (see tensor_of): a tensor that is not
// already contiguous must fail, not be copied (a restore into a copy would vanish).
// Read-only arrays too: a save only reads its KV (a restore's is checked to be writable first).
using Tensor = nb::ndarray<nb::ro, nb::c_contig>;
using WritableTensor = nb::ndarray<nb::c_contig>;
using TokenArray = nb::ndarray<nb::ro, nb::c_contig, nb::device::cpu>;

/// Why nanobind did not take `h` as an array, from what NumPy- and PyTorch-like arrays say of
/// themselves (nanobind says only that the cast failed); empty when the object does not tell.
std::string why_refused(nb::handle h, bool writable, bool kv = true) {
  auto flag = [](nb::handle obj, const char* name) {
    return nb::hasattr(obj, name) && nb::cast<bool>(nb::bool_(obj.attr(name)));
  };
  if (nb::hasattr(h, "dtype")) {
    nb::object dtype = h.attr("dtype");
    if (nb::hasattr(dtype, "kind") && nb::cast<std::string>(nb::str(dtype.attr("kind"))) == "O")
      return "its dtype is object (Python objects, not numbers)";
    if (nb::hasattr(dtype, "isnative") && !flag(dtype, "isnative"))
      return "its dtype " + nb::cast<std::string>(nb::repr(dtype)) +
             " is not in this machine's byte order (pass a.astype(a.dtype.newbyteorder('=')))";
  }
  if (nb::hasattr(h, "flags")) {
    nb::object flags = h.attr("flags");
    if (writable && !flag(flags, "writeable"))
      return "it is read-only, and a restore writes into it";
    if (!flag(flags, "c_contiguous") && !kv) return "it is not C-contiguous (np.ascontiguousarray)";
    if (!flag(flags, "c_contiguous"))
      return "it is not C-contiguous; a non-contiguous one is refused rather than copied, since a "
             "restore into a copy would vanish";
  } else if (nb::hasattr(h, "is_contiguous") && !nb::cast<bool>(h.attr("is_contiguous")())) {
    return "it is not contiguous; a non-contiguous one is refused rather than copied, since a "
           "restore into a copy would vanish";
  }
  return {};
}

kvtier::MemoryView view_of(const Tensor& t) {
  kvtier::MemoryView v;
  // A save only reads through it; a restore's tensor was checked to be writable (tensor_of).
  v.data = static_cast<std::byte*>(const_cast<void*>(t.data()));
  v.size = t.nbytes();
  if (t.device_type() == nb::device::cuda::value) {
    v.kind = kvtier::MemoryKind::kCuda;
    v.device = t.device_id();
  } else if (t.device_type() != nb::device::cpu::value) {
    throw PyError(
        {kvtier::ErrorCode::kNotSupported, "KV tensors must live in host or CUDA memory"});
  }
  return v;
}

/// Integers from a list of ints or a 1-D int32/int64 array (`what` names them in errors). A value
/// outside T is refused, never truncated: two token ids that differ must never share KV.
template <typename T>
std::vector<T> ints_of(nb::handle h, const char* what) {
  std::vector<T> out;
  auto checked = [&](long long v, size_t i) {
    if (v < std::numeric_limits<T>::min() || v > std::numeric_limits<T>::max()) {
      throw PyError({kvtier::ErrorCode::kInvalidArgument,
                     std::string(what) + "[" + std::to_string(i) + "] = " + std::to_string(v) +
                         " is outside " + std::to_string(std::numeric_limits<T>::min()) + ".." +
                         std::to_string(std::numeric_limits<T>::max()) +
                         " (kvtier keeps 32-bit ids and refuses others rather than cut them)"});
    }
    return static_cast<T>(v);
  };
  if (nb::isinstance<nb::list>(h) || nb::isinstance<nb::tuple>(h)) {
    size_t i = 0;
    for (nb::handle x : h) {
      PyObject* index = PyNumber_Index(x.ptr());
      if (index == nullptr) {
        PyErr_Clear();
        throw nb::type_error((std::string(what) + "[" + std::to_string(i) + "] is a " +
                              nb::type_name(x.type()).c_str() + ", not an integer")
                                 .c_str());
      }
      int overflow = 0;
      const long long v = PyLong_AsLongLongAndOverflow(index, &overflow);
      Py_DECREF(index);
      if (overflow != 0)
        checked(overflow > 0 ? std::numeric_limits<long long>::max()
                             : std::numeric_limits<long long>::min(),
                i);
      out.push_back(checked(v, i++));
    }
    return out;
  }
  TokenArray a;
  try {
    a = nb::cast<TokenArray>(h);
  } catch (const nb::cast_error&) {
    const std::string why = why_refused(h, /*writable=*/false, /*kv=*/false);
    throw nb::type_error(
        (std::string(what) + " must be a list of ints or a 1-D int32/int64 array" +
         (why.empty() ? std::string(", not a ") + nb::type_name(h.type()).c_str() : ": " + why))
            .c_str());
  }
  if (a.ndim() != 1)
    throw PyError(
        {kvtier::ErrorCode::kInvalidArgument, std::string(what) + " must be one-dimensional"});
  const size_t n = a.shape(0);
  if (a.dtype() == nb::dtype<int32_t>()) {
    const auto* p = static_cast<const int32_t*>(a.data());
    for (size_t i = 0; i < n; ++i) out.push_back(checked(p[i], i));
  } else if (a.dtype() == nb::dtype<int64_t>()) {
    const auto* p = static_cast<const int64_t*>(a.data());
    for (size_t i = 0; i < n; ++i) out.push_back(checked(p[i], i));
  } else {
    throw PyError(
        {kvtier::ErrorCode::kInvalidArgument, std::string(what) + " must be int32 or int64"});
  }
  return out;
}

std::vector<kvtier::Token> tokens_of(nb::handle h) { return ints_of<kvtier::Token>(h, "tokens"); }

kvtier::PagedLayout layout_of(const std::string& name) {
  if (name == "kv_first") return kvtier::PagedLayout::kKvFirst;
  if (name == "block_first") return kvtier::PagedLayout::kBlockFirst;
  if (name == "packed_heads") return kvtier::PagedLayout::kPackedHeads;
  if (name == "packed_tokens") return kvtier::PagedLayout::kPackedTokens;
  throw PyError({kvtier::ErrorCode::kInvalidArgument,
                 "layout '" + name +
                     "': expected kv_first [2,blocks,bs,H,D], block_first [blocks,2,bs,H,D] or "
                     "packed_heads [blocks,H,bs,2D] or packed_tokens [blocks,bs,H,2D]; an unknown "
                     "layout is refused, never guessed"});
}

/// A KV argument as a tensor: any dtype, host or CUDA, C-contiguous, and `writable` for a restore.
/// Taken without conversion: a tensor that is not already contiguous is refused, not copied (a
/// restore into a copy would vanish).
Tensor tensor_of(nb::handle h, const std::string& what, bool writable) {
  auto refuse = [&] {
    const std::string why = why_refused(h, writable);
    throw nb::type_error(
        (what +
         " must be a C-contiguous tensor or array in host or CUDA memory (DLPack or the buffer "
         "protocol)" +
         (why.empty() ? std::string(", not this ") + nb::type_name(h.type()).c_str() +
                            "; a non-contiguous one is refused rather than copied, since a "
                            "restore into a copy would vanish"
                      : ": " + why))
            .c_str());
  };
  try {
    if (writable) static_cast<void>(nb::cast<WritableTensor>(h, /*convert=*/false));
    return nb::cast<Tensor>(h, /*convert=*/false);
  } catch (const nb::cast_error&) {
    refuse();
  }
  return {};
}

/// The stream kvtier's copies order after (ChunkedKv::cuda_stream): `stream` when given, else the
/// current stream of the tensor's framework. Host memory needs none.
void* stream_of(nb::handle obj, const Tensor& t, nb::handle stream) {
  const bool cuda = t.device_type() == nb::device::cuda::value;
  if (!cuda && stream.is_none()) return nullptr;
  nb::module_ streams = nb::module_::import_("kvtier._streams");
  nb::object handle = stream.is_none() ? streams.attr("current_stream")(obj)
                                       : streams.attr("stream_handle")(stream);
  return cuda ? reinterpret_cast<void*>(nb::cast<uintptr_t>(handle)) : nullptr;
}

/// A dtype as NumPy and PyTorch spell it ("float32", "bfloat16"), for error messages.
std::string dtype_name(nb::dlpack::dtype d) {
  using Code = nb::dlpack::dtype_code;
  const auto code = static_cast<Code>(d.code);
  const char* kind = code == Code::Int       ? "int"
                     : code == Code::UInt    ? "uint"
                     : code == Code::Float   ? "float"
                     : code == Code::Bfloat  ? "bfloat"
                     : code == Code::Complex ? "complex"
                     : code == Code::Bool    ? "bool"
                                             : nullptr;
  if (kind == nullptr)
    return "DLPack dtype code " + std::to_string(d.code) + " of " + std::to_string(d.bits) +
           " bits";
  return code == Code::Bool ? std::string(kind) : kind + std::to_string(d.bits);
}

uint64_t itemsize(const Tensor& t) { return (uint64_t{t.dtype().bits} * t.dtype().lanes + 7) / 8; }

/// Refuses numbers of another width than the geometry's elements: a float32 array for a bf16
/// geometry holds twice the bytes, so it would be taken for twice the tokens (or rejected by byte
/// counts that never name the dtype). uint8 is exempt because a uint8 view of the KV's raw bytes
/// is how frameworks hand over dtypes that NumPy lacks (bf16, fp8); its byte count is checked with
/// the shape.
void check_dtype(const Tensor& t, const kvtier::KvGeometry& g, const std::string& what) {
  const nb::dlpack::dtype d = t.dtype();
  const bool raw_bytes = d == nb::dtype<uint8_t>();
  const bool numeric = d.code != static_cast<uint8_t>(nb::dlpack::dtype_code::Bool);
  if (raw_bytes || !numeric || itemsize(t) == g.element_bytes) return;
  throw PyError({kvtier::ErrorCode::kInvalidArgument,
                 what + " is " + dtype_name(d) + " (" + std::to_string(itemsize(t)) +
                     "-byte elements), but the geometry's elements are " +
                     std::to_string(g.element_bytes) +
                     " bytes (element_bytes=" + std::to_string(g.element_bytes) +
                     "): pass the KV in its own " + std::to_string(g.element_bytes) +
                     "-byte dtype, or a uint8 view of its bytes"});
}

std::string shape_of(const Tensor& t) {
  std::string s = "(";
  for (size_t i = 0; i < t.ndim(); ++i) s += (i ? ", " : "") + std::to_string(t.shape(i));
  return s + (t.ndim() == 1 ? ",)" : ")");
}

/// A shape in the tensor's own elements, with nullopt for an axis any size fits ("tokens").
using Expected = std::vector<std::optional<uint64_t>>;

std::string expected_string(const Expected& e, const char* free_name) {
  std::string s = "[";
  for (size_t i = 0; i < e.size(); ++i)
    s += (i ? ", " : "") + (e[i] ? std::to_string(*e[i]) : free_name);
  return s + "]";
}

bool matches(const Tensor& t, const Expected& e) {
  if (t.ndim() != e.size()) return false;
  for (size_t i = 0; i < e.size(); ++i) {
    if (e[i] && t.shape(i) != *e[i]) return false;
  }
  return true;
}

/// head_dim counted in the tensor's elements: a uint8 view has element_bytes of them per value.
/// nullopt when the tensor's elements do not divide a row (only dtypes check_dtype lets through).
std::optional<uint64_t> head_dim_in(const Tensor& t, const kvtier::KvGeometry& g,
                                    uint64_t times = 1) {
  const uint64_t bytes = uint64_t{g.head_dim} * g.element_bytes * times;
  const uint64_t item = itemsize(t);
  if (item == 0 || bytes % item != 0) return std::nullopt;
  return bytes / item;
}

/// The contiguous form is [2, layers, tokens, kv_heads, head_dim] (head_dim counted in the tensor's
/// elements: a uint8 view has element_bytes of them per value), and nothing else: the engine sees
/// only bytes, so any other shape of the same size ([tokens, 2, layers, ...], 3-D, 6-D, flat) would
/// be saved or restored as if it were that form, its tokens silently scrambled.
void check_chunked_shape(const Tensor& t, const kvtier::KvGeometry& g) {
  const std::optional<uint64_t> dim = head_dim_in(t, g);
  const Expected want = {g.kv_tensors, g.layers, std::nullopt, g.kv_heads, dim};
  if (dim && matches(t, want)) return;
  throw PyError(
      {kvtier::ErrorCode::kInvalidArgument,
       "kv has shape " + shape_of(t) + " (" + dtype_name(t.dtype()) +
           "), but this geometry's contiguous form is " + expected_string(want, "tokens") +
           " ([kv_tensors, layers, tokens, kv_heads, head_dim]: kv_tensors 2 for K and V, 1 for a "
           "latent); no other shape is taken, since "
           "its tokens would be read in that order"});
}

/// A paged layer's shape for `layout` in the tensor's elements, with `blocks` free when unknown.
Expected paged_shape(const Tensor& t, const kvtier::KvGeometry& g, kvtier::PagedLayout layout,
                     uint32_t block_size, std::optional<uint64_t> blocks) {
  switch (layout) {
    case kvtier::PagedLayout::kKvFirst:
      return {g.kv_tensors, blocks, block_size, g.kv_heads, head_dim_in(t, g)};
    case kvtier::PagedLayout::kBlockFirst:
      return {blocks, g.kv_tensors, block_size, g.kv_heads, head_dim_in(t, g)};
    case kvtier::PagedLayout::kPackedHeads:
      return {blocks, g.kv_heads, block_size, head_dim_in(t, g, 2)};
    case kvtier::PagedLayout::kPackedTokens:
      return {blocks, block_size, g.kv_heads, head_dim_in(t, g, 2)};
  }
  return {};
}

const char* paged_form(kvtier::PagedLayout layout) {
  switch (layout) {
    case kvtier::PagedLayout::kKvFirst:
      return "[2, blocks, block_size, kv_heads, head_dim]";
    case kvtier::PagedLayout::kBlockFirst:
      return "[blocks, 2, block_size, kv_heads, head_dim]";
    case kvtier::PagedLayout::kPackedHeads:
      return "[blocks, kv_heads, block_size, 2 * head_dim]";
    case kvtier::PagedLayout::kPackedTokens:
      return "[blocks, block_size, kv_heads, 2 * head_dim]";
  }
  return "";
}

/// Every layer must be the layout's shape with the first layer's number of blocks, or with its
/// own from `counts` where the caller gives one per layer: the engine only sees byte counts, so a
/// layer in another arrangement of the same size would be filled scrambled.
void check_paged_shapes(const std::vector<Tensor>& layers, const kvtier::KvGeometry& g,
                        kvtier::PagedLayout layout, const std::string& layout_name,
                        uint32_t block_size, const std::vector<uint32_t>& counts) {
  const Tensor& first = layers.front();
  const size_t block_axis = layout == kvtier::PagedLayout::kKvFirst ? 1 : 0;
  std::optional<uint64_t> blocks;
  if (first.ndim() == paged_shape(first, g, layout, block_size, std::nullopt).size())
    blocks = first.shape(block_axis);
  if (!counts.empty() && counts.size() != layers.size()) {
    throw PyError({kvtier::ErrorCode::kInvalidArgument,
                   "layer_num_blocks has " + std::to_string(counts.size()) + " counts for " +
                       std::to_string(layers.size()) + " layers (one each, or None)"});
  }
  for (size_t i = 0; i < layers.size(); ++i) {
    if (!counts.empty()) blocks = counts[i];
    const Expected want = paged_shape(layers[i], g, layout, block_size, blocks);
    if (matches(layers[i], want)) continue;
    throw PyError({kvtier::ErrorCode::kInvalidArgument,
                   "layers[" + std::to_string(i) + "] has shape " + shape_of(layers[i]) + " (" +
                       dtype_name(layers[i].dtype()) + "), but layout " + layout_name +
                       " with block_size " + std::to_string(block_size) + " expects " +
                       expected_string(want, "blocks") + " (" + paged_form(layout) +
                       (!counts.empty() ? ", with layer_num_blocks[" + std::to_string(i) + "])"
                        : i == 0        ? ")"
                                        : ", with the blocks of layers[0])")});
  }
}

/// The contiguous form [2, layers, capacity, row]: the capacity follows from the tensor's size
/// (check_chunked_shape refuses one that is not a whole number of tokens).
struct Chunked {
  Tensor tensor;  // keeps the caller's memory referenced for the call
  kvtier::ChunkedKv view;
};

Chunked chunked_of(const kvtier::Engine& e, nb::handle kv, nb::handle stream, bool restore) {
  Chunked c{tensor_of(kv, "kv", restore), {}};
  check_dtype(c.tensor, e.geometry(), "kv");
  check_chunked_shape(c.tensor, e.geometry());
  const uint64_t per_token = e.geometry().bytes_per_token();
  c.view = {view_of(c.tensor), per_token == 0 ? 0 : c.tensor.nbytes() / per_token,
            stream_of(kv, c.tensor, stream)};
  return c;
}

struct Paged {
  std::vector<Tensor> layers;
  std::vector<int32_t> table;
  std::vector<std::vector<int32_t>> layer_tables;
  kvtier::PagedKv view;
};

Paged paged_of(const kvtier::KvGeometry& g, nb::handle layers, nb::handle block_table,
               uint32_t block_size, const std::string& layout, nb::handle stream, bool restore,
               nb::handle layer_block_tables, nb::handle layer_num_blocks) {
  Paged p;
  if (!nb::isinstance<nb::list>(layers) && !nb::isinstance<nb::tuple>(layers)) {
    throw nb::type_error("layers must be a list of per-layer tensors");
  }
  size_t i = 0;
  for (nb::handle l : layers)
    p.layers.push_back(tensor_of(l, "layers[" + std::to_string(i++) + "]", restore));
  if (p.layers.empty()) throw PyError({kvtier::ErrorCode::kInvalidArgument, "no layer tensors"});
  p.table = ints_of<int32_t>(block_table, "block_table");  // -1 skips a block on restore
  p.view.layout = layout_of(layout);
  for (size_t l = 0; l < p.layers.size(); ++l)
    check_dtype(p.layers[l], g, "layers[" + std::to_string(l) + "]");
  if (!layer_num_blocks.is_none()) {
    p.view.layer_num_blocks = ints_of<uint32_t>(layer_num_blocks, "layer_num_blocks");
  }
  check_paged_shapes(p.layers, g, p.view.layout, layout, block_size, p.view.layer_num_blocks);
  for (const Tensor& l : p.layers) p.view.layers.push_back(view_of(l));
  p.view.block_table = p.table;
  if (!layer_block_tables.is_none()) {
    if (!nb::isinstance<nb::list>(layer_block_tables) &&
        !nb::isinstance<nb::tuple>(layer_block_tables)) {
      throw nb::type_error("layer_block_tables must be a list: a block table or None per layer");
    }
    for (nb::handle t : layer_block_tables) {
      p.layer_tables.push_back(t.is_none() ? std::vector<int32_t>{}
                                           : ints_of<int32_t>(t, "layer_block_tables"));
    }
    for (const auto& t : p.layer_tables) p.view.layer_block_tables.emplace_back(t);
  }
  p.view.block_size = block_size;
  // Every layout's first axis that counts blocks: kv_first has it second.
  const Tensor& first = p.layers.front();
  p.view.num_blocks = static_cast<uint32_t>(
      layout == "kv_first" && first.ndim() >= 2 ? first.shape(1) : first.shape(0));
  p.view.cuda_stream = stream_of(layers[0], first, stream);
  return p;
}

/// A hybrid model's recurrent state: one tensor per recurrent layer, each state_bytes.
struct State {
  std::vector<Tensor> layers;
  kvtier::StateMemory view;
};

std::optional<State> state_of(const kvtier::KvGeometry& g, nb::handle state, nb::handle stream,
                              bool restore) {
  if (state.is_none()) return std::nullopt;
  if (!nb::isinstance<nb::list>(state) && !nb::isinstance<nb::tuple>(state)) {
    throw nb::type_error("state must be a list of tensors, one per recurrent layer");
  }
  State s;
  size_t i = 0;
  for (nb::handle l : state)
    s.layers.push_back(tensor_of(l, "state[" + std::to_string(i++) + "]", restore));
  if (s.layers.empty()) throw PyError({kvtier::ErrorCode::kInvalidArgument, "no state tensors"});
  for (size_t l = 0; l < s.layers.size(); ++l) {
    if (s.layers[l].nbytes() != g.state_bytes) {
      throw PyError({kvtier::ErrorCode::kInvalidArgument,
                     "state[" + std::to_string(l) + "] holds " +
                         std::to_string(s.layers[l].nbytes()) +
                         " bytes; a recurrent layer's state is " + std::to_string(g.state_bytes)});
    }
    s.view.layers.push_back(view_of(s.layers[l]));
  }
  s.view.cuda_stream = stream_of(state[0], s.layers.front(), stream);
  return s;
}

/// Engine::io_settings() as a dict; its drives a list of dicts.
nb::dict io_settings_dict(const kvtier::IoSettings& io) {
  nb::list drives;
  for (const kvtier::DriveTuningInfo& t : io.drives) {
    nb::dict d;
    d["dir"] = t.dir;
    d["request_bytes"] = t.request_bytes;
    d["in_flight"] = t.in_flight;
    d["bytes_per_second"] = t.bytes_per_second;
    d["state"] = t.state;
    drives.append(d);
  }
  nb::dict d;
  d["request_bytes"] = io.request_bytes;
  d["staging_bytes"] = io.staging_bytes;
  d["source"] = io.source;
  d["drives"] = drives;
  return d;
}

/// Stats as a dict, one key per field of kvtier::stat_fields(); a histogram is a dict of its
/// cumulative buckets (upper bound in seconds -> count), count and sum.
nb::dict stats_dict(const kvtier::Stats& s) {
  nb::dict d;
  for (const kvtier::StatField& f : kvtier::stat_fields()) {
    const nb::str key(f.name.data(), f.name.size());
    switch (f.kind) {
      case kvtier::StatField::Kind::kCounter:
      case kvtier::StatField::Kind::kGauge:
        d[key] = s.*f.number;
        break;
      case kvtier::StatField::Kind::kText:
        d[key] = s.*f.text;
        break;
      case kvtier::StatField::Kind::kHistogram: {
        const kvtier::LatencyHistogram& h = s.*f.histogram;
        nb::list buckets;
        for (size_t i = 0; i < h.cumulative.size(); ++i) {
          buckets.append(nb::make_tuple(kvtier::LatencyHistogram::kBounds[i], h.cumulative[i]));
        }
        nb::dict hd;
        hd["buckets"] = buckets;
        hd["count"] = h.count;
        hd["sum"] = h.sum_seconds;
        d[key] = hd;
        break;
      }
    }
  }
  return d;
}

/// Why a restore gave fewer than `asked` tokens, as `kvtier get` says it: the engine's reason
/// where it has one (a record failed its checks, a copy failed), else whether nothing or a shorter
/// prefix was stored, and what the store's state adds: drives offline (their records are misses)
/// and the remote tier, which was asked for the rest.
std::string why_short(const kvtier::Engine& e, const kvtier::RestoreResult& r, uint64_t asked) {
  if (!r.problem.empty() || r.tokens_restored >= asked) return r.problem;
  std::string why = r.tokens_restored == 0
                        ? "not found: no stored prefix of these tokens in " + e.store_dir()
                        : "partial: the store holds the first " +
                              std::to_string(r.tokens_restored) + " of these " +
                              std::to_string(asked) + " tokens (" + e.store_dir() + ")";
  const kvtier::Stats s = e.stats();
  if (s.drives_offline > 0) {
    why += "; " + std::to_string(s.drives_offline) + " of the store's drives offline, whose " +
           std::to_string(s.offline_records) + " records are misses: " + s.drive_problem;
  }
  if (s.remote != "off") {
    why += s.remote == "ok" ? "; the remote tier did not hold the rest either"
                            : "; the remote tier was asked for the rest: " + s.remote;
  }
  return why;
}

nb::dict restore_dict(const kvtier::Engine& e, const kvtier::RestoreResult& r, uint64_t asked) {
  nb::dict d;
  d["tokens_restored"] = r.tokens_restored;
  d["bytes_read"] = r.bytes_read;
  d["checksum_misses"] = r.checksum_misses;
  d["recheck_kept"] = r.recheck_kept;
  d["host_bytes"] = r.host_bytes;
  d["problem"] = why_short(e, r, asked);
  return d;
}

/// A Prometheus label name: [a-zA-Z_][a-zA-Z0-9_]*, not reserved ("__" prefix) and not "le",
/// which the histograms' buckets use.
void check_label_name(const std::string& name) {
  auto word = [](char c, bool first) {
    return c == '_' || (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') ||
           (!first && c >= '0' && c <= '9');
  };
  bool ok = !name.empty() && !name.starts_with("__") && name != "le";
  for (size_t i = 0; ok && i < name.size(); ++i) ok = word(name[i], i == 0);
  if (!ok) {
    throw PyError({kvtier::ErrorCode::kInvalidArgument,
                   "label name '" + name +
                       "' is not a Prometheus label name ([a-zA-Z_][a-zA-Z0-9_]*, not starting "
                       "with __, not le)"});
  }
}

/// Checks label text (name="value" pairs, comma-separated, values escaped as the text format
/// says: \\, \" and \n) so that it cannot break the exposition: a raw quote would end the value
/// early and a raw newline would start a line of its own.
void check_label_text(const std::string& text) {
  size_t i = 0;
  auto refuse = [&](const std::string& why) {
    throw PyError({kvtier::ErrorCode::kInvalidArgument,
                   "labels '" + text + "': " + why + " at offset " + std::to_string(i) +
                       "; pass a dict (values are escaped for you) or name=\"value\" pairs with "
                       "\\, \\\" and \\n escaped"});
  };
  while (i < text.size()) {
    const size_t eq = text.find('=', i);
    if (eq == std::string::npos) refuse("a label without =\"value\"");
    check_label_name(text.substr(i, eq - i));
    i = eq + 1;
    if (i >= text.size() || text[i] != '"') refuse("a value not in double quotes");
    for (++i;; ++i) {
      if (i >= text.size()) refuse("an unterminated value");
      if (text[i] == '\n') refuse("a raw newline in a value");
      if (text[i] == '"') break;
      if (text[i] == '\\') {
        ++i;
        if (i >= text.size() || (text[i] != '\\' && text[i] != '"' && text[i] != 'n'))
          refuse("an escape other than \\\\, \\\" or \\n");
      }
    }
    ++i;  // the closing quote
    if (i < text.size() && text[i++] != ',') refuse("no comma between labels");
  }
}

/// Engine.prometheus's labels as the text to add to every sample: from a dict, escaped; from a
/// string, checked.
std::string label_text(nb::handle labels) {
  if (labels.is_none()) return {};
  if (nb::isinstance<nb::dict>(labels)) {
    std::string out;
    for (auto [name, value] : nb::borrow<nb::dict>(labels)) {
      const std::string n = nb::cast<std::string>(nb::str(name));
      check_label_name(n);
      out += (out.empty() ? "" : ",") + n + "=\"" +
             kvtier::prometheus_label_value(nb::cast<std::string>(nb::str(value))) + "\"";
    }
    return out;
  }
  if (!nb::isinstance<nb::str>(labels))
    throw nb::type_error("labels must be a dict of label names to values, or a string");
  std::string text = nb::cast<std::string>(labels);
  check_label_text(text);
  return text;
}

}  // namespace

NB_MODULE(_kvtier, m) {
  m.doc() = "kvtier: offload LLM KV caches to NVMe and restore them";
  static nb::object error_type = nb::exception<PyError>(m, "Error");
  // A property over args rather than an attribute set where C++ raises: an Error raised from
  // Python (or re-created by pickling, which passes args only) has .code as well.
  error_type.attr("code") =
      nb::module_::import_("builtins")
          .attr("property")(
              nb::cpp_function([](nb::handle self) -> nb::object {
                nb::tuple args = nb::borrow<nb::tuple>(self.attr("args"));
                return args.size() > 1 ? nb::object(args[1]) : nb::none();
              }),
              nb::none(), nb::none(),
              "The kvtier status name, e.g. \"corrupt\" or \"invalid argument\" (also args[1]).");
  error_type.attr("__doc__") =
      "A kvtier error: args are (message, code); .code is the status name.";
  // Python's convention for a bad argument value is ValueError: an invalid argument is both.
  static nb::object invalid_type =
      nb::module_::import_("builtins")
          .attr("type")("InvalidArgument", nb::make_tuple(error_type, nb::handle(PyExc_ValueError)),
                        nb::dict());
  invalid_type.attr("__doc__") =
      "An invalid argument (code \"invalid argument\"): a kvtier.Error and a ValueError.";
  m.attr("InvalidArgument") = invalid_type;
  m.attr("__version__") = KVTIER_VERSION_STRING;
  nb::register_exception_translator([](const std::exception_ptr& p, void*) {
    try {
      std::rethrow_exception(p);
    } catch (const PyError& e) {
      // A message may quote bytes that are not UTF-8 (a damaged file's content): escape them
      // rather than fail the translation with a UnicodeDecodeError.
      const std::string_view what = e.what();
      nb::object message = nb::steal(PyUnicode_DecodeUTF8(
          what.data(), static_cast<Py_ssize_t>(what.size()), "backslashreplace"));
      nb::object args = nb::make_tuple(message, e.code);
      const bool invalid = e.code == kvtier::error_code_name(kvtier::ErrorCode::kInvalidArgument);
      PyErr_SetObject((invalid ? invalid_type : error_type).ptr(), args.ptr());
    }
  });

  m.def(
      "stat_fields",
      [] {
        nb::list out;
        for (const kvtier::StatField& f : kvtier::stat_fields()) {
          static constexpr const char* kKinds[] = {"counter", "gauge", "text", "histogram"};
          out.append(nb::make_tuple(nb::str(f.name.data(), f.name.size()),
                                    kKinds[static_cast<int>(f.kind)],
                                    nb::str(f.help.data(), f.help.size())));
        }
        return out;
      },
      "Every field of Engine.stats(): (name, kind, help), kind one of counter, gauge, text, "
      "histogram.");

  nb::class_<kvtier::KvGeometry>(m, "Geometry")
      .def_static(
          "preset",
          [](const std::string& model, uint32_t rank, uint32_t world, uint32_t chunk) {
            return unwrap(kvtier::geometry_for(model, rank, world, chunk));
          },
          "model"_a, "tp_rank"_a = 0, "tp_world"_a = 1, "chunk_tokens"_a = 256)
      .def_static(
          "custom",
          [](const std::string& model, uint32_t layers, uint32_t kv_heads, uint32_t head_dim,
             uint32_t element_bytes, uint32_t chunk, uint32_t rank, uint32_t world,
             uint32_t kv_heads_total, uint32_t kv_tensors, const std::vector<std::string>& kinds,
             uint32_t window_tokens, uint32_t state_layers, uint64_t state_bytes,
             uint32_t window_chunk_tokens) {
            kvtier::KvGeometry g;
            g.model_id = model;
            g.layers = layers;
            g.kv_heads = kv_heads;
            g.head_dim = head_dim;
            g.element_bytes = element_bytes;
            g.chunk_tokens = chunk;
            g.tp_rank = rank;
            g.tp_world = world;
            g.kv_heads_total = kv_heads_total;
            g.kv_tensors = kv_tensors;
            for (const std::string& k : kinds) {
              if (k != "full" && k != "window") {
                throw PyError({kvtier::ErrorCode::kInvalidArgument,
                               "layer_kinds: '" + k + "' is not 'full' or 'window'"});
              }
              g.layer_kinds.push_back(k == "window" ? kvtier::LayerKind::kSlidingWindow
                                                    : kvtier::LayerKind::kFullAttention);
            }
            g.window_tokens = window_tokens;
            g.window_chunk_tokens = window_chunk_tokens;
            g.state_layers = state_layers;
            g.state_bytes = state_bytes;
            if (kvtier::Status st = g.validate(); !st.ok()) throw PyError(st);
            return g;
          },
          "model"_a, "layers"_a, "kv_heads"_a, "head_dim"_a, "element_bytes"_a = 2,
          "chunk_tokens"_a = 256, "tp_rank"_a = 0, "tp_world"_a = 1, "kv_heads_total"_a = 0,
          "kv_tensors"_a = 2, "layer_kinds"_a = std::vector<std::string>{}, "window_tokens"_a = 0,
          "state_layers"_a = 0, "state_bytes"_a = 0, "window_chunk_tokens"_a = 0,
          "A geometry for any model: kv_heads are this rank's (total / tp_world); model names the "
          "namespace. kv_heads_total: the model's KV heads (0: kv_heads x tp_world). kv_tensors: 2 "
          "(K "
          "and V) or 1 (MLA's latent: kv_heads 1, head_dim its width; store_format 2). A hybrid "
          "model (store_format 2): layer_kinds, 'full' or 'window' per KV layer; window_tokens, "
          "the sliding window (tokens a token attends to, itself included), kept in records of "
          "window_chunk_tokens (0: chunk_tokens; a divisor of it); state_layers recurrent layers "
          "of state_bytes each (this rank's).")
      .def_prop_ro("model", [](const kvtier::KvGeometry& g) { return g.model_id; })
      .def_prop_ro("layers", [](const kvtier::KvGeometry& g) { return g.layers; })
      .def_prop_ro("kv_heads", [](const kvtier::KvGeometry& g) { return g.kv_heads; })
      .def_prop_ro("head_dim", [](const kvtier::KvGeometry& g) { return g.head_dim; })
      .def_prop_ro("element_bytes", [](const kvtier::KvGeometry& g) { return g.element_bytes; })
      .def_prop_ro("chunk_tokens", [](const kvtier::KvGeometry& g) { return g.chunk_tokens; })
      .def_prop_ro("tp_rank", [](const kvtier::KvGeometry& g) { return g.tp_rank; })
      .def_prop_ro("tp_world", [](const kvtier::KvGeometry& g) { return g.tp_world; })
      .def_prop_ro("kv_tensors", [](const kvtier::KvGeometry& g) { return g.kv_tensors; })
      .def_prop_ro("kv_heads_total", [](const kvtier::KvGeometry& g) { return g.total_kv_heads(); })
      .def_prop_ro("state_layers", [](const kvtier::KvGeometry& g) { return g.state_layers; })
      .def_prop_ro("state_bytes", [](const kvtier::KvGeometry& g) { return g.state_bytes; })
      .def_prop_ro("window_tokens", [](const kvtier::KvGeometry& g) { return g.window_tokens; })
      .def_prop_ro("window_chunk_tokens",
                   [](const kvtier::KvGeometry& g) { return g.window_chunk(); })
      .def_prop_ro("row_bytes", [](const kvtier::KvGeometry& g) { return g.row_bytes(); })
      .def("bytes_for_tokens", &kvtier::KvGeometry::bytes_for_tokens)
      .def("__repr__",
           [](const kvtier::KvGeometry& g) { return "kvtier.Geometry(" + g.describe() + ")"; });

  m.def(
      "parse_size", [](const std::string& text) { return unwrap(kvtier::parse_size(text)); },
      nb::arg("text"),
      "Bytes of a size as every kvtier setting takes it: \"4096\", \"64M\", \"1.5G\", "
      "\"2GiB\"; kvtier.InvalidArgument (a ValueError) naming the grammar for anything else.");
  m.def(
      "built_with_remote", [] { return KVTIER_HAVE_REDIS == 1; },
      "Whether this kvtier was built with hiredis, so that open(remote=...) can use a Redis "
      "Cluster.");
  m.def(
      "open",
      [](const std::variant<std::string, std::vector<std::string>>& root,
         const kvtier::KvGeometry& geometry, const std::string& io, const std::string& capacity,
         const std::string& dram, const std::string& staging, const std::string& tenant,
         const std::string& remote, const std::string& remote_password_env, uint64_t remote_ttl,
         const std::string& request_size, bool read_only, bool tune, uint32_t store_format,
         uint32_t max_tp, const std::string& compression) {
        kvtier::Options o;
        if (const auto* one = std::get_if<std::string>(&root)) {
          o.root = *one;
        } else {
          const auto& drives = std::get<std::vector<std::string>>(root);
          if (drives.empty())
            throw std::invalid_argument("open: the list of store directories is empty");
          o.root = drives.front();
          o.extra_roots.assign(drives.begin() + 1, drives.end());
        }
        o.geometry = geometry;
        o.io_path = unwrap(kvtier::parse_io_path(io));
        o.capacity_bytes = unwrap(kvtier::parse_size(capacity));
        o.dram_bytes = unwrap(kvtier::parse_size(dram));
        o.staging_bytes = unwrap(kvtier::parse_size(staging));
        o.io_request_bytes = unwrap(kvtier::parse_size(request_size));
        o.read_only = read_only;
        o.tune = tune;
        o.store_format = store_format;
        o.max_tp = max_tp;
        o.compression = unwrap(kvtier::parse_compression(compression));
        o.tenant = tenant;
        o.remote.seeds = remote;
        o.remote.password_env = remote_password_env;
        o.remote.ttl_seconds = remote_ttl;
        nb::gil_scoped_release release;
        return unwrap(kvtier::Engine::open(o));
      },
      "root"_a, "geometry"_a, "io"_a = "auto", "capacity"_a = "0", "dram"_a = "0",
      "staging"_a = "0", "tenant"_a = "", "remote"_a = "", "remote_password_env"_a = "",
      "remote_ttl"_a = 0, "request_size"_a = "0", "read_only"_a = false, "tune"_a = true,
      "store_format"_a = 1, "max_tp"_a = 8, "compression"_a = "off",
      "Opens (or creates) the rank's store under root: a directory, or a list of them, one per "
      "drive (the store "
      "spreads its segments over them; capacity is per drive). io: auto, posix, buffered or gds. "
      "Sizes take K/M/G/T. "
      "remote: Redis Cluster seeds, redis://host:port[,host:port...] (a shared tier behind the "
      "local store); "
      "remote_password_env: the environment variable holding its password; remote_ttl: seconds. "
      "request_size, staging: 0 takes each drive's tuning (tune(), docs/options.md \"Tuning\"), "
      "else 16M and 128M; read_only: open beside a writer process to look (lookup, stats), "
      "never writing; tune: False neither probes untuned drives at open nor uses their "
      "tunings. store_format: 1, a store per TP rank; 2, a TP-free store that ranks of any TP "
      "size up to the model's KV heads (and dividing max_tp) share (docs/format.md). compression: "
      "off, or split16 (store_format 2, 16-bit KV: records kept coded losslessly where that saves "
      "1/20, decoded on the host on restore).");

  nb::class_<kvtier::Engine>(m, "Engine", nb::is_weak_referenceable())
      .def(
          "save",
          [](kvtier::Engine& e, nb::handle tokens, nb::handle kv, nb::handle stream,
             nb::handle state) {
            auto ids = tokens_of(tokens);
            const Chunked c = chunked_of(e, kv, stream, /*restore=*/false);
            const std::optional<State> s = state_of(e.geometry(), state, stream, false);
            nb::gil_scoped_release release;
            return unwrap(s ? e.save(ids, c.view, s->view) : e.save(ids, c.view)).chunks_written;
          },
          "tokens"_a, "kv"_a, "stream"_a = nb::none(), "state"_a = nb::none(),
          "Saves KV in contiguous form [2, layers, capacity, kv_heads, head_dim]; returns chunks "
          "written. A hybrid model's `state`: one tensor per recurrent layer, its state after "
          "the last token. "
          "CUDA tensors are read after the work queued on `stream` (default: the tensor "
          "framework's current "
          "stream).")
      .def(
          "save_paged",
          [](kvtier::Engine& e, nb::handle tokens, nb::handle layers, nb::handle block_table,
             uint32_t block_size, const std::string& layout, nb::handle stream, nb::handle state,
             nb::handle layer_block_tables, nb::handle layer_num_blocks) {
            auto ids = tokens_of(tokens);
            Paged p = paged_of(e.geometry(), layers, block_table, block_size, layout, stream,
                               /*restore=*/false, layer_block_tables, layer_num_blocks);
            const std::optional<State> s = state_of(e.geometry(), state, stream, false);
            nb::gil_scoped_release release;
            return unwrap(s ? e.save(ids, p.view, s->view) : e.save(ids, p.view)).chunks_written;
          },
          "tokens"_a, "layers"_a, "block_table"_a, "block_size"_a = 16, "layout"_a = "kv_first",
          "stream"_a = nb::none(), "state"_a = nb::none(), "layer_block_tables"_a = nb::none(),
          "layer_num_blocks"_a = nb::none())
      .def(
          "lookup",
          [](kvtier::Engine& e, nb::handle tokens) {
            auto ids = tokens_of(tokens);
            nb::gil_scoped_release release;
            return unwrap(e.lookup(ids));
          },
          "tokens"_a, "Tokens of the longest stored prefix (reads no payload).")
      .def(
          "restore",
          [](kvtier::Engine& e, nb::handle tokens, nb::handle kv, nb::handle stream,
             nb::handle state) {
            auto ids = tokens_of(tokens);
            const Chunked c = chunked_of(e, kv, stream, /*restore=*/true);
            const std::optional<State> s = state_of(e.geometry(), state, stream, true);
            kvtier::RestoreResult r;
            {
              nb::gil_scoped_release release;
              r = unwrap(s ? e.restore(ids, c.view, s->view) : e.restore(ids, c.view));
            }
            return restore_dict(e, r, ids.size());
          },
          "tokens"_a, "kv"_a, "stream"_a = nb::none(), "state"_a = nb::none(),
          "Restores the longest stored prefix, verified; returns a dict. CUDA tensors are written "
          "after the "
          "work queued on `stream` (default: the framework's current stream) and are complete on "
          "return.")
      .def(
          "restore_paged",
          [](kvtier::Engine& e, nb::handle tokens, nb::handle layers, nb::handle block_table,
             uint32_t block_size, const std::string& layout, nb::handle stream, nb::handle state,
             nb::handle layer_block_tables, nb::handle layer_num_blocks) {
            auto ids = tokens_of(tokens);
            Paged p = paged_of(e.geometry(), layers, block_table, block_size, layout, stream,
                               /*restore=*/true, layer_block_tables, layer_num_blocks);
            const std::optional<State> s = state_of(e.geometry(), state, stream, true);
            kvtier::RestoreResult r;
            {
              nb::gil_scoped_release release;
              r = unwrap(s ? e.restore(ids, p.view, s->view) : e.restore(ids, p.view));
            }
            return restore_dict(e, r, ids.size());
          },
          "tokens"_a, "layers"_a, "block_table"_a, "block_size"_a = 16, "layout"_a = "kv_first",
          "stream"_a = nb::none(), "state"_a = nb::none(), "layer_block_tables"_a = nb::none(),
          "layer_num_blocks"_a = nb::none())
      .def(
          "evict",
          [](kvtier::Engine& e, nb::handle tokens) {
            auto ids = tokens_of(tokens);
            nb::gil_scoped_release release;
            return unwrap(e.evict(ids));
          },
          "tokens"_a)
      .def(
          "measure_read_ceiling",
          [](kvtier::Engine& e, nb::handle tokens) {
            auto ids = tokens_of(tokens);
            kvtier::CeilingResult c;
            {
              nb::gil_scoped_release release;
              c = unwrap(e.measure_read_ceiling(ids));
            }
            nb::dict d;
            d["bytes"] = c.bytes;
            d["seconds"] = c.seconds;
            return d;
          },
          "tokens"_a,
          "Reads the stored prefix's records the raw O_DIRECT way (same I/O code, no copy, no "
          "checksum): the "
          "drive's ceiling for a restore of the same bytes. Returns {bytes, seconds}.")
      .def(
          "read_extents",
          [](kvtier::Engine& e, nb::handle tokens) {
            auto ids = tokens_of(tokens);
            std::vector<kvtier::FileExtent> extents;
            {
              nb::gil_scoped_release release;
              extents = unwrap(e.read_extents(ids));
            }
            nb::list out;
            for (const auto& x : extents) out.append(nb::make_tuple(x.path, x.offset, x.length));
            return out;
          },
          "tokens"_a,
          "The store file ranges a restore of `tokens` reads, as [(path, offset, length)], records "
          "back "
          "to back merged: for measuring the drive with an independent tool (fio, dd) on the same "
          "bytes.")
      .def(
          "sync_remote",
          [](kvtier::Engine& e, nb::handle tokens) {
            std::vector<kvtier::Token> ids;
            if (!tokens.is_none()) ids = tokens_of(tokens);
            kvtier::RemoteSyncReport r;
            {
              nb::gil_scoped_release release;
              r = unwrap(e.sync_remote(ids));
            }
            nb::dict d;
            d["records"] = r.records;
            d["already_present"] = r.already_present;
            d["published"] = r.published;
            d["failed"] = r.failed;
            d["problem"] = r.problem;
            return d;
          },
          "tokens"_a = nb::none(),
          "Publishes to the remote tier the local records it lacks: those of `tokens`' stored "
          "prefix, or every local record when None. Returns {records, already_present, published, "
          "failed, problem}.")
      .def(
          "drop_page_cache",
          [](kvtier::Engine& e) {
            nb::gil_scoped_release release;
            if (kvtier::Status st = e.drop_page_cache(); !st.ok()) throw PyError(st);
          },
          "Evicts the store's files from the page cache (drop_caches as root, else fadvise), for "
          "cold reads.")
      .def("stats", [](kvtier::Engine& e) { return stats_dict(e.stats()); })
      .def(
          "io_settings", [](kvtier::Engine& e) { return io_settings_dict(e.io_settings()); },
          "The request size and staging this engine reads and writes with, where they came from "
          "(options, environment, tuned, defaults) and each drive's tuning: {request_bytes, "
          "staging_bytes, source, drives: [{dir, request_bytes, in_flight, bytes_per_second, "
          "state}]}.")
      .def(
          "tune",
          [](kvtier::Engine& e) {
            kvtier::IoSettings found;
            {
              nb::gil_scoped_release release;
              found = unwrap(e.tune());
            }
            return io_settings_dict(found);
          },
          "Probes every drive holding written data for its best read pattern (a few GB of reads "
          "each) and keeps it with the drive; engines opened from then on use it. Returns what "
          "io_settings() returns for them. kvtier.Error (code \"permission denied\") on a "
          "read-only store.")
      .def(
          "prometheus",
          [](kvtier::Engine& e, nb::handle labels) {
            return kvtier::prometheus_text(e.stats(), label_text(labels));
          },
          "labels"_a = nb::none(),
          "Stats in the Prometheus text format; `labels`, a dict {name: value} (values escaped "
          "here) or name=\"value\" pairs, comma-separated and already escaped (checked), are "
          "added to every sample. A label name that is not one, or text that would break the "
          "format, is refused (kvtier.InvalidArgument).")
      .def_prop_ro("geometry", &kvtier::Engine::geometry)
      .def_prop_ro("store_dir", &kvtier::Engine::store_dir);
}
