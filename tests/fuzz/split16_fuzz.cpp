// SPDX-License-Identifier: Apache-2.0
// SPDX-FileCopyrightText: 2026 kvtier authors
// libFuzzer target: split16 decoding of any stream either refuses it (kCorrupt) or fills exactly
// the declared bytes; never a crash or an out-of-bounds access. Inputs whose first byte is odd are
// a payload and a list of edits instead: the payload is encoded, edited, and its table checksum
// sealed again, so damage reaches the block decoder past the checksum. Every stream whose table
// checks also goes through the CUDA decoder's steps run serially (not a GPU run): they must refuse
// exactly the streams the host refuses and decode the others to the same bytes.
#include <xxhash.h>

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <vector>

#include "../helpers/split16_kernel_emulation.hpp"
#include "codec/split16.hpp"

namespace {

void decode(const std::vector<std::byte>& stored) {
  auto size = kvtier::codec::split16_decoded_bytes(stored);
  if (!size || *size > (16u << 20)) return;
  std::vector<std::byte> out(*size);
  kvtier::Status s = kvtier::codec::split16_decode(stored, out);
  if (!s.ok() && s.code() != kvtier::ErrorCode::kCorrupt) __builtin_trap();
  auto [emulated, flagged] = kvtier::codec::emulate_kernel(stored);
  const bool refused = std::find(flagged.begin(), flagged.end(), true) != flagged.end();
  if (refused == s.ok() || (s.ok() && emulated != out)) __builtin_trap();
}

// The layout in split16.cpp: 40-byte header (checksum at 32, seeded by the first 32 bytes), then
// 16 bytes a block.
void seal(std::vector<std::byte>& s) {
  if (s.size() < 40) return;
  uint32_t blocks;
  std::memcpy(&blocks, s.data() + 20, 4);
  const size_t table = size_t{blocks} * 16;
  if (table > s.size() - 40) return;
  const uint64_t sum = XXH3_64bits_withSeed(s.data() + 40, table, XXH3_64bits(s.data(), 32));
  std::memcpy(s.data() + 32, &sum, 8);
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size == 0) return 0;
  if (data[0] % 2 == 0) {
    decode(std::vector<std::byte>(reinterpret_cast<const std::byte*>(data + 1),
                                  reinterpret_cast<const std::byte*>(data + size)));
    return 0;
  }
  const size_t payload = (size - 1) / 2;
  std::vector<std::byte> raw(reinterpret_cast<const std::byte*>(data + 1),
                             reinterpret_cast<const std::byte*>(data + 1 + payload));
  std::vector<std::byte> stored(kvtier::codec::split16_bound(raw.size()));
  auto n = kvtier::codec::split16_encode(raw, stored);
  if (!n) __builtin_trap();
  stored.resize(*n);
  std::vector<std::byte> back(raw.size());
  if (!kvtier::codec::split16_decode(stored, back).ok() || back != raw) __builtin_trap();
  for (size_t i = 1 + payload; i + 2 < size; i += 3) {
    const size_t at = (size_t{data[i]} << 8 | data[i + 1]) % stored.size();
    stored[at] ^= std::byte{data[i + 2]};
  }
  seal(stored);
  decode(stored);
  return 0;
}
