// SPDX-License-Identifier: Apache-2.0
// SPDX-FileCopyrightText: 2026 kvtier authors
// libFuzzer target: any block given to decode_header is either refused with a Status or yields a
// record consistent with the geometry; it never crashes or reads out of bounds.
#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <vector>

#include "store/record_format.hpp"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace kvtier;
  static const KvGeometry g = *geometry_for("tiny", 0, 1, 256);
  const size_t n = std::min<size_t>(size, kBlock);
  std::vector<std::byte> block(n);
  std::memcpy(block.data(), data, n);
  RecordMeta meta;
  if (decode_header(block, g, meta).ok()) {
    // Accepted headers describe a payload this geometry can hold.
    if (meta.token_count == 0 || meta.token_count > g.chunk_tokens ||
        meta.payload_bytes != g.bytes_for_tokens(meta.token_count)) {
      __builtin_trap();
    }
  }
  return 0;
}
