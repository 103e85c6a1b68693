// SPDX-License-Identifier: Apache-2.0
// SPDX-FileCopyrightText: 2026 kvtier authors
// libFuzzer target: arbitrary bytes as an index journal stream and as a checkpoint image. Decoding
// stops cleanly on anything damaged, and whatever decodes re-encodes to the same bytes.
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <string>

#include "store/index_log.hpp"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace kvtier;
  std::span<const std::byte> bytes(reinterpret_cast<const std::byte*>(data), size);
  size_t pos = 0;
  JournalEntry entry;
  while (pos < bytes.size()) {
    const size_t n = decode_journal_entry(bytes.subspan(pos), entry);
    if (n == 0) break;
    std::string again;
    encode_journal_entry(entry, again);
    if (again.size() != n || std::memcmp(again.data(), bytes.data() + pos, n) != 0)
      __builtin_trap();
    pos += n;
  }
  auto image = decode_checkpoint(bytes);
  if (image) {
    const std::string again = encode_checkpoint(*image);
    if (again.size() != size || std::memcmp(again.data(), data, size) != 0) __builtin_trap();
  }
  return 0;
}
