// SPDX-License-Identifier: Apache-2.0
// SPDX-FileCopyrightText: 2026 kvtier authors
#include "store/index_log.hpp"

#include <gtest/gtest.h>
#include <sys/resource.h>

#include <csignal>
#include <fstream>

#include "test_util.hpp"

namespace kvtier {
namespace {

RecordMeta meta(uint64_t k, uint32_t segment, uint64_t offset) {
  RecordMeta m;
  m.key = {k, k};
  m.segment = segment;
  m.offset = offset;
  m.token_count = 1;
  m.payload_bytes = 1024;
  m.sequence = k;
  return m;
}

void append_raw(const std::string& path, const std::string& bytes) {
  std::ofstream(path, std::ios::app | std::ios::binary) << bytes;
}

TEST(IndexLog, JournalReplaysAddsAndDrops) {
  testing::TempDir dir;
  auto log = IndexLog::open(dir.str(), 0);
  ASSERT_OK(log);
  std::vector<JournalEntry> entries = {{JournalOp::kAdd, meta(1, 1, 0), 0},
                                       {JournalOp::kAdd, meta(2, 1, 8192), 0},
                                       {JournalOp::kAdd, meta(3, 2, 0), 0},
                                       {JournalOp::kDropRecord, meta(1, 0, 0), 0},
                                       {JournalOp::kDropSegment, {}, 2}};
  ASSERT_OK(log->append(entries));
  auto loaded = IndexLog::load(dir.str());
  ASSERT_OK(loaded);
  EXPECT_FALSE(loaded->needs_rebuild);
  ASSERT_EQ(loaded->records.size(), 1u);
  EXPECT_EQ(loaded->records[0].key, (Key128{2, 2}));
  EXPECT_EQ(loaded->dropped_segments, std::vector<uint32_t>{2});
}

TEST(IndexLog, TornLastEntryIsCutNotFatal) {
  testing::TempDir dir;
  auto log = IndexLog::open(dir.str(), 0);
  ASSERT_OK(log);
  JournalEntry e{JournalOp::kAdd, meta(1, 1, 0), 0};
  ASSERT_OK(log->append(std::span(&e, 1)));
  std::string second;
  encode_journal_entry({JournalOp::kAdd, meta(2, 1, 8192), 0}, second);
  append_raw(dir.str() + "/index.journal",
             second.substr(0, second.size() / 2));  // crash mid-append
  auto loaded = IndexLog::load(dir.str());
  ASSERT_OK(loaded);
  EXPECT_FALSE(loaded->needs_rebuild);
  EXPECT_EQ(loaded->records.size(), 1u);
  EXPECT_EQ(loaded->journal_valid_bytes, log->journal_bytes());
}

TEST(IndexLog, DamageBeforeTheTailAsksForARebuild) {
  testing::TempDir dir;
  auto log = IndexLog::open(dir.str(), 0);
  ASSERT_OK(log);
  std::vector<JournalEntry> entries;
  for (uint64_t k = 1; k <= 5; ++k) entries.push_back({JournalOp::kAdd, meta(k, 1, k * 8192), 0});
  ASSERT_OK(log->append(entries));
  {
    std::fstream f(dir.str() + "/index.journal", std::ios::in | std::ios::out | std::ios::binary);
    f.seekp(40);
    f.put('\xff');
  }
  auto loaded = IndexLog::load(dir.str());
  ASSERT_OK(loaded);
  EXPECT_TRUE(loaded->needs_rebuild);
  EXPECT_NE(loaded->problem.find("journal damaged"), std::string::npos);
}

TEST(IndexLog, CheckpointReplacesJournalAndSurvivesReload) {
  testing::TempDir dir;
  auto log = IndexLog::open(dir.str(), 0);
  ASSERT_OK(log);
  std::vector<RecordMeta> live = {meta(7, 3, 0), meta(8, 3, 8192)};
  ASSERT_OK(log->checkpoint(live));
  EXPECT_EQ(log->journal_bytes(), 0u);
  JournalEntry e{JournalOp::kAdd, meta(9, 3, 16384), 0};
  ASSERT_OK(log->append(std::span(&e, 1)));
  auto loaded = IndexLog::load(dir.str());
  ASSERT_OK(loaded);
  EXPECT_EQ(loaded->records.size(), 3u);
}

TEST(IndexLog, CorruptCheckpointAsksForARebuild) {
  testing::TempDir dir;
  auto log = IndexLog::open(dir.str(), 0);
  ASSERT_OK(log);
  std::vector<RecordMeta> live = {meta(7, 3, 0)};
  ASSERT_OK(log->checkpoint(live));
  {
    std::fstream f(dir.str() + "/index.ckpt", std::ios::in | std::ios::out | std::ios::binary);
    f.seekp(50);
    f.put('\x01');
  }
  auto loaded = IndexLog::load(dir.str());
  ASSERT_OK(loaded);
  EXPECT_TRUE(loaded->needs_rebuild);
}

TEST(IndexLog, DecodeRejectsEveryTruncation) {
  std::string image;
  encode_journal_entry({JournalOp::kAdd, meta(1, 1, 0), 0}, image);
  JournalEntry out;
  for (size_t n = 0; n < image.size(); ++n) {
    EXPECT_EQ(decode_journal_entry(std::as_bytes(std::span(image.data(), n)), out), 0u) << n;
  }
  EXPECT_EQ(decode_journal_entry(std::as_bytes(std::span(image)), out), image.size());
}

// A disk that fills during an append: the write stops part way through the batch (here at the
// file-size limit, EFBIG, which cuts a write short exactly as ENOSPC does, and needs no mount).
// The entries of the failed batch that did land whole must not come back at the next load: the
// save they belong to was reported failed.
TEST(IndexLog, AppendCutShortLeavesNoneOfItsEntries) {
  testing::TempDir dir;
  auto log = IndexLog::open(dir.str(), 0);
  ASSERT_OK(log);
  const JournalEntry first{JournalOp::kAdd, meta(1, 1, 0), 0};
  ASSERT_OK(log->append(std::span(&first, 1)));
  const uint64_t entry = journal_entry_bytes(JournalOp::kAdd);
  std::vector<JournalEntry> batch;
  for (uint64_t k = 2; k < 6; ++k) batch.push_back({JournalOp::kAdd, meta(k, 1, k * 8192), 0});
  {
    // Room for two and a half entries of the four: two land whole, the third is torn.
    rlimit was{};
    ASSERT_EQ(::getrlimit(RLIMIT_FSIZE, &was), 0);
    auto* handler = std::signal(SIGXFSZ, SIG_IGN);
    rlimit low = was;
    low.rlim_cur = entry * 3 + entry / 2;
    ASSERT_EQ(::setrlimit(RLIMIT_FSIZE, &low), 0);
    const Status st = log->append(batch);
    ::setrlimit(RLIMIT_FSIZE, &was);
    std::signal(SIGXFSZ, handler);
    ASSERT_FALSE(st.ok());
  }
  auto loaded = IndexLog::load(dir.str());
  ASSERT_OK(loaded);
  EXPECT_FALSE(loaded->needs_rebuild) << loaded->problem;
  ASSERT_EQ(loaded->records.size(), 1u) << "entries of a failed append came back";
  EXPECT_EQ(loaded->records[0].key, (Key128{1, 1}));
  // The journal goes on from where it was before the failed append.
  const JournalEntry next{JournalOp::kAdd, meta(9, 1, 9 * 8192), 0};
  ASSERT_OK(log->append(std::span(&next, 1)));
  loaded = IndexLog::load(dir.str());
  ASSERT_OK(loaded);
  EXPECT_FALSE(loaded->needs_rebuild) << loaded->problem;
  EXPECT_EQ(loaded->records.size(), 2u);
}

}  // namespace
}  // namespace kvtier
