// SPDX-License-Identifier: Apache-2.0
// SPDX-FileCopyrightText: 2026 kvtier authors
#include "store/segment.hpp"

#include <fcntl.h>

#include <algorithm>
#include <cerrno>
#include <cstring>

#include <fmt/format.h>

#include "api/try.hpp"
#include "common/aligned_buffer.hpp"

namespace kvtier {
namespace {

constexpr std::string_view kPrefix = "seg-";
constexpr std::string_view kSuffix = ".kvt";

int open_flags(bool direct, bool read_only = false) {
  return (read_only ? O_RDONLY : O_RDWR) | (direct ? O_DIRECT : 0);
}

}  // namespace

std::string segment_name(uint32_t id) { return fmt::format("seg-{:08d}.kvt", id); }

Result<std::shared_ptr<SegmentFile>> create_segment(FileSystem& fs, const std::string& dir,
                                                    uint32_t id, uint64_t size, bool direct) {
  auto seg = std::make_shared<SegmentFile>();
  seg->id = id;
  seg->path = fmt::format("{}/{}", dir, segment_name(id));
  seg->direct = direct;
  seg->size = size;
  KVTIER_ASSIGN_OR_RETURN(seg->file, fs.open(seg->path, open_flags(direct) | O_CREAT | O_EXCL));
  seg->fd = RawFd(seg->file->fd());
  // The directory entry is synced before any record goes in: a commit syncs the file's data only,
  // and a crash that lost the name would lose the records the journal says it holds.
  Status made = seg->file->allocate(size);
  if (made.ok()) made = fs.sync_dir(dir);
  if (!made.ok()) {
    static_cast<void>(fs.remove(seg->path));
    return fail(made);
  }
  return seg;
}

uint64_t expected_disk_bytes(uint64_t size) {
  // ext4 holds four extents in the inode, and an unwritten extent spans at most 128 MiB: a larger
  // preallocated file gets extent tree blocks (340 extents each), which st_blocks counts.
  constexpr uint64_t kUnwrittenExtent = uint64_t{128} << 20;
  const uint64_t extents = (size + kUnwrittenExtent - 1) / kUnwrittenExtent;
  return align_up(size) + (extents > 4 ? kBlock * (1 + extents / 340) : 0);
}

Result<std::shared_ptr<SegmentFile>> open_segment(FileSystem& fs, const std::string& dir,
                                                  uint32_t id, bool direct, bool read_only) {
  auto seg = std::make_shared<SegmentFile>();
  seg->id = id;
  seg->path = fmt::format("{}/{}", dir, segment_name(id));
  seg->direct = direct;
  KVTIER_ASSIGN_OR_RETURN(seg->file, fs.open(seg->path, open_flags(direct, read_only)));
  seg->fd = RawFd(seg->file->fd());
  KVTIER_ASSIGN_OR_RETURN(FileInfo info, seg->file->stat());
  seg->size = info.size;
  return seg;
}

Result<std::vector<uint32_t>> list_segments(const std::string& dir, FileSystem& fs) {
  KVTIER_ASSIGN_OR_RETURN(std::vector<std::string> names, fs.list_dir(dir));
  std::vector<uint32_t> ids;
  for (const std::string& entry : names) {
    const std::string_view name(entry);
    if (!name.starts_with(kPrefix) || !name.ends_with(kSuffix)) continue;
    std::string digits(name.substr(kPrefix.size(), name.size() - kPrefix.size() - kSuffix.size()));
    if (digits.empty() || digits.find_first_not_of("0123456789") != std::string::npos) continue;
    ids.push_back(static_cast<uint32_t>(std::stoul(digits)));
  }
  std::sort(ids.begin(), ids.end());
  return ids;
}

Result<std::vector<RecordMeta>> scan_segment(const SegmentFile& segment, const RecordShape& shape) {
  std::vector<RecordMeta> records;
  AlignedBuffer block(kBlock);
  uint64_t offset = 0;
  while (offset + kBlock <= segment.size) {
    Status read = segment.file->read_at(block.span(), offset);
    if (!read.ok()) break;  // A truncated tail ends the walk like an invalid header does.
    RecordMeta meta;
    if (!decode_header(block.span(), shape, meta).ok()) break;
    meta.segment = segment.id;
    meta.offset = offset;
    if (meta.end() > segment.size) break;
    records.push_back(meta);
    offset = meta.end();
  }
  return records;
}

bool probe_direct_io(FileSystem& fs, const std::string& dir, std::string& reason) {
  std::string path = dir + "/.direct-io-probe";
  auto file = fs.open(path, O_RDWR | O_CREAT | O_TRUNC | O_DIRECT);
  if (!file) {
    static_cast<void>(fs.remove(path));  // a filesystem may create the file before refusing
    reason = fmt::format("O_DIRECT refused by the filesystem of {} ({})", dir,
                         std::strerror(file.error().native_error()));
    return false;
  }
  AlignedBuffer block(kBlock);
  std::memset(block.data(), 0, kBlock);
  Status st = (*file)->write_at(block.span(), 0);
  if (st.ok()) st = (*file)->read_at(block.span(), 0);
  static_cast<void>(fs.remove(path));
  if (!st.ok()) {
    reason = fmt::format("O_DIRECT I/O failed on the filesystem of {} ({})", dir, st.to_string());
    return false;
  }
  return true;
}

bool probe_direct_read(FileSystem& fs, const std::string& dir, std::string& reason) {
  auto ids = list_segments(dir, fs);
  if (!ids || ids->empty()) {
    // No segment yet (a follower opened before its writer's first save): whether the filesystem
    // takes O_DIRECT at all is what an O_DIRECT open of the manifest tells.
    if (fs.open(dir + "/MANIFEST.json", O_RDONLY | O_DIRECT)) return true;
    reason = fmt::format(
        "no segment in read-only store {} to probe O_DIRECT reads on, and its "
        "manifest cannot be opened with O_DIRECT",
        dir);
    return false;
  }
  auto seg = open_segment(fs, dir, ids->front(), /*direct=*/true, /*read_only=*/true);
  if (!seg) {
    reason = fmt::format("O_DIRECT refused by the filesystem of {} ({})", dir,
                         std::strerror(seg.error().native_error()));
    return false;
  }
  AlignedBuffer block(kBlock);
  Status st = (*seg)->file->read_at(block.span(), 0);
  if (!st.ok()) {
    reason = fmt::format("O_DIRECT I/O failed on the filesystem of {} ({})", dir, st.to_string());
    return false;
  }
  return true;
}

}  // namespace kvtier
