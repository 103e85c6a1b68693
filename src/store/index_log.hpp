// SPDX-License-Identifier: Apache-2.0
// SPDX-FileCopyrightText: 2026 kvtier authors
// The persistent index: a checkpoint of all live records plus a journal of changes since.
// Byte layout in docs/format.md ("Index").
#pragma once

#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <unordered_map>
#include <vector>

#include "common/file_system.hpp"
#include "store/record_format.hpp"

namespace kvtier {

enum class JournalOp : uint16_t { kAdd = 1, kDropRecord = 2, kDropSegment = 3, kUse = 4 };

struct JournalEntry {
  JournalOp op = JournalOp::kAdd;
  RecordMeta meta;       ///< kAdd: the record. kDropRecord: meta.key is the record.
  uint32_t segment = 0;  ///< kDropSegment, kUse: the segment.
  uint64_t use = 0;      ///< kUse: when the segment was last used, on the store's sequence clock.
};

/// When a segment was last used, on the clock record sequences come from (a write is a use).
struct SegmentUse {
  uint32_t segment = 0;
  uint64_t use = 0;
};

/// What a checkpoint file holds.
struct CheckpointImage {
  uint32_t version = 0;  ///< 1: records only; 2: records and segment uses.
  std::vector<RecordMeta> records;
  std::vector<SegmentUse> uses;  ///< Empty in version 1.
};

/// What load() recovered.
struct LoadedIndex {
  std::vector<RecordMeta> records;
  std::vector<uint32_t> dropped_segments;  ///< Segments the journal dropped (files may linger).
  /// Last use of each segment the index recorded one for (checkpoint table, then kUse entries).
  std::unordered_map<uint32_t, uint64_t> segment_uses;
  /// Highest segment id any entry names, dropped segments included: new segments go above it.
  uint32_t max_segment_id = 0;
  uint32_t journal_max_segment_id = 0;  ///< The same, of the journal's entries alone.
  bool needs_rebuild = false;           ///< Checkpoint or journal damaged: rescan segments.
  bool checkpoint_found = false;        ///< An index checkpoint file exists (intact or not).
  bool journal_found = false;           ///< An index journal file exists (empty or not).
  std::string problem;                  ///< Why, when needs_rebuild.
  uint64_t journal_valid_bytes = 0;     ///< End of the last valid journal entry.
  uint64_t journal_file_bytes = 0;      ///< Size of the journal file.
};

/// @brief Owner of the journal file; every file operation goes through `fs`, which must outlive it.
/// Not thread-safe: the store calls it under its lock.
class IndexLog {
 public:
  static constexpr const char* kJournalName = "index.journal";
  static constexpr const char* kCheckpointName = "index.ckpt";

  /// Reads checkpoint and journal. A torn last journal entry (a crash mid-append) is expected and
  /// cut; damage anywhere else sets needs_rebuild.
  [[nodiscard]] static Result<LoadedIndex> load(const std::string& dir,
                                                FileSystem& fs = *FileSystem::posix());

  /// Opens the journal for appending at `valid_bytes` (truncating what lies past it).
  [[nodiscard]] static Result<IndexLog> open(const std::string& dir, uint64_t valid_bytes,
                                             FileSystem& fs = *FileSystem::posix());

  /// Appends the entries and makes them durable (fdatasync) before returning. All or none: a
  /// failed append (a full disk part way, an I/O error) cuts the journal back to where it was, so
  /// none of its entries is replayed at the next load. When even that fails, every later append
  /// is refused until a checkpoint empties the journal (entries written after the cut would sit
  /// behind damage, and be lost with it).
  [[nodiscard]] Status append(std::span<const JournalEntry> entries);

  /// Writes a checkpoint of `live` and `uses` atomically, then empties the journal.
  [[nodiscard]] Status checkpoint(std::span<const RecordMeta> live,
                                  std::span<const SegmentUse> uses = {});

  [[nodiscard]] uint64_t journal_bytes() const { return journal_bytes_; }

 private:
  IndexLog(FileSystem& fs, std::string dir, std::unique_ptr<File> file, uint64_t bytes)
      : fs_(&fs), dir_(std::move(dir)), file_(std::move(file)), journal_bytes_(bytes) {}

  FileSystem* fs_;
  std::string dir_;
  std::unique_ptr<File> file_;
  uint64_t journal_bytes_ = 0;
  Status stuck_;  // why appends are refused; ok while they are not
};

/// Size of a checkpoint image holding `records` records and `segments` segment uses.
constexpr uint64_t checkpoint_image_bytes(uint64_t records, uint64_t segments) {
  return 32 + records * sizeof(RecordMeta) + 8 + segments * 16;
}
/// Size of one encoded journal entry of `op`.
uint64_t journal_entry_bytes(JournalOp op);

/// Encodes one journal entry (header + body) onto `out`.
void encode_journal_entry(const JournalEntry& entry, std::string& out);
/// Decodes the entry at `data`; returns its encoded size, or 0 when the bytes there are not a
/// complete, valid entry.
size_t decode_journal_entry(std::span<const std::byte> data, JournalEntry& entry);
/// Encodes a checkpoint file image of the current version (2).
std::string encode_checkpoint(std::span<const RecordMeta> live, std::span<const SegmentUse> uses);
/// Encodes `image` in its own version (version 1 drops `uses`).
std::string encode_checkpoint(const CheckpointImage& image);
/// Decodes a checkpoint image of version 1 or 2; kCorrupt when damaged, kFormatVersion for others.
[[nodiscard]] Result<CheckpointImage> decode_checkpoint(std::span<const std::byte> image);

}  // namespace kvtier
