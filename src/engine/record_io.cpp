// SPDX-License-Identifier: Apache-2.0
// SPDX-FileCopyrightText: 2026 kvtier authors
#include "engine/record_io.hpp"

#include <algorithm>
#include <cassert>
#include <map>

#include "engine/record_codec.hpp"

namespace kvtier {

IoPlan plan_io(std::span<const RecordMeta> records, std::span<const int> fds, uint64_t max_piece) {
  IoPlan plan;
  size_t r = 0;
  while (r < records.size()) {
    size_t last = r + 1;
    while (last < records.size() && fds[last] == fds[r] &&
           records[last].offset == records[last - 1].end()) {
      ++last;
    }
    const uint64_t begin = records[r].offset;
    const uint64_t length = records[last - 1].end() - begin;
    const size_t first_piece = plan.pieces.size();
    split_into_pieces(fds[r], begin, length, max_piece, plan.pieces);
    size_t first = r;
    for (size_t p = first_piece; p < plan.pieces.size(); ++p) {
      const uint64_t piece_end = plan.pieces[p].offset + plan.pieces[p].length;
      while (records[first].end() <= plan.pieces[p].offset) ++first;
      size_t stop = first;
      while (stop < last && records[stop].offset < piece_end) ++stop;
      plan.piece_records.emplace_back(first, stop);
    }
    ++plan.extents;
    plan.bytes += length;
    r = last;
  }
  return plan;
}

IoPlan plan_images(std::span<RecordMeta> records, uint64_t max_piece) {
  IoPlan plan;
  for (size_t r = 0; r < records.size(); ++r) {
    records[r].offset = 0;
    const uint64_t length = kBlock + records[r].payload_bytes;
    const size_t first_piece = plan.pieces.size();
    split_into_pieces(static_cast<int>(r), 0, length, max_piece, plan.pieces);
    for (size_t p = first_piece; p < plan.pieces.size(); ++p)
      plan.piece_records.emplace_back(r, r + 1);
    ++plan.extents;
    plan.bytes += length;
  }
  return plan;
}

std::vector<std::vector<size_t>> spread_runs(std::span<const uint32_t> group,
                                             std::span<const uint64_t> bytes, uint64_t bound) {
  assert(group.size() == bytes.size());
  const size_t n = bytes.size();
  // Each item's place in its group, as a fraction of the group: items at the same fraction of
  // every group are read together.
  std::map<uint32_t, size_t> count;
  for (size_t i = 0; i < n; ++i) ++count[group[i]];
  std::map<uint32_t, size_t> seen;
  std::vector<std::pair<double, size_t>> keyed(n);
  for (size_t i = 0; i < n; ++i) {
    const double at = static_cast<double>(seen[group[i]]++) + 0.5;
    keyed[i] = {at / static_cast<double>(count[group[i]]), i};
  }
  std::stable_sort(keyed.begin(), keyed.end(),
                   [](const auto& a, const auto& b) { return a.first < b.first; });
  std::vector<std::vector<size_t>> runs;
  for (size_t first = 0; first < n;) {
    const size_t end =
        staging_run_end(first, n, bound, [&](size_t k) { return bytes[keyed[k].second]; });
    std::vector<size_t>& run = runs.emplace_back();
    for (size_t k = first; k < end; ++k) run.push_back(keyed[k].second);
    // Item positions grow within a group: sorting by (group, position) keeps each group's order.
    std::sort(run.begin(), run.end(), [&](size_t a, size_t b) {
      return group[a] != group[b] ? group[a] < group[b] : a < b;
    });
    first = end;
  }
  return runs;
}

}  // namespace kvtier
