// SPDX-License-Identifier: Apache-2.0
// SPDX-FileCopyrightText: 2026 kvtier authors
#include "store/index_log.hpp"

#include <fcntl.h>
#define XXH_STATIC_LINKING_ONLY  // XXH3_state_t on the stack
#include <xxhash.h>

#include <algorithm>
#include <cstring>
#include <unordered_map>

#include <fmt/format.h>

#include "api/try.hpp"

namespace kvtier {
namespace {

constexpr uint32_t kEntryMagic = 0x454a564b;  // "KVJE" little-endian
constexpr char kCheckpointMagic[8] = {'K', 'V', 'T', 'C', 'K', 'P', 'T', '1'};
// Version 2 appends the segment-use table; version 1 (records only) is still read.
constexpr uint32_t kCheckpointVersion = 2;
// A damaged entry followed by fewer bytes than one entry is a torn tail, not corruption.
constexpr size_t kMaxEntryBytes = 16 + sizeof(RecordMeta);

struct EntryHeader {
  uint32_t magic;
  uint16_t op;
  uint16_t body_bytes;
  uint64_t checksum;  // XXH3-64 of op, body_bytes and the body.
};
static_assert(sizeof(EntryHeader) == 16);

struct CheckpointHeader {
  char magic[8];
  uint32_t format_version;
  uint32_t record_bytes;
  uint64_t count;
  uint64_t checksum;  // XXH3-64 of the 24 header bytes before it, then the record array.
};
static_assert(sizeof(CheckpointHeader) == 32);

// One row of a version 2 checkpoint's segment-use table.
struct UseRow {
  uint32_t segment;
  uint32_t reserved;  // zero
  uint64_t use;
};
static_assert(sizeof(UseRow) == 16);

uint64_t checkpoint_checksum(const CheckpointHeader& h, const void* body, size_t bytes) {
  XXH3_state_t s;
  XXH3_64bits_reset(&s);
  XXH3_64bits_update(&s, &h, offsetof(CheckpointHeader, checksum));
  XXH3_64bits_update(&s, body, bytes);
  return XXH3_64bits_digest(&s);
}

template <typename T>
void append_pod(std::string& out, const T& value) {
  out.append(reinterpret_cast<const char*>(&value), sizeof(value));
}

// The segment-use table after the records of a version 2 image; false when its size or a
// reserved field says the image is not one.
bool decode_use_table(std::span<const std::byte> table, std::vector<SegmentUse>& uses) {
  uint64_t rows = 0;
  if (table.size() < sizeof(rows)) return false;
  std::memcpy(&rows, table.data(), sizeof(rows));
  table = table.subspan(sizeof(rows));
  if (rows != table.size() / sizeof(UseRow) || table.size() % sizeof(UseRow) != 0) return false;
  for (uint64_t i = 0; i < rows; ++i) {
    UseRow row;
    std::memcpy(&row, table.data() + i * sizeof(UseRow), sizeof(row));
    if (row.reserved != 0) return false;
    uses.push_back({row.segment, row.use});
  }
  return true;
}

uint64_t entry_checksum(uint16_t op, uint16_t body_bytes, const void* body) {
  XXH3_state_t s;
  XXH3_64bits_reset(&s);
  XXH3_64bits_update(&s, &op, sizeof(op));
  XXH3_64bits_update(&s, &body_bytes, sizeof(body_bytes));
  XXH3_64bits_update(&s, body, body_bytes);
  return XXH3_64bits_digest(&s);
}

/// The segment a journal entry names.
uint32_t segment_of(const JournalEntry& e) {
  return e.op == JournalOp::kAdd ? e.meta.segment : e.segment;
}

void apply(const JournalEntry& e, std::unordered_map<Key128, RecordMeta, Key128Hash>& live,
           LoadedIndex& out) {
  out.journal_max_segment_id = std::max(out.journal_max_segment_id, segment_of(e));
  out.max_segment_id = std::max(out.max_segment_id, out.journal_max_segment_id);
  switch (e.op) {
    case JournalOp::kAdd:
      live[e.meta.key] = e.meta;
      return;
    case JournalOp::kDropRecord:
      live.erase(e.meta.key);
      return;
    case JournalOp::kDropSegment:
      std::erase_if(live, [&](const auto& kv) { return kv.second.segment == e.segment; });
      out.dropped_segments.push_back(e.segment);
      out.segment_uses.erase(e.segment);
      return;
    case JournalOp::kUse: {
      uint64_t& use = out.segment_uses[e.segment];
      use = std::max(use, e.use);
      return;
    }
  }
}

}  // namespace

uint64_t journal_entry_bytes(JournalOp op) {
  switch (op) {
    case JournalOp::kAdd:
      return sizeof(EntryHeader) + sizeof(RecordMeta);
    case JournalOp::kDropRecord:
      return sizeof(EntryHeader) + sizeof(Key128);
    case JournalOp::kDropSegment:
      return sizeof(EntryHeader) + sizeof(uint32_t);
    case JournalOp::kUse:
      return sizeof(EntryHeader) + sizeof(uint32_t) + sizeof(uint64_t);
  }
  return sizeof(EntryHeader) + sizeof(RecordMeta);
}

void encode_journal_entry(const JournalEntry& entry, std::string& out) {
  std::byte body[sizeof(RecordMeta)];
  uint16_t body_bytes = 0;
  switch (entry.op) {
    case JournalOp::kAdd:
      std::memcpy(body, &entry.meta, sizeof(RecordMeta));
      body_bytes = sizeof(RecordMeta);
      break;
    case JournalOp::kDropRecord:
      std::memcpy(body, &entry.meta.key, sizeof(Key128));
      body_bytes = sizeof(Key128);
      break;
    case JournalOp::kDropSegment:
      std::memcpy(body, &entry.segment, sizeof(uint32_t));
      body_bytes = sizeof(uint32_t);
      break;
    case JournalOp::kUse:
      std::memcpy(body, &entry.segment, sizeof(uint32_t));
      std::memcpy(body + sizeof(uint32_t), &entry.use, sizeof(uint64_t));
      body_bytes = sizeof(uint32_t) + sizeof(uint64_t);
      break;
  }
  EntryHeader h{kEntryMagic, static_cast<uint16_t>(entry.op), body_bytes, 0};
  h.checksum = entry_checksum(h.op, body_bytes, body);
  out.append(reinterpret_cast<const char*>(&h), sizeof(h));
  out.append(reinterpret_cast<const char*>(body), body_bytes);
}

size_t decode_journal_entry(std::span<const std::byte> data, JournalEntry& entry) {
  EntryHeader h;
  if (data.size() < sizeof(h)) return 0;
  std::memcpy(&h, data.data(), sizeof(h));
  if (h.magic != kEntryMagic || data.size() < sizeof(h) + h.body_bytes) return 0;
  const std::byte* body = data.data() + sizeof(h);
  if (h.checksum != entry_checksum(h.op, h.body_bytes, body)) return 0;
  entry = JournalEntry{};
  switch (static_cast<JournalOp>(h.op)) {
    case JournalOp::kAdd:
      if (h.body_bytes != sizeof(RecordMeta)) return 0;
      std::memcpy(&entry.meta, body, sizeof(RecordMeta));
      break;
    case JournalOp::kDropRecord:
      if (h.body_bytes != sizeof(Key128)) return 0;
      std::memcpy(&entry.meta.key, body, sizeof(Key128));
      break;
    case JournalOp::kDropSegment:
      if (h.body_bytes != sizeof(uint32_t)) return 0;
      std::memcpy(&entry.segment, body, sizeof(uint32_t));
      break;
    case JournalOp::kUse:
      if (h.body_bytes != sizeof(uint32_t) + sizeof(uint64_t)) return 0;
      std::memcpy(&entry.segment, body, sizeof(uint32_t));
      std::memcpy(&entry.use, body + sizeof(uint32_t), sizeof(uint64_t));
      break;
    default:
      return 0;
  }
  entry.op = static_cast<JournalOp>(h.op);
  return sizeof(h) + h.body_bytes;
}

std::string encode_checkpoint(const CheckpointImage& image) {
  CheckpointHeader h{};
  std::memcpy(h.magic, kCheckpointMagic, sizeof(h.magic));
  h.format_version = image.version;
  h.record_bytes = sizeof(RecordMeta);
  h.count = image.records.size();
  std::string body(reinterpret_cast<const char*>(image.records.data()),
                   image.records.size() * sizeof(RecordMeta));
  if (image.version >= 2) {
    append_pod(body, static_cast<uint64_t>(image.uses.size()));
    for (const SegmentUse& u : image.uses) append_pod(body, UseRow{u.segment, 0, u.use});
  }
  h.checksum = checkpoint_checksum(h, body.data(), body.size());
  std::string out(reinterpret_cast<const char*>(&h), sizeof(h));
  return out + body;
}

std::string encode_checkpoint(std::span<const RecordMeta> live, std::span<const SegmentUse> uses) {
  CheckpointImage image{kCheckpointVersion, {live.begin(), live.end()}, {uses.begin(), uses.end()}};
  return encode_checkpoint(image);
}

Result<CheckpointImage> decode_checkpoint(std::span<const std::byte> image) {
  CheckpointHeader h;
  if (image.size() < sizeof(h)) return fail(ErrorCode::kCorrupt, "index checkpoint truncated");
  std::memcpy(&h, image.data(), sizeof(h));
  if (std::memcmp(h.magic, kCheckpointMagic, sizeof(h.magic)) != 0) {
    return fail(ErrorCode::kCorrupt, "index checkpoint has a bad magic");
  }
  const std::span<const std::byte> body = image.subspan(sizeof(h));
  if (h.record_bytes != sizeof(RecordMeta) || h.count > body.size() / sizeof(RecordMeta)) {
    return fail(ErrorCode::kCorrupt, "index checkpoint size does not match its record count");
  }
  // The checksum comes before any field is trusted, the version included.
  if (checkpoint_checksum(h, body.data(), body.size()) != h.checksum) {
    return fail(ErrorCode::kCorrupt, "index checkpoint checksum mismatch");
  }
  if (h.format_version != 1 && h.format_version != kCheckpointVersion) {
    return fail(ErrorCode::kFormatVersion,
                fmt::format("index checkpoint format version {} (this build reads 1 and {})",
                            h.format_version, kCheckpointVersion));
  }
  CheckpointImage out;
  out.version = h.format_version;
  const size_t record_bytes = h.count * sizeof(RecordMeta);
  const std::span<const std::byte> rest = body.subspan(record_bytes);
  const bool sized = out.version == 1 ? rest.empty() : decode_use_table(rest, out.uses);
  if (!sized) {
    return fail(ErrorCode::kCorrupt, "index checkpoint size does not match its record count");
  }
  out.records.resize(h.count);
  // An empty store has no records (and data() may be null).
  if (record_bytes > 0) std::memcpy(out.records.data(), body.data(), record_bytes);
  return out;
}

Result<LoadedIndex> IndexLog::load(const std::string& dir, FileSystem& fs) {
  LoadedIndex out;
  std::unordered_map<Key128, RecordMeta, Key128Hash> live;
  auto journal = read_file(fs, fmt::format("{}/{}", dir, kJournalName));
  if (!journal && journal.error().code() != ErrorCode::kNotFound) return fail(journal.error());
  std::span<const std::byte> bytes =
      journal ? std::as_bytes(std::span(*journal)) : std::span<const std::byte>();
  out.journal_file_bytes = bytes.size();
  out.journal_found = journal.has_value();
  auto ckpt = read_file(fs, fmt::format("{}/{}", dir, kCheckpointName));
  if (ckpt) {
    out.checkpoint_found = true;
    auto image = decode_checkpoint(std::as_bytes(std::span(*ckpt)));
    if (!image && image.error().code() == ErrorCode::kFormatVersion) return fail(image.error());
    if (!image) {
      out.needs_rebuild = true;
      out.problem = image.error().message();
      // The rebuild finds the segment files only; the ids the journal names still bound the next
      // one handed out (a segment dropped since the checkpoint may be gone from disk).
      JournalEntry entry;
      for (size_t pos = 0, n; pos < bytes.size(); pos += n) {
        if ((n = decode_journal_entry(bytes.subspan(pos), entry)) == 0) break;
        out.max_segment_id = std::max(out.max_segment_id, segment_of(entry));
      }
      return out;
    }
    for (const RecordMeta& m : image->records) {
      live[m.key] = m;
      out.max_segment_id = std::max(out.max_segment_id, m.segment);
    }
    for (const SegmentUse& u : image->uses) {
      out.segment_uses[u.segment] = u.use;
      out.max_segment_id = std::max(out.max_segment_id, u.segment);
    }
  } else if (ckpt.error().code() != ErrorCode::kNotFound) {
    return fail(ckpt.error());
  }
  size_t pos = 0;
  JournalEntry entry;
  while (pos < bytes.size()) {
    size_t n = decode_journal_entry(bytes.subspan(pos), entry);
    if (n == 0) break;
    apply(entry, live, out);
    pos += n;
  }
  out.journal_valid_bytes = pos;
  if (bytes.size() - pos > kMaxEntryBytes) {
    out.needs_rebuild = true;
    out.problem = fmt::format("index journal damaged at byte {} of {}", pos, bytes.size());
  }
  out.records.reserve(live.size());
  for (auto& [key, meta] : live) out.records.push_back(meta);
  return out;
}

Result<IndexLog> IndexLog::open(const std::string& dir, uint64_t valid_bytes, FileSystem& fs) {
  KVTIER_ASSIGN_OR_RETURN(std::unique_ptr<File> file,
                          fs.open(fmt::format("{}/{}", dir, kJournalName), O_RDWR | O_CREAT));
  KVTIER_TRY(file->truncate(valid_bytes));
  return IndexLog(fs, dir, std::move(file), valid_bytes);
}

Status IndexLog::append(std::span<const JournalEntry> entries) {
  if (entries.empty()) return {};
  if (!stuck_.ok()) return stuck_;
  std::string image;
  for (const JournalEntry& e : entries) encode_journal_entry(e, image);
  Status st = file_->write_at(std::as_bytes(std::span(image)), journal_bytes_);
  if (st.ok()) st = file_->sync();
  if (st.ok()) {
    journal_bytes_ += image.size();
    return {};
  }
  // The entries that did land whole would be replayed at the next load: part of a save that
  // was reported failed would become visible after a restart.
  // Synced too: the cut must outlast a crash that the failed sync's bytes may yet reach the disk
  // in.
  Status cut = file_->truncate(journal_bytes_);
  if (cut.ok()) cut = file_->sync();
  if (!cut.ok()) {
    stuck_ =
        cut.with_context("cutting the index journal back after a failed append")
            .with_context(fmt::format("{} (after: {}); reopen the store", dir_, st.to_string()));
  }
  return st;
}

Status IndexLog::checkpoint(std::span<const RecordMeta> live, std::span<const SegmentUse> uses) {
  std::string image = encode_checkpoint(live, uses);
  KVTIER_TRY(write_file_atomic(*fs_, dir_, kCheckpointName, std::as_bytes(std::span(image))));
  // Replaying entries already in the checkpoint is harmless (every op is idempotent), so a crash
  // between the rename above and this truncate loses nothing.
  KVTIER_TRY(file_->truncate(0));
  KVTIER_TRY(file_->sync());
  journal_bytes_ = 0;
  stuck_ = {};
  return {};
}

}  // namespace kvtier
