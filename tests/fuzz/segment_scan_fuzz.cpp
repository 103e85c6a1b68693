// SPDX-License-Identifier: Apache-2.0
// SPDX-FileCopyrightText: 2026 kvtier authors
// libFuzzer target: segment recovery (scan_segment) over an arbitrary file. Every recovered record
// lies inside the file, 4 KiB-aligned, in order, without overlap.
#include <fcntl.h>

#include <cstddef>
#include <cstdint>
#include <string>

#include "store/segment.hpp"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace kvtier;
  static const KvGeometry g = *geometry_for("tiny", 0, 1, 1);  // 1 KiB chunks: small records
  static const std::string path = "/tmp/kvtier-fuzz-segment-" + std::to_string(::getpid());
  auto file = FileSystem::posix()->open(path, O_RDWR | O_CREAT | O_TRUNC, 0644);
  if (!file) return 0;
  SegmentFile seg;
  seg.id = 1;
  seg.path = path;
  seg.file = std::move(*file);
  seg.fd = RawFd(seg.file->fd());
  seg.size = size;
  if (!seg.file->write_at(std::as_bytes(std::span(data, size)), 0).ok()) return 0;
  auto found = scan_segment(seg, g);
  if (!found) return 0;
  uint64_t end = 0;
  for (const RecordMeta& m : *found) {
    if (m.offset < end || m.offset % kBlock != 0 || m.end() > size) __builtin_trap();
    end = m.end();
  }
  return 0;
}
