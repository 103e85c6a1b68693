// SPDX-License-Identifier: Apache-2.0
// SPDX-FileCopyrightText: 2026 kvtier authors
// Redis Cluster key routing: CRC16 (XMODEM) of the key, or of its hash tag, modulo 16384.
#pragma once

#include <cstdint>
#include <string_view>

namespace kvtier::remote {

inline constexpr uint32_t kSlotCount = 16384;

/// CRC16-CCITT as XMODEM computes it (poly 0x1021, init 0, no reflection): the Redis Cluster
/// specification's key hash. crc16("123456789") == 0x31C3.
[[nodiscard]] uint16_t crc16_xmodem(std::string_view bytes);

/// The part of a key that is hashed: the text between the first '{' and the next '}' when that
/// text is non-empty, else the whole key (the specification's hash-tag rule).
[[nodiscard]] std::string_view hash_tag(std::string_view key);

/// Hash slot (0..16383) that owns `key`.
[[nodiscard]] uint16_t key_slot(std::string_view key);

}  // namespace kvtier::remote
