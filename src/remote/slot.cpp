// SPDX-License-Identifier: Apache-2.0
// SPDX-FileCopyrightText: 2026 kvtier authors
#include "remote/slot.hpp"

#include <array>

namespace kvtier::remote {
namespace {

constexpr std::array<uint16_t, 256> make_table() {
  std::array<uint16_t, 256> table{};
  for (uint32_t byte = 0; byte < 256; ++byte) {
    auto crc = static_cast<uint16_t>(byte << 8);
    for (int bit = 0; bit < 8; ++bit) {
      crc = (crc & 0x8000) ? static_cast<uint16_t>((crc << 1) ^ 0x1021)
                           : static_cast<uint16_t>(crc << 1);
    }
    table[byte] = crc;
  }
  return table;
}

constexpr auto kTable = make_table();

}  // namespace

uint16_t crc16_xmodem(std::string_view bytes) {
  uint16_t crc = 0;
  for (char c : bytes) {
    const auto index = static_cast<uint8_t>((crc >> 8) ^ static_cast<uint8_t>(c));
    crc = static_cast<uint16_t>((crc << 8) ^ kTable[index]);
  }
  return crc;
}

std::string_view hash_tag(std::string_view key) {
  const size_t open = key.find('{');
  if (open == std::string_view::npos) return key;
  const size_t close = key.find('}', open + 1);
  if (close == std::string_view::npos || close == open + 1) return key;
  return key.substr(open + 1, close - open - 1);
}

uint16_t key_slot(std::string_view key) {
  return static_cast<uint16_t>(crc16_xmodem(hash_tag(key)) % kSlotCount);
}

}  // namespace kvtier::remote
