// SPDX-License-Identifier: Apache-2.0
// SPDX-FileCopyrightText: 2026 kvtier authors
// Reading over several drives: every piece once, and each drive's lane with as many consumer
// threads as it has slots when the read asks one a slot, however unevenly the slots divide.
#include "datapath/drive_lanes.hpp"

#include <fcntl.h>
#include <gtest/gtest.h>

#include <chrono>
#include <cstring>
#include <map>
#include <mutex>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "common/posix.hpp"
#include "test_util.hpp"

namespace kvtier {
namespace {

// Each consumed slot's "device copy" takes 60 ms, waited for in release(): how many of a drive's
// slots wait at once shows how many consumers its lane has.
class CopyingSink final : public PieceSink {
 public:
  CopyingSink(std::span<const Piece> pieces, std::map<int, uint32_t> drive_of_fd)
      : pieces_(pieces), drive_of_fd_(std::move(drive_of_fd)) {}
  Status consume(size_t index, size_t slot, std::span<const std::byte> data) override {
    std::lock_guard lock(mu_);
    const uint32_t drive = drive_of_fd_.at(pieces_[index].fd);
    slots_of_drive[drive].insert(slot);
    drive_of_slot_[slot] = drive;
    copying_[slot] = true;
    ++consumed[index];
    // Each piece's bytes start with its offset (the file was written so).
    if (data.size() < sizeof(uint64_t) ||
        std::memcmp(data.data(), &pieces_[index].offset, sizeof(uint64_t)) != 0) {
      ++wrong;
    }
    return {};
  }
  Status release(size_t slot) override {
    uint32_t drive = 0;
    {
      std::lock_guard lock(mu_);
      if (!copying_[slot]) return {};
      copying_[slot] = false;
      drive = drive_of_slot_.at(slot);
      most_at_once[drive] = std::max(most_at_once[drive], ++waiting_[drive]);
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(60));
    std::lock_guard lock(mu_);
    --waiting_[drive];
    return {};
  }
  std::map<uint32_t, std::set<size_t>> slots_of_drive;
  std::map<uint32_t, int> most_at_once;
  std::map<size_t, int> consumed;
  int wrong = 0;

 private:
  std::span<const Piece> pieces_;
  std::map<int, uint32_t> drive_of_fd_;
  std::mutex mu_;
  std::map<size_t, bool> copying_;
  std::map<size_t, uint32_t> drive_of_slot_;
  std::map<uint32_t, int> waiting_;
};

TEST(DriveLanes, EveryLaneGetsAConsumerForEachOfItsSlotsWhenTheReadAsksOneASlot) {
  testing::TempDir dir;
  constexpr uint32_t kPiece = 4096;
  constexpr int kDrives = 4;
  constexpr int kPiecesPerDrive = 12;
  std::vector<UniqueFd> fds;
  std::vector<ChannelFile> files;
  std::map<int, uint32_t> drive_of_fd;
  std::vector<Piece> pieces;
  for (int d = 0; d < kDrives; ++d) {
    auto fd = open_file(dir.str() + "/drive" + std::to_string(d), O_RDWR | O_CREAT);
    ASSERT_OK(fd);
    std::vector<std::byte> bytes(kPiecesPerDrive * kPiece);
    for (uint64_t p = 0; p < kPiecesPerDrive; ++p) {
      const uint64_t offset = p * kPiece;
      std::memcpy(bytes.data() + offset, &offset, sizeof(offset));
      pieces.push_back({fd->get(), offset, kPiece});
    }
    ASSERT_OK(pwrite_full(fd->get(), bytes, 0));
    drive_of_fd[fd->get()] = static_cast<uint32_t>(d);
    files.push_back({fd->get(), "drive" + std::to_string(d), static_cast<uint32_t>(d), nullptr});
    fds.push_back(std::move(*fd));
  }
  // Six slots over four drives: lanes of one and two slots.
  for (size_t slots : {size_t{6}, size_t{8}, size_t{11}}) {
    SCOPED_TRACE(::testing::Message() << slots << " slots");
    StagingPool pool(slots * kPiece, kPiece);
    StagingPool::Lease lease = pool.acquire(slots);
    ASSERT_EQ(lease.slots().size(), slots);
    CopyingSink sink(pieces, drive_of_fd);
    const EngineMaker engine = [](FixedBuffers, size_t) { return make_posix_engine(1); };
    ASSERT_OK(read_across_drives(files, pieces, lease, sink, static_cast<unsigned>(slots), engine));
    EXPECT_EQ(sink.wrong, 0);
    ASSERT_EQ(sink.consumed.size(), pieces.size());
    for (const auto& [index, n] : sink.consumed) EXPECT_EQ(n, 1) << "piece " << index;
    ASSERT_EQ(sink.slots_of_drive.size(), size_t{kDrives});
    for (const auto& [drive, used] : sink.slots_of_drive) {
      EXPECT_EQ(sink.most_at_once[drive], static_cast<int>(used.size()))
          << "drive " << drive << ": its " << used.size()
          << " slots' copies were not all waited for at once";
    }
  }
}

}  // namespace
}  // namespace kvtier
