// SPDX-License-Identifier: Apache-2.0
// SPDX-FileCopyrightText: 2026 kvtier authors
#include "store/record_format.hpp"
#include "store/record_v2.hpp"

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

TEST(RecordFormat, AHeadGroupsShapeWritesAndReadsFormatTwoHeaders) {
  // Group 3 of 4 of a model: one head of the rank's geometry.
  KvGeometry g = testing::tiny_geometry();
  g.kv_heads = 1;
  g.tp_rank = 3;
  g.tp_world = 4;
  const RecordShape two{g, kFormatVersion2};
  std::vector<std::byte> block(kBlock);
  encode_header(sample_meta(g), two, Key128{5, 6}, block);
  EXPECT_EQ(std::memcmp(block.data(), "KVTREC02", 8), 0);
  RecordMeta out;
  ASSERT_OK(decode_header(block, two, out));
  EXPECT_EQ(out.key, (Key128{1, 2}));
  EXPECT_EQ(out.token_count, 100u);
  EXPECT_EQ(out.payload_bytes, g.bytes_for_tokens(100));
  EXPECT_EQ(out.payload_checksum, 0x1234u);
  EXPECT_EQ(out.sequence, 9u);
  // The same header read as format 1, or as another group, is refused.
  EXPECT_FALSE(decode_header(block, g, out).ok());
  KvGeometry other = g;
  other.tp_rank = 2;
  EXPECT_EQ(decode_header(block, RecordShape{other, kFormatVersion2}, out).code(),
            ErrorCode::kGeometryMismatch);
  // A format-1 record where format 2 is expected: the version, not corruption.
  encode_header(sample_meta(g), g, Key128{5, 6}, block);
  EXPECT_EQ(decode_header(block, two, out).code(), ErrorCode::kFormatVersion);
}

TEST(RecordFormat, ACodedFormatTwoRecordStatesWhatItStoresAndAnUnknownCodecIsNotServed) {
  KvGeometry g = testing::tiny_geometry();
  Slice2 slice;
  slice.layers = g.layers;
  slice.group = 0;
  slice.groups = 1;
  slice.heads = g.kv_heads;
  slice.head_dim = g.head_dim;
  slice.element_bytes = g.element_bytes;
  slice.chunk_tokens = g.chunk_tokens;
  const RecordShape shape{g, kFormatVersion2};
  // The index's meta of a coded record: its stored bytes, fewer than its raw ones.
  RecordMeta coded;
  coded.key = {1, 2};
  coded.token_count = 100;
  coded.payload_bytes = g.bytes_for_tokens(100) * 3 / 4;
  coded.payload_checksum = 99;
  ASSERT_TRUE(is_coded(coded, shape));
  std::vector<std::byte> block(kBlock);
  encode_header(coded, shape, Key128{5, 6}, block);
  RecordMeta2 header;
  ASSERT_TRUE(decode_header2(block, slice, header).ok());
  EXPECT_EQ(header.codec, Codec::kSplit16);
  EXPECT_EQ(header.raw_bytes, g.bytes_for_tokens(100));
  EXPECT_EQ(header.stored_bytes, coded.payload_bytes);
  RecordMeta back;
  ASSERT_TRUE(decode_header(block, shape, back).ok());
  EXPECT_EQ(back.payload_bytes, coded.payload_bytes);
  EXPECT_EQ(back.payload_checksum, 99u);
  EXPECT_TRUE(payload_size_fits(shape, 100, coded.payload_bytes));
  EXPECT_FALSE(payload_size_fits(shape, 100, g.bytes_for_tokens(100) + 1));
  EXPECT_FALSE(payload_size_fits(shape, 100, 0));
  EXPECT_FALSE(payload_size_fits(shape, 100, g.bytes_for_tokens(100) / 2))
      << "a split16 stream keeps a byte of every word: half the raw bytes is a truncated one";
  EXPECT_FALSE(payload_size_fits(RecordShape{g}, 100, coded.payload_bytes))
      << "format 1 stores every record raw";
  // A codec this build does not decode is refused, not served as raw bytes.
  RecordMeta2 m;
  m.key = {1, 2};
  m.token_count = 100;
  m.codec = Codec::kNvcompAns;
  m.raw_bytes = g.bytes_for_tokens(100);
  m.stored_bytes = m.raw_bytes / 2;
  m.codec_header_checksum = 77;
  encode_header2(m, slice, Key128{5, 6}, block);
  EXPECT_EQ(decode_header(block, shape, back).code(), ErrorCode::kNotSupported);
}

}  // namespace kvtier
