// SPDX-License-Identifier: Apache-2.0
// SPDX-FileCopyrightText: 2026 kvtier authors
// libFuzzer target: any block given to decode_header2 is either refused with a Status or yields a
// record consistent with the slice (its raw size the slice's for its token count, a raw record
// storing exactly that, a compressed one less); it never crashes or reads out of bounds.
#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <vector>

#include "store/record_v2.hpp"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace kvtier;
  static const Slice2 slice = [] {
    Slice2 s;
    s.layers = 48;
    s.groups = 4;
    s.group = 1;
    s.heads = 1;
    s.head_dim = 128;
    s.element_bytes = 2;
    s.chunk_tokens = 256;
    return s;
  }();
  const size_t n = std::min<size_t>(size, kBlock);
  std::vector<std::byte> block(n);
  std::memcpy(block.data(), data, n);
  RecordMeta2 meta;
  if (decode_header2(block, slice, meta).ok()) {
    const bool raw = meta.codec == Codec::kRaw;
    if (meta.token_count == 0 || meta.token_count > slice.chunk_tokens ||
        meta.raw_bytes != slice.raw_bytes(meta.token_count) ||
        (raw && meta.stored_bytes != meta.raw_bytes) ||
        (!raw && (meta.stored_bytes == 0 || meta.stored_bytes >= meta.raw_bytes))) {
      __builtin_trap();
    }
  }
  return 0;
}
