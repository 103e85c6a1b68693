// SPDX-License-Identifier: Apache-2.0
// SPDX-FileCopyrightText: 2026 kvtier authors
// The store's parts on their own: the directory's lock and manifest, the capacity budget, the
// record index.
#include <gtest/gtest.h>

#include "store/capacity.hpp"
#include "store/directory.hpp"
#include "store/record_index.hpp"
#include "test_util.hpp"

namespace kvtier {
namespace {

constexpr uint64_t kMiB = uint64_t{1} << 20;

TEST(StoreDirectory, SecondWriterIsRefusedAndASnapshotTakesNoLock) {
  testing::TempDir dir;
  Logger log(LogSink{}, LogLevel::kOff);
  auto first = StoreDirectory::open(*FileSystem::posix(), dir.str(), false, log);
  ASSERT_OK(first);
  EXPECT_FALSE(first->read_only());
  auto second = StoreDirectory::open(*FileSystem::posix(), dir.str(), false, log);
  ASSERT_FALSE(second.has_value());
  EXPECT_EQ(second.error().code(), ErrorCode::kLocked) << second.error().to_string();
  auto snapshot = StoreDirectory::open(*FileSystem::posix(), dir.str(), true, log);
  ASSERT_OK(snapshot);
  EXPECT_TRUE(snapshot->read_only());
  EXPECT_EQ(snapshot->refuse_read_only().code(), ErrorCode::kPermission);
}

TEST(StoreDirectory, ManifestReadsBackWhatWasWritten) {
  testing::TempDir dir;
  Logger log(LogSink{}, LogLevel::kOff);
  auto d = StoreDirectory::open(*FileSystem::posix(), dir.str(), false, log);
  ASSERT_OK(d);
  auto none = d->read_manifest();
  ASSERT_OK(none);
  EXPECT_FALSE(none->has_value());
  const Manifest m{testing::tiny_geometry(), kFormatVersion, 16 * kMiB, 256 * kMiB};
  ASSERT_OK(d->write_manifest(m));
  auto back = d->read_manifest();
  ASSERT_OK(back);
  ASSERT_TRUE(back->has_value());
  EXPECT_TRUE((*back)->geometry == m.geometry);
  EXPECT_EQ((*back)->segment_bytes, m.segment_bytes);
  EXPECT_EQ((*back)->capacity_bytes, m.capacity_bytes);
}

TEST(CapacityBudget, CapacityTooSmallForOneSegmentIsRefusedAndChangesNothing) {
  CapacityBudget b;
  ASSERT_OK(b.resize(64 * kMiB, 16 * kMiB, 4096, 0, "dir"));
  const uint64_t floor = b.journal_floor();
  Status refused = b.resize(16 * kMiB, 16 * kMiB, 4096, 0, "dir");
  EXPECT_EQ(refused.code(), ErrorCode::kInvalidArgument) << refused.to_string();
  EXPECT_EQ(b.capacity(), 64 * kMiB);
  EXPECT_EQ(b.journal_floor(), floor);
  // What the index files may take grows with the records they hold, and a journal longer than its
  // budget is counted as it is.
  EXPECT_LT(b.index_bytes(0, 1, 0), b.index_bytes(100000, 1, 0));
  EXPECT_LT(b.index_bytes(0, 1, 0), b.index_bytes(0, 1, 64 * kMiB));
  EXPECT_TRUE(b.note_segment(b.segment_estimate() + 4096));
  EXPECT_FALSE(b.note_segment(4096));
}

TEST(RecordIndex, PartialsAndOfflineCopiesFollowAddsAndRemoves) {
  RecordIndex index(16);
  RecordMeta full{{1, 1}, {0, 0}, 1, 16};
  RecordMeta partial{{2, 2}, {1, 1}, 1, 5};
  RecordMeta offline{{3, 3}, {0, 0}, 9, 16};
  index.add(full);
  index.add(partial);
  index.add_offline(offline);
  EXPECT_TRUE(index.contains(full.key));
  EXPECT_FALSE(index.contains(offline.key));
  EXPECT_TRUE(index.offline(offline.key));
  EXPECT_EQ(index.all(), 3u);
  ASSERT_EQ(index.partial_children({1, 1}).size(), 1u);
  index.remove(partial);
  EXPECT_TRUE(index.partial_children({1, 1}).empty());
  // Stored again on a drive that is here: the copy on the missing drive is older and goes.
  offline.segment = 2;
  index.add(offline);
  EXPECT_FALSE(index.offline(offline.key));
  EXPECT_EQ(index.find(offline.key)->segment, 2u);
  EXPECT_EQ(index.live().size(), 2u);
}

}  // namespace
}  // namespace kvtier
