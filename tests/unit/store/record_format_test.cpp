// SPDX-License-Identifier: Apache-2.0
// SPDX-FileCopyrightText: 2026 kvtier authors
#include "store/record_format.hpp"

#include <gtest/gtest.h>

#include <cstring>
#include <vector>

#include "test_util.hpp"

#include <xxhash.h>

namespace kvtier {
namespace {

RecordMeta sample_meta(const KvGeometry& g) {
  RecordMeta m;
  m.key = {1, 2};
  m.parent = {3, 4};
  m.token_count = 100;
  m.payload_bytes = g.bytes_for_tokens(100);
  m.payload_checksum = 0x1234;
  m.sequence = 9;
  return m;
}

TEST(RecordFormat, HeaderRoundTrips) {
  auto g = testing::tiny_geometry();
  std::vector<std::byte> block(kBlock);
  encode_header(sample_meta(g), g, Key128{5, 6}, block);
  RecordMeta out;
  ASSERT_OK(decode_header(block, g, out));
  EXPECT_EQ(out.key, (Key128{1, 2}));
  EXPECT_EQ(out.parent, (Key128{3, 4}));
  EXPECT_EQ(out.token_count, 100u);
  EXPECT_EQ(out.payload_checksum, 0x1234u);
  EXPECT_EQ(out.sequence, 9u);
  EXPECT_EQ(std::memcmp(block.data(), "KVTREC01", 8), 0);
}

TEST(RecordFormat, AnyFlippedBitInTheHeaderIsCorrupt) {
  auto g = testing::tiny_geometry();
  std::vector<std::byte> block(kBlock);
  encode_header(sample_meta(g), g, Key128{5, 6}, block);
  for (size_t bit = 0; bit < sizeof(RecordHeader) * 8; ++bit) {
    block[bit / 8] ^= std::byte{1} << (bit % 8);
    RecordMeta out;
    Status st = decode_header(block, g, out);
    ASSERT_FALSE(st.ok()) << "bit " << bit;
    block[bit / 8] ^= std::byte{1} << (bit % 8);
  }
}

TEST(RecordFormat, OtherGeometryOrVersionIsRefused) {
  auto g = testing::tiny_geometry();
  std::vector<std::byte> block(kBlock);
  encode_header(sample_meta(g), g, Key128{5, 6}, block);
  RecordMeta out;
  EXPECT_EQ(decode_header(block, testing::tiny_geometry(256, 1, 2), out).code(),
            ErrorCode::kGeometryMismatch);
  // Rewrite the version and re-seal the header checksum: a well-formed header of another version.
  RecordHeader h;
  std::memcpy(&h, block.data(), sizeof(h));
  h.format_version = 2;
  h.header_checksum = XXH3_64bits(&h, offsetof(RecordHeader, header_checksum));
  std::memcpy(block.data(), &h, sizeof(h));
  EXPECT_EQ(decode_header(block, g, out).code(), ErrorCode::kFormatVersion);
}

TEST(RecordFormat, RecordsAreBlockAligned) {
  RecordMeta m;
  m.offset = 8192;
  m.payload_bytes = 1;
  EXPECT_EQ(m.record_bytes(), 2 * kBlock);
  EXPECT_EQ(m.end(), 4 * kBlock);
  m.payload_bytes = kBlock;
  EXPECT_EQ(m.record_bytes(), 2 * kBlock);
}

}  // namespace
}  // namespace kvtier
