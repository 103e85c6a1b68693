// SPDX-License-Identifier: Apache-2.0
// SPDX-FileCopyrightText: 2026 kvtier authors
// libFuzzer target: segment recovery (scan_segment) over an arbitrary file. Every recovered record
// lies inside the file, 4 KiB-aligned, in order, without overlap.
#include <fcntl.h>
#include <unistd.h>

#include <cstddef>
#include <cstdint>
#include <string>

#include "store/segment.hpp"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace kvtier;
  static const KvGeometry g = *geometry_for("tiny", 0, 1, 1);  // 1 KiB chunks: small records
  static const std::string path = "/tmp/kvtier-fuzz-segment-" + std::to_string(::getpid());
  int fd = ::open(path.c_str(), O_RDWR | O_CREAT | O_TRUNC, 0644);
  if (fd < 0) return 0;
  SegmentFile seg;
  seg.id = 1;
  seg.path = path;
  seg.fd = UniqueFd(fd);
  seg.size = size;
  if (::write(fd, data, size) != static_cast<ssize_t>(size)) return 0;
  auto found = scan_segment(seg, g);
  if (!found) return 0;
  uint64_t end = 0;
  for (const RecordMeta& m : *found) {
    if (m.offset < end || m.offset % kBlock != 0 || m.end() > size) __builtin_trap();
    end = m.end();
  }
  return 0;
}
