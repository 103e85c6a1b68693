// SPDX-License-Identifier: Apache-2.0
// SPDX-FileCopyrightText: 2026 kvtier authors
// Segment recency in the index: kUse journal entries and the checkpoint's segment-use table.
#include <gtest/gtest.h>

#include <fstream>

#include "store/index_log.hpp"
#include "test_util.hpp"

namespace kvtier {
namespace {

RecordMeta meta(uint64_t k, uint32_t segment) {
  RecordMeta m;
  m.key = {k, k};
  m.segment = segment;
  m.offset = k * 8192;
  m.token_count = 1;
  m.payload_bytes = 1024;
  m.sequence = k;
  return m;
}

TEST(IndexRecency, CheckpointKeepsSegmentUsesAcrossReload) {
  testing::TempDir dir;
  auto log = IndexLog::open(dir.str(), 0);
  ASSERT_OK(log);
  std::vector<RecordMeta> live = {meta(1, 3), meta(2, 4)};
  std::vector<SegmentUse> uses = {{3, 90}, {4, 17}};
  ASSERT_OK(log->checkpoint(live, uses));
  auto loaded = IndexLog::load(dir.str());
  ASSERT_OK(loaded);
  EXPECT_FALSE(loaded->needs_rebuild);
  EXPECT_EQ(loaded->records.size(), 2u);
  EXPECT_EQ(loaded->segment_uses, (std::unordered_map<uint32_t, uint64_t>{{3, 90}, {4, 17}}));
}

TEST(IndexRecency, UseEntriesReplayLatestFirstAndADropForgetsThem) {
  testing::TempDir dir;
  auto log = IndexLog::open(dir.str(), 0);
  ASSERT_OK(log);
  ASSERT_OK(log->checkpoint(std::vector<RecordMeta>{meta(1, 3), meta(2, 4)},
                            std::vector<SegmentUse>{{3, 10}}));
  std::vector<JournalEntry> entries = {{JournalOp::kUse, {}, 3, 50},
                                       {JournalOp::kUse, {}, 3, 40},  // never moves a use back
                                       {JournalOp::kUse, {}, 4, 60},
                                       {JournalOp::kDropSegment, {}, 4, 0}};
  ASSERT_OK(log->append(entries));
  auto loaded = IndexLog::load(dir.str());
  ASSERT_OK(loaded);
  EXPECT_EQ(loaded->segment_uses, (std::unordered_map<uint32_t, uint64_t>{{3, 50}}));
  EXPECT_EQ(loaded->records.size(), 1u);
}

TEST(IndexRecency, VersionOneCheckpointIsStillRead) {
  testing::TempDir dir;
  CheckpointImage v1{1, {meta(1, 3), meta(2, 3)}, {}};
  const std::string image = encode_checkpoint(v1);
  EXPECT_EQ(image.size(), 32u + 2 * sizeof(RecordMeta));  // the version 1 layout: no table
  std::ofstream(dir.str() + "/index.ckpt", std::ios::binary) << image;
  auto loaded = IndexLog::load(dir.str());
  ASSERT_OK(loaded);
  EXPECT_FALSE(loaded->needs_rebuild);
  EXPECT_EQ(loaded->records.size(), 2u);
  EXPECT_TRUE(loaded->segment_uses.empty());
}

TEST(IndexRecency, CheckpointImagesRoundTripAndAnyDamageIsCorrupt) {
  std::vector<RecordMeta> live = {meta(5, 1)};
  std::vector<SegmentUse> uses = {{1, 7}, {2, 9}};
  const std::string image = encode_checkpoint(live, uses);
  auto decoded = decode_checkpoint(std::as_bytes(std::span(image)));
  ASSERT_OK(decoded);
  EXPECT_EQ(decoded->version, 2u);
  ASSERT_EQ(decoded->uses.size(), 2u);
  EXPECT_EQ(decoded->uses[1].use, 9u);
  EXPECT_EQ(encode_checkpoint(*decoded), image);
  for (size_t at = 0; at < image.size(); ++at) {
    std::string bad = image;
    bad[at] = static_cast<char>(bad[at] ^ 0x04);
    auto r = decode_checkpoint(std::as_bytes(std::span(bad)));
    EXPECT_FALSE(r.has_value()) << "flip at " << at;
  }
  for (size_t n = 0; n < image.size(); ++n) {
    EXPECT_FALSE(decode_checkpoint(std::as_bytes(std::span(image.data(), n))).has_value()) << n;
  }
}

TEST(IndexRecency, UseEntryDecodesOnlyWhole) {
  std::string image;
  encode_journal_entry({JournalOp::kUse, {}, 12, 34}, image);
  JournalEntry out;
  for (size_t n = 0; n < image.size(); ++n) {
    EXPECT_EQ(decode_journal_entry(std::as_bytes(std::span(image.data(), n)), out), 0u) << n;
  }
  ASSERT_EQ(decode_journal_entry(std::as_bytes(std::span(image)), out), image.size());
  EXPECT_EQ(out.op, JournalOp::kUse);
  EXPECT_EQ(out.segment, 12u);
  EXPECT_EQ(out.use, 34u);
}

}  // namespace
}  // namespace kvtier
