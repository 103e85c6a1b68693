// SPDX-License-Identifier: Apache-2.0
// SPDX-FileCopyrightText: 2026 kvtier authors
#include "datapath/drive_lanes.hpp"

#include <algorithm>
#include <map>
#include <mutex>
#include <set>
#include <thread>
#include <unordered_map>

namespace kvtier {
namespace {

/// One drive group's view of the read: its pieces and slots renumbered to the whole read's.
class LaneSink final : public PieceSink {
 public:
  LaneSink(PieceSink& sink, std::span<const size_t> global, size_t slot_base)
      : sink_(sink), global_(global), base_(slot_base) {}
  Status consume(size_t index, size_t slot, std::span<const std::byte> data) override {
    return sink_.consume(global_[index], base_ + slot, data);
  }
  Status release(size_t slot) override { return sink_.release(base_ + slot); }
  void account(const SlotTimes& times) override { sink_.account(times); }

 private:
  PieceSink& sink_;
  std::span<const size_t> global_;
  size_t base_;
};

/// The lease's yields, serialized: every group's I/O thread may hand slots back.
class LaneYield final : public SlotYield {
 public:
  LaneYield(StagingPool::Lease& lease, std::mutex& mu, size_t slot_base)
      : lease_(lease), mu_(mu), base_(slot_base) {}
  bool should_yield() const override {
    std::lock_guard lock(mu_);
    return lease_.should_yield();
  }
  void yield(size_t slot) override {
    std::lock_guard lock(mu_);
    lease_.yield(base_ + slot);
  }

 private:
  StagingPool::Lease& lease_;
  std::mutex& mu_;
  size_t base_;
};

struct Lane {
  std::vector<Piece> pieces;
  std::vector<size_t> global;  // index of each piece in the whole read
  size_t slot_base = 0;
  size_t slots = 0;
  Status status;
};

}  // namespace

size_t drives_of(std::span<const ChannelFile> files) {
  std::set<uint32_t> drives;
  for (const ChannelFile& f : files) drives.insert(f.drive);
  return drives.size();
}

Status read_across_drives(std::span<const ChannelFile> files, std::span<const Piece> pieces,
                          StagingPool::Lease& lease, PieceSink& sink, unsigned workers,
                          const EngineMaker& make_engine) {
  std::unordered_map<int, uint32_t> drive_of_fd;
  std::map<uint32_t, size_t> lane_of_drive;
  for (const ChannelFile& f : files) {
    drive_of_fd[f.fd] = f.drive;
    lane_of_drive.emplace(f.drive, 0);
  }
  const size_t slots = lease.slots().size();
  const size_t lanes = std::max<size_t>(1, std::min(lane_of_drive.size(), slots));
  size_t k = 0;
  for (auto& [drive, lane] : lane_of_drive) lane = k++ % lanes;
  std::vector<Lane> lane(lanes);
  for (size_t i = 0; i < lanes; ++i) {
    lane[i].slot_base = i * slots / lanes;
    lane[i].slots = (i + 1) * slots / lanes - lane[i].slot_base;
  }
  for (size_t p = 0; p < pieces.size(); ++p) {
    Lane& l = lane[lane_of_drive.at(drive_of_fd.at(pieces[p].fd))];
    l.pieces.push_back(pieces[p]);
    l.global.push_back(p);
  }
  std::mutex yield_mu;
  // Each lane its share of the workers by its share of the slots (rounded up, one at least): a
  // read that asks one worker a slot gets one for every slot of every lane.
  auto lane_workers = [&](const Lane& l) -> unsigned {
    if (workers == 0) return 0;
    return static_cast<unsigned>(std::max<size_t>(1, (workers * l.slots + slots - 1) / slots));
  };
  auto run = [&](Lane& l) {
    if (l.pieces.empty()) return;
    LaneSink lane_sink(sink, l.global, l.slot_base);
    LaneYield lane_yield(lease, yield_mu, l.slot_base);
    const FixedBuffers slots = lease.slots().subspan(l.slot_base, l.slots);
    auto io = make_engine(slots, l.pieces.size());
    l.status = run_pipeline(*io, l.pieces, slots,
                            /*write=*/false, lane_sink, lane_workers(l), &lane_yield);
  };
  std::vector<std::thread> threads;
  for (size_t i = 1; i < lanes; ++i) threads.emplace_back(run, std::ref(lane[i]));
  run(lane[0]);
  for (std::thread& t : threads) t.join();
  for (const Lane& l : lane) {
    if (!l.status.ok()) return l.status;
  }
  return {};
}

}  // namespace kvtier
