// SPDX-License-Identifier: Apache-2.0
// SPDX-FileCopyrightText: 2026 kvtier authors
// Format 2's record header: drawn slices and records round-trip exactly; any flipped bit is
// refused; a header whose checksum was made to match again after a field changed is refused for
// what changed (another slice, sizes that disagree, an unknown kind or codec, another version).
#include "store/record_v2.hpp"

#include <gtest/gtest.h>

#include <cstring>
#include <random>
#include <vector>

#include <xxhash.h>

#include "test_util.hpp"

namespace kvtier {
namespace {

Slice2 draw_slice(std::mt19937_64& rng) {
  Slice2 s;
  s.kind = static_cast<RecordKind>(1 + rng() % 3);
  s.layers = 1 + rng() % 96;
  s.groups = 1u << (rng() % 4);
  s.group = static_cast<uint32_t>(rng() % s.groups);
  s.heads = 1 + rng() % 16;
  s.head_dim = 32u << (rng() % 4);
  s.element_bytes = 1u << (rng() % 3);
  s.kv_tensors = 1 + rng() % 2;
  s.chunk_tokens = 16u << (rng() % 6);
  s.state_bytes = s.kind == RecordKind::kState ? 1 + rng() % (64u << 20) : 0;
  return s;
}

RecordMeta2 draw_meta(std::mt19937_64& rng, const Slice2& s) {
  RecordMeta2 m;
  m.key = {rng(), rng()};
  m.parent = {rng(), rng()};
  m.token_count = 1 + static_cast<uint32_t>(rng() % s.chunk_tokens);
  m.raw_bytes = s.raw_bytes(m.token_count);
  m.codec = static_cast<Codec>(rng() % 3);
  if (m.codec == Codec::kRaw || m.raw_bytes < 2) {
    m.codec = Codec::kRaw;
    m.stored_bytes = m.raw_bytes;
  } else {
    m.stored_bytes = 1 + rng() % (m.raw_bytes - 1);
    m.codec_header_checksum = rng();
  }
  m.payload_checksum = rng();
  m.sequence = rng();
  return m;
}

bool same(const RecordMeta2& a, const RecordMeta2& b) {
  return a.key == b.key && a.parent == b.parent && a.token_count == b.token_count &&
         a.codec == b.codec && a.raw_bytes == b.raw_bytes && a.stored_bytes == b.stored_bytes &&
         a.payload_checksum == b.payload_checksum &&
         a.codec_header_checksum == b.codec_header_checksum && a.sequence == b.sequence;
}

/// The header of `block`, changed by `edit`, with its checksum made to match again.
std::vector<std::byte> tampered(std::vector<std::byte> block,
                                const std::function<void(RecordHeader2&)>& edit) {
  RecordHeader2 h;
  std::memcpy(&h, block.data(), sizeof(h));
  edit(h);
  h.header_checksum = XXH3_64bits(&h, offsetof(RecordHeader2, header_checksum));
  std::memcpy(block.data(), &h, sizeof(h));
  return block;
}

TEST(RecordV2, DrawnSlicesAndRecordsRoundTrip) {
  std::mt19937_64 rng(testing::test_seed());
  std::vector<std::byte> block(kBlock);
  for (int trial = 0; trial < 5000; ++trial) {
    const Slice2 s = draw_slice(rng);
    ASSERT_TRUE(testing::is_ok(s.validate()));
    const RecordMeta2 m = draw_meta(rng, s);
    const Key128 ns{rng(), rng()};
    std::fill(block.begin(), block.end(), std::byte{0xa5});
    encode_header2(m, s, ns, block);
    for (size_t i = sizeof(RecordHeader2); i < kBlock; ++i) ASSERT_EQ(block[i], std::byte{0});
    RecordMeta2 got;
    ASSERT_TRUE(testing::is_ok(decode_header2(block, s, got))) << "trial " << trial;
    EXPECT_TRUE(same(got, m)) << "trial " << trial;
    EXPECT_EQ(got.record_bytes(), kBlock + align_up(m.stored_bytes));
  }
}

TEST(RecordV2, EveryFlippedBitIsRefused) {
  std::mt19937_64 rng(testing::test_seed() + 1);
  for (int trial = 0; trial < 4; ++trial) {
    const Slice2 s = draw_slice(rng);
    const RecordMeta2 m = draw_meta(rng, s);
    std::vector<std::byte> block(kBlock);
    encode_header2(m, s, {1, 2}, block);
    for (size_t bit = 0; bit < 8 * sizeof(RecordHeader2); ++bit) {
      std::vector<std::byte> bad = block;
      bad[bit / 8] ^= std::byte(1u << (bit % 8));
      RecordMeta2 got;
      EXPECT_FALSE(decode_header2(bad, s, got).ok()) << "bit " << bit;
    }
  }
}

TEST(RecordV2, ARechecksummedChangeIsRefusedForWhatChanged) {
  Slice2 s;
  s.layers = 48;
  s.groups = 4;
  s.group = 1;
  s.heads = 1;
  s.head_dim = 128;
  s.element_bytes = 2;
  s.chunk_tokens = 256;
  ASSERT_TRUE(testing::is_ok(s.validate()));
  RecordMeta2 m;
  m.token_count = 200;
  m.raw_bytes = s.raw_bytes(200);
  m.stored_bytes = m.raw_bytes;
  std::vector<std::byte> block(kBlock);
  encode_header2(m, s, {}, block);
  RecordMeta2 got;
  ASSERT_TRUE(testing::is_ok(decode_header2(block, s, got)));
  auto code = [&](const std::function<void(RecordHeader2&)>& edit) {
    return decode_header2(tampered(block, edit), s, got).code();
  };
  EXPECT_EQ(code([](RecordHeader2& h) { h.group = 2; }), ErrorCode::kGeometryMismatch);
  EXPECT_EQ(code([](RecordHeader2& h) { h.groups = 8; }), ErrorCode::kGeometryMismatch);
  EXPECT_EQ(code([](RecordHeader2& h) { h.kv_tensors = 1; }), ErrorCode::kGeometryMismatch);
  EXPECT_EQ(code([](RecordHeader2& h) { h.kind = 2; }), ErrorCode::kGeometryMismatch);
  EXPECT_EQ(code([](RecordHeader2& h) { h.kind = 4; }), ErrorCode::kCorrupt);
  EXPECT_EQ(code([](RecordHeader2& h) { h.codec = 3; }), ErrorCode::kCorrupt);
  EXPECT_EQ(code([](RecordHeader2& h) { h.token_count = 0; }), ErrorCode::kCorrupt);
  EXPECT_EQ(code([](RecordHeader2& h) { h.token_count = 257; }), ErrorCode::kCorrupt);
  EXPECT_EQ(code([](RecordHeader2& h) { h.raw_bytes += 2; }), ErrorCode::kCorrupt);
  EXPECT_EQ(code([](RecordHeader2& h) { h.stored_bytes -= 4096; }), ErrorCode::kCorrupt);
  EXPECT_EQ(code([](RecordHeader2& h) { h.codec_header_checksum = 7; }), ErrorCode::kCorrupt);
  EXPECT_EQ(code([](RecordHeader2& h) { h.codec = 1; }), ErrorCode::kCorrupt);  // stored == raw
  EXPECT_EQ(code([](RecordHeader2& h) {
              h.codec = 1;
              h.stored_bytes = h.raw_bytes / 2;
            }),
            ErrorCode::kOk);  // a compressed record smaller than raw
  EXPECT_EQ(code([](RecordHeader2& h) {
              h.codec = 1;
              h.stored_bytes = 0;
            }),
            ErrorCode::kCorrupt);
  EXPECT_EQ(code([](RecordHeader2& h) { h.format_version = 3; }), ErrorCode::kFormatVersion);
  EXPECT_EQ(code([](RecordHeader2& h) { h.header_bytes = 8192; }), ErrorCode::kCorrupt);
  EXPECT_EQ(code([](RecordHeader2& h) { h.zero = 1; }), ErrorCode::kCorrupt);
  // A format-1 record is not read as format 2.
  KvGeometry g = *geometry_for("tiny", 0, 1, 256);
  RecordMeta v1;
  v1.token_count = 10;
  v1.payload_bytes = g.bytes_for_tokens(10);
  std::vector<std::byte> old(kBlock);
  encode_header(v1, g, {}, old);
  EXPECT_EQ(decode_header2(old, s, got).code(), ErrorCode::kFormatVersion);
  EXPECT_EQ(decode_header2(std::span(block).first(100), s, got).code(), ErrorCode::kCorrupt);
}

TEST(RecordV2, SlicesAStoreCannotHoldAreRefused) {
  Slice2 ok;
  ok.layers = 4;
  ok.heads = 2;
  ok.head_dim = 64;
  ok.element_bytes = 2;
  ok.chunk_tokens = 256;
  ASSERT_TRUE(testing::is_ok(ok.validate()));
  auto bad = [&](const std::function<void(Slice2&)>& edit) {
    Slice2 s = ok;
    edit(s);
    return s.validate().code();
  };
  EXPECT_EQ(bad([](Slice2& s) { s.group = 1; }), ErrorCode::kInvalidArgument);
  EXPECT_EQ(bad([](Slice2& s) { s.groups = 0; }), ErrorCode::kInvalidArgument);
  EXPECT_EQ(bad([](Slice2& s) { s.layers = 0; }), ErrorCode::kInvalidArgument);
  EXPECT_EQ(bad([](Slice2& s) { s.kv_tensors = 3; }), ErrorCode::kInvalidArgument);
  EXPECT_EQ(bad([](Slice2& s) { s.chunk_tokens = 0; }), ErrorCode::kInvalidArgument);
  EXPECT_EQ(bad([](Slice2& s) { s.kind = static_cast<RecordKind>(0); }),
            ErrorCode::kInvalidArgument);
  EXPECT_EQ(bad([](Slice2& s) { s.kind = RecordKind::kState; }), ErrorCode::kInvalidArgument);
  EXPECT_EQ(bad([](Slice2& s) {
              s.layers = s.heads = s.head_dim = 1u << 31;
              s.element_bytes = 8;
            }),
            ErrorCode::kInvalidArgument);  // a chunk's bytes overflow
}

}  // namespace
}  // namespace kvtier
